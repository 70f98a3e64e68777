"""The inputs and the recipe of the golden files (``tests/golden/*.json``).

Frozen: the golden files were generated from these exact tables and options, so nothing
here may change without regenerating them (``python -m tests.golden.cases``) - and a
regeneration is only right when a change of the bands is intended and said so in the commit.

The inputs are the same bits on every machine: every generated prediction is rounded to
:data:`DECIMALS` decimals (:func:`fixed`), because the generators' ``exp`` / ``log`` / ``**``
(numpy's SIMD loops, libm's FMA paths) differ in the last bit between CPUs and library
releases, and a row's tie-breaking draw is a hash of its values' bits - one last bit in an
input drew another uniform and changed a randomised band (issue 41). Targets are exact
rationals (means of integer ratings) and are left as they are.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).parent
BANDS_FILE = HERE / "bands.json"
EVALUATE_FILE = HERE / "evaluate.json"

#: decimals every generated prediction is rounded to: a value within one ulp of a rounding
#: boundary at 1e-9 is about a one-in-10^7 event per value
DECIMALS = 9


def fixed(a):
    """``a`` rounded to :data:`DECIMALS` decimals (``rint`` and a division: the same bits
    on every IEEE machine, unlike the ``exp`` that produced ``a``)."""
    return np.round(np.asarray(a, dtype=float), DECIMALS)


def judge_table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    """Shaped like a real judge table: targets are means of 3 ratings on 1-5 (ties, skew
    towards the top), five score-token log-probs, the expected score, an uncalibrated interval,
    an embedding and a task."""
    rng = np.random.default_rng(seed)
    quality = rng.beta(4, 2, n) * 4 + 1
    ratings = np.clip(np.rint(quality[:, None] + rng.normal(0, 0.7, (n, 3))), 1, 5)
    human = ratings.mean(1)
    noisy = quality + rng.normal(0, 0.6, n)
    k = np.arange(1, 6)
    lp = -0.5 * ((k[None, :] - noisy[:, None]) / 0.8) ** 2
    lp -= np.log(np.exp(lp).sum(1, keepdims=True))
    df = pd.DataFrame(fixed(lp), columns=[f"logp_{i}" for i in k])
    df["judge_expected"] = fixed(np.exp(lp) @ k)
    spread = fixed(rng.uniform(0.2, 0.8, n))
    df["lo"] = np.clip(df["judge_expected"] - spread, 1, 5)
    df["hi"] = np.clip(df["judge_expected"] + spread, 1, 5)
    task = rng.choice(["coherence", "fluency", "relevance"], n)
    centers = {"coherence": 0.0, "fluency": 3.0, "relevance": 6.0}
    for j in range(2):
        df[f"emb_{j}"] = fixed([centers[t] + rng.normal() for t in task])
    df["task"] = task
    df["human"] = human
    df["ratings"] = [";".join(str(int(v)) for v in r) for r in ratings]
    df["clip_score"] = fixed(0.1 + 0.3 * ((noisy - 1) / 4).clip(0, 1) ** 1.5)  # another scale
    return df


def array_data(n: int, seed: int):
    """Predictions holding every input a method can need (a point prediction, an
    uncalibrated interval, features, an embedding, rater counts), targets on [0, 1] that are
    means of 3 ratings on 1-5 (so ties), and a group label per item."""
    from scoreband.datatypes import Predictions

    rng = np.random.default_rng(seed)
    q = rng.beta(4, 2, n)
    y = np.clip(np.rint(q[:, None] * 4 + rng.normal(0, 0.7, (n, 3))), 0, 4).mean(1) / 4
    med = fixed(np.clip(q + rng.normal(0, 0.08, n), 0, 1))
    spread = fixed(rng.uniform(0.05, 0.2, n))
    pred = Predictions(med, lo=np.clip(med - spread, 0, 1), hi=np.clip(med + spread, 0, 1),
                       features=fixed(np.c_[med, rng.normal(0, 1, n),
                                            q + rng.normal(0, 0.2, n)]),
                       embedding=fixed(rng.normal(0, 1, (n, 3)) + q[:, None]),
                       n_ratings=np.full(n, 3.0))
    groups = rng.choice(["a", "b", "c"], n)
    return pred, y, groups


#: extra cases beyond every registered method with its defaults: name -> (method, options)
EXTRA = {
    "split+randomize": ("split", {"randomize": True}),
    "cqr+randomize": ("cqr", {"randomize": True}),
    "marginal+randomize": ("marginal", {"randomize": True}),
    "chr+no-randomize": ("chr", {"randomize": False}),
    "auto+adjust_boundary": ("auto", {"adjust_boundary": True}),
    "split+mondrian-given": ("split", {"mondrian": "given"}),
    "chr+mondrian-given": ("chr", {"mondrian": "given"}),
    "crc+mondrian-difficulty": ("crc", {"mondrian": "difficulty"}),
    "split+isotonic": ("split", {"map": "isotonic"}),
    "fitted+linear": ("fitted", {"map": "linear"}),
}


def method_cases() -> dict[str, tuple[str, dict]]:
    from scoreband.conformal import METHODS

    out = {name: (name, {}) for name in METHODS.names()}
    out.update(EXTRA)
    return out


def _hex(a) -> list[str] | None:
    return None if a is None else [float(v).hex() for v in np.asarray(a, dtype=float)]


def _canonical(obj) -> str:
    return json.dumps(obj, sort_keys=True, allow_nan=True)


def band_record(method: str, options: dict) -> dict:
    """Fit ``method`` on fixed seeded items and record its test bands (hex floats) and its
    saved state (canonical JSON text)."""
    from scoreband.conformal import make_calibrator
    from scoreband.datatypes import Scale

    scale = Scale(1, 5, integer=True)
    pred, y, groups = array_data(300, 0)
    test, _, test_groups = array_data(60, 1)
    cal = make_calibrator(method, 0.1, scale=scale, seed=1, n_clusters=3, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal.fit(pred, y, groups=groups)
        band = cal.predict(test, groups=test_groups)
    state = _canonical(cal.get_state())
    return {"method": method, "options": options,
            "lo01": _hex(band.lo01), "hi01": _hex(band.hi01), "median01": _hex(band.median01),
            "full_range": np.asarray(band.full_range, dtype=bool).tolist(),
            "sets01": None if band.sets01 is None else repr(band.sets01),
            "band_method": band.method,
            "state_sha256": hashlib.sha256(state.encode()).hexdigest(), "state": state}


def all_band_records() -> dict:
    return {name: band_record(m, kw) for name, (m, kw) in sorted(method_cases().items())}


EXAMPLE_COLUMNS = dict(ratings="ratings", scale=(1, 5), median="median", pred_scale=(0, 1))
JUDGE_COLUMNS = dict(ratings="ratings", scale=(1, 5),
                     median="judge_expected", lo="lo", hi="hi", features="logp_*")
EVALUATE_CASES = {
    "example/split": ("example", {**EXAMPLE_COLUMNS}, {"method": "split"}),
    "example/crc": ("example", {**EXAMPLE_COLUMNS, "lo": "q05", "hi": "q95"},
                    {"method": "crc"}),
    "judge/chr": ("judge", JUDGE_COLUMNS, {"method": "chr"}),
    "judge/auto": ("judge", JUDGE_COLUMNS, {"method": "auto"}),
}


def evaluate_record(table: str, columns: dict, config: dict) -> str:
    """``scoreband.api.evaluate`` on a fixed table, 2 seeds, as canonical JSON text."""
    from scoreband import api

    df = (api.example_table() if table == "example" else judge_table(400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = api.evaluate(df, **columns, **config, seeds=2)
    return _canonical(res)


def all_evaluate_records() -> dict:
    return {name: evaluate_record(*case) for name, case in EVALUATE_CASES.items()}


def write() -> None:
    BANDS_FILE.write_text(json.dumps(all_band_records(), indent=1, sort_keys=True) + "\n")
    EVALUATE_FILE.write_text(json.dumps(all_evaluate_records(), indent=1, sort_keys=True)
                             + "\n")


if __name__ == "__main__":
    write()
