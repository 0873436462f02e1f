"""Entry point: `python3 .../fanhub_worker/__main__.py`, as the hub's
`python` plugin runs it (the package's parent goes first on sys.path, so
the runner is found whatever the interpreter's own paths are)."""
import os
import sys

if __package__ in (None, ""):
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from fanhub_worker.runner import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
