"""Trust or escalate on real tables: accepted share and realised risk over resplits.

    python benchmarks/triage.py --judge-dir DIR [--thumb-dir DIR] [--resplits 20]
        [--judges qwen,4omini,dsr1] [--labeled 1000] [--train-frac 0.5] [--by auto]
        [--map tolerance] [--start likely] [--tolerance 0.5] [--grid-size N]
        [--crossfit-map] [--out triage.json]

Data: as benchmarks/real_tables.py (nothing is committed: the releases carry no licence).
Judge tables: the expected score of the 1..5 log-probs is the judge's score, the log-probs
its features, the mean of 3 expert ratings the target (1-5), tolerance 0.5. THumB: each
automatic metric against ``human_score`` (1-5), tolerance 0.5.

Reference (judge tables): the published fixed-sequence rule of "Trust or Escalate" (Jung
et al., ICLR 2025; benchmarks/trust_or_escalate.py) on the judge's own verdict (its most
probable score token, confidence its probability), every labeled row calibrating.

Protocol per resplit s: the rows are shuffled with seed s; ``--labeled`` rows are labeled
(``--train-frac`` of them train the map, the uncertainty and the sequence start, the rest
- 500 with the defaults - are the Learn-then-Test calibration share), every other row is
fresh test data. On the test rows: the share accepted and the realised risk among the
accepted (P(|m - y| > tol)). Reported per table at alpha 0.1 and 0.2, delta 0.1: mean
accepted share, mean realised risk, the share of resplits with realised risk <= alpha
(target >= 0.9; a finite test set adds its own noise to that share), and what accepting
every score risks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trust_or_escalate import published_threshold  # noqa: E402

from scoreband.datatypes import Scale  # noqa: E402
from scoreband.decisions.triage import fit_triage_arrays, losses  # noqa: E402
from scoreband.decisions.uncertainty import Signals  # noqa: E402
from scoreband.logprobs import expected_score  # noqa: E402

LIKERT = Scale(1, 5, integer=True)
TASKS = ("Summeval", "Dialsumm")
DIMS = ("coherence", "consistency", "fluency", "relevance")
ALPHAS = (0.1, 0.2)
DELTA = 0.1


def judge_tables(root: Path, judges):
    for judge in judges:
        for task in TASKS:
            for dim in DIMS:
                p = root / "model_logits" / judge / f"{task}_{dim}_logits.csv"
                if not p.exists():
                    continue
                df = pd.read_csv(p)
                lp = df.iloc[:, :5].to_numpy(float)
                lp = np.maximum(lp, -50.0)  # -inf log-probs (absent tokens) as a floor
                yield f"{judge}/{task}/{dim}", expected_score(lp), lp, \
                    df.iloc[:, 5].to_numpy(float), LIKERT, 0.5


def thumb_tables(root: Path, metrics=("CLIPS", "RefCLIPS", "CIDEr", "BERTScore")):
    from real_tables import thumb_table

    df, have = thumb_table(root)
    for m in metrics:
        if m not in have:
            continue
        d = df[np.isfinite(df[m].to_numpy(float))]
        yield f"thumb/{m}", d[m].to_numpy(float), None, d["human_score"].to_numpy(float), \
            Scale(1, 5), 0.5


def _judge_verdict(lp):
    """The judge's own verdict and confidence, as the published rule reads a judge: the
    most probable score token (1..5) and its probability (softmax of the log-probs)."""
    z = lp - lp.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    return p.max(axis=1), p.argmax(axis=1) + 1.0


def run_table(score, feats, y, scale, tol, *, resplits, labeled, train_frac, by, map_, start,
              grid_size=None, crossfit_map=False):
    n = len(y)
    out = {a: {"share": [], "risk": [], "ok": [], "chosen": {}} for a in ALPHAS}
    for s in range(resplits):
        perm = np.random.default_rng(s).permutation(n)
        lab, test = perm[:labeled], perm[labeled:]
        keys = (np.arange(n, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(s))
        for a in ALPHAS:
            sig = Signals(score[lab], None if feats is None else feats[lab])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rule = fit_triage_arrays(score[lab], y[lab], scale=scale, tolerance=tol,
                                         alpha=a, delta=DELTA, signals=sig, keys=keys[lab],
                                         by=by, map=map_, train_frac=train_frac, seed=s,
                                         start=start, grid_size=grid_size,
                                         crossfit_map=crossfit_map)
            tsig = Signals(score[test], None if feats is None else feats[test])
            m, u, ok = rule.decide(score[test], tsig)
            L = losses(m, y[test], tol)
            r = float(L[ok].mean()) if ok.any() else 0.0
            o = out[a]
            o["share"].append(float(ok.mean()))
            o["risk"].append(r)
            o["ok"].append(r <= a)
            c = rule.uncertainty.name
            o["chosen"][c] = o["chosen"].get(c, 0) + 1
            if feats is not None:  # the published rule on the judge's own verdict
                conf, verdict = _judge_verdict(feats)
                wrong = losses(verdict, y, tol)
                thr = published_threshold(conf[lab], wrong[lab], a, DELTA)
                keep = conf[test] >= thr
                o.setdefault("pub_share", []).append(float(keep.mean()))
                o.setdefault("pub_ok", []).append(
                    (float(wrong[test][keep].mean()) if keep.any() else 0.0) <= a)
                # the same rule on scoreband's map of the score (fitted on the training
                # share; every labeled row calibrates: generous to the reference)
                wrong = losses(rule.map.predict(score), y, tol)
                thr = published_threshold(conf[lab], wrong[lab], a, DELTA)
                keep = conf[test] >= thr
                o.setdefault("pubmap_share", []).append(float(keep.mean()))
                o.setdefault("pubmap_ok", []).append(
                    (float(wrong[test][keep].mean()) if keep.any() else 0.0) <= a)
    res = {}
    for a in ALPHAS:
        o = out[a]
        res[str(a)] = {"accepted": float(np.mean(o["share"])),
                       "risk": float(np.mean(o["risk"])),
                       "risk_ok_share": float(np.mean(o["ok"])), "chosen": o["chosen"],
                       "published": float(np.mean(o["pub_share"])) if "pub_share" in o
                       else None,
                       "published_ok_share": float(np.mean(o["pub_ok"])) if "pub_ok" in o
                       else None,
                       "published_mapped": float(np.mean(o["pubmap_share"]))
                       if "pubmap_share" in o else None,
                       "published_mapped_ok_share": float(np.mean(o["pubmap_ok"]))
                       if "pubmap_ok" in o else None}
    # what accepting every score risks, under the isotonic and the tolerance map (all rows)
    from scoreband.decisions.maps import fit_map

    for kind in ("isotonic", "tolerance"):
        mp = fit_map(score, y, tol=tol, scale=scale, kind=kind)
        res[f"accept_all_risk_{kind}"] = float(losses(mp.predict(score), y, tol).mean())
    return res


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--judge-dir", type=Path)
    ap.add_argument("--thumb-dir", type=Path)
    ap.add_argument("--judges", default="qwen,4omini,dsr1")
    ap.add_argument("--resplits", type=int, default=20)
    ap.add_argument("--labeled", type=int, default=1000)
    ap.add_argument("--train-frac", type=float, default=0.5)
    ap.add_argument("--by", default="auto")
    ap.add_argument("--map", default="tolerance")
    ap.add_argument("--start", default="likely")
    ap.add_argument("--only", default="", help="substring of the table names to run")
    ap.add_argument("--tolerance", type=float, default=None,
                    help="tolerance on the 1-5 scale (default 0.5)")
    ap.add_argument("--grid-size", type=int, default=None,
                    help="thresholds tested (default: one per 20 calibration rows)")
    ap.add_argument("--crossfit-map", action="store_true",
                    help="the training share's losses from a cross-fitted map")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    tables = []
    if args.judge_dir:
        tables += list(judge_tables(args.judge_dir, args.judges.split(",")))
    if args.thumb_dir:
        tables += list(thumb_tables(args.thumb_dir))
    tables = [t for t in tables if args.only in t[0]]
    print(f"labeled {args.labeled} (train share {args.train_frac}), map {args.map}, "
          f"uncertainty {args.by}, start {args.start}, delta {DELTA}, {args.resplits} resplits, "
          f"grid {args.grid_size or 'one per 20 calibration rows'}, "
          f"crossfit map {args.crossfit_map}, tolerance {args.tolerance or 0.5}")
    print(f"{'table':32s} {'n':>5s} {'all-risk':>8s} | "
          + " | ".join(f"a={a}: accepted  risk  P(risk<=a)" for a in ALPHAS))
    results = {}
    for name, score, feats, y, scale, tol in tables:
        tol = args.tolerance if args.tolerance is not None else tol
        if len(y) < args.labeled + 200:
            continue
        t = time.perf_counter()
        r = run_table(score, feats, y, scale, tol, resplits=args.resplits,
                      labeled=args.labeled, train_frac=args.train_frac, by=args.by,
                      map_=args.map, start=args.start, grid_size=args.grid_size,
                      crossfit_map=args.crossfit_map)
        results[name] = r
        row = f"{name:32s} {len(y):5d} {r['accept_all_risk_isotonic']:8.3f} | " + " | ".join(
            f"{r[str(a)]['accepted']:13.3f} {r[str(a)]['risk']:5.3f} "
            f"{r[str(a)]['risk_ok_share']:11.2f}"
            + ("" if r[str(a)]["published"] is None else
               f" (published {r[str(a)]['published']:.3f} / on the map "
               f"{r[str(a)]['published_mapped']:.3f}, P(risk<=a) "
               f"{r[str(a)]['published_mapped_ok_share']:.2f})") for a in ALPHAS)
        print(row + f"  ({time.perf_counter() - t:.0f} s; "
              f"{max(r['0.2']['chosen'], key=r['0.2']['chosen'].get)})", flush=True)
    if results:
        for a in ALPHAS:
            acc = np.mean([r[str(a)]["accepted"] for r in results.values()])
            ok = np.mean([r[str(a)]["risk_ok_share"] for r in results.values()])
            pub = [r[str(a)]["published"] for r in results.values()
                   if r[str(a)]["published"] is not None]
            ours = [r[str(a)]["accepted"] for r in results.values()
                    if r[str(a)]["published"] is not None]
            pm = [r[str(a)]["published_mapped"] for r in results.values()
                  if r[str(a)]["published"] is not None]
            if pm:
                print(f"alpha {a}: the published rule on scoreband's map {np.mean(pm):.3f} "
                      f"(scoreband ahead or equal on "
                      f"{sum(o >= p - 1e-9 for o, p in zip(ours, pm, strict=True))} of "
                      f"{len(pm)} judge tables)")
            print(f"mean over {len(results)} tables at alpha {a}: accepted {acc:.3f}, "
                  f"P(risk <= alpha) {ok:.3f}"
                  + (f"; judge tables {np.mean(ours):.3f} vs the published rule on the "
                     f"judge's own verdict {np.mean(pub):.3f} (ahead or equal on "
                     f"{sum(o >= p - 1e-9 for o, p in zip(ours, pub, strict=True))} of "
                     f"{len(pub)})" if pub else ""))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
