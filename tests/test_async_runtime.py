"""The asynchronous runtime on both backends: what waits, what does not, and the stream-ordered pool.

Each emulation runs every stream on a worker thread; ``PYACLNN_EMU_KERNEL_US``
gives each kernel simulated device time, so queued work is observably not
done yet when the host moves on. The oracles are computed here with NumPy
slicing: the max of each 2x2x2 window of an increasing input is its last
element. Every test ends with the backend fixture's checks: no live object
and no hazard (memory freed under queued work, ...).
"""

from __future__ import annotations

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _context, _decl, acl, backends, runtime

SLOW_US = 300_000  # simulated device time of a kernel: long enough to be observably pending
VECTOR_CORE_EXCEPTION = _decl.constant("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION")


@pytest.fixture
def slow_kernels(monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(SLOW_US))


def _pool_case(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An increasing (1, 2, 4, 4, 4) input, its 2x2x2 max pool and the argmax indices."""
    x = (np.arange(128, dtype=np.float32) + 1000 * seed).reshape(1, 2, 4, 4, 4)
    out = x[..., 1::2, 1::2, 1::2]
    d, h, w = np.meshgrid(np.arange(1, 4, 2), np.arange(1, 4, 2), np.arange(1, 4, 2), indexing="ij")
    flat = (d * 16 + h * 4 + w).astype(np.int32)
    return x, out, np.broadcast_to(flat, out.shape).copy()


def _scatter(grad: np.ndarray, indices: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The max-pool backward by definition: grad added at each index of its (n, c) plane."""
    planes = np.zeros((shape[0] * shape[1], int(np.prod(shape[2:]))), np.float32)
    for p, (g, i) in enumerate(zip(grad.reshape(len(planes), -1), indices.reshape(len(planes), -1))):
        np.add.at(planes[p], i, g)
    return planes.reshape(shape)


def _live_executors(backend: str) -> int:
    return backends.get(backend).live_counts()["executors"]


def test_a_call_on_device_arrays_returns_before_its_kernel_has_run(backend, slow_kernels):
    x, expected, _ = _pool_case()
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(x, backend=backend, stream=stream)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        done = stream.record_event()
        assert not done.query(), "the call waited for its kernel"
        assert out.stream is stream
        np.testing.assert_array_equal(out.numpy(), expected)  # numpy() waits for the stream
        assert done.query()
        for array in (dx, out, indices):
            array.close()
        done.close()


def test_numpy_inputs_give_finished_numpy_results(backend, slow_kernels):
    x, expected, _ = _pool_case()
    out, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    np.testing.assert_array_equal(out, expected)


def _bad_indices_call(backend: str, stream: pyaclnn.Stream) -> tuple[list, pyaclnn.DeviceArray]:
    x, out, indices = _pool_case()
    indices[0, 0, 0, 0, 1] = 99  # outside its plane of 64
    inputs = [pyaclnn.to_device(a, backend=backend, stream=stream) for a in (np.ones_like(out), x, indices)]
    return inputs, pyaclnn.max_pool3d_with_argmax_backward(*inputs, 2, backend=backend, stream=stream)


def _assert_device_error(error: pyaclnn.AclError, stream: pyaclnn.Stream) -> None:
    assert error.status == VECTOR_CORE_EXCEPTION
    text = str(error)
    assert "aclnnMaxPool3dWithArgmaxBackward" in text and "indices[0, 0, 0, 0, 1] = 99" in text, text
    assert f"stream #{stream.number}" in text, text


def test_a_device_error_surfaces_at_the_next_wait_naming_the_operator_and_the_stream(backend):
    with pyaclnn.Stream(backend=backend) as stream:
        inputs, grad_input = _bad_indices_call(backend, stream)  # queued: no error yet
        with pytest.raises(pyaclnn.AclError) as error:
            grad_input.numpy()
        _assert_device_error(error.value, stream)
        assert len(stream._state.executors) == 0, "the plan that failed must be dropped"
        stream.synchronize()  # reported once: the stream goes on
        x, out, indices = _pool_case()
        good = pyaclnn.max_pool3d_with_argmax_backward(
            np.ones_like(out), x, indices, 2, backend=backend, stream=stream
        )
        np.testing.assert_array_equal(good, _scatter(np.ones_like(out), indices, x.shape))
        for array in (*inputs, grad_input):
            array.close()


def test_ascend_launch_blocking_makes_every_call_wait(backend, monkeypatch):
    monkeypatch.setenv("ASCEND_LAUNCH_BLOCKING", "1")
    assert _context.launch_blocking_by_environment()
    monkeypatch.setattr(runtime.context(backend), "launch_blocking", True)
    with pyaclnn.Stream(backend=backend) as stream:
        with pytest.raises(pyaclnn.AclError) as error:
            _bad_indices_call(backend, stream)  # the call itself waits, so it raises
        _assert_device_error(error.value, stream)
    runtime.finalize(backend)  # the failed call's inputs are the context's to free


def test_numpy_indices_are_checked_on_the_host_before_anything_is_queued(backend):
    x, out, indices = _pool_case()
    indices[0, 1, 1, 0, 1] = -1
    with pytest.raises(pyaclnn.AclnnError) as error:
        pyaclnn.max_pool3d_with_argmax_backward(np.ones_like(out), x, indices, 2, backend=backend)
    assert error.value.status == _decl.constant("ACLNN_ERR_PARAM_INVALID")
    assert "indices[0, 1, 1, 0, 1] = -1" in str(error.value)


def test_a_block_released_under_queued_work_goes_to_another_stream_only_once_that_work_is_done(
    backend, slow_kernels
):
    x, expected, _ = _pool_case()
    with pyaclnn.Stream(backend=backend) as a, pyaclnn.Stream(backend=backend) as b:
        dx = pyaclnn.to_device(x, backend=backend, stream=a)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=a)
        block = dx._block
        dx.close()  # a's kernel has not read it yet
        other = pyaclnn.to_device(np.full_like(x, -7), backend=backend, stream=b)
        assert other._block is not block, "another stream got a block queued work still reads"
        same = pyaclnn.to_device(np.full_like(x, -8), backend=backend, stream=a)
        assert same._block is block, "the same stream may reuse it at once: its work runs in order"
        np.testing.assert_array_equal(out.numpy(), expected)
        same.close()
        a.synchronize()
        later = pyaclnn.to_device(np.full_like(x, -9), backend=backend, stream=b)
        assert later._block is block, "once the first stream is done the block is anyone's"
        for array in (other, later, out, indices):
            array.close()


def test_two_streams_sharing_pool_blocks_under_a_slow_kernel_get_every_result_right(backend, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "20000")
    with pyaclnn.Stream(backend=backend) as a, pyaclnn.Stream(backend=backend) as b:
        results = []
        for seed in range(6):
            for stream in (a, b):
                x, expected, _ = _pool_case(seed + 10 * (stream is b))
                with pyaclnn.to_device(x, backend=backend, stream=stream) as dx:
                    out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
                indices.close()
                results.append((out, expected))  # dx's block goes back while its kernel is queued
        for out, expected in results:
            np.testing.assert_array_equal(out.numpy(), expected)
            out.close()


def test_free_all_blocks_waits_for_the_work_that_uses_them(backend, slow_kernels):
    x, expected, _ = _pool_case()
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(x, backend=backend, stream=stream)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        done = stream.record_event()
        dx.close()
        pyaclnn.memory_pool(backend=backend).free_all_blocks()  # dx's block is read by the queued kernel
        assert done.query(), "free_all_blocks returned before the work using its blocks was done"
        np.testing.assert_array_equal(out.numpy(), expected)
        for handle in (out, indices, done):
            handle.close()


def test_an_input_from_another_stream_is_read_after_that_stream_wrote_it(backend, slow_kernels, monkeypatch):
    x, pooled, flat = _pool_case()
    grad = np.arange(pooled.size, dtype=np.float32).reshape(pooled.shape)
    with pyaclnn.Stream(backend=backend) as a, pyaclnn.Stream(backend=backend) as b:
        dx = pyaclnn.to_device(x, backend=backend, stream=a)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=a)  # slow, on a
        monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "0")  # b's kernel would run at once if not ordered
        dg = pyaclnn.to_device(grad, backend=backend, stream=b)
        grad_input = pyaclnn.max_pool3d_with_argmax_backward(dg, dx, indices, 2, backend=backend, stream=b)
        np.testing.assert_array_equal(grad_input.numpy(), _scatter(grad, flat, x.shape))
        np.testing.assert_array_equal(indices.numpy(), flat)
        for array in (dx, out, indices, dg, grad_input):
            array.close()


def test_wait_event_orders_another_streams_work_after_the_recorded_work(backend, slow_kernels):
    x, _, _ = _pool_case()
    with pyaclnn.Stream(backend=backend) as a, pyaclnn.Stream(backend=backend) as b:
        dx = pyaclnn.to_device(x, backend=backend, stream=a)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=a)
        with a.record_event() as written:
            b.wait_event(written)
            # Low level, so that no automatic ordering helps: zero out on b, after a's kernel.
            acl.rt.memset_async(out.ptr, out.nbytes, 0, out.nbytes, b.handle, backend=backend)
            b.synchronize()
            assert written.query()
        np.testing.assert_array_equal(out.numpy(), 0)
        for array in (dx, out, indices):
            array.close()


def test_events_time_device_work_and_say_when_it_is_done(backend, slow_kernels):
    x, _, _ = _pool_case()
    with pyaclnn.Stream(backend=backend) as stream, pyaclnn.Event(backend=backend) as start:
        assert start.query(), "an event never recorded counts as done"
        with pyaclnn.to_device(x, backend=backend, stream=stream) as dx:
            start.record(stream)
            out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
            end = stream.record_event()
            assert not end.query()
            end.synchronize()
            assert end.query()
            assert start.elapsed_time(end) >= 0.9 * SLOW_US / 1000
        end.close()
        with pytest.raises(ValueError, match="event is closed"):
            end.query()
        out.close()
        indices.close()


def test_an_executor_dropped_while_its_launch_is_queued_is_destroyed_after_it(backend, slow_kernels):
    x, out, indices = _pool_case()
    grad = np.ones_like(out)
    with pyaclnn.Stream(backend=backend) as stream:
        inputs = [pyaclnn.to_device(a, backend=backend, stream=stream) for a in (grad, x, indices)]
        with pyaclnn.max_pool3d_with_argmax_backward(*inputs, 2, backend=backend, stream=stream) as first:
            first.numpy()  # closed: the next call's output gets its block, so the call is the same
        second = pyaclnn.max_pool3d_with_argmax_backward(*inputs, 2, backend=backend, stream=stream)
        assert len(stream._state.executors) == 1
        live = _live_executors(backend)
        previous = runtime.context(backend).deterministic
        pyaclnn.set_deterministic(not previous, backend=backend)  # drops every cached plan
        assert len(stream._state.executors) == 0
        assert _live_executors(backend) == live, "destroyed while its launch was still queued"
        stream.synchronize()
        assert _live_executors(backend) == live - 1
        np.testing.assert_array_equal(second.numpy(), _scatter(grad, indices, x.shape))
        pyaclnn.set_deterministic(bool(previous), backend=backend)
        for array in (*inputs, second):
            array.close()


def test_synchronize_waits_for_every_stream(backend, slow_kernels):
    x, expected, _ = _pool_case()
    with pyaclnn.Stream(backend=backend) as a, pyaclnn.Stream(backend=backend) as b:
        arrays, events = [], []
        for stream in (a, b):
            dx = pyaclnn.to_device(x, backend=backend, stream=stream)
            arrays += [dx, *pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)]
            events.append(stream.record_event())
        pyaclnn.synchronize(backend=backend)
        assert all(event.query() for event in events)
        for event in events:
            event.close()
        for array in arrays:
            array.close()


def test_streams_and_events_refuse_a_peer_of_another_kind_backend_or_state(backend):
    with pyaclnn.Stream(backend=backend) as stream, pyaclnn.Event(backend=backend) as event:
        with pytest.raises(ValueError, match="event must be a pyaclnn.Event of backend"):
            stream.wait_event(stream)
        with pytest.raises(ValueError, match="stream must be a pyaclnn.Stream of backend"):
            event.record(event)
        with pytest.raises(ValueError, match="end must be a pyaclnn.Event of backend"):
            event.elapsed_time(stream)
        if backend == "npu":  # the numpy backend is there too (the reverse needs the emulator)
            with pyaclnn.Event(backend="numpy") as foreign:
                with pytest.raises(ValueError, match="event must be a pyaclnn.Event of backend 'npu'"):
                    stream.wait_event(foreign)
                with pytest.raises(ValueError, match="end must be a pyaclnn.Event of backend 'npu'"):
                    event.elapsed_time(foreign)
        done = pyaclnn.Event(backend=backend)
        done.close()
        with pytest.raises(ValueError, match="event is closed"):
            stream.wait_event(done)
        with pytest.raises(ValueError, match="event is closed"):
            event.elapsed_time(done)
        closed = pyaclnn.Stream(backend=backend)
        closed.close()
        with pytest.raises(ValueError, match="stream is closed"):
            event.record(closed)
