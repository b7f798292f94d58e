"""The numpy backend as an asynchronous device (docs/architecture.md, execution model).

Each test pins one rule of the device model: streams run their tasks on worker
threads, in order; synchronization, events, device errors, simulated time and
hazards behave as the C emulator's do. The tests drive a fresh backend object
directly through the C-shaped calls (pyaclnn.backends._interface), so the
hazard counter and live objects of each test are its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from pyaclnn import dtypes
from pyaclnn.backends.numpy import BACKWARD_WORKSPACE, NumpyBackend
from pyaclnn.backends.numpy._streams import Task, waited_at_once
from pyaclnn.constants import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_INVALID_RESOURCE_HANDLE,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_EVENT_NOT_COMPLETE,
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
    ACL_ERROR_RT_INTERNAL_ERROR,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_RT_STREAM_CONTEXT,
    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION,
    ACL_EVENT_EXTERNAL,
    ACL_EVENT_RECORDED_STATUS_COMPLETE,
    ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_EVENT_SYNC,
    ACL_EVENT_TIME_LINE,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_RUNTIME_ERROR,
)

X = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)
POOLED = X[:, :, 1::2, 1::2, 1::2]  # 2x2x2 windows of an increasing ramp: the last cell wins
KERNEL_MS = 20


@pytest.fixture
def b() -> Iterator[NumpyBackend]:
    """A backend of the test's own, device 0 set in this thread; afterwards nothing may be left
    live (but default streams)."""
    backend = NumpyBackend()
    ok(backend.aclrtSetDevice(0))
    yield backend
    counts = backend.live_counts()
    assert not any(counts.values()), counts


@pytest.fixture
def slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels take KERNEL_MS of device time."""
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(KERNEL_MS * 1000))


# -- helpers ------------------------------------------------------------------
def ok(result):
    """The out-values of a call that must succeed."""
    status, *values = result if isinstance(result, tuple) else (result,)
    assert status == 0, status
    return values[0] if len(values) == 1 else tuple(values)


class Device:
    """Device memory and descriptors of one test, freed in reverse order by ``close``."""

    def __init__(self, b: NumpyBackend) -> None:
        self.b = b
        self.pointers: list[int] = []
        self.handles: list = []

    def array(self, host: np.ndarray) -> int:
        ptr = ok(self.b.aclrtMalloc(host.nbytes, 0))
        self.pointers.append(ptr)
        host = np.ascontiguousarray(host)
        ok(self.b.aclrtMemcpy(ptr, host.nbytes, host, host.nbytes, ACL_MEMCPY_HOST_TO_DEVICE))
        return ptr

    def tensor(self, ptr: int, shape: tuple[int, ...], dtype) -> object:
        handle = self.b.aclCreateTensor(
            shape, dtypes.from_numpy(dtype), None, 0, dtypes.ACL_FORMAT_ND, shape, ptr
        )
        assert handle is not None
        self.handles.append(handle)
        return handle

    def ints(self, values) -> object:
        handle = self.b.aclCreateIntArray(values)
        self.handles.append(handle)
        return handle

    def read(self, ptr: int, shape, dtype) -> np.ndarray:
        """Contents now, by the synchronous aclrtMemcpy (which waits for nothing)."""
        out = np.empty(shape, dtype)
        ok(self.b.aclrtMemcpy(out, out.nbytes, ptr, out.nbytes, ACL_MEMCPY_DEVICE_TO_HOST))
        return out

    def destroy_descriptors(self) -> None:
        for h in self.handles:
            destroy = self.b.aclDestroyIntArray if type(h).__name__ == "IntArray" else self.b.aclDestroyTensor
            ok(destroy(h))
        self.handles = []

    def close(self) -> None:
        self.destroy_descriptors()
        for ptr in reversed(self.pointers):
            ok(self.b.aclrtFree(ptr))
        self.pointers = []


@pytest.fixture
def dev(b: NumpyBackend) -> Iterator[Device]:
    d = Device(b)
    yield d
    ok(b.aclrtSynchronizeDevice())
    d.close()


class Pool:
    """One max-pool forward problem: x (1, 1, 4, 4, 4), kernel 2, stride 2."""

    def __init__(self, dev: Device) -> None:
        self.dev = dev
        self.x = dev.array(X)
        self.out = dev.array(np.zeros((1, 1, 2, 2, 2), np.float32))
        self.indices = dev.array(np.zeros((1, 1, 2, 2, 2), np.int32))

    def phase1(self) -> object:
        d = self.dev
        size, executor = ok(
            d.b.aclnnMaxPool3dWithArgmaxGetWorkspaceSize(
                d.tensor(self.x, X.shape, np.float32),
                d.ints([2, 2, 2]),
                d.ints([2, 2, 2]),
                d.ints([0, 0, 0]),
                d.ints([1, 1, 1]),
                False,
                d.tensor(self.out, (1, 1, 2, 2, 2), np.float32),
                d.tensor(self.indices, (1, 1, 2, 2, 2), np.int32),
            )
        )
        assert size == 0 and executor is not None
        return executor

    def launch(self, stream=None, executor=None) -> None:
        ok(self.dev.b.aclnnMaxPool3dWithArgmax(0, 0, executor or self.phase1(), stream))

    def result(self) -> np.ndarray:
        return self.dev.read(self.out, (1, 1, 2, 2, 2), np.float32)


@pytest.fixture
def pool(dev: Device) -> Pool:
    return Pool(dev)


@pytest.fixture
def stream(b: NumpyBackend) -> Iterator[object]:
    s = ok(b.aclrtCreateStream())
    yield s
    ok(b.aclrtSynchronizeStream(s))
    ok(b.aclrtDestroyStream(s))


def stream_threads() -> int:
    return sum(t.name.startswith("pyaclnn-stream-") for t in threading.enumerate())


# -- asynchrony and order ------------------------------------------------------
def test_phase2_returns_before_the_kernel_ran_and_synchronize_shows_its_output(b, pool, stream, slow):
    start = time.perf_counter()
    pool.launch(stream)
    assert time.perf_counter() - start < KERNEL_MS / 1000 / 2
    assert not pool.result().any()  # the synchronous memcpy does not wait for the kernel
    ok(b.aclrtSynchronizeStream(stream))
    np.testing.assert_array_equal(pool.result(), POOLED)


def test_tasks_of_one_stream_run_in_submission_order(b, dev, pool, stream, slow):
    copy = dev.array(np.zeros(8, np.float32))
    pool.launch(stream)
    ok(b.aclrtMemcpyAsync(copy, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_DEVICE, stream))  # after the kernel
    ok(b.aclrtMemsetAsync(pool.out, 32, 0x7F, 32, stream))  # after the copy
    ok(b.aclrtSynchronizeStream(stream))
    np.testing.assert_array_equal(dev.read(copy, (1, 1, 2, 2, 2), np.float32), POOLED)
    assert (dev.read(pool.out, 32, np.uint8) == 0x7F).all()


def test_two_streams_run_concurrently(b, pool, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "100000")
    streams = [ok(b.aclrtCreateStream()) for _ in range(2)]
    start = time.perf_counter()
    for s in streams:
        pool.launch(s)
    for s in streams:
        ok(b.aclrtSynchronizeStream(s))
    elapsed = time.perf_counter() - start
    for s in streams:
        ok(b.aclrtDestroyStream(s))
    assert 0.1 <= elapsed < 0.18  # one stream would take 0.2 s


def test_a_stream_waiting_for_an_event_runs_after_the_recorded_work(b, dev, pool, slow):
    s1, s2 = ok(b.aclrtCreateStream()), ok(b.aclrtCreateStream())
    event = ok(b.aclrtCreateEvent())
    copy = dev.array(np.zeros(8, np.float32))
    pool.launch(s1)
    ok(b.aclrtRecordEvent(event, s1))
    start = time.perf_counter()
    ok(b.aclrtStreamWaitEvent(s2, event))
    assert time.perf_counter() - start < KERNEL_MS / 1000 / 2  # the caller does not wait
    ok(b.aclrtMemcpyAsync(copy, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_DEVICE, s2))
    ok(b.aclrtSynchronizeStream(s2))  # s1 is not synchronized by the caller
    np.testing.assert_array_equal(dev.read(copy, (1, 1, 2, 2, 2), np.float32), POOLED)
    for s in (s1, s2):
        ok(b.aclrtDestroyStream(s))
    ok(b.aclrtDestroyEvent(event))


def test_synchronize_device_waits_for_every_stream_and_the_default_one(b, dev, slow):
    pools = [Pool(dev) for _ in range(2)]
    s = ok(b.aclrtCreateStream())
    pools[0].launch(s)
    pools[1].launch(None)
    ok(b.aclrtSynchronizeDevice())
    for p in pools:
        np.testing.assert_array_equal(p.result(), POOLED)
    ok(b.aclrtDestroyStream(s))


def test_synchronize_latency_comes_from_the_environment(b, stream, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_SYNC_US", "30000")
    start = time.perf_counter()
    ok(b.aclrtSynchronizeStream(stream))
    assert time.perf_counter() - start >= 0.03
    monkeypatch.setenv("PYACLNN_EMU_SYNC_US", "0")
    start = time.perf_counter()
    ok(b.aclrtSynchronizeStream(stream))
    assert time.perf_counter() - start < 0.01


# -- memcpy and memset ---------------------------------------------------------
def test_pageable_memcpy_async_waits_for_the_copy_and_the_work_before_it(b, pool, stream, slow):
    pool.launch(stream)
    host = np.zeros((1, 1, 2, 2, 2), np.float32)
    ok(b.aclrtMemcpyAsync(host, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    np.testing.assert_array_equal(host, POOLED)


def test_pinned_memcpy_async_does_not_wait(b, pool, stream, slow):
    pinned = ok(b.aclrtMallocHost(32))
    pool.launch(stream)
    start = time.perf_counter()
    ok(b.aclrtMemcpyAsync(pinned, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    assert time.perf_counter() - start < KERNEL_MS / 1000 / 2
    host = np.zeros(8, np.float32)
    ok(b.aclrtMemcpy(host, 32, pinned, 32, ACL_MEMCPY_HOST_TO_HOST))
    assert not host.any()
    ok(b.aclrtSynchronizeStream(stream))
    ok(b.aclrtMemcpy(host, 32, pinned, 32, ACL_MEMCPY_HOST_TO_HOST))
    np.testing.assert_array_equal(host, POOLED.reshape(-1))
    ok(b.aclrtFreeHost(pinned))


def test_synchronous_memcpy_and_memset_run_at_once_without_waiting(b, dev, pool, stream, slow):
    pool.launch(stream)
    start = time.perf_counter()
    ok(b.aclrtMemset(pool.indices, 32, 1, 32))
    assert (dev.read(pool.indices, 32, np.uint8) == 1).all()
    assert time.perf_counter() - start < KERNEL_MS / 1000 / 2


def test_memset_async_runs_on_the_stream(b, dev, pool, stream, slow):
    pool.launch(stream)
    ok(b.aclrtMemsetAsync(pool.out, 32, 0xAB, 32, stream))
    assert not dev.read(pool.out, 32, np.uint8).any()
    ok(b.aclrtSynchronizeStream(stream))
    assert (dev.read(pool.out, 32, np.uint8) == 0xAB).all()


# -- launches capture what they need ------------------------------------------
def test_descriptors_may_be_destroyed_right_after_phase2(b, dev, pool, stream, slow):
    pool.launch(stream)
    dev.destroy_descriptors()
    ok(b.aclrtSynchronizeStream(stream))
    np.testing.assert_array_equal(pool.result(), POOLED)
    assert b.hazard_count() == 0


def test_launch_time_checks_stay_synchronous(b, dev, pool, stream):
    assert b.aclnnMaxPool3dWithArgmax(0, 0, pool.phase1(), object()) == ACL_ERROR_INVALID_RESOURCE_HANDLE
    executor = pool.phase1()
    ok(b.aclrtFree(pool.out))
    dev.pointers.remove(pool.out)
    assert b.aclnnMaxPool3dWithArgmax(0, 0, executor, stream) == ACLNN_ERR_RUNTIME_ERROR
    assert "freed" in b.aclGetRecentErrMsg()


# -- a repeatable executor's binding ----------------------------------------------
# Phase 2 of a repeatable executor reuses the views it resolved at its last launch
# while the workspace, the stream and the heap (no allocation made or freed) are
# the same; any change resolves them, and checks them, again.
def _count_binds(executor) -> list[int]:
    calls = [0]
    bind = executor.bind

    def counting(views):
        calls[0] += 1
        return bind(views)

    executor.bind = counting
    return calls


def test_a_repeated_launch_resolves_its_memory_once(b, pool, stream):
    executor = pool.phase1()
    ok(b.aclSetAclOpExecutorRepeatable(executor))
    binds = _count_binds(executor)
    for _ in range(3):
        pool.launch(stream, executor)
    ok(b.aclrtSynchronizeStream(stream))
    np.testing.assert_array_equal(pool.result(), POOLED)
    assert binds == [1]
    ok(b.aclDestroyAclOpExecutor(executor))


def test_memory_freed_since_the_last_launch_is_refused(b, dev, pool, stream):
    executor = pool.phase1()
    ok(b.aclSetAclOpExecutorRepeatable(executor))
    pool.launch(stream, executor)
    ok(b.aclrtSynchronizeStream(stream))
    ok(b.aclrtFree(pool.out))
    dev.pointers.remove(pool.out)
    assert b.aclnnMaxPool3dWithArgmax(0, 0, executor, stream) == ACLNN_ERR_RUNTIME_ERROR
    assert "was the memory freed before the launch?" in b.aclGetRecentErrMsg()
    ok(b.aclDestroyAclOpExecutor(executor))


def test_a_workspace_that_is_no_allocation_is_refused_after_a_good_one(b, dev, pool, stream):
    grad_input = dev.array(np.zeros(X.shape, np.float32))
    executor = _backward_phase1(dev, pool, np.zeros((1, 1, 2, 2, 2), np.int32), grad_input)
    ok(b.aclSetAclOpExecutorRepeatable(executor))
    workspace = dev.array(np.zeros(BACKWARD_WORKSPACE, np.uint8))
    ok(b.aclnnMaxPool3dWithArgmaxBackward(workspace, BACKWARD_WORKSPACE, executor, stream))
    elsewhere = workspace + (1 << 40)  # inside no allocation
    status = b.aclnnMaxPool3dWithArgmaxBackward(elsewhere, BACKWARD_WORKSPACE, executor, stream)
    assert status == ACLNN_ERR_PARAM_INVALID
    assert "workspace" in b.aclGetRecentErrMsg()
    ok(b.aclrtSynchronizeStream(stream))
    ok(b.aclDestroyAclOpExecutor(executor))


def test_a_stream_of_another_device_after_one_of_the_memory_s_device_is_a_hazard_each_time(
    b2, capfd, hazards_expected
):
    ok(b2.aclrtSetDevice(1))
    dev = Device(b2)
    pool = Pool(dev)  # memory of device 1
    executor = pool.phase1()
    ok(b2.aclSetAclOpExecutorRepeatable(executor))
    s1 = ok(b2.aclrtCreateStream())
    pool.launch(s1, executor)
    ok(b2.aclrtSynchronizeStream(s1))
    ok(b2.aclrtSetDevice(0))
    s0 = ok(b2.aclrtCreateStream())
    for launch in range(2):  # the repeated launch does not skip the check
        ok(b2.aclnnMaxPool3dWithArgmax(0, 0, executor, s0))
        _expect_hazard(
            b2, capfd, launch, "memory of device 1 (self)", "of device 0", "aclnnMaxPool3dWithArgmax"
        )
    ok(b2.aclrtSynchronizeStream(s0))
    ok(b2.aclDestroyAclOpExecutor(executor))
    ok(b2.aclrtDestroyStream(s0))
    ok(b2.aclrtSetDevice(1))
    ok(b2.aclrtDestroyStream(s1))
    dev.close()


# -- device errors -------------------------------------------------------------
def _backward(dev: Device, pool: Pool, indices: np.ndarray, grad_input: int, stream) -> None:
    executor = _backward_phase1(dev, pool, indices, grad_input)
    workspace = dev.array(np.zeros(BACKWARD_WORKSPACE, np.uint8))
    ok(dev.b.aclnnMaxPool3dWithArgmaxBackward(workspace, BACKWARD_WORKSPACE, executor, stream))


def _backward_phase1(dev: Device, pool: Pool, indices: np.ndarray, grad_input: int) -> object:
    b = dev.b
    shape = (1, 1, 2, 2, 2)
    size, executor = ok(
        b.aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize(
            dev.tensor(dev.array(np.ones(shape, np.float32)), shape, np.float32),
            dev.tensor(pool.x, X.shape, np.float32),
            dev.tensor(dev.array(indices), shape, np.int32),
            dev.ints([2, 2, 2]),
            dev.ints([2, 2, 2]),
            dev.ints([0, 0, 0]),
            dev.ints([1, 1, 1]),
            False,
            dev.tensor(grad_input, X.shape, np.float32),
        )
    )
    assert size == BACKWARD_WORKSPACE
    return executor


@pytest.mark.parametrize("on_default_stream", [False, True])
def test_an_index_outside_its_plane_is_a_device_error_reported_once_at_synchronize(
    b, dev, pool, stream, on_default_stream
):
    s = None if on_default_stream else stream
    indices = np.zeros((1, 1, 2, 2, 2), np.int32)
    indices[0, 0, 1, 0, 1] = 99
    grad_input = dev.array(np.full(X.shape, 7, np.float32))
    _backward(dev, pool, indices, grad_input, s)  # phase 2 itself succeeds
    ok(b.aclrtMemsetAsync(pool.out, 32, 0x11, 32, s))  # later tasks still run
    status = b.aclrtSynchronizeDevice() if on_default_stream else b.aclrtSynchronizeStream(s)
    assert status == ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    message = b.aclGetRecentErrMsg()
    label = "0x0" if on_default_stream else f"{id(stream):#x}"
    assert message == (
        "aclnnMaxPool3dWithArgmaxBackward: indices[0, 0, 1, 0, 1] = 99 lies outside its (n, c) plane "
        f"of 64 elements (device error of a launch on stream {label})"
    )
    assert (dev.read(grad_input, X.shape, np.float32) == 7).all()  # nothing written
    assert (dev.read(pool.out, 32, np.uint8) == 0x11).all()
    ok(b.aclrtSynchronizeStream(s))  # reported once
    ok(b.aclrtSynchronizeDevice())


@pytest.mark.parametrize(
    "exception, status, text",
    [
        (RuntimeError("boom"), ACL_ERROR_RT_INTERNAL_ERROR, "aclnnSomething: unexpected RuntimeError: boom"),
        (MemoryError("16 GiB"), ACL_ERROR_RT_MEMORY_ALLOCATION, "aclnnSomething: out of host memory"),
    ],
)
def test_an_unexpected_exception_in_a_task_becomes_a_sticky_error(b, stream, exception, status, text):
    def broken() -> None:
        raise exception

    stream.worker.submit(Task(broken, what="aclnnSomething"))
    assert b.aclrtSynchronizeStream(stream) == status
    assert b.aclGetRecentErrMsg().startswith(text)


# -- events --------------------------------------------------------------------
def test_event_status_synchronize_and_elapsed_time(b, pool, stream, slow):
    start, end = ok(b.aclrtCreateEvent()), ok(b.aclrtCreateEvent())
    assert ok(b.aclrtQueryEventStatus(end)) == ACL_EVENT_RECORDED_STATUS_COMPLETE  # never recorded
    ok(b.aclrtSynchronizeEvent(end))
    assert b.aclrtEventElapsedTime(start, end)[0] == ACL_ERROR_INVALID_PARAM  # never recorded
    ok(b.aclrtRecordEvent(start, stream))
    pool.launch(stream)
    ok(b.aclrtRecordEvent(end, stream))
    assert ok(b.aclrtQueryEventStatus(end)) == ACL_EVENT_RECORDED_STATUS_NOT_READY
    assert b.aclrtEventElapsedTime(start, end)[0] == ACL_ERROR_RT_EVENT_NOT_COMPLETE
    ok(b.aclrtSynchronizeEvent(end))
    assert ok(b.aclrtQueryEventStatus(end)) == ACL_EVENT_RECORDED_STATUS_COMPLETE
    np.testing.assert_array_equal(pool.result(), POOLED)  # captured work is done
    assert ok(b.aclrtEventElapsedTime(start, end)) >= KERNEL_MS
    for e in (start, end):
        ok(b.aclrtDestroyEvent(e))
    assert b.aclrtQueryEventStatus(start)[0] == ACL_ERROR_INVALID_RESOURCE_HANDLE
    assert b.aclrtDestroyEvent(start) == ACL_ERROR_INVALID_RESOURCE_HANDLE


def test_recording_again_replaces_what_the_event_captures(b, pool, stream, slow):
    event = ok(b.aclrtCreateEvent())
    ok(b.aclrtRecordEvent(event, stream))
    ok(b.aclrtSynchronizeEvent(event))
    pool.launch(stream)
    ok(b.aclrtRecordEvent(event, stream))
    assert ok(b.aclrtQueryEventStatus(event)) == ACL_EVENT_RECORDED_STATUS_NOT_READY
    ok(b.aclrtDestroyEvent(event))


def test_event_flags(b, stream):
    for flag in (4, 64, ACL_EVENT_EXTERNAL | ACL_EVENT_SYNC):
        assert b.aclrtCreateEventWithFlag(flag) == (ACL_ERROR_INVALID_PARAM, None)
        assert "flag" in b.aclGetRecentErrMsg()
    external = ok(b.aclrtCreateEventWithFlag(ACL_EVENT_EXTERNAL))
    sync_only = ok(b.aclrtCreateEventWithFlag(ACL_EVENT_SYNC))
    timed_only = ok(b.aclrtCreateEventWithFlag(ACL_EVENT_TIME_LINE))
    for e in (sync_only, timed_only):
        ok(b.aclrtRecordEvent(e, stream))
    ok(b.aclrtSynchronizeStream(stream))
    assert b.aclrtEventElapsedTime(sync_only, sync_only)[0] == ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID
    assert ok(b.aclrtEventElapsedTime(timed_only, timed_only)) == 0.0
    assert b.aclrtStreamWaitEvent(stream, timed_only) == ACL_ERROR_INVALID_PARAM
    assert "ACL_EVENT_SYNC" in b.aclGetRecentErrMsg()
    ok(b.aclrtStreamWaitEvent(stream, sync_only))
    for e in (external, sync_only, timed_only):
        ok(b.aclrtDestroyEvent(e))


def test_a_pending_event_may_be_destroyed_and_a_queued_wait_on_it_still_works(b, dev, pool, slow):
    s1, s2 = ok(b.aclrtCreateStream()), ok(b.aclrtCreateStream())
    event = ok(b.aclrtCreateEvent())
    copy = dev.array(np.zeros(8, np.float32))
    pool.launch(s1)
    ok(b.aclrtRecordEvent(event, s1))
    ok(b.aclrtStreamWaitEvent(s2, event))
    ok(b.aclrtDestroyEvent(event))
    ok(b.aclrtMemcpyAsync(copy, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_DEVICE, s2))
    ok(b.aclrtSynchronizeStream(s2))
    np.testing.assert_array_equal(dev.read(copy, (1, 1, 2, 2, 2), np.float32), POOLED)
    for s in (s1, s2):
        ok(b.aclrtDestroyStream(s))
    assert b.hazard_count() == 0


# -- hazards -------------------------------------------------------------------
def test_a_correct_program_has_no_hazard(b, dev, pool, stream, slow, capfd):
    event = ok(b.aclrtCreateEvent())
    pool.launch(stream)
    ok(b.aclrtRecordEvent(event, stream))
    ok(b.aclrtStreamWaitEvent(None, event))
    pool.launch(None)
    ok(b.aclrtSynchronizeDevice())
    ok(b.aclrtDestroyEvent(event))
    assert b.hazard_count() == 0
    assert "HAZARD" not in capfd.readouterr().err


def _expect_hazard(b: NumpyBackend, capfd, before: int, *words: str) -> None:
    assert b.hazard_count() == before + 1
    err = capfd.readouterr().err
    assert err.startswith("pyaclnn numpy backend HAZARD: ")
    for word in words:
        assert word in err


def test_freeing_memory_a_pending_task_uses_is_a_hazard(b, dev, pool, stream, slow, capfd, hazards_expected):
    pool.launch(stream)
    ok(b.aclrtFree(pool.out))
    dev.pointers.remove(pool.out)
    _expect_hazard(b, capfd, 0, "freed while", "aclrtFree")
    ok(b.aclrtSynchronizeStream(stream))  # the task kept the memory alive: no crash


def test_freeing_pinned_memory_a_pending_copy_uses_is_a_hazard(
    b, pool, stream, slow, capfd, hazards_expected
):
    pinned = ok(b.aclrtMallocHost(32))
    pool.launch(stream)
    ok(b.aclrtMemcpyAsync(pinned, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_HOST, stream))
    ok(b.aclrtFreeHost(pinned))
    _expect_hazard(b, capfd, 0, "host pinned memory", "aclrtFreeHost")
    ok(b.aclrtSynchronizeStream(stream))


def test_freeing_a_pending_launch_workspace_is_a_hazard(b, dev, pool, stream, slow, capfd, hazards_expected):
    indices = np.full((1, 1, 2, 2, 2), 63, np.int32)
    grad_input = dev.array(np.zeros(X.shape, np.float32))
    _backward(dev, pool, indices, grad_input, stream)
    workspace = dev.pointers.pop()
    ok(b.aclrtFree(workspace))
    _expect_hazard(b, capfd, 0, f"{workspace:#x}")
    ok(b.aclrtSynchronizeStream(stream))
    assert dev.read(grad_input, X.shape, np.float32).reshape(-1)[63] == 8


def test_destroying_a_stream_with_pending_work_is_a_hazard_and_waits(b, pool, slow, capfd, hazards_expected):
    s = ok(b.aclrtCreateStream())
    pool.launch(s)
    ok(b.aclrtDestroyStream(s))
    _expect_hazard(b, capfd, 0, "destroyed with tasks pending", "aclrtDestroyStream")
    np.testing.assert_array_equal(pool.result(), POOLED)  # the destroy waited for it


def test_destroying_a_repeatable_executor_with_a_pending_launch_is_a_hazard(
    b, pool, stream, slow, capfd, hazards_expected
):
    executor = pool.phase1()
    ok(b.aclSetAclOpExecutorRepeatable(executor))
    pool.launch(stream, executor)
    ok(b.aclDestroyAclOpExecutor(executor))
    _expect_hazard(b, capfd, 0, "executor", "aclDestroyAclOpExecutor")
    ok(b.aclrtSynchronizeStream(stream))
    np.testing.assert_array_equal(pool.result(), POOLED)


def test_destroying_a_repeatable_executor_after_synchronize_is_fine(b, pool, stream):
    executor = pool.phase1()
    ok(b.aclSetAclOpExecutorRepeatable(executor))
    for _ in range(2):
        pool.launch(stream, executor)
    ok(b.aclrtSynchronizeStream(stream))
    ok(b.aclDestroyAclOpExecutor(executor))
    assert b.hazard_count() == 0


# -- threads -------------------------------------------------------------------
def test_worker_threads_end_with_their_streams(b):
    before = stream_threads()
    streams = [ok(b.aclrtCreateStream()) for _ in range(3)]
    workers = [s.worker for s in streams]
    assert stream_threads() == before + 3
    assert all(w._thread.daemon for w in workers)  # never keep the process alive at exit
    for s in streams:
        ok(b.aclrtDestroyStream(s))
    assert not any(w.alive for w in workers)
    assert stream_threads() == before
    assert b.aclrtDestroyStream(streams[0]) == ACL_ERROR_INVALID_RESOURCE_HANDLE
    assert b.aclrtSynchronizeStream(streams[0]) == ACL_ERROR_INVALID_RESOURCE_HANDLE


# -- several devices -------------------------------------------------------------
@pytest.fixture
def b2(monkeypatch: pytest.MonkeyPatch) -> Iterator[NumpyBackend]:
    """A backend with two emulated devices (PYACLNN_EMU_DEVICES is read when it is made)."""
    monkeypatch.setenv("PYACLNN_EMU_DEVICES", "2")
    backend = NumpyBackend()
    yield backend
    assert not any(backend.live_counts().values())


def test_devices_are_per_thread_and_count_their_own_objects(b2):
    assert ok(b2.aclrtGetDeviceCount()) == 2
    assert b2.aclrtSetDevice(2) == ACL_ERROR_RT_INVALID_DEVICEID
    assert "0..1" in b2.aclGetRecentErrMsg()
    ok(b2.aclrtSetDevice(1))
    ptr = ok(b2.aclrtMalloc(64, 0))
    s = ok(b2.aclrtCreateStream())
    seen = []
    thread = threading.Thread(target=lambda: seen.append(b2.aclrtGetDevice()[0]))
    thread.start()
    thread.join()
    assert seen == [ACL_ERROR_RT_CONTEXT_NULL]  # none set in that thread
    assert b2.live_counts(1)["device_allocs"] == 1 and b2.live_counts(1)["streams"] == 1
    assert b2.live_counts(0)["device_allocs"] == 0 and b2.live_counts(0)["streams"] == 0
    _, free, total = b2.aclrtGetMemInfo(0)
    assert total - free == 64
    ok(b2.aclrtSetDevice(0))
    _, free, total = b2.aclrtGetMemInfo(0)
    assert total == free
    assert b2.aclrtDestroyStream(s) == ACL_ERROR_RT_STREAM_CONTEXT  # a stream of device 1
    b2.aclGetRecentErrMsg()
    ok(b2.aclrtFree(ptr))  # any device's memory
    ok(b2.aclrtSetDevice(1))
    ok(b2.aclrtDestroyStream(s))


def test_a_launch_with_memory_of_another_device_is_a_hazard(b2, capfd, hazards_expected):
    """CANN checks nothing at the launch; the kernel would fault or read garbage (as the C emulator)."""
    ok(b2.aclrtSetDevice(1))
    dev = Device(b2)
    pool = Pool(dev)  # memory of device 1
    ok(b2.aclrtSetDevice(0))
    s = ok(b2.aclrtCreateStream())  # a stream of device 0
    ok(b2.aclnnMaxPool3dWithArgmax(0, 0, pool.phase1(), s))
    _expect_hazard(b2, capfd, 0, "memory of device 1 (self)", "of device 0", "aclnnMaxPool3dWithArgmax")
    ok(b2.aclrtSynchronizeStream(s))
    ok(b2.aclrtDestroyStream(s))
    ok(b2.aclrtFree(pool.x))  # aclrtFree of another device's memory works
    dev.pointers.remove(pool.x)
    dev.close()


def test_synchronize_device_waits_for_the_current_device_only(b2, monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "50000")
    ok(b2.aclrtSetDevice(1))
    dev = Device(b2)
    pool = Pool(dev)
    s = ok(b2.aclrtCreateStream())
    pool.launch(s)
    ok(b2.aclrtSetDevice(0))
    start = time.perf_counter()
    ok(b2.aclrtSynchronizeDevice())
    assert time.perf_counter() - start < 0.025
    ok(b2.aclrtSetDevice(1))
    ok(b2.aclrtSynchronizeDevice())
    np.testing.assert_array_equal(pool.result(), POOLED)
    ok(b2.aclrtDestroyStream(s))
    dev.close()


# -- contexts: per thread, and streams and events of their device (hicann/runtime; tests/emulator/README.md)
def _in_thread(work):
    """work() in a new thread, which has set no device; its result (its exception re-raised)."""
    result: list = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            result.append(work())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def _no_context(b: NumpyBackend, api: str, result) -> None:
    status = result[0] if isinstance(result, tuple) else result
    assert status == ACL_ERROR_RT_CONTEXT_NULL, (api, result)
    text = b.aclGetRecentErrMsg()
    assert text.startswith(api + ": no device is set in this thread") and "aclrtSetDevice" in text, text


def test_a_thread_that_set_no_device_has_no_context(b, dev, pool, stream):
    event = ok(b.aclrtCreateEvent())
    ok(b.aclrtRecordEvent(event, stream))
    ok(b.aclrtSynchronizeStream(stream))
    executor = pool.phase1()
    pinned = ok(b.aclrtMallocHost(32))
    host = np.zeros(8, np.float32)

    def without_a_device() -> None:
        calls = {
            "aclrtMalloc": lambda: b.aclrtMalloc(64, 0),
            "aclrtMallocHost": lambda: b.aclrtMallocHost(64),
            "aclrtCreateStream": b.aclrtCreateStream,
            "aclrtDestroyStream": lambda: b.aclrtDestroyStream(stream),
            "aclrtSynchronizeStream": lambda: b.aclrtSynchronizeStream(stream),  # even a valid one
            "aclrtSynchronizeDevice": b.aclrtSynchronizeDevice,
            "aclrtCreateEvent": b.aclrtCreateEvent,
            "aclrtCreateEventWithFlag": lambda: b.aclrtCreateEventWithFlag(ACL_EVENT_SYNC),
            "aclrtRecordEvent": lambda: b.aclrtRecordEvent(event, stream),
            "aclrtStreamWaitEvent": lambda: b.aclrtStreamWaitEvent(stream, event),
            "aclrtMemcpy": lambda: b.aclrtMemcpy(host, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_HOST),
            "aclrtMemcpyAsync": lambda: b.aclrtMemcpyAsync(
                pinned, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_HOST, stream
            ),
            "aclrtMemset": lambda: b.aclrtMemset(pool.out, 32, 0, 32),
            "aclrtMemsetAsync": lambda: b.aclrtMemsetAsync(pool.out, 32, 0, 32, stream),
            "aclrtGetDevice": b.aclrtGetDevice,
            "aclrtGetMemInfo": lambda: b.aclrtGetMemInfo(0),
        }
        for api, call in calls.items():
            _no_context(b, api, call())
        assert b.aclrtSynchronizeStream(None) == ACL_ERROR_RT_CONTEXT_NULL  # nor the default stream
        b.aclGetRecentErrMsg()
        # phase 2 fails as a launch does (the executor is consumed)
        assert b.aclnnMaxPool3dWithArgmax(0, 0, executor, stream) == ACLNN_ERR_RUNTIME_ERROR
        assert "ACL_ERROR_RT_CONTEXT_NULL" in b.aclGetRecentErrMsg()
        # what needs a handle only works: events, descriptors, phase 1, aclrtFree(Host)
        ok(b.aclrtSynchronizeEvent(event))
        assert ok(b.aclrtQueryEventStatus(event)) == ACL_EVENT_RECORDED_STATUS_COMPLETE
        assert ok(b.aclrtEventElapsedTime(event, event)) == 0.0
        assert ok(b.aclrtGetDeviceCount()) == 1 and b.aclrtGetSocName()
        ok(b.aclDestroyAclOpExecutor(_repeatable(b, pool.phase1())))
        ok(b.aclrtDestroyEvent(event))
        ok(b.aclrtFreeHost(pinned))
        ok(b.aclrtFree(pool.out))  # allocated by the main thread
        # aclrtSetDevice gives the thread a context; aclrtResetDevice of it takes it away
        ok(b.aclrtSetDevice(0))
        ok(b.aclrtFree(ok(b.aclrtMalloc(64, 0))))
        assert ok(b.aclrtGetDevice()) == 0
        ok(b.aclrtResetDevice(0))
        _no_context(b, "aclrtMalloc", b.aclrtMalloc(64, 0))

    _in_thread(without_a_device)
    dev.pointers.remove(pool.out)


def _repeatable(b: NumpyBackend, executor):
    ok(b.aclSetAclOpExecutorRepeatable(executor))
    return executor


def test_reset_device_of_another_device_keeps_the_context(b2):
    ok(b2.aclrtSetDevice(1))
    ok(b2.aclrtResetDevice(0))
    assert ok(b2.aclrtGetDevice()) == 1
    ok(b2.aclrtResetDevice(1))
    assert b2.aclrtGetDevice()[0] == ACL_ERROR_RT_CONTEXT_NULL


def test_streams_and_events_belong_to_the_device_current_at_their_creation(b2):
    ok(b2.aclrtSetDevice(1))
    dev1 = Device(b2)
    mem1 = dev1.array(np.zeros(8, np.float32))
    s1, event1 = ok(b2.aclrtCreateStream()), ok(b2.aclrtCreateEvent())
    ok(b2.aclrtSetDevice(0))
    dev0 = Device(b2)
    pool = Pool(dev0)
    executor = _repeatable(b2, pool.phase1())
    s0, event0 = ok(b2.aclrtCreateStream()), ok(b2.aclrtCreateEvent())

    def refused(api: str, status: int) -> None:
        assert status == ACL_ERROR_RT_STREAM_CONTEXT, (api, status)
        text = b2.aclGetRecentErrMsg()
        assert text.startswith(api + ": ") and "ACL_ERROR_RT_STREAM_CONTEXT" in text, text

    refused("aclrtMemsetAsync", b2.aclrtMemsetAsync(mem1, 32, 0, 32, s1))
    refused("aclrtMemcpyAsync", b2.aclrtMemcpyAsync(mem1, 32, pool.out, 32, ACL_MEMCPY_DEVICE_TO_DEVICE, s1))
    refused("aclrtRecordEvent", b2.aclrtRecordEvent(event0, s1))
    refused("aclrtRecordEvent", b2.aclrtRecordEvent(event1, s0))  # the event's device differs
    refused("aclrtStreamWaitEvent", b2.aclrtStreamWaitEvent(s1, event0))
    refused("aclrtDestroyStream", b2.aclrtDestroyStream(s1))
    assert b2.aclnnMaxPool3dWithArgmax(0, 0, executor, s1) == ACLNN_ERR_RUNTIME_ERROR
    assert "ACL_ERROR_RT_STREAM_CONTEXT" in b2.aclGetRecentErrMsg()
    ok(b2.aclrtSynchronizeStream(s1))  # another device's stream may be synchronized
    assert b2.hazard_count() == 0  # errors, not hazards
    ok(b2.aclDestroyAclOpExecutor(executor))
    ok(b2.aclrtDestroyStream(s0))
    for event in (event0, event1):
        ok(b2.aclrtDestroyEvent(event))  # any device's event
    ok(b2.aclrtSetDevice(1))  # the same calls from device 1 work
    ok(b2.aclrtMemsetAsync(mem1, 32, 0, 32, s1))
    ok(b2.aclrtSynchronizeStream(s1))
    ok(b2.aclrtDestroyStream(s1))
    dev0.close()
    dev1.close()


def test_a_stream_waits_for_an_event_of_another_device(b2, monkeypatch):
    """Atlas A2/A3's cross-device wait: accepted, and the waiting stream really waits."""
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "50000")
    ok(b2.aclrtSetDevice(1))
    dev1 = Device(b2)
    pool = Pool(dev1)
    s1, done = ok(b2.aclrtCreateStream()), ok(b2.aclrtCreateEvent())
    start = time.perf_counter()
    pool.launch(s1)
    ok(b2.aclrtRecordEvent(done, s1))
    ok(b2.aclrtSetDevice(0))
    dev0 = Device(b2)
    mark = dev0.array(np.zeros(4, np.uint8))
    s0 = ok(b2.aclrtCreateStream())
    ok(b2.aclrtStreamWaitEvent(s0, done))  # a stream of device 0, an event of device 1
    ok(b2.aclrtMemsetAsync(mark, 4, 1, 4, s0))
    ok(b2.aclrtSynchronizeStream(s0))
    assert time.perf_counter() - start >= 0.05  # it waited for device 1's kernel
    np.testing.assert_array_equal(pool.result(), POOLED)
    assert (dev0.read(mark, 4, np.uint8) == 1).all()
    ok(b2.aclrtDestroyStream(s0))
    ok(b2.aclrtDestroyEvent(done))
    ok(b2.aclrtSetDevice(1))
    ok(b2.aclrtDestroyStream(s1))
    dev0.close()
    dev1.close()


def test_a_device_error_continues_on_failure(b, dev, pool):
    """CANN's default CONTINUE_ON_FAILURE mode (Stream::GetError, hicann/runtime's stream.cc): the
    error is the failing stream's, reported once; events after it complete, waiters go on."""
    failing, waiting = ok(b.aclrtCreateStream()), ok(b.aclrtCreateStream())
    after, seen = dev.array(np.zeros(4, np.uint8)), dev.array(np.zeros(4, np.uint8))
    after_fail = ok(b.aclrtCreateEvent())
    indices = np.zeros((1, 1, 2, 2, 2), np.int32)
    indices[0, 0, 0, 0, 0] = 99
    grad_input = dev.array(np.zeros(X.shape, np.float32))
    executor = _repeatable(b, _backward_phase1(dev, pool, indices, grad_input))
    workspace = dev.array(np.zeros(BACKWARD_WORKSPACE, np.uint8))

    def fail(stream) -> None:
        ok(b.aclnnMaxPool3dWithArgmaxBackward(workspace, BACKWARD_WORKSPACE, executor, stream))

    fail(failing)
    ok(b.aclrtRecordEvent(after_fail, failing))
    ok(b.aclrtMemsetAsync(after, 4, 1, 4, failing))  # later work on the stream
    ok(b.aclrtStreamWaitEvent(waiting, after_fail))
    ok(b.aclrtMemsetAsync(seen, 4, 2, 4, waiting))
    ok(b.aclrtSynchronizeEvent(after_fail))  # the event does not carry the error
    assert ok(b.aclrtQueryEventStatus(after_fail)) == ACL_EVENT_RECORDED_STATUS_COMPLETE
    ok(b.aclrtSynchronizeStream(waiting))  # the waiter proceeds, without the error
    assert (dev.read(seen, 4, np.uint8) == 2).all()
    assert b.aclrtSynchronizeStream(failing) == ACL_ERROR_RT_VECTOR_CORE_EXCEPTION  # reported once ...
    assert "device error of a launch on stream" in b.aclGetRecentErrMsg()
    ok(b.aclrtSynchronizeStream(failing))  # ... and cleared
    ok(b.aclrtSynchronizeDevice())
    assert (dev.read(after, 4, np.uint8) == 1).all()  # later work ran
    # aclrtSynchronizeDevice reports a failure not reported yet, and clears every stream's
    for s in (failing, waiting):
        fail(s)
    assert b.aclrtSynchronizeDevice() == ACL_ERROR_RT_VECTOR_CORE_EXCEPTION
    b.aclGetRecentErrMsg()
    for s in (failing, waiting):
        ok(b.aclrtSynchronizeStream(s))
    ok(b.aclrtSynchronizeDevice())
    ok(b.aclrtMemsetAsync(after, 4, 3, 4, failing))  # the stream keeps working
    ok(b.aclrtSynchronizeStream(failing))
    assert (dev.read(after, 4, np.uint8) == 3).all()
    ok(b.aclrtDestroyEvent(after_fail))
    ok(b.aclDestroyAclOpExecutor(executor))
    for s in (failing, waiting):
        ok(b.aclrtDestroyStream(s))


# -- a waiting caller runs the queued tasks ----------------------------------------------


def test_a_waiting_caller_runs_queued_tasks_in_order_after_the_running_one(b, stream):
    """The synchronizing thread takes over queued tasks only once nothing of the stream runs."""
    order: list[tuple[str, int]] = []
    first_started = threading.Event()

    def first() -> None:
        first_started.set()
        time.sleep(0.05)
        order.append(("first", threading.get_ident()))

    worker = stream.worker
    worker.submit(Task(first))
    first_started.wait()
    for i in range(3):
        worker.submit(Task(lambda i=i: order.append((f"next{i}", threading.get_ident()))))
    ok(b.aclrtSynchronizeStream(stream))
    assert [name for name, _ in order] == ["first", "next0", "next1", "next2"]
    assert order[0][1] != threading.get_ident()  # the worker ran the task that was running
    assert not worker.busy()


def test_a_task_interrupted_in_a_waiting_caller_runs_again_and_the_stream_moves_on(b, stream):
    """A KeyboardInterrupt inside a task the caller runs reaches the caller; the task is run
    again, whole (a device is never interrupted), and later work still runs."""
    runs = []

    def interrupted_once() -> None:
        runs.append(threading.get_ident())
        if len(runs) == 1 and threading.current_thread() is threading.main_thread():
            raise KeyboardInterrupt

    worker = stream.worker
    seq = worker.submit(Task(interrupted_once))
    try:
        worker.wait(seq)  # the caller runs it, unless the worker thread was quicker
    except KeyboardInterrupt:
        pass
    done = threading.Event()
    worker.submit(Task(done.set))
    ok(b.aclrtSynchronizeStream(stream))
    assert done.is_set() and not worker.busy()
    assert len(runs) in (1, 2) and (len(runs) == 1) == (runs[0] != threading.get_ident())


# -- a call that waits at once does not wake the worker ----------------------------------------


def _ran_by(worker_thread: threading.Thread, ran: list[threading.Thread], deadline_s: float = 5.0) -> bool:
    """Whether a task recorded in ``ran`` by ``worker_thread`` shows up before the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if worker_thread in ran:
            return True
        time.sleep(0.005)
    return False


def test_a_task_left_queued_by_a_block_that_waits_at_once_is_run_by_the_worker_when_it_ends(b, stream):
    """The block holds the worker's wake-up back; whatever it leaves queued (an error between the
    launch and the wait, say) still runs, woken as the block ends."""
    worker = stream.worker
    ran: list[threading.Thread] = []
    with waited_at_once():
        worker.submit(Task(lambda: ran.append(threading.current_thread())))
        time.sleep(0.05)
        assert ran == []  # not woken: the worker sleeps on
    assert _ran_by(worker._thread, ran)


def test_a_query_inside_a_block_that_waits_at_once_wakes_the_worker(b, stream):
    """A thread polling its own held-back work (a pool's fence) would wait for ever: the query
    wakes the worker."""
    worker = stream.worker
    ran: list[threading.Thread] = []
    with waited_at_once():
        seq = worker.submit(Task(lambda: ran.append(threading.current_thread())))
        end = time.monotonic() + 5.0
        while not worker.settled(seq) and time.monotonic() < end:
            pass
        assert ran == [worker._thread]


def test_a_call_on_numpy_arrays_runs_its_kernel_in_the_caller_without_waking_the_worker(monkeypatch):
    """pyaclnn.ops on NumPy arrays waits for its work at once: the caller runs it, and the worker
    thread is not woken for it (the wake-up only made it contend for the GIL)."""
    import pyaclnn
    from pyaclnn import ops
    from pyaclnn.backends.numpy import _streams

    woken: list[str] = []
    submit = _streams.Worker.submit

    def noting_submit(self: _streams.Worker, task: Task) -> int:
        if self._idle and _streams._DEFERRED.workers is None:
            woken.append(task.what)  # submit wakes an idle worker outside a held-back block
        return submit(self, task)

    monkeypatch.setattr(_streams.Worker, "submit", noting_submit)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.ones(4, np.float32)
    out = np.empty(3, np.float32)
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    try:
        pyaclnn.synchronize()
        time.sleep(0.05)  # every worker asleep
        for _ in range(3):
            assert ops.mv(a, v, out, 0) is out
            np.testing.assert_array_equal(out, a.sum(axis=1))
    finally:
        pyaclnn.set_backend(previous)
    assert woken == []
