"""The kernels' worker threads: one policy for how many, one executor, fork-safe.

The policy: :func:`threads_for` decides how many threads a call of a fast
kernel uses, the tuned NumPy paths (:mod:`pyaclnn.kernels._tuned`) and the
compiled kernels (:mod:`pyaclnn.kernels._accel`, whose C library runs them on
its own pthreads) alike. Each kernel states the work of a call and the work
from which a second thread pays for waking it; below that the call runs in
the calling thread, otherwise on :func:`thread_count` threads:
``PYACLNN_NUM_THREADS`` if set, else the usable cores, at most 8, read at each
call that may use them, so tests may change it. The reference kernels
(:mod:`pyaclnn.kernels.max_pool3d`, :mod:`pyaclnn.kernels.grid_sampler3d`) use
no threads.

NumPy releases the GIL inside its loops, so the tuned paths split a call into
chunks that write disjoint parts of the outputs and run them on the executor
here; the result never depends on the number of threads. Two ways of using it:

- :func:`run_shared`: ``work`` runs on shares of a list of blocks, the calling
  thread taking the first share (the max-pool kernels);
- :class:`Pipeline`: the calling thread prepares chunks one after the other and
  hands each to a worker, with a bound on the chunks in flight (the
  grid-sampler kernels).

(The numpy backend's stream workers, one thread per emulated stream, are the
device's streams, not kernel threads: a kernel runs on its stream's worker and
takes its helpers from here.)
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from . import _env

MAX_DEFAULT_THREADS = 8
_MALFORMED = -(1 << 62)  # what _env.integer gives for a PYACLNN_NUM_THREADS that is no integer

_executor: ThreadPoolExecutor | None = None
_executor_size = 0
_lock = threading.Lock()


def thread_count() -> int:
    """Threads for one call: PYACLNN_NUM_THREADS, else the usable cores (at most 8)."""
    if _env.value("PYACLNN_NUM_THREADS"):
        threads = _env.integer("PYACLNN_NUM_THREADS", _MALFORMED, minimum=None, meaning="the usable cores")
        if threads != _MALFORMED:  # warned
            return max(1, threads)  # 0 or less: one thread
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_THREADS))


def threads_for(work: int, least: int) -> int:
    """The threads a kernel call of ``work`` uses, where a second thread pays off from
    ``least`` of the same units on: 1 below it, else :func:`thread_count`."""
    return 1 if work < least else thread_count()


def submit(workers: int, fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run ``fn(*args)`` on the shared executor, which gets at least ``workers`` threads.

    The executor grows when a call asks for more threads (PYACLNN_NUM_THREADS
    raised); the old one finishes what it was given. Lookup and submission
    happen under one lock, so nothing is ever handed to a retired executor.
    """
    global _executor, _executor_size
    with _lock:
        if _executor is None or _executor_size < workers:
            if _executor is not None:
                _executor.shutdown(wait=False)
            _executor = ThreadPoolExecutor(workers, thread_name_prefix="pyaclnn-kernel")
            _executor_size = workers
        return _executor.submit(fn, *args)


def _forget_after_fork() -> None:
    # A forked child inherits the executor object but none of its threads.
    global _executor, _executor_size, _lock
    _executor, _executor_size, _lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def run_shared(work: Callable[[list[Any]], None], blocks: list[Any], threads: int) -> None:
    """Run ``work`` on shares of ``blocks``, on up to ``threads`` threads (:func:`threads_for`).

    The calling thread takes the first share; the call returns only once every
    share has finished (none still writes into the outputs), then re-raises
    the first failure.
    """
    threads = min(threads, len(blocks))
    if threads <= 1:
        work(blocks)
        return
    shares = [blocks[i::threads] for i in range(threads)]
    futures = [submit(threads - 1, work, share) for share in shares[1:]]
    try:
        work(shares[0])
    finally:
        wait(futures)
    for future in futures:
        future.result()


class Pipeline:
    """Runs chunks handed over by the calling thread on the worker threads.

    The calling thread prepares each chunk (many small NumPy calls that need
    the GIL) and hands it over; the worker's gathers and products release the
    GIL. Every chunk writes its own slice of the outputs. ``max_pending``
    chunks (at least one per thread) may be in flight, which bounds the
    scratch memory. With one thread (:func:`threads_for`) everything runs
    inline. Workers run with NumPy's errors ignored (its error state is per
    thread), as the kernels themselves do.
    """

    def __init__(self, threads: int, max_pending: int = 0) -> None:
        self.threads = threads
        self.parallel = threads > 1
        self.max_pending = max(self.threads, max_pending)
        self.pending: deque[Future[None]] = deque()

    def run(self, fn: Callable[..., None], *args: object) -> None:
        if not self.parallel:
            fn(*args)
            return
        while len(self.pending) >= self.max_pending:
            self.pending.popleft().result()
        self.pending.append(submit(self.threads, _quietly, fn, *args))

    def wait(self) -> None:
        """Wait for every chunk in flight; re-raise the first failure only
        after all of them have stopped writing."""
        error: BaseException | None = None
        while self.pending:
            try:
                self.pending.popleft().result()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                error = error or exc
        if error is not None:
            raise error


def _quietly(fn: Callable[..., None], *args: object) -> None:
    with np.errstate(all="ignore"):
        fn(*args)
