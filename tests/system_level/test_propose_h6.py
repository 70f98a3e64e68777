"""`propose_labels` labels by the uncertainty only where the burn-in predicts a gain larger
than the design's cost under an uninformative uncertainty; otherwise every candidate gets the
uniform probability, and the document says which and why."""

import numpy as np
import pandas as pd

from scoreband.system_level.propose import propose_labels


def _table(spread, n_items=300, labeled=80, seed=0):
    rng = np.random.default_rng(seed)
    frames = []
    for s in range(2):
        q = rng.uniform(0, 1, n_items)
        task = np.arange(n_items) % 4
        y = np.clip(2 + 2 * q + rng.normal(0, 1, n_items) * np.asarray(spread)[task], 1, 5)
        human = np.where(np.arange(n_items) < labeled, y, np.nan)
        frames.append(pd.DataFrame({"system": f"s{s}", "item": np.arange(n_items),
                                    "task": task.astype(str), "metric": 1.5 + 2 * q + 0.1 * s,
                                    "human": human}))
    return pd.concat(frames, ignore_index=True)


def _propose(df):
    return propose_labels(df, system_col="system", n_labels=30, scores=["metric"],
                          target="human", scale="1,5", strata="task", seed=0)


def test_an_informative_burn_in_keeps_the_design():
    prop = _propose(_table([0.05, 0.1, 0.4, 0.8]))
    d, t = prop.doc, prop.table
    assert d["design"] == "active" and d["mix_used"] == d["mix"]
    assert d["predicted_width_ratio"] < 2 - d["uninformative_cost"]
    cand = t.human.isna()
    assert t.inclusion_prob[cand].max() > 2 * t.inclusion_prob[cand].min()
    assert np.allclose(t[cand].groupby("system").inclusion_prob.sum(), 30)


def test_an_uninformative_burn_in_labels_uniformly():
    prop = _propose(_table([0.3, 0.3, 0.3, 0.3]))
    d, t = prop.doc, prop.table
    assert d["design"] == "uniform" and d["mix_used"] == 1.0, d["design_reason"]
    assert "draws uniformly" in d["advice"]
    cand = t.human.isna()
    assert np.allclose(t.inclusion_prob[cand], 30 / 220)
    assert t.propose_label.groupby(t.system).sum().tolist() == [30, 30]
    # the plain design would have varied with the (noise-fitted) uncertainty
    plain = propose_labels(_table([0.3, 0.3, 0.3, 0.3]), system_col="system", n_labels=30,
                           scores=["metric"], target="human", scale="1,5", strata="task",
                           seed=0, adaptive=False)
    assert plain.doc["design"] == "active"
    assert plain.table.inclusion_prob[cand].std() > 0
