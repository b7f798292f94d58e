"""A replay's bookkeeping is per graph (pyaclnn._array.ReplayOrder), not per array, and still orders
every use of the graph's arrays: eager reads, writes and closes after a pending replay, replays after
eager uses, graphs that share an array, arrays freed between replays.

Each test makes one side slow (PYACLNN_EMU_KERNEL_US, read when a call is captured or queued), so
an order that is missing lets the fast side read or overwrite data too early, and the result differs
from the eager call's on the same data (the backend fixture also fails a test on any hazard).
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pyaclnn

RNG = np.random.default_rng(4444)
SHAPE = (1, 2, 4, 8, 8)
SLOW_US = "3000"


def _pooled(x: np.ndarray, backend: str) -> np.ndarray:
    """The eager result on NumPy data: what a replay on the same data must give."""
    return pyaclnn.max_pool3d_with_argmax(x, 1, backend=backend)[0]


def _capture_pools(
    b: str, x: pyaclnn.DeviceArray, out: pyaclnn.DeviceArray, monkeypatch: pytest.MonkeyPatch, kernel_us: str
) -> pyaclnn.Graph:
    """A graph writing ``out`` = max pool (kernel 1: the values themselves) of ``x``, four times over:
    each replay takes four kernels of ``kernel_us``. Its indices are graph memory."""
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", kernel_us)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        idx = pyaclnn.zeros(out.shape, np.int32, backend=b)
        for _ in range(4):
            pyaclnn.max_pool3d_with_argmax(x, 1, out=(out, idx), backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "0")
    idx.close()  # the graph's memory: the replays go on writing it
    return g


def _data() -> tuple[np.ndarray, np.ndarray]:
    return RNG.standard_normal(SHAPE, dtype=np.float32), RNG.standard_normal(SHAPE, dtype=np.float32)


def test_a_replay_of_a_graph_reading_an_array_waits_for_the_pending_replay_of_one_writing_it(
    backend, monkeypatch
):
    b = backend
    first, second = _data()
    x = pyaclnn.to_device(first, backend=b)
    y = pyaclnn.zeros(SHAPE, backend=b)
    z = pyaclnn.zeros(SHAPE, backend=b)
    writes = _capture_pools(b, x, y, monkeypatch, SLOW_US)  # y from x, slowly
    reads = _capture_pools(b, y, z, monkeypatch, "0")  # z from y, at once
    s1, s2 = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    for data in (first, second):
        x.copy_(data, stream=s1)
        writes.replay(s1)
        reads.replay(s2)  # must wait for s1's replay: the graphs share y
        np.testing.assert_array_equal(z.numpy(), _pooled(data, b))
    writes.close()
    reads.close()
    for a in (x, y, z, s1, s2):
        a.close()


def test_a_replay_of_a_graph_writing_an_array_waits_for_the_pending_replay_of_one_reading_it(
    backend, monkeypatch
):
    b = backend
    first, second = _data()
    x = pyaclnn.to_device(first, backend=b)
    y = pyaclnn.zeros(SHAPE, backend=b)
    z = pyaclnn.zeros(SHAPE, backend=b)
    writes = _capture_pools(b, x, y, monkeypatch, "0")  # y from x, at once
    reads = _capture_pools(b, y, z, monkeypatch, SLOW_US)  # z from y, slowly
    s1, s2 = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    writes.replay(s1)
    reads.replay(s2)
    x.copy_(second, stream=s1)
    writes.replay(s1)  # must not overwrite y before s2's replay has read it
    np.testing.assert_array_equal(z.numpy(), _pooled(first, b))
    np.testing.assert_array_equal(y.numpy(), _pooled(second, b))
    writes.close()
    reads.close()
    for a in (x, y, z, s1, s2):
        a.close()


def test_an_array_captured_in_two_graphs_follows_the_later_replay(backend, monkeypatch):
    b = backend
    first, second = _data()
    x1 = pyaclnn.to_device(first, backend=b)
    x2 = pyaclnn.to_device(second, backend=b)
    y = pyaclnn.zeros(SHAPE, backend=b)
    g1 = _capture_pools(b, x1, y, monkeypatch, "0")
    g2 = _capture_pools(b, x2, y, monkeypatch, SLOW_US)
    s1, s2, reading = (pyaclnn.Stream(backend=b) for _ in range(3))
    g1.replay(s1)
    g2.replay(s2)  # after g1's: the last write of y
    copy = pyaclnn.empty_like(y, stream=reading).copy_(y, stream=reading)
    np.testing.assert_array_equal(copy.numpy(), _pooled(second, b))
    g2.replay(s2)
    g1.replay(s1)  # now g1's is the last write
    np.testing.assert_array_equal(y.numpy(), _pooled(first, b))
    g1.close()
    g2.close()
    for a in (x1, x2, y, copy, s1, s2, reading):
        a.close()


def test_an_eager_write_on_another_stream_waits_for_the_pending_replay_reading_the_array(
    backend, monkeypatch
):
    b = backend
    first, second = _data()
    x = pyaclnn.to_device(first, backend=b)
    out = pyaclnn.zeros(SHAPE, backend=b)
    g = _capture_pools(b, x, out, monkeypatch, SLOW_US)
    s1, s2 = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    g.replay(s1)
    x.copy_(second, stream=s2)  # must wait until the replay has read x
    np.testing.assert_array_equal(out.numpy(), _pooled(first, b))
    g.replay(s1)  # and this replay after that write, on another stream
    np.testing.assert_array_equal(out.numpy(), _pooled(second, b))
    g.close()
    for a in (x, out, s1, s2):
        a.close()


def test_an_eager_call_on_the_stream_that_used_an_array_last_waits_for_a_replay_since(backend, monkeypatch):
    b = backend
    first = _data()[0]
    x = pyaclnn.to_device(first, backend=b)
    out = pyaclnn.zeros(SHAPE, backend=b)
    g = _capture_pools(b, x, out, monkeypatch, SLOW_US)
    s1, s2 = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    out.fill_zero(s2)  # out's last use is on s2 ...
    s2.synchronize()
    g.replay(s1)  # ... then a replay on s1 writes it, slowly
    got, _ = pyaclnn.max_pool3d_with_argmax(out, 1, stream=s2, backend=b)  # must wait for s1
    np.testing.assert_array_equal(got.numpy(), _pooled(first, b))
    g.close()
    for a in (x, out, got, s1, s2):
        a.close()


def test_a_repeated_generic_call_on_the_stream_that_used_an_array_last_waits_for_a_replay_since(
    active, monkeypatch
):
    # pyaclnn.ops' shortcut for repeated calls orders its arrays itself: it must see the replay too
    b = active
    first = _data()[0]
    x = pyaclnn.to_device(first, backend=b)
    out = pyaclnn.zeros(SHAPE, backend=b)
    total = pyaclnn.zeros(SHAPE, backend=b)
    g = _capture_pools(b, x, out, monkeypatch, SLOW_US)
    s1, s2 = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    for _ in range(2):  # the second call takes the shortcut
        pyaclnn.ops.add(total, total, 1, out=total, stream=s2)
    out.fill_zero(s2)  # out's last use is on s2 ...
    s2.synchronize()
    g.replay(s1)  # ... then a replay on s1 writes it, slowly
    pyaclnn.ops.add(out, total, 1, out=total, stream=s2)  # must wait for s1
    np.testing.assert_array_equal(total.numpy(), _pooled(first, b))
    g.close()
    for a in (x, out, total, s1, s2):
        a.close()


def test_an_input_closed_under_a_pending_replay_goes_to_no_other_stream_before_it_ran(backend, monkeypatch):
    b = backend
    first, second = _data()
    x = pyaclnn.to_device(first, backend=b)
    out = pyaclnn.zeros(SHAPE, backend=b)
    g = _capture_pools(b, x, out, monkeypatch, SLOW_US)
    s1, s2 = pyaclnn.Stream(backend=b), pyaclnn.Stream(backend=b)
    s2.synchronize()
    g.replay(s1)
    ptr = x.ptr
    x.close()  # its block goes back to the pool on the replay's stream
    other = pyaclnn.empty(SHAPE, stream=s2, backend=b)
    if other.ptr == ptr:  # reused at once only once the replay is past it
        assert s1.query()
    other.copy_(second, stream=s2)
    np.testing.assert_array_equal(out.numpy(), _pooled(first, b))
    with pytest.raises(ValueError, match=r"replay\(\): .* was closed"):
        g.replay(s1)
    g.close()
    for a in (out, other, s1, s2):
        a.close()


def test_a_graph_output_closed_between_replays_keeps_its_memory_for_the_next(backend, monkeypatch):
    b = backend
    first, second = _data()
    x = pyaclnn.to_device(first, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", SLOW_US)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        y, idx = pyaclnn.max_pool3d_with_argmax(x, 1, backend=b)  # graph memory
        z, idz = pyaclnn.max_pool3d_with_argmax(y, 1, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "0")
    s = pyaclnn.Stream(backend=b)
    g.replay(s)
    y.close()  # under the pending replay: the graph keeps its memory
    x.copy_(second, stream=s)
    g.replay(s)
    others = [pyaclnn.zeros(SHAPE, backend=b) for _ in range(3)]  # none gets y's memory meanwhile
    np.testing.assert_array_equal(z.numpy(), _pooled(second, b))
    g.close()
    for a in (x, idx, z, idz, s, *others):
        a.close()


def test_replays_from_threads_of_graphs_sharing_an_array_follow_each_other(backend, monkeypatch):
    b = backend
    first = _data()[0]
    x = pyaclnn.to_device(first, backend=b)
    y = pyaclnn.zeros(SHAPE, backend=b)
    z = pyaclnn.zeros(SHAPE, backend=b)
    writes = _capture_pools(b, x, y, monkeypatch, SLOW_US)
    reads = _capture_pools(b, y, z, monkeypatch, "0")
    written = threading.Event()
    errors: list[BaseException] = []

    def replay(g: pyaclnn.Graph, before: threading.Event | None, after: threading.Event | None) -> None:
        try:
            with pyaclnn.Stream(backend=b) as s:
                if before is not None:
                    assert before.wait(10)
                g.replay(s)  # one thread's replay orders the other's
                if after is not None:
                    after.set()
                for _ in range(3):  # and more of them at once, from both threads
                    g.replay(s)
                s.synchronize()
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)

    threads = [
        threading.Thread(target=replay, args=(writes, None, written)),
        threading.Thread(target=replay, args=(reads, written, None)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    np.testing.assert_array_equal(z.numpy(), _pooled(first, b))  # never the zeros y held before
    writes.close()
    reads.close()
    for a in (x, y, z):
        a.close()
