"""The selftest's reference kernels on host arrays, as :mod:`pyaclnn.selftest` re-exports them:
each family's live in its own module (:mod:`pyaclnn.selftest.max_pool3d`,
:mod:`pyaclnn.selftest.grid_sampler3d`), beside its cases. Replace one there, not here: the
cases look it up in their own module."""

from __future__ import annotations

from . import grid_sampler3d as _grid_sampler3d
from . import max_pool3d as _max_pool3d
from .grid_sampler3d import *  # noqa: F403
from .max_pool3d import *  # noqa: F403

__all__: list[str] = []
__all__ += _max_pool3d.__all__
__all__ += _grid_sampler3d.__all__
