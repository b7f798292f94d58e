"""Emulated device memory: host buffers addressed by integer pointers.

Addresses are synthetic and never reused, so a freed, foreign or made-up
pointer is recognised and reported instead of touching memory. Each allocation
is a zero-initialised ``uint8`` NumPy buffer; its address is 512-byte aligned
(so 32-byte aligned, as aclrtMalloc guarantees) and followed by an unmapped
guard gap, so running off the end of one allocation never lands in another.
"""

from __future__ import annotations

import bisect
import os
import threading
from dataclasses import dataclass

import numpy as np

_ALIGN = 512
_GUARD = 1 << 20


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


@dataclass
class Allocation:
    address: int
    size: int
    buffer: np.ndarray  # uint8, exactly ``size`` bytes
    host: bool  # aclrtMallocHost memory rather than device memory


class HeapError(Exception):
    """A pointer or range the heap cannot serve; the caller maps it to a status."""


class Heap:
    """Allocation table of one emulated device, safe to use from several threads."""

    def __init__(self, base: int, capacity: int | None = None) -> None:
        self._lock = threading.Lock()
        self._next = base
        self._starts: list[int] = []  # sorted addresses of live allocations
        self._live: dict[int, Allocation] = {}
        env = os.environ.get("PYACLNN_NUMPY_DEVICE_MEMORY")
        self.capacity = int(env) if env else (capacity or _physical_memory() * 3 // 4)
        self.used = 0

    def allocate(self, size: int, host: bool = False) -> int:
        if size > self.capacity - self.used:
            raise MemoryError(
                f"cannot allocate {size} bytes: {self.capacity - self.used} of "
                f"{self.capacity} bytes of emulated device memory are free"
            )
        buffer = np.zeros(size, dtype=np.uint8)  # calloc: pages are committed lazily
        with self._lock:
            address = self._next
            self._next += (size + _ALIGN - 1) // _ALIGN * _ALIGN + _GUARD
            self._live[address] = Allocation(address, size, buffer, host)
            bisect.insort(self._starts, address)
            self.used += size
        return address

    def free(self, address: int, host: bool = False) -> None:
        with self._lock:
            alloc = self._live.get(address)
            if alloc is None or alloc.host != host:
                kind = "host" if host else "device"
                raise HeapError(f"{address:#x} is not the start of a live {kind} allocation")
            del self._live[address]
            self._starts.pop(bisect.bisect_left(self._starts, address))
            self.used -= alloc.size

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
        alloc = self.find(address)
        if alloc is None:
            raise HeapError(f"{what} {address:#x} is not inside any live allocation")
        start = address - alloc.address
        if start + count > alloc.size:
            raise HeapError(
                f"{what} {address:#x} + {count} bytes runs past the end of its "
                f"{alloc.size}-byte allocation at {alloc.address:#x}"
            )
        return alloc.buffer[start : start + count]

    def view(
        self,
        address: int,
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        offset: int,
        what: str,
    ) -> np.ndarray:
        """Strided NumPy view (strides and offset in elements) of the memory at ``address``."""
        itemsize = dtype.itemsize
        if any(d == 0 for d in shape):
            return np.empty(shape, dtype=dtype)
        low = offset + sum(s * (d - 1) for s, d in zip(strides, shape) if s < 0)
        high = offset + sum(s * (d - 1) for s, d in zip(strides, shape) if s > 0)
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
        return np.ndarray(
            shape,
            dtype=dtype,
            buffer=alloc.buffer,
            offset=base + offset * itemsize,
            strides=tuple(s * itemsize for s in strides),
        )

    def live_count(self, host: bool) -> int:
        with self._lock:
            return sum(1 for a in self._live.values() if a.host == host)
