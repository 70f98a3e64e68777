"""Pairwise triage and a cascade of pair judges on pairs built from real judge outputs:
scoreband's label-free rule (`triage --pairwise --probs`) and cascade (`triage --pairwise
--cascade`) against the published fixed-sequence rule of "Trust or Escalate" (Jung et al.,
ICLR 2025) and its per-stage cascade.

    python benchmarks/real_pairs.py --judge-dir DIR [--splits 20] [--pairs 500]

Data: the "Analyzing Uncertainty of LLM-as-a-Judge" release (commit cc9a9cf; as
benchmarks/real_tables.py, nothing committed). qwen and dsr1 scored the same Summeval /
Dialsumm rows (1-5 score-token log-probs; expert means agree cell for cell). A pair is two
rows drawn at random (seeded; the releases carry no document ids, so the two summaries may
be of different documents): the human preference is the row with the higher expert mean
(pairs with equal means dropped), and a judge's p(A), p(B), p(tie) come from its two score
distributions taken as independent (p(A) = P(score_A > score_B)). Both judges' probabilities
are their real outputs; only the pairing is made here.

Protocol (the issue's): per table, ``--pairs`` pairs; per split s (20) a random half
calibrates and the other half is the test; risk 0.15 and 0.2, delta 0.1. Reported: the
share of test pairs decided and the agreement with the human among them, for

* ``published``: the published rule on one judge (dsr1, the stronger, or --judge);
* ``scoreband``: :func:`scoreband.decisions.risk.label_free_threshold` (``stated=True``),
  what ``triage --pairwise --probs PA,PB,PT`` runs, same judge;
* ``cascade``: qwen then dsr1 with one guarantee (``triage --pairwise --cascade``), costs
  1 / 10, and the share qwen decides;
* ``per-stage``: the published rule on qwen, then on dsr1 for the pairs qwen left, each at
  delta (no joint guarantee).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trust_or_escalate import published_threshold  # noqa: E402

from scoreband.decisions.cascade_rule import cascade  # noqa: E402
from scoreband.decisions.risk import label_free_threshold  # noqa: E402

TASKS = ("Summeval", "Dialsumm")
DIMS = ("coherence", "consistency", "fluency", "relevance")
DELTA = 0.1


def _probs(lp: np.ndarray) -> np.ndarray:
    z = np.maximum(lp, -50.0)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def pair_table(root: Path, task: str, dim: str, n_pairs: int, seed: int,
               judges=("qwen", "dsr1")) -> pd.DataFrame | None:
    """``n_pairs`` random pairs of rows with the human preference and each judge's p(A),
    p(B), p(tie) (``<judge>_a``, ``_b``, ``_t``)."""
    P, y = {}, None
    for j in judges:
        f = root / "model_logits" / j / f"{task}_{dim}_logits.csv"
        if not f.exists():
            return None
        df = pd.read_csv(f)
        if y is not None and not np.allclose(y, df.iloc[:, 5].to_numpy(float)):
            return None
        y = df.iloc[:, 5].to_numpy(float)
        P[j] = _probs(df.iloc[:, :5].to_numpy(float))
    rng = np.random.default_rng(seed)
    i, k = rng.integers(0, len(y), 4 * n_pairs), rng.integers(0, len(y), 4 * n_pairs)
    keep = (i != k) & (np.abs(y[i] - y[k]) > 1e-9)
    i, k = i[keep][:n_pairs], k[keep][:n_pairs]
    out = {"human": np.where(y[i] > y[k], "A", "B")}
    gt = np.triu(np.ones((5, 5)), 1).T  # [a, b] = 1 where score a > score b
    for j in judges:
        joint = P[j][i][:, :, None] * P[j][k][:, None, :]  # (n, a, b)
        pa = (joint * gt).sum(axis=(1, 2))
        pb = (joint * gt.T).sum(axis=(1, 2))
        out[f"{j}_a"], out[f"{j}_b"], out[f"{j}_t"] = pa, pb, 1 - pa - pb
    return pd.DataFrame(out)


def _verdict(df, j):
    P = df[[f"{j}_a", f"{j}_b", f"{j}_t"]].to_numpy(float)
    return P.max(axis=1), np.array(["A", "B", "tie"])[P.argmax(axis=1)]


def one_split(df, judge, alpha, s):
    idx = np.random.default_rng(1000 + s).permutation(len(df))
    cal, test = df.iloc[idx[: len(df) // 2]], df.iloc[idx[len(df) // 2:]]
    yc, yt = cal["human"].to_numpy(), test["human"].to_numpy()
    res = {}
    conf_c, v_c = _verdict(cal, judge)
    conf_t, v_t = _verdict(test, judge)
    thr = published_threshold(conf_c, (v_c != yc).astype(float), alpha, DELTA)
    d = conf_t >= thr
    res["published"] = (d.mean(), (v_t[d] == yt[d]).mean() if d.any() else np.nan)
    r = label_free_threshold(1 - conf_c, (v_c != yc).astype(float), alpha, DELTA, stated=True)
    d = (1 - conf_t) <= r["threshold"]
    res["scoreband"] = (d.mean(), (v_t[d] == yt[d]).mean() if d.any() else np.nan)
    # the cascade, qwen then dsr1, one guarantee: fitted on the calibration half
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = cascade(cal, ["qwen=qwen_a,qwen_b,qwen_t", "dsr1=dsr1_a,dsr1_b,dsr1_t"],
                      "human", alpha, DELTA, costs={"qwen": 1, "dsr1": 10})
        out = fit.rule.apply(test.drop(columns="human"))
    d = (out["decided_by"] != "human").to_numpy()
    ans = out["decided_answer"].to_numpy()
    res["cascade"] = (d.mean(), (ans[d] == yt[d]).mean() if d.any() else np.nan,
                      (out["decided_by"] == "qwen").mean())
    # the published per-stage cascade
    cq, vq = _verdict(cal, "qwen")
    tq = published_threshold(cq, (vq != yc).astype(float), alpha, DELTA)
    left = cq < tq
    cd, vd = _verdict(cal, "dsr1")
    td = published_threshold(cd[left], (vd[left] != yc[left]).astype(float), alpha, DELTA)
    cqt, vqt = _verdict(test, "qwen")
    cdt, vdt = _verdict(test, "dsr1")
    first = cqt >= tq
    second = ~first & (cdt >= td)
    d = first | second
    ans = np.where(first, vqt, vdt)
    res["per-stage"] = (d.mean(), (ans[d] == yt[d]).mean() if d.any() else np.nan,
                        first.mean())
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-dir", type=Path, required=True)
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--pairs", type=int, default=500)
    ap.add_argument("--judge", default="dsr1")
    a = ap.parse_args(argv)
    t0, rows = time.time(), []
    for task in TASKS:
        for dim in DIMS:
            df = pair_table(a.judge_dir, task, dim, a.pairs, seed=7)
            if df is None:
                continue
            for alpha in (0.15, 0.2):
                runs = [one_split(df, a.judge, alpha, s) for s in range(a.splits)]
                row = {"table": f"{task}/{dim}", "alpha": alpha}
                for k in ("published", "scoreband", "cascade", "per-stage"):
                    v = np.array([r[k][:2] for r in runs], float)
                    row[f"{k} decided"] = v[:, 0].mean()
                    row[f"{k} agree"] = np.nanmean(v[:, 1]) if np.isfinite(v[:, 1]).any() \
                        else np.nan
                row["cascade by qwen"] = np.mean([r["cascade"][2] for r in runs])
                row["per-stage by qwen"] = np.mean([r["per-stage"][2] for r in runs])
                rows.append(row)
                print({k: (round(v, 3) if isinstance(v, float) else v)
                       for k, v in row.items()}, flush=True)
    res = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(res.round(3).to_string(index=False))
    for alpha, g in res.groupby("alpha"):
        ahead = int((g["scoreband decided"] >= g["published decided"] - 1e-9).sum())
        print(f"alpha {alpha}: scoreband {g['scoreband decided'].mean():.3f} vs published "
              f"{g['published decided'].mean():.3f} (ahead or equal on {ahead} of {len(g)}); "
              f"cascade {g['cascade decided'].mean():.3f} (qwen "
              f"{g['cascade by qwen'].mean():.3f}) vs per-stage "
              f"{g['per-stage decided'].mean():.3f}")
    print(f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
