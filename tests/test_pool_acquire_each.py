"""MemoryPool.acquire_each: the blocks of a call's outputs at once, on both backends.

The usual case (every size released on the stream before) takes them under one taking of
the pool's lock; any other goes block by block through ``acquire``. Either way the blocks and
the pool's statistics are those ``acquire`` of each would give, and a failure gives back what
was taken.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pyaclnn
from pyaclnn._graph import GraphPool
from pyaclnn._pool import rounded
from pyaclnn.errors import AclOutOfMemoryError


class _CountingLock:
    """The pool's re-entrant lock, counting the outermost takings."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0
        self.taken = 0

    def acquire(self, *args: object) -> bool:
        got = self._lock.acquire(*args)
        self._depth += 1
        if self._depth == 1:
            self.taken += 1
        return got

    def release(self) -> None:
        self._depth -= 1
        self._lock.release()

    def __enter__(self) -> _CountingLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.fixture
def stream(backend):
    pyaclnn.synchronize(backend=backend)
    with pyaclnn.Stream(backend=backend) as s:
        yield s


def _released(stream, *elements):
    """Arrays of ``elements`` float32 each, made for ``stream`` and closed: their blocks, now the
    stream's released ones (the last on top)."""
    arrays = [pyaclnn.empty((n,), np.float32, backend=stream.backend, stream=stream) for n in elements]
    blocks = [array._block for array in arrays]
    for array in arrays:
        array.close()
    return blocks


def _counts(pool):
    return pool.memory_stats()


def test_sizes_the_stream_released_are_taken_at_once_and_counted_exactly(backend, stream, monkeypatch):
    pool, state = stream._state.pool, stream._state
    first, second, other = _released(stream, 1000, 1000, 100)  # 4000 B twice, 400 B
    before = _counts(pool)
    lock = _CountingLock()
    monkeypatch.setattr(pool, "_lock", lock)
    sizes = (rounded(4000), rounded(400), rounded(4000))
    blocks = pool.acquire_each(sizes, state)
    assert lock.taken == 1
    assert blocks == [second, other, first]  # as acquire of each: the last released first
    assert all(b.in_use for b in blocks)
    after = _counts(pool)
    taken = sum(sizes)
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + taken
    assert after["inactive_split_bytes.all.current"] == before["inactive_split_bytes.all.current"] - taken
    assert after["allocated_bytes.all.peak"] >= after["allocated_bytes.all.current"]
    assert after["num_device_alloc"] == before["num_device_alloc"]
    for block in blocks:
        pool.release(block, state)
    assert _counts(pool)["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]


def test_a_size_the_stream_has_not_released_takes_each_block_as_acquire_does(backend, stream):
    pool, state = stream._state.pool, stream._state
    older, newer = _released(stream, 1000, 1000)
    before = _counts(pool)
    blocks = pool.acquire_each((rounded(4000), rounded(40000)), state)
    assert blocks[0] is newer  # put back in its place, then taken by acquire
    assert blocks[1] not in (older, newer) and blocks[1].nbytes == rounded(40000)
    after = _counts(pool)
    assert after["num_device_alloc"] == before["num_device_alloc"] + 1
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"] + sum(
        b.nbytes for b in blocks
    )
    assert pool.acquire(4000, state) is older  # still there, and next
    for block in (*blocks, older):
        pool.release(block, state)


def test_an_empty_output_gets_the_empty_block(backend, stream):
    pool, state = stream._state.pool, stream._state
    (released,) = _released(stream, 1000)
    before = _counts(pool)
    blocks = pool.acquire_each((rounded(4000), 0), state)
    assert blocks == [released, pool.empty_block]
    assert (
        _counts(pool)["allocated_bytes.all.current"]
        == before["allocated_bytes.all.current"] + released.nbytes
    )
    pool.release(released, state)


def test_a_failure_gives_back_what_was_taken(backend, stream, monkeypatch):
    pool, state = stream._state.pool, stream._state
    (released,) = _released(stream, 1000)
    before = _counts(pool)

    def out_of_memory(size):
        raise AclOutOfMemoryError(207001, "aclrtMalloc", "out of memory (a test's)")

    monkeypatch.setattr(pool, "_malloc", out_of_memory)
    with pytest.raises(AclOutOfMemoryError):
        pool.acquire_each((rounded(4000), rounded(40000)), state)
    after = _counts(pool)
    for name in (
        "allocated_bytes.all.current",
        "reserved_bytes.all.current",
        "inactive_split_bytes.all.current",
    ):
        assert after[name] == before[name], name
    assert not released.in_use
    assert pool.acquire(4000, state) is released  # back with the stream
    pool.release(released, state)


def test_a_graphs_pool_gives_its_own_blocks(backend, stream):
    main = stream._state.pool
    graph_pool = GraphPool(main, lambda: None)
    try:
        blocks = graph_pool.acquire_each((rounded(4000), rounded(400)), stream._state)
        assert all(b.ptr in graph_pool._blocks and b.ptr not in main._blocks for b in blocks)
        for block in blocks:
            graph_pool.release(block, stream._state)
    finally:
        graph_pool.hand_over()
