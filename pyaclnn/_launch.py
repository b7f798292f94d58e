"""The launch of one operator call: its stream, its arrays, and everything it must give back.

A :class:`Launch` is the owner of one functional call's lifetimes. It puts the
call's inputs on the device (NumPy data is uploaded on the call's stream and
given back when the call ends), orders the call after work of other streams
that used the same arrays, allocates the outputs on the stream, enqueues the
two phases through the stream's executor cache and returns the outputs as the
caller gave the inputs: DeviceArrays as they are, NumPy as a copy (which
waits). Nothing here waits for the stream otherwise, unless
``ASCEND_LAUNCH_BLOCKING=1``.

What the call creates is given back when it ends, errors included: device
copies of NumPy inputs and unreturned outputs go back to the pool on the
call's stream (reused in stream order), per-call parameter arrays are
destroyed (a launch has captured them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import _context, acl
from ._array import DeviceArray, host_array, to_device
from ._executors import Call
from ._operators import Operator
from ._optable import Param
from ._stream import Stream, current
from .errors import AclError, AclnnError, make_error


class Launch:
    """One functional call: its context, stream and the arrays it owns."""

    __slots__ = (
        "ctx",
        "backend",
        "stream",
        "device_id",
        "device_results",
        "_temporaries",
        "_outputs",
        "_returned",
        "_arrays",
        "_previous_device",
        "_inputs",
    )

    def __init__(self, backend: str | None, stream: Stream | None) -> None:
        ctx = self.ctx = _context.context(backend)
        self.backend = ctx.name
        if stream is None:
            stream = current(ctx)
            if not stream._state.open:  # made current by a `with` block, closed since
                raise ValueError(f"the current stream is closed ({stream!r})")
        else:
            if not isinstance(stream, Stream) or stream.backend != self.backend:
                raise ValueError(
                    f"stream must be a pyaclnn.Stream of backend {self.backend!r}, got {stream!r}"
                )
            if not stream._state.open:
                raise ValueError("stream is closed")
        self.stream = stream
        self.device_id = device = stream.device
        # A device guard: the call runs with its stream's device bound, as CANN wants.
        self._previous_device = None
        bound = ctx.tls.bound
        if bound != device:
            self._previous_device = bound
            ctx.set_acl_device(device)
        self.device_results = False  # True once any input is a DeviceArray
        # Given back on exit: temporaries (device copies of NumPy inputs) always; outputs unless
        # handed to the caller as DeviceArrays. Lists are made lazily: this runs for every call.
        self._temporaries: list[DeviceArray] | None = None
        self._outputs: list[DeviceArray] = []
        self._returned: list[DeviceArray] | None = None
        self._arrays: list[tuple[Callable[..., Any], Any]] | None = None
        self._inputs: list[tuple[str, DeviceArray]] = []  # DeviceArray inputs, for the out= overlap rule

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self._give_back(exc_type)
        finally:
            if self._previous_device is not None:
                self.ctx.set_acl_device(self._previous_device)

    def _give_back(self, exc_type: Any) -> None:
        for array in self._temporaries or ():
            array.close()
        # Outputs the call made go back unless returned (all of them after an error);
        # arrays given with out= are the caller's and stay open.
        kept = self._returned if exc_type is None else None
        if kept is None or len(kept) != len(self._outputs):
            for array in self._outputs:
                if kept is None or array not in kept:
                    array.close()
        for destroy, handle in self._arrays or ():
            try:
                destroy(handle, backend=self.backend)
            except AclError:
                if exc_type is None:
                    raise  # otherwise the error in flight says more

    def device(self, name: str, x: np.ndarray | DeviceArray | None) -> DeviceArray | None:
        """``x`` on this call's backend, ordered for this call's stream.

        NumPy data is uploaded on the stream for the duration of the call.
        """
        if x is None:
            return None
        if type(x) is DeviceArray or isinstance(x, DeviceArray):
            if x.backend != self.backend:
                raise ValueError(
                    f"{name} lives on backend {x.backend!r}, but this call runs on {self.backend!r}"
                )
            if x.closed:
                raise ValueError(f"{name} is a closed DeviceArray: its memory was freed")
            if x._pool.device != self.device_id:
                raise ValueError(
                    f"{name} lives on device {x._pool.device}, but this call runs on device {self.device_id} "
                    "(its stream's)"
                )
            if x._stream is not self.stream:
                x._use_on(self.stream)
            self.device_results = True
            self._inputs.append((name, x))
            return x
        return self.temporary(to_device(host_array(name, x), backend=self.backend, stream=self.stream))

    def output(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        given: DeviceArray | None = None,
        name: str = "out",
        known: bool = True,
    ) -> DeviceArray:
        """An array for an output of the call: ``given`` (from ``out=``), checked, or a new one.

        ``known`` says whether the inputs fix ``shape`` (otherwise phase 1 will
        reject them, and only ``given``'s kind is checked).
        """
        if given is None:
            array = DeviceArray._contiguous(self.ctx, shape, dtype, self.stream)
            self._outputs.append(array)
            return array
        if not isinstance(given, DeviceArray):
            raise TypeError(f"{name} must be a pyaclnn.DeviceArray, got {type(given).__name__}")
        if given.closed:
            raise ValueError(f"{name} is a closed DeviceArray: its memory was freed")
        if given.backend != self.backend or given.device != self.device_id:
            raise ValueError(
                f"{name} lives on backend {given.backend!r} device {given.device}, but this call runs on "
                f"backend {self.backend!r} device {self.device_id}"
            )
        if known and (given.shape != shape or given.dtype != dtype):
            raise ValueError(
                f"{name} has shape {list(given.shape)} and dtype {given.dtype}; this call writes "
                f"shape {list(shape)} and dtype {np.dtype(dtype)}"
            )
        for other_name, other in self._inputs:
            if _may_overlap(given, other):
                raise ValueError(
                    f"{name} shares memory with {other_name}: an output may not overlap an input or "
                    "another output (the operator would read values it has already overwritten); "
                    "pass a separate array"
                )
        if given._stream is not self.stream:
            given._use_on(self.stream)
        self.device_results = True  # out= given: the caller gets it back
        self._inputs.append((name, given))  # later outputs must not overlap it either
        return given

    def temporary(self, array: DeviceArray) -> DeviceArray:
        """Make ``array`` the call's, given back when the call ends."""
        if self._temporaries is None:
            self._temporaries = []
        self._temporaries.append(array)
        return array

    def _own_array(self, destroy: Callable[..., Any], handle: Any) -> None:
        if self._arrays is None:
            self._arrays = []
        self._arrays.append((destroy, handle))

    def int_array(self, values: tuple[int, ...]) -> Any:
        """An aclIntArray of ``values``: the context's cached one, else one of this call's."""
        handle = self.ctx.cached_int_array(values)
        if handle is None:
            handle = acl.create_int_array(values, backend=self.backend)
            self._own_array(acl.destroy_int_array, handle)
        return handle

    def int_arrays(self, values: tuple[tuple[int, ...], ...]) -> tuple[Any, ...]:
        """aclIntArrays of a whole parameter set (kernel_size, stride, padding, dilation)."""
        handles = self.ctx.cached_int_arrays(values)
        return handles if handles is not None else tuple(self.int_array(v) for v in values)

    def bool_array(self, values: tuple[bool, ...]) -> Any:
        """An aclBoolArray of ``values`` (see :meth:`int_array`)."""
        handle = self.ctx.bool_arrays.get(values)  # the common case, one look-up
        if handle is None:
            handle = self.ctx.cached_bool_array(values)
        if handle is None:
            handle = acl.create_bool_array(values, backend=self.backend)
            self._own_array(acl.destroy_bool_array, handle)
        return handle

    def launch(
        self,
        op: Operator,
        *args: Any,
        outputs: Sequence[DeviceArray],
        admit: Callable[[], None] | None = None,
    ) -> None:
        """Enqueue both phases of ``op`` on the call's stream (phase 1 skipped on an executor-cache hit).

        Outputs are zero-filled, on the stream, when phase 1 finds nothing to
        compute (empty tensors). ``admit()`` runs once phase 1 has accepted the
        call and may raise to stop it before anything is queued (a check of what
        the host holds). An error of the operator keeps its text and gets the
        Python name of the argument it is about (:func:`_in_python_terms`). With
        ``ASCEND_LAUNCH_BLOCKING=1`` the call then waits for the stream, so a
        device error surfaces here.
        """
        # Per-call parameter arrays die with the call: a plan holding them must not be kept.
        call = Call(op, args, self._arrays is None, outputs, admit)
        try:
            self.stream._state.executors.launch(call)
        except AclnnError as exc:
            raise _in_python_terms(exc, op.spec.params) from None
        if self.ctx.launch_blocking:
            self.stream.synchronize()

    def result(self, array: DeviceArray) -> np.ndarray | DeviceArray:
        """What the caller gets for output ``array``: itself for DeviceArray calls, else a NumPy copy."""
        if self.device_results:
            self._keep(array)
            return array
        return array.numpy()

    def _keep(self, array: DeviceArray) -> None:
        """``array`` goes to the caller: not given back when the call ends."""
        if self._returned is None:
            self._returned = []
        if array not in self._returned:  # identity: DeviceArray defines no __eq__
            self._returned.append(array)


def _byte_range(array: DeviceArray) -> tuple[int, int]:
    """The device bytes ``[start, end)`` that ``array``'s elements span (empty for no element)."""
    if array.size == 0:
        return 0, 0
    itemsize = array.dtype.itemsize
    extent = 1 + sum((d - 1) * s for d, s in zip(array.shape, array.strides))
    start = array.ptr + array.offset * itemsize
    return start, start + extent * itemsize


def _may_overlap(a: DeviceArray, b: DeviceArray) -> bool:
    """Whether the bytes spanned by ``a`` and ``b`` intersect (as ``np.may_share_memory``, by bounds)."""
    a_start, a_end = _byte_range(a)
    b_start, b_end = _byte_range(b)
    return a_start < b_end and b_start < a_end


_WORDS = re.compile(r"[A-Za-z_]\w*")


def _in_python_terms(exc: AclnnError, params: Sequence[Param]) -> AclError:
    """``exc`` with the Python names of the C parameters its message names appended, in the
    order it names them, where any of them differs from its C name.

    Every one is listed, not only the renamed ones: the checks name the argument at
    fault first (``"padding [2]: ... <= kernelSize/2"`` is padding's fault), and a
    list of the renamed alone would point at kernel_size.
    """
    python = {p.c_name: p.python_name for p in params}
    named = dict.fromkeys(python[word] for word in _WORDS.findall(exc.message) if word in python)
    if all(name in python and python[name] == name for name in named):
        return exc
    return make_error(exc.status, f"{exc.message} (in Python: {', '.join(named)})", exc.api)
