"""Phase-1 checks of the four operators, in the NPU's order and with its status codes.

Rules: docs/operator-semantics.md (each operator's check order), for Atlas A2/A3
(DAV_2201). The functions take descriptor-like objects (anything with
``shape``, ``data_type`` and ``format``; ``None`` is a null pointer) and
parameter sequences, and either raise :class:`CheckFailed` (the op's status
and a message naming the C argument) or return the call's plan: the 5-D
shapes the kernel sees (a 4-D max-pool call as N = 1), the parameters
expanded to three values, the output shape, the compute dtype
(:func:`pyaclnn.dtypes.compute_dtype`) and the layout. ``None`` means "valid,
nothing to compute" (empty tensors, an empty output mask).

This is the one statement of the rules on the Python side: the numpy
backend's phase 1 (``pyaclnn.backends.numpy._ops``) runs these checks and
hands the kernels the plan's 5-D views; the functional layer sizes its outputs
and makes its early host-side checks with the same rules
(:func:`pool_output_shape`, :func:`sampled_shape`, :func:`plane_size_limit`,
:func:`indices_in_planes`). The kernels validate nothing.

Two other statements of the same rules stay independent of this module on
purpose, so that each cross-checks it: the C emulator's checks
(``tests/emulator/*.c``, the npu backend's test double) and the fuzz test's
references (``tests/fuzz/``, PyTorch and its own oracle). Do not make them
call this code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod
from typing import Any, Protocol, TypeVar

import numpy as np

from ..constants import (
    ACL_BF16,
    ACL_DOUBLE,
    ACL_FLOAT,
    ACL_FLOAT16,
    ACL_FORMAT_NCDHW,
    ACL_FORMAT_ND,
    ACL_FORMAT_NDHWC,
    ACL_INT32,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
)
from ..dtypes import FORMATS, compute_dtype, data_type_name, format_name, to_numpy
from .max_pool3d import IndexOutOfPlaneError, check_indices, pool_output_size

INT32_MAX = 2**31 - 1

POOL_DTYPES = (ACL_FLOAT, ACL_FLOAT16, ACL_BF16)
GRID_DTYPES = (ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE, ACL_BF16)
INDEX_DTYPES = (ACL_INT32,)  # A2/A3; int64 only on the 950 series

# Internal (5HD, fractal) formats the aclnn L2 layer rejects.
PRIVATE_FORMATS = frozenset(
    FORMATS[name]
    for name in (
        "ACL_FORMAT_NC1HWC0",
        "ACL_FORMAT_FRACTAL_Z",
        "ACL_FORMAT_NC1HWC0_C04",
        "ACL_FORMAT_FRACTAL_NZ",
        "ACL_FORMAT_NDC1HWC0",
        "ACL_FRACTAL_Z_3D",
    )
)

INTERPOLATION_MODES = ("bilinear", "nearest")
PADDING_MODES = ("zeros", "border", "reflection")


class TensorLike(Protocol):
    shape: tuple[int, ...]
    data_type: int
    format: int


class CheckFailed(Exception):
    """A rule the operator enforces was broken: ``status`` and a message naming the argument."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _fail(message: str, status: int = ACLNN_ERR_PARAM_INVALID) -> CheckFailed:
    return CheckFailed(status, message)


def _require(tensors: Sequence[tuple[str, object]]) -> None:
    for name, value in tensors:
        if value is None:
            raise _fail(f"{name} is a null pointer; it is required", ACLNN_ERR_PARAM_NULLPTR)


_T = TypeVar("_T")


def _given(value: _T | None) -> _T:
    """``value`` once :func:`_require` accepted it: typed as present (it cannot be None here)."""
    if value is None:
        raise TypeError("a required argument is None after the null checks")
    return value


def _dtype_in(name: str, t: TensorLike, allowed: Sequence[int]) -> None:
    if t.data_type not in allowed:
        names = ", ".join(data_type_name(a) for a in allowed)
        raise _fail(f"{name} has dtype {data_type_name(t.data_type)}; it must be one of {names}")


def _same_dtype(name: str, t: TensorLike, ref_name: str, ref: TensorLike) -> None:
    if t.data_type != ref.data_type:
        raise _fail(
            f"{name} has dtype {data_type_name(t.data_type)}; it must have the dtype of "
            f"{ref_name} ({data_type_name(ref.data_type)})"
        )


def _rank_in(name: str, t: TensorLike, ranks: Sequence[int]) -> None:
    if len(t.shape) not in ranks:
        allowed = " or ".join(str(r) for r in ranks)
        raise _fail(f"{name} has rank {len(t.shape)} (shape {list(t.shape)}); it must have rank {allowed}")


def _numel(t: TensorLike) -> int:
    return prod(t.shape)


def _shapes_match(a: Sequence[int], b: Sequence[int]) -> bool:
    # The L2 layer accepts equal shapes, or two shapes that both hold exactly one element.
    return tuple(a) == tuple(b) or (prod(a) == 1 and prod(b) == 1)


# -- pooling parameters -------------------------------------------------------


@dataclass(frozen=True)
class PoolParams:
    kernel_size: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]
    ceil_mode: bool


def _expand(name: str, values: Sequence[int], lengths: Sequence[int]) -> tuple[int, int, int]:
    if len(values) not in lengths:
        allowed = ", ".join(str(n) for n in lengths[:-1]) + f" or {lengths[-1]}"
        raise _fail(f"{name} has length {len(values)} ({list(values)}); its length must be {allowed}")
    first, *rest = values
    return (first, first, first) if not rest else (first, rest[0], rest[1])


def pool_params(
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> PoolParams:
    """docs/operator-semantics.md, Pooling parameters: lengths and values (all 161002)."""
    k = _expand("kernelSize", kernel_size, (1, 3))
    if any(v <= 0 for v in k):
        raise _fail(f"kernelSize {list(kernel_size)} has a value <= 0; every value must be > 0")
    s = k if len(stride) == 0 else _expand("stride", stride, (0, 1, 3))
    if any(v <= 0 for v in s):
        raise _fail(f"stride {list(stride)} has a value <= 0; every value must be > 0")
    p = _expand("padding", padding, (1, 3))
    for axis, (pv, kv) in enumerate(zip(p, k)):
        if pv < 0 or pv > kv // 2:
            raise _fail(
                f"padding {list(padding)}: value {pv} on axis {'DHW'[axis]} must be >= 0 and "
                f"<= kernelSize/2 = {kv // 2}"
            )
    d = _expand("dilation", dilation, (1, 3))
    if any(v <= 0 for v in d):
        raise _fail(f"dilation {list(dilation)} has a value <= 0; every value must be > 0")
    return PoolParams(k, s, p, d, bool(ceil_mode))


def pooled_shape(spatial: Sequence[int], params: PoolParams) -> tuple[int, int, int]:
    return tuple(  # type: ignore[return-value]
        pool_output_size(L, k, s, p, d, params.ceil_mode)
        for L, k, s, p, d in zip(spatial, params.kernel_size, params.stride, params.padding, params.dilation)
    )


def pool_output_shape(
    shape: Sequence[int],
    kernel_size: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    ceil_mode: bool,
) -> tuple[int, ...]:
    """The forward's output shape for an input of ``shape`` (rank kept): what ``out`` must be.

    An axis where no window fits has size 0, so the output is empty: the op
    takes that empty ``out`` and succeeds doing nothing (docs/operator-semantics.md,
    MaxPool3dWithArgmax: check order, step 6), and the backward rejects such a gradOutput (its step 11).

    Raises
    ------
    CheckFailed
        161002 for parameters that the pooling-parameter rules reject.
    """
    params = pool_params(kernel_size, stride, padding, dilation, ceil_mode)
    return tuple(shape[:-3]) + _output_spatial(shape[-3:], params)


def _output_spatial(spatial: Sequence[int], params: PoolParams) -> tuple[int, int, int]:
    return tuple(max(n, 0) for n in pooled_shape(spatial, params))  # type: ignore[return-value]


def indices_in_planes(indices: Any, input_shape: Sequence[int]) -> None:
    """The backward's index rule, for indices the host holds: each in [0, D*H*W) of ``input_shape``.

    The device cannot check this before launching (only its kernel sees the
    values), so where the host has the indices it checks them first, with the
    op's status for a bad argument. Shapes phase 1 would reject are left to it.

    Raises
    ------
    CheckFailed
        161002, naming the first index outside its (n, c) plane.
    """
    shape = tuple(input_shape)
    if len(shape) not in (4, 5) or getattr(indices, "ndim", 0) != len(shape):
        return
    if getattr(indices, "dtype", None) is None or indices.dtype.kind not in "iu":
        return
    try:
        check_indices(indices, prod(shape[-3:]))
    except IndexOutOfPlaneError as exc:
        raise _fail(str(exc)) from None


def plane_size_limit(shape: Sequence[int], forward: bool) -> None:
    """Atlas A2/A3 indexes a (n, c) plane with int32: D*H*W of self must not exceed INT32_MAX.

    The forward's L0 layer fails with 561103, the backward's L2 check with 161002.
    """
    size = prod(shape[-3:])
    if size > INT32_MAX:
        raise _fail(
            f"self: D*H*W = {size} exceeds INT32_MAX, which Atlas A2/A3 cannot index",
            ACLNN_ERR_INNER_NULLPTR if forward else ACLNN_ERR_PARAM_INVALID,
        )


# -- MaxPool3dWithArgmax ------------------------------------------------------
# The forward's and the backward's checks list the same pooling parameters (the C
# operators share them); the rules themselves are written once, in pool_params,
# pooled_shape and plane_size_limit.


@dataclass(frozen=True)
class MaxPoolPlan:
    """A valid max-pool call, as the kernels see it (always 5-D NCDHW)."""

    params: PoolParams
    batched: bool  # False: 4-D (C, D, H, W) tensors, computed as N = 1
    input_shape: tuple[int, int, int, int, int]  # self / gradInput, (N, C, D, H, W)
    output_shape: tuple[int, int, int, int, int]  # out / indices / gradOutput, (N, C, Do, Ho, Wo)
    compute_dtype: np.dtype

    @property
    def plane(self) -> int:
        """Elements of one (n, c) input plane: D*H*W."""
        return prod(self.input_shape[2:])


def _pool_plan(self: TensorLike, params: PoolParams) -> MaxPoolPlan:
    shape = tuple(self.shape)
    five = shape if len(shape) == 5 else (1, *shape)
    out = five[:2] + _output_spatial(five[2:], params)
    return MaxPoolPlan(
        params,
        len(shape) == 5,
        five,  # type: ignore[arg-type]
        out,  # type: ignore[arg-type]
        compute_dtype(to_numpy(self.data_type)),
    )


def max_pool3d_with_argmax(
    self: TensorLike | None,
    kernel_size: Sequence[int] | None,
    stride: Sequence[int] | None,
    padding: Sequence[int] | None,
    dilation: Sequence[int] | None,
    ceil_mode: bool,
    out: TensorLike | None,
    indices: TensorLike | None,
) -> MaxPoolPlan | None:
    """aclnnMaxPool3dWithArgmaxGetWorkspaceSize checks (docs/operator-semantics.md,
    MaxPool3dWithArgmax: check order)."""
    _require(
        [
            ("self", self),
            ("kernelSize", kernel_size),
            ("stride", stride),
            ("padding", padding),
            ("dilation", dilation),
            ("out", out),
            ("indices", indices),
        ]
    )
    self, out, indices = _given(self), _given(out), _given(indices)
    _dtype_in("self", self, POOL_DTYPES)
    _dtype_in("indices", indices, INDEX_DTYPES)
    _same_dtype("out", out, "self", self)
    for name, t in (("out", out), ("indices", indices)):
        if t.format != self.format:
            raise _fail(
                f"{name} has format {format_name(t.format)}; self, out and indices must share one "
                f"format (self is {format_name(self.format)})"
            )
    if self.format == ACL_FORMAT_NDHWC or self.format in PRIVATE_FORMATS:
        raise _fail(f"self has format {format_name(self.format)}, which Atlas A2/A3 does not support here")
    _rank_in("self", self, (4, 5))
    params = pool_params(_given(kernel_size), _given(stride), _given(padding), _given(dilation), ceil_mode)
    if params.dilation != (1, 1, 1):
        raise _fail(f"dilation {list(_given(dilation))}: Atlas A2/A3 supports only dilation 1 in the forward")
    if _numel(self) == 0 or _numel(out) == 0:
        return None
    spatial = self.shape[-3:]
    expected = tuple(self.shape[:-3]) + pooled_shape(spatial, params)
    for name, t in (("out", out), ("indices", indices)):
        if not _shapes_match(t.shape, expected):
            raise _fail(
                f"{name} has shape {list(t.shape)}; pooling self {list(self.shape)} with these "
                f"parameters gives {list(expected)}"
            )
    plane_size_limit(self.shape, forward=True)
    return _pool_plan(self, params)


# -- MaxPool3dWithArgmaxBackward ----------------------------------------------


def max_pool3d_with_argmax_backward(
    grad_output: TensorLike | None,
    self: TensorLike | None,
    indices: TensorLike | None,
    kernel_size: Sequence[int] | None,
    stride: Sequence[int] | None,
    padding: Sequence[int] | None,
    dilation: Sequence[int] | None,
    ceil_mode: bool,
    grad_input: TensorLike | None,
) -> MaxPoolPlan | None:
    """aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize checks (docs/operator-semantics.md,
    MaxPool3dWithArgmaxBackward: check order).

    Beyond the L2 layer, the tiling rules are applied here too (gradOutput's N, C
    and D, H, W must equal what pooling self gives, and padding must fit the
    dilated kernel); the device reports those as 561002 or at launch, pyaclnn
    reports them as 161002 from phase 1.
    """
    _require(
        [
            ("gradOutput", grad_output),
            ("self", self),
            ("indices", indices),
            ("kernelSize", kernel_size),
            ("stride", stride),
            ("padding", padding),
            ("dilation", dilation),
            ("gradInput", grad_input),
        ]
    )
    grad_output, self, indices, grad_input = (
        _given(grad_output),
        _given(self),
        _given(indices),
        _given(grad_input),
    )
    _dtype_in("self", self, POOL_DTYPES)
    _dtype_in("indices", indices, INDEX_DTYPES)
    _same_dtype("gradOutput", grad_output, "self", self)
    _same_dtype("gradInput", grad_input, "self", self)
    for name, t in (("gradOutput", grad_output), ("gradInput", grad_input)):
        if t.format != self.format:
            raise _fail(
                f"{name} has format {format_name(t.format)}; self, gradOutput and gradInput must "
                f"share one format (self is {format_name(self.format)})"
            )
    for name, t in (
        ("gradOutput", grad_output),
        ("self", self),
        ("indices", indices),
        ("gradInput", grad_input),
    ):
        if t.format in PRIVATE_FORMATS:
            raise _fail(f"{name} has the private format {format_name(t.format)}; use ND, NCHW or NCDHW")
    for name, t in (
        ("gradOutput", grad_output),
        ("gradInput", grad_input),
        ("indices", indices),
        ("self", self),
    ):
        _rank_in(name, t, (4, 5))
    params = pool_params(_given(kernel_size), _given(stride), _given(padding), _given(dilation), ceil_mode)
    spatial = self.shape[-3:]
    plane_size_limit(self.shape, forward=False)
    if tuple(indices.shape) != tuple(grad_output.shape):
        raise _fail(
            f"indices has shape {list(indices.shape)}; "
            f"it must equal gradOutput's shape {list(grad_output.shape)}"
        )
    if tuple(grad_input.shape) != tuple(self.shape):
        raise _fail(
            f"gradInput has shape {list(grad_input.shape)}; it must equal self's shape {list(self.shape)}"
        )
    if _numel(grad_output) == 0 or _numel(self) == 0 or _numel(indices) == 0:
        return None
    # Tiling rules (see the docstring).
    for axis, (p, k, d) in enumerate(zip(params.padding, params.kernel_size, params.dilation)):
        if p > ((k - 1) * d + 1) // 2:
            raise _fail(
                f"padding {p} on axis {'DHW'[axis]} exceeds half the dilated kernel "
                f"((k-1)*d+1)/2 = {((k - 1) * d + 1) // 2}"
            )
    if len(grad_output.shape) != len(self.shape):
        raise _fail(
            f"gradOutput has rank {len(grad_output.shape)} but self has rank {len(self.shape)}; "
            "they must match"
        )
    expected = tuple(self.shape[:-3]) + pooled_shape(spatial, params)
    if min(expected[-3:]) <= 0 or tuple(grad_output.shape) != expected:
        raise _fail(
            f"gradOutput has shape {list(grad_output.shape)}; pooling self {list(self.shape)} with these "
            f"parameters gives {list(expected)}"
        )
    return _pool_plan(self, params)


# -- GridSampler3D ------------------------------------------------------------


@dataclass(frozen=True)
class GridPlan:
    """A valid grid-sampler call, as the kernels see it (input and out / gradOutput as NCDHW)."""

    channels_last: bool  # layout: input (and gradOutput / out) are (N, D, H, W, C)
    interpolation_mode: int
    padding_mode: int
    align_corners: bool
    input_shape: tuple[int, int, int, int, int]  # (N, C, D, H, W)
    output_shape: tuple[int, int, int, int, int]  # out / gradOutput, (N, C, Do, Ho, Wo)
    compute_dtype: np.dtype
    output_mask: tuple[bool, bool] = (True, True)


def _grid_plan(
    input: TensorLike,
    grid: TensorLike,
    channels_last: bool,
    modes: tuple[int, int, bool],
    mask: tuple[bool, bool] = (True, True),
) -> GridPlan:
    n, c = input.shape[0], _channels(input, channels_last)
    return GridPlan(
        channels_last,
        *modes,
        (n, c, *_spatial(input, channels_last)),  # type: ignore[arg-type]
        (n, c, *grid.shape[1:4]),  # type: ignore[arg-type]
        compute_dtype(to_numpy(input.data_type)),
        mask,
    )


def _modes(interpolation_mode: int, padding_mode: int) -> None:
    if not 0 <= padding_mode <= 2:
        raise _fail(f"paddingMode is {padding_mode}; it must be 0 (zeros), 1 (border) or 2 (reflection)")
    if not 0 <= interpolation_mode <= 1:
        raise _fail(f"interpolationMode is {interpolation_mode}; it must be 0 (bilinear) or 1 (nearest)")


def _channels(t: TensorLike, channels_last: bool) -> int:
    return t.shape[4] if channels_last else t.shape[1]


def _spatial(t: TensorLike, channels_last: bool) -> tuple[int, ...]:
    return tuple(t.shape[1:4]) if channels_last else tuple(t.shape[2:5])


def sampled_shape(
    input_shape: Sequence[int], grid_shape: Sequence[int], channels_last: bool
) -> tuple[int, ...]:
    """The shape ``out`` must have, in input's layout: input's N and C, grid's (Do, Ho, Wo) (5-D both)."""
    n, spatial = input_shape[0], tuple(grid_shape[1:4])
    return (n, *spatial, input_shape[4]) if channels_last else (n, input_shape[1], *spatial)


def grid_sampler3d(
    input: TensorLike | None,
    grid: TensorLike | None,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    out: TensorLike | None,
) -> GridPlan | None:
    """aclnnGridSampler3DGetWorkspaceSize checks (docs/operator-semantics.md,
    GridSampler3D: check order)."""
    _require([("input", input), ("grid", grid), ("out", out)])
    input, grid, out = _given(input), _given(grid), _given(out)
    _dtype_in("input", input, GRID_DTYPES)
    _same_dtype("grid", grid, "input", input)
    _same_dtype("out", out, "input", input)
    for name, t in (("input", input), ("out", out)):
        if t.format not in (ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC, ACL_FORMAT_ND):
            raise _fail(f"{name} has format {format_name(t.format)}; it must be NCDHW, NDHWC or ND")
    _modes(interpolation_mode, padding_mode)
    for name, t in (("input", input), ("grid", grid), ("out", out)):
        _rank_in(name, t, (5,))
    cl = input.format == ACL_FORMAT_NDHWC
    if not (input.shape[0] == grid.shape[0] == out.shape[0]):
        raise _fail(
            f"N differs: input {input.shape[0]}, grid {grid.shape[0]}, out {out.shape[0]}; they must be equal"
        )
    if _channels(input, cl) != _channels(out, cl):
        raise _fail(f"out has C = {_channels(out, cl)}; it must equal input's C = {_channels(input, cl)}")
    if tuple(grid.shape[1:4]) != _spatial(out, cl):
        raise _fail(
            f"grid has (D, H, W) = {list(grid.shape[1:4])}; it must equal out's {list(_spatial(out, cl))}"
        )
    if input.shape[3] == 0 or input.shape[4] == 0:
        raise _fail(f"input has shape {list(input.shape)}; its dims 3 and 4 must not be 0")
    if grid.shape[4] != 3:
        raise _fail(f"grid has last dim {grid.shape[4]}; it must be 3 (x, y, z)")
    if _numel(input) == 0 or _numel(grid) == 0:
        return None
    return _grid_plan(input, grid, cl, (interpolation_mode, padding_mode, bool(align_corners)))


# -- GridSampler3DBackward ----------------------------------------------------


def grid_sampler3d_backward(
    grad_output: TensorLike | None,
    input: TensorLike | None,
    grid: TensorLike | None,
    interpolation_mode: int,
    padding_mode: int,
    align_corners: bool,
    output_mask: Sequence[bool] | None,
    input_grad: TensorLike | None,
    grid_grad: TensorLike | None,
) -> GridPlan | None:
    """aclnnGridSampler3DBackwardGetWorkspaceSize checks (docs/operator-semantics.md,
    GridSampler3DBackward: check order)."""
    if output_mask is None:
        return None
    _require(
        [
            ("gradOutput", grad_output),
            ("input", input),
            ("grid", grid),
            ("inputGrad", input_grad),
            ("gridGrad", grid_grad),
        ]
    )
    grad_output, input, grid = _given(grad_output), _given(input), _given(grid)
    input_grad, grid_grad = _given(input_grad), _given(grid_grad)
    _dtype_in("input", input, GRID_DTYPES)
    for name, t in (
        ("gradOutput", grad_output),
        ("grid", grid),
        ("inputGrad", input_grad),
        ("gridGrad", grid_grad),
    ):
        _same_dtype(name, t, "input", input)
    _modes(interpolation_mode, padding_mode)
    for name, t in (("input", input), ("grid", grid), ("gradOutput", grad_output)):
        _rank_in(name, t, (5,))
    cl = input.format == ACL_FORMAT_NDHWC
    if not (input.shape[0] == grid.shape[0] == grad_output.shape[0]):
        raise _fail(
            f"N differs: input {input.shape[0]}, grid {grid.shape[0]}, gradOutput {grad_output.shape[0]}; "
            "they must be equal"
        )
    if _channels(input, cl) != _channels(grad_output, cl):
        raise _fail(
            f"gradOutput has C = {_channels(grad_output, cl)}; "
            f"it must equal input's C = {_channels(input, cl)}"
        )
    if tuple(grid.shape[1:4]) != _spatial(grad_output, cl):
        raise _fail(
            f"grid has (D, H, W) = {list(grid.shape[1:4])}; "
            f"it must equal gradOutput's {list(_spatial(grad_output, cl))}"
        )
    if grid.shape[4] != 3:
        raise _fail(f"grid has last dim {grid.shape[4]}; it must be 3 (x, y, z)")
    if tuple(input_grad.shape) != tuple(input.shape):
        raise _fail(
            f"inputGrad has shape {list(input_grad.shape)}; it must equal input's {list(input.shape)}"
        )
    if tuple(grid_grad.shape) != tuple(grid.shape):
        raise _fail(f"gridGrad has shape {list(grid_grad.shape)}; it must equal grid's {list(grid.shape)}")
    if len(output_mask) != 2:
        raise _fail(f"outputMask has length {len(output_mask)}; it must have 2 entries (inputGrad, gridGrad)")
    mask = (bool(output_mask[0]), bool(output_mask[1]))
    if _numel(grad_output) == 0 or _numel(input) == 0 or _numel(grid) == 0 or not any(mask):
        return None
    return _grid_plan(input, grid, cl, (interpolation_mode, padding_mode, bool(align_corners)), mask)
