"""NumPy arrays mapped for the device, so that a call on them copies nothing.

On a backend whose device memory is host memory (the numpy backend), an
operator can read and write the caller's arrays where they are: their pages
are registered with ``aclrtHostRegister`` for the duration of the call, the
operator's tensors describe the mapped addresses, and the results are written
straight into the arrays the call returns. Phase 1 sees the same aclTensors,
so every check and status is the one of a call on DeviceArrays.

The rules:

* **Whole pages.** CANN maps 4 KiB pages and refuses a range that overlaps a
  live registration. The arrays of one call that share pages are mapped as one
  range; a registration serves every later array that lies inside it (counted:
  two calls or two threads on one array share it). An array whose pages overlap
  a registration without lying inside it is not mapped, and the caller copies
  it as before (an array sharing a page with another thread's, at the same
  time). New outputs get pages of their own (``_host_pool``).
* **A mapping ends only when no queued work can use it.** The call that made
  it waits for its stream and then gives it back; a call that raised first
  (an error, a KeyboardInterrupt in the wait) leaves it to :meth:`HostMemory.after`,
  which gives it back once the stream is known to be past it (a later wait
  returned, or the stream closed), at the latest at shutdown after the device
  was synchronized. Until then the mapping keeps the array alive.
* **A mapping stays a while after its last use.** When a call gives back the
  last use of a mapping of the caller's arrays, the registration is kept idle,
  so that the next call on the same arrays maps nothing (and its plan, bound
  to the same device addresses, serves again). An idle mapping holds no
  reference to the arrays (not even a weak one, which ``ndarray.resize``
  refuses too): once the call returned, pyaclnn holds nothing of the caller's,
  and an array may be freed while its pages are still registered. That is
  harmless: no queued work uses them, the numpy backend (the one backend that
  maps) touches registered memory only in a task, and a later array on those
  pages is served by the registration as any array inside it is. An idle
  mapping ends (i) when more than ``_IDLE_MAPPINGS`` mappings or
  ``_IDLE_BYTES`` bytes are idle, oldest first; (ii) when a new range overlaps
  it without lying inside it; (iii) at shutdown. A call that uses it again
  holds that call's arrays until it gives the mapping back.
* **The host pool's buffers stay mapped.** A buffer for NumPy results
  (``_host_pool``) is mapped whole by the first call that writes a result into
  it, with one more use that the pool holds (:meth:`HostMemory.hold`), so later
  results in it map nothing; the pool gives that use back (:meth:`HostMemory.unhold`)
  before it lets the buffer's memory go, and shutdown gives back all of them.
* **Wrappers outlive their mapping, idle.** Once no queued work uses it, the
  DeviceArray over a mapped array is *parked* (:meth:`HostMemory.park`), keyed
  by its device address, shape, strides, offset, dtype and device, instead of
  closed; a later call whose array is mapped at that address again (the same
  pages: the numpy backend maps a host address to a fixed device address)
  takes it back, with its aclTensor. So a repeated call on the same arrays has
  the same descriptors, and the stream's executor cache serves it (phase 2
  only). That is safe: a cached plan addresses only the device ranges of its
  key's descriptors, and a hit means each of them is mapped, now, to this
  call's own array. A parked wrapper keeps no array alive; at most ``_PARKED``
  are kept, the oldest is closed (its executors are dropped with its
  descriptor), and shutdown closes them all.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from . import acl
from .errors import AclError

if TYPE_CHECKING:
    from ._stream import StreamState

PAGE = 4096  # aclrtHostRegister maps whole pages (CANN: ptr must be 4 KiB aligned)
_IDLE_MAPPINGS = 8  # mappings kept registered after their last use (see the module's docstring)
_IDLE_BYTES = 256 << 20  # and the bytes of host memory they may keep alive
_PARKED = 64  # idle wrappers kept (a few calls' arrays; the executor cache keeps 32 plans a stream)


class Mapping:
    """One registration: host pages ``[start, end)`` of ``device``, at device address ``ptr``."""

    __slots__ = ("start", "end", "device", "ptr", "pages", "owner", "users", "held")

    def __init__(
        self, start: int, end: int, device: int, pages: np.ndarray, owners: list[np.ndarray]
    ) -> None:
        self.start, self.end, self.device = start, end, device
        self.pages = pages  # uint8 view of the pages: what aclrtHostRegister was given
        self.owner = owners  # the arrays the pages belong to, kept alive while in use
        self.ptr = 0
        self.users = len(owners)
        self.held = False  # one more use, by the host pool, for a buffer of its own (see hold)


def byte_extent(x: np.ndarray) -> tuple[int, int] | None:
    """The host bytes ``[low, high)`` of ``x``'s elements, or None when an aclTensor over mapped
    pages cannot describe ``x`` (no element, a negative or partial stride, unaligned or
    byte-swapped data): such an array is copied."""
    itemsize = x.dtype.itemsize
    if not x.size or not x.flags.aligned or not x.dtype.isnative:
        return None
    low = x.__array_interface__["data"][0]
    high = low + itemsize
    for d, s in zip(x.shape, x.strides):
        if s < 0 or s % itemsize:
            return None
        high += (d - 1) * s
    return low, high


def _pages(extent: tuple[int, int] | None) -> tuple[int, int]:
    """The whole pages ``[start, end)`` holding the bytes ``extent``."""
    assert extent is not None
    low, high = extent
    return low - low % PAGE, -(-high // PAGE) * PAGE


def _low(extent: tuple[int, int] | None) -> int:
    assert extent is not None
    return extent[0]


class HostMemory:
    """The mappings of one backend's host memory, shared by every thread and call."""

    def __init__(self, backend: str, on_device: Callable[[int], Any], min_bytes: int = 0) -> None:
        self.min_bytes = min_bytes  # a call with fewer bytes of NumPy arrays copies them
        self._backend = backend
        self._on_device = on_device
        self._lock = threading.Lock()
        # Live mappings by start, and their starts in order: they never overlap (CANN refuses it),
        # so the one a range may overlap is the last that starts before the range ends.
        self._live: dict[int, Mapping] = {}
        self._starts: list[int] = []
        # (stream, its count of queued work then, give-back): mappings of calls that raised
        self._pending: list[tuple[StreamState, int, Callable[[], None]]] = []
        # Idle wrappers of mapped arrays, oldest first: key -> DeviceArray (see the module's docstring)
        self._parked: dict[tuple[Any, ...], Any] = {}
        # Mappings of callers' arrays with no use now, kept registered, oldest first: start -> mapping
        self._idle: dict[int, Mapping] = {}
        self._idle_bytes = 0

    def take(self, key: tuple[Any, ...]) -> Any:
        """The parked wrapper of ``key`` (device address, shape, strides, offset, dtype, device),
        now the caller's alone, or None."""
        if not self._parked:
            return None
        with self._lock:
            return self._parked.pop(key, None)

    def park(self, wrappers: list[tuple[tuple[Any, ...], Any]]) -> None:
        """Keep ``wrappers`` (key, DeviceArray; no queued work uses them) for a later call."""
        closing = []
        with self._lock:
            parked = self._parked
            for key, wrapper in wrappers:
                if key in parked:  # one array given twice, or two threads: keep one
                    closing.append(wrapper)
                    continue
                parked[key] = wrapper
            while len(parked) > _PARKED:
                closing.append(parked.pop(next(iter(parked))))
        for wrapper in closing:  # outside the lock: closing drops plans, which takes other locks
            wrapper.close()

    def map(self, arrays: list[np.ndarray], device: int) -> list[tuple[Mapping, int] | None]:
        """For each of ``arrays`` (one call's), a mapping covering it on ``device`` and the byte
        offset of its first element in the mapping, or None when it is to be copied instead.

        Arrays whose pages overlap are mapped together, as one range (CANN would refuse a
        second registration of a shared page). Each array holds one use of its mapping:
        give it back with :meth:`release`.
        """
        if self._pending:
            self._retire()
        extents = [byte_extent(x) for x in arrays]
        groups: list[tuple[int, int, list[int]]] = []  # pages [start, end) and the arrays in them
        for start, end, i in sorted((*_pages(e), i) for i, e in enumerate(extents) if e is not None):
            if groups and start < groups[-1][1]:
                first, last, members = groups[-1]
                groups[-1] = (first, max(last, end), [*members, i])
            else:
                groups.append((start, end, [i]))
        found: list[tuple[Mapping, int] | None] = [None] * len(arrays)
        with self._lock:
            for start, end, members in groups:
                mapping = self._covering(start, end, device, [arrays[i] for i in members])
                if mapping is None and len(members) > 1:  # the group overlaps a live mapping: each alone
                    for i in members:
                        alone = self._covering(*_pages(extents[i]), device, [arrays[i]])
                        found[i] = None if alone is None else (alone, _low(extents[i]) - alone.start)
                elif mapping is not None:
                    for i in members:
                        found[i] = (mapping, _low(extents[i]) - mapping.start)
        return found

    def _covering(self, start: int, end: int, device: int, owners: list[np.ndarray]) -> Mapping | None:
        """A mapping of pages ``[start, end)`` with one use per owner: a live one that covers them,
        else a new registration; None if they overlap a live mapping without lying inside it
        (caller holds the lock)."""
        mapping = self._overlapping(start, end)
        while (
            mapping is not None
            and mapping.users == 0
            and not (mapping.device == device and mapping.start == start and end == mapping.end)
        ):
            # Idle and not of exactly these pages: ended, as if gone already. An idle mapping keeps
            # no array, so one left by arrays since freed must not serve others: an array's device
            # address is the mapping's plus its offset, and a plan is keyed by it, so a stale range
            # would give the same arrays other addresses (and other plans) than their own mapping.
            self._end(self._unidle(mapping))
            mapping = self._overlapping(start, end)
        if mapping is not None:
            if mapping.device != device or not (mapping.start <= start and end <= mapping.end):
                return None  # CANN would refuse the overlap: copy
            if mapping.users == 0:  # idle: in use again, keeping this call's arrays alive
                self._unidle(mapping)
                mapping.owner = owners
            mapping.users += len(owners)
            return mapping
        pages = np.ctypeslib.as_array((ctypes.c_ubyte * (end - start)).from_address(start))
        mapping = Mapping(start, end, device, pages, owners)
        try:
            with self._on_device(device):
                mapping.ptr = acl.rt.host_register(pages, end - start, backend=self._backend)
        except AclError:
            return None  # registered elsewhere (another library): copying is always right
        self._live[start] = mapping
        bisect.insort(self._starts, start)
        return mapping

    def _overlapping(self, start: int, end: int) -> Mapping | None:
        """A live mapping overlapping pages ``[start, end)``: the one that starts last before
        ``end``, if it ends after ``start`` (caller holds the lock)."""
        i = bisect.bisect_left(self._starts, end) - 1
        if i < 0:
            return None
        mapping = self._live[self._starts[i]]
        return mapping if start < mapping.end else None

    def release(self, mappings: list[Mapping]) -> None:
        """Give back one use of each of ``mappings``; the last use ends the registration.

        Only once no queued work can use them (see the module's docstring).
        """
        with self._lock:
            for mapping in mappings:
                self._drop_use(mapping)
        if self._pending:  # a wait returned just now: what earlier calls left may be done too
            self._retire()

    def _drop_use(self, mapping: Mapping, keep: bool = True) -> None:
        """One use of ``mapping`` less; after the last, the mapping is kept idle (``keep``) or
        ended (caller holds the lock)."""
        mapping.users -= 1
        if mapping.users == 0:
            if not keep:
                self._end(mapping)
                return
            # The caller's arrays are the caller's alone again (see the module's docstring; the
            # host pool's buffers are held, by the pool's own use, so never idle).
            mapping.owner = []
            self._idle[mapping.start] = mapping
            self._idle_bytes += mapping.end - mapping.start
            while len(self._idle) > _IDLE_MAPPINGS or self._idle_bytes > _IDLE_BYTES:
                self._end(self._unidle(next(iter(self._idle.values()))))  # the oldest

    def _unidle(self, mapping: Mapping) -> Mapping:
        """Take ``mapping`` out of the idle ones (caller holds the lock)."""
        del self._idle[mapping.start]
        self._idle_bytes -= mapping.end - mapping.start
        return mapping

    def _end(self, mapping: Mapping) -> None:
        """End ``mapping``'s registration: no use left, out of ``_idle`` (caller holds the lock).
        The mapping, which holds the arrays, is dropped only after it (their memory may go next)."""
        del self._live[mapping.start]
        self._starts.pop(bisect.bisect_left(self._starts, mapping.start))
        with self._on_device(mapping.device):
            acl.rt.host_unregister(mapping.pages, backend=self._backend)

    def in_use_count(self) -> int:
        """Live mappings that some call uses now (not idle, not only held by the host pool)."""
        with self._lock:
            return sum(m.users > m.held for m in self._live.values())

    def hold(self, buffer: np.ndarray, device: int) -> Mapping | None:
        """Map all the pages of ``buffer`` (a host pool's: page-aligned, its own pages) on
        ``device`` and keep them mapped between calls, until :meth:`unhold`; None if they
        cannot be (the call maps its result alone, or copies it).

        The mapping keeps ``buffer`` alive, so its memory is not freed while registered;
        a buffer kept mapped on another device and not in use there is mapped again here.
        """
        start = buffer.__array_interface__["data"][0]
        end = start + -(-buffer.size // PAGE) * PAGE
        with self._lock:
            mapping = self._overlapping(start, end)
            while mapping is not None and mapping.users == 0:
                # Idle over the buffer's fresh memory: its arrays died (an idle mapping keeps none);
                # ended, so that the buffer gets a registration of its own.
                self._end(self._unidle(mapping))
                mapping = self._overlapping(start, end)
            if mapping is not None and mapping.held and mapping.users == 1 and mapping.device != device:
                self._unhold(mapping)
            mapping = self._covering(start, end, device, [buffer])
            if mapping is None:
                return None
            if mapping.held or (mapping.start, mapping.end) != (start, end):  # not the buffer's own
                self._drop_use(mapping)
                return mapping if mapping.held else None
            mapping.held = True
            mapping.owner = [buffer]  # not a result over it: results die and give the buffer back
            return mapping

    def unhold(self, buffer: np.ndarray) -> None:
        """End what :meth:`hold` keeps for ``buffer`` (the pool lets it go, or shutdown); the
        registration ends with the last use."""
        start = buffer.__array_interface__["data"][0]
        with self._lock:
            mapping = self._live.get(start)
            if mapping is not None and mapping.held:
                self._unhold(mapping)

    def _unhold(self, mapping: Mapping) -> None:
        mapping.held = False
        self._drop_use(mapping, keep=False)  # the pool lets the buffer go: its memory may be freed next

    def held_count(self) -> int:
        """Registrations kept for host pool buffers now."""
        with self._lock:
            return sum(m.held for m in self._live.values())

    def after(self, state: StreamState, give_back: Callable[[], None]) -> None:
        """Run ``give_back`` once ``state``'s work queued so far is known to be done."""
        with self._lock:
            self._pending.append((state, state.queued, give_back))
        self._retire()

    def _retire(self) -> None:
        """Give back what waited for streams that are past it now."""
        with self._lock:
            ready = [p for p in self._pending if p[0].done >= p[1] or not p[0].open]
            self._pending = [p for p in self._pending if p not in ready]
        for _, _, give_back in ready:
            give_back()

    def release_all(self) -> None:
        """At shutdown, after the device was synchronized: give back everything still pending."""
        with self._lock:
            pending, self._pending = self._pending, []
        for _, _, give_back in pending:
            give_back()
        with self._lock:
            parked, self._parked = list(self._parked.values()), {}
            # the pool's buffers, lent or idle: no work uses them now
            for mapping in list(self._live.values()):
                if mapping.held:
                    self._unhold(mapping)
            idle, self._idle, self._idle_bytes = list(self._idle.values()), {}, 0
            for mapping in idle:
                self._end(mapping)
        for wrapper in parked:
            wrapper.close()
