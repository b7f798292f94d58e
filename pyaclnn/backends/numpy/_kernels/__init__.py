"""The numpy backend's kernels: for each operator, the one place that chooses what computes a call.

Phase 1 (``_ops``) gets the call's plan from :mod:`pyaclnn.kernels.checks` and
binds the operator's kernel here (:data:`KERNELS`, by the operator table's
Python name); phase 2 resolves the tensors' memory and queues the call. When
the call runs, its kernel takes the first of these that takes it:

1. the compiled kernel (:mod:`pyaclnn.kernels._accel`), unless
   ``PYACLNN_ACCEL=0`` (read at every call) or the library cannot be built; it
   has codes for float32, float16 and bfloat16, and declines a call it has no
   scratch memory for, or (max-pool forward) a plane too large for its int32
   cells;
2. the tuned NumPy path (:mod:`pyaclnn.kernels._tuned`);
3. the reference (:mod:`pyaclnn.kernels.max_pool3d`,
   :mod:`pyaclnn.kernels.grid_sampler3d`), the specification, where it is the
   faster of the two NumPy kernels: the float32/float64 max-pool backward below
   :data:`TUNED_MIN_ELEMENTS` elements, which it scatters in one ``np.add.at``
   while the tuned path pays for its chunking (measured: 35 against 47 us at
   82k elements, 67 against 71 us at 164k, 160 against 123 us at 328k; every
   other operator and dtype was faster tuned at every size tried, 3-5x for the
   forward and the grid sampler, and float16 backward 3x, NumPy's float16 cast
   being slow).

All three give the same results (max pooling bit for bit; the grid sampler
to float32 rounding, the compiled inputGrad bit for bit with the tuned one),
which tests/test_accel*.py and tests/test_kernels_*.py check. How many threads
a fast kernel uses is :func:`pyaclnn.kernels._workers.threads_for`'s decision.

The kernels of each family of operators are a module of this package
(:mod:`._max_pool`, :mod:`._grid_sampler`), which this package re-exports.
Adding an operator: its check function in :mod:`pyaclnn.kernels.checks`, and
its binder ``_bind_<Python name>`` in a module of this package listed in
:data:`_FAMILIES`, which :data:`KERNELS` finds by the operator table; ``_ops``
makes its phase methods from the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType

from .... import _optable
from . import _grid_sampler, _max_pool
from ._grid_sampler import *  # noqa: F403 (each family's kernel functions, by operator name)
from ._kernel import BACKWARD_WORKSPACE, Kernel, View
from ._max_pool import *  # noqa: F403

__all__ = ["BACKWARD_WORKSPACE", "Kernel", "View", "KERNELS"]
__all__ += _max_pool.__all__
__all__ += _grid_sampler.__all__

#: The modules of this package that hold binders, one per family of operators.
_FAMILIES: tuple[ModuleType, ...] = (_max_pool, _grid_sampler)

#: Each operator's kernel, by the operator table's Python name: its binder, ``_bind_<Python name>``
#: in one of :data:`_FAMILIES` (as its check is ``<Python name>`` in kernels.checks), and its
#: workspace. An operator of the table without a binder has no entry (the backend's phase 1
#: names what it lacks).
KERNELS: Mapping[str, Kernel] = {
    spec.python_name: Kernel(bind, BACKWARD_WORKSPACE if spec.python_name.endswith("_backward") else 0)
    for spec in _optable.operators()
    for family in _FAMILIES
    if (bind := getattr(family, f"_bind_{spec.python_name}", None)) is not None
}
