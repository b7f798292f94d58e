"""Test helper: run one operator through the low-level API, the way the C samples do.

Arguments are NumPy arrays (copied to device memory) or :class:`Spec` objects
(a descriptor of any shape, dtype, format and strides over a small
allocation). Everything created is freed when the call returns, errors
included, so the live counters of a backend tell whether the library leaks.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from pyaclnn import acl, aclnn, dtypes, runtime

ND = dtypes.ACL_FORMAT_ND
NCDHW = dtypes.ACL_FORMAT_NCDHW
NDHWC = dtypes.ACL_FORMAT_NDHWC


@dataclass
class Spec:
    """A descriptor without meaningful data: ``shape`` over a buffer of ``fill`` values."""

    shape: tuple[int, ...]
    dtype: Any = np.float32
    fmt: int | None = None
    strides: tuple[int, ...] | None = None  # elements; None = contiguous
    fill: float = 0


class Null:
    """Marks an argument passed as a null pointer."""


NULL = Null()


class Call:
    def __init__(self, backend: str, fmt: int = ND) -> None:
        self.backend = backend
        self.fmt = fmt
        self.stack = contextlib.ExitStack()
        self.arrays: dict[str, runtime.DeviceArray] = {}

    def __enter__(self) -> Call:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def tensor(self, name: str, value: Any) -> Any:
        if value is NULL:
            return None
        fmt = self.fmt
        if isinstance(value, Spec):
            fmt = self.fmt if value.fmt is None else value.fmt
            if value.strides is None:
                host = np.full(value.shape, value.fill, dtype=value.dtype)
                array = runtime.to_device(host, backend=self.backend)
            else:
                extent = (
                    1 + sum((d - 1) * s for d, s in zip(value.shape, value.strides))
                    if prod(value.shape)
                    else 1
                )
                array = runtime.to_device(
                    np.full(max(extent, 1), value.fill, dtype=value.dtype), backend=self.backend
                )
                array.shape, array._strides = tuple(value.shape), tuple(value.strides)  # elements
        else:
            array = runtime.to_device(np.asarray(value), backend=self.backend)
        self.stack.callback(array.close)
        self.arrays[name] = array
        return array.descriptor(fmt)

    def int_array(self, values: Any) -> Any:
        if values is NULL:
            return None
        handle = acl.create_int_array(values, backend=self.backend)
        self.stack.callback(acl.destroy_int_array, handle, backend=self.backend)
        return handle

    def bool_array(self, values: Any) -> Any:
        if values is NULL:
            return None
        handle = acl.create_bool_array(values, backend=self.backend)
        self.stack.callback(acl.destroy_bool_array, handle, backend=self.backend)
        return handle

    def run(self, phase1, phase2, *args: Any) -> None:
        stream = runtime.Stream(backend=self.backend)
        self.stack.callback(stream.close)
        size, executor = phase1(*args, backend=self.backend)
        workspace = acl.rt.malloc(size, backend=self.backend) if size else 0
        if workspace:
            self.stack.callback(acl.rt.free, workspace, backend=self.backend)
        phase2(workspace, size, executor, stream.handle, backend=self.backend)
        stream.synchronize()

    def read(self, name: str) -> np.ndarray:
        return self.arrays[name].numpy()


def max_pool3d_with_argmax(backend, x, kernel, stride, padding, dilation, ceil, out, indices, fmt=ND):
    """Run the forward; returns (out, indices) as read back from device memory."""
    with Call(backend, fmt) as c:
        c.run(
            aclnn.max_pool3d_with_argmax_get_workspace_size,
            aclnn.max_pool3d_with_argmax,
            c.tensor("self", x),
            c.int_array(kernel),
            c.int_array(stride),
            c.int_array(padding),
            c.int_array(dilation),
            ceil,
            c.tensor("out", out),
            c.tensor("indices", indices),
        )
        return c.read("out"), c.read("indices")


def max_pool3d_with_argmax_backward(
    backend, grad_output, x, indices, kernel, stride, padding, dilation, ceil, grad_input, fmt=ND
):
    """Run the backward; returns gradInput as read back."""
    with Call(backend, fmt) as c:
        c.run(
            aclnn.max_pool3d_with_argmax_backward_get_workspace_size,
            aclnn.max_pool3d_with_argmax_backward,
            c.tensor("gradOutput", grad_output),
            c.tensor("self", x),
            c.tensor("indices", indices),
            c.int_array(kernel),
            c.int_array(stride),
            c.int_array(padding),
            c.int_array(dilation),
            ceil,
            c.tensor("gradInput", grad_input),
        )
        return c.read("gradInput")


def grid_sampler3d(backend, x, grid, interpolation, padding, align_corners, out, fmt=NCDHW):
    with Call(backend, fmt) as c:
        c.run(
            aclnn.grid_sampler3d_get_workspace_size,
            aclnn.grid_sampler3d,
            c.tensor("input", x),
            c.tensor("grid", grid),
            interpolation,
            padding,
            align_corners,
            c.tensor("out", out),
        )
        return c.read("out")


def grid_sampler3d_backward(
    backend,
    grad_output,
    x,
    grid,
    interpolation,
    padding,
    align_corners,
    mask,
    input_grad,
    grid_grad,
    fmt=NCDHW,
):
    """Run the backward; returns (inputGrad, gridGrad) as read back."""
    with Call(backend, fmt) as c:
        c.run(
            aclnn.grid_sampler3d_backward_get_workspace_size,
            aclnn.grid_sampler3d_backward,
            c.tensor("gradOutput", grad_output),
            c.tensor("input", x),
            c.tensor("grid", grid),
            interpolation,
            padding,
            align_corners,
            c.bool_array(mask),
            c.tensor("inputGrad", input_grad),
            c.tensor("gridGrad", grid_grad),
        )
        return c.read("inputGrad"), c.read("gridGrad")
