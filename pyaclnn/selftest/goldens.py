"""The golden outputs: what PyTorch CPU computed once for every case, shipped as package data.

``pyaclnn/selftest_golden.npz`` (made by ``scripts/make_selftest_golden.py``, listed in
pyproject.toml's package data) holds, per case and output, ``"<case>::<output>"`` (the
values, subsampled by :func:`golden_sample`), ``"<case>::<output>::shape"``, and
``"<case>::inputs"`` (the :func:`inputs_digest` they were made from, so changed inputs
are told apart from a wrong kernel).

(Named ``goldens``, not ``golden``, so that the module and :func:`golden` do not
shadow each other as attributes of :mod:`pyaclnn.selftest`.)
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from .compare import Arrays, Comparison, Outputs

if TYPE_CHECKING:
    from .operators import Case

__all__ = ["GOLDEN_FILE", "GOLDEN_MAX_ELEMENTS", "golden", "golden_sample", "inputs_digest", "compare_golden"]

#: The golden outputs, package data of pyaclnn (next to this package, not in it).
GOLDEN_FILE = "selftest_golden.npz"
_DATA_PACKAGE = "pyaclnn"
#: Outputs with more elements are stored as every k-th element (k = ceil(size / this)).
GOLDEN_MAX_ELEMENTS = 4096
_REGENERATE = "regenerate it with scripts/make_selftest_golden.py"


def golden_sample(a: np.ndarray) -> np.ndarray:
    """What the golden file keeps of an output: all of it, or every k-th element when large."""
    flat = np.asarray(a).reshape(-1)
    step = max(1, math.ceil(flat.size / GOLDEN_MAX_ELEMENTS))
    return flat[::step]


def inputs_digest(inputs: Arrays) -> int:
    """CRC-32 of the inputs' names, shapes, dtypes and values."""
    crc = 0
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        crc = zlib.crc32(f"{name}{a.shape}{a.dtype.name}".encode(), crc)
        crc = zlib.crc32(a.view(np.uint8).reshape(-1).tobytes(), crc)
    return crc


@cache
def golden() -> Mapping[str, np.ndarray] | None:
    """The golden arrays by key, or None when the package data is missing."""
    try:
        with resources.files(_DATA_PACKAGE).joinpath(GOLDEN_FILE).open("rb") as f, np.load(f) as data:
            return {key: data[key] for key in data.files}
    except FileNotFoundError:
        return None


def compare_golden(case: Case, inputs: Arrays, outputs: Outputs) -> Comparison:
    """``outputs`` of ``case`` against its golden outputs (looked up at call time, so a test can
    replace :func:`golden`)."""
    cmp = Comparison()
    table = golden()
    if table is None:
        cmp.fail(f"the golden outputs ({GOLDEN_FILE}) are missing from the package; {_REGENERATE}")
        return cmp
    digest = table.get(f"{case.name}::inputs")
    if digest is None:
        cmp.fail(f"no golden outputs for this case; {_REGENERATE}")
        return cmp
    if int(digest) != inputs_digest(inputs):
        cmp.fail(f"the golden outputs were made from other inputs; {_REGENERATE}")
        return cmp
    for name, got in outputs.items():
        expected = table.get(f"{case.name}::{name}")
        if expected is None:
            cmp.add(name, got, None)
            continue
        shape = tuple(int(n) for n in table[f"{case.name}::{name}::shape"])
        if got is None or np.shape(got) != shape:
            cmp.fail(f"{name}: shape {None if got is None else np.shape(got)}, expected {shape}")
            continue
        cmp.add(name, golden_sample(got), expected, exact=case.exact)
    return cmp
