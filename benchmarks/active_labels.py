"""Active labeling for system means on real tables: coverage and width of the
inverse-probability-weighted PPI++ intervals (``systems --inclusion-prob``) against uniform
labels at equal expected labels, and what ``--propose-labels``' prediction said.

    python benchmarks/active_labels.py --judge-dir DIR --thumb-dir DIR [--reps 40]
        [--labels 30,100] [--out active_labels.json]

Tables (not committed; see real_tables.py for where they come from):

* Dialsumm (``--judge-dir``): 14 summarisation systems (``model_id`` of
  ``evaluations/data/dialsumm.jsonl``, whose rows the logits files follow) x 100 dialogues x
  4 rated dimensions; an item is a (dialogue, dimension), its human score the mean of 3
  experts, the score the qwen judge's expected score; a system's mean is its mean over the 4
  dimensions (strata). Calibrator: CQR with the judge's log-probs as features, Mondrian by
  dimension, fitted on the Summeval tables of the same judge (another corpus).
* THumB (``--thumb-dir``): 5 captioning systems x 500 images, human score 1-5, scores
  RefCLIPS, CLIPS, BERTScore, CIDEr; no calibrator.

Uncertainty sources: ``calibrator`` (band width), ``oracle`` (each stratum x score-tertile
cell's root mean squared residual of the metric, from every human label: the best a residual
model could learn), ``random`` (uninformative). Each resampling draws labels by item
(systematic, one draw for every system) and hides the rest; the truth is each system's mean
over all of its rows. Width ratio: mean interval width with the design over the mean width
with uniform labels (the same number of items, ``systems`` without weights).
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

sys.path.insert(0, str(Path(__file__).parent))
from real_tables import thumb_table  # noqa: E402

from scoreband.system_level.active import (  # noqa: E402
    active_is_worth_it,
    inclusion_probabilities,
    predicted_variance_ratio,
    systematic_draw,
    uninformative_cost,
)
from scoreband.system_level.study import systems_study  # noqa: E402

DIMS = ("coherence", "consistency", "fluency", "relevance")


def _expected(lp):
    p = np.exp(lp - lp.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p @ np.arange(1, 6)


def dialsumm(root: Path, judge: str = "qwen") -> pd.DataFrame:
    rows = [json.loads(line) for line in open(root / "evaluations/data/dialsumm.jsonl")]
    frames = []
    for d in DIMS:
        t = pd.read_csv(root / f"model_logits/{judge}/Dialsumm_{d}_logits.csv")
        lp = t.iloc[:, :5].to_numpy(float)
        frames.append(pd.DataFrame({
            "system": [r["model_id"] for r in rows], "item": [f"{r['id']}|{d}" for r in rows],
            "dim": d, "judge": _expected(lp), "human_score": t.iloc[:, 5].to_numpy(float),
            **{f"lp{k}": lp[:, k] for k in range(5)}}))
    return pd.concat(frames, ignore_index=True)


def dialsumm_calibrator_width(root: Path, df: pd.DataFrame, judge: str = "qwen") -> np.ndarray:
    from scoreband import api

    frames = []
    for d in DIMS:
        t = pd.read_csv(root / f"model_logits/{judge}/Summeval_{d}_logits.csv")
        lp = t.iloc[:, :5].to_numpy(float)
        frames.append(pd.DataFrame({"judge": _expected(lp), "human_score": t.iloc[:, 5],
                                    "dim": d, **{f"lp{k}": lp[:, k] for k in range(5)}}))
    cal_df = pd.concat(frames, ignore_index=True)
    cols = dict(target="human_score", scale=(1, 5), median="judge", pred_scale=(1, 5),
                features=[f"lp{k}" for k in range(5)], groups="dim")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = api.calibrate(cal_df, **cols, method="cqr", alpha=0.1)
        band = api.apply(df, cal).band
    return (band.hi01 - band.lo01) * 4


def oracle_width(df, score, strata) -> np.ndarray:
    """Root mean squared residual of a linear map of ``score`` in each stratum x tertile."""
    y, f = df["human_score"].to_numpy(float), df[score].to_numpy(float)
    r = y - np.poly1d(np.polyfit(f, y, 1))(f)
    st = df[strata].to_numpy() if strata else np.zeros(len(df))
    tert = np.searchsorted(np.quantile(f, [1 / 3, 2 / 3]), f)
    cell = pd.Series(r ** 2).groupby([st, tert]).transform("mean").to_numpy()
    return np.sqrt(cell)


def run(df, scores, strata, u_row, n, reps, seed=0, predict_from="burn-in") -> dict:
    """Active (design from ``u_row``), adaptive (that design only where the predicted gain
    beats its cost under an uninformative uncertainty, else uniform probabilities through the
    same weighted estimator: what ``--propose-labels`` now does) and uniform, ``n`` expected
    labels per system."""
    truth = df.groupby("system")["human_score"].mean()
    items = df.groupby("item").size()
    per_sys = df.groupby("system").size().mean()
    u_item = pd.Series(u_row ** 2).groupby(df["item"].to_numpy()).mean().reindex(items.index)
    budget = n * len(items) / per_sys
    p_item = inclusion_probabilities(np.sqrt(u_item.to_numpy()), budget)
    pi_row = p_item[items.index.get_indexer(df["item"])]
    rng = np.random.default_rng(seed)
    # what the plan would predict from a uniform burn-in of n labeled items: the residuals
    # of the (all-label) map on those items and the design's weights
    y, f = df["human_score"].to_numpy(float), df[scores[0]].to_numpy(float)
    r2 = (y - np.poly1d(np.polyfit(f, y, 1))(f)) ** 2
    burn = df["item"].isin(set(np.random.default_rng([seed, 5]).choice(
        items.index, int(round(budget)), replace=False))).to_numpy()
    pred = {"burn-in": float(np.sqrt(predicted_variance_ratio(r2[burn], pi_row[burn]))),
            "population": float(np.sqrt(predicted_variance_ratio(r2, pi_row))),
            "u": float(np.sqrt(predicted_variance_ratio(u_row ** 2, pi_row)))}
    worth = active_is_worth_it(pred[predict_from], p_item)
    p_uni = np.full(len(p_item), budget / len(p_item))
    kw = dict(system_col="system", scores=scores, target="human", scale="1,5",
              item_col="item", folds=2)
    out = {k: {"cov_m": [], "cov_d": [], "width": [], "width_d": []}
           for k in ("uniform", "active", "adaptive", "active+strata")}
    if strata is None:
        del out["active+strata"]
    for _ in range(reps):
        drawn = systematic_draw(p_item, rng.random(len(p_item)), rng.random())
        lab_items = set(items.index[drawn])
        t_a = df.assign(human=np.where(df["item"].isin(lab_items), df["human_score"], np.nan),
                        pi=pi_row)
        uni = set(rng.choice(items.index, int(round(budget)), replace=False))
        t_u = df.assign(human=np.where(df["item"].isin(uni), df["human_score"], np.nan))
        docs = {"uniform": systems_study(t_u, **kw).doc,
                "active": systems_study(t_a, inclusion_prob="pi", **kw).doc}
        if worth:
            docs["adaptive"] = docs["active"]
        else:
            d_u = systematic_draw(p_uni, rng.random(len(p_uni)), rng.random())
            t_ad = df.assign(human=np.where(df["item"].isin(set(items.index[d_u])),
                                            df["human_score"], np.nan),
                             pi=p_uni[items.index.get_indexer(df["item"])])
            docs["adaptive"] = systems_study(t_ad, inclusion_prob="pi", **kw).doc
        if strata is not None:
            docs["active+strata"] = systems_study(t_a, inclusion_prob="pi", strata=strata,
                                                  **kw).doc
        for k, doc in docs.items():
            o = out[k]
            for s, v in doc["systems"].items():
                o["cov_m"].append(v["ci"][0] <= truth[s] <= v["ci"][1])
                o["width"].append(v["ci"][1] - v["ci"][0])
            for p in doc["pairs"]:
                d = truth[p["a"]] - truth[p["b"]]
                o["cov_d"].append(p["ci"][0] <= d <= p["ci"][1])
                o["width_d"].append(p["ci"][1] - p["ci"][0])
    res = {k: {"coverage_means": float(np.mean(v["cov_m"])),
               "coverage_differences": float(np.mean(v["cov_d"])),
               "width": float(np.mean(v["width"])), "width_differences":
               float(np.mean(v["width_d"]))} for k, v in out.items()}
    for k in res:
        res[k]["ratio_to_uniform"] = res[k]["width"] / res["uniform"]["width"]
        res[k]["ratio_differences"] = (res[k]["width_differences"]
                                       / res["uniform"]["width_differences"])
    res["predicted_width_ratio_burn_in"] = pred["burn-in"]
    res["predicted_width_ratio_population"] = pred["population"]
    res["predicted_width_ratio_from_u"] = pred["u"]
    res["adaptive_design"] = "active" if worth else "uniform"
    res["uninformative_cost"] = uninformative_cost(p_item)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-dir", type=Path)
    ap.add_argument("--thumb-dir", type=Path)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--labels", default="30,100")
    ap.add_argument("--tables", default="dialsumm,thumb")
    ap.add_argument("--out", type=Path, default=Path("active_labels.json"))
    ap.add_argument("--predict-from", default="burn-in", choices=("burn-in", "u"),
                    help="the prediction the adaptive design decides on")
    ap.add_argument("--sources", default="", help="uncertainty sources to run (default all)")
    a = ap.parse_args()
    results: dict = {}
    tables = []
    if a.judge_dir and "dialsumm" in a.tables:
        df = dialsumm(a.judge_dir)
        us = {"calibrator": dialsumm_calibrator_width(a.judge_dir, df),
              "oracle": oracle_width(df, "judge", "dim"),
              "random": np.random.default_rng(9).uniform(0.2, 1.0, len(df))}
        tables.append(("dialsumm", df, ["judge"], "dim", us))
    if a.thumb_dir and "thumb" in a.tables:
        df, _ = thumb_table(a.thumb_dir)
        df = df.rename(columns={"SYS": "system", "seg_id": "item"})
        scores = ["RefCLIPS", "CLIPS", "BERTScore", "CIDEr"]
        us = {"oracle": oracle_width(df, "RefCLIPS", None),
              "random": np.random.default_rng(9).uniform(0.2, 1.0, len(df))}
        tables.append(("thumb", df, scores, None, us))
    for name, df, scores, strata, us in tables:
        print(f"{name}: {df.system.nunique()} systems x {df.item.nunique()} items")
        for src, u in us.items():
            if a.sources and src not in a.sources.split(","):
                continue
            for n in map(int, a.labels.split(",")):
                t = time.time()
                r = run(df, scores, strata, u, n, a.reps, predict_from=a.predict_from)
                results[f"{name}/{src}/{n}"] = r
                line = " ".join(f"{k}: cov {v['coverage_means']:.3f}/{v['coverage_differences']:.3f}"
                                f" ratio {v['ratio_to_uniform']:.3f}/{v['ratio_differences']:.3f}"
                                for k, v in r.items() if isinstance(v, dict))
                print(f"  {src:10s} n={n:3d} {line} | predicted (burn-in) "
                      f"{r['predicted_width_ratio_burn_in']:.3f} (population) "
                      f"{r['predicted_width_ratio_population']:.3f} (from u) "
                      f"{r['predicted_width_ratio_from_u']:.3f} uninformative cost "
                      f"{r['uninformative_cost']:.3f} adaptive design "
                      f"{r['adaptive_design']} [{time.time() - t:.0f} s]",
                      flush=True)
    a.out.write_text(json.dumps(results, indent=1))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
