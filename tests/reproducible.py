"""Test helper: random seeds that are the same in every run.

``hash()`` of a str changes from one process to the next (PYTHONHASHSEED), so
a seed made from it gives each run other data and a failure cannot be
replayed; CRC-32 of the parts' text does not.
"""

from __future__ import annotations

import zlib


def seed(*parts: object) -> int:
    """A seed for ``np.random.default_rng`` from ``parts`` (dtypes, modes, case numbers)."""
    return zlib.crc32(repr(tuple(str(p) for p in parts)).encode())
