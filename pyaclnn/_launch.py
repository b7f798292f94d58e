"""The launch of one operator call: its stream, its arrays, and everything it must give back.

A :class:`Launch` is the owner of one functional call's lifetimes. It puts the
call's inputs on the device (NumPy data is uploaded on the call's stream and
given back when the call ends), orders the call after work of other streams
that used the same arrays, allocates the outputs on the stream, enqueues the
two phases through the stream's executor cache and returns the outputs as the
caller gave the inputs: DeviceArrays as they are, NumPy as a copy (which
waits). Nothing here waits for the stream otherwise, unless
``ASCEND_LAUNCH_BLOCKING=1``.

A call on NumPy arrays alone, on a backend whose device memory is host memory
(the numpy backend), copies nothing: the arrays are mapped for the device
(``_host_memory``), the operator reads the inputs where they are and writes
NumPy outputs (new ones, or those given with ``out=``) that the call returns
once its stream has finished them. Elsewhere a NumPy ``out=`` is filled from a
device output after the wait.

What the call creates is given back when it ends, errors included: device
copies of NumPy inputs and unreturned outputs go back to the pool on the
call's stream (reused in stream order), per-call parameter arrays are
destroyed (a launch has captured them), mappings are given back once the stream
is past the call (``_host_memory`` keeps them a while, idle, for the next call
on the same arrays).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from . import _captures, _context, _repeat, _timeline, acl
from . import backends as _backends
from ._array import _ORDER_LOCK, DeviceArray, _contiguous_layout, host_array, to_device, writes_queued
from ._executors import Call
from ._host_memory import HostMemory, Mapping
from ._operators import Operator
from ._operators import in_python_terms as _in_python_terms
from ._pool import rounded
from ._status import check as _check_status
from ._stream import Stream, StreamState, current
from .errors import AclError, AclnnError


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
        "_host",
        "_mapped",
        "_host_inputs",
        "_host_results",
        "_waited",
        "_premapped",
        "_caller",
        "_pool",
        "_writes",
    )

    def __init__(
        self, backend: str | None, stream: Stream | None, arrays: Sequence[Any] = (), caller: str = "the call"
    ) -> None:
        """``arrays``: every array argument of the call (inputs and ``out=``), which decides
        whether NumPy arrays are mapped rather than copied: only when none is a DeviceArray
        (a call on DeviceArrays returns before its work is done, and the caller may then
        change its NumPy inputs). ``caller``: the functional call's name, for messages."""
        self._caller = caller
        ctx = self.ctx = _context.context(backend)
        name = self.backend = ctx.name
        if stream is None:
            stream = current(ctx)
            if not stream._state.open:  # made current by a `with` block, closed since
                raise ValueError(f"the current stream is closed ({stream!r})")
        else:
            if (type(stream) is not Stream and not isinstance(stream, Stream)) or stream.backend != name:
                raise ValueError(f"stream must be a pyaclnn.Stream of backend {name!r}, got {stream!r}")
            if not stream._state.open:
                raise ValueError("stream is closed")
        self.stream = stream
        state = stream._state
        self._pool = state.pool  # its device's memory: the arrays of the call are usually there
        self.device_id = device = state.device
        # A device guard: the call runs with its stream's device bound, as CANN wants.
        bound = ctx.tls.bound
        if bound != device:
            self._previous_device = bound
            ctx.set_acl_device(device)
        else:
            self._previous_device = None
        self.device_results = False  # True once any input is a DeviceArray
        # Given back on exit: temporaries (device copies of NumPy inputs) always; outputs unless
        # handed to the caller as DeviceArrays. Lists are made lazily: this runs for every call.
        self._temporaries: list[DeviceArray] | None = None
        self._outputs: list[DeviceArray] = []
        self._returned: list[DeviceArray] | None = None
        self._arrays: list[tuple[Callable[..., Any], Any]] | None = None
        self._inputs: list[tuple[str, DeviceArray]] = []  # DeviceArray inputs, for the out= overlap rule
        self._writes: list[DeviceArray] | None = None  # DeviceArrays given that the call may write
        host = ctx.host_memory
        # While a graph captures, nothing is mapped: a NumPy array is then refused (or copied, where
        # the capture's mode allows it) before the call changes any registration.
        if host is not None and (
            _captures.active
            or any(isinstance(a, DeviceArray) for a in arrays)
            or sum(a.nbytes for a in arrays if isinstance(a, np.ndarray)) < host.min_bytes
        ):
            host = None
        self._host = host  # maps this call's NumPy arrays, or None: they are copied
        # wrappers of mapped arrays, with their mappings and the keys they are parked under
        # (and the arrays: kept alive until the mappings end, as the wrappers keep none)
        self._mapped: list[tuple[DeviceArray, Mapping, tuple[Any, ...], np.ndarray]] | None = None
        self._host_inputs: list[tuple[str, np.ndarray]] | None = None  # NumPy arrays, for the out= rule
        # id(output DeviceArray) -> the NumPy array the caller gets for it (mapped, or filled after the wait)
        self._host_results: dict[int, tuple[DeviceArray, np.ndarray]] | None = None
        self._waited = False
        # The call's NumPy arrays mapped at once, so that those sharing pages share a mapping:
        # id -> (array, mapping, offset). Last: nothing here may raise after it.
        self._premapped: dict[int, tuple[np.ndarray, Mapping, int]] | None = None
        if host is not None:
            given = list({id(a): a for a in arrays if isinstance(a, np.ndarray)}.values())  # once each
            if given:
                found = host.map(given, device)
                self._premapped = {id(a): (a, *f) for a, f in zip(given, found) if f is not None}

    @property
    def kernel_checks_first(self) -> bool:
        """Whether the call's NumPy arrays are mapped: the numpy backend, whose kernels check
        the values they read (an index outside its plane) before writing anything. The call
        waits for its stream anyway, so a host-side check of those values is needed only
        when the wait reports the kernel's refusal, to tell it as the host check tells it."""
        return self._host is not None

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if (  # the usual DeviceArray call: every output returned, nothing else to give back
                exc_type is None
                and self._temporaries is None
                and self._arrays is None
                and self._mapped is None
                and not self._premapped
                and self.stream._state.capture is None
                and self._returned == self._outputs  # identity: DeviceArray defines no __eq__
            ):
                return
            self._give_back(exc_type)
        finally:
            if self._previous_device is not None:
                self.ctx.set_acl_device(self._previous_device)

    def _give_back(self, exc_type: Any) -> None:
        capture = self.stream._state.capture
        if capture is not None and exc_type is None:  # the graph's replays use them: it keeps them
            capture.hold([a for _, a in self._inputs])
            capture.hold(self._returned or ())
        if self._premapped:  # arrays mapped but not used (the call failed first, or narrowed them)
            assert self._host is not None
            self._host.release([mapping for _, mapping, _ in self._premapped.values()])
            self._premapped = None
        if self._mapped is not None:
            self._unmap(exc_type)
        for array in self._temporaries or ():
            array.close()
        # Outputs the call made go back unless returned (all of them after an error);
        # arrays given with out= are the caller's and stay open.
        kept = self._returned if exc_type is None else None
        for array in self._outputs:
            if kept is None or array not in kept:
                array.close()
        for destroy, handle in self._arrays or ():
            try:
                destroy(handle, backend=self.backend)
            except AclError:
                if exc_type is None:
                    raise  # otherwise the error in flight says more

    def device(
        self, name: str, x: np.ndarray | DeviceArray | None, write: bool = False
    ) -> DeviceArray | None:
        """``x`` on this call's backend, ordered for this call's stream: after the array's last
        write for an input the operator reads (``write=False``), after that and every read
        since for one it may write (``write=True``; what the generic operators pass for
        every tensor, since their headers do not say reliably which they write).

        NumPy data is uploaded on the stream for the duration of the call.
        """
        if x is None:
            return None
        if type(x) is DeviceArray or isinstance(x, DeviceArray):
            stream = self.stream
            # The usual input: in the pool of the call's device, open, read after a last write
            # already ordered for this stream (one test each, the rules' own tests below).
            if (
                x._pool is self._pool
                and not write
                and not x._block.gone
                and x._ordered_for(stream, False)
                and self._host is None
            ):
                self.device_results = True
                self._inputs.append((name, x))
                return x
            elsewhere = x._pool is not self._pool
            if elsewhere and x.backend != self.backend:
                raise ValueError(
                    f"{name} lives on backend {x.backend!r}, but this call runs on {self.backend!r}"
                )
            if x._block.gone:  # (closed, without the property's call)
                raise ValueError(f"{name} is a closed DeviceArray: its memory was freed")
            if elsewhere and x._pool.device != self.device_id:
                raise ValueError(
                    f"{name} lives on device {x._pool.device}, but this call runs on device {self.device_id} "
                    "(its stream's)"
                )
            if not x._ordered_for(stream, write):
                x._use_on(stream, write)
            if write:
                if self._writes is None:
                    self._writes = []
                self._writes.append(x)
            if self._host is not None:
                raise RuntimeError(f"internal: {name} is a DeviceArray the Launch was not told of (arrays=)")
            self.device_results = True
            self._inputs.append((name, x))
            return x
        x = host_array(name, x)
        if _captures.active:  # a copy from pageable memory, or a wait: no capture records them
            self._refuse_host(name)
        self._host_input(name, x)
        if self._host is not None:
            mapped = self._map(x)
            if mapped is not None:
                return mapped
        return self.temporary(to_device(x, backend=self.backend, stream=self.stream))

    def written(self, name: str, x: np.ndarray | DeviceArray) -> DeviceArray:
        """An array the caller gives for the operator to write (and perhaps read first: an in-place
        operator's), which :meth:`result` returns: a DeviceArray as :meth:`device` takes it; a
        NumPy array mapped where it is, else uploaded and copied back after the wait.

        No overlap rule applies (an in-place operator may be given the same array twice). The
        caller refuses a NumPy array here when the call has a DeviceArray (its call returns
        before the work is done).
        """
        if isinstance(x, DeviceArray):
            return self.device(name, x, write=True)  # type: ignore[return-value]  # (None only for None)
        x = host_array(name, x)
        if not x.flags.writeable:
            raise ValueError(f"{name} is a read-only NumPy array: pass a writable one")
        if _captures.active:
            self._refuse_host(name)
        self._host_input(name, x)
        if self._host is not None:
            mapped = self._map(x)
            if mapped is not None:
                return self._host_result(mapped, x)
        array = to_device(x, backend=self.backend, stream=self.stream)  # its values: it may be read
        self._outputs.append(array)
        if self._host_results is None:
            self._host_results = {}
        self._host_results[id(array)] = (array, x)
        return array

    def scalar(self, value: np.ndarray, data_type: int) -> Any:
        """An aclScalar of ``value``'s bytes as ``data_type``, the call's (destroyed when it ends)."""
        handle = acl.create_scalar(value, data_type, backend=self.backend)
        self._own_array(acl.destroy_scalar, handle)
        return handle

    def float_array(self, values: Sequence[float]) -> Any:
        """An aclFloatArray of ``values``, the call's."""
        handle = acl.create_float_array(values, backend=self.backend)
        self._own_array(acl.destroy_float_array, handle)
        return handle

    def tensor_list(self, items: Sequence[DeviceArray], formats: Sequence[int]) -> Any:
        """An aclTensorList of ``items`` (each described with its format), the call's.

        The list owns its descriptors (CANN destroys them with it), so they are made for it
        rather than taken from the pool's cache.
        """
        made = [partial(item._create_descriptor, fmt) for item, fmt in zip(items, formats)]
        return self._list_of(made, acl.destroy_tensor, acl.create_tensor_list, acl.destroy_tensor_list)

    def scalar_list(self, values: Sequence[tuple[np.ndarray, int]]) -> Any:
        """An aclScalarList of ``(value, data_type)`` pairs, the call's (it owns its scalars)."""
        made = [
            partial(acl.create_scalar, value, data_type, backend=self.backend) for value, data_type in values
        ]
        return self._list_of(made, acl.destroy_scalar, acl.create_scalar_list, acl.destroy_scalar_list)

    def _list_of(
        self,
        items: Sequence[Callable[[], Any]],
        destroy_item: Callable[..., Any],
        create: Callable[..., Any],
        destroy: Callable[..., Any],
    ) -> Any:
        """A list (``create``) of the handles ``items`` make, the call's (``destroy`` when it ends,
        which destroys the items too); if making it fails, the items made so far are destroyed."""
        handles: list[Any] = []
        try:
            for make in items:
                handles.append(make())
            handle = create(handles, backend=self.backend)
        except BaseException:
            for made in handles:
                destroy_item(made, backend=self.backend)
            raise
        self._own_array(destroy, handle)
        return handle

    def _map(self, x: np.ndarray) -> DeviceArray | None:
        """A DeviceArray over ``x``'s own memory, mapped for the device until the call ends;
        None when ``x`` cannot be mapped (the caller copies it)."""
        assert self._host is not None
        premapped = self._premapped.pop(id(x), None) if self._premapped else None
        if premapped is not None and premapped[0] is x:
            mapping, start = premapped[1:]
        else:
            found = self._host.map([x], self.device_id)[0]
            if found is None:
                return None
            mapping, start = found
        itemsize = x.dtype.itemsize
        strides = tuple(s // itemsize for s in x.strides)
        # The wrapper of an earlier call on these pages, with its descriptor (see _host_memory)
        key = (mapping.ptr, x.shape, strides, start // itemsize, x.dtype, self.device_id)
        array: DeviceArray | None = self._host.take(key)
        if array is None:
            try:
                # no owner: the launch keeps x alive until the mapping ends; a parked wrapper must not
                array = DeviceArray.from_ptr(
                    mapping.ptr,
                    x.shape,
                    x.dtype,
                    strides=strides,
                    offset=start // itemsize,
                    device=self.device_id,
                    backend=self.backend,
                )
            except BaseException:
                self._host.release([mapping])
                raise
        array._stream = self.stream  # the call's work uses it: its close waits for that
        array._readers = array._written_at = None
        if self._mapped is None:
            self._mapped = []
        self._mapped.append((array, mapping, key, x))
        return array

    def _unmap(self, exc_type: Any) -> None:
        """End the call's mappings: now if its stream has finished with them, else once it has."""
        mapped = self._mapped
        assert mapped is not None and self._host is not None
        self._mapped = None
        if exc_type is None and not self._waited:
            try:
                self._wait()  # outputs not asked for (output_mask): the work may still write them
            except BaseException:
                self._host.after(self.stream._state, partial(_end_mappings, self._host, mapped))
                raise
        if self._waited:
            _end_mappings(self._host, mapped)
        else:
            self._host.after(self.stream._state, partial(_end_mappings, self._host, mapped))

    def _wait(self) -> None:
        """Wait once for the call's stream: NumPy results are read, or mappings end, after it."""
        if not self._waited:
            self.stream._state.wait_queued()
            self._waited = True

    def output(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        given: DeviceArray | np.ndarray | None = None,
        name: str = "out",
        known: bool = True,
    ) -> DeviceArray:
        """The device side of an output of the call: ``given`` (from ``out=``), checked, or a new one
        (over a new NumPy array, mapped, on a NumPy call; see :meth:`result`).

        ``known`` says whether the inputs fix ``shape`` (otherwise phase 1 will
        reject them, and only ``given``'s kind is checked).
        """
        if given is None:
            if self._host is not None:  # a NumPy call: write a new NumPy array where it is
                pool = self.ctx.host_pool
                assert pool is not None  # made with host_memory
                host, buffer = pool.lend(shape, dtype)
                device = self.device_id
                if pool.held_on(buffer) != device and self._host.hold(buffer, device) is not None:
                    # mapped from now on: a later result in this buffer maps nothing
                    pool.hold(buffer, device, partial(self._host.unhold, buffer))
                mapped = self._map(host)
                if mapped is not None:
                    return self._host_result(mapped, host)
            array = DeviceArray._contiguous(self.ctx, shape, dtype, self.stream)
            self._outputs.append(array)
            return array
        if isinstance(given, np.ndarray):
            return self._host_output(shape, dtype, given, name, known)
        if not isinstance(given, DeviceArray):
            raise TypeError(
                f"{name} must be a pyaclnn.DeviceArray or a NumPy array, got {type(given).__name__}"
            )
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
        if not given._ordered_for(self.stream, True):
            given._use_on(self.stream)
        if self._writes is None:
            self._writes = []
        self._writes.append(given)
        self.device_results = True  # out= given: the caller gets it back
        self._inputs.append((name, given))  # later outputs must not overlap it either
        return given

    def _host_output(
        self, shape: tuple[int, ...], dtype: np.dtype, given: np.ndarray, name: str, known: bool
    ) -> DeviceArray:
        """The device side of a NumPy ``out=`` array: the array itself, mapped, or a device
        output copied into it after the wait. Checked as a DeviceArray ``out=`` is."""
        if _captures.active:
            self._refuse_host(name)
        if self.device_results:
            raise TypeError(
                f"{name} is a NumPy array, but the call's inputs include a DeviceArray, so it returns "
                "before its work is done: pass a DeviceArray as out"
            )
        if known and (given.shape != shape or given.dtype != dtype):
            raise ValueError(
                f"{name} has shape {list(given.shape)} and dtype {given.dtype}; this call writes "
                f"shape {list(shape)} and dtype {np.dtype(dtype)}"
            )
        if not given.flags.writeable:
            raise ValueError(f"{name} is a read-only NumPy array: pass a writable one")
        for other_name, other in self._host_inputs or ():
            if np.may_share_memory(given, other):
                raise ValueError(
                    f"{name} shares memory with {other_name}: an output may not overlap an input or "
                    "another output (the operator would read values it has already overwritten); "
                    "pass a separate array"
                )
        self._host_input(name, given)  # later outputs must not overlap it either
        if self._host is not None:
            mapped = self._map(given)
            if mapped is not None:
                return self._host_result(mapped, given)
        array = DeviceArray._contiguous(self.ctx, shape, dtype, self.stream)
        self._outputs.append(array)
        if self._host_results is None:
            self._host_results = {}
        self._host_results[id(array)] = (array, given)
        return array

    def _host_input(self, name: str, x: np.ndarray) -> None:
        """Remember NumPy array ``x`` (argument ``name``), for the out= overlap rule."""
        if self._host_inputs is None:
            self._host_inputs = []
        self._host_inputs.append((name, x))

    def _refuse_host(self, name: str) -> None:
        """GraphCaptureError if a capture forbids this call's NumPy array ``name``, naming the operator."""
        what = f"{self._caller}({name}=NumPy array)"
        _captures.refuse(self.stream._state, self.backend, self.device_id, what, _captures.PAGEABLE)

    def _host_result(self, mapped: DeviceArray, host: np.ndarray) -> DeviceArray:
        """Record that the caller gets ``host`` for the mapped output ``mapped``."""
        if self._host_results is None:
            self._host_results = {}
        self._host_results[id(mapped)] = (mapped, host)
        return mapped

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
        handles = self.ctx.int_array_sets.get(values)  # the common case, one look-up
        if handles is None:
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
        repeatable: bool = True,
    ) -> None:
        """Enqueue both phases of ``op`` on the call's stream (phase 1 skipped on an executor-cache hit).

        ``repeatable=False`` keeps the call out of the executor cache (phase 1 every time, its
        executor consumed by phase 2): the generic operators of ``pyaclnn.ops``, some of which
        break when an executor is reused. A graph capture still keeps its executors.

        Outputs are zero-filled, on the stream, when phase 1 finds nothing to
        compute (empty tensors). ``admit()`` runs once phase 1 has accepted the
        call and may raise to stop it before anything is queued (a check of what
        the host holds). An error of the operator keeps its text and gets the
        Python name of the argument it is about (:func:`_in_python_terms`). With
        ``ASCEND_LAUNCH_BLOCKING=1`` the call then waits for the stream, so a
        device error surfaces here.
        """
        written = outputs  # the point of each write, once it is queued (reads elsewhere wait for it)
        host_results = self._host_results
        if host_results is not None:
            # Mapped outputs are no memset's business (CANN's rule): the host zeroes them below
            # if nothing is computed.
            outputs = [o for o in outputs if id(o) not in host_results or o in self._outputs]
        stream = self.stream
        # Per-call parameter arrays die with the call: a plan holding them must not be kept.
        cacheable = repeatable and self._arrays is None
        call = None  # made only when no cached plan is launched: a hit computes
        try:
            if _timeline.recording:  # the one check when nothing is profiled (pyaclnn.profile)
                call = Call(op, args, cacheable, outputs, admit)
                _timeline.launch(stream._state, call)
            else:
                executors = stream._state.executors
                if not cacheable or not executors.launch_cached(op, args, admit):
                    call = Call(op, args, cacheable, outputs, admit)
                    executors.launch(call)
        except AclnnError as exc:
            raise _in_python_terms(exc, op.spec.params) from None
        writes_queued(stream, written, self._writes)
        if host_results is not None and call is not None and not call.computed:
            for mapped, host in host_results.values():
                if mapped not in self._outputs:
                    host[...] = 0  # nothing was queued that writes it
        if self.ctx.launch_blocking and self.stream._state.capture is None:  # captured: nothing ran
            self.stream.synchronize()

    def result(self, array: DeviceArray) -> np.ndarray | DeviceArray:
        """What the caller gets for output ``array``: itself for DeviceArray calls, else NumPy (the
        array the operator wrote, or a copy; this waits for the stream)."""
        if self.device_results:  # the caller gets it: not given back when the call ends
            returned = self._returned
            if returned is None:
                self._returned = [array]
            elif array not in returned:  # identity: DeviceArray defines no __eq__
                returned.append(array)
            return array
        entry = self._host_results.get(id(array)) if self._host_results is not None else None
        if entry is None:
            return array.numpy()
        self._wait()
        if array in self._outputs:  # not mapped: a device output read into the given array
            np.copyto(entry[1], array.numpy())
        return entry[1]


_DESCRIBED_LIMIT = 8  # blocks remembered per output of a Checked
_new_array = DeviceArray.__new__  # (looked up once: every output of a repeated call is made with it)


class Checked:
    """What the Python checks of one crafted call concluded: the C arguments before its outputs
    (``head``: the input descriptors, then its parameters' C values, handles the context caches
    and flags) and its outputs, each ``(index, described, shape, dtype, strides, size, format)``, with
    the size of each one's block (``sizes``, as the pool rounds it); kept per stream
    (``ExecutorCache.checked``, dropped once one of ``descriptors`` is forgotten) for the
    call's operator, parameters and inputs, so a repeated call skips them (:func:`crafted`)."""

    __slots__ = ("descriptors", "head", "outputs", "sizes", "described")

    def __init__(
        self,
        descriptors: tuple[Any, ...],
        params: tuple[Any, ...],
        outputs: Sequence[tuple[tuple[int, ...], np.dtype, int]],
    ) -> None:
        self.descriptors = descriptors
        self.head = (*descriptors, *params)
        # Per output, block -> the last descriptor (format, block, handle) an output of this entry
        # got on it: the pool usually gives the same few blocks again, and while an array holds a
        # block only that array makes (or evicts) descriptors of it, so the handle is still the
        # block's, unless evicted since, which forgot it and dropped this entry (forget).
        self.described: tuple[dict[Any, tuple[int, Any, Any]], ...] = tuple({} for _ in outputs)
        self.outputs = tuple(
            (i, described, shape, dtype, *_contiguous_layout(shape), fmt)
            for i, (described, (shape, dtype, fmt)) in enumerate(zip(self.described, outputs))
        )
        self.sizes = tuple(rounded(size * dtype.itemsize) for _, _, _, dtype, _, size, _ in self.outputs)

    def holds(self, descriptor: Any) -> bool:
        """Whether ``descriptor`` is one of the inputs' or one the outputs got."""
        # (a copy of each dict first, made in one step: a hit in another thread may add to it)
        return any(d is descriptor for d in self.descriptors) or any(
            last[2] is descriptor for described in self.described for last in list(described.values())
        )


class Unchecked:
    """A crafted call :func:`crafted` found no :class:`Checked` for: once the general path has
    run it without an error, :meth:`remember` keeps what its checks concluded."""

    __slots__ = ("ctx", "state", "phase2", "params", "inputs", "generation")

    def __init__(
        self, ctx: Any, state: Any, op: Operator, params: tuple[Any, ...], inputs: tuple[Any, ...]
    ) -> None:
        self.ctx = ctx
        self.state = state
        self.phase2 = op.phase2
        self.params = params
        self.inputs = inputs
        # read before the call: a descriptor forgotten since may be one the key would hold
        self.generation = state.executors.generation

    def remember(
        self,
        formats: tuple[int, ...],
        params: tuple[Any, ...] | None,
        outputs: Sequence[tuple[tuple[int, ...], np.dtype, int]],
    ) -> None:
        """Keep the C values of the call's parameters (None: not all of them outlive the call,
        nothing is kept) and its outputs' ``(shape, dtype, format)``, under the key of the call:
        its operator, parameters and the descriptors its inputs have now, each of the stream's
        memory and described with its format of ``formats`` (so a hit needs no test of either:
        the key's descriptors are those very ones)."""
        if params is None:
            return
        state = self.state
        key = [self.phase2, self.params]
        descriptors = []
        for x, fmt in zip(self.inputs, formats):
            if type(x) is not DeviceArray:  # (crafted looked no further than the first miss)
                return
            last = x._last_descriptor
            block = x._block
            if last is None or last[0] != fmt or last[1] is not block or x._pool is not state.pool:
                return
            key += (block, last)
            descriptors.append(last[2])
        checked = Checked(tuple(descriptors), params, outputs)
        state.executors.remember(tuple(key), checked, self.generation)


def plain_stream(stream: Stream | None, backend: str | None) -> tuple[Stream, Any, Any] | None:
    """``stream`` (None: the thread's current stream of ``backend``), its state and its context,
    when it is a plain open Stream of ``backend`` (None: the active backend) with no capture in
    progress; None otherwise. The common case of the shortcuts (:func:`crafted`, :func:`eager`,
    ``pyaclnn.ops``' calls on NumPy arrays), each of which then tests the thread's bound device
    as it needs (a stream given by a thread that never called before finds it unbound: None);
    anything else takes the general :class:`Launch`."""
    if stream is None:
        ctx = _context.context(backend)
        stream = current(ctx)
    elif type(stream) is Stream:
        ctx = stream._state._ctx
        if ctx.name != (backend or _backends.active_name()):
            return None
    else:
        return None
    state = stream._state
    if not state.open or state.capture is not None:
        return None
    return stream, state, ctx


def crafted(
    op: Operator,
    backend: str | None,
    stream: Stream | None,
    params: tuple[Any, ...],
    first: Any,
    second: Any,
    third: Any,
) -> tuple[DeviceArray, ...] | Unchecked | None:
    """A repeated call of a crafted operator (``pyaclnn.functional``), as :class:`Launch` runs it
    with the checks skipped: its outputs, once both phases (phase 2 alone on an executor-cache
    hit) are queued.

    ``first``, ``second`` and ``third`` are the call's array inputs (both operators that take
    this way have three); ``params`` its other arguments, hashable, that decide with the inputs'
    shapes, dtypes and strides what the checks conclude (each of a type whose equal values the
    checks treat alike). The checks are skipped when an earlier call with the same operator,
    parameters and input descriptors (so the same shapes, dtypes, strides, offsets, formats and
    memory) passed them on this stream and left a :class:`Checked`, and each input is open,
    read after a write already ordered for the stream and not held by a graph. Otherwise an
    :class:`Unchecked` (the caller runs the general path, then remembers it), or None when the
    call is not the common case: an input not a DeviceArray; a stream that is not a plain open
    Stream of the call's backend, on the thread's bound device; a capture or a profile in
    progress. Nothing is refused here that the general path would take, and nothing is ordered
    or queued unless the outputs are returned.
    """
    if _timeline.recording:
        return None
    plain = plain_stream(stream, backend)
    if plain is None:
        return None
    stream, state, ctx = plain
    if ctx.tls.bound != state.device:
        return None
    # The key: each input's block and its last descriptor (format, block, handle), so a hit is
    # an input described already, with its format, for the block it has now (open: a closed
    # array's block is another). A block freed under an array had its descriptors forgotten,
    # and with them every entry that holds one (ExecutorCache.forget). Written out for the three
    # inputs: a loop over them, or a list grown to a tuple, costs as much again as the rest.
    try:
        key = (
            op.phase2,  # (the frozen Operator would hash all its fields)
            params,
            first._block,
            first._last_descriptor,
            second._block,
            second._last_descriptor,
            third._block,
            third._last_descriptor,
        )
        # Each held by no graph and read after its last write, ordered for this stream
        # (DeviceArray._ordered_for, inline: written on this stream, or read on it since).
        if (
            first._graphs is not None
            or second._graphs is not None
            or third._graphs is not None
            or (first._stream is not stream and (first._readers is None or stream not in first._readers))
            or (second._stream is not stream and (second._readers is None or stream not in second._readers))
            or (third._stream is not stream and (third._readers is None or stream not in third._readers))
        ):
            return Unchecked(ctx, state, op, params, (first, second, third))
    except AttributeError:  # not a DeviceArray (no test of each type: this is the usual call)
        return None
    executors = state.executors
    checked = executors.checked.get(key)
    if checked is None:
        return Unchecked(ctx, state, op, params, (first, second, third))
    pool = state.pool
    blocks = pool.acquire_each(checked.sizes, state)
    outputs: list[DeviceArray] = []
    try:
        args = checked.head
        for i, described, shape, dtype, strides, size, fmt in checked.outputs:
            array = _new_array(DeviceArray)
            block = blocks[i]
            array._setup(ctx, shape, dtype, strides, 0, size, stream, pool, block)
            outputs.append(array)
            last = described.get(block)
            if last is not None:
                array._last_descriptor = last  # (DeviceArray.descriptor's own first test passes now)
                args += (last[2],)
            else:
                args += (array.descriptor(fmt),)
                if len(described) >= _DESCRIBED_LIMIT:
                    described.clear()
                described[block] = array._last_descriptor
        try:
            if not executors.launch_cached(op, args, None):
                executors.launch(Call(op, args, True, outputs))
        except AclnnError as exc:
            raise _in_python_terms(exc, op.spec.params) from None
    except BaseException:
        for array in outputs:
            array.close()
        for block in blocks[len(outputs) :]:  # (taken, not yet an array's)
            if block.nbytes:
                pool.release(block, state)
        raise
    # (writes_queued, for arrays no other thread has seen yet: each one's last write is this call)
    queued = state.queued
    for array in outputs:
        array._written_at = queued
    if ctx.launch_blocking:
        stream.synchronize()
    return tuple(outputs)


class Repeated:
    """What an eager generic call (:func:`eager`) left for the next one like it on the same stream:
    its operator and phase 1's C arguments (descriptors, cached scalars, the other parameters'
    C values), and the same as words for the compiled call (``c_form``, see
    :mod:`pyaclnn._repeat`; None where there is none). Kept in ``ExecutorCache.checked``
    under the call's entry (its operator and non-tensor arguments, checked) and each tensor's
    block and last descriptor, so that :func:`eager` makes none of them again; dropped once
    one of ``descriptors`` is forgotten (its block freed), as a :class:`Checked` is."""

    __slots__ = ("op", "args", "descriptors", "c_form")

    def __init__(
        self, op: Operator, args: tuple[Any, ...], descriptors: tuple[Any, ...], c_form: bytes | None = None
    ) -> None:
        self.op = op
        self.args = args
        self.descriptors = descriptors
        self.c_form = c_form

    def holds(self, descriptor: Any) -> bool:
        """Whether ``descriptor`` is one of the call's tensors'."""
        return any(d is descriptor for d in self.descriptors)


def _record(
    entry: Any,
    op: Operator,
    args: tuple[Any, ...],
    used: Sequence[tuple[int, Any, Any] | None],
    stream: Any,
) -> tuple[tuple[Any, ...], Repeated]:
    """The key and the :class:`Repeated` of an eager call of ``entry`` whose tensors were described
    as ``used`` (None for a None), on the stream whose handle is ``stream``, as :func:`eager`
    looks them up for the next call."""
    key: list[Any] = [entry]
    for last in used:
        if last is None:
            key.append(None)
        else:
            key += (last[1], last[2])  # (a descriptor is made for one format: no need to hash it)
    c_form = op.c_form.pack(args, stream) if op.c_form is not None and _compiled() is not None else None
    return tuple(key), Repeated(op, args, tuple(last[2] for last in used if last is not None), c_form)


def _compiled() -> Any:
    """The compiled ``Eager.__call__`` (:data:`compiled_call`), configured on the first call that
    finds the module (:mod:`pyaclnn._repeat`, built and opened when the first record is made: a
    process that never repeats a call never builds it); None where the Python path runs."""
    global compiled_call
    if compiled_call is None:
        module = _repeat.module()
        if module is not None:  # (two threads may both configure it: with the same values)
            module.configure(
                DeviceArray,
                StreamState,
                Stream,
                _ORDER_LOCK,
                _rest,
                NOT_TAKEN,
                _timeline,
                _backends,
                plain_stream,
            )
            compiled_call = module.call
    return compiled_call


NOT_TAKEN = object()  # what an eager call returns when it leaves the call to the general path

# The compiled ``Eager.__call__`` (``call(eager, values, stream)``, see :mod:`pyaclnn._repeat`),
# once configured; None until then, and where the Python path runs.
compiled_call: Any = None


def _rest(
    state: Any,
    repeated: Repeated,
    values: Sequence[Any],
    tensors: Sequence[tuple[int, bool, bool, bool]],
    status1: int,
    status2: int,
    size: int,
    executor: int,
) -> None:
    """What the compiled call leaves to Python once phase 1 ran, under the stream's lock, as
    :meth:`~pyaclnn._executors.ExecutorCache.launch_once` meets it: a failing status of phase 1
    (``status1``) or of phase 2 (``status2``), nothing to compute (no ``executor``: the outputs
    are zero-filled) or a workspace of ``size`` bytes larger than the stream's buffer."""
    op = repeated.op
    backend = state.backend
    try:
        if status1:
            _check_status(_backends.get(backend), status1, op.phase1_api)
        if status2:
            _check_status(_backends.get(backend), status2, op.phase2_api)
    except AclnnError as exc:
        raise _in_python_terms(exc, op.spec.params) from None
    outputs = [values[p] for p, _, _, output in tensors if output and values[p] is not None]
    state.executors.after_phase1(op, size, op.c_form.executor(executor) if executor else None, outputs)


def _find(
    entry: Any,
    values: Sequence[Any],
    tensors: Sequence[tuple[int, bool, bool, bool]],
    stream: Stream,
    executors: Any,
) -> tuple[Repeated, list[DeviceArray]] | None:
    """The :class:`Repeated` an earlier eager call like this one left on ``stream``, with the arrays
    the call writes, when each tensor is as that call found it and ordered for the stream (see
    :func:`eager`); None otherwise. What the compiled call (:mod:`pyaclnn._repeat`) does in C
    before it launches."""
    key = [entry]
    written = []
    try:
        for position, write, _, _ in tensors:  # (outputs first: a new one is told at once)
            x = values[position]
            if x is None:
                key.append(None)
                continue
            last = x._last_descriptor
            if (
                last is None  # never described: no call left anything for it
                or x._graphs is not None
                or x._stream is not stream
                or (write and x._readers is not None)
            ):
                return None
            key += (x._block, last[2])
            if write:
                written.append(x)
    except AttributeError:  # not a DeviceArray (no test of each type): the checks of eager decline
        return None
    repeated = executors.checked.get(tuple(key))
    return None if repeated is None else (repeated, written)


def eager(
    operator: Callable[[], Operator],
    stream: Stream | None,
    values: Sequence[Any],
    tensors: Sequence[tuple[int, bool, bool, bool]],
    entry: Any,
    formats: dict[int, int],
    default_format: int,
) -> bool:
    """The common generic call, on DeviceArrays of the stream's memory, as :class:`Launch` runs it
    with less Python: True once both phases of ``op`` are queued; False, with nothing queued,
    when the call is not that common case (the caller then makes the general :class:`Launch`,
    which gives every refusal its message).

    ``operator`` gives the operator's record (made once per backend; asked for only when the
    call makes its C arguments); ``values`` are the call's arguments in header order;
    ``tensors`` ``(position, written, optional, output)`` per tensor parameter, outputs first
    (outputs are zero-filled when phase 1 finds nothing to compute); ``entry`` what the checks
    of the other arguments concluded: ``entry.template``, phase 1's arguments with their C
    values, and ``entry.scalars``, ``(position, (aclDataType, bytes), 0-d array)`` per
    aclScalar, taken from the context's cache; a tensor is described with ``formats[ndim]``
    (else ``default_format``).

    Once queued, what the call made is left for the next call like it (a :class:`Repeated`
    under ``entry``, which it keys by identity), when every array had been described before;
    that call takes it, with no check, look-up or descriptor made again. Nothing is refused
    here that the general path would take: an array elsewhere, a closed one, a stream that
    is not a plain open Stream of the active backend, a capture or a profile in progress all
    go the general way, before anything is ordered or queued.
    """
    if _timeline.recording:
        return False
    plain = plain_stream(stream, None)
    if plain is None:
        return False
    stream, state, ctx = plain
    # A call like an earlier eager one on this stream takes what that one left (a Repeated):
    # the same entry with, for each tensor, the same block and last descriptor as then (so the
    # same shape, dtype, strides, offset and format, in the stream's memory, open), each ordered
    # for the stream already: no graph holds it, its last write was queued on this stream and,
    # when the call may write it, no other stream reads it; and no device to bind.
    found = _find(entry, values, tensors, stream, state.executors) if ctx.tls.bound == state.device else None
    return eager_rest(operator, stream, state, ctx, values, tensors, entry, formats, default_format, found)


def eager_rest(
    operator: Callable[[], Operator],
    stream: Stream,
    state: Any,
    ctx: Any,
    values: Sequence[Any],
    tensors: Sequence[tuple[int, bool, bool, bool]],
    entry: Any,
    formats: dict[int, int],
    default_format: int,
    found: tuple[Repeated, list[DeviceArray]] | None,
) -> bool:
    """:func:`eager` once its stream is known (a plain one: ``stream``, its ``state`` and context
    ``ctx``, as :func:`plain_stream` gives them): the record ``found`` by :func:`_find` (or the
    compiled call, when it has no C form of it) launched, or the general way when None."""
    executors = state.executors
    if found is not None:
        repeated, written = found
        op = repeated.op
        outputs = [values[p] for p, _, _, output in tensors if output and values[p] is not None]
        try:
            launched = executors.launch_once(op, repeated.args, outputs)
        except AclnnError as exc:
            raise _in_python_terms(exc, op.spec.params) from None
        if launched is None:  # a capture began meanwhile: the general path declines too
            return False
        writes_queued(stream, written)
        if ctx.launch_blocking:
            stream.synchronize()
        return True
    bound = ctx.tls.bound
    op = operator()
    pool = state.pool
    for position, _, optional, _ in tensors:  # every check first, without an effect
        x = values[position]
        if type(x) is not DeviceArray or x._pool is not pool or x._block.gone:
            if x is None and optional:
                continue
            return False
    if bound is None:  # the thread's first call: its current device bound, as context() does
        ctx.ready()
    previous = ctx.tls.bound
    device = state.device
    if previous != device:
        ctx.set_acl_device(device)  # a device guard, as Launch's
    else:
        previous = None
    generation = executors.generation  # before the descriptors: one forgotten since may be in the key
    try:
        args = list(entry.template)
        for position, key, value in entry.scalars:  # before any array is ordered: this may still refuse
            handle = ctx.scalars.get(key)
            if handle is None:
                handle = ctx.cached_scalar(key, value)
                if handle is None:  # the cache is full: the general path makes the call's own
                    return False
            args[position] = handle
        written = []
        outputs = []
        used: list[tuple[int, Any, Any] | None] = []  # each tensor's (format, block, descriptor)
        described = True  # every array was described before this call
        for position, write, _, output in tensors:
            x = values[position]
            if x is None:
                used.append(None)
                continue
            if not x._ordered_for(stream, write):
                x._use_on(stream, write)
            if write:
                written.append(x)
            if output:
                outputs.append(x)
            fmt = formats.get(len(x.shape), default_format)
            last = x._last_descriptor  # (DeviceArray.descriptor's own first test, without the call)
            if last is not None and last[0] == fmt and last[1] is x._block:
                args[position] = last[2]
            else:
                described = described and last is not None
                args[position] = handle = x.descriptor(fmt)
                last = (fmt, x._block, handle)  # (equal to the array's last now)
            used.append(last)
        c_args = tuple(args)
        try:
            launched = executors.launch_once(op, c_args, outputs)
        except AclnnError as exc:
            raise _in_python_terms(exc, op.spec.params) from None
        if launched is None:
            return False
        writes_queued(stream, written)
        # Left for the next such call, unless an array was new (one each call, an output say,
        # could never be taken: it would only push out what other calls on the stream left).
        if described:
            executors.remember(*_record(entry, op, c_args, used, state.handle), generation)
        if ctx.launch_blocking:
            stream.synchronize()
        return True
    finally:
        if previous is not None:
            ctx.set_acl_device(previous)


def _end_mappings(
    host: HostMemory, mapped: list[tuple[DeviceArray, Mapping, tuple[Any, ...], np.ndarray]]
) -> None:
    """Park the wrappers of mapped arrays (with their descriptors, for a later call on the same
    pages) and give their mappings back, once no queued work uses them."""
    for array, _, _, _ in mapped:
        array._stream = array._readers = array._written_at = None  # the work is done: nothing to wait for
    host.release([mapping for _, mapping, _, _ in mapped])
    host.park([(key, array) for array, _, key, _ in mapped])


def _byte_range(array: DeviceArray) -> tuple[int, int]:
    """The device bytes ``[start, end)`` that ``array``'s elements span (empty for no element)."""
    if array.size == 0:
        return 0, 0
    itemsize = array.dtype.itemsize
    extent = 1 + sum((d - 1) * s for d, s in zip(array.shape, array._strides))
    start = array.ptr + array.offset * itemsize
    return start, start + extent * itemsize


def _may_overlap(a: DeviceArray, b: DeviceArray) -> bool:
    """Whether the bytes spanned by ``a`` and ``b`` intersect (as ``np.may_share_memory``, by bounds)."""
    a_start, a_end = _byte_range(a)
    b_start, b_end = _byte_range(b)
    return a_start < b_end and b_start < a_end
