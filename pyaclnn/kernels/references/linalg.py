"""Linear algebra references: the matmul family (Matmul, BatchMatMul, Mm, Mv, Dot, Addmm, Baddbmm,
InplaceAddmm, InplaceBaddbmm, Addbmm) and Convolution.

Each is torch's aten operator (``matmul``, ``bmm``, ``mm``, ``mv``, ``dot``, ``addmm``, ``baddbmm``,
``addmm_``, ``baddbmm_``, ``addbmm``, ``convolution``): the operands of one float dtype, the product
accumulated in float32 (fp16 and bf16 upcast, the result rounded once to the output's dtype).
``cubeMathType`` is accepted and changes nothing: the CPU computes at full precision (the NPU may run
float32 as HF32 or fp16 with ALLOW_FP32_DOWN_PRECISION). ``out = beta * self + alpha * product``
ignores ``self`` when beta is 0, as torch does (a NaN there does not propagate). Convolution is
im2col (a strided window view copied once) and one float32 matmul per group; a transposed
convolution is the convolution of the input dilated by the stride with the flipped kernel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...constants import ACLNN_ERR_PARAM_NULLPTR
from ._registry import TensorInfo
from ._rules import (
    MATH,
    PHASE2_CONST,
    Row,
    broadcast,
    dtype_name,
    fail,
    register_rows,
    required,
    shaped,
    write,
)

_F32 = np.dtype(np.float32)

# -- the matmul family -----------------------------------------------------------------------------

_MM = "const aclTensor* self, const aclTensor* mat2, aclTensor* out, int8_t cubeMathType"
_ADD = "const aclScalar* beta, const aclScalar* alpha"

MATMUL: tuple[Row, ...] = (
    Row("Matmul", "aclnn_matmul.h", _MM, "matmul", MATH),
    Row("BatchMatMul", "aclnn_batch_matmul.h", _MM, "bmm", MATH),
    Row("Mm", "aclnn_mm.h", _MM, "mm", MATH),
    Row(
        "Mv",
        "aclnn_mv.h",
        "const aclTensor* self, const aclTensor* vec, aclTensor* out, int8_t cubeMathType",
        "mv",
        MATH,
    ),
    Row("Dot", "aclnn_dot.h", "const aclTensor* self, const aclTensor* tensor, aclTensor* out", "dot", MATH),
    Row(
        "Addmm",
        "aclnn_addmm.h",
        f"const aclTensor* self, const aclTensor* mat1, const aclTensor* mat2, {_ADD}, aclTensor* out, "
        "int8_t cubeMathType",
        "mm",
        MATH,
        PHASE2_CONST,
    ),
    Row(
        "InplaceAddmm",
        "aclnn_addmm.h",
        f"const aclTensor* selfRef, const aclTensor* mat1, const aclTensor* mat2, {_ADD}, "
        "int8_t cubeMathType",
        "mm",
        MATH,
        PHASE2_CONST,
    ),
    Row(
        "Baddbmm",
        "aclnn_baddbmm.h",
        f"const aclTensor* self, const aclTensor* batch1, const aclTensor* batch2, {_ADD}, aclTensor* out, "
        "int8_t cubeMathType",
        "bmm",
        MATH,
    ),
    Row(
        "InplaceBaddbmm",
        "aclnn_baddbmm.h",
        f"const aclTensor* selfRef, const aclTensor* batch1, const aclTensor* batch2, {_ADD}, "
        "int8_t cubeMathType",
        "bmm",
        MATH,
    ),
    Row(
        "Addbmm",
        "aclnn_addbmm.h",
        f"const aclTensor* self, const aclTensor* batch1, const aclTensor* batch2, {_ADD}, aclTensor* out, "
        "int8_t cubeMathType",
        "addbmm",
        MATH,
    ),
)


def _operands(row: Row, values: dict[str, Any]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """The two factors (name, value): mat1/batch1 and mat2/batch2 of the add forms, else self and the
    second tensor."""
    names = [n for n in row.names if n not in ("self", "selfRef", "out", "beta", "alpha", "cubeMathType")]
    if "mat1" not in names and "batch1" not in names:
        names = ["self", *names]
    return (names[0], values[names[0]]), (names[1], values[names[1]])


def _product_shape(row: Row, a: tuple[str, TensorInfo], b: tuple[str, TensorInfo]) -> tuple[int, ...]:
    (na, ta), (nb, tb) = a, b
    sa, sb = tuple(ta.shape), tuple(tb.shape)
    ranks = {"bmm": (3, 3), "addbmm": (3, 3), "mm": (2, 2), "mv": (2, 1), "dot": (1, 1)}.get(row.form)
    if ranks is not None and (len(sa), len(sb)) != ranks:
        raise fail(f"{na} has {len(sa)} dims and {nb} {len(sb)}; {row.name} takes {ranks[0]} and {ranks[1]}")
    if not sa or not sb:
        raise fail(f"{na} shape {list(sa)} and {nb} shape {list(sb)}: matmul takes no 0-d tensor")
    a2 = (1, *sa) if len(sa) == 1 else sa
    b2 = (*sb, 1) if len(sb) == 1 else sb
    if a2[-1] != b2[-2]:
        raise fail(f"{na} shape {list(sa)} and {nb} shape {list(sb)} cannot be multiplied")
    if row.form in ("bmm", "addbmm") and sa[0] != sb[0]:
        raise fail(f"{na} has {sa[0]} batches and {nb} {sb[0]}: they must be equal")
    batch = broadcast(na, a2[:-2], nb, b2[:-2])
    shape = (*batch, a2[-2], b2[-1])
    if len(sb) == 1:
        shape = shape[:-1]
    if len(sa) == 1:
        shape = shape[:-2] + shape[-1:] if len(sb) > 1 else shape[:-1]
    return shape[1:] if row.form == "addbmm" else shape


def check_matmul(row: Row, **values: Any) -> None:
    tensors = {n: v for n, v in values.items() if n not in ("beta", "alpha", "cubeMathType")}
    required(**tensors)
    for n in ("beta", "alpha"):
        if n in values and values[n] is None:
            raise fail(f"{n} is a null pointer, it must be an aclScalar", ACLNN_ERR_PARAM_NULLPTR)
    a, b = _operands(row, values)
    dtype = a[1].dtype
    for n, t in tensors.items():
        if dtype_name(t.dtype) not in row.dtypes:
            raise fail(f"{n} has dtype {t.dtype.name}, which is not one of {', '.join(sorted(row.dtypes))}")
        if t.dtype != dtype:
            raise fail(f"{n} has dtype {t.dtype.name} and {a[0]} {dtype.name}: they must be equal")
    shape = _product_shape(row, a, b)
    if "out" in values:
        shaped("out", values["out"], shape)
    added: Any = values.get("self", values.get("selfRef"))
    if "beta" in values:
        name = "self" if "self" in values else "selfRef"
        joint = broadcast(name, added.shape, "the product", shape)
        if joint != shape or (name == "selfRef" and tuple(added.shape) != shape):
            raise fail(f"{name} has shape {list(added.shape)}, which does not broadcast to {list(shape)}")
    cube = values.get("cubeMathType", 0)
    if cube not in (0, 1, 2, 3):
        raise fail(f"cubeMathType {cube} is not one of 0, 1, 2, 3")


def kernel_matmul(row: Row, **values: Any) -> None:
    (_, a), (_, b) = _operands(row, values)
    a, b = a.astype(_F32, copy=False), b.astype(_F32, copy=False)  # the CPU: full fp32 precision
    if row.form == "addbmm":  # sum over the batch: one (m, b*k) @ (b*k, n) product
        product = np.matmul(a.transpose(1, 0, 2).reshape(a.shape[1], -1), b.reshape(-1, b.shape[2]))
    else:
        product = np.matmul(a, b)
    target: np.ndarray = values["out"] if "out" in values else values["selfRef"]
    if "beta" in values:
        beta, alpha = float(values["beta"]), float(values["alpha"])
        if alpha != 1:
            product = product * np.float32(alpha)
        if beta != 0:  # beta 0 ignores self: a NaN there does not propagate
            added = np.asarray(values.get("self", values.get("selfRef"))).astype(_F32)
            product = product + (added if beta == 1 else added * np.float32(beta))
    write(target, product)


register_rows(MATMUL, check_matmul, kernel_matmul)


# -- Convolution ---------------------------------------------------------------------------------------

_CONVOLUTION = (
    "const aclTensor* input, const aclTensor* weight, const aclTensor* bias, const aclIntArray* stride, "
    "const aclIntArray* padding, const aclIntArray* dilation, bool transposed, "
    "const aclIntArray* outputPadding, const int64_t groups, aclTensor* output, int8_t cubeMathType"
)
_CONVOLUTION_PHASE2 = (
    "void* workspace, const uint64_t workspaceSize, aclOpExecutor* executor, aclrtStream stream"
)
CONVOLUTION: tuple[Row, ...] = (
    Row("Convolution", "aclnn_convolution.h", _CONVOLUTION, "convolution", MATH, _CONVOLUTION_PHASE2),
)


def _expand(name: str, values: tuple[int, ...] | None, count: int, low: int) -> tuple[int, ...]:
    if values is None:
        raise fail(f"{name} is a null pointer, it must be an aclIntArray", ACLNN_ERR_PARAM_NULLPTR)
    if len(values) == 1:
        values = tuple(values) * count
    if len(values) != count or any(v < low for v in values):
        raise fail(f"{name} {list(values)} must have {count} values (or one), each at least {low}")
    return tuple(values)


def _convolution_shape(values: dict[str, Any]) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """The output's shape, and stride, padding, dilation, output padding expanded."""
    x, w, groups = values["input"], values["weight"], values["groups"]
    rank = len(x.shape)
    if rank not in (3, 4, 5) or len(w.shape) != rank:
        raise fail(f"input has {rank} dims and weight {len(w.shape)}: they must be equal, 3 to 5")
    n = rank - 2
    stride = _expand("stride", values["stride"], n, 1)
    padding = _expand("padding", values["padding"], n, 0)
    dilation = _expand("dilation", values["dilation"], n, 1)
    transposed = values["transposed"]
    output_padding = _expand("outputPadding", values["outputPadding"], n, 0) if transposed else (0,) * n
    if groups < 1:
        raise fail(f"groups {groups} must be at least 1")
    cin = x.shape[1]
    if transposed:
        if w.shape[0] != cin or cin % groups:
            raise fail(f"weight shape {list(w.shape)} does not fit input channels {cin} in {groups} groups")
        cout = w.shape[1] * groups
        if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
            raise fail(
                f"outputPadding {list(output_padding)} must be smaller than the stride or the dilation"
            )
        sizes = tuple(
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, s, p, d, k, op in zip(x.shape[2:], stride, padding, dilation, w.shape[2:], output_padding)
        )
    else:
        cout = w.shape[0]
        if w.shape[1] * groups != cin or cout % groups:
            raise fail(f"weight shape {list(w.shape)} does not fit input channels {cin} in {groups} groups")
        sizes = tuple(
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, w.shape[2:])
        )
    if any(size <= 0 for size in sizes):
        raise fail(f"the output's spatial size {list(sizes)} is not positive")
    return (x.shape[0], cout, *sizes), (stride, padding, dilation, output_padding)


def check_convolution(row: Row, **values: Any) -> None:
    required(input=values["input"], weight=values["weight"], output=values["output"])
    dtype = values["input"].dtype
    for name in ("input", "weight", "bias", "output"):
        t = values[name]
        if t is not None and (dtype_name(t.dtype) not in row.dtypes or t.dtype != dtype):
            raise fail(
                f"{name} has dtype {t.dtype.name}; it must be input's ({dtype.name}), one of float32, "
                "float16, bfloat16"
            )
    shape, _ = _convolution_shape(values)
    bias = values["bias"]
    if bias is not None and tuple(bias.shape) != (shape[1],):
        raise fail(f"bias has shape {list(bias.shape)}; it must be [{shape[1]}]")
    shaped("output", values["output"], shape)
    if values["cubeMathType"] not in (0, 1, 2, 3):
        raise fail(f"cubeMathType {values['cubeMathType']} is not one of 0, 1, 2, 3")


def _convolve(
    x: np.ndarray, w: np.ndarray, stride: tuple[int, ...], dilation: tuple[int, ...], groups: int
) -> np.ndarray:
    """A convolution of an already padded float32 input: im2col (one copy of the strided windows,
    in the order (N, C, *k, *out) that reads them nearly in memory order) and one float32 matmul per
    group and batch giving (N, O, *out), the output's own layout."""
    n = x.ndim - 2
    spatial = tuple(range(2, x.ndim))
    extents = tuple(d * (k - 1) + 1 for d, k in zip(dilation, w.shape[2:]))
    windows = np.lib.stride_tricks.sliding_window_view(x, extents, axis=spatial)
    steps: tuple[Any, ...] = (..., *(slice(None, None, s) for s in (*stride, *dilation)))
    windows = windows[steps]  # (N, C, *out, *k)
    batch, cin = x.shape[:2]
    sizes = windows.shape[2 : 2 + n]
    cg, og = cin // groups, w.shape[0] // groups
    depth = cg * math.prod(w.shape[2:])
    order = (0, 1, *range(2 + n, 2 + 2 * n), *range(2, 2 + n))
    columns = windows.transpose(order).reshape(batch, groups, depth, math.prod(sizes))
    weights = w.reshape(1, groups, og, depth)
    result: np.ndarray = np.matmul(weights, columns).reshape(batch, groups * og, *sizes)
    return result


def kernel_convolution(row: Row, **values: Any) -> None:
    x, w, bias = values["input"], values["weight"], values["bias"]
    info = {k: (TensorInfo(v.shape, v.dtype) if isinstance(v, np.ndarray) else v) for k, v in values.items()}
    _, (stride, padding, dilation, output_padding) = _convolution_shape(info)
    groups = values["groups"]
    x = x.astype(_F32, copy=False)
    w = w.astype(_F32, copy=False)
    n = x.ndim - 2
    if values["transposed"]:
        # the input dilated by the stride, padded by d*(k-1)-p (+ the output padding after), convolved
        # with the kernel flipped and its channels swapped within each group
        dilated = np.zeros((*x.shape[:2], *((i - 1) * s + 1 for i, s in zip(x.shape[2:], stride))), _F32)
        spread: tuple[slice, ...] = (slice(None), slice(None), *(slice(None, None, s) for s in stride))
        dilated[spread] = x
        before = [d * (k - 1) - p for d, k, p in zip(dilation, w.shape[2:], padding)]
        after = [b + op for b, op in zip(before, output_padding)]
        x = _pad(dilated, before, after)
        cin, og = w.shape[0], w.shape[1]
        w = w.reshape(groups, cin // groups, og, *w.shape[2:]).swapaxes(1, 2)
        w = np.flip(w, axis=tuple(range(3, 3 + n))).reshape(groups * og, cin // groups, *w.shape[3:])
        result = _convolve(x, w, (1,) * n, dilation, groups)
    else:
        result = _convolve(_pad(x, list(padding), list(padding)), w, stride, dilation, groups)
    if bias is not None:  # result is a new array: in place
        result += bias.astype(_F32).reshape(-1, *(1,) * n)
    write(values["output"], result)


def _pad(x: np.ndarray, before: list[int], after: list[int]) -> np.ndarray:
    """``x`` padded with zeros on its spatial dims (a negative amount crops)."""
    crop = tuple(
        slice(max(-b, 0), x.shape[2 + i] - max(-a, 0)) for i, (b, a) in enumerate(zip(before, after))
    )
    kept: tuple[slice, ...] = (slice(None), slice(None), *crop)
    x = x[kept]
    if any(b > 0 for b in before) or any(a > 0 for a in after):
        x = np.pad(x, ((0, 0), (0, 0), *((max(b, 0), max(a, 0)) for b, a in zip(before, after))))
    return x


register_rows(CONVOLUTION, check_convolution, kernel_convolution)
