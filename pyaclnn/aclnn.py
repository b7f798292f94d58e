"""Low-level API of the four aclnn operators, two phases each, plus aclnnInit/aclnnFinalize.

Phase 1 (``*_get_workspace_size``) checks the arguments and returns
``(workspace_size, executor)``; phase 2 launches the executor on a stream and
consumes it unless it was made repeatable. ``executor`` is None when phase 1
found nothing to do (empty tensors); phase 2 then needs workspace_size 0 and
does nothing. Failures raise :class:`pyaclnn.AclnnError` with the status, its
name and the reason.
"""

from __future__ import annotations

from typing import Any

from . import backends as _backends
from ._status import check as _check
from .acl._call import call as _call

# Each wrapper tests the status itself and calls _check only on failure: these run on every call.

__all__ = [
    "init",
    "finalize",
    "max_pool3d_with_argmax_get_workspace_size",
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward_get_workspace_size",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d_get_workspace_size",
    "grid_sampler3d",
    "grid_sampler3d_backward_get_workspace_size",
    "grid_sampler3d_backward",
]


def init(config_path: str | None = None, *, backend: str | None = None) -> None:
    """``aclnnInit``."""
    _call(backend, "aclnnInit", config_path)


def finalize(*, backend: str | None = None) -> None:
    """``aclnnFinalize``."""
    _call(backend, "aclnnFinalize")


def max_pool3d_with_argmax_get_workspace_size(
    self: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    out: Any,
    indices: Any,
    *,
    backend: str | None = None,
) -> tuple[int, Any]:
    """``aclnnMaxPool3dWithArgmaxGetWorkspaceSize`` (int arrays from ``acl.create_int_array``)."""
    b = _backends.get(backend)
    status, workspace_size, executor = b.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
        self, kernel_size, stride, padding, dilation, ceil_mode, out, indices
    )
    if status:
        _check(b, status, "aclnnMaxPool3dWithArgmaxGetWorkspaceSize")
    return workspace_size, executor


def max_pool3d_with_argmax(
    workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
) -> None:
    """``aclnnMaxPool3dWithArgmax``."""
    b = _backends.get(backend)
    status = b.aclnnMaxPool3dWithArgmax(workspace, workspace_size, executor, stream)
    if status:
        _check(b, status, "aclnnMaxPool3dWithArgmax")


def max_pool3d_with_argmax_backward_get_workspace_size(
    grad_output: Any,
    self: Any,
    indices: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    grad_input: Any,
    *,
    backend: str | None = None,
) -> tuple[int, Any]:
    """``aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize``."""
    b = _backends.get(backend)
    status, workspace_size, executor = b.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
        grad_output, self, indices, kernel_size, stride, padding, dilation, ceil_mode, grad_input
    )
    if status:
        _check(b, status, "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize")
    return workspace_size, executor


def max_pool3d_with_argmax_backward(
    workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
) -> None:
    """``aclnnMaxPool3dWithArgmaxBackward``."""
    b = _backends.get(backend)
    status = b.aclnnMaxPool3dWithArgmaxBackward(workspace, workspace_size, executor, stream)
    if status:
        _check(b, status, "aclnnMaxPool3dWithArgmaxBackward")


def grid_sampler3d_get_workspace_size(
    input: Any,
    grid: Any,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    out: Any,
    *,
    backend: str | None = None,
) -> tuple[int, Any]:
    """``aclnnGridSampler3DGetWorkspaceSize``."""
    b = _backends.get(backend)
    status, workspace_size, executor = b.aclnnGridSampler3DGetWorkspaceSize(
        input, grid, interpolation_mode, padding_mode, align_corners, out
    )
    if status:
        _check(b, status, "aclnnGridSampler3DGetWorkspaceSize")
    return workspace_size, executor


def grid_sampler3d(
    workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
) -> None:
    """``aclnnGridSampler3D``."""
    b = _backends.get(backend)
    status = b.aclnnGridSampler3D(workspace, workspace_size, executor, stream)
    if status:
        _check(b, status, "aclnnGridSampler3D")


def grid_sampler3d_backward_get_workspace_size(
    grad_output: Any,
    input: Any,
    grid: Any,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: Any,
    input_grad: Any,
    grid_grad: Any,
    *,
    backend: str | None = None,
) -> tuple[int, Any]:
    """``aclnnGridSampler3DBackwardGetWorkspaceSize`` (output_mask from ``acl.create_bool_array``)."""
    b = _backends.get(backend)
    status, workspace_size, executor = b.aclnnGridSampler3DBackwardGetWorkspaceSize(
        grad_output,
        input,
        grid,
        interpolation_mode,
        padding_mode,
        align_corners,
        output_mask,
        input_grad,
        grid_grad,
    )
    if status:
        _check(b, status, "aclnnGridSampler3DBackwardGetWorkspaceSize")
    return workspace_size, executor


def grid_sampler3d_backward(
    workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
) -> None:
    """``aclnnGridSampler3DBackward``."""
    b = _backends.get(backend)
    status = b.aclnnGridSampler3DBackward(workspace, workspace_size, executor, stream)
    if status:
        _check(b, status, "aclnnGridSampler3DBackward")
