import numpy as np
import pandas as pd
import pytest

from scoreband.errors import InputError
from scoreband.pairwise.pairs import make_pairs, pair_labels, parse_labels


def _table():
    return pd.DataFrame({
        "sys": ["x", "y", "z", "x", "y", "y"],
        "item": [1, 1, 1, 2, 2, 2],
        "m": [0.9, 0.2, 0.5, 0.1, 0.3, 0.4],
        "h": [5, 2, np.nan, 3, 3, 4],
        "resp": ["a", "b", "c", "same", "same", "other"],
    })


def test_pairs_every_pair_on_an_item_with_human_preference():
    res = make_pairs(_table(), system_col="sys", item_col="item", scores=["m"], target="h",
                     response_col="resp")
    t = res.table
    # item 1: 3 pairs; item 2: y repeated (both its rows skipped): no pair left
    assert len(t) == 3
    assert t["human"].tolist() == ["A", "", ""]
    reasons = " ".join(e.reason for e in res.errors)
    assert "not compared with itself" in reasons
    assert {e.column for e in res.errors} == {"sys"}
    same = make_pairs(_table().iloc[:5], system_col="sys", item_col="item", scores=["m"],
                      response_col="resp")
    assert [e.column for e in same.errors] == ["resp"]
    assert "same response" in same.errors[0].reason and len(same.table) == 3
    assert np.allclose(t["m_diff"], t["m_a"] - t["m_b"])


def test_pairs_order_free():
    a = make_pairs(_table(), system_col="sys", item_col="item", scores=["m"], target="h").table
    b = make_pairs(_table().sample(frac=1, random_state=3), system_col="sys",
                   item_col="item", scores=["m"], target="h").table
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_tie_tolerance():
    df = pd.DataFrame({"s": ["p", "q"], "i": [0, 0], "m": [1.0, 0.0], "h": [3.4, 3.0]})
    assert make_pairs(df, system_col="s", item_col="i", scores="m", target="h",
                      tie_tol=0.5).table["human"].tolist() == ["tie"]
    assert make_pairs(df, system_col="s", item_col="i", scores="m", target="h",
                      tie_tol=0.25).table["human"].tolist() == ["A"]


def test_missing_column_and_no_pairs_are_clear():
    with pytest.raises(InputError, match="not in the table"):
        make_pairs(_table(), system_col="nope", item_col="item", scores=["m"])
    one = pd.DataFrame({"s": ["a", "b"], "i": [1, 2], "m": [1, 2]})
    with pytest.raises(InputError, match="no pair"):
        make_pairs(one, system_col="s", item_col="i", scores=["m"])


def test_labels_bad_values_reported_not_crashing():
    with pytest.warns(UserWarning, match="read as B"):
        lab, errors = parse_labels(["A", "b", "maybe", None, 2.0], "verdict")
    assert lab.tolist() == ["A", "B", "", "", "B"]
    # rows named as every command names them (scoreband.columns.RowIds: 1-based)
    assert len(errors) == 1 and errors[0].row == "3" and errors[0].column == "verdict"


def test_vote_counts_majority_and_shares():
    df = pd.DataFrame({"va": [30, 10, 24, 0], "vb": [18, 38, 24, 0]})
    lab, share, errors = pair_labels(df, votes=("va", "vb"))
    assert lab.tolist() == ["A", "B", "tie", ""]
    assert share[0, 0] == pytest.approx(30 / 48)
    assert len(errors) == 1 and errors[0].row == "4"


def test_normalised_label_spellings_said_once_each():
    """a -> A, "A " -> A, TIE -> tie: read, and said once per distinct spelling (review: they
    were normalised silently); cells written A / B / tie are not mentioned."""
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lab, errors = parse_labels(["a", "A ", "TIE", "tie", "a", "B", "A"], "human")
    assert lab.tolist() == ["A", "A", "tie", "tie", "A", "B", "A"] and not errors
    said = sorted(str(x.message) for x in w)
    assert said == ["human: 'A ' read as A (1 cell)", "human: 'TIE' read as tie (1 cell)",
                    "human: 'a' read as A (2 cells)"]


def test_vote_counts_must_be_whole_numbers_quoted_as_written():
    """2.5, x and -1 are row errors quoting the cell (the message showed nan for x and
    accepted 2.5); a row with one count missing is an error, an empty row is unlabeled;
    rows named from 1 (RowIds)."""
    df = pd.DataFrame({"va": ["2.5", "x", "-1", "3", "", "4"],
                       "vb": ["1", "1", "1", "", "", "0"]})
    lab, share, errors = pair_labels(df, votes=("va", "vb"))
    assert lab.tolist() == ["", "", "", "", "", "A"]
    by = {e.row: str(e) for e in errors}
    assert set(by) == {"1", "2", "3", "4"}
    assert "'2.5' is not a vote count" in by["1"] and "'x' is not" in by["2"]
    assert "'-1' is not" in by["3"] and "nan" not in " ".join(by.values())
    assert "need every column" in by["4"]
