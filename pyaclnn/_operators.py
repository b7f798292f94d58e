"""The aclnn operators of the table as the runtime launches them, and the rules of their plans
that a caller needs before the launch.

The functional layer names an :class:`Operator` and asks here for output shapes
and the checks it must make before anything is allocated; it imports neither
the kernels' checks nor the low-level API (docs/architecture.md: each layer calls only the
one below). The rules themselves stay in :mod:`pyaclnn.kernels.checks`, the one
place phase 1 of the numpy backend also takes them from; a failure they report
becomes the :class:`~pyaclnn.errors.AclnnError` the operator's phase 1 raises.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _optable, aclnn
from ._optable import OperatorSpec, Param
from .errors import AclError, AclnnError, make_error
from .kernels import checks as _checks

__all__ = [
    "Operator",
    "OPERATORS",
    "INTERPOLATION_MODES",
    "PADDING_MODES",
    "pooled_shape",
    "sampled_shape",
    "check_plane_size",
    "check_indices_in_planes",
]

#: Interpolation and padding modes by name, in the C API's order (3-D sampling has no bicubic).
INTERPOLATION_MODES: tuple[str, ...] = _checks.INTERPOLATION_MODES
PADDING_MODES: tuple[str, ...] = _checks.PADDING_MODES


@dataclass(frozen=True)
class Operator:
    """One aclnn operator as the runtime launches it: its entry of the table and its two phases
    in the low-level API (and, for an operator of ``pyaclnn.ops``, both in one call:
    ``once``, see :func:`pyaclnn.aclnn.operator_phases`, and where the backend has one, how
    the compiled repeated call passes its arguments: ``c_form``, see :mod:`pyaclnn._repeat`)."""

    spec: OperatorSpec
    phase1: Callable[..., tuple[int, Any]]
    phase2: Callable[..., None]
    once: Callable[..., tuple[int, Any, bool]] | None = None
    c_form: Any = None

    @property
    def name(self) -> str:
        """The C name, ``"MaxPool3dWithArgmax"``."""
        return self.spec.name

    @property
    def phase1_api(self) -> str:
        """The C name of phase 1, as the operator's errors give it."""
        return self.spec.phase1_api

    @property
    def phase2_api(self) -> str:
        """The C name of phase 2 (the launch)."""
        return self.spec.phase2_api

    @property
    def python_names(self) -> Mapping[str, str]:
        """C argument -> Python parameter, where they differ (messages naming one get it added)."""
        return self.spec.python_names


#: Every operator of the table by its Python name, ``"max_pool3d_with_argmax"``.
OPERATORS: Mapping[str, Operator] = {
    spec.python_name: Operator(
        spec,
        getattr(aclnn, f"{spec.python_name}_get_workspace_size"),
        getattr(aclnn, spec.python_name),
    )
    for spec in _optable.operators()
}

#: The shape an output gets when the inputs give none: phase 1 then reports what is wrong.
PLACEHOLDER_SHAPE = (1, 1, 1, 1, 1)


@functools.lru_cache(maxsize=256)
def pooled_shape(
    shape: tuple[int, ...],
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> tuple[int, ...]:
    """Max-pool output shape of an input of ``shape``; a placeholder where the parameters give none.

    Cached: a training loop asks for the same few shapes on every call.
    """
    if len(shape) not in (4, 5):
        return PLACEHOLDER_SHAPE
    try:
        return _checks.pool_output_shape(shape, kernel, stride, padding, dilation, ceil_mode)
    except _checks.CheckFailed:
        return shape  # phase 1 reports the problem, naming the argument


def sampled_shape(
    input_shape: tuple[int, ...], grid_shape: tuple[int, ...], channels_last: bool
) -> tuple[int, ...]:
    """Grid-sampler output shape; a placeholder unless both inputs are 5-D."""
    if len(input_shape) != 5 or len(grid_shape) != 5:
        return PLACEHOLDER_SHAPE
    return _checks.sampled_shape(input_shape, grid_shape, channels_last)


_WORDS = re.compile(r"[A-Za-z_]\w*")
_NOTE = " (in Python: "


def in_python_terms(exc: AclnnError, params: Sequence[Param]) -> AclError:
    """``exc`` with the Python names of the C parameters its message names appended, in the
    order it names them: ``"padding [2]: ... <= kernelSize/2 (in Python: padding, kernel_size)"``.

    Every one is listed, and also when all are spelt alike in Python and C: the
    checks name the argument at fault first, so the note's first name is always
    the Python argument to change (a list of the renamed alone would point at
    kernel_size there). A message that names no parameter is returned as it is.
    """
    if _NOTE in exc.message:  # noted already (an error of admit() passes two launches' handlers)
        return exc
    python = {p.c_name: p.python_name for p in params}
    named = dict.fromkeys(python[word] for word in _WORDS.findall(exc.message) if word in python)
    if not named:
        return exc
    return make_error(exc.status, f"{exc.message}{_NOTE}{', '.join(named)})", exc.api)


def check_plane_size(op: Operator, shape: Sequence[int]) -> None:
    """Raise the operator's error for a (D, H, W) plane too large for the device.

    Made before anything is allocated for the call (the outputs would be as large).
    """
    # The plan's rule (kernels.checks.plane_size_limit) raises; this runs before every
    # max-pool call, so it is asked only when the plane is over the plan's PLANE_LIMIT.
    if len(shape) in (4, 5) and shape[-1] * shape[-2] * shape[-3] > _checks.PLANE_LIMIT:
        try:
            _checks.plane_size_limit(shape, op.name == "MaxPool3dWithArgmax")
        except _checks.CheckFailed as exc:
            raise in_python_terms(
                AclnnError(exc.status, exc.message, op.phase1_api), op.spec.params
            ) from None


def check_indices_in_planes(op: Operator, indices: Any, input_shape: Sequence[int]) -> None:
    """Raise the operator's launch error for max-pool indices outside their (n, c) plane."""
    try:
        _checks.indices_in_planes(indices, input_shape)
    except _checks.CheckFailed as exc:
        error = AclnnError(exc.status, exc.message, op.phase2_api)
        raise in_python_terms(error, op.spec.params) from None
