"""``python -m pyaclnn.selftest``: the same as ``python -m pyaclnn selftest``."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
