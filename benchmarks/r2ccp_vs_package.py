"""scoreband's R2CCP vs the `R2CCP` PyPI package (Guha et al.) on the same judge features,
and scoreband's CQR vs MAPIE's conformalized quantile regressor.

    python benchmarks/r2ccp_vs_package.py [--package-python PATH] [--epochs 100] [--seeds 3]

The package cannot live in scoreband's environment: R2CCP 0.0.8 requires torchvision (a
PyPI torchvision breaks a CPU torch) and pyinterval (its crlibm dependency does not build on
Python 3.11). It runs in a side environment made like this (the package's only torchvision
use, a ResNet option, is never reached; the runner below hides the import):

    python -m venv /tmp/r2venv && /tmp/r2venv/bin/pip install torch==2.13.0 && \
    /tmp/r2venv/bin/pip install R2CCP==0.0.8 --no-deps && \
    /tmp/r2venv/bin/pip install pytorch-lightning configargparse scikit-learn scipy

Both sides get the same items: the package's fit() splits its input into a training and a
calibration part itself (test_size 0.2 by default; we pass 0.5, as scoreband's train_frac),
so both see the same n and the same test items. Coverage and length are of the prediction
*sets* (unions of intervals) on the native 1-5 scale. Target (issue 6): >= 5x faster at
equal coverage. The package needs a tiny target jitter (see main()): a float32 indexing bug
crashes it on targets equal to the training maximum, which discrete ratings always have.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from scoreband import metrics as M
from scoreband.conformal import CQR, R2CCP
from scoreband.datatypes import Predictions, Scale
from scoreband.world import make_dataset
from scoreband.world.judges import SIMULATED_JUDGES, judge_logprobs

PACKAGE_RUNNER = r"""
import json, os, sys, time, types, importlib.machinery as im
import numpy as np
import pytorch_lightning  # imported before the stub so that it sees no torchvision
for name in ("torchvision", "torchvision.models"):
    m = types.ModuleType(name); m.__spec__ = im.ModuleSpec(name, None); sys.modules[name] = m
sys.modules["torchvision"].models = sys.modules["torchvision.models"]
from R2CCP.main import R2CCP
del sys.modules["torchvision"], sys.modules["torchvision.models"]
d = np.load(sys.argv[1]); epochs = int(sys.argv[2]); seed = int(sys.argv[3])
t = time.perf_counter()
m = R2CCP({"model_path": os.path.join(sys.argv[4], "m.pth"), "max_epochs": epochs,
           "num_workers": 0, "seed": seed, "test_size": 0.5, "alpha": 0.1})
m.fit(d["Xfit"].astype(np.float32), d["yfit"].astype(np.float32))
fit = time.perf_counter() - t
t = time.perf_counter()
cov, lengths = m.get_coverage_length(d["Xtest"].astype(np.float32), d["ytest"].astype(np.float32))
pred = time.perf_counter() - t
print("RESULT " + json.dumps({"fit_s": fit, "predict_s": pred, "coverage": float(np.mean(cov)),
                              "length": float(np.mean(lengths))}))
"""


def ours(Xfit, yfit, Xtest, ytest, scale, epochs, seed):
    t = time.perf_counter()
    c = R2CCP(0.1, scale=scale, seed=seed, epochs=epochs, train_frac=0.5)
    pf = Predictions(np.zeros(len(yfit)), features=Xfit)
    c.fit(pf, scale.to01(yfit))
    fit = time.perf_counter() - t
    t = time.perf_counter()
    band = c.predict(Predictions(np.zeros(len(ytest)), features=Xtest))
    pred = time.perf_counter() - t
    return {"fit_s": fit, "predict_s": pred,
            "coverage": M.set_coverage(band.sets01, scale.to01(ytest)),
            "length": M.set_length(band.sets01, scale.hi - scale.lo),
            "hull_coverage": M.coverage(band.lo01, band.hi01, scale.to01(ytest))}


def package(python, Xfit, yfit, Xtest, ytest, epochs, seed):
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "data.npz")
        np.savez(f, Xfit=Xfit, yfit=yfit, Xtest=Xtest, ytest=ytest)
        # cwd=d: PyTorch Lightning writes lightning_logs/ into the working directory
        r = subprocess.run([python, "-c", PACKAGE_RUNNER, f, str(epochs), str(seed), d],
                           capture_output=True, text=True, cwd=d)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError("the package run failed:\n" + r.stderr[-2000:])
    return json.loads(line[7:])


def cqr_vs_mapie(X, y, seeds):
    """Our CQR (linear quantile regression, split conformal step) against MAPIE's
    ConformalizedQuantileRegressor with the same scikit-learn QuantileRegressor models."""
    from mapie.regression import ConformalizedQuantileRegressor
    from sklearn.linear_model import QuantileRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = []
    for s in range(seeds):
        rng = np.random.default_rng(100 + s)
        idx = rng.permutation(len(y))
        tr, cal, te = np.split(idx, [len(y) // 4, len(y) // 2])
        t = time.perf_counter()
        ours_c = CQR(0.1, scale=Scale(0, 1), seed=s, train_frac=0.5)
        fit_idx = np.r_[tr, cal]  # our CQR splits its input 50/50 itself: the same sizes
        ours_c.fit(Predictions(np.zeros(len(fit_idx)), features=X[fit_idx]), y[fit_idx])
        b = ours_c.predict(Predictions(np.zeros(len(te)), features=X[te]))
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        est = make_pipeline(StandardScaler(), QuantileRegressor(alpha=0.0, solver="highs"))
        m = ConformalizedQuantileRegressor(est, confidence_level=0.9)
        m.fit(X[tr], y[tr]).conformalize(X[cal], y[cal])
        _, iv = m.predict_interval(X[te])
        t_mapie = time.perf_counter() - t
        lo, hi = np.clip(iv[:, 0, 0], 0, 1), np.clip(iv[:, 1, 0], 0, 1)
        rows.append({"ours_cov": M.coverage(b.lo01, b.hi01, y[te]),
                     "ours_w": M.sharpness(b.lo01, b.hi01),
                     "mapie_cov": M.coverage(lo, hi, y[te]), "mapie_w": M.sharpness(lo, hi),
                     "ours_s": t_ours, "mapie_s": t_mapie})
    return {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package-python", default=os.environ.get("R2CCP_PYTHON",
                                                               "/tmp/r2venv/bin/python"))
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    ds = make_dataset(a.n, 42, n_annotators=3, name="judged")
    judge = SIMULATED_JUDGES[1]
    X = judge_logprobs(judge, ds.true01, ds.tasks)
    scale = Scale(1, 5)
    # R2CCP 0.0.8 indexes bin ceil((y - min) / step) in float32, which is 50 (out of range)
    # for a calibration target exactly at the training maximum: every 5.0 of a Likert scale.
    # A jitter of at most 0.001 (the same for both sides) keeps the package running.
    y = scale.from01(ds.y01) + np.random.default_rng(7).uniform(-1e-3, 1e-3, a.n)
    y = np.clip(y, scale.lo, scale.hi)
    print(f"SIMULATED judge {judge.name}: n = {a.n}, 5 log-prob features, alpha = 0.1, "
          f"epochs = {a.epochs}, {a.seeds} seeds; half the items fit (train + calibration), "
          "half test")
    res = {"ours": [], "package": []}
    have_pkg = os.path.exists(a.package_python)
    for s in range(a.seeds):
        idx = np.random.default_rng(s).permutation(a.n)
        fit, test = idx[: a.n // 2], idx[a.n // 2:]
        res["ours"].append(ours(X[fit], y[fit], X[test], y[test], scale, a.epochs, s))
        if have_pkg:
            res["package"].append(package(a.package_python, X[fit], y[fit], X[test], y[test],
                                          a.epochs, s))
    for who, rows in res.items():
        if not rows:
            print(f"{who:8s}: not run ({a.package_python} not found; see the docstring)")
            continue
        mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
        print(f"{who:8s}: fit {mean['fit_s']:.2f} s, predict {mean['predict_s']:.2f} s, "
              f"set coverage {mean['coverage']:.3f}, set length {mean['length']:.3f}"
              + (f", hull coverage {mean['hull_coverage']:.3f}" if "hull_coverage" in mean
                 else ""))
    if res["package"]:
        f_ours = np.mean([r["fit_s"] + r["predict_s"] for r in res["ours"]])
        f_pkg = np.mean([r["fit_s"] + r["predict_s"] for r in res["package"]])
        print(f"speed-up (fit + predict): {f_pkg / f_ours:.1f}x  (target >= 5x)")
    c = cqr_vs_mapie(X, ds.y01, a.seeds)
    print(f"CQR vs MAPIE ConformalizedQuantileRegressor (same linear quantile models): "
          f"coverage {c['ours_cov']:.3f} vs {c['mapie_cov']:.3f}, width {c['ours_w']:.3f} vs "
          f"{c['mapie_w']:.3f} (on [0, 1]), time {c['ours_s']:.2f} s vs {c['mapie_s']:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
