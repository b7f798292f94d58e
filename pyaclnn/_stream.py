"""Streams and events: where work is queued, and how the host and other streams wait for it.

A :class:`Stream` is a handle with a few methods; what pyaclnn keeps for it
(the lock, the counts of work queued and known done, the workspace buffer, the
executor cache) is one private :class:`StreamState`, which every enqueue goes
through. Work queued on a stream runs after the host has moved on; the host
waits with :meth:`Stream.synchronize` (or :meth:`DeviceArray.numpy`, which
waits for the stream of the array), another stream with :meth:`Stream.wait_event`
or :meth:`Stream.wait_stream`. An :class:`Event` marks a point in a stream's
work, for waiting and timing.

Calls that name no stream go to the calling thread's *current* stream of the
device (:func:`current`): the stream of the innermost ``with stream:`` block of
that thread, else the thread's default stream (:func:`thread_default`), as in
CuPy and torch.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from . import _context, _decl, _executors, _timeline, _warn, acl
from . import backends as _backends
from ._pool import Block
from .errors import AclError, describe, make_error

_COMPLETE = _decl.constant("ACL_EVENT_RECORDED_STATUS_COMPLETE")
_STREAM_COMPLETE = _decl.constant("ACL_STREAM_STATUS_COMPLETE")
_STOP_ON_FAILURE = _decl.constant("ACL_STOP_ON_FAILURE")
_SYNC = _decl.constant("ACL_EVENT_SYNC")  # can be waited on
_TIME_LINE = _decl.constant("ACL_EVENT_TIME_LINE")  # records a timestamp
_numbers = itertools.count(1)  # names streams in messages: "stream #3"
_CAPTURING = "the stream is capturing a graph, and its captured work runs only when the graph is replayed"


class StreamState:
    """Everything behind one Stream: its handle, lock, counts of work, workspace and executor cache.

    The Stream is what users hold; this is what its finalizer, the memory pool
    (a key of its free lists) and the executor cache share, and it never refers
    back to the Stream, so the Stream can be collected while work is queued.

    Work joins the stream through :meth:`enqueue_held` (from :meth:`enqueue`: an
    upload, a fill, an event record or wait; and from the executor cache's
    launches after a phase 1), which counts it in ``queued``; the one other place
    ``queued`` changes is a launch of a cached plan, which ``ExecutorCache.launch``
    makes through the plan's bound phase 2 and counts itself (one Python call less
    per operator call), also right after the runtime took it. ``queued`` counts the
    work pyaclnn queued on the stream, ``done`` how much of it a wait has seen
    finish (:meth:`_finished`, only after the wait returned): equal means nothing
    of pyaclnn's is pending. Both change under ``lock``, with the enqueue they
    count, so a count read under it never runs ahead of what the runtime was given.

    ``lock`` is held by every enqueue and launch (from taking the workspace until
    the launch that uses it, so threads sharing a stream never see a buffer
    another one is about to replace) and by a close; re-entrant, since a launch
    takes it again inside. ``closing`` is set (under the pool's lock) while a
    close waits for the stream: the pool then records no fence on it. A plain
    flag ``open`` rather than ``finalize.alive`` (a property doing a dict
    look-up): the launch path asks it several times per call.
    """

    __slots__ = (
        "handle",
        "name",
        "backend",
        "device",
        "pool",
        "lock",
        "open",
        "closing",
        "capturing",
        "queued",
        "done",
        "executors",
        "_ctx",
        "_workspace",
        "capture",
    )

    def __init__(self, ctx: _context._Context, device: int, handle: Any, name: str) -> None:
        self.handle = handle  # the aclrtStream: passed to ACL calls, never kept by others
        self.name = name  # for messages after the Stream object is gone
        self.backend = ctx.name
        self.device = device
        self.pool = ctx.device_pool(device)
        self.lock = threading.RLock()
        self.open = True
        self.closing = False
        self.capturing = False  # set under the pool's lock from before a capture begins until it ended
        self.queued = 0
        self.done = 0
        self._ctx = ctx
        self._workspace: Block | None = None
        # Repeatable executors of recent calls on this stream; launched under ``lock``.
        self.executors = _executors.ExecutorCache(self, _executors.enabled_by_environment())
        # The capture in progress on this stream (pyaclnn._graph), else None. While it runs, the
        # graph's own pool, executors and workspace stand in for the three above.
        self.capture: Any = None

    def on_device(self) -> AbstractContextManager[None]:
        """A guard binding the stream's device to the calling thread (CANN's contexts are per thread)."""
        return self._ctx.on_device(self.device)

    # -- the one enqueue path -----------------------------------------------------
    def enqueue(self, call: Callable[..., Any], *args: Any) -> None:
        """Queue one ACL call on the stream (``call(*args, backend=...)``) and count it.

        Under the stream's lock, with its device bound to the calling thread;
        ValueError if the stream is closed.
        """
        with self.lock:
            if not self.open:
                raise ValueError("stream is closed")
            with self._ctx.on_device(self.device):
                if _timeline.recording:  # the one check when nothing is profiled (pyaclnn.profile)
                    _timeline.timed(f"acl.rt.{call.__name__}", self, self.enqueue_held, call, *args)
                else:
                    self.enqueue_held(call, *args)

    def enqueue_held(self, call: Callable[..., Any], *args: Any) -> None:
        """:meth:`enqueue` for a caller that holds the lock, has checked the stream is open and
        has bound its device (a launch): the one place work is counted."""
        call(*args, backend=self.backend)
        self.queued += 1

    def wait_for(self, other: StreamState) -> None:
        """Order later work here after the work queued on ``other`` so far (an event between them)."""
        if self.capture is not other.capture:  # work in and out of a capture cannot be ordered
            if other.capture is not None:
                other.capture.refuse(
                    f"a call on {self.name} using an array of the capture on {other.name}",
                    "work outside a capture cannot wait for captured work, which runs only at a replay",
                )
            if self.capture is not None:
                self.capture.refuse(
                    f"a captured call using an array last used on {other.name}",
                    "a capture cannot wait for work queued outside it; synchronize that stream "
                    "before the capture, or copy_ the data into an array of the capture",
                )
        # The event belongs to the device current at its creation and can only be recorded on a
        # stream of that device: ``other``'s. The wait may be on another device's stream.
        with self._ctx.on_device(other.device):
            event = acl.rt.create_event(backend=self.backend)
            try:
                other.enqueue(acl.rt.record_event, event, other.handle)
                self.enqueue(acl.rt.stream_wait_event, self.handle, event)
            finally:
                # CANN lets an event be destroyed while pending; the queued wait still holds.
                acl.rt.destroy_event(event, backend=self.backend)

    def workspace(self, size: int) -> int:
        """Device pointer to at least ``size`` bytes of workspace (0 for size 0), reused across launches.

        The caller holds the lock. A buffer outgrown goes back to the pool on this
        stream, so only work queued after the launches that used it can reuse it.
        A buffer is replaced, never resized: the executor cache's plans keep its
        pointer while ``_workspace`` is the same Block.
        """
        if size <= 0:
            return 0
        block = self._workspace
        if block is None or size > block.nbytes:
            if block is not None:
                self._workspace = None
                self.pool.release(block, self)
            self._workspace = block = self.pool.acquire(size, self)
        return block.ptr

    # -- waits and the bookkeeping after them -------------------------------------
    def synchronize(self) -> bool:
        """Wait for the stream; False (nothing done) if it is closed, so all its work has finished.

        Only once the wait returned is the work counted as done and what was
        released to the stream handed to other streams: a wait that raised (a
        device error, KeyboardInterrupt) changed nothing. A device error drops
        the cached plans (the one that failed is among them).
        """
        if self.capture is not None:  # CANN refuses it (107027): say which call, end the capture
            self.capture.refuse(f"synchronize() of {self.name}", _CAPTURING)
        with self.lock:
            if not self.open:
                return False
            queued = self.queued
        pool = self.pool
        token = pool.stream_synchronizing(self)
        try:
            with self._ctx.on_device(self.device):
                acl.rt.synchronize_stream(self.handle, backend=self.backend)
        except BaseException as exc:
            pool.stream_unsynchronized(token)
            if isinstance(exc, AclError):
                if not self.open:  # closed meanwhile by another thread: its close waited
                    return False
                self.executors.clear()
                raise _device_error(exc, self.name) from None
            raise
        with self.lock:
            self._finished(queued)
        self.executors.idle(queued)
        pool.stream_synchronized(token)
        return True

    def wait_queued(self) -> None:
        """Wait for the work pyaclnn queued here, if any is pending (the read path of DeviceArray)."""
        if self.open and self.queued != self.done:
            self.synchronize()

    def _finished(self, queued: int) -> None:
        """A wait that returned saw the work up to count ``queued`` finish (caller holds the lock)."""
        if queued > self.done:
            self.done = queued

    def query(self) -> bool:
        """Whether every task on the stream is done (``aclrtStreamQuery``); the host does not wait.

        Under the lock, so that a close in another thread cannot destroy the handle meanwhile.
        Nothing counts as done here: only a wait changes the bookkeeping.
        """
        if self.capture is not None:
            self.capture.refuse(f"query() of {self.name}", _CAPTURING)
        with self.lock:
            if not self.open:
                raise ValueError("stream is closed")
            with self._ctx.on_device(self.device):
                status = acl.rt.stream_query(self.handle, backend=self.backend)
        return bool(status == _STREAM_COMPLETE)

    def close(self, destroy: bool = True) -> None:
        """Wait for the stream, give back what pyaclnn holds for it, and destroy the handle if ``destroy``.

        Nothing is given back before the wait returned: a wait that raised (a device
        error, KeyboardInterrupt) leaves the stream open, and the next close finishes.
        """
        if self.capture is not None:  # CANN cannot destroy it (107027): the capture goes first
            self.capture.graph.abandon()
        with self.lock:  # no launch, record or copy joins the stream while it closes
            if not self.open:
                return
            pool = self.pool
            with self._ctx.on_device(self.device):
                pool.stream_closing(self, True)
                try:
                    acl.rt.synchronize_stream(self.handle, backend=self.backend)
                except AclError as exc:
                    pool.stream_closing(self, False)
                    raise _device_error(exc, self.name) from None
                except BaseException:
                    pool.stream_closing(self, False)
                    raise
                self.open = False
                self._finished(self.queued)
                self.executors.close()
                if self._workspace is not None:
                    pool.release(self._workspace)  # idle: the stream has finished
                    self._workspace = None
                pool.stream_idle(self)
                if destroy:
                    acl.rt.destroy_stream(self.handle, backend=self.backend)


def _device_error(exc: AclError, where: str) -> AclError:
    """``exc`` from a synchronize, saying which stream's queued work failed."""
    return make_error(exc.status, f"{exc.message} [device error in work queued on {where}]", exc.api)


_OwnedT = TypeVar("_OwnedT", bound="_Owned")


class _Owned:
    """What Stream and Event share: ``close()`` runs the finalizer that gives the handle back
    (a second call does nothing), a context manager, and a check naming the kind."""

    _kind = "handle"
    _finalizer: weakref.finalize[..., Any]  # Any: the owner, a Stream or an Event

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        """Give back what this holds (see the class); a second call does nothing.

        If it raises (a device error found by the wait, KeyboardInterrupt), nothing
        was given back before the failing step, and calling it again finishes.
        """
        finalizer = self._finalizer
        info = finalizer.peek()
        if info is None:
            return  # closed already
        _, fn, args, kwargs = info
        # Called directly, not through the finalizer: that one runs once even when it
        # raises, and does nothing once the interpreter began to exit.
        fn(*args, **kwargs)
        finalizer.detach()

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"{self._kind} is closed")

    def _check_peer(self, name: str, other: object, kind: type[_Owned], same_device: bool = True) -> None:
        """The one rule for a Stream or Event handed to this one: an open ``kind`` of this
        backend (and device, if ``same_device``); otherwise a ValueError naming ``name``."""
        backend, device = getattr(self, "backend", None), getattr(self, "device", None)
        if (
            not isinstance(other, kind)
            or getattr(other, "backend", None) != backend
            or (same_device and getattr(other, "device", None) != device)
        ):
            where = f" on device {device}" if same_device else ""
            got = describe(other)
            raise ValueError(
                f"{name} must be a pyaclnn.{kind.__name__} of backend {backend!r}{where}, got {got}"
            )
        other._check_open()

    def __enter__(self: _OwnedT) -> _OwnedT:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Stream(_Owned):
    """An ACL stream (``aclrtCreateStreamWithConfig``), as ``torch.cuda.Stream(device, priority)``.

    Work queued on a stream runs in order, asynchronously to the host; work on
    different streams may run concurrently. Give each thread its own stream
    for parallelism (threads sharing one are serialized on its lock). What
    pyaclnn keeps for the stream (its workspace buffer, the repeatable
    executors of its recent calls, see :mod:`pyaclnn._executors`, and the
    counts of its work) is behind it, in one private object. ``close()`` waits
    for the stream, destroys those executors, gives the workspace back and
    destroys the stream.

    The stream stops on failure (``aclrtSetStreamFailureMode(ACL_STOP_ON_FAILURE)``):
    after a task fails, the work queued behind it does not run, and the error
    reaches the caller at the next wait (:meth:`synchronize`, ``numpy()``).

    Parameters
    ----------
    device : int or pyaclnn.Device, optional
        The device the stream belongs to (the thread's current one if None).
    priority : int, optional
        CANN's stream priority, 0 (the default) to 7.
    backend : {"numpy", "npu"}, optional
        The active backend by default.

    Raises
    ------
    ValueError
        If the device does not exist, or the priority is outside 0..7.
    TypeError
        If the priority is not an int.
    """

    _kind = "stream"
    _owns_handle = True  # closing destroys the handle: pyaclnn created it
    _state: StreamState

    def __init__(
        self, device: int | _context.Device | None = None, priority: int = 0, *, backend: str | None = None
    ) -> None:
        ctx = _context.context(backend)
        device = _context.device_arg(device, ctx)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"priority must be an int from 0 to 7, got {type(priority).__name__}")
        if not 0 <= priority <= 7:
            raise ValueError(f"priority must be from 0 to 7 (CANN's stream priorities), got {priority}")
        with ctx.on_device(device):  # a stream belongs to the device current at its creation
            handle = acl.rt.create_stream_with_config(priority, 0, backend=ctx.name)
            try:
                acl.rt.set_stream_failure_mode(handle, _STOP_ON_FAILURE, backend=ctx.name)
            except BaseException:
                _context.quiet(acl.rt.destroy_stream, handle, backend=ctx.name)
                raise
        self.priority = priority
        self._setup(ctx, device, handle)

    def _setup(self, ctx: _context._Context, device: int, handle: Any) -> None:
        self.backend = ctx.name
        self.device = device
        self.number = next(_numbers)
        self._made_at = _warn.user_line()  # named by a warning about the stream at exit, when no line runs
        state = self._state = StreamState(ctx, device, handle, f"pyaclnn stream #{self.number}")
        self._finalizer = weakref.finalize(self, state.close, self._owns_handle)
        self._finalizer.atexit = False  # the context's exit hook closes streams in order
        ctx.track(ctx.streams, self)

    @property
    def handle(self) -> Any:
        """The ``aclrtStream``."""
        return self._state.handle

    @property
    def closed(self) -> bool:
        return not self._state.open

    def synchronize(self) -> None:
        """Wait until all work queued on this stream is done (``aclrtSynchronizeStream``).

        Any thread may call it. Only once the wait returned is the stream's work
        counted as done and what was released to it handed to other streams: a
        wait that raised (a device error, KeyboardInterrupt) changed nothing, and
        the next one finishes the job.

        Raises
        ------
        AclError
            When queued work failed on the device (an index outside its plane,
            say): the runtime's status and message, naming this stream. The
            stream's cached plans are dropped.
        ValueError
            If the stream is closed.
        """
        state = self._state
        if _timeline.recording:  # the one check when nothing is profiled (pyaclnn.profile)
            synchronized = _timeline.timed("Stream.synchronize", state, state.synchronize)
        else:
            synchronized = state.synchronize()
        if not synchronized:
            self._check_open()  # raises

    def __enter__(self) -> Stream:
        """Make this the calling thread's current stream, and its device the current device,
        until the block ends; calls that name no stream go here. The stream stays open."""
        self._check_open()
        ctx = self._state._ctx
        tls = ctx.tls
        previous_device = tls.device
        ctx.bind(self.device)  # first: if binding fails, nothing was changed
        tls.entered.append((self.device, tls.current.get(self.device), previous_device))
        tls.current[self.device] = self
        return self

    def __exit__(self, *exc: object) -> None:
        """Give back the current stream and device the block replaced."""
        ctx = self._state._ctx
        tls = ctx.tls
        device, previous, previous_device = tls.entered.pop()
        if previous is None:
            tls.current.pop(device, None)
        else:
            tls.current[device] = previous
        ctx.bind(previous_device)

    def wait_stream(self, other: Stream) -> None:
        """Make work queued on this stream from now on wait for the work queued on ``other`` so
        far (an event recorded there). The host does not wait; ``other`` may be on another device."""
        self._check_open()
        self._check_peer("other", other, Stream, same_device=False)
        self._state.wait_for(other._state)

    def query(self) -> bool:
        """True if nothing is pending on this stream; the host does not wait (``aclrtStreamQuery``).

        The device answers: True for a new stream, after :meth:`synchronize`, after
        an event recorded last on it completed, and False while a task of it is
        queued or runs (pyaclnn's or, on an :class:`ExternalStream`, anyone's). A
        polling loop (``while not s.query(): pass``) costs what the work costs.
        Nothing counts as done here: only a wait changes the stream's bookkeeping.

        Raises
        ------
        ValueError
            If the stream is closed.
        GraphCaptureError
            While the stream captures a graph (CANN refuses it: 107027).
        """
        self._check_open()
        return self._state.query()

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) after the work queued so far; return it."""
        if event is None:
            event = Event(backend=self.backend, device=self.device)
        return event.record(self)

    def wait_event(self, event: Event) -> None:
        """Make work queued on this stream from now on wait for ``event`` (``aclrtStreamWaitEvent``).

        The host does not wait.
        """
        self._check_open()
        self._check_peer("event", event, Event)
        state = self._state
        state.enqueue(acl.rt.stream_wait_event, state.handle, event.handle)

    def __repr__(self) -> str:
        closed = " closed" if self.closed else ""
        where = f"backend={self.backend!r} device={self.device}"
        return f"<pyaclnn.{type(self).__name__} #{self.number} {where}{closed}>"


class ExternalStream(Stream):
    """A Stream over an ``aclrtStream`` made elsewhere (torch_npu, pyACL): pyaclnn never destroys it.

    pyaclnn keeps its own workspace and executor cache for it. ``close()``
    waits for the stream (pyaclnn's work on it, and whatever else is queued)
    and gives back only what pyaclnn allocated.

    Parameters
    ----------
    handle : int or cffi pointer
        The ``aclrtStream`` (pyACL's ``acl.rt.create_stream`` returns an int,
        torch_npu's ``torch.npu.current_stream().npu_stream`` too), or a handle
        of the backend's own (``pyaclnn.acl.rt.create_stream``).
    device : int, optional
        The device the stream belongs to (the thread's current one by default).
    backend : {"numpy", "npu"}, optional
        The active backend by default.
    """

    _owns_handle = False

    def __init__(self, handle: Any, *, device: int | None = None, backend: str | None = None) -> None:
        ctx = _context.context(backend)
        device = ctx.device if device is None else _context._device_id(device, ctx)
        self._setup(ctx, device, _backends.get(ctx.name).adopt_stream(handle))

    @classmethod
    def from_torch(cls, stream: Any, *, backend: str | None = None) -> ExternalStream:
        """The stream of a torch_npu ``torch.npu.Stream`` (its ``npu_stream`` handle and device).

        Needs no torch import: any object with an ``npu_stream`` attribute (and
        optionally ``device.index``) will do. Untested on real torch_npu.
        """
        handle = getattr(stream, "npu_stream", None)
        if handle is None:
            raise TypeError(
                f"stream must be a torch_npu stream (with .npu_stream), got {type(stream).__name__}"
            )
        index = getattr(getattr(stream, "device", None), "index", None)
        return cls(handle, device=index, backend=backend)


@_context.device_documented(
    "The calling thread's default stream of ``device``, created on first use.",
    "Stream\n        A stream pyaclnn made for this thread and device (CANN's default stream,\n"
    "        the NULL handle, is not used: it could not stop on failure).",
)
def default_stream(device: int | _context.Device | None = None, *, backend: str | None = None) -> Stream:
    ctx = _context.context(backend)
    return thread_default(ctx, _context.device_arg(device, ctx))


@_context.device_documented(
    "The calling thread's current stream of ``device``, as ``torch.cuda.current_stream``.",
    "Stream\n        The stream of the innermost ``with stream:`` block of this thread for\n"
    "        that device, else the thread's default stream (:func:`default_stream`).",
)
def current_stream(device: int | _context.Device | None = None, *, backend: str | None = None) -> Stream:
    ctx = _context.context(backend)
    return current(ctx, _context.device_arg(device, ctx))


def current(ctx: _context._Context, device: int | None = None) -> Stream:
    """The calling thread's current stream of ``ctx`` on ``device`` (its current device): the one
    a ``with stream:`` block made current, else the default stream. It may have been closed since
    (the caller's check of the stream says so)."""
    tls = ctx.tls
    stream = tls.current.get(tls.device if device is None else device)
    return stream if stream is not None else thread_default(ctx, device)


def require_stream_on(stream: Any, backend: str, device: int) -> Stream:
    """``stream`` if it is a Stream of ``backend`` on ``device``; else ValueError naming what it must be."""
    if not isinstance(stream, Stream) or stream.backend != backend or stream.device != device:
        raise ValueError(
            f"stream must be a pyaclnn.Stream of backend {backend!r} on device {device}, got {stream!r}"
        )
    return stream


def thread_default(ctx: _context._Context, device: int | None = None) -> Stream:
    """The calling thread's default stream of ``ctx`` on ``device`` (its current device), created
    on first use (and again after it was closed)."""
    tls = ctx.tls
    if device is None:
        device = tls.device
    stream = tls.streams.get(device)
    if stream is None or not stream._state.open:
        stream = tls.streams[device] = Stream(device, backend=ctx.name)
    return stream


def _destroy_event(ctx: _context._Context, device: int, handle: Any) -> None:
    with ctx.on_device(device):
        _context.quiet(acl.rt.destroy_event, handle, backend=ctx.name)


class Event(_Owned):
    """A point in a stream's work, for waiting and timing (``aclrtCreateEventWithFlag``).

    ``record(stream)`` places it after the work queued on ``stream`` so far;
    ``synchronize()`` waits for that work, ``query()`` asks whether it is done,
    ``wait(stream)`` (or ``Stream.wait_event(event)``) makes a stream wait for
    it, and ``elapsed_time(end)`` gives the device time in milliseconds between
    this event and ``end``. ``close()`` (or the context manager) destroys it;
    CANN allows that while it is still pending. Any thread may call its methods.

    Parameters
    ----------
    enable_timing : bool, optional
        Whether the event records a timestamp for :meth:`elapsed_time`
        (``ACL_EVENT_TIME_LINE``). True by default, as CuPy's events and
        pyaclnn's before this parameter; torch's default is False.
    blocking : bool, optional
        Accepted for torch's signature: CANN has no flag for it (torch_npu
        ignores it too), and :meth:`synchronize` always blocks the calling
        thread until the event completes.
    flags : int, optional
        ``ACL_EVENT_*`` flags for ``aclrtCreateEventWithFlag``, instead of the
        two above. The event can be waited on (``ACL_EVENT_SYNC``) otherwise.
    device : int, optional
        The device whose streams record it (the thread's current one by default).
    backend : {"numpy", "npu"}, optional
        The active backend by default.
    """

    _kind = "event"

    def __init__(
        self,
        enable_timing: bool = True,
        blocking: bool = False,
        *,
        flags: int | None = None,
        device: int | None = None,
        backend: str | None = None,
    ) -> None:
        ctx = _context.context(backend)
        if flags is None:
            flags = _SYNC | (_TIME_LINE if enable_timing else 0)
        self.backend = ctx.name
        self.device = ctx.device if device is None else _context._device_id(device, ctx)
        self.blocking = bool(blocking)
        self._ctx = ctx
        with ctx.on_device(self.device):
            self.handle = acl.rt.create_event_with_flag(flags, backend=ctx.name)
        self.stream: Stream | None = None  # where it was last recorded
        self._capture: Any = None  # the capture in progress its last record went into, if any
        self._finalizer = weakref.finalize(self, _destroy_event, ctx, self.device, self.handle)
        self._finalizer.atexit = False  # the context's exit hook closes events in order
        ctx.track(ctx.events, self)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def record(self, stream: Stream | None = None) -> Event:
        """Record after the work queued on ``stream`` so far (the calling thread's current stream
        of the event's device if None), replacing an earlier record; returns the event."""
        self._check_open()
        if stream is None:
            stream = current(self._ctx, self.device)
        self._check_peer("stream", stream, Stream)
        state = stream._state
        state.enqueue(acl.rt.record_event, self.handle, state.handle)
        self.stream = stream
        self._capture = state.capture  # recorded into a capture (None: not): see _check_not_captured
        return self

    def wait(self, stream: Stream | None = None) -> None:
        """Make work queued on ``stream`` (the calling thread's current stream of the event's
        device if None) from now on wait for this event; the host does not wait."""
        (current(self._ctx, self.device) if stream is None else stream).wait_event(self)

    def synchronize(self) -> None:
        """Wait until the recorded work is done (``aclrtSynchronizeEvent``); at once if never recorded."""
        self._check_open()
        self._check_not_captured("Event.synchronize()")
        with self._ctx.on_device(self.device):
            acl.rt.synchronize_event(self.handle, backend=self.backend)

    def query(self) -> bool:
        """True once the recorded work is done (or if the event was never recorded)."""
        self._check_open()
        self._check_not_captured("Event.query()")
        with self._ctx.on_device(self.device):
            status = acl.rt.query_event_status(self.handle, backend=self.backend)
        return status == _COMPLETE

    def _check_not_captured(self, what: str) -> None:
        """Refuse ``what`` while the event's record is part of a capture in progress (CANN: 107028)."""
        capture = self._capture
        if capture is not None and self.stream is not None and self.stream._state.capture is capture:
            capture.refuse(
                what,
                f"the event was recorded on {capture.stream.name} while it captures a graph, so it "
                "completes only when the graph is replayed",
            )

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds of device time from this event to ``end`` (``aclrtEventElapsedTime``).

        Both must be recorded and complete (synchronize ``end`` first).
        """
        self._check_open()
        self._check_peer("end", end, Event, same_device=False)
        with self._ctx.on_device(self.device):
            return acl.rt.event_elapsed_time(self.handle, end.handle, backend=self.backend)

    def __repr__(self) -> str:
        closed = " closed" if self.closed else ""
        return f"<pyaclnn.Event backend={self.backend!r} device={self.device}{closed}>"
