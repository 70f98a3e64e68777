"""The row journal (scoreband.engine.journal): a line torn by a kill is dropped, the
records before it kept and the next record appended after it."""

from scoreband.engine.journal import RowJournal


def test_journal_after_a_torn_line_keeps_the_next_record(tmp_path):
    j = tmp_path / "j.jsonl"
    j.write_text('{"key": "a", "v": 1}\n{"key": "b", "v"')  # killed mid-write
    with RowJournal(j) as jr:
        assert set(jr.done) == {"a"}
        jr.add({"key": "b", "v": 2})
    assert set(RowJournal(j).done) == {"a", "b"}
