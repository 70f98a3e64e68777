"""files.declare_input: an input found after a command declared its options (the file behind a
``NAME:PATH`` table address) joins the running command's output policy."""

from __future__ import annotations

import pytest

from scoreband.errors import InputError
from scoreband.files import atomic_write_text, check_output, declare_input, output_policy
from scoreband.formats import split_address


def test_a_declared_input_is_never_written_over(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a\n1\n")
    with output_policy() as pol:
        declare_input("TABLE", table)
        declare_input("TABLE", table)  # once only
        assert [w for w, _ in pol.inputs] == ["TABLE"]
        with pytest.raises(InputError, match="same file as TABLE"):
            check_output(tmp_path / "." / "t.csv")
        atomic_write_text(tmp_path / "other.csv", "b\n")  # any other path is fine
    assert table.read_text() == "a\n1\n"


def test_nothing_to_declare_without_a_policy_or_a_file(tmp_path):
    declare_input("TABLE", tmp_path / "t.csv")  # no policy in force: nothing happens
    with output_policy() as pol:
        declare_input("TABLE", tmp_path / "missing.csv")
        assert pol.inputs == []


def test_a_table_address_declares_its_file(tmp_path):
    table = tmp_path / "t.txt"
    table.write_text("a\n1\n")
    with output_policy():
        fmt, path = split_address(f"csv:{table}")
        assert path == table
        with pytest.raises(InputError, match="same file as TABLE"):
            check_output(table)
