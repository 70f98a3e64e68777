"""The pairwise verdict model is fitted on the same rows in the same order whatever the
table's row order (issue 41): copies of a feature row with different labels used to reach
the fit in the table's row order, which moved the fit's last bits - and, on another
machine's arithmetic, the verdict of a pair at p(A) = p(B) with them. The rule file, which
holds the fitted model, must now be the same bit for bit for a sorted, a reversed and a
shuffled table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scoreband.pairwise.selective import fit_pairwise_arrays
from tests.pairwise.test_duplicate_rows import table


@pytest.mark.parametrize("grouped", [False, True])
def test_rule_is_bit_identical_for_any_row_order(grouped):
    df = table(600, 3)
    X, y = df[["f1", "f2"]].to_numpy(), df["human"].to_numpy()
    g = np.where(X[:, 0] > 0, "g1", "g2") if grouped else None

    def rule(o):
        r = fit_pairwise_arrays(X[o], y[o], columns=["f1", "f2"], alpha=0.15, seed=3,
                                groups=None if g is None else g[o])
        return json.dumps(r.to_dict(), sort_keys=True, default=str)

    ref = rule(np.arange(len(y)))
    rng = np.random.default_rng(0)
    for o in (np.argsort(y, kind="stable"), np.arange(len(y))[::-1], rng.permutation(len(y))):
        assert rule(o) == ref
