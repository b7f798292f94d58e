"""Streams as CUDA, torch and CuPy users expect, on both backends.

``Stream.query()`` asks the device (``aclrtStreamQuery``); the device comes
first in ``Stream(device, priority)`` and the module functions; a stream
pyaclnn makes stops on failure (``aclrtSetStreamFailureMode``); the emulated
clock of a stream that waits on an event goes on from when that event
completed. Slow simulated kernels (``PYACLNN_EMU_KERNEL_US``) keep work
observably pending where the order matters.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _decl, acl

SLOW_US = 300_000  # a kernel's simulated device time: observably pending
VECTOR_CORE_EXCEPTION = _decl.constant("ACL_ERROR_RT_VECTOR_CORE_EXCEPTION")
X = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)  # increasing: each window's max is its last


@pytest.fixture
def slow_kernels(monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(SLOW_US))


def _until(predicate, seconds: float = 30.0) -> bool:
    """Ask ``predicate`` until it holds (True) or ``seconds`` passed (False): a bound on a hang,
    not a measurement."""
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


# -- Stream.query() and Event.query() ask the device ---------------------------------


def test_a_new_stream_has_nothing_pending(backend):
    with pyaclnn.Stream(backend=backend) as s:
        assert s.query()


def test_query_is_false_while_a_kernel_runs_and_true_after_synchronize(backend, slow_kernels):
    with pyaclnn.Stream(backend=backend) as s:
        x = pyaclnn.to_device(X, backend=backend, stream=s)
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=s)
        assert not s.query()
        s.synchronize()
        assert s.query()
        for a in (x, out, idx):
            a.close()


def test_query_is_true_once_an_event_recorded_last_was_waited_for(backend, slow_kernels):
    with pyaclnn.Stream(backend=backend) as s:
        x = pyaclnn.to_device(X, backend=backend, stream=s)
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=s)
        done = s.record_event()
        assert not done.query() and not s.query()
        done.synchronize()
        assert done.query() and s.query()
        for a in (x, out, idx, done):
            a.close()


def test_query_follows_a_wait_stream_until_the_awaited_work_finished(backend, slow_kernels):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=a)
    b.wait_stream(a)
    assert not b.query(), "b waits for a's kernel, which still runs"
    a.synchronize()
    assert _until(b.query), "b's wait finished with a's work, and nothing else is queued on b"
    for obj in (x, out, idx, a, b):
        obj.close()


def test_an_external_streams_query_is_the_runtimes_answer_for_its_handle(backend, slow_kernels):
    pyaclnn.synchronize(backend=backend)  # initialises and binds device 0 for the raw calls
    handle = acl.rt.create_stream(backend=backend)
    s = pyaclnn.ExternalStream(handle, backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=s)
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=s)
    assert acl.rt.stream_query(handle, backend=backend) == pyaclnn.constants.ACL_STREAM_STATUS_NOT_READY
    assert not s.query()
    s.synchronize()
    assert acl.rt.stream_query(handle, backend=backend) == pyaclnn.constants.ACL_STREAM_STATUS_COMPLETE
    for obj in (x, out, idx, s):
        obj.close()
    acl.rt.destroy_stream(handle, backend=backend)


# -- the device first ------------------------------------------------------------------


def test_the_device_is_the_first_parameter_and_backend_is_keyword_only(backend):
    s = pyaclnn.Stream(0, backend=backend)
    assert s.device == 0 and s.priority == 0
    assert pyaclnn.current_stream(0, backend=backend) is pyaclnn.default_stream(0, backend=backend)
    assert pyaclnn.memory_pool(0, backend=backend) is pyaclnn.memory_pool(backend=backend)
    pyaclnn.synchronize(0, backend=backend)
    with pytest.raises(TypeError):
        pyaclnn.Stream(0, 0, backend)  # type: ignore[misc]
    s.close()


def test_a_device_object_names_its_device(backend):
    with pyaclnn.Device(0, backend=backend) as d, pyaclnn.Stream(d, backend=backend) as s:
        assert s.device == 0
        assert pyaclnn.current_stream(d, backend=backend) is pyaclnn.current_stream(backend=backend)


@pytest.mark.parametrize(
    "call",
    [
        lambda b: pyaclnn.Stream(7, backend=b),
        lambda b: pyaclnn.current_stream(7, backend=b),
        lambda b: pyaclnn.default_stream(7, backend=b),
        lambda b: pyaclnn.synchronize(7, backend=b),
        lambda b: pyaclnn.memory_pool(7, backend=b),
    ],
    ids=["Stream", "current_stream", "default_stream", "synchronize", "memory_pool"],
)
def test_a_device_that_does_not_exist_is_refused_by_name(backend, call):
    with pytest.raises(ValueError, match=r"device 7 does not exist"):
        call(backend)


def test_a_device_of_the_wrong_type_is_refused_naming_the_argument(backend):
    with pytest.raises(TypeError, match=r"device must be an int device id or a pyaclnn.Device, got str"):
        pyaclnn.Stream("numpy")  # the backend, positionally, as before: refused


def test_priority_goes_to_the_stream_and_must_be_one_of_canns(backend):
    with pyaclnn.Stream(priority=7, backend=backend) as s:
        assert s.priority == 7 and s.query()
    with pytest.raises(ValueError, match=r"priority must be from 0 to 7.*got 8"):
        pyaclnn.Stream(priority=8, backend=backend)
    with pytest.raises(TypeError, match=r"priority must be an int"):
        pyaclnn.Stream(priority=1.5, backend=backend)  # type: ignore[arg-type]


def test_the_runtime_refuses_a_priority_outside_its_range(backend):
    with pytest.raises(pyaclnn.AclError, match=r"priority 9 is outside 0..7"):
        acl.rt.create_stream_with_config(9, 0, backend=backend)


# -- stop on failure -------------------------------------------------------------------


def _bad_backward(backend: str, stream: pyaclnn.Stream) -> list[pyaclnn.DeviceArray]:
    """A backward call whose indices leave their plane: fails on the device, once run."""
    out = X[..., 1::2, 1::2, 1::2]
    idx = np.zeros(out.shape, np.int32)
    idx[0, 0, 0, 0, 1] = 99
    args = [pyaclnn.to_device(a, backend=backend, stream=stream) for a in (np.ones_like(out), X, idx)]
    return [*args, pyaclnn.max_pool3d_with_argmax_backward(*args, 2, backend=backend, stream=stream)]


def test_work_queued_after_a_failed_task_does_not_run_and_the_error_reaches_the_next_wait(backend):
    with pyaclnn.Stream(backend=backend) as s:
        x = pyaclnn.to_device(X, backend=backend, stream=s)
        out = pyaclnn.zeros((1, 2, 2, 2, 2), backend=backend, stream=s)
        idx = pyaclnn.zeros((1, 2, 2, 2, 2), np.int32, backend=backend, stream=s)
        s.synchronize()
        failing = _bad_backward(backend, s)
        pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), backend=backend, stream=s)  # after it
        with pytest.raises(pyaclnn.AclError) as error:
            s.synchronize()
        assert error.value.status == VECTOR_CORE_EXCEPTION
        assert not out.numpy().any(), "the call queued after the failed one ran"
        pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), backend=backend, stream=s)  # reported: runs
        np.testing.assert_array_equal(out.numpy(), X[..., 1::2, 1::2, 1::2])
        for a in (x, out, idx, *failing):
            a.close()


def test_the_runtime_sets_and_checks_the_failure_mode(backend):
    pyaclnn.synchronize(backend=backend)  # initialises and binds device 0 for the raw calls
    handle = acl.rt.create_stream(backend=backend)
    acl.rt.set_stream_failure_mode(handle, pyaclnn.constants.ACL_STOP_ON_FAILURE, backend=backend)
    acl.rt.set_stream_failure_mode(handle, pyaclnn.constants.ACL_CONTINUE_ON_FAILURE, backend=backend)
    with pytest.raises(pyaclnn.AclError, match=r"mode 2 is neither"):
        acl.rt.set_stream_failure_mode(handle, 2, backend=backend)
    acl.rt.destroy_stream(handle, backend=backend)


# -- the emulated clock counts waits ---------------------------------------------------


def test_elapsed_time_across_a_cross_stream_wait_includes_the_awaited_work(backend, monkeypatch):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(X, backend=backend, stream=a)
    a.synchronize()
    start = b.record_event()
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(SLOW_US))
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=a)
    monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
    b.wait_event(a.record_event())
    end = b.record_event()
    end.synchronize()
    # b ran nothing of its own: its time is the kernel it waited for (simulated device time)
    assert start.elapsed_time(end) >= 0.9 * SLOW_US / 1000
    for obj in (x, out, idx, start, end, a, b):
        obj.close()
