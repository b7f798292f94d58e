"""Descriptions shared by the functional API's docstrings, written once.

As ``scipy.ndimage._ni_docstrings`` does: a docstring holds a line
``%(name)s`` where a shared entry belongs, and :func:`fill` replaces that line
with the entry of :data:`ENTRIES`, indented as the placeholder is. The filled
text is what ``help()`` and IDEs show; the source keeps one copy of each
description, so the four calls cannot drift apart on what ``backend`` means or
which errors every call can raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

__all__ = ["ENTRIES", "fill"]

_F = TypeVar("_F", bound=Callable[..., object])

ENTRIES: dict[str, str] = {
    # -- parameters ------------------------------------------------------------
    "pool_params": """\
kernel_size, stride, padding, dilation : int or sequence of int
    Lengths 1 or 3 (stride also 0: ``()`` means stride = kernel_size).
    padding <= kernel_size // 2; dilation must be 1 on Atlas A2/A3.
ceil_mode : bool
    Round the output size up (a window starting in the right padding is dropped).""",
    "grid_modes": """\
interpolation_mode : {"bilinear", "nearest"} or int
    As in ``torch.nn.functional.grid_sample``, or the C API's 0 / 1.
    Nearest rounds half to even.
padding_mode : {"zeros", "border", "reflection"} or int
    Or the C API's 0 / 1 / 2.
align_corners : bool
    Whether -1 and 1 are the centres (True) or the outer edges (False) of the corner voxels.""",
    "layout": """\
layout : {"NCDHW", "NDHWC"}
    Layout of input, of grad_output and of the sampled output (grid is always
    (N, Do, Ho, Wo, 3)).""",
    "out_kinds": """\
DeviceArrays on the call's device; NumPy arrays when every input is one
(written where they are on the numpy backend, filled after the wait on an
NPU). An output may not share memory with an input or the other output.""",
    "backend_stream": """\
backend : {"numpy", "npu"}, optional
    The active backend by default.
stream : Stream, optional
    The calling thread's current stream of its current device by default (the
    stream of its innermost ``with stream:`` block, else its default stream).
    The call is queued on it and returns at once; NumPy results are read back
    (waiting for the stream) before the call returns.""",
    # -- errors every call can raise --------------------------------------------
    "raises_arguments": """\
TypeError
    For an input that is not a NumPy array or DeviceArray (a torch tensor or a
    list is told what to pass), a dtype with no aclDataType, an ``out`` of the
    wrong kind, or a scalar argument of the wrong type (ints, bools, modes).
ValueError
    For an ``out`` of the wrong shape, dtype or device, or closed; an input on
    another backend or device than the call's stream, or closed; an unknown
    mode, layout or backend name; a stream of another backend, or closed.
ArgumentOverflowError
    (a ValueError, from ``pyaclnn.errors``) For an integer that does not fit in int64.""",
    "raises_aclnn": """\
AclnnError
    161001 for a missing input, 161002 for a rule of the op (dtype, rank,
    format, parameter lengths and values, shapes), with the argument and rule
    named; the operator's message names the C arguments, the one at fault
    first, and ends with their Python names in that order, ``(in Python:
    <argument>, ...)``: the first is the argument to change.""",
    "raises_device": """\
AclError
    From the device (or its emulation) at the next wait on the stream
    (``numpy()``, ``synchronize()``, a NumPy result's read-back), naming the
    stream and the operator.""",
}

_PLACEHOLDER = re.compile(r"^(?P<indent>[ \t]*)%\((?P<name>\w+)\)s[ \t]*$", re.MULTILINE)


def _indented(match: re.Match[str]) -> str:
    indent = match["indent"]
    return "\n".join(indent + line if line else line for line in ENTRIES[match["name"]].splitlines())


def fill(func: _F) -> _F:
    """Replace each ``%(name)s`` line of ``func``'s docstring by the shared entry ``name``.

    Raises
    ------
    KeyError
        At import, for a placeholder with no entry (a typo cannot reach users).
    """
    if func.__doc__:
        func.__doc__ = _PLACEHOLDER.sub(_indented, func.__doc__)
    return func
