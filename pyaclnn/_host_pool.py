"""Host memory for the NumPy results that operators write where they are (the numpy backend).

A call that maps its NumPy arrays (``_host_memory``) writes each new result
straight into a NumPy array, so without a pool every result would be fresh
memory, and the kernel would take a page fault on each page it writes first
(for a 32 MiB result on a 2-core machine about 9 ms, four times the kernel).
As CuPy's and torch_npu's pools do for pinned host buffers, this pool lends
page-aligned buffers and takes each back once the last NumPy array over it is
garbage, so the next result of that size is written into memory that is
already there.

* The result's base is a small holder of its buffer; the holder's finalizer
  (whatever thread runs it) only appends the buffer to a queue, so it never
  waits for a lock the collecting thread may hold. Lending drains the queue.
* Buffers are whole pages of their own: a result is mapped alone whatever lies
  next to it.
* Sizes are rounded as the device pool rounds them (512 bytes, whole MiB
  above 1 MiB); at most ``limit`` idle bytes are kept, the rest is freed.
* No queued work can use a returned buffer: NumPy results are handed out only
  after their call's stream finished them.
* A buffer stays mapped for the device between its results
  (:meth:`HostPool.hold`: the first call that maps it registers all its pages
  and leaves them registered), so a call writing a result into a reused buffer
  maps nothing. The registration ends before the buffer's memory can be freed:
  when the pool lets the buffer go (over the limit, :meth:`HostPool.free_all`),
  or at shutdown (``HostMemory.release_all``, the device idle) for every buffer.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable

import numpy as np

from ._host_memory import PAGE

_SMALL = 512
_LARGE = 1 << 20
_IDLE_LIMIT = 1 << 30  # idle bytes kept for reuse
_INTERFACE_KINDS = frozenset("biufc")  # dtypes whose ``str`` the array interface takes back as they are


def _rounded(nbytes: int) -> int:
    unit = _SMALL if nbytes <= _LARGE else _LARGE
    return max(-(-nbytes // unit) * unit, unit)


class _Lent:
    """The base of one lent result: exposes the buffer's first bytes as the result, and returns
    the buffer when it dies."""

    __slots__ = ("__array_interface__", "_buffer", "_returned")

    def __init__(
        self,
        buffer: np.ndarray,
        returned: collections.deque[np.ndarray],
        shape: tuple[int, ...],
        typestr: str,
    ) -> None:
        self._buffer = buffer
        self._returned = returned
        self.__array_interface__ = {
            "data": (buffer.__array_interface__["data"][0], False),
            "shape": shape,
            "typestr": typestr,
            "version": 3,
        }

    def __del__(self) -> None:
        self._returned.append(self._buffer)  # deque.append is atomic: no lock in a finalizer


class HostPool:
    """Page-aligned host buffers for NumPy results, reused once their results are garbage."""

    def __init__(self, limit: int = _IDLE_LIMIT) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._idle: dict[int, list[np.ndarray]] = {}  # rounded size -> buffers
        self._idle_bytes = 0
        self._returned: collections.deque[np.ndarray] = collections.deque()
        # buffer address -> (device, what ends its registration), for buffers kept mapped
        self._held: dict[int, tuple[int, Callable[[], None]]] = {}

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialised array of ``shape`` and ``dtype`` on pages of its own (the operator
        writes every element, as torch's outputs are not zeroed either)."""
        return self.lend(shape, dtype)[0]

    def lend(self, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`empty`, and the buffer under it (uint8, page-aligned; see :meth:`hold`)."""
        # math.prod: np.prod costs 3 us hot and 50-140 us after a pause (its Python layers cold)
        nbytes = math.prod(shape) * dtype.itemsize
        size = _rounded(nbytes)
        with self._lock:
            dropped = self._take_back()
            free = self._idle.get(size)
            buffer = free.pop() if free else None
            if buffer is not None:
                self._idle_bytes -= size
        if dropped:
            self._let_go(dropped)
        if buffer is None:
            raw = np.empty(-(-size // PAGE) * PAGE + PAGE, np.uint8)  # whole pages, whatever the start
            start = -raw.__array_interface__["data"][0] % PAGE
            buffer = raw[start : start + size]
        if dtype.kind in _INTERFACE_KINDS:  # the result itself, one array made
            return np.asarray(_Lent(buffer, self._returned, shape, dtype.str)), buffer
        # a dtype the array interface cannot name (bfloat16 is "<V2"): bytes, seen as it
        lent = np.asarray(_Lent(buffer, self._returned, (nbytes,), "|u1"))
        return lent.view(dtype).reshape(shape), buffer

    def held_on(self, buffer: np.ndarray) -> int | None:
        """The device ``buffer`` (from :meth:`lend`) is kept mapped on, or None."""
        held = self._held.get(buffer.__array_interface__["data"][0])
        return None if held is None else held[0]

    def hold(self, buffer: np.ndarray, device: int, unhold: Callable[[], None]) -> None:
        """``buffer`` stays mapped on ``device`` while the pool has it; ``unhold()`` ends that
        before the pool lets it go."""
        with self._lock:
            self._held[buffer.__array_interface__["data"][0]] = (device, unhold)

    def _let_go(self, buffers: list[np.ndarray]) -> None:
        """End the registrations of ``buffers``, which the pool drops (their memory may be freed
        next); outside the pool's lock."""
        with self._lock:
            ends = [self._held.pop(b.__array_interface__["data"][0], None) for b in buffers]
        for end in ends:
            if end is not None:
                end[1]()

    def _take_back(self) -> list[np.ndarray]:
        """File the buffers whose results died since; returns those over the limit, which the
        caller lets go (caller holds the lock)."""
        returned = self._returned
        dropped = []
        while returned:
            buffer = returned.popleft()
            if self._idle_bytes + buffer.size <= self.limit:
                self._idle.setdefault(buffer.size, []).append(buffer)
                self._idle_bytes += buffer.size
            else:
                dropped.append(buffer)
        return dropped

    def idle_bytes(self) -> int:
        """Bytes kept for reuse now (results that died are counted once a lending filed them)."""
        with self._lock:
            dropped = self._take_back()
            idle = self._idle_bytes
        self._let_go(dropped)
        return idle

    def free_all(self) -> None:
        """Free every idle buffer (results still alive keep theirs)."""
        with self._lock:
            dropped = self._take_back()
            for buffers in self._idle.values():
                dropped.extend(buffers)
            self._idle.clear()
            self._idle_bytes = 0
        self._let_go(dropped)
