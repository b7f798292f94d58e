"""What every binder of the numpy backend's kernels shares: :class:`Kernel` and :data:`View`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BACKWARD_WORKSPACE", "Kernel", "View"]

#: Workspace the emulated backward ops (``*_backward``) ask for, so callers exercise the workspace path.
BACKWARD_WORKSPACE = 32

#: The view of one tensor argument in phase 2, by its C name.
View = Callable[[str], np.ndarray]


@dataclass(frozen=True)
class Kernel:
    """An operator's kernel as phase 1 binds it."""

    #: (plan, view) -> the call phase 2 queues: resolves the views it needs (by C name) and
    #: returns a callable that runs the kernel on them.
    bind: Callable[[Any, View], Callable[[], None]]
    #: Workspace bytes phase 1 asks for.
    workspace: int
