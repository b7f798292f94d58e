"""What the fuzz's reference results share: reading kernel sizes, modes and layouts as
pyaclnn.kernels wants them.

Each operator's reference (``reference`` of its module in :mod:`fuzz.ops`) calls pyaclnn.kernels
directly on host arrays. These helpers restate the functional layer's argument handling on
purpose: the references are an independent oracle for the numpy backend, so they must not
share its code.
"""

from __future__ import annotations

import numpy as np


def expand(v, default=None):
    v = tuple(int(i) for i in np.atleast_1d(np.asarray(v, dtype=object))) if not isinstance(v, int) else (v,)
    if len(v) == 0:
        return default
    return v * 3 if len(v) == 1 else v


INTERP_MODES = {"bilinear": 0, "nearest": 1}
PAD_MODES = {"zeros": 0, "border": 1, "reflection": 2}


def ncdhw(x, layout):
    return np.moveaxis(x, 4, 1) if layout == "NDHWC" else x


def mode_value(v, names):
    return names[v] if isinstance(v, str) else int(v)
