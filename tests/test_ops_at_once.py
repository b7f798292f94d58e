"""The at-once path of pyaclnn.ops on the numpy backend: a call whose every array is a NumPy array
runs its NumPy reference on the calling thread, as the stream's next task, without the general
Launch. It must give what the general path gives, and leave to it every call where anything could
differ: an output sharing memory with another argument, a stream with work pending or a failure,
a capture, a profile, arrays it would not map (PYACLNN_MAP_HOST=0, negative strides), read-only
outputs, a check that refuses."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _generic, ops
from pyaclnn.errors import AclError, AclnnError
from pyaclnn.ops import _call


@pytest.fixture
def numpy_active():
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    pyaclnn.synchronize()  # no work of an earlier test pending on the default stream
    yield
    pyaclnn.set_backend(previous)


def _f32(*values):
    return [np.asarray(v, np.float32) for v in values]


def test_a_call_on_numpy_arrays_runs_at_once_and_computes_what_the_general_path_does(
    numpy_active, ops_general, monkeypatch, torch
):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    out = np.zeros((2, 3, 5), np.float32)
    assert ops.add(x, y, 2.5, out) is out
    assert ops_general == []
    expected = torch.ops.aten.add.Tensor(torch.from_numpy(x), torch.from_numpy(y), alpha=2.5).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)
    # the same calls on the general path: equal bits, for reductions and a dtype argument too
    rows = rng.standard_normal((4, 7)).astype(np.float32)

    def calls():
        return [
            ops.add(x, y, 2.5, np.zeros_like(out)),
            ops.mean(rows, [1], False, np.float32, np.zeros(4, np.float32)),
            ops.cumsum(rows.astype(np.float16), 1, np.float32, np.zeros((4, 7), np.float32)),
        ]

    at_once = calls()
    assert ops_general == []
    monkeypatch.setattr(_call.AtOnce, "__call__", lambda self, checked, stream: _call.NOT_TAKEN)
    again = calls()
    assert len(ops_general) == 3
    for a, b in zip(at_once, again):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_an_output_sharing_memory_with_an_input_takes_the_general_path(numpy_active, ops_general):
    x, y = _f32([1, 2, 3, 4], [10, 20, 30, 40])
    assert ops.add(x, y, 1, x) is x  # out is self
    np.testing.assert_array_equal(x, [11, 22, 33, 44])
    base = np.arange(8, dtype=np.float32)
    ops.add(base[:4], y, 1, base[2:6])  # overlapping views of one array
    assert len(ops_general) == 2
    ops.add(base[:4], y, 1, base[4:])  # views of one array that do not overlap: at once
    assert len(ops_general) == 2
    np.testing.assert_array_equal(base[4:], base[:4] + y)


def test_a_stream_with_work_pending_takes_the_general_path_and_keeps_its_order(
    numpy_active, ops_general, monkeypatch
):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200000")
    busy, idle = pyaclnn.Stream(), pyaclnn.Stream()
    d = pyaclnn.to_device(np.zeros(4, np.float32), stream=busy)
    ones = pyaclnn.to_device(np.ones(4, np.float32), stream=busy)
    for _ in range(3):
        ops.add(d, ones, 1, d, stream=busy)  # queued: 0.6 s of simulated kernels
    x, y = _f32([1, 2, 3, 4], [1, 1, 1, 1])
    before = len(ops_general)
    result = ops.add(x, y, 1, np.zeros(4, np.float32), stream=busy)
    assert len(ops_general) == before + 1  # after the queued work, in stream order
    np.testing.assert_array_equal(result, [2, 3, 4, 5])
    result = ops.add(x, y, 2, np.zeros(4, np.float32), stream=idle)
    assert len(ops_general) == before + 1  # an idle stream: at once
    np.testing.assert_array_equal(result, [3, 4, 5, 6])
    np.testing.assert_array_equal(d.numpy(), [3, 3, 3, 3])
    for a in (d, ones, busy, idle):
        a.close()


def test_a_kernel_failure_at_once_is_reported_as_the_general_path_reports_it(
    numpy_active, ops_general, monkeypatch
):
    from pyaclnn.kernels.references import _registry as references

    monkeypatch.setattr(references, "_REFERENCES", dict(references._REFERENCES))
    monkeypatch.setattr(_generic, "_operators", {})
    monkeypatch.setattr(_generic, "_at_once", {})
    ops._functions.clear()

    def fails(x, y, alpha, out):
        raise ValueError("the kernel refuses")

    ops.register_reference("Add", fails)
    try:
        errors = []
        for take in (True, False):
            if not take:
                monkeypatch.setattr(_call.AtOnce, "__call__", lambda self, checked, stream: _call.NOT_TAKEN)
            with pytest.raises(AclError) as caught:
                ops.add(*_f32([1, 2], [3, 4]), 1, np.zeros(2, np.float32))
            errors.append(str(caught.value))
            assert len(ops_general) == (0 if take else 1)
        assert errors[0] == errors[1] and "the kernel refuses" in errors[0]
        # reported once: the stream is clean again, and the next call runs at once
        monkeypatch.undo()
        ops._functions.clear()
        result = ops.add(*_f32([1, 2], [3, 4]), 1, np.zeros(2, np.float32))
        np.testing.assert_array_equal(result, [4, 6])
    finally:
        _generic.forget("numpy")
        ops._functions.clear()


def test_a_stream_holding_a_failure_takes_the_general_path_which_reports_it(numpy_active, ops_general):
    from pyaclnn.backends import get

    stream = pyaclnn.Stream()
    worker = get("numpy")._worker(stream._state.handle)
    worker._fail(507011, "an earlier task failed")  # (the sticky error of a failed kernel)
    with pytest.raises(AclError, match="an earlier task failed"):
        ops.add(*_f32([1, 2], [3, 4]), 1, np.zeros(2, np.float32), stream=stream)
    assert len(ops_general) == 1
    stream.close()


def test_refusals_take_the_general_path_and_its_messages(numpy_active, ops_general):
    x, y = _f32([1, 2], [3, 4])
    with pytest.raises(AclnnError, match="out"):  # a shape phase 1 refuses
        ops.add(x, y, 1, np.zeros(3, np.float32))
    frozen = np.zeros(2, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out is a read-only NumPy array"):
        ops.add(x, y, 1, frozen)
    assert len(ops_general) == 2
    reversed_x = np.arange(4, dtype=np.float32)[::-1]  # negative strides: the general path's copy
    result = ops.add(reversed_x, y[[0, 0, 1, 1]], 1, np.zeros(4, np.float32))
    np.testing.assert_array_equal(result, [6, 5, 5, 4])
    assert len(ops_general) == 3


def test_copies_asked_for_and_captures_take_the_general_path(numpy_active, ops_general, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(pyaclnn._context.context("numpy"), "host_memory", None)  # as PYACLNN_MAP_HOST=0
        result = ops.add(*_f32([1, 2], [3, 4]), 1, np.zeros(2, np.float32))
    np.testing.assert_array_equal(result, [4, 6])
    assert len(ops_general) == 1
    g = pyaclnn.Graph(backend="numpy")
    with pytest.raises(pyaclnn.GraphCaptureError, match=r"add\(self=NumPy array\) cannot be captured"):  # noqa: PT012
        with pyaclnn.graph(g):
            ops.add(*_f32([1, 2], [3, 4]), 1, np.zeros(2, np.float32))
    assert len(ops_general) == 2
    g.close()


def test_threads_calling_at_once_on_one_stream_each_get_their_own_result(numpy_active, ops_general, torch):
    rng = np.random.default_rng(1)
    problems = []

    def work(seed: int) -> None:
        local = np.random.default_rng(seed)
        for _ in range(200):
            x = local.standard_normal((3, 8)).astype(np.float32)
            out = ops.cumsum(x, 1, np.float32, np.zeros((3, 8), np.float32))
            expected = torch.ops.aten.cumsum.default(torch.from_numpy(x), 1).numpy()
            if not np.allclose(out, expected, rtol=1e-5, atol=1e-6):
                problems.append(seed)

    threads = [threading.Thread(target=work, args=(int(rng.integers(1 << 30)),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
