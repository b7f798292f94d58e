"""Graphs: the work of a block of calls captured once on a stream, replayed as often as wanted.

The runtime API over CANN's stream capture (``aclmdlRI*``, :mod:`pyaclnn.acl.mdl`),
in the shape of ``torch.cuda.CUDAGraph`` and torch_npu's ``NPUGraph``::

    g = pyaclnn.Graph()
    with pyaclnn.graph(g):                       # a fresh stream captures the block
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2)
    x.copy_(new_input)                           # queued: new data in the captured input
    g.replay()                                   # queued on the current stream
    out.numpy()                                  # waits for the replay
    g.close()

What a capture changes on its stream, and why:

* Memory. Outputs, workspaces and arrays made for the capturing stream (or
  for no stream inside ``with pyaclnn.graph(g):``) come from a pool private
  to the graph (:class:`GraphPool`), never from the device's shared pool: the
  replays write them long after the calls returned,
  so no other work may get them while the graph lives, even once the arrays
  are closed. ``aclrtMalloc`` is no stream task, so it may run during a
  capture (the caching allocators of torch and torch_npu allocate into their
  graph pools the same way). ``close()`` hands the memory back once the
  replays have finished: blocks no array holds are freed, those still held
  join the shared pool and go back when their arrays close.
* Executors. Each captured call is planned (phase 1) and its executor made
  repeatable and kept by the graph, which launches it at every replay; they
  are destroyed after the graph (CANN and both emulations hold a captured
  launch's executor until then). The stream's own executor cache is set aside
  meanwhile: its entries may be dropped at any time.
* Ordering. Before a capture begins the device's pyaclnn streams are
  synchronized (as torch does), so a captured call never waits for work of
  another stream. The graph keeps every array its calls used; ``replay(s)``
  orders ``s`` after the work that last used them elsewhere, and is their last
  write, so reads and later calls on other streams wait for the replay. That
  bookkeeping is per graph (:class:`pyaclnn._array.ReplayOrder`), so a replay's
  host cost does not grow with the graph. An event recorded after each replay lets ``close()`` wait for the
  replays queued so far before anything is released.
* Refusals. What a capture cannot record raises :class:`GraphCaptureError`
  naming the call, and the capture is abandoned (ended, its graph destroyed,
  its executors and memory given back, the stream as before): a NumPy array
  given to a call, ``to_device`` or ``copy_`` (a copy from pageable memory),
  ``synchronize()`` or ``query()`` of the capturing stream, and
  ``DeviceArray.numpy()`` (see :mod:`pyaclnn._captures`). Capturing the
  thread's default stream is refused (torch refuses it too): calls naming no
  stream would land in the graph by accident. Closing the capturing stream
  (``close()``, garbage collection, ``finalize``) abandons the capture first:
  its ``capture_end`` then raises.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, NoReturn

from . import _captures, _context, _executors, _timeline, acl
from ._array import DeviceArray, ReplayOrder
from ._captures import GraphCaptureError
from ._pool import Block, MemoryPool, _rounded
from ._stream import Stream, StreamState, current, require_stream_on
from .errors import AclError

#: torch's names of the capture modes (``capture_error_mode``) -> ACL_MODEL_RI_CAPTURE_MODE_*.
MODES = {"global": _captures.GLOBAL, "thread_local": _captures.THREAD_LOCAL, "relaxed": _captures.RELAXED}

__all__ = ["Graph", "GraphCaptureError", "graph"]

# Replays of graphs that share an array, one at a time: each then sees the other's replay, which it
# follows (ReplayOrder.sharing); graphs sharing nothing replay concurrently.
_SHARED_REPLAYS = threading.Lock()


class GraphPool(MemoryPool):
    """Device memory private to one graph: allocated during its capture, kept until it closes.

    A block released during the capture is reused only by later work of the
    capturing stream (the replays keep that order); one released afterwards is
    kept, since the replays still write it. :meth:`hand_over` (the graph has
    closed, its replays are done) frees what no array holds and gives the rest
    to the shared pool ``main``, which then receives their releases.
    """

    def __init__(self, main: MemoryPool, shutdown: Callable[[], None]) -> None:
        super().__init__(main.backend, main._forget_descriptor, main.device, main._on_device)
        self.main = main
        self._empty_block = main.empty_block  # empty arrays own nothing: one cache of their descriptors
        self._counts = main  # its blocks count in the device's memory statistics
        self.open = True
        self._shutdown = shutdown  # the graph's release of its own handles, at finalize
        self._reusable: dict[int, list[Block]] = {}  # size -> blocks released on the capturing stream
        self._last_use: dict[int, Any] = {}  # ptr -> stream (state) a released block was last used on
        self.capturing: Any = None  # the StreamState capturing into this pool, while it does
        main._children.add(self)

    def acquire(self, nbytes: int, stream: Any = None) -> Block:
        if not self.open:
            return self.main.acquire(nbytes, stream)
        size = _rounded(nbytes)
        with self._lock:
            blocks = self._reusable.get(size)
            if blocks and stream is self.capturing:
                block = blocks.pop()
                block.in_use = True
                self._count(size)
                self._last_use.pop(block.ptr, None)
                return block
        with self._on_device(self.device):
            ptr = acl.rt.malloc(size, backend=self.backend)
        block = Block(ptr, size)
        with self._lock:
            self._blocks[ptr] = block
            self._count(size, size)
        return block

    def acquire_each(self, sizes: Sequence[int], stream: Any = None) -> list[Block]:
        # Block by block through acquire above (the shared pool's fast path counts on itself).
        return self._each(sizes, stream)

    def release(self, block: Block, stream: Any = None) -> None:
        if not self.open:
            self.main.release(block, stream)
            return
        with self._lock:
            if not block.in_use or not block.ptr:
                return
            block.in_use = False
            self._count(-block.nbytes)
            self._last_use[block.ptr] = stream
            if stream is not None and stream is self.capturing:
                self._reusable.setdefault(block.nbytes, []).append(block)

    def hand_over(self) -> None:
        """The graph is destroyed and its replays are done: free what no array holds (unless
        work queued since on another stream may still use it: that goes to ``main`` released on
        that stream), and make ``main`` the owner of the blocks arrays still hold."""
        with self._lock:
            self.open = False
            blocks = list(self._blocks.values())
            last_use = dict(self._last_use)
            self._blocks.clear()
            self._reusable.clear()
            self._last_use.clear()
        self.main._children.discard(self)
        freed = []
        for block in blocks:
            stream = last_use.get(block.ptr)
            if not block.in_use and (stream is None or not stream.open or stream.queued == stream.done):
                freed.append(block)
                continue
            with self.main._lock:
                self.main._blocks[block.ptr] = block
            if not block.in_use:
                block.in_use = True
                self._count(block.nbytes)  # held again for the moment: main's release counts it free
                self.main.release(block, stream)
        for block in freed:
            self._free(block)

    def free_blocks(self) -> None:
        """Free every block now (an abandoned capture, or finalize: nothing queued uses them);
        arrays still holding one see it closed."""
        with self._lock:
            self.open = False
            blocks = list(self._blocks.values())
            for block in blocks:
                if block.in_use:
                    self._count(-block.nbytes)
                block.in_use = False
            self._blocks.clear()
            self._reusable.clear()
            self._last_use.clear()
        self.main._children.discard(self)
        for block in blocks:
            self._free(block)

    def release_all(self) -> None:
        """finalize: the graph's handles go first (its executors use descriptors), then the memory."""
        self._shutdown()
        self.free_blocks()


class _GraphExecutors:
    """Stands in for a capturing stream's executor cache: every call is planned (phase 1) and
    its executor, made repeatable, is kept for the graph, which launches it at each replay.

    Launches run under the stream's lock, as the cache's do; the stream's synchronize and close
    are refused during a capture, so ``idle``, ``clear`` and ``close`` have nothing to do.
    """

    def __init__(self, state: StreamState) -> None:
        self.state = state
        self.backend = state.backend
        self.held: list[Any] = []

    def __len__(self) -> int:
        return 0

    def launch_cached(self, op: Any, args: tuple[Any, ...], admit: Any) -> bool:
        """Nothing is cached for a graph: every call is planned, through :meth:`launch`."""
        return False

    def launch(self, call: _executors.Call) -> None:
        state = self.state
        with state.lock:
            if not state.open:
                raise ValueError("stream is closed")
            op = call.op
            size, executor = op.phase1(*call.args, backend=self.backend)
            if executor is None:  # nothing to compute: the outputs are zeros, at every replay
                call.zero_outputs(state)
                return
            try:
                acl.set_acl_op_executor_repeatable(executor, backend=self.backend)
                repeatable = True
            except AclError:
                repeatable = False  # consumed by its launch, as out of a capture
            try:
                if call.admit is not None:
                    call.admit()
                buffer = state.workspace(size)
            except BaseException:
                if repeatable:
                    _context.quiet(acl.destroy_acl_op_executor, executor, backend=self.backend)
                else:
                    _executors._consume(executor, self.backend)
                raise
            if repeatable:
                self.held.append(executor)  # destroyed after the graph, launched or not
            state.enqueue_held(op.phase2, buffer, size, executor, state.handle)

    def idle(self, launches: int) -> None:
        return None

    def clear(self) -> None:
        return None

    def close(self) -> None:
        return None


class _Capture:
    """One capture in progress: its graph, stream, mode and thread, and what it stands in for."""

    def __init__(self, graph: _GraphState, stream: StreamState, mode: int) -> None:
        self.graph = graph
        self.stream = stream
        self.mode = mode
        self.backend = stream.backend
        self.device = stream.device
        self.thread = threading.get_ident()
        self.saved = (stream.pool, stream.executors, stream._workspace)
        self.counts = (stream.queued, stream.done)
        self.pool = GraphPool(stream.pool, graph.shutdown)
        self.pool.capturing = stream
        self.executors = _GraphExecutors(stream)
        self.arrays: dict[int, DeviceArray] = {}

    def hold(self, arrays: Iterable[DeviceArray | None]) -> None:
        """The captured work uses ``arrays``: the graph keeps them (and orders its replays by them)."""
        for array in arrays:
            if array is not None:
                self.arrays[id(array)] = array

    def refuse(self, what: str, why: str) -> NoReturn:
        """Abandon the capture, then raise GraphCaptureError for ``what``; from another thread than
        the capturing one, only raise (CANN refuses the call and the capture goes on)."""
        if threading.get_ident() != self.thread:
            _captures.fail(what, why, f"{self.stream.name} captures in another thread; that capture goes on")
        self.graph.abandon()
        _captures.fail(
            what,
            why,
            f"The capture on {self.stream.name} was abandoned (its graph, executors and memory "
            "given back); the Graph can capture again",
        )


class _GraphState:
    """Everything behind one Graph, shared with its finalizer and its pool (never the Graph itself)."""

    def __init__(self, ctx: _context._Context, device: int) -> None:
        self.ctx = ctx
        self.backend = ctx.name
        self.device = device
        self.lock = threading.RLock()
        self.handle: Any = None  # the aclmdlRI, once captured
        self.capture: _Capture | None = None
        self.pool: GraphPool | None = None
        self.executors: list[Any] = []
        self.arrays: dict[int, DeviceArray] = {}
        self.order: ReplayOrder | None = None  # what the replays did to the arrays, once captured
        self.fences: dict[StreamState, Any] = {}  # replay stream -> event recorded after its last replay
        self.open = True

    # -- capture ------------------------------------------------------------------
    def begin(self, stream: Stream, mode: int) -> None:
        state = stream._state
        with self.lock:
            if not self.open:
                raise ValueError("capture_begin(): the graph is closed")
            if self.capture is not None or self.handle is not None:
                raise ValueError(
                    "capture_begin(): the graph has captured already (reset() it to capture again)"
                )
            if state.capture is not None:
                raise GraphCaptureError(f"capture_begin(): {stream!r} is capturing another graph")
            # Pending work first: a captured call then never waits for another stream's work.
            for other in self.ctx.open_streams():
                if other.device == self.device and other._state.capture is None:
                    other._state.synchronize()
            with state.lock:
                if not state.open:
                    raise ValueError("capture_begin(): stream is closed")
                shared = state.pool
                shared.stream_capturing(state, True)  # before the capture: no fence may land in it
                with self.ctx.on_device(self.device):
                    try:
                        acl.mdl.capture_begin(state.handle, mode, backend=self.backend)
                    except BaseException as exc:
                        shared.stream_capturing(state, False)
                        if isinstance(exc, AclError):
                            raise GraphCaptureError(
                                f"capture_begin(): {stream!r} cannot be captured: {exc}"
                            ) from None
                        raise
                capture = _Capture(self, state, mode)
                state.pool, state.executors, state._workspace = capture.pool, capture.executors, None  # type: ignore[assignment]
                state.capture = self.capture = capture
            _captures.register(capture)

    def _stop(self, capture: _Capture) -> Any:
        """End ``capture`` and give its stream back what it stood in for; the aclmdlRI, or AclError."""
        state = capture.stream
        _captures.unregister(capture)
        with state.lock:
            state.capture = self.capture = None
            workspace = state._workspace
            state.pool, state.executors, state._workspace = capture.saved
            capture.pool.capturing = None
            if workspace is not None:
                capture.pool.release(workspace, state)  # the graph's: its replays use it
            queued, done = capture.counts
            if queued == done:  # the captured work is the graph's: none of it runs on the stream
                state.done = state.queued
            try:
                with self.ctx.on_device(self.device):
                    return acl.mdl.capture_end(state.handle, backend=self.backend)
            finally:
                state.pool.stream_capturing(state, False)  # ended, or invalidated: not capturing

    def end(self) -> None:
        with self.lock:
            capture = self.capture
            if capture is None:
                raise ValueError(
                    "capture_end(): the graph is not capturing (a refused call abandoned its capture, "
                    "or close() did)"
                )
            try:
                handle = self._stop(capture)
            except AclError as exc:
                self._discard(capture, None)
                raise GraphCaptureError(
                    f"capture_end(): the capture on {capture.stream.name} failed and was abandoned: {exc}"
                ) from None
            self.handle = handle
            self.pool = capture.pool
            self.executors = capture.executors.held
            self.arrays = capture.arrays
            self.order = ReplayOrder(capture.pool)
            self.order.link(self.arrays.values())

    def abandon(self) -> None:
        """End the capture in progress, if any, and give back everything it made."""
        with self.lock:
            capture = self.capture
            if capture is None:
                return
            try:
                handle = self._stop(capture)
            except AclError:
                handle = None  # invalidated: CANN destroyed the graph
            self._discard(capture, handle)

    def _discard(self, capture: _Capture, handle: Any) -> None:
        """Release what an abandoned capture made (never replayed): its graph, executors, memory."""
        with self.ctx.on_device(self.device):
            if handle is not None:
                _context.quiet(acl.mdl.destroy, handle, backend=self.backend)
            for executor in capture.executors.held:
                _context.quiet(acl.destroy_acl_op_executor, executor, backend=self.backend)
        capture.arrays.clear()
        capture.pool.free_blocks()

    # -- replay ---------------------------------------------------------------------
    def replay(self, stream: Stream) -> None:
        state = stream._state
        with self.lock:
            if not self.open:
                raise ValueError("replay(): the graph is closed")
            if self.handle is None:
                doing = "is capturing" if self.capture is not None else "has captured nothing"
                raise ValueError(f"replay(): the graph {doing}; end a capture first")
            if state.capture is not None:
                state.capture.refuse("Graph.replay()", "CANN cannot run a graph on a capturing stream")
            order = self.order
            assert order is not None
            closed = order.closed_input
            if closed is not None:
                # Not the graph's memory: the pool or its owner may have given it to others.
                raise ValueError(
                    f"replay(): {closed!r}, which the captured calls use, was closed: its memory "
                    "may hold other data now; keep the graph's inputs open while it lives"
                )
            if order.sharing:  # graphs sharing arrays replay one at a time: each follows the other
                with _SHARED_REPLAYS:
                    self._queue(order, stream)
            else:
                self._queue(order, stream)

    def _queue(self, order: ReplayOrder, stream: Stream) -> None:
        """Queue a replay on ``stream`` after the last uses of the graph's arrays, and record it as
        the last write of all of them: a host cost per stream that used them, none per array."""
        state = stream._state
        order.follow(state)
        with state.lock:
            if not state.open:
                raise ValueError("replay(): stream is closed")
            with self.ctx.on_device(self.device):
                state.enqueue_held(acl.mdl.execute_async, self.handle, state.handle)
                order.replayed(stream)  # queued: later uses of the arrays follow it
                event = self.fences.get(state)
                if event is None:
                    event = self.fences[state] = acl.rt.create_event(backend=self.backend)
                state.enqueue_held(acl.rt.record_event, event, state.handle)

    # -- the end --------------------------------------------------------------------
    def close(self) -> None:
        """Wait for the replays queued so far, destroy the graph and its executors, hand the memory back.

        A wait that raises (a device error) leaves everything as it was; the next close goes on.
        """
        with self.lock:
            if not self.open:
                return
            self.abandon()
            with self.ctx.on_device(self.device):
                for event in self.fences.values():
                    acl.rt.synchronize_event(event, backend=self.backend)
            self._destroy_handles()
            self._unlink()
            if self.pool is not None:
                self.pool.hand_over()
                self.pool = None

    def shutdown(self) -> None:
        """finalize: the device has finished everything; destroy the handles (the pool frees the memory)."""
        with self.lock:
            if self.open:
                self.abandon()
                self._destroy_handles()
                self._unlink()
                self.pool = None

    def _unlink(self) -> None:
        """The replays are done (or the device is): the arrays count them no longer."""
        if self.order is not None:
            self.order.unlink(self.arrays.values())
            self.order = None
        self.arrays.clear()

    def _destroy_handles(self) -> None:
        with self.ctx.on_device(self.device):
            for event in self.fences.values():
                _context.quiet(acl.rt.destroy_event, event, backend=self.backend)
            self.fences.clear()
            if self.handle is not None:
                _context.quiet(acl.mdl.destroy, self.handle, backend=self.backend)
                self.handle = None
            for executor in self.executors:  # after the graph that launches them
                _context.quiet(acl.destroy_acl_op_executor, executor, backend=self.backend)
            self.executors = []
        self.open = False


class Graph:
    """Work captured once on a stream and replayed as often as wanted (``aclmdlRI``), as
    ``torch.cuda.CUDAGraph`` / ``torch_npu.npu.NPUGraph``.

    Capture with :func:`graph` (``with pyaclnn.graph(g): ...``) or
    :meth:`capture_begin` / :meth:`capture_end`; replay with :meth:`replay`.
    The calls captured must take DeviceArrays (NumPy arrays need a copy from
    pageable memory, which no capture can record): their outputs, workspaces
    and the arrays made for the capturing stream come from memory private to
    the graph and live until :meth:`close`; each replay writes the same output
    arrays again. Write new inputs into the captured input arrays with
    :meth:`DeviceArray.copy_` (queued) before a replay. Keep the input arrays
    open while the graph lives: the replays read their memory.

    What cannot be captured (a NumPy array given to a call, ``synchronize()``,
    ``DeviceArray.numpy()``, ...) raises :class:`GraphCaptureError` naming the
    call, and the capture is abandoned: nothing it made is left, and the graph
    can capture again.

    ``close()`` (or the context manager, or garbage collection) waits for the
    replays queued so far, destroys the graph and the executors it launches and
    gives its memory back: freed where no array holds it, else to the device's
    pool when those arrays close.

    Parameters
    ----------
    backend : {"numpy", "npu"}, optional
        The active backend by default.
    device : int, optional
        The device the graph's streams and memory belong to (the thread's current one by default).
    """

    def __init__(self, *, backend: str | None = None, device: int | None = None) -> None:
        ctx = _context.context(backend)
        self.backend = ctx.name
        self.device = ctx.device if device is None else _context._device_id(device, ctx)
        self._ctx = ctx
        state = self._state = _GraphState(ctx, self.device)
        self._finalizer = weakref.finalize(self, state.close)
        self._finalizer.atexit = False  # finalize() releases the graph through its pool

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or finalize released the graph)."""
        return not self._state.open

    @property
    def captured(self) -> bool:
        """True once a capture ended: the graph can be replayed."""
        return self._state.handle is not None

    def capture_begin(self, stream: Stream | None = None, capture_error_mode: str = "global") -> None:
        """Begin capturing the work queued on ``stream`` (``aclmdlRICaptureBegin``).

        Waits for the work queued on the device's pyaclnn streams first. Until
        :meth:`capture_end`, work queued on ``stream`` is recorded, not run.

        Parameters
        ----------
        stream : Stream, optional
            The calling thread's current stream by default; never its default stream.
        capture_error_mode : {"global", "thread_local", "relaxed"}
            torch's names of CANN's capture modes: which threads may still make
            synchronous calls (a wait, a copy to or from NumPy) while the capture runs:
            none ("global"), those other than the capturing thread ("thread_local"),
            all ("relaxed").

        Raises
        ------
        GraphCaptureError
            For the thread's default stream, a stream capturing already, or a stream
            CANN refuses to capture.
        ValueError
            For a closed graph or stream, a graph that captured already, a stream of
            another backend or device, or an unknown ``capture_error_mode``.
        """
        mode = MODES.get(capture_error_mode) if isinstance(capture_error_mode, str) else None
        if mode is None:
            raise ValueError(f"capture_error_mode must be one of {sorted(MODES)}, got {capture_error_mode!r}")
        if stream is None:
            stream = current(self._ctx, self.device)
        require_stream_on(stream, self.backend, self.device)
        if stream.closed:
            raise ValueError("stream is closed")
        if self._ctx.tls.streams.get(self.device) is stream:
            raise GraphCaptureError(
                f"capture_begin(): {stream!r} is the calling thread's default stream, which cannot be "
                "captured (calls that name no stream go there); capture on a Stream of your own "
                "(pyaclnn.graph makes one when given none)"
            )
        self._state.begin(stream, mode)

    def capture_end(self) -> None:
        """End the capture (``aclmdlRICaptureEnd``): the graph can now be replayed.

        Raises
        ------
        GraphCaptureError
            If CANN invalidated the capture (the capture is abandoned).
        ValueError
            If the graph is not capturing.
        """
        self._state.end()

    def replay(self, stream: Stream | None = None) -> None:
        """Queue the captured work on ``stream`` (``aclmdlRIExecuteAsync``); the host does not wait.

        The replay runs after the work that last used the graph's arrays on other
        streams, and later uses of those arrays (``numpy()``, calls on other
        streams, ``copy_``) wait for it.

        Parameters
        ----------
        stream : Stream, optional
            The calling thread's current stream of the graph's device by default.

        Raises
        ------
        ValueError
            For a closed graph or stream, a graph that has captured nothing, or a
            stream of another backend or device.
        """
        if stream is None:
            stream = current(self._ctx, self.device)
        require_stream_on(stream, self.backend, self.device)
        if _timeline.recording:  # the one check when nothing is profiled (pyaclnn.profile)
            graph = self._state.handle
            label = _timeline.handle_label(self.backend, graph) if graph is not None else None
            _timeline.timed("Graph.replay", stream._state, self._state.replay, stream, graph=label)
        else:
            self._state.replay(stream)

    def close(self) -> None:
        """Wait for the replays queued so far, then destroy the graph and give its memory back.

        A capture in progress is abandoned. A second call does nothing. If the wait
        raises (a device error), nothing was released, and calling again finishes.
        """
        self._state.close()
        self._finalizer.detach()

    def reset(self) -> None:
        """Give back what the graph holds, as :meth:`close` does, and keep it open for a new
        capture (torch's ``CUDAGraph.reset``).

        Raises
        ------
        ValueError
            If the graph is closed.
        """
        state = self._state
        with state.lock:
            if not state.open:
                raise ValueError("reset(): the graph is closed")
            state.close()
            state.open = True

    def __enter__(self) -> Graph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = self._state
        status = (
            "closed"
            if not state.open
            else "capturing"
            if state.capture is not None
            else "captured"
            if state.handle is not None
            else "empty"
        )
        return f"<pyaclnn.Graph backend={self.backend!r} device={self.device} {status}>"


class _GraphCapture(AbstractContextManager[Graph]):
    """The context manager of :func:`graph`."""

    def __init__(self, g: Graph, stream: Stream | None, capture_error_mode: str) -> None:
        if not isinstance(g, Graph):
            raise TypeError(f"graph must be a pyaclnn.Graph, got {type(g).__name__}")
        self.graph = g
        self.stream = stream
        self.mode = capture_error_mode
        self.own: Stream | None = None

    def __enter__(self) -> Graph:
        g = self.graph
        stream = self.stream
        if stream is None:
            stream = self.own = Stream(g.device, backend=g.backend)
        try:
            g.capture_begin(stream, self.mode)
            stream.__enter__()  # calls that name no stream go to the capture
        except BaseException:
            g._state.abandon()
            if self.own is not None:
                self.own.close()
            raise
        self.stream = stream
        return g

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        assert self.stream is not None
        try:
            self.stream.__exit__()
            if exc_type is None:
                self.graph.capture_end()
            else:
                self.graph._state.abandon()  # the block failed: nothing of it is kept
        finally:
            if self.own is not None:
                self.own.close()


def graph(
    g: Graph, stream: Stream | None = None, *, capture_error_mode: str = "global"
) -> AbstractContextManager[Graph]:
    """``with pyaclnn.graph(g):`` captures the calls of the block into ``g`` (torch's ``torch.cuda.graph``).

    The calls run on ``stream`` (made the thread's current stream in the block):
    by default a fresh stream, closed when the block ends. If the block raises,
    the capture is abandoned and the error goes on.

    Parameters
    ----------
    g : Graph
        A graph that has not captured yet.
    stream : Stream, optional
        The stream to capture; never the thread's default stream.
    capture_error_mode : {"global", "thread_local", "relaxed"}
        See :meth:`Graph.capture_begin`.
    """
    return _GraphCapture(g, stream, capture_error_mode)
