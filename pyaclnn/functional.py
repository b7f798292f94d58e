"""High-level functions: the four operators on NumPy arrays or DeviceArrays.

Each call normalises its arguments and hands them to the runtime's
:class:`~pyaclnn.runtime.Launch`, which queues the two phases of the aclnn
operator on a stream and returns arrays of the kind it was given: NumPy in,
NumPy out (the call waits for its stream; on the numpy backend the operator
reads and writes the NumPy arrays where they are); any DeviceArray in,
DeviceArrays out (the call returns once the work is queued).

For type checkers each function is overloaded on that rule in functional.pyi,
generated from the signatures here by scripts/generate_interface.py: NumPy
arrays in (with no ``out=`` or a NumPy one) give ``numpy.ndarray`` results;
any DeviceArray input, or a DeviceArray ``out=``, gives ``DeviceArray``
results. Either kind has ``input``'s scalar type (``DeviceArray[np.float16]``
in, ``DeviceArray[np.float16]`` out), max-pool indices int32 (int64 for
``indices_dtype=np.int64``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _arguments as _args
from . import _docstrings, _launch, runtime
from . import _operators as _ops
from . import dtypes as _dtypes
from ._arguments import InterpolationMode, IntOrSeq, Layout, OutArray, OutPair, PaddingMode, PoolInts
from ._arguments import int_tuple as int_tuple  # the selftest and users of 0.x reach it here
from .errors import ACLNN_ERR_PARAM_INVALID, AclError, AclnnError, describe
from .runtime import DeviceArray, Launch, Stream

#: What the functions take as an array input: a NumPy array (uploaded for the call) or a DeviceArray.
#: (Not NumPy's ``ArrayLike``: lists, scalars and other array-likes are not accepted.)
ArrayIn = npt.NDArray[Any] | DeviceArray
#: An integer result (max-pool indices); to type checkers an ``ArrayIn`` whose NumPy form has an
#: integer dtype (functional.pyi).
Indices = ArrayIn

_ND = _dtypes.ACL_FORMAT_ND
_ND3 = (_ND, _ND, _ND)
_FLOAT32 = np.dtype(np.float32)
_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)

# The operators' records (C names, phases, the Python names of their C arguments).
_MAX_POOL = _ops.OPERATORS["max_pool3d_with_argmax"]
_MAX_POOL_BACKWARD = _ops.OPERATORS["max_pool3d_with_argmax_backward"]
_GRID_SAMPLER = _ops.OPERATORS["grid_sampler3d"]
_GRID_SAMPLER_BACKWARD = _ops.OPERATORS["grid_sampler3d_backward"]

__all__ = [
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d",
    "grid_sampler3d_backward",
]


# -- MaxPool3dWithArgmax(Backward) ---------------------------------------------


def _pool_output_shape(x: DeviceArray | None, params: PoolInts, ceil_mode: bool) -> tuple[int, ...]:
    """Output shape for valid parameters; a placeholder otherwise (phase 1 then reports the problem)."""
    return _ops.PLACEHOLDER_SHAPE if x is None else _ops.pooled_shape(x.shape, *params, ceil_mode)


@_docstrings.fill
def max_pool3d_with_argmax(
    input: ArrayIn,
    kernel_size: IntOrSeq,
    stride: IntOrSeq = (),
    padding: IntOrSeq = 0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
    *,
    indices_dtype: npt.DTypeLike = np.int32,
    out: OutPair | None = None,
    backend: str | None = None,
    stream: Stream | None = None,
) -> tuple[ArrayIn, Indices]:
    """3-D max pooling with the position of each maximum (``aclnnMaxPool3dWithArgmax``).

    Parameters
    ----------
    input : ndarray or DeviceArray
        (N, C, D, H, W) or (C, D, H, W); float32, float16 or bfloat16; any strides.
    %(pool_params)s
    indices_dtype : int32 or int64
        Atlas A2/A3 computes int32 indices; int64 is widened after the op.
    out : (array or None, array or None), optional
        Arrays to write (out, indices) into, of the shapes and dtypes the call
        gives (indices: int32), any strides; None entries are allocated. The
        call returns them.
        %(out_kinds)s
    %(backend_stream)s

    Returns
    -------
    out, indices
        Pooled values, and for each the flat position d*H*W + h*W + w of the
        maximum in its (n, c) plane. Ties go to the first maximum; a window with
        NaN gives NaN and the last NaN's position. An axis where no window fits
        has size 0: the outputs are empty and the op succeeds, as on the NPU.

    Raises
    ------
    %(raises_aclnn)s
    %(raises_device)s
    %(raises_arguments)s
    ValueError
        Also for an ``indices_dtype`` other than int32 and int64, and for int64
        together with ``out`` (pass int32 indices there).
    """
    ints = _args.pool_ints(kernel_size, stride, padding, dilation)
    ceil = _args.flag("ceil_mode", ceil_mode)
    out_values, out_indices = _args.out_pair(out)
    try:
        wanted = np.dtype(indices_dtype)
    except TypeError:
        raise TypeError(
            f"indices_dtype must be a NumPy dtype (int32 or int64), got {describe(indices_dtype)}"
        ) from None
    if wanted not in (_INT32, _INT64):
        # Checked here: the op would name its indices output (out[1]), not this argument.
        raise ValueError(f"indices_dtype must be int32 or int64, got {wanted}")
    device_dtype = _INT32 if wanted == _INT64 else wanted
    if out_indices is not None and wanted != device_dtype:
        raise ValueError(
            f"out: indices_dtype {wanted} is widened from the device's int32 after the op; "
            "with out= pass int32 indices"
        )
    _ops.check_plane_size(_MAX_POOL, getattr(input, "shape", ()))
    with Launch(backend, stream, (input, out_values, out_indices), _MAX_POOL.spec.python_name) as call:
        x = call.device("input", input)
        shape = _pool_output_shape(x, ints, ceil)
        known = x is not None and len(x.shape) in (4, 5)  # (no property call)
        values = call.output(shape, x.dtype if x is not None else _FLOAT32, out_values, "out[0]", known)
        indices = call.output(shape, device_dtype, out_indices, "out[1]", known)
        call.launch(
            _MAX_POOL,
            None if x is None else x.descriptor(_dtypes.ACL_FORMAT_ND),
            *call.int_arrays(ints),
            ceil,
            values.descriptor(_dtypes.ACL_FORMAT_ND),
            indices.descriptor(_dtypes.ACL_FORMAT_ND),
            outputs=(values, indices),
        )
        if wanted == device_dtype:
            return call.result(values), call.result(indices)
        if not call.device_results:
            return call.result(values), np.asarray(call.result(indices)).astype(wanted)
        return call.result(values), runtime.to_device(indices.numpy().astype(wanted), backend=call.backend)


def _int32_indices(indices: Any) -> Any:
    """int64 ``indices`` (NumPy or a DeviceArray) narrowed on the host to the int32 the device
    takes; a value outside int32 is reported. Anything else is returned as it is."""
    if type(indices) is DeviceArray and indices.dtype is _INT32:
        return indices  # the common case (the forward's own indices), without the general test below
    if not isinstance(indices, (np.ndarray, DeviceArray)) or indices.dtype != _INT64:
        return indices
    host = indices.numpy() if isinstance(indices, DeviceArray) else indices
    bad = np.flatnonzero((host < np.iinfo(np.int32).min) | (host > np.iinfo(np.int32).max))
    if bad.size:
        where = tuple(int(i) for i in np.unravel_index(bad[0], host.shape))
        raise AclnnError(
            ACLNN_ERR_PARAM_INVALID,
            f"indices{list(where)} = {host[where]} is outside its (n, c) plane "
            "(it does not even fit in int32)",
            _MAX_POOL_BACKWARD.phase2_api,
        )
    narrowed = host.astype(np.int32)
    if isinstance(indices, DeviceArray):  # a call on DeviceArrays: its indices stay on the device
        return runtime.to_device(narrowed, backend=indices.backend, device=indices.device)
    return narrowed


@_docstrings.fill
def max_pool3d_with_argmax_backward(
    grad_output: ArrayIn,
    input: ArrayIn,
    indices: ArrayIn,
    kernel_size: IntOrSeq,
    stride: IntOrSeq = (),
    padding: IntOrSeq = 0,
    dilation: IntOrSeq = 1,
    ceil_mode: bool = False,
    *,
    out: OutArray | None = None,
    backend: str | None = None,
    stream: Stream | None = None,
) -> ArrayIn:
    """Gradient of :func:`max_pool3d_with_argmax` (``aclnnMaxPool3dWithArgmaxBackward``).

    Parameters
    ----------
    grad_output : ndarray or DeviceArray
        Gradient of the pooled output, the shape pooling gives; input's dtype.
    input : ndarray or DeviceArray
        The forward input, (N, C, D, H, W) or (C, D, H, W); float32, float16 or bfloat16.
    indices : ndarray or DeviceArray
        The forward's indices, grad_output's shape; int32 (int64 is narrowed first).
    %(pool_params)s
    out : DeviceArray or ndarray, optional
        The array to write grad_input into (input's shape and dtype); returned.
        %(out_kinds)s
    %(backend_stream)s

    Returns
    -------
    grad_input
        input's shape and dtype: grad_output added at each index, accumulated in
        float32 and rounded once.

    Raises
    ------
    %(raises_aclnn)s
        Also 161002 for a grad_output whose shape differs from what pooling
        input gives, and for a NumPy ``indices`` with an index outside its
        (n, c) plane, naming the first one (checked on the host before the upload).
    %(raises_device)s
        Also for DeviceArray indices with an index outside its plane: only the
        kernel sees them; the emulations refuse to write and report the
        runtime's ``ACL_ERROR_RT_VECTOR_CORE_EXCEPTION`` naming the position
        (the NPU itself would write out of bounds).
    %(raises_arguments)s
    """
    unchecked = None
    if out is None and type(indices) is DeviceArray and indices.dtype is _INT32:  # (no narrowing)
        # Plain ints and a bool key the checks as given (the types first: True == 1 hashes alike,
        # and a bool is refused where an int is due); anything else, normalised.
        if (
            type(kernel_size) is int
            and type(padding) is int
            and type(dilation) is int
            and type(ceil_mode) is bool
            and (type(stride) is int or (type(stride) is tuple and not stride))
        ):
            params: tuple[Any, ...] = (kernel_size, stride, padding, dilation, ceil_mode)
        else:
            params = (
                _args.pool_ints(kernel_size, stride, padding, dilation),
                _args.flag("ceil_mode", ceil_mode),
            )
        found = _launch.crafted(_MAX_POOL_BACKWARD, backend, stream, params, grad_output, input, indices)
        if isinstance(found, tuple):
            return found[0]
        unchecked = found
    ints = _args.pool_ints(kernel_size, stride, padding, dilation)
    ceil = _args.flag("ceil_mode", ceil_mode)
    result = _max_pool_backward(grad_output, input, indices, ints, ceil, out, backend, stream)
    if unchecked is not None:  # checked now: the next such call skips the checks
        handles = unchecked.ctx.int_array_sets.get(ints)
        unchecked.remember(
            _ND3, None if handles is None else (*handles, ceil), ((input.shape, input.dtype, _ND),)
        )
    return result


def _max_pool_backward(
    grad_output: ArrayIn,
    input: ArrayIn,
    indices: ArrayIn,
    ints: PoolInts,
    ceil: bool,
    out: OutArray | None,
    backend: str | None,
    stream: Stream | None,
) -> ArrayIn:
    """max_pool3d_with_argmax_backward with its parameters normalised, through :class:`Launch`."""
    _ops.check_plane_size(_MAX_POOL_BACKWARD, getattr(input, "shape", ()))
    given = _args.out_one(out)
    with Launch(
        backend, stream, (grad_output, input, indices, given), _MAX_POOL_BACKWARD.spec.python_name
    ) as call:
        g = call.device("grad_output", grad_output)
        x = call.device("input", input)
        narrowed = _int32_indices(indices)
        i = call.device("indices", narrowed)
        if narrowed is not indices and isinstance(narrowed, DeviceArray):
            call.temporary(narrowed)  # the narrowed copy is the call's
        # For an input of a rank the op refuses, a placeholder out: one of input's shape would be
        # refused first (the op checks gradInput's rank before self's) and named instead of input.
        known = x is not None and len(x.shape) in (4, 5)  # (no property call)
        grad_input = call.output(
            x.shape if x is not None and known else _ops.PLACEHOLDER_SHAPE,
            x.dtype if x is not None else _FLOAT32,
            given,
            "out",
            known,
        )
        nd = _dtypes.ACL_FORMAT_ND
        check = _host_indices_check(indices, input) if isinstance(indices, np.ndarray) else None
        try:
            call.launch(
                _MAX_POOL_BACKWARD,
                None if g is None else g.descriptor(nd),
                None if x is None else x.descriptor(nd),
                None if i is None else i.descriptor(nd),
                *call.int_arrays(ints),
                ceil,
                grad_input.descriptor(nd),
                outputs=(grad_input,),
                admit=None if check is None or call.kernel_checks_first else check,
            )
            return call.result(grad_input)
        except AclError as exc:
            if check is not None and call.kernel_checks_first and not isinstance(exc, AclnnError):
                check()  # a device error: the kernel's refusal of an index, told as the host check tells it
            raise


def _host_indices_check(indices: Any, input: Any) -> Callable[[], None] | None:
    """The index rule for NumPy ``indices``: raises 161002 naming the first index outside its
    plane. Run once phase 1 has accepted the call, before the launch; or, where the kernel
    checks first (:attr:`Launch.kernel_checks_first`), only when the kernel refused.

    On the device only the kernel sees index values (a bad one is a device
    error at the next wait); indices the host holds are checked by the host.
    """
    if not isinstance(indices, np.ndarray):
        return None

    def check() -> None:
        try:
            _ops.check_indices_in_planes(_MAX_POOL_BACKWARD, indices, input.shape)
        except AclnnError as exc:
            raise exc from None  # not "during handling of" the device error it replaces

    return check


# -- GridSampler3D(Backward) ---------------------------------------------------


def _sampled_shape(x: DeviceArray | None, grid: DeviceArray | None, channels_last: bool) -> tuple[int, ...]:
    """Shape of grid_sampler3d's output; a placeholder when the inputs cannot give one."""
    if x is None or grid is None:
        return _ops.PLACEHOLDER_SHAPE
    return _ops.sampled_shape(x.shape, grid.shape, channels_last)


@_docstrings.fill
def grid_sampler3d(
    input: ArrayIn,
    grid: ArrayIn,
    interpolation_mode: InterpolationMode = "bilinear",
    padding_mode: PaddingMode = "zeros",
    align_corners: bool = False,
    *,
    layout: Layout = "NCDHW",
    out: OutArray | None = None,
    backend: str | None = None,
    stream: Stream | None = None,
) -> ArrayIn:
    """Sample ``input`` at the points of ``grid`` (``aclnnGridSampler3D``).

    Parameters
    ----------
    input : ndarray or DeviceArray
        (N, C, D, H, W), or (N, D, H, W, C) with ``layout="NDHWC"``; float32,
        float16, bfloat16 or float64; any strides.
    grid : ndarray or DeviceArray
        (N, Do, Ho, Wo, 3) of (x, y, z) in [-1, 1]; input's dtype.
    %(grid_modes)s
    %(layout)s
    out : DeviceArray or ndarray, optional
        The array to write the result into (its shape and dtype); returned.
        %(out_kinds)s
    %(backend_stream)s

    Returns
    -------
    out
        (N, C, Do, Ho, Wo), or (N, Do, Ho, Wo, C) with ``layout="NDHWC"``.

    Raises
    ------
    %(raises_aclnn)s
    %(raises_device)s
    %(raises_arguments)s
    """
    interp = _args.mode("interpolation_mode", interpolation_mode, _args.INTERPOLATION)
    pad = _args.mode("padding_mode", padding_mode, _args.PADDING)
    corners = _args.flag("align_corners", align_corners)
    fmt = _args.layout(layout)
    given = _args.out_one(out)
    with Launch(backend, stream, (input, grid, given), _GRID_SAMPLER.spec.python_name) as call:
        x = call.device("input", input)
        g = call.device("grid", grid)
        result = call.output(
            _sampled_shape(x, g, fmt == _dtypes.ACL_FORMAT_NDHWC),
            x.dtype if x is not None else _FLOAT32,
            given,
            "out",
            x is not None and g is not None and x.ndim == 5 and g.ndim == 5,
        )
        call.launch(
            _GRID_SAMPLER,
            None if x is None else x.descriptor(fmt),
            None if g is None else g.descriptor(_dtypes.ACL_FORMAT_ND),
            interp,
            pad,
            corners,
            result.descriptor(fmt),
            outputs=(result,),
        )
        return call.result(result)


@_docstrings.fill
def grid_sampler3d_backward(
    grad_output: ArrayIn,
    input: ArrayIn,
    grid: ArrayIn,
    interpolation_mode: InterpolationMode = "bilinear",
    padding_mode: PaddingMode = "zeros",
    align_corners: bool = False,
    output_mask: Sequence[bool] = (True, True),
    *,
    layout: Layout = "NCDHW",
    out: OutPair | None = None,
    backend: str | None = None,
    stream: Stream | None = None,
) -> tuple[ArrayIn | None, ArrayIn | None]:
    """Gradients of :func:`grid_sampler3d` (``aclnnGridSampler3DBackward``).

    Parameters
    ----------
    grad_output : ndarray or DeviceArray
        Gradient of the sampled output, shaped like it (``layout`` applies).
    input, grid
        As in :func:`grid_sampler3d`.
    %(grid_modes)s
    output_mask : (bool, bool)
        Which of (input_grad, grid_grad) to return; the other comes back as None.
    %(layout)s
    out : (array or None, array or None), optional
        Arrays to write (input_grad, grid_grad) into, input's and grid's shapes
        and dtype; None entries are allocated (or not returned, per output_mask).
        %(out_kinds)s
    %(backend_stream)s

    Returns
    -------
    input_grad, grid_grad
        input's and grid's shapes; float16/bfloat16 are computed in float32 and
        rounded once. grid_grad is zero for nearest interpolation.

    Raises
    ------
    %(raises_aclnn)s
        Also 161002 for an output_mask whose length is not 2.
    %(raises_device)s
    %(raises_arguments)s
    """
    unchecked = None
    # Strs and bools key the checks as given (the types first: an object equal to a str, or 1 ==
    # True, is checked by the general path); anything else takes the general path, which checks
    # the arguments in their order (a bad mode is reported before a bad mask).
    mask = output_mask
    if (
        out is None
        and (
            mask is _DEFAULT_MASK
            or (type(mask) is tuple and len(mask) == 2 and type(mask[0]) is bool and type(mask[1]) is bool)
        )
        and type(interpolation_mode) is str
        and type(padding_mode) is str
        and type(align_corners) is bool
        and type(layout) is str
    ):
        found = _launch.crafted(
            _GRID_SAMPLER_BACKWARD,
            backend,
            stream,
            (interpolation_mode, padding_mode, align_corners, mask, layout),
            grad_output,
            input,
            grid,
        )
        if isinstance(found, tuple):
            if mask is _DEFAULT_MASK or (mask[0] and mask[1]):
                return found  # (both outputs, as the tuple below)
            input_grad, grid_grad = found
            if not mask[0]:
                input_grad.close()  # computed (the plan is the same), not returned
            if not mask[1]:
                grid_grad.close()
            return (input_grad if mask[0] else None, grid_grad if mask[1] else None)
        unchecked = found
    interp = _args.mode("interpolation_mode", interpolation_mode, _args.INTERPOLATION)
    pad = _args.mode("padding_mode", padding_mode, _args.PADDING)
    corners = _args.flag("align_corners", align_corners)
    fmt = _args.layout(layout)
    mask = _args.output_mask(output_mask)
    result = _grid_sampler_backward(
        grad_output, input, grid, interp, pad, corners, fmt, mask, out, backend, stream
    )
    if unchecked is not None:  # checked now: the next such call skips the checks
        handle = unchecked.ctx.bool_arrays.get(mask)
        dtype = input.dtype
        unchecked.remember(
            (fmt, fmt, _ND),
            None if handle is None else (interp, pad, corners, handle),
            ((input.shape, dtype, fmt), (grid.shape, dtype, _ND)),
        )
    return result


#: grid_sampler3d_backward's default output_mask, the very object (a tuple of two bools): checked
_DEFAULT_MASK = inspect.signature(grid_sampler3d_backward).parameters["output_mask"].default


def _grid_sampler_backward(
    grad_output: ArrayIn,
    input: ArrayIn,
    grid: ArrayIn,
    interp: int,
    pad: int,
    corners: bool,
    fmt: int,
    mask: tuple[bool, ...],
    out: OutPair | None,
    backend: str | None,
    stream: Stream | None,
) -> tuple[ArrayIn | None, ArrayIn | None]:
    """grid_sampler3d_backward with its parameters normalised, through :class:`Launch`."""
    out_input, out_grid = _args.out_pair(out)
    with Launch(
        backend,
        stream,
        (grad_output, input, grid, out_input, out_grid),
        _GRID_SAMPLER_BACKWARD.spec.python_name,
    ) as call:
        g = call.device("grad_output", grad_output)
        x = call.device("input", input)
        gr = call.device("grid", grid)
        dtype = x.dtype if x is not None else _FLOAT32
        input_grad = call.output(
            x.shape if x is not None else _ops.PLACEHOLDER_SHAPE, dtype, out_input, "out[0]", x is not None
        )
        grid_grad = call.output(
            gr.shape if gr is not None else (1, 1, 1, 1, 3), dtype, out_grid, "out[1]", gr is not None
        )
        call.launch(
            _GRID_SAMPLER_BACKWARD,
            None if g is None else g.descriptor(fmt),
            None if x is None else x.descriptor(fmt),
            None if gr is None else gr.descriptor(_dtypes.ACL_FORMAT_ND),
            interp,
            pad,
            corners,
            call.bool_array(mask),
            input_grad.descriptor(fmt),
            grid_grad.descriptor(_dtypes.ACL_FORMAT_ND),
            outputs=(input_grad, grid_grad),
        )
        wanted = mask if len(mask) == 2 else (False, False)
        return (call.result(input_grad) if wanted[0] else None, call.result(grid_grad) if wanted[1] else None)
