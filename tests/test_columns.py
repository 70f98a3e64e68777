"""Column mapping (scoreband.columns): an unknown column lists the available ones, bad rows
are reported with their row, column and reason and skipped, ratings cells, and a command
reads only the columns its spec names."""

import numpy as np
import pandas as pd
import pytest

from scoreband.columns import ColumnSpec, load_inputs, needed_columns
from scoreband.datatypes import Scale
from scoreband.errors import InputError
from scoreband.tables import read_table, write_table


@pytest.fixture
def df():
    return pd.DataFrame({"id": ["a", "b", "c"], "y": [1.0, 3.0, 5.0], "m": [0.1, 0.5, 0.9],
                         "r": ["1;1", "3;3;3", "5"]})


def test_unknown_column_lists_available(df):
    spec = ColumnSpec(scale=Scale(1, 5, True), target="human", median="m")
    with pytest.raises(InputError, match="available: id, y, m, r"):
        load_inputs(df, spec)


def test_bad_rows_reported_and_skipped():
    df = pd.DataFrame({
        "id": list("abcdefgh"),
        "y": [1, 2, "x", 9, 3, 4, np.nan, 2],
        "m": [0.1, np.inf, 0.5, 0.5, 0.5, 0.2, 0.3, 0.4],
        "lo": [0.0, 0.0, 0.0, 0.0, 0.6, 0.1, 0.1, 0.1],
        "hi": [0.2, 0.2, 0.6, 0.6, 0.4, 0.3, 0.5, 0.5],
    })
    spec = ColumnSpec(scale=Scale(1, 5, True), target="y", median="m", lo="lo", hi="hi",
                      pred_scale=Scale(0, 1))
    inp = load_inputs(df, spec)
    assert inp.rows.tolist() == [0, 5, 7]
    reasons = {e.row: (e.column, e.reason) for e in inp.errors}
    assert reasons["2 (id=b)"][0] == "m" and "infinite" in reasons["2 (id=b)"][1]
    assert "not a number: 'x'" in reasons["3 (id=c)"][1]
    assert "outside the scale" in reasons["4 (id=d)"][1]
    assert "lo (0.6) > hi (0.4)" in reasons["5 (id=e)"][1]
    assert "missing value" in reasons["7 (id=g)"][1]
    assert [e.position for e in inp.errors] == [1, 2, 3, 4, 6]
    np.testing.assert_allclose(inp.y01, [0, 0.75, 0.25])


def test_ratings_column(df):
    spec = ColumnSpec(scale=Scale(1, 5, True), ratings="r", median="m", pred_scale=Scale(0, 1))
    inp = load_inputs(df, spec)
    assert inp.n_ratings.tolist() == [2, 3, 1]
    bad = pd.DataFrame({"r": ["1;7", "", "2;x", "2.5"], "m": [0.5] * 4})
    inp = load_inputs(pd.concat([df[["r", "m"]], bad]).reset_index(drop=True), spec)
    assert len(inp.errors) == 4 and len(inp.rows) == 3


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_evaluate_and_calibrate_read_only_the_columns_they_use(tmp_path, suffix):
    """needed_columns names exactly the columns of the spec (globs expanded against the
    header, scorer_fingerprint kept); read_table then skips the rest while reading."""
    df = pd.DataFrame({"human": [1.0, 2.0], "med": [0.1, 0.2], "logp_1": [0.0, -1.0],
                       "logp_2": [-1.0, 0.0], "junk": ["x", "y"], "big_text": ["a", "b"],
                       "scorer_fingerprint": ["f", "f"]})
    src = tmp_path / f"t{suffix}"
    write_table(df, src)
    spec = {"target": "human", "median": "med", "features": "logp_*"}
    cols = needed_columns(src, spec)
    assert cols == ["human", "med", "logp_1", "logp_2", "scorer_fingerprint"]
    assert list(read_table(src, columns=cols).columns) == cols
    # a name the header lacks: read everything, so the usual error names the column
    assert needed_columns(src, {"target": "nope"}) is None
    assert needed_columns(tmp_path / "t.jsonl", spec) is None  # JSONL: read whole


def test_systems_inputs_reads_every_row_and_names_each_bad_one():
    """The system-level task's inputs (columns.systems_inputs): one entry per table row, an
    empty target an unlabeled row, each bad row an error naming row, column and fix (the
    first problem of the row), probabilities above 1 refused with the cell as written."""
    from scoreband.columns import systems_inputs

    df = pd.DataFrame({"system": ["a", "a", None, "b", "b", "b"],
                       "item": ["i1", "i1", "i2", "i1", "i2", "i3"],
                       "metric": [0.1, 0.2, 0.3, "x", 0.5, 0.6],
                       "human": [3, None, 2, 4, 9, ""],
                       "p": [0.5, 0.5, 0.5, 0.5, 0.5, 0.0],
                       "propose_label": ["True", "false", "False", "1", "0", "False"]})
    rows = systems_inputs(df, system_col="system", scores=["metric"], target="human",
                          scale=Scale.parse("1,5"), item_col="item", inclusion_prob="p")
    assert rows.scores.shape == (6, 1) and len(rows.system) == 6
    assert np.isnan(rows.target[[1, 5]]).all() and rows.target[0] == 3
    assert rows.proposed.tolist() == [True, False, False, True, False, False]
    why = {i: (e.column, e.reason) for i, e in rows.errors.items()}
    assert why[1][0] == "item" and "appears again for system 'a'" in why[1][1]
    assert why[2] == ("system", "no system name (empty cell)")
    assert why[3][0] == "metric" and "not a number" in why[3][1]
    assert why[4][0] == "human" and "outside the scale [1, 5]" in why[4][1]
    assert 5 not in why  # unlabeled: no probability needed
    kept = rows.take([0, 5])
    assert kept.system.tolist() == ["a", "b"] and kept.errors is rows.errors
    df["p"] = [0.5, 0.5, 0.5, 0.5, 0.5, 75.0]
    with pytest.raises(InputError, match=r"row 6: 75\)") as e:
        systems_inputs(df, system_col="system", scores=["metric"], target="human",
                       scale=Scale.parse("1,5"), inclusion_prob="p")
    assert "percentages" in str(e.value)


def test_an_empty_id_cell_names_the_row_by_its_number():
    """An empty --id-col cell (NaN, None or blank) is never reported as row 'nan'."""
    import numpy as np
    import pandas as pd

    from scoreband.columns import row_ids

    df = pd.DataFrame({"k": ["a", np.nan, "", "d"], "id": ["x", "", None, "z"]})
    assert list(row_ids(df, "k")) == ["a", "2 (id empty)", "3 (id empty)", "d"]
    assert list(row_ids(df, None, offset=10)) == ["11 (id=x)", "12 (id empty)",
                                                  "13 (id empty)", "14 (id=z)"]
