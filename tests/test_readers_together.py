"""Readers run together: a read waits for the last write only, a write for the last write and
every read since, on both backends.

Slow simulated kernels (``PYACLNN_EMU_KERNEL_US``) keep the work pending where the order
matters; several threads launch at once, as users do. The overlap is read off events:
the second stream's kernel ends less than one kernel after the first's, so it started
before the first's ended. A free under queued work would be a hazard, which the
``backend`` fixture fails on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pyaclnn

SLOW_US = 300_000  # a kernel's simulated device time: observably pending
X = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)  # increasing: each window's max is its last
POOLED = X[:, :, 1::2, 1::2, 1::2]  # the max of every 2x2x2 window


@pytest.fixture
def slow_kernels(monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(SLOW_US))


def _in_threads(*work: Callable[[], Any]) -> list[Any]:
    """Run each of ``work`` in a thread of its own, all released together; their results."""
    barrier = threading.Barrier(len(work))
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work[i]()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    return results


def _pool_on(x: pyaclnn.DeviceArray, stream: pyaclnn.Stream, backend: str) -> Any:
    """A slow read of ``x`` on ``stream``: its outputs and an event recorded after it."""
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=stream)
    return out, idx, stream.record_event()


def test_two_streams_reading_one_array_overlap(backend, slow_kernels, monkeypatch):
    from pyaclnn._stream import StreamState

    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    a.synchronize()
    waits: list[tuple[str, str]] = []
    wait_for = StreamState.wait_for

    def counted(self: StreamState, other: StreamState) -> None:
        waits.append((self.name, other.name))
        wait_for(self, other)

    monkeypatch.setattr(StreamState, "wait_for", counted)
    (out_a, idx_a, end_a), (out_b, idx_b, end_b) = _in_threads(
        lambda: _pool_on(x, a, backend), lambda: _pool_on(x, b, backend)
    )
    end_a.synchronize()
    end_b.synchronize()
    assert waits == []  # neither read was ordered after the other
    # Serialized (on a runtime that runs streams together), the later kernel would end a
    # whole kernel after the earlier one.
    first, second = (end_a, end_b) if end_a.elapsed_time(end_b) >= 0 else (end_b, end_a)
    assert first.elapsed_time(second) < 0.9 * SLOW_US / 1000
    np.testing.assert_array_equal(out_a.numpy(), POOLED)
    np.testing.assert_array_equal(out_b.numpy(), POOLED)
    assert x.stream is a  # the last write (the upload); the reads did not move it
    for obj in (x, out_a, idx_a, out_b, idx_b, end_a, end_b, a, b):
        obj.close()


def test_a_write_after_reads_on_two_streams_waits_for_both(backend, slow_kernels):
    a, b, c = (pyaclnn.Stream(backend=backend) for _ in range(3))
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    (out_a, idx_a, _), (out_b, idx_b, _) = _in_threads(
        lambda: _pool_on(x, a, backend), lambda: _pool_on(x, b, backend)
    )
    x.fill_zero(stream=c)  # queued while both reads are pending
    assert x.stream is c and x._readers is None
    # No reader saw the zeros; the write's result is right.
    np.testing.assert_array_equal(out_a.numpy(), POOLED)
    np.testing.assert_array_equal(out_b.numpy(), POOLED)
    np.testing.assert_array_equal(x.numpy(), np.zeros_like(X))
    for obj in (x, out_a, idx_a, out_b, idx_b, a, b, c):
        obj.close()


def test_a_read_after_a_write_on_another_stream_sees_the_write(backend, slow_kernels):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    y = pyaclnn.to_device(X + 1000, backend=backend, stream=a)
    a.synchronize()
    x.copy_(y, stream=a)  # the write, pending behind nothing but itself
    out_b, idx_b, _ = _pool_on(x, b, backend)
    out_c, idx_c = _in_threads(lambda: pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=b))[0]
    np.testing.assert_array_equal(out_b.numpy(), POOLED + 1000)
    np.testing.assert_array_equal(out_c.numpy(), POOLED + 1000)
    for obj in (x, y, out_b, idx_b, out_c, idx_c, a, b):
        obj.close()


def test_closing_an_array_two_streams_still_read_frees_nothing_early(backend, slow_kernels):
    a, b, c = (pyaclnn.Stream(backend=backend) for _ in range(3))
    x = pyaclnn.to_device(X, backend=backend, stream=c)
    c.synchronize()
    (out_a, idx_a, _), (out_b, idx_b, _) = _in_threads(
        lambda: _pool_on(x, a, backend), lambda: _pool_on(x, b, backend)
    )
    x.close()  # both reads queued: the memory must outlive them
    # The pool then holds the block; new arrays of its size on every stream, written at once.
    made = [pyaclnn.to_device(X + 5, backend=backend, stream=s) for s in (a, b, c)]
    np.testing.assert_array_equal(out_a.numpy(), POOLED)
    np.testing.assert_array_equal(out_b.numpy(), POOLED)
    for m in made:
        np.testing.assert_array_equal(m.numpy(), X + 5)
    pyaclnn.memory_pool(backend=backend).free_all_blocks()  # frees idle blocks only
    for obj in (*made, out_a, idx_a, out_b, idx_b, a, b, c):
        obj.close()


@pytest.mark.parametrize("reuse_on", ["writer", "reader", "third"])
def test_the_pool_reuses_a_block_read_on_two_streams_only_after_both_reads(backend, slow_kernels, reuse_on):
    a, b, c = (pyaclnn.Stream(backend=backend) for _ in range(3))
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    ptr = x.ptr
    (out_a, idx_a, _), (out_b, idx_b, _) = _in_threads(
        lambda: _pool_on(x, a, backend), lambda: _pool_on(x, b, backend)
    )
    x.close()
    stream = {"writer": a, "reader": b, "third": c}[reuse_on]
    y = pyaclnn.zeros(X.shape, X.dtype, backend=backend, stream=stream)  # written on its stream
    if reuse_on == "writer":
        assert y.ptr == ptr  # the stream it was released to reuses it at once, in stream order
    y.fill_zero(stream=stream)
    np.testing.assert_array_equal(out_a.numpy(), POOLED)
    np.testing.assert_array_equal(out_b.numpy(), POOLED)
    np.testing.assert_array_equal(y.numpy(), np.zeros_like(X))
    for obj in (y, out_a, idx_a, out_b, idx_b, a, b, c):
        obj.close()


def test_a_generic_operator_orders_its_inputs_as_written_and_copy_reads_its_source(backend, monkeypatch):
    from pyaclnn import ops
    from pyaclnn._stream import StreamState

    previous = pyaclnn.get_backend()
    pyaclnn.set_backend(backend)
    try:
        a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
        x = pyaclnn.to_device(X, backend=backend, stream=a)
        outs = [pyaclnn.empty(X.shape, X.dtype, backend=backend, stream=s) for s in (a, b)]
        copies = [pyaclnn.empty(X.shape, X.dtype, backend=backend, stream=s) for s in (a, b)]
        for s in (a, b):
            s.synchronize()
        waits: list[tuple[str, str]] = []
        wait_for = StreamState.wait_for

        def counted(self: StreamState, other: StreamState) -> None:
            waits.append((self.name, other.name))
            wait_for(self, other)

        monkeypatch.setattr(StreamState, "wait_for", counted)
        for copy, s in zip(copies, (a, b)):  # copy_ reads x: the two copies run together
            copy.copy_(x, stream=s)
        assert waits == [] and x._readers == (b,)
        ops.add(x, x, 1, outs[0], stream=a)  # x may be written by all pyaclnn.ops knows: b's read first
        assert (a._state.name, b._state.name) in waits and x._readers is None and x.stream is a
        ops.add(x, x, 1, outs[1], stream=b)
        assert (b._state.name, a._state.name) in waits
        for o in (*outs, *copies):
            np.testing.assert_array_equal(o.numpy(), X * 2 if o in outs else X)
        for obj in (x, *outs, *copies, a, b):
            obj.close()
    finally:
        pyaclnn.set_backend(previous)


def test_generic_operators_count_every_tensor_as_written_unless_their_roles_are_known():
    from pyaclnn.ops import _types

    class Unknown:
        name = "aclnnSomethingNobodyDeclared"
        written = None
        params = ()

    assert not _types.roles_known(Unknown())  # type: ignore[arg-type]
    Unknown.written = ("out",)  # type: ignore[assignment]
    assert _types.roles_known(Unknown())  # type: ignore[arg-type]
