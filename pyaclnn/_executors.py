"""Repeatable executors of recent calls on one stream, so a repeated call skips phase 1.

This module owns the whole protocol: the key of a call, the launch of its two
phases (:meth:`ExecutorCache.launch`), and every way an entry leaves. A cache
works with objects, never with callbacks into the layers above: the state of
its stream (:class:`pyaclnn._stream.StreamState`: the handle, the lock, the
workspace, the counts of work and the enqueue that counts) and, per launch,
a :class:`Call` value (the operator's record, the arguments of phase 1, the
outputs to zero-fill).

A call with the same descriptors, parameter arrays and scalars as an earlier
call on the same stream would get the same plan from phase 1. So after phase
1 the executor is made repeatable (``aclSetAclOpExecutorRepeatable``) and kept
here, keyed by everything phase 1 was given; the next such call runs phase 2
on it directly, bound once to the executor, the stream and the workspace
buffer (:func:`pyaclnn.aclnn.bound_phase2`; bound again when the stream's
buffer is replaced). The key holds descriptor handles, and a handle always
describes the same memory, shape and dtype while it lives (the pool owns it
and caches it per block), so a hit is exactly the call phase 1 planned.

Rules that keep that true:

* Every entry is dropped *before* a descriptor in its key is destroyed
  (:func:`forget`, called by the memory pool of the backend), so a new
  descriptor at a recycled address never matches an old plan.
* Only handles that outlive the entry go into a key: descriptors from the pool,
  parameter arrays from the context's cache; a call with per-call arrays is
  not cached (``cacheable=False``).
* One cache per stream, used by launches under the stream's lock: an executor
  never runs on two streams or threads at once, which CANN does not promise to
  support. The stream's count of work (``state.queued``) changes only once the
  runtime took the work: in the state's ``enqueue_held``, and after a cached
  plan's bound launch returned (its executor still marked in flight).
  :func:`forget` takes only the cache's own lock, so it never waits for a
  stream (no lock-order cycle with threads whose garbage collection frees
  blocks inside a launch).
* A dropped executor may still have launches queued on the stream: it is
  destroyed at once only if the stream has run everything launched so far;
  otherwise after an event recorded behind those launches has completed
  (polled at the next drop) or the stream is synchronized (:meth:`idle`).
  While the stream captures (its cache set aside by ``pyaclnn._graph``) no
  event is recorded: it would be a step of the graph, recorded at every replay.
* ``set_deterministic`` empties every cache (the plan may depend on it); a
  device error on the stream empties its cache (the failed plan is in it).

``PYACLNN_EXECUTOR_CACHE=0`` turns caching off (every call runs phase 1).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _env, acl, aclnn
from ._decl import constant
from .errors import AclError

if TYPE_CHECKING:
    from ._stream import StreamState

_LIMIT = 32  # entries per stream; the oldest goes first
_COMPLETE = constant("ACL_EVENT_RECORDED_STATUS_COMPLETE")

_caches: dict[str, weakref.WeakSet[ExecutorCache]] = {}  # backend -> every live cache
_caches_lock = threading.Lock()


def enabled_by_environment() -> bool:
    """False when ``PYACLNN_EXECUTOR_CACHE`` is 0, off, false or no."""
    return _env.flag("PYACLNN_EXECUTOR_CACHE", True)


def forget(backend: str, descriptor: Any) -> None:
    """Drop the entries of every cache of ``backend`` whose key holds ``descriptor`` (about to go)."""
    for cache in _live(backend):
        cache.forget(descriptor)


def clear_all(backend: str) -> None:
    """Empty every cache of ``backend`` (``set_deterministic`` changed what phase 1 would plan)."""
    for cache in _live(backend):
        cache.clear()


def _live(backend: str) -> list[ExecutorCache]:
    with _caches_lock:
        return list(_caches.get(backend, ()))


@dataclass(slots=True, eq=False)
class Call:
    """One operator call as the cache launches it: a value, made by the caller and read here.

    ``op`` is the operator's record (its ``phase1`` and ``phase2`` functions of
    the low-level API), ``args`` what phase 1 takes, ``cacheable`` whether
    every handle in ``args`` outlives a cache entry (false with per-call
    parameter arrays), ``outputs`` the arrays zero-filled on the stream when
    phase 1 finds nothing to compute (empty tensors: any object with ``ptr`` and
    ``nbytes``), and ``admit``, if not None, the caller's check of what the host
    holds: it runs once phase 1 has accepted the call (or its plan is cached)
    and may raise to stop it before anything is queued. The cache sets ``computed`` to
    False when phase 1 found nothing to compute.
    """

    op: Any
    args: tuple[Any, ...]
    cacheable: bool
    outputs: Sequence[Any]
    admit: Callable[[], None] | None = None
    computed: bool = field(default=True, init=False)

    def zero_outputs(self, state: Any) -> None:
        """Phase 1 found nothing to compute: queue zero fills of the outputs on ``state`` (the
        caller holds its lock), and say so in ``computed``."""
        self.computed = False
        _zero_fill(state, self.outputs)


def _zero_fill(state: Any, outputs: Sequence[Any]) -> None:
    """Queue zero fills of ``outputs`` on ``state`` (the caller holds its lock)."""
    for output in outputs:
        nbytes = output.storage_nbytes
        if nbytes:
            state.enqueue_held(acl.rt.memset_async, output.ptr, nbytes, 0, nbytes, state.handle)


class _Plan:
    """A cached plan: its repeatable executor and workspace size, and phase 2 bound to them, to
    the stream and to the workspace buffer it was bound with (``launch()`` launches it; a launch
    from the cache binds it again when the stream's buffer is another one)."""

    __slots__ = ("executor", "size", "launch", "workspace")

    def __init__(self, executor: Any, size: int) -> None:
        self.executor = executor
        self.size = size
        self.launch: Callable[[], None]  # set by ExecutorCache._bind, at the first launch from the cache
        self.workspace: Any = _UNBOUND  # the stream's Block (or None) ``launch`` was bound with


_UNBOUND = object()  # never a stream's workspace buffer: a new plan is bound at its first hit


class ExecutorCache:
    """Repeatable executors of one stream: key -> plan (:class:`_Plan`).

    Launches take the stream's lock (``state.lock``); the cache's own
    (re-entrant) lock guards only its dict and the executors waiting to be
    destroyed, so the pool can drop entries without taking stream locks.
    Executors are destroyed outside that lock.
    """

    __slots__ = (
        "backend",
        "state",
        "enabled",
        "generation",
        "_inflight",
        "_entries",
        "checked",
        "_lock",
        "_unrepeatable",
        "_waiting",
        "__weakref__",
    )

    def __init__(self, state: StreamState, enabled: bool) -> None:
        self.backend = state.backend
        # The stream's state: its handle, lock, workspace, counts of work and the enqueue that counts.
        self.state = state
        self.enabled = enabled
        self.generation = 0  # bumped by forget() and clear(): a plan made before may hold a dead handle
        self._entries: dict[tuple[Any, ...], _Plan] = {}
        # What the Python checks of a crafted call concluded (pyaclnn._launch.Checked), keyed by the
        # operator, its parameters and its inputs: dropped with the plans (forget: each entry that
        # holds the one forgotten; clear), so a descriptor recycled at the same address never
        # finds an old entry.
        # Read without a lock (one dict look-up); changed under ``_lock``.
        self.checked: dict[tuple[Any, ...], Any] = {}
        self._inflight: Any = None  # the cached executor a launch is queuing right now
        self._lock = threading.RLock()  # re-entrant: a collection inside may free descriptors
        self._unrepeatable: set[Any] = set()  # ops whose executors the runtime refused to make repeatable
        # Dropped executors whose launches may still be queued: (launches then, event or None, executors).
        self._waiting: list[tuple[int, Any, list[Any]]] = []
        with _caches_lock:
            _caches.setdefault(self.backend, weakref.WeakSet()).add(self)

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, key: tuple[Any, ...], checked: Any, generation: int) -> None:
        """Keep ``checked`` for ``key`` (see ``checked``), unless a descriptor was forgotten since
        ``generation`` (read before the call that checked it: ``key`` may hold that descriptor)."""
        with self._lock:
            if generation == self.generation:
                checked_ = self.checked
                if len(checked_) >= _LIMIT:
                    del checked_[next(iter(checked_))]  # the oldest goes first
                checked_[key] = checked

    # -- one call -----------------------------------------------------------------
    def launch(self, call: Call) -> None:
        """Enqueue ``call`` on the stream: phase 2 of a cached plan, or phases 1 and 2.

        Under the stream's lock; the caller has bound the stream's device. Nothing
        here waits for the stream. ValueError if the stream is closed.
        """
        if call.cacheable and self.launch_cached(call.op, call.args, call.admit):
            return
        state = self.state
        with state.lock:
            if not state.open:
                raise ValueError("stream is closed")
            # (a plan another thread made since the look-up above is made again: phase 1 is exact)
            self._plan_and_launch(call, (call.op.phase2, call.args) if call.cacheable else None)

    # The usual crafted call: explicit lock calls in try/finally (a ``with`` costs about as
    # much again), and no Call made until a miss needs one.
    def launch_cached(self, op: Any, args: tuple[Any, ...], admit: Callable[[], None] | None) -> bool:
        """Enqueue phase 2 of the plan cached for ``op`` on ``args``, if any: whether it did (False:
        nothing was done, the caller launches a :class:`Call`). ``admit`` runs first, as in
        :meth:`launch`. ValueError if the stream is closed."""
        state = self.state
        lock = state.lock
        lock.acquire()
        try:
            if not state.open:
                raise ValueError("stream is closed")
            key = (op.phase2, args)
            generation = self.generation
            plan = self._entries.get(key)
            if plan is None:
                return False
            if admit is not None:
                admit()
            # Another thread may drop the entry at any time (forget(), a descriptor freed):
            # marked in flight, the executor outlives this launch; dropped before the mark, it
            # is not launched (planned afresh by the caller). Only forget() drops entries without
            # the stream's lock, and it bumps the generation before it drops: an unchanged
            # generation spares the second look-up.
            self._inflight = plan.executor
            if self.generation != generation and self._entries.get(key) is not plan:
                self._inflight = None
                return False
            try:
                # Bound to the buffer the stream has: state.workspace(plan.size) would
                # give the same pointer again (a buffer is replaced, never resized).
                if plan.workspace is not state._workspace:
                    self._bind(plan, op.phase2_api)
                plan.launch()
                # The one enqueue not through state.enqueue_held (one Python call less per
                # cached call): counted the same way, once the runtime took it, and
                # before the executor stops being in flight.
                state.queued += 1
            except BaseException:
                self._inflight = None
                self.discard(key)  # the executor may be what failed: plan again next time
                raise
            self._inflight = None
            return True
        finally:
            lock.release()

    def launch_once(self, op: Any, args: tuple[Any, ...], outputs: Sequence[Any]) -> bool | None:
        """Enqueue both phases of ``op`` (an operator with ``once``) on ``args``, its executor
        consumed by phase 2 (never kept):
        :meth:`launch` of an uncacheable :class:`Call` without admit, with no Call made (the eager
        generic call). Whether phase 1 found something to compute (False: ``outputs`` are
        zero-filled instead); None, with nothing done, while the stream captures (its executors
        are the graph's: the caller takes the general path).
        """
        state = self.state
        with state.lock:
            if not state.open:
                raise ValueError("stream is closed")
            if state.capture is not None:
                return None
            block = state._workspace  # phase 2 runs in the same call when the buffer suffices
            size, executor, launched = op.once(
                args, 0 if block is None else block.ptr, 0 if block is None else block.nbytes, state.handle
            )
            if launched:
                # Counted as enqueue_held counts, once the runtime took it (one Python call less).
                state.queued += 1
                return True
            return self.after_phase1(op, size, executor, outputs)

    def after_phase1(self, op: Any, size: int, executor: Any, outputs: Sequence[Any]) -> bool:
        """What follows a phase 1 of ``op`` whose phase 2 was not run at once (the caller holds
        the stream's lock): nothing to compute (``executor`` None: ``outputs`` are zero-filled,
        False), or phase 2 queued with a workspace of ``size`` bytes, the stream's buffer grown
        (True). :meth:`launch_once`'s end, and the compiled call's (``pyaclnn._repeat``)."""
        state = self.state
        if executor is None:  # nothing to compute: the outputs are zeros
            _zero_fill(state, outputs)
            return False
        try:
            buffer = state.workspace(size)
        except BaseException:
            _consume(executor, self.backend)  # phase 2 never ran: it is ours to free
            raise
        state.enqueue_held(op.phase2, buffer, size, executor, state.handle)
        return True

    def _bind(self, plan: _Plan, api: str) -> None:
        """Bind ``plan``'s phase 2 (C name ``api``) to the stream and its workspace buffer (acquired
        or grown here)."""
        state = self.state
        buffer = state.workspace(plan.size)
        plan.launch = aclnn.bound_phase2(
            api, buffer, plan.size, plan.executor, state.handle, backend=self.backend
        )
        plan.workspace = state._workspace

    def _plan_and_launch(self, call: Call, key: tuple[Any, ...] | None) -> None:
        """Phase 1, then phase 2 on its executor (kept under ``key``, if any and the cache is
        enabled, when repeatable)."""
        state = self.state
        phase2 = call.op.phase2
        if not self.enabled:
            key = None
        generation = self.generation
        size, executor = call.op.phase1(*call.args, backend=self.backend)
        if executor is None:  # nothing to compute: the outputs are zeros
            call.zero_outputs(state)
            return
        cached = key is not None and self._make_repeatable(executor, phase2)
        try:
            if call.admit is not None:
                call.admit()
            buffer = state.workspace(size)
        except BaseException:
            self._abandon(executor, cached, consumed=False)
            raise
        try:
            state.enqueue_held(phase2, buffer, size, executor, state.handle)
        except BaseException:
            self._abandon(executor, cached, consumed=True)
            raise
        if cached and key is not None:  # (cached implies key)
            self._put(key, _Plan(executor, size), generation)

    def _abandon(self, executor: Any, repeatable: bool, consumed: bool) -> None:
        """Free a fresh executor whose launch failed: nothing queued it."""
        if repeatable:
            self._destroy([executor])  # repeatable: a failed phase 2 did not free it
        elif not consumed:
            _consume(executor, self.backend)  # phase 2 never ran: it is ours to free

    # -- entries ----------------------------------------------------------------
    def _put(self, key: tuple[Any, ...], entry: _Plan, generation: int) -> None:
        """Keep a new ``entry`` for ``key``, unless a descriptor was forgotten since ``generation``
        (read before its phase 1: the plan may hold it)."""
        dropped = []
        with self._lock:
            entries = self._entries
            if generation != self.generation or not self.enabled:
                dropped.append(entry)
            else:
                old = entries.pop(key, None)
                if old is not None:
                    dropped.append(old)
                if len(entries) >= _LIMIT:
                    dropped.append(entries.pop(next(iter(entries))))
                entries[key] = entry
        self._drop(dropped)

    def discard(self, key: tuple[Any, ...]) -> None:
        """Drop the entry of ``key`` (after a failed launch)."""
        with self._lock:
            entry = self._entries.pop(key, None)
        self._drop([entry] if entry is not None else [])

    def _make_repeatable(self, executor: Any, op: Any) -> bool:
        """Make a fresh executor of ``op`` repeatable; False when the runtime cannot.

        After one refusal ``op`` is not tried again on this stream (an old CANN without
        the function, or an operator without a repeat mode); its executors stay
        non-repeatable and are consumed by their launch as usual.
        """
        if op in self._unrepeatable:
            return False
        try:
            acl.set_acl_op_executor_repeatable(executor, backend=self.backend)
        except AclError:
            self._unrepeatable.add(op)
            return False
        return True

    def forget(self, descriptor: Any) -> None:
        """Drop every entry whose key holds ``descriptor`` (which is about to be destroyed)."""
        with self._lock:
            self.generation += 1
            entries = self._entries
            stale = [key for key in entries if any(d is descriptor for d in key[1])]
            dropped = [entries.pop(key) for key in stale]
            checked = self.checked
            if checked:
                for key in [k for k, c in checked.items() if c.holds(descriptor)]:
                    del checked[key]
        self._drop(dropped)

    def clear(self) -> None:
        """Drop every entry (under the stream's lock: a hit being launched keeps its executor)."""
        with self.state.lock, self._lock:
            self.generation += 1
            dropped = list(self._entries.values())
            self._entries.clear()
            self.checked.clear()
        self._drop(dropped)

    # -- destruction behind the queued launches -----------------------------------
    def idle(self, launches: int) -> None:
        """The stream has finished the work queued up to count ``launches`` (it was synchronized)."""
        # Read without the lock, the usual empty list costs nothing; an entry another
        # thread adds meanwhile is buried at the next synchronize or drop.
        if not self._waiting:
            return
        with self._lock:
            ready = [w for w in self._waiting if w[0] <= launches]
            self._waiting = [w for w in self._waiting if w[0] > launches]
        with self.state.on_device():
            self._bury(ready)

    def close(self) -> None:
        """The stream was synchronized for good: destroy everything, accept nothing more."""
        self.enabled = False  # a launch racing the close must not put one back
        self.clear()
        self.idle(self.state.queued)
        with _caches_lock:  # nothing is left for forget() and clear_all() to drop
            _caches.get(self.backend, weakref.WeakSet()).discard(self)

    def _drop(self, entries: list[_Plan]) -> None:
        """Destroy the executors of ``entries`` once no queued launch can still use them."""
        executors = [entry.executor for entry in entries]
        if not executors and not self._waiting:
            return
        state = self.state
        with state.on_device():
            inflight = self._inflight
            if inflight is not None and any(e is inflight for e in executors):
                # Its launch is being queued: the launch after those counted so far.
                executors = [e for e in executors if e is not inflight]
                with self._lock:
                    self._waiting.append((state.queued + 1, None, [inflight]))
            if executors:
                launches = state.queued
                if launches <= state.done:
                    self._destroy(executors)
                else:
                    # The event goes behind the launches only while no close can be past its
                    # wait: under the stream's lock, taken without blocking (this may run in a
                    # collection inside another stream's launch), and never on a capturing
                    # stream (the record would become a step of the graph). Without one, the
                    # executors wait for the stream's next synchronize or its close.
                    event = None
                    if state.lock.acquire(blocking=False):
                        try:
                            if state.open and not state.closing and state.capture is None:
                                launches = state.queued
                                event = self._event_behind_launches()
                        finally:
                            state.lock.release()
                    with self._lock:
                        self._waiting.append((launches, event, executors))
            self._poll()

    def _event_behind_launches(self) -> Any:
        try:
            event = acl.rt.create_event(backend=self.backend)
        except AclError:
            return None  # no event: destroyed at the next synchronize instead
        try:
            acl.rt.record_event(event, self.state.handle, backend=self.backend)
        except AclError:
            _quiet(acl.rt.destroy_event, event, backend=self.backend)
            return None
        return event

    def _poll(self) -> None:
        """Destroy the waiting executors whose event has completed."""
        if not self._waiting:
            return
        with self._lock:
            ready = [w for w in self._waiting if w[1] is not None and _complete(w[1], self.backend)]
            self._waiting = [w for w in self._waiting if w not in ready]
        self._bury(ready)

    def _bury(self, waiting: list[tuple[int, Any, list[Any]]]) -> None:
        for _, event, executors in waiting:
            if event is not None:
                _quiet(acl.rt.destroy_event, event, backend=self.backend)
            self._destroy(executors)

    def _destroy(self, executors: list[Any]) -> None:
        for executor in executors:
            _quiet(acl.destroy_acl_op_executor, executor, backend=self.backend)


def _complete(event: Any, backend: str) -> bool:
    try:
        return acl.rt.query_event_status(event, backend=backend) == _COMPLETE
    except AclError:
        return False  # asked again at the next synchronize


def _consume(executor: Any, backend: str) -> None:
    """Free an executor phase 2 will never consume: only a repeatable one may be destroyed."""
    try:
        acl.set_acl_op_executor_repeatable(executor, backend=backend)
        acl.destroy_acl_op_executor(executor, backend=backend)
    except AclError:
        pass  # the error being raised already says what went wrong


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except AclError:
        pass  # nothing more can be done with it; the error that brought us here says more
