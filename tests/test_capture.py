"""Stream capture (aclmdlRI, CANN 8.1.RC1's acl_mdl.h) on both emulations: the numpy backend and
the npu backend over the C emulator of CANN.

The work queued on a capturing stream is recorded instead of run; aclmdlRIExecuteAsync queues it
again, in order, with each kernel's simulated time; the calls CANN refuses during a capture are
refused with CANN's codes (the rules and their sources: pyaclnn/backends/numpy/_capture.py and
tests/emulator/README.md). Everything here goes through the low-level API, the way the C samples
do: the functional API allocates its outputs and workspace during a call, which a capture must
not see.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import emulator_build
import numpy as np
import pytest

import pyaclnn
from pyaclnn import acl, aclnn, backends, dtypes
from pyaclnn.constants import (
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
    ACL_ERROR_RT_EVENT_CAPTURED,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
    ACL_ERROR_RT_STREAM_CAPTURED,
    ACL_ERROR_RT_STREAM_NOT_CAPTURED,
    ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED,
    ACL_MODEL_RI_CAPTURE_STATUS_NONE,
)

RNG = np.random.default_rng(22)
SHAPE = (1, 2, 4, 8, 8)  # N, C, D, H, W
POOLED = (1, 2, 2, 4, 4)  # kernel 2, stride 2
NBYTES = int(np.prod(SHAPE)) * 4


def _refused(status: int, call, *args, **kwargs) -> pyaclnn.AclError:
    with pytest.raises(pyaclnn.AclError) as info:
        call(*args, **kwargs)
    assert info.value.status == status, info.value
    return info.value


def _status(stream, b: str) -> int:
    return acl.mdl.capture_get_info(stream, backend=b)[0]


class Pool:
    """Device buffers of one max-pool forward and the launch of it on a stream (low-level API)."""

    def __init__(self, b: str) -> None:
        self.b = b
        self.x = acl.rt.malloc(NBYTES, backend=b)
        self.out = acl.rt.malloc(NBYTES // 8, backend=b)
        self.idx = acl.rt.malloc(NBYTES // 8, backend=b)

    def launch(self, stream) -> None:
        """Descriptors, phase 1 and phase 2 on ``stream`` (all made and freed inside the call)."""
        b = self.b
        fmt, f32, i32 = dtypes.ACL_FORMAT_NCDHW, dtypes.ACL_FLOAT, dtypes.ACL_INT32
        x = acl.create_tensor(SHAPE, f32, None, 0, fmt, SHAPE, self.x, backend=b)
        out = acl.create_tensor(POOLED, f32, None, 0, fmt, POOLED, self.out, backend=b)
        idx = acl.create_tensor(POOLED, i32, None, 0, fmt, POOLED, self.idx, backend=b)
        arrays = [acl.create_int_array(v, backend=b) for v in ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1])]
        try:
            size, executor = aclnn.max_pool3d_with_argmax_get_workspace_size(
                x, *arrays, False, out, idx, backend=b
            )
            assert size == 0  # nothing to allocate: a capture must not see an allocation
            aclnn.max_pool3d_with_argmax(0, 0, executor, stream, backend=b)
        finally:
            for t in (x, out, idx):
                acl.destroy_tensor(t, backend=b)
            for a in arrays:
                acl.destroy_int_array(a, backend=b)

    def results(self) -> tuple[np.ndarray, np.ndarray]:
        out, idx = np.empty(POOLED, np.float32), np.empty(POOLED, np.int32)
        acl.rt.memcpy(out, out.nbytes, self.out, out.nbytes, ACL_MEMCPY_DEVICE_TO_HOST, backend=self.b)
        acl.rt.memcpy(idx, idx.nbytes, self.idx, idx.nbytes, ACL_MEMCPY_DEVICE_TO_HOST, backend=self.b)
        return out, idx

    def free(self) -> None:
        for p in (self.x, self.out, self.idx):
            acl.rt.free(p, backend=self.b)


@pytest.fixture
def stream(backend):
    acl.rt.set_device(0, backend=backend)
    s = acl.rt.create_stream(backend=backend)
    yield s
    if _status(s, backend) != ACL_MODEL_RI_CAPTURE_STATUS_NONE:  # a failed test left it capturing
        graph = _end_quietly(s, backend)
        if graph is not None:
            acl.mdl.destroy(graph, backend=backend)
    acl.rt.synchronize_stream(s, backend=backend)
    acl.rt.destroy_stream(s, backend=backend)


def _end_quietly(s, b: str):
    try:
        return acl.mdl.capture_end(s, backend=b)
    except pyaclnn.AclError:
        return None


def _upload(b: str, pinned: int, x: np.ndarray) -> None:
    """Write ``x`` into pinned host memory (a synchronous host-to-host copy: never during a capture)."""
    acl.rt.memcpy(pinned, x.nbytes, x, x.nbytes, ACL_MEMCPY_HOST_TO_HOST, backend=b)


# -- capture and replay ------------------------------------------------------------------------------


def test_replays_give_the_results_of_the_same_work_run_eagerly_bit_for_bit(backend, stream):
    b = backend
    pinned = acl.rt.malloc_host(NBYTES, backend=b)
    captured, eager = Pool(b), Pool(b)
    try:
        acl.mdl.capture_begin(stream, backend=b)
        # upload from pinned memory, pool, then pool again after zeroing the output: the order matters
        acl.rt.memcpy_async(captured.x, NBYTES, pinned, NBYTES, ACL_MEMCPY_HOST_TO_DEVICE, stream, backend=b)
        captured.launch(stream)
        acl.rt.memset_async(captured.out, NBYTES // 8, 0, NBYTES // 8, stream, backend=b)
        captured.launch(stream)
        graph = acl.mdl.capture_end(stream, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
        before = captured.results()
        for _ in range(2):  # each replay on new input, against the eager run of that input
            x = RNG.standard_normal(SHAPE, dtype=np.float32)
            _upload(b, pinned, x)
            acl.mdl.execute_async(graph, stream, backend=b)
            acl.rt.memcpy(eager.x, NBYTES, x, NBYTES, ACL_MEMCPY_HOST_TO_DEVICE, backend=b)
            eager.launch(stream)
            acl.rt.synchronize_stream(stream, backend=b)
            got, want = captured.results(), eager.results()
            np.testing.assert_array_equal(got[0].view(np.uint32), want[0].view(np.uint32))
            np.testing.assert_array_equal(got[1], want[1])
            assert not np.array_equal(got[0], before[0])  # the replay wrote them
        assert backends.get(b).live_counts()["graphs"] == 1
        acl.mdl.destroy(graph, backend=b)
        assert backends.get(b).live_counts()["graphs"] == 0
    finally:
        captured.free()
        eager.free()
        acl.rt.free_host(pinned, backend=b)


def test_captured_work_is_recorded_not_run(backend, stream):
    b = backend
    p = acl.rt.malloc(64, backend=b)
    acl.rt.memset(p, 64, 1, 64, backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    status, graph = acl.mdl.capture_get_info(stream, backend=b)
    assert status == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE and graph is not None
    acl.rt.memset_async(p, 64, 7, 64, stream, backend=b)
    ended = acl.mdl.capture_end(stream, backend=b)
    assert acl.mdl.capture_get_info(stream, backend=b) == (ACL_MODEL_RI_CAPTURE_STATUS_NONE, None)
    acl.rt.synchronize_stream(stream, backend=b)
    host = np.empty(64, np.uint8)
    acl.rt.memcpy(host, 64, p, 64, ACL_MEMCPY_DEVICE_TO_HOST, backend=b)
    assert (host == 1).all()  # not run at the capture
    acl.mdl.execute_async(ended, stream, backend=b)
    acl.rt.synchronize_stream(stream, backend=b)
    acl.rt.memcpy(host, 64, p, 64, ACL_MEMCPY_DEVICE_TO_HOST, backend=b)
    assert (host == 7).all()
    acl.mdl.destroy(ended, backend=b)
    acl.rt.free(p, backend=b)


def test_a_replay_queues_the_kernels_in_order_each_with_its_simulated_time(backend, stream, monkeypatch):
    b = backend
    n = 10
    pool = Pool(b)
    pool.launch(stream)  # the first run of a kernel pays one-time setup (~30 ms): not in the measurement
    acl.rt.synchronize_stream(stream, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "2000")  # read at each launch, so at the capture
    start, end = acl.rt.create_event(backend=b), acl.rt.create_event(backend=b)
    graph = None
    try:
        acl.mdl.capture_begin(stream, backend=b)
        for _ in range(n):
            pool.launch(stream)
        acl.rt.record_event(end, stream, backend=b)  # recorded in the graph: after its kernels
        graph = acl.mdl.capture_end(stream, backend=b)
        acl.rt.record_event(start, stream, backend=b)
        acl.mdl.execute_async(graph, stream, backend=b)
        # queued, not run in the call: the graph's 20 ms of kernels are not done when it returns
        assert acl.rt.query_event_status(end, backend=b) == ACL_EVENT_RECORDED_STATUS_NOT_READY
        acl.rt.synchronize_stream(stream, backend=b)
        # one after another, each with its simulated time
        assert acl.rt.event_elapsed_time(start, end, backend=b) >= n * 2.0
    finally:
        if graph is not None:
            acl.mdl.destroy(graph, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
        acl.rt.destroy_event(start, backend=b)
        acl.rt.destroy_event(end, backend=b)
        pool.free()


def test_captured_event_records_and_waits_are_replayed(backend, stream, monkeypatch):
    b = backend
    other = acl.rt.create_stream(backend=b)
    event = acl.rt.create_event(backend=b)
    pool = Pool(b)
    x = RNG.standard_normal(SHAPE, dtype=np.float32)
    acl.rt.memcpy(pool.x, NBYTES, x, NBYTES, ACL_MEMCPY_HOST_TO_DEVICE, backend=b)
    acl.rt.memset(pool.out, NBYTES // 8, 0, NBYTES // 8, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "20000")  # the kernel is still running below
    graph = None
    try:
        acl.mdl.capture_begin(stream, backend=b)
        pool.launch(stream)
        acl.rt.record_event(event, stream, backend=b)
        graph = acl.mdl.capture_end(stream, backend=b)
        acl.mdl.execute_async(graph, stream, backend=b)
        acl.rt.stream_wait_event(other, event, backend=b)  # waits for the replay's record
        out = np.zeros(POOLED, np.float32)
        # pageable: returns once done, in order after the wait
        acl.rt.memcpy_async(
            out, out.nbytes, pool.out, out.nbytes, ACL_MEMCPY_DEVICE_TO_HOST, other, backend=b
        )
        acl.rt.synchronize_stream(stream, backend=b)
        np.testing.assert_array_equal(out, pool.results()[0])
        assert (out != 0).all()
    finally:
        if graph is not None:
            acl.mdl.destroy(graph, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
        acl.rt.destroy_event(event, backend=b)
        acl.rt.destroy_stream(other, backend=b)
        pool.free()


# -- the documented restrictions ------------------------------------------------------------------


def test_the_default_stream_cannot_be_captured(backend, stream):
    error = _refused(ACL_ERROR_INVALID_PARAM, acl.mdl.capture_begin, None, backend=backend)
    assert "default stream cannot be captured" in str(error)
    assert backends.get(backend).live_counts()["graphs"] == 0


def test_a_stream_already_capturing_cannot_begin_again(backend, stream):
    b = backend
    acl.mdl.capture_begin(stream, backend=b)
    _refused(ACL_ERROR_RT_STREAM_CAPTURED, acl.mdl.capture_begin, stream, backend=b)
    assert _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
    acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)


def test_modes_outside_the_enum_are_refused(backend, stream):
    b = backend
    _refused(ACL_ERROR_RT_PARAM_INVALID, acl.mdl.capture_begin, stream, 3, backend=b)
    assert _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_NONE
    _refused(ACL_ERROR_RT_PARAM_INVALID, acl.mdl.capture_thread_exchange_mode, 3, backend=b)


def test_ending_a_stream_that_is_not_capturing_is_refused(backend, stream):
    _refused(ACL_ERROR_RT_STREAM_NOT_CAPTURED, acl.mdl.capture_end, stream, backend=backend)


@pytest.mark.parametrize("call", ["synchronize", "synchronize device", "destroy", "execute"])
def test_a_capturing_stream_cannot_be_synchronized_destroyed_or_run_a_graph(backend, stream, call):
    b = backend
    graph = None
    if call == "execute":  # a graph to run
        acl.mdl.capture_begin(stream, backend=b)
        graph = acl.mdl.capture_end(stream, backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    if call == "synchronize":
        _refused(ACL_ERROR_RT_STREAM_CAPTURED, acl.rt.synchronize_stream, stream, backend=b)
    elif call == "synchronize device":  # Context::Synchronize: any capturing stream of the device
        _refused(ACL_ERROR_RT_STREAM_CAPTURED, acl.rt.synchronize_device, backend=b)
    elif call == "destroy":
        _refused(ACL_ERROR_RT_STREAM_CAPTURED, acl.rt.destroy_stream, stream, backend=b)
    else:
        _refused(ACL_ERROR_RT_STREAM_CAPTURED, acl.mdl.execute_async, graph, stream, backend=b)
    assert (
        _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
    )  # CANN refuses the call, the capture goes on
    acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
    if graph is not None:
        acl.mdl.destroy(graph, backend=b)


def test_an_event_recorded_into_an_active_capture_cannot_be_synchronized_or_queried(backend, stream):
    b = backend
    captured, other = acl.rt.create_event(backend=b), acl.rt.create_event(backend=b)
    try:
        acl.rt.record_event(other, stream, backend=b)
        acl.rt.synchronize_event(other, backend=b)
        acl.mdl.capture_begin(stream, backend=b)
        acl.rt.record_event(captured, stream, backend=b)
        _refused(ACL_ERROR_RT_EVENT_CAPTURED, acl.rt.synchronize_event, captured, backend=b)
        _refused(ACL_ERROR_RT_EVENT_CAPTURED, acl.rt.query_event_status, captured, backend=b)
        _refused(ACL_ERROR_RT_EVENT_CAPTURED, acl.rt.event_elapsed_time, other, captured, backend=b)
        _refused(ACL_ERROR_RT_EVENT_CAPTURED, acl.rt.event_elapsed_time, captured, other, backend=b)
        acl.rt.synchronize_event(other, backend=b)  # recorded before the capture: not capturing
        graph = acl.mdl.capture_end(stream, backend=b)
        acl.rt.synchronize_event(captured, backend=b)  # the capture ended: allowed again
        acl.rt.query_event_status(captured, backend=b)
        acl.mdl.destroy(graph, backend=b)
    finally:
        acl.rt.destroy_event(captured, backend=b)
        acl.rt.destroy_event(other, backend=b)


@pytest.mark.parametrize("api", ["memcpy", "memset"])
def test_synchronous_copies_and_memsets_are_refused_in_global_mode_and_the_capture_goes_on(
    backend, stream, api
):
    b = backend
    p = acl.rt.malloc(64, backend=b)
    host = np.zeros(64, np.uint8)

    def call() -> None:
        if api == "memcpy":
            acl.rt.memcpy(host, 64, p, 64, ACL_MEMCPY_DEVICE_TO_HOST, backend=b)
        else:
            acl.rt.memset(p, 64, 0, 64, backend=b)

    try:
        acl.mdl.capture_begin(stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, backend=b)
        _refused(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, call)
        # GLOBAL forbids them in every thread whose exchange mode is GLOBAL (the default) ...
        failures: list[int] = []

        def other_thread() -> None:
            acl.rt.set_device(0, backend=b)
            for _ in ("as it is", "with exchange mode THREAD_LOCAL"):
                try:
                    call()
                except pyaclnn.AclError as exc:
                    failures.append(exc.status)
                # another thread's THREAD_LOCAL is free of this thread's GLOBAL capture
                acl.mdl.capture_thread_exchange_mode(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, backend=b)

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert failures == [ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT]
        # the capturing thread is not: THREAD_LOCAL still forbids them to it
        acl.mdl.capture_thread_exchange_mode(ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, backend=b)
        _refused(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, call)
        # ... and a thread that exchanges its mode for RELAXED may call them
        assert acl.mdl.capture_thread_exchange_mode(ACL_MODEL_RI_CAPTURE_MODE_RELAXED, backend=b) == (
            ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL
        )
        call()
        assert acl.mdl.capture_thread_exchange_mode(ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, backend=b) == (
            ACL_MODEL_RI_CAPTURE_MODE_RELAXED
        )
        assert _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE  # CANN's capture_mode_api_03
        acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
        call()  # allowed again once no capture is active
    finally:
        acl.rt.free(p, backend=b)


def test_thread_local_mode_forbids_synchronous_calls_to_the_capturing_thread_only(backend, stream):
    b = backend
    p = acl.rt.malloc(64, backend=b)
    try:
        acl.mdl.capture_begin(stream, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, backend=b)
        _refused(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, acl.rt.memset, p, 64, 0, 64, backend=b)
        failures: list[int] = []

        def other_thread() -> None:
            acl.rt.set_device(0, backend=b)
            try:
                acl.rt.memset(p, 64, 0, 64, backend=b)
            except pyaclnn.AclError as exc:
                failures.append(exc.status)

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert failures == []
        acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
        acl.mdl.capture_begin(stream, ACL_MODEL_RI_CAPTURE_MODE_RELAXED, backend=b)
        acl.rt.memset(p, 64, 0, 64, backend=b)  # RELAXED forbids nothing
        acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
    finally:
        acl.rt.free(p, backend=b)


@pytest.mark.parametrize(
    ("mode", "status"),
    [
        (ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT),
        (ACL_MODEL_RI_CAPTURE_MODE_RELAXED, ACL_ERROR_RT_PARAM_INVALID),
    ],
)
def test_a_pageable_copy_on_the_capturing_stream_is_refused_and_invalidates_the_capture(
    backend, stream, mode, status
):
    b = backend
    p = acl.rt.malloc(64, backend=b)
    host = np.zeros(64, np.uint8)  # pageable: not from aclrtMallocHost
    try:
        acl.mdl.capture_begin(stream, mode, backend=b)
        acl.rt.memset_async(p, 64, 5, 64, stream, backend=b)
        _refused(status, acl.rt.memcpy_async, host, 64, p, 64, ACL_MEMCPY_DEVICE_TO_HOST, stream, backend=b)
        assert _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
        _refused(ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, acl.mdl.capture_end, stream, backend=b)
        # the graph is gone and the stream is out of capture: it can capture again
        assert _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_NONE
        assert backends.get(b).live_counts()["graphs"] == 0
        acl.mdl.capture_begin(stream, backend=b)
        acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
    finally:
        acl.rt.free(p, backend=b)


def test_a_pageable_copy_on_another_stream_is_refused_in_global_mode(backend, stream):
    b = backend
    other = acl.rt.create_stream(backend=b)
    p = acl.rt.malloc(64, backend=b)
    host = np.zeros(64, np.uint8)
    try:
        acl.mdl.capture_begin(stream, backend=b)
        _refused(
            ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
            acl.rt.memcpy_async,
            host,
            64,
            p,
            64,
            ACL_MEMCPY_DEVICE_TO_HOST,
            other,
            backend=b,
        )
        assert _status(stream, b) == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE  # not the capture's task
        acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
    finally:
        acl.rt.free(p, backend=b)
        acl.rt.destroy_stream(other, backend=b)


# -- memory a live graph uses -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_freeing_memory_a_live_graph_uses_is_a_hazard(name, request, monkeypatch, hazards_expected, capfd):
    # Not the backend fixture: it fails a test that leaves a hazard, and this one makes one.
    if name == "npu":
        monkeypatch.setenv("PYACLNN_ASCEND_HOME", str(request.getfixturevalue("emulator_home")))
    b = name
    emulator = backends.get(b)
    acl.rt.set_device(0, backend=b)
    stream = acl.rt.create_stream(backend=b)
    p, q = acl.rt.malloc(64, backend=b), acl.rt.malloc(64, backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    acl.rt.memset_async(p, 64, 7, 64, stream, backend=b)
    graph = acl.mdl.capture_end(stream, backend=b)
    before = emulator.hazard_count()
    acl.rt.free(q, backend=b)  # not used by the graph: no hazard
    assert emulator.hazard_count() == before
    acl.rt.free(p, backend=b)
    assert emulator.hazard_count() == before + 1
    assert "freed while" in capfd.readouterr().err
    acl.mdl.destroy(graph, backend=b)
    acl.rt.synchronize_stream(stream, backend=b)
    acl.rt.destroy_stream(stream, backend=b)
    pyaclnn.finalize(b)
    assert not any(emulator.live_counts().values())


@pytest.mark.parametrize("name", ["numpy", "npu"])
@pytest.mark.parametrize("step", ["record", "wait"])
def test_destroying_an_event_a_live_graph_records_or_waits_for_is_a_hazard(
    name, step, request, monkeypatch, hazards_expected, capfd
):
    # Each replay records the event anew, or waits for it: destroyed first, the replay would use a
    # destroyed event. Destroyed after the graph, it is no hazard.
    if name == "npu":
        monkeypatch.setenv("PYACLNN_ASCEND_HOME", str(request.getfixturevalue("emulator_home")))
    b = name
    emulator = backends.get(b)
    acl.rt.set_device(0, backend=b)
    stream = acl.rt.create_stream(backend=b)
    used, unused = acl.rt.create_event(backend=b), acl.rt.create_event(backend=b)
    acl.rt.record_event(used, stream, backend=b)  # recorded before: a wait has a record to wait for
    acl.rt.synchronize_stream(stream, backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    if step == "record":
        acl.rt.record_event(used, stream, backend=b)
    else:
        acl.rt.stream_wait_event(stream, used, backend=b)
    graph = acl.mdl.capture_end(stream, backend=b)
    before = emulator.hazard_count()
    acl.rt.destroy_event(unused, backend=b)
    assert emulator.hazard_count() == before
    acl.rt.destroy_event(used, backend=b)
    assert emulator.hazard_count() == before + 1
    assert "destroyed while a live graph" in capfd.readouterr().err
    acl.mdl.destroy(graph, backend=b)
    again = acl.rt.create_event(backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    acl.rt.record_event(again, stream, backend=b)
    acl.mdl.destroy(acl.mdl.capture_end(stream, backend=b), backend=b)
    acl.rt.destroy_event(again, backend=b)  # the graph went first: no hazard
    assert emulator.hazard_count() == before + 1
    acl.rt.destroy_stream(stream, backend=b)
    pyaclnn.finalize(b)
    assert not any(emulator.live_counts().values())


# -- the functional API ------------------------------------------------------------------------------


def test_a_warm_functional_call_on_device_arrays_is_captured_and_replayed(backend):
    # On DeviceArrays with out= and a warm stream (its workspace and executor cache made by a first
    # call) the functional call neither allocates nor synchronizes: it can be captured.
    b = backend
    stream = pyaclnn.Stream(backend=b)
    first, second = (RNG.standard_normal(SHAPE, dtype=np.float32) for _ in range(2))
    x = pyaclnn.to_device(first, backend=b)
    out, idx = pyaclnn.empty(POOLED, np.float32, backend=b), pyaclnn.empty(POOLED, np.int32, backend=b)
    pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), stream=stream, backend=b)
    stream.synchronize()
    graph = None
    try:
        allocations = backends.get(b).live_counts()["device_allocs"]
        acl.mdl.capture_begin(stream.handle, backend=b)
        # a synchronize of the stream would be refused (107027) and raise here
        pyaclnn.max_pool3d_with_argmax(x, 2, out=(out, idx), stream=stream, backend=b)
        graph = acl.mdl.capture_end(stream.handle, backend=b)
        assert backends.get(b).live_counts()["device_allocs"] == allocations  # nothing allocated
        for data in (second, first):
            x.copy_(data, stream=stream)
            acl.mdl.execute_async(graph, stream.handle, backend=b)
            stream.synchronize()
            want_out, want_idx = pyaclnn.max_pool3d_with_argmax(data, 2, backend=b)  # eager, on NumPy
            np.testing.assert_array_equal(out.numpy().view(np.uint32), want_out.view(np.uint32))
            np.testing.assert_array_equal(idx.numpy(), want_idx)
    finally:
        if graph is not None:
            acl.mdl.destroy(graph, backend=b)
        for a in (x, out, idx):
            a.close()
        stream.close()


# -- the split layout (CANN >= 8.5: libacl_rt.so) ------------------------------------------------------

SPLIT_CHILD = """
import json
import numpy as np
from pyaclnn import acl, backends
from pyaclnn.constants import ACL_MEMCPY_DEVICE_TO_HOST as D2H
b = "npu"
acl.rt.set_device(0, backend=b)
s = acl.rt.create_stream(backend=b)
p = acl.rt.malloc(64, backend=b)
acl.mdl.capture_begin(s, backend=b)
acl.rt.memset_async(p, 64, 9, 64, s, backend=b)
status = acl.mdl.capture_get_info(s, backend=b)[0]
graph = acl.mdl.capture_end(s, backend=b)
host = np.zeros(64, np.uint8)
acl.mdl.execute_async(graph, s, backend=b)
acl.rt.synchronize_stream(s, backend=b)
acl.rt.memcpy(host, 64, p, 64, D2H, backend=b)
acl.mdl.destroy(graph, backend=b)
acl.rt.free(p, backend=b)
acl.rt.destroy_stream(s, backend=b)
npu = backends.get(b)
print(json.dumps({"status": status, "value": int(host[0]), "libraries": [str(x) for x in npu.libraries],
                  "live": {k: v for k, v in npu.live_counts().items() if v}}))
"""


def test_the_split_layout_exports_the_capture_calls_from_libacl_rt():
    home = emulator_build.emulator_home("split")
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")}
    env["PYACLNN_ASCEND_HOME"] = str(home)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", SPLIT_CHILD], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["libraries"][0]).name == "libacl_rt.so"
    assert result["status"] == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE and result["value"] == 9
    assert result["live"] == {}


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_destroying_a_repeatable_executor_a_live_graph_launches_is_a_hazard(
    name, request, monkeypatch, hazards_expected
):
    if name == "npu":
        monkeypatch.setenv("PYACLNN_ASCEND_HOME", str(request.getfixturevalue("emulator_home")))
    b = name
    emulator = backends.get(b)
    acl.rt.set_device(0, backend=b)
    stream = acl.rt.create_stream(backend=b)
    pool = Pool(b)
    fmt, f32, i32 = dtypes.ACL_FORMAT_NCDHW, dtypes.ACL_FLOAT, dtypes.ACL_INT32
    x = acl.create_tensor(SHAPE, f32, None, 0, fmt, SHAPE, pool.x, backend=b)
    out = acl.create_tensor(POOLED, f32, None, 0, fmt, POOLED, pool.out, backend=b)
    idx = acl.create_tensor(POOLED, i32, None, 0, fmt, POOLED, pool.idx, backend=b)
    arrays = [acl.create_int_array(v, backend=b) for v in ([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1])]
    _, executor = aclnn.max_pool3d_with_argmax_get_workspace_size(x, *arrays, False, out, idx, backend=b)
    acl.set_acl_op_executor_repeatable(executor, backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    aclnn.max_pool3d_with_argmax(0, 0, executor, stream, backend=b)
    graph = acl.mdl.capture_end(stream, backend=b)
    before = emulator.hazard_count()
    acl.destroy_acl_op_executor(executor, backend=b)
    assert emulator.hazard_count() == before + 1
    acl.mdl.destroy(graph, backend=b)
    for t in (x, out, idx):
        acl.destroy_tensor(t, backend=b)
    for a in arrays:
        acl.destroy_int_array(a, backend=b)
    pool.free()
    acl.rt.destroy_stream(stream, backend=b)
    pyaclnn.finalize(b)
    assert not any(emulator.live_counts().values())
