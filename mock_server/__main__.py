"""Deprecated: ``python -m mock_server`` runs ``python -m llmbench.mock_server`` (same options)."""

import sys

from llmbench.mock_server.__main__ import main

if __name__ == "__main__":
    print("note: python -m mock_server is deprecated; use python -m llmbench.mock_server "
          "(or llmbench mock)", file=sys.stderr)
    main()
