"""A stream-ordered caching pool of device memory.

``aclrtMalloc``/``aclrtFree`` per call would dominate the cost of small ops,
so released blocks are kept per rounded size and handed out again; so are the
aclTensor descriptors made for them, since the next array on a reused block
usually has the same shape.

Work on a stream runs after the host has moved on, so a released block may
still be read or written by queued work. The rule, taken from CuPy's
``SingleDeviceMemoryPool`` (free lists per stream) and torch_npu's
``NPUCachingAllocator`` ("blocks can be re-allocated on the same stream, but
not on any other stream"; events recorded for cross-stream use and polled in
``process_events``):

* A block is released *to the stream of its last use* (every array remembers
  the stream of the last call that used it; calls on another stream first wait
  for that stream, so this one stream orders all its uses). That stream may
  reuse it at once: its later work runs after the earlier work.
* An array read on several streams since its last write (readers run together,
  see ``DeviceArray._readers``) has several streams of last use: before its block
  is released to one of them, :meth:`MemoryPool.join` orders that stream after
  the work queued so far on the others (an event each, recorded as a fence is),
  so the one stream again orders all uses; a capturing or closing reader takes
  the block instead, the others then waited for on the host first.
* Another stream gets it only once an event recorded on the first stream
  after the release has completed. Such a *fence* is recorded when a stream
  finds nothing of the size it needs, covers every block released on that
  stream so far, and is polled, never waited for, on the allocation path.
* Nothing is freed to the device while queued work may use it: blocks beyond
  the cache limit, ``free_all_blocks``, the out-of-memory retry and
  ``release_all`` free only idle blocks, waiting on fences where they must
  (``aclrtSynchronizeEvent``, which leaves a device error to the stream's own
  next synchronize).
* A stream that was synchronized or closed hands its blocks over as idle.

Before a descriptor is destroyed the pool says so (``forget_descriptor``), so
no cached executor outlives a descriptor it uses.

The lock discipline, for the pool, its fences and the streams and executors it
works with (any thread may call any of them, at any time):

* Locks are taken in one order only: a stream's lock (``StreamState.lock``,
  held by each enqueue and by a close), then the pool's lock, then an executor
  cache's own lock. The pool never takes a stream's lock; an executor cache
  takes its stream's lock only without blocking, so a garbage collection that
  runs inside one stream's launch can never wait for another stream.
* Bookkeeping changes only after what it records happened: blocks set aside for
  a synchronize become idle once the wait returned, and go back to their
  stream if it raised (KeyboardInterrupt, a device error).
* A fence's event is destroyed by the one thread that retires the fence: the
  poll (under the pool's lock), a synchronize of its stream, or
  ``free_all_blocks``, which first takes the fences it waits on out of the list
  so that no other thread retires them meanwhile, and puts back those it did
  not get to if a wait raised.
* A stream being closed is marked ``closing`` under the pool's lock before its
  close waits for it: from then on no fence is recorded on it (its blocks are
  handed over by the close), and once it is closed a block released to it is
  idle at once (the close waited for all its work).
* A stream that captures (``pyaclnn._graph``) is marked ``capturing`` under the
  pool's lock before its capture begins, until it has ended: no fence is
  recorded on it meanwhile (the record would become a step of the graph); its
  blocks wait for its next synchronize.
* Every ACL call is made with the pool's device bound to the calling thread.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from . import acl
from ._decl import constant
from .errors import AclError, AclOutOfMemoryError

_SMALL = 512  # allocation granularity
_SMALL_UP, _SMALL_MASK = _SMALL - 1, -_SMALL  # (nbytes + _SMALL_UP) & _SMALL_MASK: nbytes rounded up
_LARGE = 1 << 20  # above this, round to whole MiB
_CACHE_LIMIT = 1 << 30  # bytes kept for reuse; beyond it released blocks go back to the device
_DESCRIPTORS_PER_BLOCK = 8  # more than one call uses, so a call never evicts its own
_COMPLETE = constant("ACL_EVENT_RECORDED_STATUS_COMPLETE")


def _rounded(nbytes: int) -> int:
    unit = _SMALL if nbytes <= _LARGE else _LARGE
    return -(-nbytes // unit) * unit


#: The size of the block the pool gives for ``nbytes``: what :meth:`MemoryPool.acquire_each` takes.
rounded = _rounded


class Block:
    """One device allocation: its pointer (0 once freed), size, whether an array holds it, descriptors,
    and whether it is gone (freed: arrays still holding it are closed)."""

    __slots__ = ("ptr", "nbytes", "in_use", "descriptors", "gone")

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.in_use = True
        self.gone = False
        # (shape, strides, offset, dtype, format, storage) -> aclTensor
        self.descriptors: dict[tuple[Any, ...], Any] = {}


_BySize = defaultdict[int, deque[Block]]  # size -> blocks


class _Fence:
    """Blocks released on one stream before ``event`` was recorded there; idle once it completes."""

    __slots__ = ("stream", "event", "blocks", "free")

    def __init__(self, stream: Any, event: Any, blocks: list[Block], free: bool) -> None:
        self.stream = stream  # the stream's state object (its key in the pool)
        self.event = event
        self.blocks = blocks
        self.free = free  # beyond the cache limit: freed, not cached, once idle


class MemoryPool:
    """Memory of one device of one backend: blocks in use, released per stream, and idle.

    Streams are keys here through a small state object with a ``handle``
    attribute (the aclrtStream); ``None`` stands for "no queued work can use
    the block" (an array no launch has used). ``on_device(d)`` makes device
    ``d`` current for a block of code (allocations, frees and fences are made
    on the pool's device).
    """

    def __init__(
        self,
        backend: str,
        forget_descriptor: Callable[[Any], None] | None = None,
        device: int = 0,
        on_device: Callable[[int], AbstractContextManager[None]] | None = None,
    ) -> None:
        self.backend = backend
        self.device = device
        self._on_device = on_device or (lambda device: contextlib.nullcontext())
        # Told about every descriptor just before it is destroyed (the executor caches drop plans using it).
        self._forget_descriptor = forget_descriptor
        # Re-entrant: garbage collection may close a DeviceArray (and so call release) in any
        # allocation made while the lock is held, e.g. while a descriptor is being created.
        self._lock = threading.RLock()
        # Free lists are deques (a list shrunk to no item and grown again reallocates its storage,
        # and the usual one holds one block, taken and given back by every call), by size in
        # defaultdicts (a subscript is cheaper than a get call).
        self._released: dict[Any, _BySize] = {}  # stream -> size -> blocks
        self._idle: _BySize = defaultdict(deque)  # size -> blocks no queued work uses
        self._fences: list[_Fence] = []
        self._cached_bytes = 0  # released, idle and fenced (not to be freed) blocks
        self._blocks: dict[int, Block] = {}  # ptr -> every block not yet freed
        # Empty arrays own no memory; their descriptors are cached here, without a size limit.
        self._empty_block = Block(0, 0)
        # Pools of live graphs (pyaclnn._graph.GraphPool) on this device: release_all releases
        # them first, since their graphs' executors use descriptors of this pool's blocks.
        self._children: weakref.WeakSet[MemoryPool] = weakref.WeakSet()
        # Memory statistics of the device (torch.cuda's names, see memory_stats), counted under
        # the lock of ``_counts``: this pool, or for a graph's pool the device's, so that blocks
        # moving between them count once. Changed only once what they count happened.
        self._counts: MemoryPool = self
        self._allocated = 0  # bytes of blocks arrays (or workspaces) hold
        self._reserved = 0  # bytes of blocks not freed: held or cached
        self._peak_allocated = 0
        self._peak_reserved = 0
        self._device_allocs = 0  # aclrtMalloc calls that succeeded
        self._device_frees = 0
        self._alloc_retries = 0  # out of memory, cached blocks freed, aclrtMalloc again
        self._ooms = 0  # ... and out of memory again

    @property
    def empty_block(self) -> Block:
        """The one block of empty arrays (no memory), which caches their descriptors."""
        return self._empty_block

    def _count(self, allocated: int, reserved: int = 0) -> None:
        """``allocated`` and ``reserved`` bytes more (or fewer), in the device's statistics."""
        counts = self._counts
        with counts._lock:
            counts._allocated = a = counts._allocated + allocated
            counts._reserved = r = counts._reserved + reserved
            if a > counts._peak_allocated:
                counts._peak_allocated = a
            if r > counts._peak_reserved:
                counts._peak_reserved = r
            if reserved > 0:
                counts._device_allocs += 1
            elif reserved < 0:
                counts._device_frees += 1

    # acquire and release run for every output of every call: the usual case (a block of the
    # size the stream released last time) comes first, in explicit lock calls in try/finally,
    # and the rest is in helpers.
    def acquire(self, nbytes: int, stream: Any = None) -> Block:
        """A block of at least ``nbytes`` (> 0) bytes for work queued on ``stream``."""
        size = (nbytes + _SMALL_UP) & _SMALL_MASK if nbytes <= _LARGE else _rounded(nbytes)
        lock = self._lock
        lock.acquire()
        try:
            own = self._released.get(stream)
            blocks = own[size] if own is not None else None
            if not blocks:
                blocks = self._cached(size, stream)
            if blocks:
                block = blocks.pop()
                self._cached_bytes -= size
                block.in_use = True
                self._allocated = allocated = self._allocated + size  # _count, inline: every call
                if allocated > self._peak_allocated:
                    self._peak_allocated = allocated
                return block
        finally:
            lock.release()
        block = Block(self._malloc(size), size)
        with lock:
            self._blocks[block.ptr] = block
            self._count(size, size)
        return block

    def acquire_each(self, sizes: Sequence[int], stream: Any = None) -> list[Block]:
        """A block of each of ``sizes`` (each a size :func:`rounded` gave; 0: the empty block) for
        work queued on ``stream``, as :meth:`acquire` of each gives them; the usual case, a block of
        each size that the stream released, under one taking of the lock (the outputs of a call)."""
        lock = self._lock
        lock.acquire()
        try:
            own = self._released.get(stream)
            if own is not None:
                taken: list[Block] = []
                total = 0
                for size in sizes:
                    blocks = own[size]
                    if not blocks:
                        for block in reversed(taken):  # back where they were, in their order
                            block.in_use = False
                            own[block.nbytes].append(block)
                        break
                    block = blocks.pop()
                    block.in_use = True
                    taken.append(block)
                    total += size
                else:
                    self._cached_bytes -= total
                    self._allocated = allocated = self._allocated + total  # _count, inline
                    if allocated > self._peak_allocated:
                        self._peak_allocated = allocated
                    return taken
        finally:
            lock.release()
        return self._each(sizes, stream)

    def _each(self, sizes: Sequence[int], stream: Any) -> list[Block]:
        """:meth:`acquire` of each of ``sizes`` (0: the empty block); those taken go back if one fails."""
        taken: list[Block] = []
        try:
            for size in sizes:
                taken.append(self.acquire(size, stream) if size else self._empty_block)
        except BaseException:
            for block in taken:
                if block.nbytes:
                    self.release(block, stream)  # nothing was queued on it
            raise
        return taken

    def _malloc(self, size: int) -> int:
        """``aclrtMalloc`` of ``size`` bytes; out of memory, once more after freeing the cached blocks."""
        with self._on_device(self.device):
            try:
                return acl.rt.malloc(size, backend=self.backend)
            except AclOutOfMemoryError:
                counts = self._counts
                with counts._lock:
                    counts._alloc_retries += 1
                self.free_all_blocks()  # cached blocks may be what is missing
                try:
                    return acl.rt.malloc(size, backend=self.backend)
                except AclOutOfMemoryError:
                    with counts._lock:
                        counts._ooms += 1
                    raise

    def release(self, block: Block, stream: Any = None) -> None:
        """Give ``block`` back after its last use was queued on ``stream``. Idempotent."""
        lock = self._lock
        lock.acquire()
        try:
            if not block.in_use or not block.ptr:
                return  # released already, or freed by release_all
            block.in_use = False
            nbytes = block.nbytes
            self._allocated -= nbytes
            cached = self._cached_bytes + nbytes
            own = self._released.get(stream)  # (None for no stream: never a key)
            # the usual case: an open stream that has released blocks before, room in the cache
            if own is not None and cached <= _CACHE_LIMIT and stream.open:
                own[nbytes].append(block)
                self._cached_bytes = cached
                return
            if not self._keep(block, stream):
                return
        finally:
            lock.release()
        self._free(block)

    def join(self, stream: Any, readers: Sequence[Any]) -> tuple[Any, list[Any]]:
        """The stream to release a block to whose last uses were queued on ``stream`` (None: no
        queued work) and on ``readers``: ``stream``, else the first reader with pending work,
        ordered on the device after the work queued so far on the other readers (an event each,
        recorded as a fence is: no stream's lock is taken). A reader that is capturing or closing
        (no event may be recorded there) is chosen instead, as the stream that hands the block
        over after its next synchronize or its close. Also returns the streams it could not order
        so: the caller waits for them on the host before the release.
        """
        with self._lock:
            pending = [r for r in readers if r is not stream and r.open and r.queued != r.done]
            unfenced = [r for r in pending if _unfenced(r)]
            if unfenced:  # a capturing (or closing) reader takes the block: it hands it over itself
                left = [r for r in pending if r is not unfenced[0]]
                if stream is not None and stream.open and stream.queued != stream.done:
                    left.append(stream)
                return unfenced[0], left
            if stream is None or not stream.open:
                if not pending:
                    return None, []
                stream = pending.pop(0)
            if not pending or _unfenced(stream):
                return stream, pending
            left = []
            for reader in pending:
                if _unfenced(reader):
                    left.append(reader)
                    continue
                event = self._record(reader)
                try:
                    with self._on_device(self.device):
                        acl.rt.stream_wait_event(stream.handle, event, backend=self.backend)
                finally:
                    # CANN lets an event be destroyed while pending; the queued wait still holds.
                    _quiet(acl.rt.destroy_event, event, backend=self.backend)
            return stream, left

    def _cached(self, size: int, stream: Any) -> deque[Block] | None:
        """Blocks of ``size`` that ``stream`` may use, other than those it released (caller holds the lock).

        A fence over ``stream`` (its own work orders the block), else idle blocks, else those
        of completed fences, once other streams holding the size are fenced (polled, never waited for).
        """
        blocks = self._own_fenced(size, stream) if self._fences else None
        if not blocks:
            blocks = self._idle.get(size)
            if not blocks and self._other_streams_hold(size, stream):
                self._poll_fences(fence_size=size, asking=stream)
                blocks = self._idle.get(size)
        return blocks

    def _keep(self, block: Block, stream: Any) -> bool:
        """Cache ``block``, just released on ``stream``, or fence it; whether to free it now.

        The part of :meth:`release` beyond its usual case; the caller holds the lock.
        """
        nbytes = block.nbytes
        if stream is not None and not stream.open:
            stream = None  # its close waited for all its work
        if self._cached_bytes + nbytes <= _CACHE_LIMIT or (stream is not None and _unfenced(stream)):
            # (A closing or capturing stream gets no fence: its close or next synchronize
            # hands the block over.)
            if stream is None:
                self._idle[nbytes].append(block)
            else:
                self._released.setdefault(stream, defaultdict(deque))[nbytes].append(block)
            self._cached_bytes += nbytes
            return False
        if stream is not None:  # over the limit, and queued work may still use it
            self._fences.append(_Fence(stream, self._record(stream), [block], free=True))
            return False
        del self._blocks[block.ptr]
        return True

    def stream_synchronizing(self, stream: Any) -> tuple[Any, _BySize, list[_Fence]]:
        """Set aside what ``stream`` released so far: idle once the synchronize about to start returns.

        Blocks released while it runs stay the stream's: their last use may be queued after it began.
        The caller hands the result to :meth:`stream_synchronized` if the wait returned, else to
        :meth:`stream_unsynchronized`.
        """
        with self._lock:
            fences = [f for f in self._fences if f.stream is stream] if self._fences else []
            return stream, self._released.pop(stream, None) or defaultdict(deque), fences

    def stream_synchronized(self, token: tuple[Any, _BySize, list[_Fence]]) -> None:
        """The synchronize of :meth:`stream_synchronizing` returned: what it set aside is idle."""
        _, by_size, fences = token
        if by_size:
            with self._lock:
                for size, blocks in by_size.items():
                    self._idle[size].extend(blocks)
        for fence in fences:
            self._retire(fence)

    def stream_unsynchronized(self, token: tuple[Any, _BySize, list[_Fence]]) -> None:
        """The synchronize of :meth:`stream_synchronizing` raised: the blocks are the stream's again.

        Unless the stream was closed meanwhile (its close waited for its work): then they are idle.
        """
        stream, by_size, _ = token
        if not by_size:
            return
        with self._lock:
            if stream.open:
                own = self._released.setdefault(stream, defaultdict(deque))
                for size, blocks in by_size.items():
                    own[size].extend(blocks)
            else:
                for size, blocks in by_size.items():
                    self._idle[size].extend(blocks)

    def stream_closing(self, stream: Any, closing: bool) -> None:
        """``stream``'s close waits for it (``closing``), or that wait raised: no fence is recorded
        on a closing stream, since its close is about to destroy it."""
        with self._lock:
            stream.closing = closing

    def stream_capturing(self, stream: Any, capturing: bool) -> None:
        """``stream`` is about to capture (``capturing``), or its capture ended or failed to begin:
        no fence is recorded on a capturing stream, since the record would be captured."""
        with self._lock:
            stream.capturing = capturing

    def stream_idle(self, stream: Any) -> None:
        """``stream`` has finished all its work for good (closed): its blocks become idle."""
        self.stream_synchronized(self.stream_synchronizing(stream))

    def descriptor(self, block: Block, key: tuple[Any, ...], create: Callable[[], Any]) -> Any:
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
        """Return every cached block to the device once no queued work uses it (blocks in use stay).

        Waits for the streams the blocks were released on (through events), as
        CuPy's ``free_all_blocks`` frees only what no stream still needs. Any
        thread may call it, while others allocate; blocks of a stream being
        closed are left to that close. If a wait raises, the fences not yet
        waited for are kept, and a later call goes on.
        """
        with self._lock:
            for stream in [
                s for s, by_size in self._released.items() if any(by_size.values()) and not _unfenced(s)
            ]:
                self._fences.append(self._fence(stream))
            # Taken out of the list: no other thread polls, retires or destroys them meanwhile.
            claimed, self._fences = self._fences, []
        waited = 0
        try:
            with self._on_device(self.device):
                for fence in claimed:
                    acl.rt.synchronize_event(fence.event, backend=self.backend)
                    waited += 1
                    self._retire(fence, claimed=True)
        finally:
            if waited < len(claimed):
                with self._lock:
                    self._fences.extend(claimed[waited:])
        with self._lock:
            blocks = [b for bs in self._idle.values() for b in bs]
            self._idle.clear()
            self._cached_bytes -= sum(b.nbytes for b in blocks)
            for block in blocks:
                del self._blocks[block.ptr]
        for block in blocks:
            self._free(block)

    def release_all(self) -> None:
        """Free every block, in use or cached; arrays still holding one see it closed.

        The caller (finalize) has waited for the device first.
        """
        for child in list(self._children):
            child.release_all()
        with self._lock:
            blocks = list(self._blocks.values())
            for block in blocks:
                if block.in_use:
                    self._count(-block.nbytes)
                block.in_use = False  # a later release of an array's block is then a no-op
            fences, self._fences = self._fences, []
            self._blocks.clear()
            self._released.clear()
            self._idle.clear()
            self._cached_bytes = 0
        with self._on_device(self.device):
            for fence in fences:
                _quiet(acl.rt.destroy_event, fence.event, backend=self.backend)
        for block in blocks:
            self._free(block)
        self._free(self._empty_block)

    def forget_foreign(self, block: Block) -> None:
        """A wrapper of memory the pool does not own is gone: destroy its descriptors, free nothing.

        Its launches captured the descriptors; its executors go first (``forget_descriptor``).
        """
        with self._lock:
            handles = list(block.descriptors.values())
            block.descriptors.clear()
            block.ptr = 0
            block.gone = True
        for handle in handles:
            self._destroy_descriptor(handle)

    def stats(self) -> dict[str, int]:
        """Bytes in use and cached, for ``python -m pyaclnn info`` and tests."""
        with self._lock:
            return {
                "in_use_bytes": sum(b.nbytes for b in self._blocks.values() if b.in_use),
                "cached_bytes": self._cached_bytes,
            }

    def memory_stats(self) -> dict[str, int]:
        """The device's memory statistics under torch.cuda's names (see :func:`pyaclnn.memory_stats`)."""
        with self._lock:
            return {
                "allocated_bytes.all.current": self._allocated,
                "allocated_bytes.all.peak": self._peak_allocated,
                "reserved_bytes.all.current": self._reserved,
                "reserved_bytes.all.peak": self._peak_reserved,
                "inactive_split_bytes.all.current": self._cached_bytes,  # cached: reserved, not held
                "num_device_alloc": self._device_allocs,
                "num_device_free": self._device_frees,
                "num_alloc_retries": self._alloc_retries,
                "num_ooms": self._ooms,
            }

    def _counts_of(self, name: str) -> int:
        """One counter of the device's statistics (``_allocated``, ...), read under its lock."""
        with self._lock:
            return int(getattr(self, name))

    def reset_peak(self) -> None:
        """The peaks start again from the current values (``reset_peak_memory_stats``)."""
        with self._lock:
            self._peak_allocated = self._allocated
            self._peak_reserved = self._reserved

    def __repr__(self) -> str:
        with self._lock:
            allocated, reserved = self._allocated, self._reserved
        return (
            f"<pyaclnn.MemoryPool backend={self.backend!r} device={self.device} "
            f"allocated={allocated} reserved={reserved}>"
        )

    # -- fences ---------------------------------------------------------------
    def _other_streams_hold(self, size: int, asking: Any) -> bool:
        """Whether a fence could yield a block of ``size``: another stream has one, or a fence is out."""
        if self._fences:
            return True
        return any(s is not asking and by_size.get(size) for s, by_size in self._released.items())

    def _own_fenced(self, size: int, stream: Any) -> deque[Block] | None:
        """A one-block deque of ``size`` from a fence over ``stream`` (its own work orders it), or None.

        Caller holds the lock.
        """
        if stream is None:
            return None
        for fence in self._fences:
            if fence.stream is stream and not fence.free:
                for i, block in enumerate(fence.blocks):
                    if block.nbytes == size:
                        return deque((fence.blocks.pop(i),))
        return None

    def _poll_fences(self, fence_size: int, asking: Any) -> None:
        """Move the blocks of completed fences to idle; fence streams holding ``fence_size`` blocks.

        Caller holds the lock. Polls only: an allocation never waits for another stream.
        """
        fenced = {f.stream for f in self._fences}
        with self._on_device(self.device):
            for stream, by_size in list(self._released.items()):
                if (
                    stream is not asking
                    and stream not in fenced
                    and not _unfenced(stream)
                    and by_size.get(fence_size)
                ):
                    self._fences.append(self._fence(stream))
            for fence in list(self._fences):
                if acl.rt.query_event_status(fence.event, backend=self.backend) == _COMPLETE:
                    self._retire(fence)

    def _fence(self, stream: Any) -> _Fence:
        """A fence over every block released on ``stream`` so far (caller holds the lock)."""
        by_size = self._released.pop(stream, None) or defaultdict(deque)
        blocks = [b for bs in by_size.values() for b in bs]
        return _Fence(stream, self._record(stream), blocks, free=False)

    def _record(self, stream: Any) -> Any:
        with self._on_device(self.device):
            event = acl.rt.create_event(backend=self.backend)
            try:
                acl.rt.record_event(event, stream.handle, backend=self.backend)
            except BaseException:
                _quiet(acl.rt.destroy_event, event, backend=self.backend)
                raise
        return event

    def _retire(self, fence: _Fence, claimed: bool = False) -> None:
        """The fence's work is done: cache its blocks as idle (or free them) and destroy its event.

        ``claimed``: the caller took the fence out of the list (free_all_blocks) and is its
        only user; otherwise it is retired only if still listed, by one thread.
        """
        freed = []
        with self._lock:
            if not claimed:
                if fence not in self._fences:
                    return  # retired already, or claimed by a thread waiting on it
                self._fences.remove(fence)
            for block in fence.blocks:
                if fence.free:
                    if self._blocks.pop(block.ptr, None) is not None:
                        freed.append(block)
                else:
                    self._idle[block.nbytes].append(block)
        with self._on_device(self.device):
            _quiet(acl.rt.destroy_event, fence.event, backend=self.backend)
        for block in freed:
            self._free(block)

    # -- freeing ----------------------------------------------------------------
    def _destroy_descriptor(self, handle: Any) -> None:
        if self._forget_descriptor is not None:
            self._forget_descriptor(handle)
        _quiet(acl.destroy_tensor, handle, backend=self.backend)  # unknown to the backend: nothing to free

    def _free(self, block: Block) -> None:
        for handle in block.descriptors.values():
            self._destroy_descriptor(handle)
        block.descriptors.clear()
        ptr, block.ptr = block.ptr, 0
        if ptr:
            block.gone = True  # (the empty block has no memory to free and stays)
            with self._on_device(self.device):
                acl.rt.free(ptr, backend=self.backend)
            self._count(0, -block.nbytes)


def _unfenced(stream: Any) -> bool:
    """Whether no fence may be recorded on ``stream`` now (caller holds the pool's lock)."""
    return bool(stream.closing or stream.capturing)


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        fn(*args, **kwargs)
    except AclError:
        pass  # best effort: the error that brought us here, if any, says more
