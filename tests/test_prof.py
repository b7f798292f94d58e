"""CANN's profiler calls (aclprof*, acl/acl_prof.h) on both emulations: the numpy backend and the npu
backend over the C emulator of CANN (its libmsprofiler.so).

Each rule CANN's msprof applies (the list and its sources: pyaclnn/backends/numpy/_profiler.py and
tests/emulator/README.md) is refused with CANN's code, and the device timeline the emulations write
at aclprofFinalize (<path>/pyaclnn_emulated_device.jsonl, one JSON object per task) holds what ran
between aclprofStart and aclprofStop, where and when.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_capture import NBYTES, POOLED, Pool

import pyaclnn
from pyaclnn import acl, backends
from pyaclnn.constants import (
    ACL_AICORE_NONE,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_INVALID_PROFILING_CONFIG,
    ACL_ERROR_PROF_MODULES_UNSUPPORTED,
    ACL_ERROR_PROF_NOT_RUN,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_PROF_ACL_API,
    ACL_PROF_AICORE_METRICS,
    ACL_PROF_MSPROFTX,
    ACL_PROF_TASK_TIME,
)

FILE = "pyaclnn_emulated_device.jsonl"
TASK_TIME = ACL_PROF_ACL_API | ACL_PROF_TASK_TIME
UNSUPPORTED_BIT = 0x400  # PROF_TASK_TSFW: a CANN bit outside PROF_SWITCH_SUPPORT of a release build
NPU_READY = False  # the C emulator's libmsprofiler.so


@pytest.fixture
def b(backend):
    """The backend under test, with profiling left finalized whatever the test did."""
    acl.rt.set_device(0, backend=backend)
    yield backend
    try:
        acl.prof.finalize(backend=backend)
    except pyaclnn.AclError as exc:
        assert exc.status == ACL_ERROR_PROF_NOT_RUN, exc


def _refused(status: int, call, *args, **kwargs) -> pyaclnn.AclError:
    with pytest.raises(pyaclnn.AclError) as info:
        call(*args, **kwargs)
    assert info.value.status == status, info.value
    return info.value


def _label(b: str, handle: Any) -> str:
    """A stream, event or graph as the emulation names it in its records."""
    if b == "numpy":
        worker = getattr(handle, "worker", None)
        return worker.label if worker is not None else f"{id(handle):#x}"
    from pyaclnn.backends.npu._ffi import ffi

    return f"{int(ffi.cast('uintptr_t', handle)):#x}"


def _records(path: Path) -> list[dict[str, Any]]:
    file = path / FILE
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]


def _profiled(b: str, path: Path, work, data_type_config: int = TASK_TIME) -> list[dict[str, Any]]:
    """Run ``work()`` between aclprofStart and aclprofStop; the records aclprofFinalize wrote."""
    acl.prof.init(str(path), backend=b)
    config = acl.prof.create_config([0], ACL_AICORE_NONE, data_type_config, backend=b)
    try:
        acl.prof.start(config, backend=b)
        work()
        acl.prof.stop(config, backend=b)
    finally:
        acl.prof.destroy_config(config, backend=b)
    acl.prof.finalize(backend=b)
    return _records(path)


# -- aclprofInit / aclprofFinalize ---------------------------------------------------------------------


def test_init_refuses_an_empty_path_a_path_of_4096_bytes_and_a_wrong_length(b, tmp_path):
    assert "length 0" in str(_refused(ACL_ERROR_INVALID_PARAM, acl.prof.init, "", backend=b))
    long = str(tmp_path) + "/" + "x" * (4096 - len(str(tmp_path)) - 1)
    assert len(long) == 4096
    error = _refused(ACL_ERROR_INVALID_PARAM, acl.prof.init, long, backend=b)
    assert "length 4096 of profilerResultPath" in str(error)
    path = str(tmp_path / "p")
    call = backends.get(b).aclprofInit
    assert call(path, len(path) + 1) == ACL_ERROR_INVALID_PARAM
    assert "is not the length of profilerResultPath" in acl.get_recent_err_msg(backend=b)
    assert call(None, 4) == ACL_ERROR_INVALID_PARAM
    assert "profilerResultPath is NULL" in acl.get_recent_err_msg(backend=b)
    assert not (tmp_path / "p").exists()  # nothing was made by a refused call


def test_init_makes_the_directory_and_a_second_init_is_refused_until_finalize(b, tmp_path):
    path = tmp_path / "a" / "b"
    acl.prof.init(str(path), backend=b)
    assert path.is_dir()
    error = _refused(ACL_ERROR_REPEAT_INITIALIZE, acl.prof.init, str(tmp_path), backend=b)
    assert "already initialized" in str(error)
    acl.prof.finalize(backend=b)
    acl.prof.init(str(tmp_path), backend=b)  # allowed again after finalize
    acl.prof.finalize(backend=b)


def test_init_refuses_a_path_that_cannot_be_a_directory(b, tmp_path):
    (tmp_path / "file").write_text("")
    error = _refused(ACL_ERROR_INVALID_FILE, acl.prof.init, str(tmp_path / "file" / "sub"), backend=b)
    assert "profilerResultPath" in str(error) and "cannot be made" in str(error)


def test_finalize_before_init_is_prof_not_run(b):
    error = _refused(ACL_ERROR_PROF_NOT_RUN, acl.prof.finalize, backend=b)
    assert "aclprofInit" in str(error)


# -- aclprofCreateConfig / aclprofDestroyConfig ----------------------------------------------------------


def _not_null_events(b: str) -> Any:
    if b == "numpy":
        return object()
    from pyaclnn.backends.npu._ffi import ffi

    return ffi.cast("aclprofAicoreEvents *", 8)  # never read: CANN refuses any non-NULL value


@pytest.mark.parametrize(
    ("devices", "events", "data_type_config", "reason"),
    [
        ([0], True, TASK_TIME, "aicoreEvents must be NULL"),
        (list(range(65)), False, TASK_TIME, "deviceNums 65 is above 64"),
        ([7], False, TASK_TIME, "deviceIdList[0] is 7"),
        ([], False, TASK_TIME, "deviceNums is 0"),
    ],
    ids=["events", "over-64", "no-such-device", "no-device"],
)
def test_create_config_returns_null_with_the_reason(b, devices, events, data_type_config, reason):
    backend = backends.get(b)
    handle = backend.aclprofCreateConfig(
        devices, ACL_AICORE_NONE, _not_null_events(b) if events else None, data_type_config
    )
    assert handle is None
    assert reason in backend.aclGetRecentErrMsg()
    if not events:  # the wrapper raises with the same reason
        error = _refused(ACL_ERROR_INVALID_PARAM, acl.prof.create_config, devices, backend=b)
        assert reason in str(error)


DEVICES_CHILD = r"""
import json, sys
from pyaclnn import acl, backends
from pyaclnn.constants import ACL_AICORE_NONE, ACL_PROF_TASK_TIME
b = sys.argv[1]
backend = backends.get(b)
acl.init(backend=b)
acl.rt.set_device(0, backend=b)
found = {}
for devices in ([0, 1, 1], [0, 3], [2, 0]):
    handle = backend.aclprofCreateConfig(devices, ACL_AICORE_NONE, None, ACL_PROF_TASK_TIME)
    found[str(devices)] = backend.aclGetRecentErrMsg() if handle is None else "made"
    if handle is not None:
        acl.prof.destroy_config(handle, backend=b)
print(json.dumps(found))
"""


def test_with_three_devices_a_device_given_twice_or_not_below_three_is_refused(b):
    env = {**os.environ, "PYACLNN_EMU_DEVICES": "3"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", DEVICES_CHILD, b], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert "deviceIdList[2]: device 1 is given twice" in found["[0, 1, 1]"]
    assert "deviceIdList[1] is 3; a device id must be in [0, 3)" in found["[0, 3]"]
    assert found["[2, 0]"] == "made"


DEVICE_RECORDS_CHILD = r"""
import json, sys
from pyaclnn import acl
from pyaclnn.constants import ACL_AICORE_NONE, ACL_PROF_TASK_TIME
b, path = sys.argv[1], sys.argv[2]
acl.init(backend=b)
streams = {}
for device in (0, 1):
    acl.rt.set_device(device, backend=b)
    streams[device] = (acl.rt.create_stream(backend=b), acl.rt.malloc(64, backend=b))
acl.prof.init(path, backend=b)
config = acl.prof.create_config([1], ACL_AICORE_NONE, ACL_PROF_TASK_TIME, backend=b)
acl.prof.start(config, backend=b)
for device, (stream, memory) in streams.items():
    acl.rt.set_device(device, backend=b)
    acl.rt.memset_async(memory, 64, device, 64, stream, backend=b)
    acl.rt.synchronize_stream(stream, backend=b)
acl.prof.stop(config, backend=b)
acl.prof.destroy_config(config, backend=b)
acl.prof.finalize(backend=b)
for device, (stream, memory) in streams.items():
    acl.rt.set_device(device, backend=b)
    acl.rt.free(memory, backend=b)
    acl.rt.destroy_stream(stream, backend=b)
print("ok")
"""


def test_only_the_devices_of_the_config_are_recorded(b, tmp_path):
    env = {**os.environ, "PYACLNN_EMU_DEVICES": "2"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", DEVICE_RECORDS_CHILD, b, str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [(r["device"], r["kind"]) for r in _records(tmp_path)] == [(1, "memset")]


@pytest.mark.parametrize("backend", ["npu"], indirect=True)  # a C NULL: Python always passes a sequence
def test_a_null_device_list_with_device_nums_is_refused(b):
    from pyaclnn.backends.npu._ffi import ffi

    npu = backends.get(b)
    config = npu._c.aclprofCreateConfig(ffi.NULL, 1, ACL_AICORE_NONE, ffi.NULL, TASK_TIME)
    assert config == ffi.NULL
    assert "deviceIdList is NULL" in npu.aclGetRecentErrMsg()
    config = npu._c.aclprofCreateConfig(ffi.NULL, 0, ACL_AICORE_NONE, ffi.NULL, ACL_PROF_MSPROFTX)
    assert config != ffi.NULL  # no device: NULL is allowed
    npu.aclprofDestroyConfig(config)


def test_more_devices_than_the_device_count_are_refused(b):
    error = _refused(ACL_ERROR_INVALID_PARAM, acl.prof.create_config, [0, 1], backend=b)
    assert "above the device count" in str(error)


def test_no_device_is_allowed_with_msproftx_only(b):
    config = acl.prof.create_config([], ACL_AICORE_NONE, ACL_PROF_MSPROFTX, backend=b)
    acl.prof.destroy_config(config, backend=b)


def test_destroy_config_refuses_null_and_configs_are_freed(b):
    error = _refused(ACL_ERROR_INVALID_PARAM, acl.prof.destroy_config, None, backend=b)
    assert "profilerConfig is NULL" in str(error)
    configs = [acl.prof.create_config([0], backend=b) for _ in range(3)]
    if b == "numpy":
        assert len(backends.get(b).prof_configs) == 3
    for config in configs:
        acl.prof.destroy_config(config, backend=b)
    if b == "numpy":
        assert len(backends.get(b).prof_configs) == 0
    else:
        assert _emulator_prof_configs() == 0


def _emulator_prof_configs() -> int:
    """Live aclprofConfigs of the C emulator: its libmsprofiler.so's pyaclnnEmuProfConfigCount, which
    include/decl does not declare (a test-only symbol), through ctypes (the same loaded library)."""
    import ctypes

    from pyaclnn.backends.npu._loading import load

    path = next(path for path, _ in load().libraries if path.name == "libmsprofiler.so")
    count = ctypes.CDLL(str(path)).pyaclnnEmuProfConfigCount
    count.restype = ctypes.c_int64
    return int(count())


# -- aclprofStart / aclprofStop --------------------------------------------------------------------------


def test_start_before_init_is_prof_not_run(b):
    config = acl.prof.create_config([0], backend=b)
    try:
        error = _refused(ACL_ERROR_PROF_NOT_RUN, acl.prof.start, config, backend=b)
        assert "aclprofInit" in str(error)
    finally:
        acl.prof.destroy_config(config, backend=b)


def test_unsupported_data_type_bits_are_refused_before_the_init_check(b, tmp_path):
    config = acl.prof.create_config([0], ACL_AICORE_NONE, TASK_TIME | UNSUPPORTED_BIT, backend=b)
    try:
        # CANN's preCheckProfConfig comes before the check of aclprofInit
        error = _refused(ACL_ERROR_PROF_MODULES_UNSUPPORTED, acl.prof.start, config, backend=b)
        assert "dataTypeConfig" in str(error) and "0x400" in str(error)
        acl.prof.init(str(tmp_path), backend=b)
        _refused(ACL_ERROR_PROF_MODULES_UNSUPPORTED, acl.prof.start, config, backend=b)
        _refused(ACL_ERROR_PROF_MODULES_UNSUPPORTED, acl.prof.stop, config, backend=b)
    finally:
        acl.prof.destroy_config(config, backend=b)


def test_start_and_stop_refuse_null(b, tmp_path):
    acl.prof.init(str(tmp_path), backend=b)
    error = _refused(ACL_ERROR_INVALID_PARAM, acl.prof.start, None, backend=b)
    assert "profilerConfig is NULL" in str(error)
    acl.prof.stop(None, backend=b)  # CANN: stop the running configuration; none runs: success


def test_a_second_start_must_ask_for_what_runs_and_so_must_stop(b, tmp_path):
    acl.prof.init(str(tmp_path), backend=b)
    running = acl.prof.create_config([0], ACL_AICORE_NONE, TASK_TIME, backend=b)
    other = acl.prof.create_config([0], ACL_AICORE_NONE, TASK_TIME | ACL_PROF_AICORE_METRICS, backend=b)
    same = acl.prof.create_config([0], ACL_AICORE_NONE, TASK_TIME, backend=b)
    try:
        acl.prof.start(running, backend=b)
        error = _refused(ACL_ERROR_INVALID_PROFILING_CONFIG, acl.prof.start, other, backend=b)
        assert "dataTypeConfig" in str(error)
        acl.prof.start(same, backend=b)  # the same dataTypeConfig again: nothing changes
        _refused(ACL_ERROR_INVALID_PROFILING_CONFIG, acl.prof.stop, other, backend=b)
        acl.prof.stop(same, backend=b)
        acl.prof.stop(running, backend=b)  # nothing runs now: CANN only warns
    finally:
        for config in (running, other, same):
            acl.prof.destroy_config(config, backend=b)


def test_stop_before_init_is_prof_not_run(b):
    config = acl.prof.create_config([0], backend=b)
    try:
        _refused(ACL_ERROR_PROF_NOT_RUN, acl.prof.stop, config, backend=b)
    finally:
        acl.prof.destroy_config(config, backend=b)


# -- the records -----------------------------------------------------------------------------------------


def _copy_in(b: str, pool: Pool, stream) -> None:
    x = np.arange(NBYTES // 4, dtype=np.float32)
    pinned = acl.rt.malloc_host(NBYTES, backend=b)
    try:
        acl.rt.memcpy(pinned, NBYTES, x, NBYTES, 0, backend=b)  # host to host
        acl.rt.memcpy_async(pool.x, NBYTES, pinned, NBYTES, ACL_MEMCPY_HOST_TO_DEVICE, stream, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
    finally:
        acl.rt.free_host(pinned, backend=b)


def test_each_launch_copy_and_memset_is_recorded_on_its_stream_and_device(b, tmp_path):
    stream = acl.rt.create_stream(backend=b)
    pool = Pool(b)

    def work() -> None:
        _copy_in(b, pool, stream)
        for _ in range(3):
            pool.launch(stream)
        acl.rt.memset_async(pool.idx, NBYTES // 8, 0, NBYTES // 8, stream, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
        out = np.empty(POOLED, np.float32)
        acl.rt.memcpy(out, out.nbytes, pool.out, out.nbytes, ACL_MEMCPY_DEVICE_TO_HOST, backend=b)

    try:
        records = _profiled(b, tmp_path, work)
    finally:
        pool.free()
        acl.rt.destroy_stream(stream, backend=b)
    label = _label(b, stream)
    assert [(r["kind"], r["name"]) for r in records] == [
        ("memcpy", "aclrtMemcpyAsync H2D"),
        *[("kernel", "aclnnMaxPool3dWithArgmax")] * 3,
        ("memset", "aclrtMemsetAsync"),
    ]  # the synchronous aclrtMemcpy is no device task
    for r in records:
        assert r["device"] == 0 and r["stream"] == label
        assert type(r["start_ns"]) is int and r["start_ns"] < r["end_ns"]
    ends = [r["end_ns"] for r in records]
    starts = [r["start_ns"] for r in records]
    assert all(e <= s for e, s in zip(ends, starts[1:]))  # one stream: one task after another


def test_kernels_on_two_streams_overlap_in_time(b, tmp_path, monkeypatch):
    streams = [acl.rt.create_stream(backend=b) for _ in range(2)]
    pools = [Pool(b) for _ in range(2)]
    for pool, stream in zip(pools, streams):  # the first launch pays one-time setup
        pool.launch(stream)
        acl.rt.synchronize_stream(stream, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "2000")

    def work() -> None:
        for _ in range(3):
            for pool, stream in zip(pools, streams):
                pool.launch(stream)
        for stream in streams:
            acl.rt.synchronize_stream(stream, backend=b)

    try:
        records = _profiled(b, tmp_path, work)
    finally:
        for pool in pools:
            pool.free()
        for stream in streams:
            acl.rt.destroy_stream(stream, backend=b)
    by_stream = {
        label: [r for r in records if r["stream"] == label] for label in map(lambda s: _label(b, s), streams)
    }
    assert [len(v) for v in by_stream.values()] == [3, 3]
    first, second = by_stream.values()
    for r in records:
        assert r["kind"] == "kernel" and r["end_ns"] - r["start_ns"] >= 2_000_000
    overlap = min(first[-1]["end_ns"], second[-1]["end_ns"]) - max(
        first[0]["start_ns"], second[0]["start_ns"]
    )
    assert overlap > 2_000_000  # at least one kernel's time the two streams ran together


def test_event_records_and_waits_are_recorded_with_the_event(b, tmp_path, monkeypatch):
    stream, other = acl.rt.create_stream(backend=b), acl.rt.create_stream(backend=b)
    event = acl.rt.create_event(backend=b)
    pool = Pool(b)
    pool.launch(stream)
    acl.rt.synchronize_stream(stream, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "5000")

    def work() -> None:
        pool.launch(stream)
        acl.rt.record_event(event, stream, backend=b)
        acl.rt.stream_wait_event(other, event, backend=b)
        acl.rt.synchronize_stream(other, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)

    try:
        records = _profiled(b, tmp_path, work)
    finally:
        pool.free()
        acl.rt.destroy_event(event, backend=b)
        for s in (stream, other):
            acl.rt.destroy_stream(s, backend=b)
    kernel, record = (r for r in records if r["stream"] == _label(b, stream))
    (wait,) = (r for r in records if r["stream"] == _label(b, other))
    assert (record["kind"], record["name"], record["event"]) == (
        "event_record",
        "aclrtRecordEvent",
        _label(b, event),
    )
    assert (wait["kind"], wait["name"], wait["event"]) == (
        "event_wait",
        "aclrtStreamWaitEvent",
        _label(b, event),
    )
    # the wait began while the kernel ran and ended when the record was done
    assert wait["start_ns"] < kernel["end_ns"] <= record["end_ns"] <= wait["end_ns"]
    assert wait["end_ns"] - wait["start_ns"] >= 1_000_000


def test_a_replay_records_its_tasks_with_the_graph_and_one_replay_record(b, tmp_path):
    stream = acl.rt.create_stream(backend=b)
    event = acl.rt.create_event(backend=b)
    pool = Pool(b)
    pool.launch(stream)
    acl.rt.synchronize_stream(stream, backend=b)
    acl.mdl.capture_begin(stream, backend=b)
    pool.launch(stream)
    acl.rt.record_event(event, stream, backend=b)
    pool.launch(stream)
    graph = acl.mdl.capture_end(stream, backend=b)

    def work() -> None:
        pool.launch(stream)  # eager: no graph
        acl.mdl.execute_async(graph, stream, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)

    try:
        records = _profiled(b, tmp_path, work)
    finally:
        acl.mdl.destroy(graph, backend=b)
        pool.free()
        acl.rt.destroy_event(event, backend=b)
        acl.rt.destroy_stream(stream, backend=b)
    eager, *replayed = (r for r in records if r["kind"] != "replay")
    (replay,) = (r for r in records if r["kind"] == "replay")
    assert "graph" not in eager and eager["kind"] == "kernel"
    assert [r["kind"] for r in replayed] == ["kernel", "event_record", "kernel"]
    assert {r["graph"] for r in replayed} == {_label(b, graph)} == {replay["graph"]}
    assert replay["name"] == "aclmdlRIExecuteAsync" and replay["stream"] == _label(b, stream)
    assert replay["start_ns"] <= replayed[0]["start_ns"] and replayed[-1]["end_ns"] <= replay["end_ns"]
    assert eager["end_ns"] <= replay["start_ns"]


def test_nothing_is_recorded_outside_start_and_stop_or_without_task_time(b, tmp_path):
    stream = acl.rt.create_stream(backend=b)
    pool = Pool(b)
    acl.prof.init(str(tmp_path), backend=b)
    config = acl.prof.create_config([0], backend=b)
    quiet = acl.prof.create_config([0], ACL_AICORE_NONE, ACL_PROF_ACL_API, backend=b)
    try:
        pool.launch(stream)  # before start
        acl.rt.synchronize_stream(stream, backend=b)
        acl.prof.start(quiet, backend=b)  # no task time
        pool.launch(stream)
        acl.rt.synchronize_stream(stream, backend=b)
        acl.prof.stop(quiet, backend=b)
        acl.prof.start(config, backend=b)
        acl.rt.memset_async(pool.idx, NBYTES // 8, 0, NBYTES // 8, stream, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
        acl.prof.stop(config, backend=b)
        pool.launch(stream)  # after stop
        acl.rt.synchronize_stream(stream, backend=b)
        acl.prof.finalize(backend=b)
    finally:
        for c in (config, quiet):
            acl.prof.destroy_config(c, backend=b)
        pool.free()
        acl.rt.destroy_stream(stream, backend=b)
    assert [r["kind"] for r in _records(tmp_path)] == ["memset"]


def test_a_task_that_ends_after_stop_is_not_recorded(b, tmp_path, monkeypatch):
    stream = acl.rt.create_stream(backend=b)
    pool = Pool(b)
    pool.launch(stream)
    acl.rt.synchronize_stream(stream, backend=b)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "50000")

    def work() -> None:
        pool.launch(stream)  # still running when aclprofStop returns

    try:
        records = _profiled(b, tmp_path, work)
        acl.rt.synchronize_stream(stream, backend=b)
    finally:
        pool.free()
        acl.rt.destroy_stream(stream, backend=b)
    assert records == []


def test_finalize_appends_and_stops_what_still_runs(b, tmp_path):
    stream = acl.rt.create_stream(backend=b)
    acl.rt.synchronize_stream(stream, backend=b)
    pool = Pool(b)
    config = acl.prof.create_config([0], backend=b)
    try:
        for _ in range(2):
            acl.prof.init(str(tmp_path), backend=b)
            acl.prof.start(config, backend=b)
            acl.rt.memset_async(pool.idx, NBYTES // 8, 0, NBYTES // 8, stream, backend=b)
            acl.rt.synchronize_stream(stream, backend=b)
            acl.prof.finalize(backend=b)  # no stop: finalize stops
        acl.rt.memset_async(pool.idx, NBYTES // 8, 0, NBYTES // 8, stream, backend=b)
        acl.rt.synchronize_stream(stream, backend=b)
    finally:
        acl.prof.destroy_config(config, backend=b)
        pool.free()
        acl.rt.destroy_stream(stream, backend=b)
    assert [r["kind"] for r in _records(tmp_path)] == ["memset", "memset"]


def test_the_profiler_costs_the_streams_nothing_once_stopped(tmp_path):
    # The numpy backend's streams read one global per task; streams.c reads one flag the same way.
    from pyaclnn.backends.numpy import _streams

    b = "numpy"
    acl.rt.set_device(0, backend=b)
    acl.prof.init(str(tmp_path), backend=b)
    config = acl.prof.create_config([0], backend=b)
    try:
        acl.prof.start(config, backend=b)
        assert _streams.RECORDER is not None
        acl.prof.stop(config, backend=b)
        assert _streams.RECORDER is None
    finally:
        acl.prof.destroy_config(config, backend=b)
        acl.prof.finalize(backend=b)
