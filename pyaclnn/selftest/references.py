"""The selftest's operators, a module per family, and their reference kernels on host arrays.

Each family's module (:mod:`pyaclnn.selftest.max_pool3d`,
:mod:`pyaclnn.selftest.grid_sampler3d`) holds its operators' references, inputs, calls and
cases and registers them in :data:`pyaclnn.selftest.operators.OPERATORS` when imported: this
module imports every family (the one list of them) and re-exports each one's ``__all__``, as
:mod:`pyaclnn.selftest` does this module's. Replace a reference in its family's module, not
here: the cases look it up there, at call time.
"""

from __future__ import annotations

from . import grid_sampler3d as _grid_sampler3d
from . import max_pool3d as _max_pool3d
from .grid_sampler3d import *  # noqa: F403
from .max_pool3d import *  # noqa: F403

__all__: list[str] = []
__all__ += _max_pool3d.__all__
__all__ += _grid_sampler3d.__all__
