"""Pythonic runtime over the low-level API: devices, streams, device arrays, workspace.

Ownership: device memory belongs to the backend's :class:`~pyaclnn._pool.MemoryPool`,
which lends a block to one :class:`DeviceArray` at a time; every stream handle
belongs to one :class:`Stream`, every workspace buffer to the stream it serves,
cached parameter arrays to the backend's context. Each owner gives back what it
holds in an idempotent ``close()`` (also a context manager) and on garbage
collection; :func:`finalize`, also run at exit, closes the streams, frees the
pool's memory and the cached arrays, then resets the device and finalizes ACL,
in the order the C API expects.
"""

from __future__ import annotations

import atexit
import functools
import threading
import weakref
from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from . import _decl, _executors, acl
from . import backends as _backends
from . import dtypes as _dtypes
from ._pool import MemoryPool
from .errors import AclError

_H2D = _decl.constant("ACL_MEMCPY_HOST_TO_DEVICE")
_D2H = _decl.constant("ACL_MEMCPY_DEVICE_TO_HOST")
_DETERMINISTIC = _decl.constant("ACL_OPT_DETERMINISTIC")
_ARRAY_CACHE_LIMIT = 256  # distinct parameter tuples kept per backend


class _Context:
    """Per-backend process state: initialisation, device binding, cached parameter arrays."""

    def __init__(self, name: str) -> None:
        self.name = name
        _backends.get(name)  # an unknown name or an unloadable npu fails here, before anything is kept
        self.lock = threading.Lock()
        self.initialized = False
        self.tls = threading.local()
        self.streams: weakref.WeakSet = weakref.WeakSet()  # open Streams
        self.pool = MemoryPool(name, forget_descriptor=self._forget_descriptor)
        self.int_arrays: dict[tuple[int, ...], Any] = {}
        self.bool_arrays: dict[tuple[bool, ...], Any] = {}
        self.int_array_sets: dict[tuple[tuple[int, ...], ...], tuple[Any, ...]] = {}
        self.deterministic: bool | None = None
        self._exit_hook = False

    def ready(self) -> _Context:
        """Initialise ACL once per process and bind device 0 once per thread."""
        if not self.initialized:
            with self.lock:
                if not self.initialized:
                    acl.init(backend=self.name)
                    self.initialized = True
                    if not self._exit_hook:  # once: shutdown after a later re-init is the same call
                        atexit.register(self.shutdown)
                        self._exit_hook = True
        if not getattr(self.tls, "device_set", False):
            acl.rt.set_device(0, backend=self.name)
            self.tls.device_set = True
        return self

    def default_stream(self) -> Stream:
        """The calling thread's default stream, created on first use."""
        stream = getattr(self.tls, "stream", None)
        if stream is None or not stream._state.open:
            stream = Stream(self.name)
            self.tls.stream = stream
        return stream

    def cached_int_array(self, values: tuple[int, ...]) -> Any | None:
        """A cached aclIntArray of ``values``, owned by this context and freed at shutdown.

        None once the cache is full: the caller then creates and frees its own.
        """
        return self._cached(self.int_arrays, values, acl.create_int_array)

    def cached_int_arrays(self, values: tuple[tuple[int, ...], ...]) -> tuple[Any, ...] | None:
        """Cached aclIntArrays of several value tuples at once (one look-up for a whole parameter set)."""
        handles = self.int_array_sets.get(values)
        if handles is None:
            handles = tuple(self.cached_int_array(v) for v in values)
            if None in handles:
                return None
            if len(self.int_array_sets) < _ARRAY_CACHE_LIMIT:
                self.int_array_sets[values] = handles
        return handles

    def cached_bool_array(self, values: tuple[bool, ...]) -> Any | None:
        """A cached aclBoolArray of ``values`` (see :meth:`cached_int_array`)."""
        return self._cached(self.bool_arrays, values, acl.create_bool_array)

    def _cached(self, cache: dict, values: tuple, create) -> Any | None:
        handle = cache.get(values)
        if handle is None:
            with self.lock:
                handle = cache.get(values)
                if handle is None and len(cache) < _ARRAY_CACHE_LIMIT:
                    handle = cache[values] = create(values, backend=self.name)
        return handle

    def _forget_descriptor(self, handle: Any) -> None:
        """Drop the cached executors that use ``handle``, on every open stream, before it is destroyed."""
        for stream in list(self.streams):
            stream._forget_descriptor(handle)

    def shutdown(self) -> None:
        """Close open streams, free all device memory and cached arrays, reset the device, finalize ACL."""
        if not self.initialized:
            return
        for stream in list(self.streams):
            try:
                stream.close()
            except AclError:
                pass  # best effort: report nothing, free the rest
        self.pool.release_all()
        for handle in self.int_arrays.values():
            _quiet(acl.destroy_int_array, handle, backend=self.name)
        for handle in self.bool_arrays.values():
            _quiet(acl.destroy_bool_array, handle, backend=self.name)
        self.int_arrays.clear()
        self.int_array_sets.clear()
        self.bool_arrays.clear()
        _quiet(acl.rt.reset_device, 0, backend=self.name)
        _quiet(acl.finalize, backend=self.name)
        self.initialized = False
        self.deterministic = None  # a new context starts from the runtime's default
        self.tls = threading.local()


def _quiet(fn, *args, **kwargs) -> None:
    try:
        fn(*args, **kwargs)
    except AclError:
        pass


_contexts: dict[str, _Context] = {}
_contexts_lock = threading.Lock()


def context(backend: str | None = None) -> _Context:
    """The ready context of ``backend`` (None: the active backend)."""
    name = backend or _backends.active_name()
    ctx = _contexts.get(name)
    if ctx is None:
        with _contexts_lock:
            ctx = _contexts.get(name) or _Context(name)
            _contexts[name] = ctx
    return ctx.ready()


def finalize(backend: str | None = None) -> None:
    """Free everything pyaclnn holds on ``backend`` (all backends if None) and finalize ACL.

    Open DeviceArrays and Streams are closed. pyaclnn can be used again
    afterwards; it initialises again on first use.
    """
    for name, ctx in list(_contexts.items()):
        if backend is None or name == backend:
            ctx.shutdown()


def memory_pool(backend: str | None = None) -> MemoryPool:
    """The device-memory pool of ``backend``: ``free_all_blocks()`` returns cached memory to the device."""
    return context(backend).pool


def set_deterministic(enabled: bool, *, backend: str | None = None) -> None:
    """Ask for deterministic backward ops: ``aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 0/1)``.

    The backward ops accumulate with atomic adds on the NPU unless this is on.
    The numpy backend is always deterministic; it records the setting.
    Set once per thread, before the ops it should apply to.
    """
    ctx = context(backend)
    value = bool(enabled)
    if ctx.deterministic is not value:
        acl.rt.ctx_set_sys_param_opt(_DETERMINISTIC, int(value), backend=ctx.name)
        ctx.deterministic = value
        for stream in list(ctx.streams):
            stream._clear_executors()  # planned under the other setting


# -- streams and workspace ---------------------------------------------------


class _StreamState:
    """What a Stream shares with its finalizer: its workspace buffer and whether its handle lives.

    A plain flag rather than ``finalize.alive`` (a property doing a dict look-up): the
    launch path asks it several times per call.
    """

    __slots__ = ("workspace", "workspace_size", "open")

    def __init__(self) -> None:
        self.workspace = 0  # device pointer, 0 for none
        self.workspace_size = 0
        self.open = True


def _destroy_stream(
    backend: str, handle: Any, state: _StreamState, executors: _executors.ExecutorCache
) -> None:
    state.open = False
    try:
        acl.rt.synchronize_stream(handle, backend=backend)
    finally:
        executors.enabled = False  # a launch racing the close must not put one back
        executors.clear()
        if state.workspace:
            _quiet(acl.rt.free, state.workspace, backend=backend)
            state.workspace = state.workspace_size = 0
        acl.rt.destroy_stream(handle, backend=backend)


class Stream:
    """An ACL stream with its own workspace buffer (``aclrtCreateStream``).

    Work on different streams may run concurrently; give each thread its own
    for parallelism (threads sharing one are serialized on its lock). The
    stream also keeps the repeatable executors of its recent calls
    (``executors``, see :mod:`pyaclnn._executors`). ``close()`` synchronizes,
    destroys those executors, frees the workspace and destroys the stream.
    """

    def __init__(self, backend: str | None = None) -> None:
        ctx = context(backend)
        self.backend = ctx.name
        self.handle = acl.rt.create_stream(backend=ctx.name)
        self._state = _StreamState()
        # Held from taking the workspace until the launch that uses it, so threads
        # sharing a stream never see a buffer another one is about to replace.
        self.lock = threading.RLock()
        # Repeatable executors of recent calls on this stream, used under self.lock.
        self.executors = _executors.ExecutorCache(self.backend, _executors.enabled_by_environment())
        self._finalizer = weakref.finalize(
            self, _destroy_stream, self.backend, self.handle, self._state, self.executors
        )
        self._finalizer.atexit = False  # the context's exit hook closes streams in order
        ctx.streams.add(self)

    @property
    def closed(self) -> bool:
        return not self._state.open

    def synchronize(self) -> None:
        """Wait until all work queued on this stream is done (``aclrtSynchronizeStream``)."""
        if not self._state.open:
            self._check_open()  # raises
        acl.rt.synchronize_stream(self.handle, backend=self.backend)

    def workspace(self, size: int) -> int:
        """Device pointer to at least ``size`` bytes of workspace (0 for size 0), reused across calls."""
        state = self._state
        if not state.open:
            self._check_open()  # raises
        if size <= 0:
            return 0
        if size > state.workspace_size:
            if state.workspace:
                acl.rt.synchronize_stream(self.handle, backend=self.backend)  # the old buffer may be in use
                acl.rt.free(state.workspace, backend=self.backend)
                state.workspace = state.workspace_size = 0
            state.workspace = acl.rt.malloc(size, backend=self.backend)
            state.workspace_size = size
        return state.workspace

    def _forget_descriptor(self, handle: Any) -> None:
        self.executors.forget(handle)  # the cache's own lock: never wait for a launch here

    def _clear_executors(self) -> None:
        with self.lock:
            self.executors.clear()

    def close(self) -> None:
        """Synchronize, destroy the cached executors and the stream; a second call does nothing."""
        self._finalizer()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("stream is closed")

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<pyaclnn.Stream backend={self.backend!r}{' closed' if self.closed else ''}>"


def default_stream(backend: str | None = None) -> Stream:
    """The calling thread's default stream on ``backend``, created on first use."""
    return context(backend).default_stream()


# -- device memory -----------------------------------------------------------


class DeviceArray:
    """An array in device memory: shape, strides and offset (in elements) over an owned block.

    Create one with :func:`to_device`, :func:`empty` or :func:`zeros`; read it
    back with :meth:`numpy`. ``close()`` (or garbage collection) gives the
    memory back to the backend's pool, where the next array of that size
    reuses it; :func:`pyaclnn.finalize` returns it to the device. A closed
    array raises ValueError when used. Not meant to be closed by one thread
    while another uses it.
    """

    # Slots make the per-call outputs cheaper to build; __dict__ keeps arrays open to user attributes.
    # _last_descriptor: (format, block, handle) of the latest descriptor() call.
    __slots__ = (
        "backend", "shape", "dtype", "strides", "offset", "storage_size",
        "_pool", "_block", "_last_descriptor", "__weakref__", "__dict__",
    )

    def __init__(
        self,
        shape: Sequence[int],
        dtype: Any,
        *,
        strides: Sequence[int] | None = None,
        offset: int = 0,
        storage_size: int | None = None,
        backend: str | None = None,
    ) -> None:
        shape = tuple(int(d) for d in shape)
        dtype = np.dtype(dtype)
        _dtypes.from_numpy(dtype)  # TypeError for dtypes ACL has no name for
        self._setup(
            context(backend),
            shape,
            dtype,
            tuple(int(s) for s in strides) if strides is not None else _contiguous_strides(shape),
            int(offset),
            prod(shape) if storage_size is None else int(storage_size),
        )

    @classmethod
    def _contiguous(cls, ctx: _Context, shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
        """A contiguous array of an already valid shape and dtype (the functional layer's outputs).

        :meth:`_setup` written out: this runs for every output of every call.
        """
        array = cls.__new__(cls)
        array.backend = ctx.name
        array.strides, size = _contiguous_layout(shape)
        array.shape, array.dtype, array.offset, array.storage_size = shape, dtype, 0, size
        array._pool = pool = ctx.pool
        array._last_descriptor = array._block = None  # so that a failing acquire leaves a closed array
        array._block = pool.acquire(size * dtype.itemsize) if size else pool.empty_block
        return array

    def _setup(self, ctx: _Context, shape, dtype, strides, offset, storage_size) -> None:
        self.backend = ctx.name
        self.shape, self.dtype, self.strides, self.offset = shape, dtype, strides, offset
        self.storage_size = storage_size
        self._pool = ctx.pool
        self._last_descriptor = self._block = None  # so that a failing acquire leaves a closed array
        nbytes = storage_size * dtype.itemsize
        self._block = ctx.pool.acquire(nbytes) if nbytes else ctx.pool.empty_block

    # -- properties ---------------------------------------------------------
    @property
    def ptr(self) -> int:
        """Device address of the storage base (0 for an empty array)."""
        return self._block.ptr

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the storage the view lies in."""
        return self.storage_size * self.dtype.itemsize

    @property
    def closed(self) -> bool:
        """True after close(), or once finalize() freed the memory under it."""
        block = self._block
        return block is None or (block.ptr == 0 and block.nbytes > 0)

    def is_contiguous(self) -> bool:
        return self.offset == 0 and self.strides == _contiguous_strides(self.shape)

    # -- conversion ---------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A NumPy copy of the array (``aclrtMemcpy`` device to host)."""
        self._check_open()
        storage = np.empty(self.storage_size, dtype=self.dtype)
        if self.nbytes:
            # as bytes: the buffer protocol has no format for bfloat16
            acl.rt.memcpy(
                storage.view(np.uint8), storage.nbytes, self.ptr, self.nbytes, _D2H, backend=self.backend
            )
        if self.is_contiguous() and self.storage_size == self.size:
            return storage.reshape(self.shape)
        if self.size == 0:
            return np.empty(self.shape, dtype=self.dtype)
        view = np.lib.stride_tricks.as_strided(
            storage[self.offset :],
            shape=self.shape,
            strides=tuple(s * self.dtype.itemsize for s in self.strides),
            writeable=False,
        )
        return np.array(view)

    def descriptor(self, fmt: int) -> Any:
        """The aclTensor describing this array with format ``fmt``.

        Cached with the memory block and freed with it: never destroy it yourself.
        """
        last = self._last_descriptor
        if (
            last is not None
            and last[0] == fmt
            and last[1] is self._block
            and (last[1].ptr or not last[1].nbytes)
        ):
            return last[2]  # the same array asked again (an input reused across calls)
        block = self._block
        if block is None or (block.ptr == 0 and block.nbytes > 0):
            self._check_open()  # raises
        key = (self.shape, self.strides, self.offset, self.dtype, fmt, self.storage_size)
        handle = block.descriptors.get(key)  # a reused block usually has it
        if handle is None:  # the pool creates it, checking again under its lock
            handle = self._pool.descriptor(block, key, lambda: self._create_descriptor(fmt))
        self._last_descriptor = (fmt, block, handle)
        return handle

    def _create_descriptor(self, fmt: int) -> Any:
        return acl.create_tensor(
            self.shape,
            _dtypes.from_numpy(self.dtype),
            self.strides,
            self.offset,
            fmt,
            (self.storage_size,),
            self.ptr,
            backend=self.backend,
        )

    def fill_zero(self) -> None:
        """Set the whole storage to zero (``aclrtMemset``)."""
        self._check_open()
        if self.nbytes:
            acl.rt.memset(self.ptr, self.nbytes, 0, self.nbytes, backend=self.backend)

    def close(self) -> None:
        """Give the memory back; a second call does nothing."""
        block, self._block = self._block, None
        if block is not None and block.nbytes:
            self._pool.release(block)

    def __del__(self) -> None:
        if getattr(self, "_block", None) is None:
            return  # closed already (the common case), or never set up
        try:
            self.close()
        except Exception:  # noqa: BLE001 - a finalizer must not raise (e.g. at interpreter exit)
            pass

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError("DeviceArray is closed: its device memory was given back")

    def __enter__(self) -> DeviceArray:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<pyaclnn.DeviceArray shape={self.shape} dtype={self.dtype} backend={self.backend!r}{state}>"


@functools.lru_cache(maxsize=1024)
def _contiguous_layout(shape: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Strides and element count of a contiguous array of ``shape``."""
    return _contiguous_strides(shape), prod(shape)


@functools.lru_cache(maxsize=1024)
def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def empty(shape: Sequence[int], dtype: Any = np.float32, *, backend: str | None = None) -> DeviceArray:
    """An uninitialised contiguous DeviceArray."""
    return DeviceArray(shape, np.dtype(dtype), backend=backend)


def zeros(shape: Sequence[int], dtype: Any = np.float32, *, backend: str | None = None) -> DeviceArray:
    """A zero-filled contiguous DeviceArray."""
    array = empty(shape, dtype, backend=backend)
    array.fill_zero()
    return array


def _covering_storage(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...], int]:
    """The bytes spanned by ``x`` as a 1-D array, and x's strides and offset within it (in elements)."""
    itemsize = x.dtype.itemsize
    if x.flags.c_contiguous:
        return x.reshape(-1), _contiguous_strides(x.shape), 0
    if any(s % itemsize or s < 0 for s in x.strides):
        # aclTensor strides are whole, non-negative element counts: other views are copied dense
        x = np.ascontiguousarray(x)
        return x.reshape(-1), _contiguous_strides(x.shape), 0
    strides = tuple(s // itemsize for s in x.strides)
    span_size = 1 + sum(s * (d - 1) for s, d in zip(strides, x.shape))
    first = x[tuple(slice(0, 1) for _ in x.shape)]
    span = np.lib.stride_tricks.as_strided(first, shape=(span_size,), strides=(itemsize,), writeable=False)
    return span, strides, 0


def to_device(x: Any, *, backend: str | None = None) -> DeviceArray:
    """Copy ``x`` to device memory (``aclrtMalloc`` + ``aclrtMemcpy``).

    A non-contiguous NumPy view is copied once together with the storage it
    spans and described with its strides, not densified (a view with negative
    strides, which an aclTensor cannot describe, is copied dense). A DeviceArray is
    returned as is when it already lives on ``backend``.

    Parameters
    ----------
    x : array_like or DeviceArray
        Data of a dtype ACL names (float32, float16, bfloat16, float64, int32, int64, ...).
    backend : {"numpy", "npu"}, optional
        Where to put it; the active backend by default.
    """
    if isinstance(x, DeviceArray):
        name = backend or _backends.active_name()
        if x.backend == name:
            return x
        return to_device(x.numpy(), backend=name)
    x = np.asarray(x)
    if x.size == 0:
        return DeviceArray(x.shape, x.dtype, backend=backend)
    storage, strides, offset = _covering_storage(x)
    array = DeviceArray(
        x.shape, x.dtype, strides=strides, offset=offset, storage_size=storage.size, backend=backend
    )
    try:
        host = np.ascontiguousarray(storage).view(np.uint8)
        acl.rt.memcpy(array.ptr, array.nbytes, host, host.nbytes, _H2D, backend=array.backend)
    except BaseException:
        array.close()
        raise
    return array
