"""The simulated pairwise judge on rows without a true quality: a pair_error naming the
column, counted as not judged (review: such rows got no probabilities and no error, and the
summary counted them judged)."""

import numpy as np
import pandas as pd

from scoreband.cli import app
from scoreband.world.pairwise import world_pairs
from tests.conftest import runner


def test_missing_or_non_numeric_true_quality_is_a_pair_error(tmp_path):
    df = world_pairs(5, seed=1)
    df[["true_a", "true_b"]] = df[["true_a", "true_b"]].astype(object)
    df.loc[1, "true_a"] = np.nan
    df.loc[2, "true_b"] = ""
    df.loc[3, "true_a"] = "high"
    df.to_csv(tmp_path / "w.csv", index=False)
    out = tmp_path / "j.csv"
    r = runner.invoke(app, ["judge", "--pairwise", str(tmp_path / "w.csv"), "--judge",
                            "sim-pair-fair", "--out", str(out)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"{len(df) - 3} of {len(df)} pairs judged" in text
    t = pd.read_csv(out, keep_default_na=False, dtype=str)
    err = t["pair_error"].tolist()
    assert "'true_a' is empty" in err[1] and "'true_b' is empty" in err[2]
    assert "'true_a' holds 'high', not a number" in err[3]
    assert all(e == "" for k, e in enumerate(err) if k not in (1, 2, 3))
    assert (t.loc[[1, 2, 3], "pair_p_a"] == "").all()
    assert (t.drop(index=[1, 2, 3])["pair_p_a"] != "").all()
    assert "row 2" in text and "row 4" in text  # rows named from 1


def test_runner_reports_row_errors_directly():
    from scoreband.pairwise.extract import SimulatedPairRunner

    df = pd.DataFrame({"true_a": [0.5, "nan", 0.2], "true_b": [0.4, 0.1, None]})
    run = SimulatedPairRunner("sim-pair-fair")
    ab, ba = run.run(df, np.arange(3))
    assert set(run.row_errors) == {1, 2}
    assert "'true_a'" in run.row_errors[1] and "'true_b' is empty" in run.row_errors[2]
    assert np.isfinite(ab[0]).all()
