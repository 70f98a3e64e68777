"""scoreband's methods on real public tables: judge log-probs against expert means, and caption
metrics against human scores. Prints side-by-side tables; writes real_tables.json.

    python benchmarks/real_tables.py --judge-dir DIR [--thumb-dir DIR] [--seeds 20]
        [--judges qwen,4omini] [--out real_tables.json]

Data (not part of scoreband: these releases carry no licence, so nothing is committed; the
script only reads a local folder):

* ``--judge-dir``: the repository of "Analyzing Uncertainty of LLM-as-a-Judge" (arXiv
  2509.18658), github.com/BruceSheng1202/Analyzing_Uncertainty_of_LLM-as-a-Judge at commit
  cc9a9cf: ``git clone`` it and ``git checkout cc9a9cf``. Read: ``model_logits/<judge>/
  <Task>_<dim>_logits.csv`` (log-probs of the score tokens 1..5 and the mean of 3 experts) and
  the paper's own results ``interval_results/Summary_continuous_0.csv``.
* ``--thumb-dir``: a folder holding ``mscoco/mscoco_THumB-1.0.jsonl`` from
  github.com/jungokasai/THumB and ``results/mscoco/<SYS>||<METRIC>.csv`` from
  github.com/jungokasai/billboard (per-caption CLIPScore, RefCLIPScore, CIDEr, ...).

Every calibrator is built from its split's seed (``seed=``), as ``scoreband evaluate`` builds
them since issue 30: a learned method's training share is drawn anew in each split.

Protocol: as the paper's, repeated random 50/50 calibration/test splits (seed s = 0..seeds-1),
alpha = 0.1, every band snapped to the achievable targets (means of 3 ratings:
``adjust_boundary`` with 3 ratings) and reported on the native 1-5 scale. Every scoreband
number comes from :func:`scoreband.evaluation.evaluate_splits`, the code behind ``scoreband
evaluate``. The paper's R2CCP width is of the hull of its sets, without snapping.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from scoreband.conformal import make_calibrator
from scoreband.datatypes import Predictions, Scale
from scoreband.evaluation import evaluate_splits
from scoreband.logprobs import expected_score

LIKERT = Scale(1, 5, integer=True)
DIMS = ("coherence", "consistency", "fluency", "relevance")
TASKS = ("Summeval", "Dialsumm")
JUDGE_METHODS = ("split", "fitted", "cqr", "cqr-rand", "chr", "r2ccp", "auto")
BAND = (0.88, 0.935)


def judge_cell(path: Path, seeds: int, methods=JUDGE_METHODS, decimals: int | None = None
               ) -> dict:
    """Every method on one (judge, task, dimension) table (``cqr-rand``: CQR with randomised
    tie-breaking). ``decimals``: the targets rounded so, then read back onto the achievable
    means of 3 ratings as ``scoreband evaluate --n-ratings 3`` reads a rounded table."""
    from scoreband.conformal.boundary import snap_to_grid

    df = pd.read_csv(path)
    lp = df.iloc[:, :5].to_numpy(float)
    y = df.iloc[:, 5].to_numpy(float)
    if decimals is not None:
        y, _, bad = snap_to_grid(np.round(y, decimals), LIKERT, 3, decimals=decimals)
        assert not bad, bad
    e = expected_score(lp)
    pred = Predictions(LIKERT.to01(e), features=lp, n_ratings=np.full(len(y), 3.0))
    out = {}
    for method in methods:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = evaluate_splits(
                pred, LIKERT.to01(y),
                lambda seed=0, m=method: make_calibrator(
                    m.removesuffix("-rand"), 0.1, scale=LIKERT, adjust_boundary=True,
                    randomize=True if m.endswith("-rand") else None, seed=seed),
                seeds=seeds, adjust_boundary=True, n_ratings=np.full(len(y), 3.0))
        a = res["after"]
        out[method] = {"coverage": a["coverage"]["mean"], "width": a["sharpness_native"]["mean"],
                       "seconds_per_split": (time.perf_counter() - t) / seeds}
        if method == "r2ccp":  # its union-of-intervals sets, beside the hull
            out["r2ccp-set"] = {"coverage": a["set_coverage"]["mean"],
                                "width": a["set_length_native"]["mean"]}
        if method == "auto":
            out[method]["choices"] = _auto_choices(pred, LIKERT.to01(y), seeds)
    return out


def _auto_choices(pred, y01, seeds) -> dict:
    """Which method auto chose in each split (same splits as evaluate_splits)."""
    from scoreband.evaluation import split_indices

    counts: dict[str, int] = {}
    for s in range(seeds):
        cal, _ = split_indices(len(y01), 0.5, np.random.default_rng(s))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = make_calibrator("auto", 0.1, scale=LIKERT, adjust_boundary=True)
            a.fit(pred.take(cal), y01[cal])
        counts[a.choice] = counts.get(a.choice, 0) + 1
    return counts


def run_judges(root: Path, judges: list[str], seeds: int) -> dict:
    paper = pd.read_csv(root / "interval_results" / "Summary_continuous_0.csv")
    res = {}
    for judge in judges:
        for task in TASKS:
            for dim in DIMS:
                path = root / "model_logits" / judge / f"{task}_{dim}_logits.csv"
                if not path.exists():
                    sys.exit(f"missing {path}: see this script's docstring for the data")
                t = time.perf_counter()
                cell = judge_cell(path, seeds)
                sel = paper[(paper.Model == judge) & (paper.Dataset == task)
                            & (paper.Dimension == dim)]
                cell["paper"] = {r.Method: {"coverage": r.Coverage_mean, "width": r.Width_mean}
                                 for r in sel.itertuples()}
                # the paper's best method: the narrowest of its own whose coverage >= 0.88
                ok = {m: v for m, v in cell["paper"].items() if v["coverage"] >= 0.88}
                cell["paper_best"] = ({"method": min(ok, key=lambda m: ok[m]["width"]),
                                       **ok[min(ok, key=lambda m: ok[m]["width"])]}
                                      if ok else None)
                res[f"{judge}/{task}/{dim}"] = cell
                print(f"{judge}/{task}/{dim}: {time.perf_counter() - t:.0f} s", file=sys.stderr,
                      flush=True)
    return res


def print_judges(res: dict) -> None:
    cols = ["split", "fitted", "cqr", "cqr-rand", "chr", "r2ccp", "r2ccp-set", "auto"]
    print("\nJudge tables (coverage / width on 1-5; bands snapped to the 13 achievable means)")
    print(f"{'judge/task/dim':26s} {'paper R2CCP':>11s} " + " ".join(f"{c:>11s}" for c in cols))
    wins = in_band = cells = 0
    not_wider = 0
    for key, cell in res.items():
        p = cell["paper"].get("R2CCP", {"coverage": np.nan, "width": np.nan})
        row = f"{key:26s} {p['coverage']:.3f}/{p['width']:.2f} "
        row += " ".join(f"{cell[c]['coverage']:.3f}/{cell[c]['width']:.2f}" for c in cols)
        print(row)
        if key.split("/")[0] in ("qwen", "4omini"):
            cells += 1
            a = cell["auto"]
            wins += a["width"] < p["width"] and BAND[0] <= a["coverage"] <= BAND[1]
            in_band += all(BAND[0] <= cell[c]["coverage"] <= BAND[1]
                           for c in ("split", "cqr-rand", "chr", "auto"))
            not_wider += a["width"] <= cell["split"]["width"] * 1.02
    print(f"\nauto narrower than the paper's R2CCP at coverage in {list(BAND)}: {wins} of {cells}"
          " cells (Qwen, GPT-4o-mini)")
    best_wins, rows = 0, []
    for key, cell in res.items():
        b, a = cell.get("paper_best"), cell["auto"]
        win = b is not None and a["width"] < b["width"] and BAND[0] <= a["coverage"] <= BAND[1]
        best_wins += win
        rows.append(f"  {key:28s} paper best {b['method'] if b else '-':12s} "
                    f"{b['coverage'] if b else np.nan:.3f}/{b['width'] if b else np.nan:.2f}"
                    f"  auto {a['coverage']:.3f}/{a['width']:.2f}  {'win' if win else 'miss'}")
    print(f"auto narrower than the paper's best method (narrowest of its own with coverage "
          f">= 0.88) at coverage in {list(BAND)}: {best_wins} of {len(res)} cells "
          "(target >= 22 of 24)")
    print("\n".join(rows))
    print(f"split, cqr --randomize, chr and auto all with coverage in {list(BAND)}: {in_band} "
          f"of {cells} cells")
    print(f"auto no wider than split CP + 2 %: {not_wider} of {cells} cells")
    # against the best single column: split on the judge's expected score, raw or fitted
    auto_ok = chr_ok = 0
    for cell in res.values():
        best = min(cell["split"]["width"], cell["fitted"]["width"])
        auto_ok += cell["auto"]["width"] <= 1.02 * best
        chr_ok += cell["chr"]["width"] <= 1.1 * best
    print(f"against split CP on the best single column (the expected score, raw or fitted): "
          f"auto <= 1.02x in {auto_ok} of {len(res)} cells, CHR <= 1.1x in {chr_ok} of "
          f"{len(res)}")
    choices: dict[str, int] = {}
    for cell in res.values():
        for k, v in cell["auto"].get("choices", {}).items():
            choices[k] = choices.get(k, 0) + v
    print(f"auto's choices over all splits: {choices}")
    secs = {m: np.mean([c[m]["seconds_per_split"] for c in res.values()]) for m in JUDGE_METHODS}
    print("seconds per split (fit + predict, ~800 calibration items): "
          + ", ".join(f"{m} {s:.2f}" for m, s in secs.items()))


def run_rounded(root: Path, judge: str, seeds: int, decimals: int, exact: dict) -> dict:
    """split and auto on one judge's tables with the targets rounded to ``decimals``: the
    same bands as the exact targets (the issue's check for rounded tables)."""
    out, same = {}, 0
    for task in TASKS:
        for dim in DIMS:
            key = f"{judge}/{task}/{dim}"
            cell = judge_cell(root / "model_logits" / judge / f"{task}_{dim}_logits.csv",
                              seeds, methods=("split", "auto"), decimals=decimals)
            eq = all(abs(cell[m][k] - exact[key][m][k]) < 1e-12 for m in ("split", "auto")
                     for k in ("coverage", "width"))
            same += eq
            out[key] = {"split": cell["split"], "auto": cell["auto"], "identical": eq}
    print(f"\ntargets rounded to {decimals} decimals ({judge}): identical coverage and width "
          f"for split and auto in {same} of {len(out)} cells")
    return out


# ------------------------------------------------------------------------------ THumB
def thumb_table(root: Path) -> tuple[pd.DataFrame, list[str]]:
    h = pd.read_json(root / "mscoco" / "mscoco_THumB-1.0.jsonl", lines=True)
    h["seg_id"] = h["seg_id"].astype(str)
    frames = []
    for f in sorted((root / "results" / "mscoco").glob("*||*.csv")):
        d = pd.read_csv(f, dtype={"seg_id": str})
        frames.append(d[["SYS", "seg_id", "metric", "score"]])
    m = pd.concat(frames).pivot_table(index=["SYS", "seg_id"], columns="metric",
                                      values="score").reset_index()
    df = h.merge(m, on=["SYS", "seg_id"], how="inner")
    metrics = [c for c in m.columns if c not in ("SYS", "seg_id")]
    return df, metrics


def run_thumb(root: Path, seeds: int) -> dict:
    df, metrics = thumb_table(root)
    scale = Scale(1, 5)  # (P + R) / 2 with penalties: halves and a few tenths, continuous
    y01 = scale.to01(df["human_score"].to_numpy(float))
    res: dict = {"n": len(df), "metrics": {}}
    runs = [(f"{k}", k, None, m) for k in metrics
            for m in ("isotonic", "linear")] + [(f"{k}", k, "raw", None) for k in metrics]

    def ev(make, pred):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = evaluate_splits(pred, y01, make, seeds=seeds)
        return {"coverage": r["after"]["coverage"]["mean"],
                "width": r["after"]["sharpness_native"]["mean"],
                "pearson": r["after"]["pearson"]["mean"]}

    for name, col, raw, kind in runs:
        x = df[col].to_numpy(float)
        rec = res["metrics"].setdefault(name, {})
        if raw:  # read on its own min-max range as if it were the target's scale: no map
            lo, hi = np.nanmin(x), np.nanmax(x)
            rec["no-map"] = ev(lambda seed=0: make_calibrator("split", 0.1, scale=scale,
                                                              seed=seed),
                               Predictions((x - lo) / (hi - lo)))
        else:
            rec[kind] = ev(lambda seed=0, k=kind: make_calibrator("split", 0.1, scale=scale,
                                                                  map=k, seed=seed),
                           Predictions(x))
    feats = df[metrics].to_numpy(float)
    pred = Predictions(df["RefCLIPS"].to_numpy(float), features=feats)
    res["all-metrics auto"] = ev(
        lambda seed=0: make_calibrator("auto", 0.1, scale=scale, map="isotonic", seed=seed),
        pred)
    res["marginal"] = ev(lambda seed=0: make_calibrator("marginal", 0.1, scale=scale,
                                                        seed=seed), pred)
    # the learned methods on every metric's column at once (features alone)
    feat = Predictions(np.full(len(df), np.nan), features=feats)
    for method in ("fitted", "chr", "cqr", "auto"):
        res[f"features {method}"] = ev(
            lambda seed=0, m=method: make_calibrator(m, 0.1, scale=scale, seed=seed), feat)
    return res


def print_thumb(res: dict) -> None:
    print(f"\nTHumB 1.0 MSCOCO ({res['n']} captions of 4 systems; human score on 1-5): "
          "split CP, coverage / width")
    print(f"{'metric':14s} {'no map':>14s} {'linear map':>14s} {'isotonic map':>14s}")
    for k, v in res["metrics"].items():
        print(f"{k:14s} " + " ".join(f"{v[m]['coverage']:.3f} / {v[m]['width']:.2f} "
                                     for m in ("no-map", "linear", "isotonic")))
    a, m = res["all-metrics auto"], res["marginal"]
    print(f"auto on all metrics (isotonic map of RefCLIPScore + features): "
          f"{a['coverage']:.3f} / {a['width']:.2f}; no-model marginal band: "
          f"{m['coverage']:.3f} / {m['width']:.2f}")
    best = min(min(v["isotonic"]["width"], v["linear"]["width"]) for v in res["metrics"].values())
    learned = {k.split()[-1]: v for k, v in res.items() if k.startswith("features ")}
    print("on all 16 metric columns as features (no median): " + ", ".join(
        f"{k} {v['coverage']:.3f} / {v['width']:.2f}" for k, v in learned.items()))
    print(f"best single column (split CP, mapped): {best:.2f}; auto <= 1.02x: "
          f"{a['width'] <= 1.02 * best and learned['auto']['width'] <= 1.02 * best}; "
          f"CHR <= 1.1x: {learned['chr']['width'] <= 1.1 * best}")


def speed(n: int = 5000, repeats: int = 3) -> dict:
    """Seconds per split (fit + predict) of CHR and auto on ``n`` items x 5 log-prob
    features, shaped like the judge tables (means of 3 ratings on 1-5)."""
    rng = np.random.default_rng(0)
    quality = rng.beta(4, 2, n) * 4 + 1
    y = np.clip(np.rint(quality[:, None] + rng.normal(0, 0.7, (n, 3))), 1, 5).mean(1)
    noisy = quality + rng.normal(0, 0.6, n)
    lp = -0.5 * ((np.arange(1, 6)[None, :] - noisy[:, None]) / 0.8) ** 2
    pred = Predictions(LIKERT.to01(expected_score(lp)), features=lp, n_ratings=np.full(n, 3.0))
    out = {}
    make_calibrator("chr", 0.1, scale=LIKERT).fit(pred.take(slice(0, 200)),
                                                  LIKERT.to01(y[:200]))  # imports, warm-up
    for method in ("chr", "auto"):
        times = []
        for r in range(repeats):
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                c = make_calibrator(method, 0.1, scale=LIKERT, adjust_boundary=True, seed=r)
                c.fit(pred, LIKERT.to01(y))
                c.predict(pred)
            times.append(time.perf_counter() - t)
        out[method] = float(np.median(times))
    print(f"\nspeed, {n} items x 5 features, fit + predict per split (median of {repeats}): "
          + ", ".join(f"{m} {t:.2f} s" for m, t in out.items()) + " (target < 3 s)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge-dir", type=Path)
    ap.add_argument("--thumb-dir", type=Path)
    ap.add_argument("--judges", default="qwen,4omini,dsr1")
    ap.add_argument("--rounded", type=int, default=2,
                    help="also run split and auto with the targets rounded to this many "
                         "decimals (must give the bands of the exact targets)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("real_tables.json"))
    ap.add_argument("--speed-only", action="store_true",
                    help="only time CHR and auto on 5,000 synthetic items (needs no data)")
    a = ap.parse_args()
    doc: dict = {"seeds": a.seeds, "speed": speed()}
    if a.speed_only:
        return
    if not (a.judge_dir or a.thumb_dir):
        ap.error("give --judge-dir and/or --thumb-dir (see the docstring for the data)")
    if a.judge_dir:
        doc["judges"] = run_judges(a.judge_dir, a.judges.split(","), a.seeds)
        print_judges(doc["judges"])
        doc["rounded"] = run_rounded(a.judge_dir, a.judges.split(",")[0], a.seeds, a.rounded,
                                     doc["judges"])
    if a.thumb_dir:
        doc["thumb"] = run_thumb(a.thumb_dir, a.seeds)
        print_thumb(doc["thumb"])
    from scoreband.json_io import write_json

    write_json(a.out, doc)
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
