"""Per-backend process state: initialisation, devices, cached parameter arrays, shutdown.

Devices: ``aclrtSetDevice`` binds a device to the calling thread, so the
thread's current device is per thread (:func:`set_device`, :class:`Device`,
device 0 until set); each device has its own memory pool and each thread its
own default stream per device.

Ownership: device memory belongs to its device's :class:`~pyaclnn._pool.MemoryPool`,
every stream handle to one :class:`~pyaclnn._stream.Stream` (to the private
state behind it), every event handle to one :class:`~pyaclnn._stream.Event`,
cached parameter arrays to the context.
:func:`finalize`, also run at exit, closes the streams and events, waits for the
device, frees the pool's memory and the cached arrays, then resets the device
and finalizes ACL, in the order the C API expects.
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from . import _decl, _env, _executors, _warn, acl
from . import backends as _backends
from ._host_memory import HostMemory
from ._host_pool import HostPool
from ._pool import MemoryPool
from .errors import AclError

if TYPE_CHECKING:
    from ._stream import Event, Stream

_DETERMINISTIC = _decl.constant("ACL_OPT_DETERMINISTIC")
_ARRAY_CACHE_LIMIT = 256  # distinct parameter tuples kept per backend


#: Below this many bytes of NumPy arrays a call copies them even where it could map them: the
#: copies are cheaper than mapping, and the copies' blocks and descriptors are reused from call
#: to call (mapping costs about 30 us per array, copying about 0.07 ms per MiB in and out).
MAP_HOST_MIN_BYTES = 1 << 20


def map_host_by_environment() -> int | None:
    """From ``PYACLNN_MAP_HOST``: the bytes of NumPy arrays from which a call maps them, on a
    backend whose device memory is host memory; None (``0``: always copy, to compare or to
    rule the mapping out); ``always``: 0, every array (the test suite's setting)."""
    return _env.choice(
        "PYACLNN_MAP_HOST", {"1": MAP_HOST_MIN_BYTES, "0": None, "always": 0}, MAP_HOST_MIN_BYTES
    )


def launch_blocking_by_environment() -> bool:
    """True when ``ASCEND_LAUNCH_BLOCKING`` is 1 (torch_npu's switch): every call waits for its stream."""
    return os.environ.get("ASCEND_LAUNCH_BLOCKING", "0").strip() == "1"


class _ThreadState(threading.local):
    """A context's per-thread state. ``threading.local`` runs ``__init__`` in every thread
    that reads it, so a thread that never called pyaclnn (a consumer, a finalizer run by
    the garbage collector) starts from these values instead of missing them."""

    def __init__(self) -> None:
        self.bound: int | None = None  # the device aclrtSetDevice last bound in this thread (None: none)
        self.device = 0  # the thread's current device, as pyaclnn's API shows it
        self.devices: set[int] = set()  # devices this thread has bound
        self.streams: dict[int, Stream] = {}  # its default stream per device (_stream.thread_default)
        # The stream a ``with stream:`` block made current, per device, and what each open block
        # replaced: (device, the current stream before it or None, the current device before it).
        self.current: dict[int, Stream] = {}
        self.entered: list[tuple[int, Stream | None, int]] = []


class _NoGuard:
    """The device guard when the right device is bound already: does nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_GUARD = _NoGuard()


class _DeviceGuard:
    """Binds a device to the calling thread for a block of ACL calls, then the previous one again.

    Only the ACL binding changes: the thread's current device (``get_device``) stays.
    A thread that had bound nothing keeps the binding (it has a context now, as CANN
    gives one to a thread that set a device).
    """

    __slots__ = ("ctx", "device", "previous")

    def __init__(self, ctx: _Context, device: int) -> None:
        self.ctx = ctx
        self.device = device
        self.previous: int | None = None

    def __enter__(self) -> None:
        tls = self.ctx.tls
        self.previous = tls.bound
        self.ctx.set_acl_device(self.device)

    def __exit__(self, *exc: object) -> None:
        previous = self.previous
        if previous is not None and previous != self.device:
            self.ctx.set_acl_device(previous)


class _Context:
    """Per-backend process state: initialisation, device binding, cached parameter arrays."""

    def __init__(self, name: str) -> None:
        self.name = name
        _backends.get(name)  # an unknown name or an unloadable npu fails here, before anything is kept
        self.lock = threading.Lock()
        self.initialized = False
        self.tls = _ThreadState()
        # Open Streams and Events; changed and copied under ``lock`` (a WeakSet copied while
        # another thread adds to it raises "Set changed size during iteration").
        self.streams: weakref.WeakSet[Stream] = weakref.WeakSet()
        self.events: weakref.WeakSet[Event] = weakref.WeakSet()
        self.pools: dict[int, MemoryPool] = {}  # device -> its memory
        self.int_arrays: dict[tuple[int, ...], Any] = {}
        self.bool_arrays: dict[tuple[bool, ...], Any] = {}
        self.int_array_sets: dict[tuple[tuple[int, ...], ...], tuple[Any, ...]] = {}
        # (aclDataType, value bytes) -> aclScalar: the scalars of eager generic calls (alpha=1, ...)
        self.scalars: dict[tuple[int, bytes], Any] = {}
        self.deterministic: bool | None = None
        self.launch_blocking = False  # read from the environment when ACL is initialised (ready)
        # NumPy calls map the caller's arrays (_host_memory) where the backend's device memory is
        # host memory, unless PYACLNN_MAP_HOST=0; also read when ACL is initialised.
        self.host_memory: HostMemory | None = None
        self.host_pool: HostPool | None = None  # memory of those calls' NumPy results
        self.used_devices: set[int] = set()  # bound by some thread: reset at shutdown
        self._device_count: int | None = None  # aclrtGetDeviceCount's answer, asked once
        self._exit_hook = False

    def ready(self) -> _Context:
        """Initialise ACL once per process and bind the thread's current device (0 until set)."""
        if not self.initialized:
            with self.lock:
                if not self.initialized:
                    acl.init(backend=self.name)
                    self.initialized = True
                    self.launch_blocking = launch_blocking_by_environment()
                    map_from = map_host_by_environment()
                    if _backends.get(self.name).maps_host_memory and map_from is not None:
                        self.host_memory = HostMemory(self.name, self.on_device, map_from)
                        self.host_pool = HostPool()
                    if not self._exit_hook:  # once: shutdown after a later re-init is the same call
                        atexit.register(self.shutdown, at_exit=True)
                        self._exit_hook = True
        if self.tls.bound is None:
            self.set_acl_device(self.tls.device)
        return self

    @property
    def device(self) -> int:
        """The calling thread's current device."""
        return self.tls.device

    def set_acl_device(self, device: int) -> None:
        """``aclrtSetDevice(device)`` for the calling thread, unless it is bound already."""
        tls = self.tls
        if tls.bound != device:
            acl.rt.set_device(device, backend=self.name)
            tls.bound = device
            if device not in tls.devices:
                tls.devices.add(device)
                with self.lock:
                    self.used_devices.add(device)

    def bind(self, device: int) -> None:
        """Make ``device`` the calling thread's current device (``aclrtSetDevice`` on a change)."""
        self.set_acl_device(device)
        self.tls.device = device

    def on_device(self, device: int) -> _DeviceGuard | _NoGuard:
        """A guard that binds ``device`` to the calling thread for a block of ACL calls.

        Every ACL call of pyaclnn that acts on a device's memory, streams or events
        runs inside one, in whatever thread it is (CANN's contexts are per thread).
        """
        if self.tls.bound == device:
            return _NO_GUARD
        return _DeviceGuard(self, device)

    def device_pool(self, device: int) -> MemoryPool:
        """The memory pool of ``device``, made on first use."""
        pool = self.pools.get(device)
        if pool is None:
            with self.lock:
                pool = self.pools.get(device)
                if pool is None:
                    forget = functools.partial(_executors.forget, self.name)
                    pool = self.pools[device] = MemoryPool(
                        self.name, forget_descriptor=forget, device=device, on_device=self.on_device
                    )
        return pool

    def track(self, opened: weakref.WeakSet[Any], owned: Any) -> None:
        """Add ``owned`` (a new Stream or Event) to ``opened`` (``streams`` or ``events``)."""
        with self.lock:
            opened.add(owned)

    def open_streams(self) -> list[Stream]:
        """The open Streams, copied under the lock."""
        with self.lock:
            return list(self.streams)

    def open_events(self) -> list[Event]:
        """The open Events, copied under the lock."""
        with self.lock:
            return list(self.events)

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

    def cached_scalar(self, key: tuple[int, bytes], value: Any) -> Any | None:
        """A cached aclScalar of ``value`` (a 0-d NumPy array) as aclDataType ``key[0]``, ``key[1]``
        being its bytes (see :meth:`cached_int_array`). CANN copies a scalar's value, and no
        operator changes or destroys the scalars it is given, so one serves every call."""
        handle = self.scalars.get(key)
        if handle is None:
            with self.lock:
                handle = self.scalars.get(key)
                if handle is None and len(self.scalars) < _ARRAY_CACHE_LIMIT:
                    handle = self.scalars[key] = acl.create_scalar(value, key[0], backend=self.name)
        return handle

    def _cached(
        self, cache: dict[Any, Any], values: tuple[Any, ...], create: Callable[..., Any]
    ) -> Any | None:
        handle = cache.get(values)
        if handle is None:
            with self.lock:
                handle = cache.get(values)
                if handle is None and len(cache) < _ARRAY_CACHE_LIMIT:
                    handle = cache[values] = create(values, backend=self.name)
        return handle

    def shutdown(self, at_exit: bool = False) -> None:
        """Close streams and events, wait for the device, free memory and cached arrays, finalize ACL.

        Each stream, event and executor is destroyed with its own device bound. A
        device error still pending on a stream is reported as a RuntimeWarning naming
        the stream, where it was made and the operator, never dropped: at the line that
        called :func:`finalize`, or, ``at_exit`` (the interpreter's exit hook, with no
        user line running), at the line that made the stream.
        """
        when = "at interpreter exit" if at_exit else "pyaclnn.finalize"
        if not self.initialized:
            return
        for stream in self.open_streams():
            _close_reporting(stream, when)
        for event in self.open_events():
            event.close()
        # Work queued on streams pyaclnn does not own (the default stream, say) may use the memory too.
        devices = sorted(self.used_devices)
        for device in devices:
            with self.on_device(device):
                try:
                    acl.rt.synchronize_device(backend=self.name)
                except AclError as exc:
                    _warn_pending(when, f"device {device}", None, exc)
        if self.host_memory is not None:  # the device is idle: no queued work reads a mapping now
            self.host_memory.release_all()
            self.host_memory = self.host_pool = None  # idle result buffers go with the pool
        for pool in self.pools.values():
            pool.release_all()
        # Parameter arrays outlive the launches that captured them: destroying them now is safe.
        for handle in self.int_arrays.values():
            quiet(acl.destroy_int_array, handle, backend=self.name)
        for handle in self.bool_arrays.values():
            quiet(acl.destroy_bool_array, handle, backend=self.name)
        for handle in self.scalars.values():
            quiet(acl.destroy_scalar, handle, backend=self.name)
        self.scalars.clear()
        self.int_arrays.clear()
        self.int_array_sets.clear()
        self.bool_arrays.clear()
        for device in devices:
            quiet(acl.rt.reset_device, device, backend=self.name)
        self.used_devices.clear()
        quiet(acl.finalize, backend=self.name)
        self.initialized = False
        self.deterministic = None  # a new context starts from the runtime's default
        self.tls = _ThreadState()


def _close_reporting(stream: Stream, when: str) -> None:
    """Close ``stream`` at shutdown: a device error its wait finds becomes a warning, then the
    close goes on (the error is reported once, so the second wait returns)."""
    for _ in range(2):
        try:
            stream.close()
            return
        except AclError as exc:
            _warn_pending(when, repr(stream), stream._made_at, exc)


def _warn_pending(when: str, what: str, made_at: tuple[str, int] | None, exc: AclError) -> None:
    """Warn that a device error was still pending on ``what`` (made at ``made_at``, if known)."""
    made = "" if made_at is None else f" (made at {made_at[0]}:{made_at[1]})"
    message = f"{when}: a device error was still pending on {what}{made}: {exc}"
    _warn.warn(message, RuntimeWarning, made_at=made_at)


def quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``fn``, ignoring a failing status (clean-up paths that must go on)."""
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
    if ctx is not None and ctx.initialized and ctx.tls.bound is not None:
        return ctx  # ready (the test ready() starts with): every call of every operator comes here
    if ctx is None:
        with _contexts_lock:
            ctx = _contexts.get(name) or _Context(name)
            _contexts[name] = ctx
    return ctx.ready()


def _forget_in_forked_child() -> None:
    """In a child forked after a runtime started: what the contexts hold is the parent's.

    The backend refuses every call there (``pyaclnn.backends.ForkedChildError``); the
    child's exit and garbage collection must not try to give the parent's objects back.
    """
    for ctx in _contexts.values():
        ctx.lock = threading.Lock()  # another thread of the parent may have held it at the fork
        if ctx.initialized:
            for owned in [*ctx.streams, *ctx.events]:  # the child's only thread: no lock needed
                owned._finalizer.detach()
            ctx.initialized = False
            ctx.tls = _ThreadState()
            ctx.host_memory = ctx.host_pool = None  # the parent's (their locks may be held)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_forked_child)


def finalize(backend: str | None = None) -> None:
    """Free everything pyaclnn holds on ``backend`` (all backends if None) and finalize ACL.

    Waits for the device first. Open DeviceArrays, Streams and Events are
    closed. pyaclnn can be used again afterwards; it initialises again on
    first use.
    """
    for name, ctx in list(_contexts.items()):
        if backend is None or name == backend:
            ctx.shutdown()


_PARAMETERS = """
    Parameters
    ----------
    device : int or pyaclnn.Device, optional
        The thread's current device if None.
    backend : {"numpy", "npu"}, optional
        The active backend by default.
"""
_RAISES = """
    Raises
    ------
    ValueError
        If the backend has no such device.
"""
_F = TypeVar("_F", bound=Callable[..., Any])


def device_documented(summary: str, returns: str) -> Callable[[_F], _F]:
    """Give a function of ``(device=None, *, backend=None)`` (the memory functions, memory_pool,
    default_stream, current_stream) its numpydoc docstring: ``summary``, the two parameters,
    ``returns`` (type, then its lines indented by 8), the ValueError of a missing device."""

    def decorate(fn: _F) -> _F:
        fn.__doc__ = f"{summary}\n{_PARAMETERS}\n    Returns\n    -------\n    {returns}\n{_RAISES}"
        return fn

    return decorate


@device_documented(
    "The memory pool of ``device`` on ``backend``.",
    "MemoryPool\n        The device's pool; ``free_all_blocks()`` returns its cached memory to the device.",
)
def memory_pool(device: int | Device | None = None, *, backend: str | None = None) -> MemoryPool:
    ctx = context(backend)
    return ctx.device_pool(device_arg(device, ctx))


@device_documented(
    "Bytes of device memory arrays and workspaces hold now (``torch.cuda.memory_allocated``).",
    "int\n        Bytes of the blocks in use; the pool rounds each request up (512 B, 1 MiB above 1 MiB).",
)
def memory_allocated(device: int | Device | None = None, *, backend: str | None = None) -> int:
    return memory_pool(device, backend=backend)._counts_of("_allocated")


@device_documented(
    "The most :func:`memory_allocated` has been since the start or the last "
    ":func:`reset_peak_memory_stats` (``torch.cuda.max_memory_allocated``).",
    "int\n        Bytes.",
)
def max_memory_allocated(device: int | Device | None = None, *, backend: str | None = None) -> int:
    return memory_pool(device, backend=backend)._counts_of("_peak_allocated")


@device_documented(
    "Bytes of device memory the pool holds: in use and cached (``torch.cuda.memory_reserved``).",
    "int\n        Bytes allocated with ``aclrtMalloc`` and not freed yet.",
)
def memory_reserved(device: int | Device | None = None, *, backend: str | None = None) -> int:
    return memory_pool(device, backend=backend)._counts_of("_reserved")


@device_documented(
    "The most :func:`memory_reserved` has been since the start or the last "
    ":func:`reset_peak_memory_stats` (``torch.cuda.max_memory_reserved``).",
    "int\n        Bytes.",
)
def max_memory_reserved(device: int | Device | None = None, *, backend: str | None = None) -> int:
    return memory_pool(device, backend=backend)._counts_of("_peak_reserved")


@device_documented(
    "Start the peaks of :func:`max_memory_allocated` and :func:`max_memory_reserved` again from "
    "the current values (``torch.cuda.reset_peak_memory_stats``).",
    "None",
)
def reset_peak_memory_stats(device: int | Device | None = None, *, backend: str | None = None) -> None:
    memory_pool(device, backend=backend).reset_peak()


@device_documented(
    "The device's memory statistics, under ``torch.cuda.memory_stats``'s names.",
    "dict of str to int\n"
    '        ``"allocated_bytes.all.current"`` / ``".peak"`` (:func:`memory_allocated`),\n'
    '        ``"reserved_bytes.all.current"`` / ``".peak"`` (:func:`memory_reserved`),\n'
    '        ``"inactive_split_bytes.all.current"`` (cached: reserved and not in use),\n'
    '        ``"num_device_alloc"``, ``"num_device_free"`` (``aclrtMalloc`` / ``aclrtFree`` calls),\n'
    '        ``"num_alloc_retries"`` (out of memory, cache freed, tried again) and ``"num_ooms"``.',
)
def memory_stats(device: int | Device | None = None, *, backend: str | None = None) -> dict[str, int]:
    return memory_pool(device, backend=backend).memory_stats()


@device_documented(
    "Give the pool's cached blocks back to the device (``torch.cuda.empty_cache``): each once the "
    "work queued before its release has finished (the fences are waited for); blocks in use stay.",
    "None",
)
def empty_cache(device: int | Device | None = None, *, backend: str | None = None) -> None:
    memory_pool(device, backend=backend).free_all_blocks()


@device_documented(
    "Free and total bytes of the device's memory, from ``aclrtGetMemInfo(ACL_HBM_MEM)`` "
    "(``torch.cuda.mem_get_info``). The numpy backend's device is the host's memory "
    "(``PYACLNN_NUMPY_DEVICE_MEMORY`` bytes, else three quarters of it); the CANN emulator's is "
    "``PYACLNN_EMU_DEVICE_MEMORY`` bytes, else 64 GiB.",
    "tuple of int\n        ``(free, total)``; the pool's cached blocks count as used.",
)
def mem_get_info(device: int | Device | None = None, *, backend: str | None = None) -> tuple[int, int]:
    ctx = context(backend)
    with ctx.on_device(device_arg(device, ctx)):
        return acl.rt.get_mem_info(backend=ctx.name)


def device_arg(device: Any, ctx: _Context) -> int:
    """The device id a public ``device=`` argument names: the thread's current device for None,
    else :func:`_device_id`'s check."""
    return ctx.device if device is None else _device_id(device, ctx)


def _device_id(device: Any, ctx: _Context) -> int:
    """``device`` (an int, or a :class:`Device`) checked against the devices of ``ctx``'s backend."""
    if isinstance(device, Device):
        if device._ctx is not ctx:
            raise ValueError(f"device must be a device of backend {ctx.name!r}, got {device!r}")
        device = device.id
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError(f"device must be an int device id or a pyaclnn.Device, got {type(device).__name__}")
    count = device_count(ctx.name)
    if not 0 <= device < count:
        raise ValueError(
            f"device {device} does not exist: backend {ctx.name!r} has {count} device(s), 0..{count - 1}"
        )
    return device


def device_count(backend: str | None = None) -> int:
    """Number of devices of ``backend`` (``aclrtGetDeviceCount``)."""
    ctx = context(backend)
    count = getattr(ctx, "_device_count", None)
    if count is None:
        count = ctx._device_count = acl.rt.get_device_count(backend=ctx.name)
    return count


def get_device(backend: str | None = None) -> int:
    """The calling thread's current device (0 until :func:`set_device` or :class:`Device`)."""
    return context(backend).device


def set_device(device: int, *, backend: str | None = None) -> None:
    """Make ``device`` the calling thread's current device (``aclrtSetDevice``, per thread).

    Calls, uploads, streams and events made afterwards in this thread without a
    ``stream=`` or ``device=`` of their own use it.

    Raises
    ------
    ValueError
        If the backend has no such device.
    """
    ctx = context(backend)
    ctx.bind(_device_id(device, ctx))


class Device:
    """``with pyaclnn.Device(1): ...``: device 1 is the thread's current device inside the block.

    The previous current device comes back on exit.
    """

    def __init__(self, device: int, *, backend: str | None = None) -> None:
        self._ctx = context(backend)
        self.id = _device_id(device, self._ctx)
        self._previous: list[int] = []

    def __enter__(self) -> Device:
        self._previous.append(self._ctx.device)
        self._ctx.bind(self.id)
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.bind(self._previous.pop())

    def __repr__(self) -> str:
        return f"<pyaclnn.Device {self.id} backend={self._ctx.name!r}>"


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
        _executors.clear_all(ctx.name)  # planned under the other setting


def synchronize(device: int | Device | None = None, *, backend: str | None = None) -> None:
    """Wait for all work on ``device``: its open pyaclnn streams, then ``aclrtSynchronizeDevice``.

    Parameters
    ----------
    device : int or pyaclnn.Device, optional
        The thread's current device if None.
    backend : {"numpy", "npu"}, optional
        The active backend by default.

    Raises
    ------
    AclError
        The first device error found, naming the stream it was queued on; every
        stream is still waited for.
    ValueError
        If the backend has no such device.
    """
    ctx = context(backend)
    device = device_arg(device, ctx)
    first: AclError | None = None
    for stream in ctx.open_streams():
        try:
            if stream.device == device:
                stream._state.synchronize()  # one closed meanwhile by another thread has no work left
        except AclError as exc:
            first = first or exc
    try:
        # The thread's ACL binding may be another device (a guard leaves its device bound in a
        # thread that had bound none): aclrtSynchronizeDevice waits for the bound one.
        with ctx.on_device(device):
            acl.rt.synchronize_device(backend=ctx.name)
    except AclError as exc:
        first = first or exc
    if first is not None:
        raise first
