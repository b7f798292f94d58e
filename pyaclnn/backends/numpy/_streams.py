"""The numpy backend's device runtime: streams, tasks, events and hazards.

This follows the asynchronous device model of docs/architecture.md, which the C
emulator (tests/emulator) implements too:

* every stream, and the default stream of each device, is a :class:`Worker`:
  a FIFO of :class:`Task` objects run one after another by a daemon thread, so
  tasks of different streams run concurrently;
* a task that fails records a sticky error on its stream, reported (once) by
  the next synchronize of that stream or of its device; on a stream in
  ``ACL_STOP_ON_FAILURE`` mode the tasks queued after it are skipped until then;
* an event record is a :class:`Marker` task that stores a timestamp when it
  runs;
* misuses that would corrupt memory on a real device are :class:`Hazards`:
  printed to stderr and counted.

Nothing here knows about operators or descriptors: the backend resolves what a
task needs before it enqueues it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...constants import (
    ACL_ERROR_RT_INTERNAL_ERROR,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
)
from ...kernels import _env

KERNEL_US = "PYACLNN_EMU_KERNEL_US"
SYNC_US = "PYACLNN_EMU_SYNC_US"
HAZARD_FATAL = "PYACLNN_EMU_HAZARD_FATAL"


def hazards_are_fatal() -> bool:
    """Whether ``PYACLNN_EMU_HAZARD_FATAL`` is 1: a hazard aborts the process (the C emulator reads
    the same variable)."""
    return _env.flag(HAZARD_FATAL, False)


def env_ns(name: str) -> int:
    """The microseconds in environment variable ``name``, as nanoseconds.

    Read at each call (tests change the variables between calls); unset or empty
    is 0, and so is a malformed value, which :mod:`pyaclnn._env` warns about.
    """
    if not os.environ.get(name):  # the usual case, on every launch: unset
        return 0
    return int(_env.microseconds(name) * 1000)


#: The longest a query that finds work pending blocks, with the GIL released (Worker.settled):
#: long enough for the worker thread to wake and take the GIL, short against a kernel.
POLL_WAIT_S = 0.0002


def sleep_ns(ns: int) -> None:
    """Simulated latency: sleep ``ns`` nanoseconds (nothing when 0)."""
    if ns > 0:
        time.sleep(ns / 1e9)


class DeviceError(Exception):
    """Raised by a task: a fault of the device, reported at the next synchronize.

    Parameters
    ----------
    status : int
        The aclError the synchronize returns.
    message : str
        What went wrong, starting with the C name of the call that enqueued the
        task; the worker appends the stream.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True, eq=False)  # eq=False: a task is itself, not its fields
class Task:
    """One unit of work of a stream.

    Parameters
    ----------
    run : callable
        The work, run on the stream's worker thread. It holds everything it
        touches (NumPy views of the emulated memory), so nothing the caller
        destroys afterwards can pull memory from under it.
    uses : tuple of Allocation
        Allocations the work reads or writes, for the hazard of freeing them
        while the task is pending.
    owner : object, optional
        The repeatable executor launched, for the hazard of destroying it
        while the task is pending.
    what : str
        C name of the call that enqueued the task, for error messages.
    min_ns : int
        Simulated device time: the task takes at least this long.
    detail : str
        Appended to ``what`` in the profiler's record (a copy's direction, ``" H2D"``).
    event : int
        The ``id`` of the event a record or wait task is for (0: none), for the profiler.
    graph : int
        The ``id`` of the graph (aclmdlRI) that recorded the task (0: none), for the profiler.
    steps : tuple of Task
        For a replay of a graph, the recorded tasks its ``run`` runs in order
        (:meth:`Worker.run_steps`), for the hazards of freeing their memory or
        destroying their executors while the replay is pending.
    """

    run: Callable[[], None]
    uses: tuple[Any, ...] = ()
    owner: object | None = None
    what: str = ""
    min_ns: int = 0
    detail: str = ""
    event: int = 0
    graph: int = 0
    steps: tuple[Task, ...] = ()


class _Deferred(threading.local):
    """The workers whose wake-up this thread holds back (:func:`waited_at_once`); None outside."""

    workers: list[Worker] | None = None


_DEFERRED = _Deferred()


class waited_at_once:  # noqa: N801  (a context manager, named for what its block does)
    """A block whose submitted tasks its thread waits for before the block ends (a call on NumPy
    arrays, whose outputs are read back): their workers are not woken when they are submitted.

    The thread runs them itself when it waits (:meth:`Worker.wait`), so waking the worker
    thread only makes it contend for the GIL and go back to sleep: about 30 us a launch on
    the benchmark machine. Whatever is still queued when the block ends, an error or an
    interrupt included, wakes its worker then, and a query of the stream from this thread
    (:meth:`Worker.settled`) wakes it at once: nothing waits on a sleeping worker. Blocks
    nest; other threads are not affected.
    """

    __slots__ = ("_outer",)

    def __enter__(self) -> None:
        self._outer = _DEFERRED.workers
        _DEFERRED.workers = []

    def __exit__(self, *exc: object) -> None:
        held, _DEFERRED.workers = _DEFERRED.workers, self._outer
        for worker in held or ():
            worker.wake()


class Worker:
    """A stream: a FIFO of tasks run in order, one at a time, off the caller's back.

    A daemon thread runs the tasks as they come. A thread that waits for a
    task (:meth:`wait`: a synchronize, a pageable copy) while nothing of the
    stream is running runs the queued tasks up to that one itself, in order:
    it would sit blocked until they are done anyway, and it saves two thread
    wake-ups and the hand-over of the GIL, about 0.1-0.2 ms on a loaded VM
    (more than the whole Python side of a launch). Nobody can tell which
    thread ran a task: tasks of the stream still run one at a time in
    submission order, every call that must return at once still does, and the
    worker thread keeps running whatever nobody waits for.

    Parameters
    ----------
    label : str
        The stream as error messages name it (its handle, ``0x0`` for a
        default stream).
    device : int
        The device the stream belongs to.
    """

    def __init__(self, label: str, device: int) -> None:
        self.label = label
        self.device = device
        self._submitted = 0
        self._finished = 0
        self._error: tuple[int, str] | None = None
        self._closed = False
        # aclrtSetStreamFailureMode: while a failure is not yet reported, skip the tasks after it
        self.stop_on_failure = False
        self.capture: Any = None  # the stream's _capture.Capture while aclmdlRICaptureBegin records it
        self._start()
        _LIVE_WORKERS.add(self)

    def _start(self) -> None:
        """Fresh locks and queues, and the thread (again in a forked child, which has no threads)."""
        self._lock = threading.Lock()
        self._done = threading.Condition(self._lock)  # a task finished
        self._work = threading.Condition(self._lock)  # a task was queued, or the stream closed
        self._queued: deque[Task] = deque()  # submitted, not started
        self._pending: deque[Task] = deque()  # submitted, not finished; the head may be running
        self._running = False  # a thread (the worker or a waiting caller) runs the head of _pending
        self._idle = False  # the worker thread sleeps on _work: only then is notifying it needed
        self._waiters = 0  # threads asleep in wait(): finishing a task notifies only when there are some
        self._sleep_until_ns = 0  # while the running task sleeps out its simulated time: its end
        # Daemon: a stream nobody destroyed must not keep the process alive at exit.
        self._thread = threading.Thread(
            target=self._loop, name=f"pyaclnn-stream-{self.label}-dev{self.device}", daemon=True
        )
        self._thread.start()

    def _after_fork(self) -> None:
        """In a forked child: the parent's queued tasks are the parent's; start over, empty."""
        self._finished = self._submitted
        if not self._closed:
            self._start()

    # -- the caller's side --------------------------------------------------
    def submit(self, task: Task) -> int:
        """Enqueue ``task``; returns its sequence number (1 for the first)."""
        with self._lock:
            # Both queues under one lock, so they keep the same order when
            # several threads submit to this stream.
            self._pending.append(task)
            self._queued.append(task)
            self._submitted += 1
            deferred = _DEFERRED.workers
            if deferred is not None:  # the submitting thread waits for it at once: no wake-up
                if self not in deferred:
                    deferred.append(self)
            elif self._idle:
                self._work.notify()
            return self._submitted

    def run_now(self, task: Task) -> bool | None:
        """Run ``task`` on the calling thread now, as the stream's next task, when nothing of the
        stream is pending and it holds no sticky error (nothing it must follow, nothing beside
        it): True, or False when it failed (the sticky error, reported by the next wait, is
        its). None, with nothing run, otherwise. As a waiting caller runs a queued task
        (:meth:`wait`): other threads' waits wait for it, tasks submitted meanwhile run after it."""
        with self._lock:
            if self._pending or self._closed or self._error is not None or self.capture is not None:
                return None
            self._pending.append(task)
            self._submitted += 1
            self._running = True
        try:
            self._execute(task)
        finally:
            with self._lock:
                self._head_finished()
        return self._error is None

    def wake(self) -> None:
        """Wake the worker thread if it sleeps while tasks are queued (a wake-up held back by
        :class:`waited_at_once`)."""
        with self._lock:
            if self._queued and self._idle:
                self._work.notify()

    def wait(self, seq: int | None = None) -> None:
        """Block until task ``seq`` (default: every task submitted so far) has finished.

        While no task of the stream runs, the calling thread runs the queued
        ones up to ``seq`` itself (see the class).
        """
        with self._lock:
            target = self._submitted if seq is None else seq
            while self._finished < target:
                if self._running or self._closed:
                    # a closed stream's thread drains it; waiting for it keeps close() simple
                    self._waiters += 1
                    try:
                        self._done.wait()
                    finally:
                        self._waiters -= 1
                else:  # the next task is the first queued one, and it is at most ``target``
                    self._run_next()

    def finished(self, seq: int) -> bool:
        """Whether task ``seq`` has finished."""
        with self._lock:
            return self._finished >= seq

    def settled(self, seq: int | None = None) -> bool:
        """Whether task ``seq`` (default: every task submitted so far) has finished: a query.

        If not, the caller gives up the GIL for a moment (at most :data:`POLL_WAIT_S`, less if
        a task finishes meanwhile) before it answers. A polling loop (``while not
        s.query(): pass``) otherwise keeps the GIL from the worker thread, which needs it to
        finish the task it runs, for a whole switch interval (5 ms): the loop would wait
        25 times a 0.2 ms kernel. Not while the running task sleeps out its simulated time
        (it needs no GIL then): a poll of the memory pool's fences, say, answers at once.
        Unlike :meth:`wait`, the caller never runs a task itself.
        """
        deferred = _DEFERRED.workers
        if deferred and self in deferred:  # its wake-up was held back: the worker must run them now
            deferred.remove(self)
            self.wake()
        with self._lock:
            target = self._submitted if seq is None else seq
            if self._finished >= target:
                return True
            if self._sleep_until_ns and time.monotonic_ns() < self._sleep_until_ns:
                return False
            self._waiters += 1
            try:
                self._done.wait(POLL_WAIT_S)
            finally:
                self._waiters -= 1
            return self._finished >= target

    def busy(self) -> bool:
        """Whether a submitted task is still queued or running."""
        with self._lock:
            return self._finished < self._submitted

    def uses(self, allocation: object) -> bool:
        """Whether a queued or running task uses ``allocation``."""
        with self._lock:
            return any(
                allocation in task.uses or any(allocation in step.uses for step in task.steps)
                for task in self._pending
            )

    def runs_owner(self, owner: object) -> bool:
        """Whether a queued or running task launches ``owner`` (an executor)."""
        with self._lock:
            return any(
                task.owner is owner or any(step.owner is owner for step in task.steps)
                for task in self._pending
            )

    def run_steps(self, steps: tuple[Task, ...]) -> None:
        """Run ``steps`` in order, from the task running them (a graph's replay), each as a task
        of its own: its simulated time, its failure, the failure mode, the profiler's record."""
        for step in steps:
            self._execute(step)

    def take_error(self) -> tuple[int, str] | None:
        """The sticky error ``(status, message)``, or None; cleared: it is reported once."""
        with self._lock:
            error, self._error = self._error, None
            return error

    def close(self) -> None:
        """Let the queued tasks run, then end the thread (a second call does nothing)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._idle:
                self._work.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    @property
    def alive(self) -> bool:
        """Whether the worker thread is still running."""
        return self._thread.is_alive()

    # -- running tasks (the worker thread, or a waiting caller) -------------
    def _run_next(self) -> None:
        """Run the first queued task; called holding the lock, which is released meanwhile."""
        task = self._queued.popleft()
        self._running = True
        self._lock.release()
        try:
            self._execute(task)
        except BaseException as exc:
            if threading.current_thread() is self._thread:  # not an interrupt: the task's own failure
                self._fail(ACL_ERROR_RT_INTERNAL_ERROR, f"{task.what}: {type(exc).__name__}: {exc}")
            else:
                # Interrupted in a waiting caller (KeyboardInterrupt): a device is never
                # interrupted, so the task is run again, whole, by the worker thread. The
                # tasks write their outputs from their inputs only, so a second run from
                # the start gives the same result.
                self._lock.acquire()
                self._running = False
                self._queued.appendleft(task)
                if self._idle:
                    self._work.notify()
                raise
        self._lock.acquire()
        self._head_finished()

    def _head_finished(self) -> None:
        """The head of ``_pending`` ran to its end (called holding the lock): count it, wake the
        threads waiting for a task to finish, and the sleeping worker if tasks are queued."""
        self._running = False
        self._pending.popleft()
        self._finished += 1
        if self._waiters:
            self._done.notify_all()
        if self._queued and self._idle:
            self._work.notify()  # the worker takes what no waiting caller wants

    def _loop(self) -> None:
        with self._lock:
            while True:
                if self._queued and not self._running:
                    self._run_next()
                elif self._closed and not self._queued and not self._running:
                    return
                else:
                    self._idle = True
                    self._work.wait()
                    self._idle = False

    def _execute(self, task: Task) -> None:
        """Run one task; a failure becomes the stream's sticky error, never vanishes."""
        recorder = RECORDER  # the profiler's, from aclprofStart to aclprofStop; else None
        start_ns = time.monotonic_ns() if recorder is not None else 0
        if self.stop_on_failure and self._error is not None and task.what != "aclrtRecordEvent":
            # ACL_STOP_ON_FAILURE: nothing queued after a failed task runs until the failure was
            # reported (an event record still completes, or its waiters would wait forever).
            if recorder is not None:
                recorder.add(self, task, start_ns, time.monotonic_ns())
            return
        try:
            # Device time passes before the task writes, so a caller that
            # does not synchronize sees the old contents.
            if task.min_ns > 0:
                self._sleep_until_ns = time.monotonic_ns() + task.min_ns
                sleep_ns(task.min_ns)
                self._sleep_until_ns = 0
            task.run()
        except DeviceError as exc:
            self._fail(exc.status, exc.message)
        except MemoryError as exc:  # the host ran out of memory for a kernel's scratch
            self._fail(ACL_ERROR_RT_MEMORY_ALLOCATION, f"{task.what}: out of host memory: {exc}")
        except Exception as exc:  # a bug of the emulation: keep it, report it at the synchronize
            self._fail(ACL_ERROR_RT_INTERNAL_ERROR, f"{task.what}: unexpected {type(exc).__name__}: {exc}")
        if recorder is not None:
            recorder.add(self, task, start_ns, time.monotonic_ns())

    def _fail(self, status: int, message: str) -> None:
        with self._lock:
            if self._error is None:  # the first fault is the one reported
                self._error = (status, f"{message} (device error of a launch on stream {self.label})")


_LIVE_WORKERS: weakref.WeakSet[Worker] = weakref.WeakSet()
#: The numpy backend's profiler records (``_profiler.Recorder``) while aclprofStart..aclprofStop
#: runs with task time; None otherwise, and then a task costs one read of it.
RECORDER: Any = None


def _restart_workers_in_child() -> None:
    for worker in list(_LIVE_WORKERS):
        worker._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restart_workers_in_child)


class Marker:
    """One record of an event: a task that stores the time it ran.

    ``worker`` and ``seq`` name the task, for waiting on it.
    """

    __slots__ = ("worker", "seq", "timestamp_ns")

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.seq = 0
        self.timestamp_ns: int | None = None

    def run(self) -> None:
        self.timestamp_ns = time.perf_counter_ns()

    @property
    def complete(self) -> bool:
        return self.timestamp_ns is not None

    def wait(self) -> None:
        """Block until the marker (so every task before it on its stream) has run."""
        assert self.worker is not None
        self.worker.wait(self.seq)

    def query(self) -> bool:
        """Whether the marker has run; asked through :meth:`Worker.settled` (a polling caller
        lets the worker run it)."""
        if self.timestamp_ns is not None:
            return True
        worker = self.worker
        return worker is not None and worker.settled(self.seq) and self.timestamp_ns is not None


class Event:
    """An aclrtEvent: its creation flags, its device (current when it was created), its
    latest record (None: never recorded) and the capture it was last recorded into, while that
    capture is active (then CANN refuses to synchronize or query it)."""

    __slots__ = ("flags", "device", "marker", "capture")

    def __init__(self, flags: int, device: int = 0) -> None:
        self.flags = flags
        self.device = device
        self.marker: Marker | None = None
        self.capture: Any = None


class Device:
    """One emulated device: its default stream and the streams made on it.

    Parameters
    ----------
    index : int
        The device id.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self._lock = threading.Lock()
        self._default: Worker | None = None
        self._workers: set[Worker] = set()  # every live stream, the default one included

    def default_worker(self, create: bool = True) -> Worker | None:
        """The default stream; made at its first use (None if not made and ``create`` is False)."""
        worker = self._default
        if worker is None and create:
            with self._lock:
                if self._default is None:
                    self._default = Worker("0x0", self.index)
                    self._workers.add(self._default)
                worker = self._default
        return worker

    def new_worker(self, label: str) -> Worker:
        worker = Worker(label, self.index)
        with self._lock:
            self._workers.add(worker)
        return worker

    def forget(self, worker: Worker) -> None:
        with self._lock:
            self._workers.discard(worker)

    def workers(self) -> list[Worker]:
        """Every live stream of the device, the default one included (if made)."""
        with self._lock:
            return list(self._workers)

    def stream_count(self) -> int:
        """Live streams made by aclrtCreateStream (the default stream is not one)."""
        with self._lock:
            return len(self._workers) - (self._default is not None)


class Hazards:
    """Misuses seen so far, each printed to stderr when it happens."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def report(self, what: str, call: str) -> None:
        """Count one hazard: ``what`` happened in C function ``call``.

        With ``PYACLNN_EMU_HAZARD_FATAL=1`` (read at each hazard; the test suite sets it)
        the process then aborts, with the Python stack of the thread that caused it:
        a hazard is a bug that would corrupt memory on a device, never to be skipped over.
        """
        with self._lock:
            self._count += 1
        print(f"pyaclnn numpy backend HAZARD: {what}, {call}", file=sys.stderr, flush=True)
        if hazards_are_fatal():
            print(f"{HAZARD_FATAL}=1: aborting; the hazard was caused here:", file=sys.stderr)
            traceback.print_stack(file=sys.stderr)
            sys.stderr.flush()
            os.abort()

    @property
    def count(self) -> int:
        with self._lock:
            return self._count
