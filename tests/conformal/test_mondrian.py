"""Mondrian (group-conditional) calibration: data-built groups fitted on a share the conformal
step never sees, and small groups given the whole scale (valid for each of them), or pooled
on request (valid for them together), never the marginal band (SPEC section 4).

The statistical tests check the Mondrian guarantee over many seeded resplits: coverage of
every group the item belongs to (and, for ``pool-together``, of the pooled group) and
marginal coverage >= 1 - alpha - 2.5 SE, with SE <= 0.006."""

import json
import warnings

import numpy as np
import pytest

from scoreband.conformal import (
    CQR,
    CRC,
    ClusterConservative,
    Mondrian,
    SplitConformal,
    load_calibrator,
    make_calibrator,
    save_calibrator,
)
from scoreband.conformal.mondrian import (
    DIFFICULTY_LABELS,
    SmallGroupWarning,
    group_share_size,
    pool_plan,
)
from scoreband.conformal.persist import content_checksum
from scoreband.datatypes import Predictions, Scale
from scoreband.errors import CalibratorMismatch, InputError
from scoreband.metrics import covered

TOL_SE = 2.5
MAX_SE = 0.006


class _Tally:
    """Covered / total per calibration group and per resplit; coverage of a group is the
    ratio over all resplits (the probability the guarantee is about), its SE the
    resplit-clustered SE of that ratio."""

    def __init__(self):
        self.per: dict[str, list[tuple[int, int]]] = {}
        self.marginal: list[float] = []
        self.reps = 0

    def add(self, cov: np.ndarray, band_groups: np.ndarray) -> None:
        self.reps += 1
        self.marginal.append(float(cov.mean()))
        for g in np.unique(band_groups):
            sel = band_groups == g
            self.per.setdefault(str(g), []).append((int(cov[sel].sum()), int(sel.sum())))

    def group(self, g: str) -> tuple[float, float]:
        c, n = np.array(self.per[g], dtype=float).T
        p = c.sum() / n.sum()
        # reps without the group add (0, 0): they count in the cluster variance's df
        r = self.reps
        se = np.sqrt(np.sum((c - p * n) ** 2) * r / (r - 1)) / n.sum()
        return float(p), float(se)

    def marginal_cov(self) -> tuple[float, float]:
        m = np.array(self.marginal)
        return float(m.mean()), float(m.std(ddof=1) / np.sqrt(len(m)))

    def check(self, alpha: float, groups) -> dict:
        out = {}
        for g in ["marginal", *groups]:
            p, se = self.marginal_cov() if g == "marginal" else self.group(g)
            out[g] = (round(p, 4), round(se, 4))
            assert se <= MAX_SE, f"{g}: SE {se:.4f} too large for the test to have power"
            assert p >= 1 - alpha - TOL_SE * se, (
                f"{g}: coverage {p:.4f} < 1 - alpha - {TOL_SE} SE = "
                f"{1 - alpha - TOL_SE * se:.4f} ({out})")
        return out


def _calibration_group(band) -> np.ndarray:
    """The group an item's band was calibrated in: its own, the pooled group, or none (the
    whole scale)."""
    g = np.asarray(band.group).astype(str)
    g = np.where(np.char.startswith(g, "pooled:"), "pooled", g)
    return np.where(band.full_range, "whole-scale", g)


# ------------------------------------------------------------------------- pure pieces
def test_pool_plan_pools_the_small_groups_with_the_borderline_ones():
    small, pool = pool_plan({"big": 50, "edge": 9, "one": 1, "two": 2, "none": 0}, 9)
    assert small == ["none", "one", "two"]
    assert pool == ["edge", "none", "one", "two"]
    assert pool_plan({"a": 10, "b": 20}, 9) == ([], [])


def test_group_share_size():
    assert group_share_size(13) == 3 and group_share_size(100) == 20
    assert group_share_size(10, floor=6) == 6
    assert group_share_size(10**7) == 2000
    with pytest.raises(InputError, match="at least one more"):
        group_share_size(3)


def test_small_group_names_only_the_policies():
    """'pool' and 'marginal' (names of earlier versions) are refused like any unknown name."""
    assert make_calibrator("split", 0.1, mondrian="given").small_group == "full"
    assert Mondrian(SplitConformal(0.1)).small_group == "full"
    for bad in ("nope", "pool", "marginal"):
        with pytest.raises(InputError, match=f"full, pool-together, error, got '{bad}'"):
            Mondrian(SplitConformal(0.1), small_group=bad)


# ------------------------------------------------------------------------- statistical
def _difficulty_data(rng, n):
    """Residuals growing with the base width (exponential widths)."""
    w = rng.exponential(0.08, n)
    m = rng.uniform(0.3, 0.7, n)
    y = np.clip(m + rng.normal(0, 1, n) * w / 2, 0, 1)
    return Predictions(m, lo=m - w / 2, hi=m + w / 2), y


@pytest.mark.statistical
def test_difficulty_groups_cover_every_group_at_13_items():
    """Split, alpha 0.2, 13 calibration items, 60 applied. With the tertiles fitted on the
    calibrated items themselves Medium covered 0.766 (marginal 0.792); with the small groups
    pooled (the former default, now ``pool-together``) the hard group covered 0.565: the
    pool's band is valid for the pool, not for its hardest group. Each difficulty group an
    item belongs to is covered now. The calibration rows are sorted by target: a share taken
    by row position would be a biased one."""
    alpha, n, n_test, reps = 0.2, 13, 60, 4000
    rng = np.random.default_rng(20)
    own = _Tally()
    for r in range(reps):
        p, y = _difficulty_data(rng, n + n_test)
        order = np.argsort(y[:n])
        test = p.take(np.arange(n, n + n_test))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = make_calibrator("split", alpha, mondrian="difficulty", seed=r)
            cal.fit(p.take(order), y[order])
            b = cal.predict(test)
        own.add(covered(b.lo01, b.hi01, y[n:]), cal.group_labels(test))
    own.check(alpha, DIFFICULTY_LABELS)
    assert cal.params_["group_share"] == {"from": "held-out", "n": 3, "frac": 0.2,
                                          "seed": reps - 1}


def _rare_groups_data(rng, n):
    """One easy group with 75 % of the items, five hard groups of 5 % each."""
    names = np.array(["easy", "r1", "r2", "r3", "r4", "r5"])
    gi = rng.choice(6, n, p=[0.75] + [0.05] * 5)
    m = rng.uniform(0.3, 0.7, n)
    y = np.clip(m + rng.normal(0, 1, n) * np.where(gi == 0, 0.03, 0.15), 0, 1)
    return Predictions(m), y, names[gi]


@pytest.mark.statistical
@pytest.mark.parametrize("alpha", [0.1, 0.2])
@pytest.mark.parametrize("policy", ["full", "pool-together"])
def test_rare_hard_groups_are_not_given_the_marginal_band(alpha, policy):
    """40 calibration items: the five hard groups have 0-6 items each (2 on average). The
    marginal band on them covered 0.625 / 0.418 and marginal coverage fell to 0.842 / 0.718
    (alpha 0.1 / 0.2). By default they get the whole scale; pooled on request, the hard
    groups are alike here, so each of them is covered in the pool too."""
    n, n_test, reps = 40, 200, 1000
    rng = np.random.default_rng(30 + int(alpha * 10))
    by_band, by_own = _Tally(), _Tally()
    pooled_any, easy_fallback = 0, False
    for r in range(reps):
        p, y, g = _rare_groups_data(rng, n + n_test)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = Mondrian(SplitConformal(alpha), small_group=policy, seed=r)
            cal.fit(p.take(np.arange(n)), y[:n], g[:n])
            b = cal.predict(p.take(np.arange(n, n + n_test)), g[n:])
        cov = covered(b.lo01, b.hi01, y[n:])
        by_band.add(cov, _calibration_group(b))
        by_own.add(cov, g[n:])
        pooled_any += cal.params_.get("pool") is not None
        easy_fallback |= bool(b.fallback[g[n:] == "easy"].any())
    by_own.check(alpha, ["easy", "r1", "r2", "r3", "r4", "r5"])
    assert not easy_fallback
    if policy == "pool-together":
        by_band.check(alpha, ["easy", "pooled"])
        assert pooled_any > reps / 2
    else:
        assert pooled_any == 0


@pytest.mark.statistical
@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_groups_of_one_to_three_items_keep_their_own_coverage(alpha):
    """13 calibration items: seven of an easy group and groups of 1, 2 and 3 items of which
    one is much harder (a selected subpopulation). Every group, the hard one included, is
    covered at >= 1 - alpha by default (the whole scale); pooled, the hard one is not."""
    sizes, n_test, reps = [7, 1, 2, 3], 30, 2000
    noise = np.array([0.02, 0.02, 0.3, 0.02])
    rng = np.random.default_rng(50 + int(alpha * 10))
    own, pooled = _Tally(), _Tally()
    for _ in range(reps):
        gi = np.r_[np.repeat(np.arange(4), sizes), rng.integers(0, 4, n_test)]
        m = rng.uniform(0.3, 0.7, len(gi))
        y = np.clip(m + rng.normal(0, 1, len(gi)) * noise[gi], 0, 1)
        g, n = np.char.add("g", gi.astype(str)), sum(sizes)
        test = Predictions(m[n:])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b = Mondrian(SplitConformal(alpha)).fit(Predictions(m[:n]), y[:n], g[:n]) \
                .predict(test, g[n:])
            bp = Mondrian(SplitConformal(alpha), small_group="pool-together") \
                .fit(Predictions(m[:n]), y[:n], g[:n]).predict(test, g[n:])
        own.add(covered(b.lo01, b.hi01, y[n:]), g[n:])
        pooled.add(covered(bp.lo01, bp.hi01, y[n:]), g[n:])
        assert b.full_range[g[n:] != "g0"].all() and b.fallback[g[n:] != "g0"].all()
    own.check(alpha, ["g0", "g1", "g2", "g3"])
    if alpha == 0.2:  # a pool of 6 >= 4 items (at alpha 0.1 it is too small: whole scale)
        assert pooled.group("g2")[0] < 1 - alpha - 0.1


@pytest.mark.statistical
def test_cluster_mondrian_at_30_items():
    """crc-cluster-mondrian, alpha 0.1, 30 calibration items, three clusters of 60 / 25 /
    15 % with growing residuals: marginal coverage was 0.872 (the small clusters got the
    marginal band: 0.750); the clusters are now fitted on a held-out share and the small ones
    given the whole scale."""
    import sklearn.cluster  # noqa: F401 - loaded first: the limit below applies to loaded libraries
    from threadpoolctl import threadpool_limits  # scikit-learn's own dependency

    alpha, n, n_test, reps = 0.1, 30, 300, 500
    rng = np.random.default_rng(40)
    t = _Tally()
    # one thread: k-means on a few points is 25x slower with the OpenMP pool
    with threadpool_limits(1):
        cal = _cluster_resplits(rng, t, alpha, n, n_test, reps)
    t.check(alpha, ["alone"])
    assert "whole-scale" in t.per and "pooled" not in t.per
    assert cal.params_["group_share"]["from"] == "held-out"


def _cluster_resplits(rng, t, alpha, n, n_test, reps):
    for r in range(reps):
        N = n + n_test
        ci = rng.choice(3, N, p=[0.6, 0.25, 0.15])
        emb = np.eye(3)[ci] * 2 + rng.normal(0, 0.7, (N, 3))
        m = rng.uniform(0.2, 0.8, N)
        y = np.clip(m + rng.normal(0, 1, N) * np.array([0.03, 0.1, 0.2])[ci], 0, 1)
        p = Predictions(m, lo=m - 0.05, hi=m + 0.05, embedding=emb)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = make_calibrator("crc-cluster-mondrian", alpha, n_clusters=3, seed=r)
            cal.fit(p.take(np.arange(n)), y[:n])
            b = cal.predict(p.take(np.arange(n, N)))
        g = _calibration_group(b)
        # the cluster numbering differs between resplits: a cluster calibrated alone
        t.add(covered(b.lo01, b.hi01, y[n:]), np.where(np.isin(g, ["pooled", "whole-scale"]),
                                                       g, "alone"))
    return cal


# ------------------------------------------------------------------------- small / unseen
def _tiny_groups(rng, sizes):
    g = np.repeat([f"g{i}" for i in range(len(sizes))], sizes)
    n = len(g)
    m = rng.uniform(0.2, 0.8, n)
    y = np.clip(m + rng.normal(0, 0.05, n), 0, 1)
    return Predictions(m), y, g


def test_groups_of_one_to_three_items_get_the_whole_scale_flagged():
    rng = np.random.default_rng(1)
    p, y, g = _tiny_groups(rng, [200, 1, 2, 3, 3])
    with pytest.warns(SmallGroupWarning, match=r"g1 \(n=1\), g2 \(n=2\), g3 \(n=3\), g4 "
                                               r"\(n=3\); their items get the whole scale"):
        cal = Mondrian(SplitConformal(0.1)).fit(p, y, g)
    assert cal.params_["small"] == ["g1", "g2", "g3", "g4"] and cal.params_["pool"] is None
    b = cal.predict(p, g)
    small = g != "g0"
    assert b.fallback[small].all() and b.full_range[small].all()
    assert not b.fallback[~small].any() and not b.full_range[~small].any()
    assert (b.lo01[small] == 0).all() and (b.hi01[small] == 1).all()
    np.testing.assert_array_equal(b.group, g)


def test_groups_of_one_to_three_items_pooled_on_request():
    rng = np.random.default_rng(1)
    p, y, g = _tiny_groups(rng, [200, 1, 2, 3, 3])  # need 9 at alpha 0.1: a pool of 9
    with pytest.warns(SmallGroupWarning, match=r"g1 \(n=1\), g2 \(n=2\), g3 \(n=3\), g4 "
                                               r"\(n=3\); they are calibrated together as "
                                               r"one pooled group of 9 items"):
        cal = Mondrian(SplitConformal(0.1), small_group="pool-together").fit(p, y, g)
    assert cal.params_["small"] == ["g1", "g2", "g3", "g4"] and cal.params_["pool_n"] == 9
    b = cal.predict(p, g)
    small = g != "g0"
    assert b.fallback[small].all() and not b.fallback[~small].any()
    assert not b.full_range.any()
    assert list(np.unique(b.group[small])) == ["pooled:g1", "pooled:g2", "pooled:g3",
                                               "pooled:g4"]
    # the pooled band is the conformal quantile of the pooled items' own residuals: all 9
    # (rank ceil(10 * 0.9) = 9) here
    r = np.abs(y[small] - p.median[small])
    np.testing.assert_allclose(b.hi01[small] - p.median[small],
                               np.minimum(r.max(), 1 - p.median[small]), atol=1e-12)


def test_a_pool_too_small_gets_the_whole_scale():
    rng = np.random.default_rng(2)
    p, y, g = _tiny_groups(rng, [200, 1, 2, 3])  # a pool of 6 < 9
    with pytest.warns(SmallGroupWarning, match="they have 6 items, too few as well"):
        cal = Mondrian(SplitConformal(0.1), small_group="pool-together").fit(p, y, g)
    b = cal.predict(p, g)
    small = g != "g0"
    assert b.full_range[small].all() and b.fallback[small].all()
    assert (b.lo01[small] == 0).all() and (b.hi01[small] == 1).all()
    assert list(np.unique(b.group[small])) == ["g1", "g2", "g3"]


def test_unseen_group_at_apply():
    rng = np.random.default_rng(3)
    p, y, g = _tiny_groups(rng, [200, 4, 6])
    pt = Predictions([0.5, 0.5, 0.5])
    with pytest.warns(SmallGroupWarning):
        cal = Mondrian(SplitConformal(0.1)).fit(p, y, g)
    with pytest.warns(SmallGroupWarning, match=r"not seen at calibration: new; they get "
                                               "the whole scale"):
        b = cal.predict(pt, ["g0", "new", "g1"])
    assert b.fallback.tolist() == b.full_range.tolist() == [False, True, True]
    assert b.group.tolist() == ["g0", "new", "g1"]
    with pytest.warns(SmallGroupWarning):
        cal = Mondrian(SplitConformal(0.1), small_group="pool-together").fit(p, y, g)
    with pytest.warns(SmallGroupWarning, match=r"not seen at calibration: new; they get "
                                               "the pooled small-group band"):
        b = cal.predict(pt, ["g0", "new", "g1"])
    assert b.fallback.tolist() == [False, True, True]
    assert b.group.tolist() == ["g0", "pooled:new", "pooled:g1"]
    assert b.hi01[1] == b.hi01[2] and not b.full_range.any()
    # no pool (no small group at calibration): the whole scale
    full = Mondrian(SplitConformal(0.1)).fit(p.take(np.arange(200)), y[:200], g[:200])
    with pytest.warns(SmallGroupWarning, match="whole scale"):
        b = full.predict(pt, ["g0", "new", "g0"])
    assert b.full_range.tolist() == [False, True, False] and b.fallback[1]
    with pytest.warns(SmallGroupWarning, match="not seen"):
        b = Mondrian(SplitConformal(0.1), small_group="full").fit(
            p.take(np.arange(200)), y[:200], g[:200]).predict(pt, ["new"] * 3)
    assert b.full_range.all()
    with pytest.raises(InputError, match="not seen at calibration: new"):
        Mondrian(SplitConformal(0.1), small_group="error").fit(
            p.take(np.arange(200)), y[:200], g[:200]).predict(pt, ["new"] * 3)


def test_a_borderline_group_is_calibrated_alone_and_lends_its_items_to_the_pool():
    rng = np.random.default_rng(4)
    p, y, g = _tiny_groups(rng, [200, 9, 2])
    with pytest.warns(SmallGroupWarning, match="pooled group of 11 items"):
        cal = Mondrian(SplitConformal(0.1), small_group="pool-together").fit(p, y, g)
    b = cal.predict(p, g)
    assert not b.fallback[g == "g1"].any() and b.fallback[g == "g2"].all()
    assert cal.params_["pool_groups"] == ["g1", "g2"]


def test_cluster_conservative_is_unchanged_by_the_small_group_rule():
    rng = np.random.default_rng(5)
    n = 300
    emb = rng.normal(size=(n, 2))
    m = rng.uniform(0.2, 0.8, n)
    y = np.clip(m + rng.normal(0, 0.05, n), 0, 1)
    p = Predictions(m, lo=m - 0.05, hi=m + 0.05, embedding=emb)
    cal = ClusterConservative(CRC(0.1), n_clusters=3).fit(p, y)
    assert cal.params_["group_share"] is None and cal.params_["pool"] is None
    mond = ClusterConservative(CRC(0.1), n_clusters=3, rule="mondrian", seed=2).fit(p, y)
    share = mond.params_["group_share"]
    assert share == {"from": "held-out", "n": 60, "frac": 0.2, "seed": 2}
    assert sum(mond.params_["counts"].values()) == n - 60


# ------------------------------------------------------------------------- shares
def test_difficulty_thresholds_never_see_the_conformal_items():
    rng = np.random.default_rng(6)
    p, y = _difficulty_data(rng, 300)
    cal = Mondrian(SplitConformal(0.1), by="difficulty", seed=7).fit(p, y)
    share = cal.params_["group_share"]
    assert share == {"from": "held-out", "n": 60, "frac": 0.2, "seed": 7}
    assert cal.params_["marginal"]["n"] == 240 == sum(cal.params_["counts"].values())
    # drawn from the seed: another seed holds out other items
    other = Mondrian(SplitConformal(0.1), by="difficulty", seed=8).fit(p, y)
    assert other.params_["thresholds"] != cal.params_["thresholds"]
    # the base's seed by default (make_calibrator's seed)
    assert make_calibrator("split", 0.1, mondrian="difficulty", seed=5).seed == 5


def test_a_learned_base_fits_the_thresholds_on_its_training_share():
    rng = np.random.default_rng(7)
    n = 400
    x = rng.uniform(0, 1, n)
    y = np.clip(0.2 + 0.6 * x + rng.normal(0, 0.05 + 0.1 * x, n), 0, 1)
    p = Predictions(x, features=np.c_[x, rng.normal(size=n)])
    cal = Mondrian(CQR(0.1, seed=0), by="difficulty").fit(p, y)
    assert cal.params_["group_share"] == {"from": "training", "n": 200}
    assert cal.params_["marginal"]["n"] == 200


# ------------------------------------------------------------------------- persistence
@pytest.mark.parametrize("make, given", [
    (lambda: Mondrian(SplitConformal(0.1, scale=Scale(1, 5)), by="given",
                      small_group="pool-together"), True),
    (lambda: Mondrian(SplitConformal(0.1, scale=Scale(1, 5)), by="difficulty"), False),
    (lambda: ClusterConservative(CRC(0.1, scale=Scale(1, 5)), n_clusters=3, rule="mondrian"),
     False),
])
def test_save_load_round_trip(tmp_path, make, given):
    rng = np.random.default_rng(8)
    n = 240
    g = np.where(np.arange(n) < 225, "big", np.where(np.arange(n) < 232, "s1", "s2"))
    w = rng.uniform(0.05, 0.3, n)
    m = rng.uniform(0.2, 0.8, n)
    y = np.clip(m + rng.normal(0, 1, n) * w / 3, 0, 1)
    p = Predictions(m, lo=m - w / 2, hi=m + w / 2, embedding=rng.normal(size=(n, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = make().fit(p, y, g if given else None)
    if given:
        assert cal.params_["pool"] is not None  # s1 (7) and s2 (8) pooled
    path = save_calibrator(tmp_path / "c.json", cal)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a file of this version loads without a warning
        back, _ = load_calibrator(path)
    assert back.params_["group_share"] == cal.params_["group_share"]
    assert back.get_config() == cal.get_config()
    assert back.small_group == ("pool-together" if given else "full")
    gt = np.array(["big", "s1", "s2", "unseen"] * 10) if given else None
    pt = p.take(np.arange(200, 240))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b1, b2 = cal.predict(pt, gt), back.predict(pt, gt)
    np.testing.assert_array_equal(b1.lo01, b2.lo01)
    np.testing.assert_array_equal(b1.hi01, b2.hi01)
    np.testing.assert_array_equal(b1.fallback, b2.fallback)
    np.testing.assert_array_equal(b1.group, b2.group)
    if given:
        np.testing.assert_array_equal(b1.fallback, gt != "big")
        assert all(x.startswith("pooled:") for x in b1.group[gt != "big"])


def test_a_file_saved_before_the_pooled_rule_still_loads(tmp_path):
    """Files of the former version: no pool, no share, small groups without parameters.
    Saved with ``small_group: marginal`` (that version's default) they are refused, naming
    the value and the fix; saved with ``error`` they load, as do difficulty thresholds
    fitted on the calibrated items (with a warning)."""
    rng = np.random.default_rng(9)
    p, y, g = _tiny_groups(rng, [200, 4, 6])
    with pytest.warns(SmallGroupWarning):
        cal = Mondrian(SplitConformal(0.1), by="given").fit(p, y, g)
    path = save_calibrator(tmp_path / "c.json", cal)
    _as_former_file(path, {"by": "given", "small_group": "marginal"})
    with pytest.raises(CalibratorMismatch, match=r"small_group 'marginal'.*calibrate again.*"
                                         r"small_group full"):
        load_calibrator(path)
    _as_former_file(path, {"by": "given", "small_group": "error"})
    old, _ = load_calibrator(path)
    assert old.params_["small"] == ["g1", "g2"] and old.params_["pool"] is None
    b = old.predict(p, g)
    small = g != "g0"
    assert b.full_range[small].all() and not b.full_range[~small].any()
    np.testing.assert_array_equal(b.hi01[~small], cal.predict(p, g).hi01[~small])

    pd_, yd = _difficulty_data(rng, 300)
    dcal = Mondrian(SplitConformal(0.1), by="difficulty").fit(pd_, yd)
    path = save_calibrator(tmp_path / "d.json", dcal)
    _as_former_file(path, {"by": "difficulty", "small_group": "error"})
    with pytest.warns(SmallGroupWarning, match="thresholds on the very items"):
        old, _ = load_calibrator(path)
    np.testing.assert_array_equal(old.predict(pd_).hi01, dcal.predict(pd_).hi01)


def _as_former_file(path, config):
    """Rewrite a saved calibrator as the former version wrote it: no pool, no share."""
    doc = json.loads(path.read_text())
    st = doc["calibrator"]
    st["config"] = config
    drop = ("need", "small", "pool", "pool_groups", "pool_n", "group_share")
    st["params"] = {k: v for k, v in st["params"].items() if k not in drop}
    doc["checksum"] = content_checksum(doc)
    path.write_text(json.dumps(doc))


def test_former_cluster_files_still_load(tmp_path):
    rng = np.random.default_rng(10)
    n = 300
    m = rng.uniform(0.2, 0.8, n)
    y = np.clip(m + rng.normal(0, 0.05, n), 0, 1)
    p = Predictions(m, lo=m - 0.05, hi=m + 0.05, embedding=rng.normal(size=(n, 2)))
    cons = ClusterConservative(CRC(0.1), n_clusters=3).fit(p, y)
    path = save_calibrator(tmp_path / "c.json", cons)
    _as_former_file(path, {"n_clusters": 3, "rule": "conservative",
                           "small_group": "error", "seed": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing changed for the conservative rule
        old, _ = load_calibrator(path)
    np.testing.assert_array_equal(old.predict(p).hi01, cons.predict(p).hi01)

    mond = ClusterConservative(CRC(0.1), n_clusters=3, rule="mondrian").fit(p, y)
    path = save_calibrator(tmp_path / "m.json", mond)
    _as_former_file(path, {"n_clusters": 3, "rule": "mondrian", "small_group": "error",
                           "seed": 0})
    with pytest.warns(SmallGroupWarning, match="clusters on the very items"):
        old, _ = load_calibrator(path)
    np.testing.assert_array_equal(old.predict(p).hi01, mond.predict(p).hi01)


def test_a_file_saved_with_the_former_pool_name_is_refused(tmp_path):
    """``small_group: pool`` files gave their small groups the pooled band (valid for them
    together only): refused, naming the value and the fix, never applied."""
    rng = np.random.default_rng(11)
    p, y, g = _tiny_groups(rng, [200, 4, 6])
    with pytest.warns(SmallGroupWarning):
        cal = Mondrian(SplitConformal(0.1), small_group="pool-together").fit(p, y, g)
    path = save_calibrator(tmp_path / "c.json", cal)
    doc = json.loads(path.read_text())
    doc["calibrator"]["config"]["small_group"] = "pool"
    doc["checksum"] = content_checksum(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(CalibratorMismatch, match=r"saved with small_group 'pool'.*calibrate again.*"
                                         r"pool-together"):
        load_calibrator(path)


def test_apply_flags_an_unseen_or_small_group_group_fallback():
    """``apply``: a row of a group unseen at calibration (or too small) gets the whole scale,
    flagged ``full_range,group_fallback`` (it was ``full_range`` alone), in its own group."""
    import pandas as pd

    from scoreband import api

    rng = np.random.default_rng(12)
    n = 200
    g = np.where(np.arange(n) < 196, "t-big", "t-small")
    m = rng.uniform(1.5, 4.5, n)
    df = pd.DataFrame({"y": np.clip(np.round(m + rng.normal(0, 0.5, n)), 1, 5), "m": m,
                       "g": g})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = api.calibrate(df, target="y", scale=(1, 5), median="m", groups="g",
                            method="split", mondrian=True)
        out = api.apply(pd.DataFrame({"m": [3.0, 3.0, 3.0], "g": ["t-big", "t-small",
                                                                  "t-new"]}), fit).table
    assert out["band_flag"].tolist() == ["", "full_range,group_fallback",
                                         "full_range,group_fallback"]
    assert out["band_group"].tolist() == ["t-big", "t-small", "t-new"]
    assert out["band_lo"].tolist()[1:] == [1.0, 1.0] and out["band_hi"].tolist()[1:] == [5, 5]
