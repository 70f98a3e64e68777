"""The monitor's e-process (scoreband.decisions.eprocess): its false-alarm guarantee over
many simulated null streams (Ville: the chance of ever alarming <= false_alarm), its
detection delay after a change, and a reference computation by a plain loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scoreband.decisions.eprocess import (
    CAP,
    PRIOR,
    bets,
    change_point,
    first_alarm,
    log_eprocess,
    start_weight,
)


def _reference(z, p0, every):
    """log M_t by the definition, one row at a time (no vectorisation)."""
    T = len(z)
    starts = list(range(0, T, every))
    out = []
    for t in range(T):
        total = 1.0 / (t // every + 2)  # the wealths not yet started, at 1
        for k, s in enumerate(starts):
            if s > t:
                break
            wealth, losses = 1.0, 0.0
            for u in range(s, t + 1):
                m = (PRIOR * p0 + losses) / (PRIOR + (u - s))
                lam = min(max((m - p0) / (p0 * (1 - p0)), 0.0), CAP / p0)
                wealth *= 1 + lam * (z[u] - p0)
                losses += z[u]
            total += wealth / ((k + 1) * (k + 2))
        out.append(math.log(total))
    return np.array(out)


def test_the_vectorised_eprocess_is_the_definition():
    rng = np.random.default_rng(3)
    z = np.r_[rng.random(40) < 0.1, rng.random(40) < 0.4].astype(float)
    z[5] = 0.3  # a loss in [0, 1], not only 0 / 1
    np.testing.assert_allclose(log_eprocess(z, 0.1, every=15), _reference(z, 0.1, 15),
                               rtol=1e-10, atol=1e-12)


def test_weights_sum_to_one_and_bets_are_predictable_and_bounded():
    assert start_weight(np.arange(10**6)).sum() == pytest.approx(1.0, abs=1e-5)
    rng = np.random.default_rng(0)
    z = (rng.random((3, 200)) < 0.5).astype(float)
    lam = bets(z, 0.1)
    assert lam.min() >= 0 and lam.max() <= CAP / 0.1 + 1e-12
    z2 = z.copy()
    z2[:, 100:] = 1 - z2[:, 100:]  # the future changes: the bets up to row 100 do not
    np.testing.assert_array_equal(bets(z2, 0.1)[:, :101], lam[:, :101])


@pytest.mark.statistical
@pytest.mark.parametrize("null", ["at p0", "below then at p0", "continuous at p0"])
def test_chance_of_ever_alarming_is_at_most_false_alarm(null):
    """4,000 streams of 2,000 rows whose loss rate is the promise itself (the hardest null)
    or below it: the share that ever alarm at 0.05 stays under 0.05 (plus 3 standard errors
    of the simulation)."""
    rng = np.random.default_rng({"at p0": 1, "below then at p0": 2,
                                 "continuous at p0": 3}[null])
    S, T, p0 = 4000, 2000, 0.1
    if null == "at p0":
        z = (rng.random((S, T)) < p0).astype(float)
    elif null == "below then at p0":
        rate = np.where(np.arange(T) < 700, 0.02, p0)
        z = (rng.random((S, T)) < rate).astype(float)
    else:
        z = rng.uniform(0, 2 * p0, (S, T))
    alarms = first_alarm(log_eprocess(z, p0), 0.05) >= 0
    assert alarms.mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / S), alarms.mean()


@pytest.mark.statistical
def test_detects_a_rise_soon_after_it_however_long_the_good_run_before():
    """Loss rate 0.08 for 300 rows, then 0.3 (about what doubling the noise does to a 90 %
    band): >= 90 % of 2,000 streams alarm by row 600, median delay <= 150 (measured: about
    55); a single wealth without restarts is slower after a longer good run."""
    rng = np.random.default_rng(4)
    S = 2000
    for before in (300, 1200):
        z = np.concatenate([rng.random((S, before)) < 0.08,
                            rng.random((S, 300)) < 0.3], axis=1).astype(float)
        at = first_alarm(log_eprocess(z, 0.1), 0.05)
        delay = np.where(at >= before, at - before, np.inf)
        assert np.mean((at >= before) & (at < before + 300)) >= 0.9
        assert np.median(delay) <= 150
        if before == 1200:
            single = first_alarm(log_eprocess(z, 0.1, every=10**9), 0.05)
            slow = np.where(single >= before, single - before, np.inf)
            assert np.median(slow) > np.median(delay)


def test_a_few_null_streams_rarely_alarm():
    """The quick check beside the statistical one: 400 streams at the promise."""
    rng = np.random.default_rng(6)
    z = (rng.random((400, 600)) < 0.1).astype(float)
    assert np.mean(first_alarm(log_eprocess(z, 0.1), 0.05) >= 0) <= 0.05


def test_change_point_finds_the_change():
    rng = np.random.default_rng(5)
    hits = []
    for _ in range(50):
        z = np.r_[rng.random(400) < 0.08, rng.random(300) < 0.35].astype(float)
        hits.append(change_point(z, 0.1, first_alarm(log_eprocess(z, 0.1), 0.05)))
    assert abs(np.median(hits) - 400) <= 20
    assert change_point(np.zeros(50), 0.1) == 0  # nothing above the promise


def test_refuses_what_it_cannot_test():
    with pytest.raises(ValueError, match="p0"):
        log_eprocess(np.zeros(5), 1.0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        log_eprocess(np.array([0.0, 2.0]), 0.1)
    with pytest.raises(ValueError, match="false_alarm"):
        first_alarm(np.zeros(3), 0.0)
