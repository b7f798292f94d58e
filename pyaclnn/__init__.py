"""pyaclnn: the Ascend aclnn operators MaxPool3dWithArgmax(Backward) and
GridSampler3D(Backward) from Python, on an NPU through CANN or anywhere through
a NumPy backend that gives the same answers and the same errors.

The public API is all here. Below it: the runtime (``pyaclnn.runtime``: streams,
events, device arrays, the memory pool), the low-level API (``pyaclnn.acl`` /
``pyaclnn.aclnn`` mirror the C API) and the backends; ``pyaclnn.constants``
holds every constant of the C declarations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import backends as _backends
from . import constants
from . import functional as _functional
from . import runtime as _runtime
from ._graph import Graph, GraphCaptureError, graph
from ._profile import Profile, profile
from .errors import AclError, AclnnError, AclOutOfMemoryError
from .functional import *  # noqa: F403  (one call per operator of the table: functional.__all__)
from .runtime import *  # noqa: F403  (its public names: runtime.__all__)

if TYPE_CHECKING:  # for type checkers; at run time bfloat16 comes from __getattr__ below
    from .dtypes import bfloat16 as bfloat16

# The one place the version is written: pyproject.toml reads it from here (tool.setuptools.dynamic).
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # pyaclnn.bfloat16 imports ml_dtypes (most of a second) on first use, not with pyaclnn.
    if name == "bfloat16":
        from . import dtypes

        return dtypes.bfloat16
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_backend() -> str:
    """Name of the active backend: "npu" or "numpy"."""
    return _backends.active_name()


def set_backend(name: str) -> None:
    """Make ``name`` ("numpy", "npu" or "auto") the active backend.

    Raises
    ------
    ValueError
        For an unknown name.
    pyaclnn.backends.npu.LibraryNotFoundError
        For "npu" when CANN's libraries cannot be loaded (the message lists where it looked).
    """
    _backends.set_active(name)


__all__ = [
    "AclError",
    "AclnnError",
    "AclOutOfMemoryError",
    "Graph",
    "GraphCaptureError",
    "Profile",
    "bfloat16",
    "constants",
    "get_backend",
    "graph",
    "profile",
    "set_backend",
]
__all__ += _runtime.__all__
__all__ += _functional.__all__
