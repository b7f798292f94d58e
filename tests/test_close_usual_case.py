"""DeviceArray.close: the usual array (no readers, graphs or views) goes straight to its pool;
each of the others still takes its own way, on both backends.

Each test closes an array that differs from the usual one in one thing, and checks where its
block went: kept for a view, back once the last sharer closed, or released to the stream of
a replay that used it last. (An array read on other streams: tests/test_readers_together.py.)
"""

from __future__ import annotations

import numpy as np
import pytest

import pyaclnn

SHAPE = (1, 2, 4, 8, 8)


def _released_to(pool, block):
    """The streams (states) whose released lists hold ``block``."""
    return [state for state, by_size in pool._released.items() if block in by_size.get(block.nbytes, ())]


def test_the_usual_array_goes_back_to_the_stream_that_used_it_last(backend):
    with pyaclnn.Stream(backend=backend) as s:
        a = pyaclnn.zeros(SHAPE, backend=backend, stream=s)
        allocated = pyaclnn.memory_allocated(backend=backend)
        block = a._block
        a.close()
        assert a.closed and not block.in_use
        assert _released_to(s._state.pool, block) == [s._state]
        assert pyaclnn.memory_allocated(backend=backend) == allocated - block.nbytes
        a.close()  # a second close does nothing
        assert pyaclnn.memory_allocated(backend=backend) == allocated - block.nbytes


@pytest.mark.parametrize("first", ["view", "base"])
def test_an_array_sharing_its_block_keeps_it_until_the_last_sharer_closes(backend, first):
    with pyaclnn.Stream(backend=backend) as s:
        data = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)
        base = pyaclnn.to_device(data, backend=backend, stream=s)
        allocated = pyaclnn.memory_allocated(backend=backend)
        view = base.reshape(-1)
        closed, left = (view, base) if first == "view" else (base, view)
        closed.close()
        assert closed.closed and not left.closed
        assert pyaclnn.memory_allocated(backend=backend) == allocated  # kept for the other
        np.testing.assert_array_equal(left.numpy().reshape(SHAPE), data)
        left.close()  # the last sharer: now the memory goes back
        assert pyaclnn.memory_allocated(backend=backend) < allocated


def test_an_array_a_graph_wrote_goes_back_to_the_stream_of_the_replay(backend, monkeypatch):
    x = pyaclnn.to_device(np.ones(SHAPE, np.float32), backend=backend)
    y = pyaclnn.zeros(SHAPE, backend=backend)
    g = pyaclnn.Graph(backend=backend)
    with pyaclnn.graph(g):
        idx = pyaclnn.zeros(SHAPE, np.int32, backend=backend)
        pyaclnn.max_pool3d_with_argmax(x, 1, out=(y, idx), backend=backend)
    idx.close()
    with pyaclnn.Stream(backend=backend) as s:
        monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "2000")
        g.replay(s)  # writes y on s: y's last use, which its close must follow
        monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "0")
        block = y._block
        assert y._graphs is not None
        y.close()
        assert _released_to(s._state.pool, block) == [s._state]
        s.synchronize()
        g.close()
    x.close()
