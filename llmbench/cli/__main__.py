"""python -m llmbench.cli: the command line (what the tests and sweep start as a child)."""

from llmbench.cli.app import main

main()
