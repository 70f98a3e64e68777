"""``python -m scoreband``: the same as the ``scoreband`` command."""

from scoreband.cli import main

main()
