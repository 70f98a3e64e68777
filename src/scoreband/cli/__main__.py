"""``python -m scoreband.cli``: the same as the ``scoreband`` command."""

from scoreband.cli import main

main()
