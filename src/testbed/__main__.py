"""``python -m testbed`` runs the command line."""

from testbed.cli import run

run()
