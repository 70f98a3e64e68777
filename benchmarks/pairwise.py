"""Pairwise judging benchmark (issue 32): selective verdicts, prediction sets, rank sets.

Real data for development only (never committed): THumB's 4 captioning systems on 500 COCO
images (benchmarks/real_tables.py thumb_table, root /work/data/thumb) -> caption pairs with
the human preference from the per-caption human scores. Simulated: preferences with known
truth (tests/pairwise/sim.py) and Bradley-Terry systems for rank-set coverage.

    python benchmarks/pairwise.py [--thumb /work/data/thumb] [--resplits 100]

Prints, per metric and alpha: the share of pairs decided and the error among them on the
pairs not used for fitting (mean over resplits of 400 labeled pairs), how often the error
among decided test pairs was <= alpha, and the sets' coverage and size.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))

from scoreband.errors import InputError  # noqa: E402
from scoreband.pairwise.pairs import LABELS, make_pairs  # noqa: E402
from scoreband.pairwise.selective import fit_pairwise_arrays  # noqa: E402

SECTIONS: dict = {}


def thumb_pairs(root: Path, min_gap: float = 0.0) -> pd.DataFrame:
    from real_tables import thumb_table

    df, metrics = thumb_table(root)
    res = make_pairs(df, system_col="SYS", item_col="seg_id", scores=metrics,
                     target="human_score", response_col="hyp")
    t = res.table
    t = t[(t["human"] != "tie") & ((t["human_score_a"] - t["human_score_b"]).abs()
                                  >= min_gap)]
    return t.reset_index(drop=True)


def selective_resplits(X, y, *, n_labeled: int, alpha: float, delta: float, resplits: int,
                       start: str = "first", set_method: str = "lac", **kw) -> dict:
    """Mean over resplits of the share decided and the error among decided pairs on the
    pairs not labeled; "held": the share of resplits whose error there is <= alpha (a noisy
    stand-in for the guarantee: the held-out error itself fluctuates)."""
    n = len(y)
    dec, err, held, cov, size, acc_all = [], [], [], [], [], []
    yi = np.array([LABELS.index(v) for v in y])
    for b in range(resplits):
        rng = np.random.default_rng(b)
        lab = np.zeros(n, bool)
        lab[rng.choice(n, n_labeled, replace=False)] = True
        try:
            rule = fit_pairwise_arrays(X[lab], y[lab],
                                       columns=[f"x{j}" for j in range(X.reshape(n, -1)
                                                                       .shape[1])],
                                       alpha=alpha, delta=delta, seed=b, start=start,
                                       set_method=set_method, **kw)
        except InputError:
            dec.append(0.0)
            held.append(True)
            continue
        r = rule.decide(X[~lab])
        d = r["decided"]
        wrong = r["verdict"][d] != y[~lab][d]
        dec.append(d.mean())
        e = wrong.mean() if d.any() else 0.0
        if d.any():
            err.append(e)
        held.append(e <= alpha)
        S = r["sets"]
        cov.append(S[np.arange(len(S)), yi[~lab]].mean())
        size.append(S.sum(axis=1).mean())
        acc_all.append((np.array(LABELS, dtype=object)[np.argmax(r["P"], axis=1)]
                        == y[~lab]).mean())
    return {"decided": float(np.mean(dec)), "error_decided": float(np.mean(err)) if err
            else None, "guarantee_held": float(np.mean(held)),
            "set_coverage": float(np.mean(cov)), "set_size": float(np.mean(size)),
            "accuracy_all": float(np.mean(acc_all)), "n_pairs": int(n)}


def population_resplits(X, y, *, n_labeled: int, alpha: float, delta: float, resplits: int,
                        **kw) -> dict:
    """The guarantee itself on a real table: the table's pairs are the population (their
    empirical distribution the truth), each resplit draws ``n_labeled`` calibration pairs
    from it i.i.d. (with replacement, as the theory assumes), and the rule's risk is the
    exact population risk - its error among the decided pairs of the whole table. "held":
    the share of draws where that risk is <= alpha (the guarantee asks >= 1 - delta); no
    test-set noise, unlike :func:`selective_resplits`."""
    n = len(y)
    dec, risk = [], []
    for b in range(resplits):
        lab = np.random.default_rng(10_000 + b).integers(0, n, n_labeled)
        try:
            rule = fit_pairwise_arrays(X[lab], y[lab],
                                       columns=[f"x{j}" for j in range(X.reshape(n, -1)
                                                                       .shape[1])],
                                       alpha=alpha, delta=delta, seed=b, **kw)
        except InputError:
            dec.append(0.0)
            risk.append(0.0)
            continue
        r = rule.decide(X)
        d = r["decided"]
        dec.append(d.mean())
        risk.append((r["verdict"][d] != y[d]).mean() if d.any() else 0.0)
    risk = np.asarray(risk)
    return {"decided": float(np.mean(dec)), "risk": float(risk.mean()),
            "held": float(np.mean(risk <= alpha))}


def run_population(root: Path, resplits: int) -> None:
    print(f"\nTHumB pairs (gap >= 1) as the population: {resplits} i.i.d. draws of 400 "
          "calibration pairs, risk = error among the decided pairs of the whole table")
    t = thumb_pairs(root, 1.0)
    y = t["human"].to_numpy(object)
    for name in ("ensemble", "CIDEr"):
        X = t[[f"{name}_diff"]].to_numpy(float)
        for alpha in (0.05, 0.1):
            for path, kw in (("label-free", {}), ("train share", {"label_free": False})):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    r = population_resplits(X, y, n_labeled=400, alpha=alpha, delta=0.1,
                                            resplits=resplits, **kw)
                print(f"  {name:9s} alpha {alpha:<4g} {path:12s}: decided {r['decided']:.3f}, "
                      f"population risk {r['risk']:.3f}, held {r['held']:.2f} "
                      "(guarantee: >= 0.90)", flush=True)


def run_thumb(root: Path, resplits: int) -> None:
    from real_tables import thumb_table

    _, metrics = thumb_table(root)
    for gap in (1.0, 0.0):
        t = thumb_pairs(root, gap)
        y = t["human"].to_numpy(object)
        print(f"\nTHumB caption pairs (ties dropped, human score gap >= {gap:g}): {len(t)} "
              f"pairs; 400 labeled per resplit, {resplits} resplits, delta 0.1")
        oracle_line(t, y)
        for name, feats in (("ensemble", ["ensemble"]), ("CIDEr", ["CIDEr"]),
                            ("RefCLIPS", ["RefCLIPS"]), ("all 16 metrics", metrics)):
            X = t[[f"{c}_diff" for c in feats]].to_numpy(float)
            if len(feats) == 1:
                x = X[:, 0]
                acc = f"sign accuracy {((x > 0) == (y == 'A'))[x != 0].mean():.3f}"
                paths = (("label-free", {}), ("train share", {"label_free": False}))
            else:
                acc = "logistic"
                paths = (("train share", {}), ("train/likely", {"start": "likely"}))
            for alpha in (0.05, 0.1):
                for path, kw in paths:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        r = selective_resplits(X, y, n_labeled=400, alpha=alpha, delta=0.1,
                                               resplits=resplits, **kw)
                    e = "-" if r["error_decided"] is None else f"{r['error_decided']:.3f}"
                    print(f"  {name:14s} ({acc}; model accuracy {r['accuracy_all']:.3f}) "
                          f"alpha {alpha:<4g} {path:12s}: decided {r['decided']:.3f}, "
                          f"error among decided {e}, held {r['guarantee_held']:.2f}; sets "
                          f"cover {r['set_coverage']:.3f}, size {r['set_size']:.2f}",
                          flush=True)


def oracle_line(t: pd.DataFrame, y) -> None:
    """The most any valid rule can decide: the largest share of the most confident pairs
    (by |ensemble diff|) whose error on ALL pairs is <= alpha (no sampling, no guarantee)."""
    x = t["ensemble_diff"].to_numpy(float)
    wrong = (np.where(x > 0, "A", "B") != y)[np.argsort(-np.abs(x))]
    cum = np.cumsum(wrong) / np.arange(1, len(x) + 1)
    for alpha in (0.05, 0.1):
        ok = np.flatnonzero(cum <= alpha)
        print(f"  oracle (ensemble, error on all pairs) at alpha {alpha:g}: "
              f"{(ok[-1] + 1) / len(x) if len(ok) else 0:.3f} of the pairs")


#: PASCAL-50S (Vedantam et al. 2015; 4,000 caption pairs, 48 votes each, 1,000 per kind):
#: RefCLIP-S's majority-vote accuracy per kind of pair (Hessel et al. 2021, table 4:
#: human-correct, human-incorrect, human-model, model-model), 0.831 overall
PASCAL_KINDS = {"HC": 0.645, "HI": 0.996, "HM": 0.954, "MM": 0.728}


def pascal_shaped(seed: int = 0, per_kind: int = 1000) -> tuple[np.ndarray, np.ndarray]:
    """A simulated table shaped like PASCAL-50S for a metric with RefCLIP-S's accuracy per
    kind of pair (the release's human votes are not reachable from this machine): per pair
    a true quality gap ``g`` (HC, MM: centred at 0, spread 0.49 / 0.86; HI, HM: +-3.76 /
    +-2.35, spread 1), the metric's difference ``g + N(0, 1)``, 48 votes ``Binom(48,
    sigmoid(4 g))`` and the majority as the label (24-24 ties dropped). The spreads were
    solved so that sign accuracy per kind matches :data:`PASCAL_KINDS` (measured here:
    0.644 / 0.994 / 0.945 / 0.720, 0.827 overall)."""
    rng = np.random.default_rng(seed)
    shape = {"HC": (0.0, 0.488), "HI": (3.76, 1.0), "HM": (2.35, 1.0), "MM": (0.0, 0.861)}
    xs, ys = [], []
    for mu, spread in shape.values():
        g = rng.normal(mu, spread, per_kind) * rng.choice([-1.0, 1.0], per_kind)
        x = g + rng.normal(0, 1.0, per_kind)
        votes = rng.binomial(48, 1 / (1 + np.exp(-4 * g)))
        y = np.where(votes > 24, "A", np.where(votes < 24, "B", "tie"))
        xs.append(x[y != "tie"])
        ys.append(y[y != "tie"])
    return np.concatenate(xs), np.concatenate(ys).astype(object)


def run_pascal_shaped(resplits: int) -> None:
    x, y = pascal_shaped()
    X = x[:, None]
    acc = ((x > 0) == (y == "A")).mean()
    print(f"\nPASCAL-50S-shaped (simulated; RefCLIP-S accuracy per kind of pair, {acc:.3f} "
          f"overall; {len(y)} pairs): one score difference, label-free path, delta 0.1")
    wrong = (np.where(x > 0, "A", "B") != y)[np.argsort(-np.abs(x))]
    cum = np.cumsum(wrong) / np.arange(1, len(x) + 1)
    for n_lab in (400, 1000):
        for alpha in (0.1, 0.05):
            ok = np.flatnonzero(cum <= alpha)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = selective_resplits(X, y, n_labeled=n_lab, alpha=alpha, delta=0.1,
                                       resplits=resplits)
                p = population_resplits(X, y, n_labeled=n_lab, alpha=alpha, delta=0.1,
                                        resplits=resplits)
            print(f"  {n_lab:4d} labeled, alpha {alpha:<4g}: held out: decided "
                  f"{r['decided']:.3f}, error among decided {r['error_decided']:.3f}, held "
                  f"{r['guarantee_held']:.2f}; population draws: decided {p['decided']:.3f}, "
                  f"risk {p['risk']:.3f}, held {p['held']:.2f}; oracle "
                  f"{(ok[-1] + 1) / len(x) if len(ok) else 0:.3f}", flush=True)


SECTIONS["pascal-shaped"] = run_pascal_shaped


def mllm_judge_pairs(path: Path) -> pd.DataFrame:
    """MLLM-as-a-Judge's Pair setting (Chen et al. 2024; repository Dongping-Chen/MLLM-Judge,
    ``MLLM-as-a-Judge-HQ/Pair.jsonl``, copied to /work/data, never committed): per pair the
    two answering models, the human verdict (A / B / C = tie) and GPT-4V's verdict. Returns
    a pair table in scoreband's shape (``system_a``, ``system_b``, ``human``, ``judge``,
    ``task``)."""
    rows = []
    tie = {"A": "A", "B": "B", "C": "tie"}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        rows.append({"pair_id": str(r.get("pair_id")), "image": str(r.get("image_path")),
                     "task": str(r.get("original_dataset")),
                     "system_a": r["answer1"]["name"], "system_b": r["answer2"]["name"],
                     "human": tie.get(str(r.get("human_answer", "")).strip(), ""),
                     "judge": tie.get(str((r.get("result") or {}).get("judge", "")).strip(),
                                      "")})
    return pd.DataFrame(rows)


def run_mllm_judge(path: Path, resplits: int) -> None:
    """Real pairwise data: GPT-4V's verdicts rectified by a few human verdicts
    (``rank_systems``: prediction-powered win rates), their coverage of the win rates all
    the table's human verdicts give, over resplits of which pairs are labeled; the
    agreement of the judge with the humans; the bad input the table holds."""
    from scoreband.pairwise.ranking import rank_systems

    df = mllm_judge_pairs(path)
    ok = (df.human != "") & (df.judge != "")
    same = df.system_a == df.system_b
    print(f"\nMLLM-as-a-Judge Pair (HQ subset, {len(df)} pairs, {df.task.nunique()} source "
          f"datasets; {int(same.sum())} pairs compare a model with itself, "
          f"{int((~ok).sum())} lack a verdict)")
    t = df[ok & ~same].reset_index(drop=True)
    agree = (t.human == t.judge).mean()
    nt = (t.human != "tie") & (t.judge != "tie")
    print(f"  GPT-4V agrees with the human verdict on {agree:.3f} of {len(t)} pairs "
          f"(A / B / tie; {(t.human[nt] == t.judge[nt]).mean():.3f} where neither says tie); "
          f"human ties {(t.human == 'tie').mean():.3f}, judge ties {(t.judge == 'tie').mean():.3f}")
    value = {"A": 1.0, "B": 0.0, "tie": 0.5}
    y_all = t.human.map(value).to_numpy(float)
    names = sorted(set(t.system_a) | set(t.system_b))
    truth = {}
    for s in names:
        m = (t.system_a == s) | (t.system_b == s)
        truth[s] = float(np.where(t.system_a[m] == s, y_all[m], 1 - y_all[m]).mean())
    f_all = t.judge.map(value).to_numpy(float)
    judge_only = {}
    for s in names:
        m = ((t.system_a == s) | (t.system_b == s)).to_numpy()
        judge_only[s] = float(np.where(t.system_a[m] == s, f_all[m], 1 - f_all[m]).mean())
    print("  win rates (all human verdicts / GPT-4V alone): " + ", ".join(
        f"{s} {truth[s]:.3f} / {judge_only[s]:.3f}" for s in names))
    for n_lab in (60, 120, 240):
        if n_lab >= len(t):
            continue
        cover, all_cover, width, cwidth = [], [], [], []
        for b in range(resplits):
            lab = np.zeros(len(t), bool)
            lab[np.random.default_rng(b).choice(len(t), n_lab, replace=False)] = True
            d = t.assign(human=np.where(lab, t.human, ""))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                doc, _ = rank_systems(d, label_col="human", verdict="judge", alpha=0.1)
            hits = []
            for s in names:
                rec = doc["systems"][s]
                if rec.get("ci") is None:
                    continue
                lo, hi = rec["ci"]
                hits.append(lo <= truth[s] <= hi)
                width.append(hi - lo)
                cwidth.append(rec["classical"]["ci"][1] - rec["classical"]["ci"][0])
            cover.extend(hits)
            all_cover.append(all(hits))
        print(f"  {n_lab:3d} human-labeled pairs, 90 % intervals: win-rate coverage "
              f"{np.mean(cover):.3f} per system, {np.mean(all_cover):.3f} all at once; "
              f"width {np.mean(width):.3f} (human labels alone {np.mean(cwidth):.3f})",
              flush=True)


def run_simulated(resplits: int) -> None:
    """The embedded world: position bias of the simulated judges, selective verdicts and
    sets from judge-pairs' probabilities, rank-set coverage."""
    from scoreband.pairwise.extract import judge_pairs, make_pair_judge
    from scoreband.pairwise.ranking import rank_arrays
    from scoreband.world.pairwise import world_pairs

    print("\nSimulated world (embedded, no download)")
    for spec, true in (("sim-pair-strong", 0.03), ("sim-pair-biased", 0.12),
                       ("sim-pair-fair:bias=0.2", 0.2)):
        df = world_pairs(500, seed=1)
        out, _ = judge_pairs(df, make_pair_judge(spec))
        print(f"  position bias {spec:24s}: measured {out.pair_position_bias.mean():+.4f}, "
              f"true {true:+.2f}")
    df = world_pairs(2000, seed=2)
    out, _ = judge_pairs(df, make_pair_judge("sim-pair-biased"))
    P = out[["pair_p_a", "pair_p_b", "pair_p_tie"]].to_numpy(float)
    y = out["human"].to_numpy(object)
    X = out["pair_pref"].to_numpy(float)
    for kind, feats in (("logistic(pair_pref)", X), ("judge probs", P)):
        for alpha in (0.05, 0.1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = selective_resplits(feats, y, n_labeled=1000, alpha=alpha, delta=0.1,
                                       resplits=resplits,
                                       **({"kind": "probs"} if kind == "judge probs" else {}))
            e = "-" if r["error_decided"] is None else f"{r['error_decided']:.3f}"
            print(f"  sim-pair-biased, {kind:20s} alpha {alpha:<4g}: decided "
                  f"{r['decided']:.3f}, error among decided {e}, held "
                  f"{r['guarantee_held']:.2f}; sets cover {r['set_coverage']:.3f}, size "
                  f"{r['set_size']:.2f} (labels A/B/tie)")
    names = np.array(["s0", "s1", "s2", "s3", "s4"])
    beta = np.array([0.0, 0.2, 0.4, 0.7, 1.0])
    truth = {s: 5 - i for i, s in enumerate(names)}
    for by in ("head-to-head", "bradley-terry"):
        hits, width = 0, []
        rng = np.random.default_rng(0)
        for _ in range(resplits * 4):
            n = 2000
            a = rng.integers(0, 5, n)
            b = (a + rng.integers(1, 5, n)) % 5
            p = 1 / (1 + np.exp(-(beta[a] - beta[b])))
            yy = (rng.uniform(size=n) < p).astype(float)
            f = np.clip(p + 0.08 + rng.normal(0, 0.15, n), 0, 1)
            lab = rng.uniform(size=n) < 0.1
            d = rank_arrays(names[a], names[b], f, np.where(lab, yy, np.nan), alpha=0.1,
                            by=by)
            hits += all(r["ranks"][0] <= truth[r["system"]] <= r["ranks"][1]
                        for r in d["ranking"])
            width.append(np.mean([r["ranks"][1] - r["ranks"][0] + 1 for r in d["ranking"]]))
        print(f"  rank sets ({by}, 5 BT systems, 2000 judged pairs, 10 % human-labeled, "
              f"biased judge): coverage {hits / (resplits * 4):.3f} at nominal 0.90, mean "
              f"set size {np.mean(width):.2f} ranks")


SECTIONS["simulated"] = run_simulated


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--thumb", type=Path, default=Path("/work/data/thumb"))
    ap.add_argument("--mllm-judge", type=Path,
                    default=Path("/work/data/mllm_judge/HQ_Pair.jsonl"))
    ap.add_argument("--resplits", type=int, default=100)
    ap.add_argument("--skip", nargs="*", default=[])
    a = ap.parse_args()
    if "thumb" not in a.skip and a.thumb.exists():
        run_thumb(a.thumb, a.resplits)
    if "population" not in a.skip and a.thumb.exists():
        run_population(a.thumb, a.resplits)
    if "mllm" not in a.skip and a.mllm_judge.exists():
        run_mllm_judge(a.mllm_judge, a.resplits)
    for name, fn in SECTIONS.items():
        if name not in a.skip:
            fn(a.resplits)

if __name__ == "__main__":
    main()
