"""Phase-1 checks of the four operators, in the NPU's order and with its status codes.

Rules: docs/operator-semantics.md (each operator's check order), for Atlas A2/A3
(DAV_2201). The functions take descriptor-like objects (anything with
``shape``, ``data_type`` and ``format``; ``None`` is a null pointer) and
parameter sequences, in the C order of the operator's parameters, and either
raise :class:`CheckFailed` (the op's status and a message naming the C
argument) or return the call's plan; ``None`` means "valid, nothing to
compute" (empty tensors, an empty output mask).

This is the one home of every rule of the operators on the Python side:

- the plans: :class:`MaxPoolPlan` and :class:`GridPlan` hold the 5-D shapes the
  kernel sees (a 4-D max-pool call as N = 1), the output shape, the effective
  parameters (pooling values expanded to three), the compute dtype
  (:func:`pyaclnn.dtypes.compute_dtype`), the layout and, for max pooling, the
  dtype of the indices (int32: :data:`INDEX_DTYPES`) and thereby the size a
  plane may have (:data:`PLANE_LIMIT`, :func:`plane_size_limit`);
- the pooled output size, :func:`pool_output_size` (the one statement of the
  formula), :meth:`PoolParams.pooled` and :func:`pool_output_shape`;
- the grid sampler's output shape, :func:`sampled_shape`;
- the index rule of the max-pool backward, :func:`first_index_outside` and
  :func:`check_indices` (raised by the kernels as :class:`IndexOutOfPlaneError`,
  a device fault on the NPU) and :func:`indices_in_planes` (the host's check).

Who consumes them: the numpy backend's phase 1 (``pyaclnn.backends.numpy._ops``)
runs the operator's check function, named by the operator table's Python name,
and hands the plan to the operator's kernel (``pyaclnn.backends.numpy._kernels``),
which chooses what computes it; the functional layer sizes its outputs and makes
its early host-side checks through ``pyaclnn._operators``, which calls the rule
functions above. The kernels validate nothing the plan guarantees.

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

from .. import _optable
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

INT32_MAX = 2**31 - 1

POOL_DTYPES = (ACL_FLOAT, ACL_FLOAT16, ACL_BF16)
GRID_DTYPES = (ACL_FLOAT, ACL_FLOAT16, ACL_DOUBLE, ACL_BF16)
INDEX_DTYPES = (ACL_INT32,)  # A2/A3; int64 only on the 950 series
#: Atlas A2/A3 index a (n, c) plane with int32: D*H*W of a max-pool input may not exceed this.
PLANE_LIMIT = INT32_MAX

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

# The kinds of parameter a null pointer can stand for.
_POINTERS = (_optable.TENSOR, _optable.OUTPUT, _optable.INT_ARRAY, _optable.BOOL_ARRAY)


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


class IndexOutOfPlaneError(ValueError):
    """An argmax index given to the max-pool backward lies outside its (n, c) input plane.

    Raised by the kernels before they write anything (on the NPU only the kernel
    sees index values, and a bad one is a fault of the device).
    """


def _fail(message: str, status: int = ACLNN_ERR_PARAM_INVALID) -> CheckFailed:
    return CheckFailed(status, message)


def _require(op: str, *args: object) -> None:
    """The null-pointer rule (161001), in C order: ``args`` are the operator's parameters,
    as the operator table lists them; each of a pointer kind must be given."""
    for param, value in zip(_optable.by_name()[op].params, args):
        if value is None and param.kind in _POINTERS:
            raise _fail(f"{param.c_name} is a null pointer; it is required", ACLNN_ERR_PARAM_NULLPTR)


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


def _same_shape(name: str, t: TensorLike, ref_name: str, ref: TensorLike) -> None:
    if tuple(t.shape) != tuple(ref.shape):
        raise _fail(f"{name} has shape {list(t.shape)}; it must equal {ref_name}'s shape {list(ref.shape)}")


def _same_format(named: Sequence[tuple[str, TensorLike]], self: TensorLike) -> None:
    """Each of the two ``named`` tensors must have self's storage format."""
    together = f"self, {named[0][0]} and {named[1][0]}"
    for name, t in named:
        if t.format != self.format:
            raise _fail(
                f"{name} has format {format_name(t.format)}; {together} must share one format "
                f"(self is {format_name(self.format)})"
            )


def _ranks_in(named: Sequence[tuple[str, TensorLike]], ranks: Sequence[int]) -> None:
    for name, t in named:
        if len(t.shape) not in ranks:
            allowed = " or ".join(str(r) for r in ranks)
            raise _fail(
                f"{name} has rank {len(t.shape)} (shape {list(t.shape)}); it must have rank {allowed}"
            )


def _numel(t: TensorLike) -> int:
    return prod(t.shape)


def _shapes_match(a: Sequence[int], b: Sequence[int]) -> bool:
    # The L2 layer accepts equal shapes, or two shapes that both hold exactly one element.
    return tuple(a) == tuple(b) or (prod(a) == 1 and prod(b) == 1)


# -- pooling parameters and the pooled size -----------------------------------


def pool_output_size(
    length: int, kernel: int, stride: int, padding: int, dilation: int, ceil_mode: bool
) -> int:
    """Pooled length of one axis (docs/operator-semantics.md, Pooling parameters: output size).

    Parameters
    ----------
    length : int
        Input length L of the axis.
    kernel, stride, padding, dilation : int
        Window size k, step s, padding p on each side and dilation d.
    ceil_mode : bool
        Round the window count up instead of down.

    Returns
    -------
    int
        ``floor((L + 2p - d(k-1) - 1 + (s-1 if ceil_mode else 0)) / s) + 1``
        (division rounding toward -inf), minus one when ``ceil_mode`` would make
        the last window start inside the right padding, i.e. when
        ``(out-1)*s >= L + p``. May be <= 0; the caller decides whether that is
        an error.
    """
    numerator = length + 2 * padding - dilation * (kernel - 1) - 1
    if ceil_mode:
        numerator += stride - 1
    out = numerator // stride + 1  # Python's // floors toward -inf, as required
    if ceil_mode and (out - 1) * stride >= length + padding:
        out -= 1
    return out


@dataclass(frozen=True)
class PoolParams:
    """The pooling parameters of a call, each expanded to (depth, height, width)."""

    kernel_size: tuple[int, int, int]
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]
    ceil_mode: bool

    def pooled(self, spatial: Sequence[int]) -> tuple[int, int, int]:
        """(Do, Ho, Wo) of an input volume (D, H, W) by :func:`pool_output_size`; a size
        may be <= 0 (no window fits that axis)."""
        d, h, w = (
            pool_output_size(n, k, s, p, dl, self.ceil_mode)
            for n, k, s, p, dl in zip(spatial, self.kernel_size, self.stride, self.padding, self.dilation)
        )
        return d, h, w


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
    """``params.pooled(spatial)``; kept for pyaclnn.selftest, which calls it by this name."""
    return params.pooled(spatial)


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
    return tuple(shape[:-3]) + _nonnegative(params.pooled(shape[-3:]))


def _nonnegative(spatial: tuple[int, int, int]) -> tuple[int, int, int]:
    d, h, w = (max(n, 0) for n in spatial)
    return d, h, w


def plane_size_limit(shape: Sequence[int], forward: bool) -> None:
    """Atlas A2/A3 indexes a (n, c) plane with int32: D*H*W of self must not exceed
    :data:`PLANE_LIMIT`.

    The forward's L0 layer fails with 561103, the backward's L2 check with 161002.
    """
    size = shape[-1] * shape[-2] * shape[-3]
    if size > PLANE_LIMIT:
        raise _fail(
            f"self: D*H*W = {size} exceeds INT32_MAX, which Atlas A2/A3 cannot index",
            ACLNN_ERR_INNER_NULLPTR if forward else ACLNN_ERR_PARAM_INVALID,
        )


# -- the backward's index rule ------------------------------------------------


def first_index_outside(indices: np.ndarray, plane: int) -> int | None:
    """The C-order position of the first index outside [0, ``plane``), or None when every
    index lies inside its (n, c) plane of ``plane`` elements."""
    if indices.size == 0:
        return None
    if indices.dtype.kind == "i" and plane <= np.iinfo(indices.dtype).max:
        # One pass: negative numbers read as unsigned are larger than any plane.
        if int(indices.view(indices.dtype.str.replace("i", "u")).max()) < plane:
            return None
    elif int(indices.min()) >= 0 and int(indices.max()) < plane:
        return None
    bad = (indices < 0) | (indices >= plane)
    return int(np.argmax(bad))  # argmax: the first True in C order


def index_outside_message(indices: np.ndarray, position: int, plane: int) -> str:
    """The message naming ``indices`` at C-order ``position``, outside [0, plane)."""
    where = np.unravel_index(position, indices.shape)
    at = ", ".join(str(int(i)) for i in where)
    return (
        f"indices[{at}] = {int(indices[where])} is outside its (n, c) plane of "
        f"D*H*W = {plane} elements; every index must be in [0, {plane})"
    )


def check_indices(indices: np.ndarray, plane: int) -> None:
    """Raise :class:`IndexOutOfPlaneError` naming the first index outside [0, ``plane``)."""
    position = first_index_outside(indices, plane)
    if position is not None:
        raise IndexOutOfPlaneError(index_outside_message(indices, position, plane))


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
    plane = prod(shape[-3:])
    position = first_index_outside(indices, plane)
    if position is not None:
        raise _fail(index_outside_message(indices, position, plane))


# -- MaxPool3dWithArgmax ------------------------------------------------------
# The forward's and the backward's checks take the same pooling parameters (the C
# operators share them); the rules themselves are written once, in pool_params,
# PoolParams.pooled and plane_size_limit.


@dataclass(frozen=True)
class MaxPoolPlan:
    """A valid max-pool call, as the kernels see it (always 5-D NCDHW).

    The kernels may rely on everything the checks made sure of: parameters that
    pass docs/operator-semantics.md, Pooling parameters, non-empty tensors, the output shape
    pooling gives (every size > 0), one float dtype for the data, indices of
    ``index_dtype`` and planes of at most :data:`PLANE_LIMIT` cells, so that
    every index fits ``index_dtype``.
    """

    params: PoolParams
    batched: bool  # False: 4-D (C, D, H, W) tensors, computed as N = 1
    input_shape: tuple[int, int, int, int, int]  # self / gradInput, (N, C, D, H, W)
    output_shape: tuple[int, int, int, int, int]  # out / indices / gradOutput, (N, C, Do, Ho, Wo)
    compute_dtype: np.dtype
    index_dtype: np.dtype = np.dtype(np.int32)  # of the indices (INDEX_DTYPES)

    @property
    def plane(self) -> int:
        """Elements of one (n, c) input plane: D*H*W."""
        return prod(self.input_shape[2:])


def _pool_plan(
    self: TensorLike, indices: TensorLike, params: PoolParams, spatial: tuple[int, int, int]
) -> MaxPoolPlan:
    shape = tuple(self.shape)
    five = shape if len(shape) == 5 else (1, *shape)
    return MaxPoolPlan(
        params,
        len(shape) == 5,
        five,  # type: ignore[arg-type]
        five[:2] + _nonnegative(spatial),  # type: ignore[arg-type]
        compute_dtype(to_numpy(self.data_type)),
        to_numpy(indices.data_type),
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
    _require("MaxPool3dWithArgmax", self, kernel_size, stride, padding, dilation, ceil_mode, out, indices)
    self, out, indices = _given(self), _given(out), _given(indices)
    _dtype_in("self", self, POOL_DTYPES)
    _dtype_in("indices", indices, INDEX_DTYPES)
    _same_dtype("out", out, "self", self)
    _same_format((("out", out), ("indices", indices)), self)
    if self.format == ACL_FORMAT_NDHWC or self.format in PRIVATE_FORMATS:
        raise _fail(f"self has format {format_name(self.format)}, which Atlas A2/A3 does not support here")
    _ranks_in((("self", self),), (4, 5))
    params = pool_params(_given(kernel_size), _given(stride), _given(padding), _given(dilation), ceil_mode)
    if params.dilation != (1, 1, 1):
        raise _fail(f"dilation {list(_given(dilation))}: Atlas A2/A3 supports only dilation 1 in the forward")
    if _numel(self) == 0 or _numel(out) == 0:
        return None
    spatial = params.pooled(self.shape[-3:])
    expected = tuple(self.shape[:-3]) + spatial
    for name, t in (("out", out), ("indices", indices)):
        if not _shapes_match(t.shape, expected):
            raise _fail(
                f"{name} has shape {list(t.shape)}; pooling self {list(self.shape)} with these "
                f"parameters gives {list(expected)}"
            )
    plane_size_limit(self.shape, forward=True)
    return _pool_plan(self, indices, params, spatial)


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
        "MaxPool3dWithArgmaxBackward",
        grad_output,
        self,
        indices,
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
        grad_input,
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
    _same_format((("gradOutput", grad_output), ("gradInput", grad_input)), self)
    for name, t in (
        ("gradOutput", grad_output),
        ("self", self),
        ("indices", indices),
        ("gradInput", grad_input),
    ):
        if t.format in PRIVATE_FORMATS:
            raise _fail(f"{name} has the private format {format_name(t.format)}; use ND, NCHW or NCDHW")
    _ranks_in(
        (("gradOutput", grad_output), ("gradInput", grad_input), ("indices", indices), ("self", self)), (4, 5)
    )
    params = pool_params(_given(kernel_size), _given(stride), _given(padding), _given(dilation), ceil_mode)
    plane_size_limit(self.shape, forward=False)
    _same_shape("indices", indices, "gradOutput", grad_output)
    _same_shape("gradInput", grad_input, "self", self)
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
    spatial = params.pooled(self.shape[-3:])
    expected = tuple(self.shape[:-3]) + spatial
    if min(spatial) <= 0 or tuple(grad_output.shape) != expected:
        raise _fail(
            f"gradOutput has shape {list(grad_output.shape)}; pooling self {list(self.shape)} with these "
            f"parameters gives {list(expected)}"
        )
    return _pool_plan(self, indices, params, spatial)


# -- GridSampler3D ------------------------------------------------------------


@dataclass(frozen=True)
class GridPlan:
    """A valid grid-sampler call, as the kernels see it (input and out / gradOutput as NCDHW).

    The kernels may rely on non-empty tensors of one float dtype, valid modes,
    a grid of (N, Do, Ho, Wo, 3) and, in the backward, at least one output wanted.
    """

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


def _grid_shapes(input: TensorLike, grid: TensorLike, result: tuple[str, TensorLike], cl: bool) -> None:
    """N, C and (D, H, W) of the sampled tensor ``result`` (out or gradOutput) against input and grid.

    Each message names the tensor that differs first: input gives N and C, the grid
    (after its N) the sampled (D, H, W), so grid's N and result's N, C and (D, H, W)
    are what a rule can find wrong.
    """
    name, t = result
    for other, o in (("grid", grid), (name, t)):
        if o.shape[0] != input.shape[0]:
            raise _fail(f"{other} has N = {o.shape[0]}; it must equal input's N = {input.shape[0]}")
    if _channels(input, cl) != _channels(t, cl):
        raise _fail(f"{name} has C = {_channels(t, cl)}; it must equal input's C = {_channels(input, cl)}")
    if tuple(grid.shape[1:4]) != _spatial(t, cl):
        raise _fail(
            f"{name} has (D, H, W) = {list(_spatial(t, cl))}; it must equal grid's {list(grid.shape[1:4])}"
        )


def _grid_last_dim(grid: TensorLike) -> None:
    if grid.shape[4] != 3:
        raise _fail(f"grid has last dim {grid.shape[4]}; it must be 3 (x, y, z)")


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
    _require("GridSampler3D", input, grid, interpolation_mode, padding_mode, align_corners, out)
    input, grid, out = _given(input), _given(grid), _given(out)
    _dtype_in("input", input, GRID_DTYPES)
    _same_dtype("grid", grid, "input", input)
    _same_dtype("out", out, "input", input)
    for name, t in (("input", input), ("out", out)):
        if t.format not in (ACL_FORMAT_NCDHW, ACL_FORMAT_NDHWC, ACL_FORMAT_ND):
            raise _fail(f"{name} has format {format_name(t.format)}; it must be NCDHW, NDHWC or ND")
    _modes(interpolation_mode, padding_mode)
    _ranks_in((("input", input), ("grid", grid), ("out", out)), (5,))
    cl = input.format == ACL_FORMAT_NDHWC
    _grid_shapes(input, grid, ("out", out), cl)
    if input.shape[3] == 0 or input.shape[4] == 0:
        raise _fail(f"input has shape {list(input.shape)}; its dims 3 and 4 must not be 0")
    _grid_last_dim(grid)
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
        "GridSampler3DBackward",
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
    _ranks_in((("input", input), ("grid", grid), ("gradOutput", grad_output)), (5,))
    cl = input.format == ACL_FORMAT_NDHWC
    _grid_shapes(input, grid, ("gradOutput", grad_output), cl)
    _grid_last_dim(grid)
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
