"""Simulated tables with a known truth for the label-design checks: one definition shared by
the seeded tests (``tests/system_level``) and the benchmarks (``benchmarks/label_designs.py``),
so that a number in RESULTS and the test that guards it come from the same draws.

* :func:`thumb_like`: a THumB-like table (captioning systems x images, a metric correlated
  ~0.5 with a 1-5 human score), and :func:`newcomer_trial`, the decisions issue's newcomer:
  prior labels, ``--propose-labels``, the proposed rows labeled, ``systems`` before and after.
* :func:`spread_tables` and :func:`spread_design`: a user's own Poisson design with
  probabilities spanning 20x and no floor, on arrays (draws x systems x items).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

__all__ = ["thumb_like", "newcomer_trial", "spread_tables", "spread_design", "NEWCOMER_KW"]

#: the columns of a :func:`thumb_like` table, as ``systems_study`` takes them
NEWCOMER_KW = dict(system_col="system", scores=["metric"], target="human", scale="1,5",
                   item_col="image")


def thumb_like(rng, n_items: int = 500, k: int = 5) -> pd.DataFrame:
    """``k`` systems x ``n_items`` images: ``truth`` (1-5, an image effect shared by the
    systems plus noise, system ``s`` 0.08 s better) and ``metric`` (0.5 (truth - 3) plus
    noise, biased 0.1 s), columns ``system``, ``image``, ``metric``, ``truth``."""
    q = rng.normal(0, 0.6, n_items)
    frames = []
    for s in range(k):
        h = np.clip(3.2 + 0.08 * s + q + rng.normal(0, 0.55, n_items), 1, 5)
        m = 0.5 * (h - 3) + rng.normal(0, 0.75, n_items) + 0.1 * s
        frames.append(pd.DataFrame({"system": f"sys{s}", "image": np.arange(n_items),
                                    "metric": m, "truth": h}))
    return pd.concat(frames, ignore_index=True)


def newcomer_trial(rng, seed: int, *, n_prior: int = 50, n_proposed: float = 30,
                   adaptive: bool = True) -> dict:
    """One newcomer's round on a fresh :func:`thumb_like` table: ``n_prior`` images labeled
    for every system, ``propose_labels`` of ``n_proposed`` per system by image (``seed``),
    the proposed rows labeled, ``systems`` on the prior labels alone and on all of them with
    ``inclusion_prob``. Returns ``truth`` (each system's mean), ``alone`` and ``both`` (the
    per-system results) and ``table`` (the proposal's table with its labels)."""
    from scoreband.system_level.propose import propose_labels
    from scoreband.system_level.study import systems_study

    df = thumb_like(rng)
    prior = rng.permutation(df.image.max() + 1)[:n_prior]
    df["human"] = np.where(df.image.isin(prior), df.truth, np.nan)
    truth = df.groupby("system").truth.mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = systems_study(df.drop(columns="truth"), **NEWCOMER_KW).doc["systems"]
        prop = propose_labels(df.drop(columns="truth"), system_col="system",
                              n_labels=n_proposed, scores=["metric"], target="human",
                              scale="1,5", item_col="image", seed=seed,
                              adaptive=adaptive).table
        prop["human"] = np.where(prop.propose_label | prop.human.notna(), df.truth, np.nan)
        both = systems_study(prop.drop(columns=["propose_label"]),
                             inclusion_prob="inclusion_prob", **NEWCOMER_KW).doc["systems"]
    return {"truth": truth, "alone": alone, "both": both, "table": prop}


def spread_tables(rng, shape) -> tuple[np.ndarray, np.ndarray]:
    """Targets on [0, 1] (a 1-5 rating in half steps) and a metric mapped onto them
    (correlation ~0.6), arrays of ``shape``."""
    q = rng.uniform(0, 1, shape)
    y = np.clip(np.round((1.5 + 3 * q + rng.normal(0, 0.8, shape)) * 2) / 2, 1, 5)
    return (y - 1) / 4, 0.1 + 0.75 * (q + rng.normal(0, 0.35, shape))


def spread_design(rng, mode: str, f, n: float) -> np.ndarray:
    """Inclusion probabilities with a 20x range, ``n`` expected labels per system (last
    axis), no floor: ``unrelated`` to the rows, ``rising`` or ``falling`` with the metric."""
    if mode == "unrelated":
        v = np.exp(rng.uniform(0, np.log(20), f.shape))
    else:
        x = np.clip((f - 0.1) / 0.75, 0, 1)
        v = np.exp(np.log(20) * (x if mode == "rising" else 1 - x))
    return np.minimum(v * n / v.sum(-1, keepdims=True), 1.0)
