"""A caching pool of device memory (the idea of CuPy's MemoryPool).

``aclrtMalloc``/``aclrtFree`` per call would dominate the cost of small ops,
so freed blocks are kept per rounded size and handed out again; so are the
aclTensor descriptors made for them, since the next array on a reused block
usually has the same shape. Reuse is safe because every pyaclnn call
synchronizes its stream before returning: no queued work still uses a block
that comes back to the pool. Before a descriptor is destroyed the pool says so
(``forget_descriptor``), so no cached executor outlives a descriptor it uses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import acl
from .errors import AclError, AclOutOfMemoryError

_SMALL = 512  # allocation granularity
_LARGE = 1 << 20  # above this, round to whole MiB
_CACHE_LIMIT = 1 << 30  # bytes kept for reuse; beyond it freed blocks go back to the device
_DESCRIPTORS_PER_BLOCK = 8  # more than one call uses, so a call never evicts its own


def _rounded(nbytes: int) -> int:
    unit = _SMALL if nbytes <= _LARGE else _LARGE
    return -(-nbytes // unit) * unit


class Block:
    """One device allocation: its pointer (0 once freed), size, whether an array holds it, descriptors."""

    __slots__ = ("ptr", "nbytes", "in_use", "descriptors")

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.in_use = True
        self.descriptors: dict[
            tuple, Any
        ] = {}  # (shape, strides, offset, dtype, format, storage) -> aclTensor


class MemoryPool:
    """Device memory of one backend: blocks in use and blocks cached for reuse."""

    def __init__(self, backend: str, forget_descriptor: Callable[[Any], None] | None = None) -> None:
        self.backend = backend
        # Told about every descriptor just before it is destroyed (the executor caches drop plans using it).
        self._forget_descriptor = forget_descriptor
        # Re-entrant: garbage collection may close a DeviceArray (and so call release) in any
        # allocation made while the lock is held, e.g. while a descriptor is being created.
        self._lock = threading.RLock()
        self._cached: dict[int, list[Block]] = {}  # rounded size -> blocks ready for reuse
        self._cached_bytes = 0
        self._blocks: dict[int, Block] = {}  # ptr -> every block not yet freed, in use or cached
        # Empty arrays own no memory; their descriptors are cached here, without a size limit.
        self.empty_block = Block(0, 0)

    # acquire and release run twice per output of every call: explicit lock calls in
    # try/finally and a flag on the block instead of a dict of blocks in use keep them cheap.
    def acquire(self, nbytes: int) -> Block:
        """A block of at least ``nbytes`` (> 0) bytes."""
        size = -(-nbytes // _SMALL) * _SMALL if nbytes <= _LARGE else _rounded(nbytes)
        lock = self._lock
        lock.acquire()
        try:
            blocks = self._cached.get(size)
            if blocks:
                block = blocks.pop()
                self._cached_bytes -= size
                block.in_use = True
                return block
        finally:
            lock.release()
        try:
            ptr = acl.rt.malloc(size, backend=self.backend)
        except AclOutOfMemoryError:
            self.free_all_blocks()  # cached blocks may be what is missing
            ptr = acl.rt.malloc(size, backend=self.backend)
        block = Block(ptr, size)
        with lock:
            self._blocks[ptr] = block
        return block

    def release(self, block: Block) -> None:
        """Give ``block`` back; it is cached, or freed when the cache is full. Idempotent."""
        lock = self._lock
        lock.acquire()
        try:
            if not block.in_use or not block.ptr:
                return  # released already, or freed by release_all
            block.in_use = False
            nbytes = block.nbytes
            if self._cached_bytes + nbytes <= _CACHE_LIMIT:
                blocks = self._cached.get(nbytes)
                if blocks is None:
                    blocks = self._cached[nbytes] = []
                blocks.append(block)
                self._cached_bytes += nbytes
                return
            del self._blocks[block.ptr]
        finally:
            lock.release()
        self._free(block)

    def descriptor(self, block: Block, key: tuple, create: Callable[[], Any]) -> Any:
        """The aclTensor for ``key`` on ``block``, made by ``create`` on first use."""
        handle = block.descriptors.get(key)
        if handle is None:
            evicted = None
            try:
                with self._lock:  # threads sharing an input array must not make its descriptor twice
                    handle = block.descriptors.get(key)
                    if handle is None:
                        if block.nbytes and len(block.descriptors) >= _DESCRIPTORS_PER_BLOCK:
                            _, evicted = block.descriptors.popitem()
                        handle = block.descriptors[key] = create()
            finally:
                if evicted is not None:  # outside the lock, like every destroy
                    self._destroy_descriptor(evicted)
        return handle

    def free_all_blocks(self) -> None:
        """Return every cached block to the device (blocks in use stay), as CuPy's pool does."""
        with self._lock:
            blocks = [b for bs in self._cached.values() for b in bs]
            self._cached.clear()
            self._cached_bytes = 0
            for block in blocks:
                del self._blocks[block.ptr]
        for block in blocks:
            self._free(block)

    def release_all(self) -> None:
        """Free every block, in use or cached; arrays still holding one see it closed."""
        with self._lock:
            blocks = list(self._blocks.values())
            for block in blocks:
                block.in_use = False  # a later release of an array's block is then a no-op
            self._blocks.clear()
            self._cached.clear()
            self._cached_bytes = 0
        for block in blocks:
            self._free(block)
        self._free(self.empty_block)

    def _destroy_descriptor(self, handle: Any) -> None:
        if self._forget_descriptor is not None:
            self._forget_descriptor(handle)
        try:
            acl.destroy_tensor(handle, backend=self.backend)
        except AclError:
            pass  # a descriptor the backend no longer knows: nothing left to free

    def _free(self, block: Block) -> None:
        for handle in block.descriptors.values():
            self._destroy_descriptor(handle)
        block.descriptors.clear()
        ptr, block.ptr = block.ptr, 0
        if ptr:
            acl.rt.free(ptr, backend=self.backend)

    def stats(self) -> dict[str, int]:
        """Bytes in use and cached, for ``python -m pyaclnn info`` and tests."""
        with self._lock:
            return {
                "in_use_bytes": sum(b.nbytes for b in self._blocks.values() if b.in_use),
                "cached_bytes": self._cached_bytes,
            }
