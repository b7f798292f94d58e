"""Emulated device memory: host buffers addressed by integer pointers.

Allocated addresses are synthetic and never reused, so a freed, foreign or made-up
pointer is recognised and reported instead of touching memory. Each allocation
is a zero-initialised ``uint8`` NumPy buffer; its address is 512-byte aligned
(so 32-byte aligned, as aclrtMalloc guarantees) and followed by an unmapped
guard gap, so running off the end of one allocation never lands in another.

Host memory mapped for the device (aclrtHostRegister) gets a device address of
the same space: a *mapped* allocation whose buffer is the caller's memory. It
is not counted against the device's capacity, cannot be freed with aclrtFree
and is not for copies or memsets (CANN's rule); operators read and write it
like any device memory. Its address is a fixed function of the host address
(``_MAPPED_BASE + 2 * host``), as on a device that shares the host's page
tables: the same pages mapped again get the same device address (so the plans
and descriptors of a repeated call on the same arrays serve again), while an
address of pages not mapped now is still refused. Live mappings never overlap
(aclrtHostRegister refuses it), so the doubling leaves a gap of at least the
range's size after each, as the guard gap after an allocation.
"""

from __future__ import annotations

import bisect
import os
import threading
from dataclasses import dataclass

import numpy as np

from ... import _env

_ALIGN = 512
_GUARD = 1 << 20
_MAPPED_BASE = 1 << 60  # mapped host memory: far above anything allocate() reaches


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


@dataclass(eq=False)  # identity: tasks look their allocations up with ``is`` / ``in``
class Allocation:
    address: int
    size: int
    buffer: np.ndarray  # uint8, exactly ``size`` bytes
    host: bool  # aclrtMallocHost memory rather than device memory
    device: int = 0  # the device current in the allocating thread
    mapped: bool = False  # host memory registered with aclrtHostRegister (buffer: the caller's memory)


class HeapError(Exception):
    """A pointer or range the heap cannot serve; the caller maps it to a status."""


class Heap:
    """Allocation table of the emulated devices, safe to use from several threads.

    One address space serves every device; each allocation is tagged with its
    device, and each device has its own ``capacity`` of bytes.
    """

    def __init__(self, base: int, capacity: int | None = None) -> None:
        self._lock = threading.Lock()
        self._next = base
        self._starts: list[int] = []  # sorted addresses of live allocations
        self._live: dict[int, Allocation] = {}
        env = _env.integer("PYACLNN_NUMPY_DEVICE_MEMORY", 0, minimum=1)  # bytes; 0: unset or malformed
        self.capacity = env or capacity or _physical_memory() * 3 // 4
        self._used: dict[int, int] = {}  # bytes in use per device
        # Bumped by every free: views resolved at an unchanged generation still
        # lie in live allocations (addresses are never reused, so a new
        # allocation changes no earlier view; see Executor.bound).
        self.generation = 0

    def used(self, device: int = 0) -> int:
        """Bytes allocated on ``device`` and not freed yet."""
        with self._lock:
            return self._used.get(device, 0)

    def allocate(self, size: int, host: bool = False, device: int = 0) -> int:
        self._reserve(size, device)
        try:
            buffer = np.zeros(size, dtype=np.uint8)  # calloc: pages are committed lazily
        except MemoryError:
            self._release(size, device)
            raise
        with self._lock:
            address = self._next
            self._next += (size + _ALIGN - 1) // _ALIGN * _ALIGN + _GUARD
            self._live[address] = Allocation(address, size, buffer, host, device)
            bisect.insort(self._starts, address)
        return address

    def map(self, buffer: np.ndarray, device: int) -> int:
        """A device address for ``buffer`` (uint8, the caller's memory, page-aligned, overlapping
        no live mapping): a mapped allocation at the fixed address of its host pages."""
        size = buffer.size
        address = _MAPPED_BASE + 2 * int(buffer.__array_interface__["data"][0])
        with self._lock:
            if address in self._live:
                raise HeapError(f"host memory at device address {address:#x} is mapped already")
            self._live[address] = Allocation(address, size, buffer, False, device, mapped=True)
            bisect.insort(self._starts, address)
        return address

    def unmap(self, address: int) -> Allocation:
        """End the mapped allocation at ``address``; returns it."""
        with self._lock:
            alloc = self._live.get(address)
            if alloc is None or not alloc.mapped:
                raise HeapError(f"{address:#x} is not the start of a mapped host range")
            del self._live[address]
            self.generation += 1
            self._starts.pop(bisect.bisect_left(self._starts, address))
        return alloc

    def _reserve(self, size: int, device: int) -> None:
        """Count ``size`` bytes against ``device``'s capacity, or raise MemoryError."""
        with self._lock:
            free = self.capacity - self._used.get(device, 0)
            if size > free:
                raise MemoryError(
                    f"cannot allocate {size} bytes: {free} of "
                    f"{self.capacity} bytes of emulated device memory are free"
                )
            self._used[device] = self._used.get(device, 0) + size

    def _release(self, size: int, device: int) -> None:
        with self._lock:
            self._used[device] -= size

    def allocation(self, address: int, host: bool = False) -> Allocation:
        """The live allocation starting at ``address`` (what aclrtFree may free)."""
        with self._lock:
            alloc = self._live.get(address)
        if alloc is None or alloc.host != host:
            kind = "host" if host else "device"
            raise HeapError(f"{address:#x} is not the start of a live {kind} allocation")
        if alloc.mapped:
            raise HeapError(f"{address:#x} is host memory mapped with aclrtHostRegister, not allocated")
        return alloc

    def free(self, address: int, host: bool = False) -> None:
        alloc = self.allocation(address, host)
        with self._lock:
            if self._live.pop(address, None) is None:
                raise HeapError(f"{address:#x} was freed by another thread meanwhile")
            self.generation += 1
            self._starts.pop(bisect.bisect_left(self._starts, address))
        self._release(alloc.size, alloc.device)

    def find(self, address: int) -> Allocation | None:
        """The live allocation containing ``address``, or None."""
        with self._lock:
            i = bisect.bisect_right(self._starts, address) - 1
            if i < 0:
                return None
            alloc = self._live[self._starts[i]]
        return alloc if address < alloc.address + alloc.size else None

    def bytes_at(self, address: int, count: int, what: str) -> np.ndarray:
        """A writable uint8 view of ``count`` bytes at ``address``."""
        return self.locate_bytes(address, count, what)[0]

    def locate_bytes(self, address: int, count: int, what: str) -> tuple[np.ndarray, Allocation]:
        """:meth:`bytes_at`, and the allocation the bytes belong to."""
        alloc = self.find(address)
        if alloc is None:
            raise HeapError(f"{what} {address:#x} is not inside any live allocation")
        start = address - alloc.address
        if start + count > alloc.size:
            raise HeapError(
                f"{what} {address:#x} + {count} bytes runs past the end of its "
                f"{alloc.size}-byte allocation at {alloc.address:#x}"
            )
        return alloc.buffer[start : start + count], alloc

    def locate_view(
        self,
        address: int,
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int,
        what: str,
    ) -> tuple[np.ndarray, Allocation | None]:
        """Strided NumPy view (strides and offset in elements) of the memory at ``address``, and
        the allocation it lies in (None for an empty view, which reads no memory)."""
        itemsize = dtype.itemsize
        # One plain loop for the extent: this runs for every tensor of every launch.
        low = high = offset
        for s, d in zip(strides, shape):
            if d == 0:
                return np.empty(shape, dtype=dtype), None
            if s > 0:
                high += s * (d - 1)
            else:
                low += s * (d - 1)
        alloc = self.find(address)
        if alloc is None:
            raise HeapError(f"{what}: data address {address:#x} is not inside any live allocation")
        base = address - alloc.address
        if base + low * itemsize < 0 or base + (high + 1) * itemsize > alloc.size:
            raise HeapError(
                f"{what}: the view (shape {list(shape)}, strides {list(strides)}, offset {offset}) "
                f"reaches bytes [{base + low * itemsize}, {base + (high + 1) * itemsize}) of a "
                f"{alloc.size}-byte allocation"
            )
        array = np.ndarray(
            shape,
            dtype=dtype,
            buffer=alloc.buffer,
            offset=base + offset * itemsize,
            strides=tuple(s * itemsize for s in strides),
        )
        return array, alloc

    def live_count(self, host: bool, device: int | None = None, mapped: bool = False) -> int:
        """Live allocations of one kind, of every device or of ``device`` only."""
        with self._lock:
            return sum(
                1
                for a in self._live.values()
                if a.host == host and a.mapped == mapped and device in (None, a.device)
            )
