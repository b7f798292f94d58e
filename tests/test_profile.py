"""pyaclnn.profile(path): a Chrome trace of what ran where, on both emulations.

The host side is pyaclnn's own (a row per Python thread, a slice per call); the device side
comes from the records the emulations write at aclprofFinalize (a row per stream). Each test
ends with the backend fixture's checks: no live object and no hazard. Kernels get simulated
device time (PYACLNN_EMU_KERNEL_US, set as tests/test_async_runtime.py sets it) where the
test needs work that is observably running at the same time.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _profile, _timeline
from pyaclnn.constants import ACL_ERROR_PROF_NOT_RUN

KERNEL_US = 20_000  # long enough that two streams' kernels are running at once


@pytest.fixture
def slow_kernels(monkeypatch):
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", str(KERNEL_US))


def _x(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((1, 2, 4, 4, 4), dtype=np.float32)


def _load(p: pyaclnn.Profile) -> dict[str, Any]:
    return json.loads(Path(p.trace_path).read_text(encoding="utf-8"))


def _slices(trace: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    """The complete ("X") events whose keys have the values in ``match``."""
    return [
        e for e in trace["traceEvents"] if e["ph"] == "X" and all(e.get(k) == v for k, v in match.items())
    ]


def _names(trace: dict[str, Any], what: str) -> dict[tuple[int, int], str]:
    """(pid, tid) -> name, of the "M" events naming processes (tid 0) or threads."""
    return {
        (e["pid"], e["tid"] if what == "thread" else 0): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == f"{what}_name"
    }


def _device_rows(trace: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Stream label -> (pid, tid) of its device row."""
    rows = {}
    for e in _slices(trace):
        if e["pid"] != _profile.HOST_PID:
            rows[e["args"]["stream"]] = (e["pid"], e["tid"])
    return rows


def _close(*arrays: Any) -> None:
    for a in arrays:
        a.close()


def test_the_trace_is_chrome_json_with_host_and_device_rows_that_name_the_same_streams(backend, tmp_path):
    x = _x()
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(x, backend=backend, stream=stream)
        with pyaclnn.profile(tmp_path / "prof", backend=backend) as p:
            out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
            result = out.numpy()
        np.testing.assert_array_equal(result, pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)[0])
        _close(out, indices, dx)
    assert p.trace_path == str(tmp_path / "prof" / "pyaclnn_trace.json")
    trace = _load(p)
    assert set(trace) >= {"traceEvents", "displayTimeUnit"} and trace["displayTimeUnit"] == "ms"
    for e in _slices(trace):
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["dur"] >= 0
    assert _names(trace, "process")[(_profile.HOST_PID, 0)] == "host"
    (launch,) = _slices(trace, name="max_pool3d_with_argmax", pid=_profile.HOST_PID)
    assert launch["args"]["operator"] == "max_pool3d_with_argmax"
    assert launch["args"]["device"] == 0
    (kernel,) = _slices(trace, cat="kernel")
    assert kernel["name"] == "max_pool3d_with_argmax" and kernel["args"]["api"] == "aclnnMaxPool3dWithArgmax"
    # the host slice names the stream as the device row does
    assert launch["args"]["stream"] == kernel["args"]["stream"]
    row = _names(trace, "thread")[(kernel["pid"], kernel["tid"])]
    assert row.startswith(f"stream {kernel['args']['stream']}") and f"#{stream.number}" in row
    assert _names(trace, "process")[(kernel["pid"], 0)] == "device 0"
    assert kernel["ts"] >= launch["ts"]  # one clock: the kernel runs after its launch began
    (read,) = _slices(trace, name="DeviceArray.numpy")
    assert read["ts"] + read["dur"] >= kernel["ts"] + kernel["dur"]  # the read waited for the kernel
    assert not _timeline.recording


def test_each_python_thread_gets_its_own_named_host_row(backend, tmp_path):
    x = _x()
    done: list[str] = []

    def work() -> None:
        with pyaclnn.Stream(backend=backend) as stream:
            dx = pyaclnn.to_device(x, backend=backend, stream=stream)
            out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
            stream.synchronize()
            _close(out, indices, dx)
        done.append(threading.current_thread().name)

    with pyaclnn.profile(tmp_path, backend=backend) as p:
        threads = [threading.Thread(target=work, name=f"worker-{i}") for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(done) == ["worker-0", "worker-1"]
    trace = _load(p)
    rows = _names(trace, "thread")
    launches = _slices(trace, name="max_pool3d_with_argmax", pid=_profile.HOST_PID)
    assert sorted(rows[(e["pid"], e["tid"])] for e in launches) == ["worker-0", "worker-1"]
    assert len({e["tid"] for e in launches}) == 2
    assert len(_slices(trace, cat="kernel")) == 2


def test_a_two_stream_pipeline_shows_both_streams_kernels_overlapping(backend, slow_kernels, tmp_path):
    xs = [_x(0), _x(1)]
    streams = [pyaclnn.Stream(backend=backend) for _ in range(2)]
    inputs = [pyaclnn.to_device(x, backend=backend, stream=s) for x, s in zip(xs, streams)]
    with pyaclnn.profile(tmp_path, backend=backend) as p:
        outs = [
            pyaclnn.max_pool3d_with_argmax(d, 2, backend=backend, stream=s) for d, s in zip(inputs, streams)
        ]
    trace = _load(p)
    kernels = _slices(trace, cat="kernel")
    assert len(kernels) == 2
    assert {k["args"]["stream"] for k in kernels} == {
        _timeline.handle_label(backend, s.handle) for s in streams
    }
    assert len({(k["pid"], k["tid"]) for k in kernels}) == 2  # two rows
    first, second = kernels
    for k in kernels:
        assert k["dur"] >= KERNEL_US * 0.9  # the simulated device time is in the slice
    # the issue's check: both streams' kernels run at the same time
    assert max(first["ts"], second["ts"]) < min(first["ts"] + first["dur"], second["ts"] + second["dur"])
    for (out, indices), d, s in zip(outs, inputs, streams):
        _close(out, indices, d, s)


def test_an_event_record_and_the_wait_on_it_are_joined_by_an_arrow(backend, tmp_path):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    with pyaclnn.profile(tmp_path, backend=backend) as p:
        event = a.record_event()
        b.wait_event(event)
    label = _timeline.handle_label(backend, event.handle)
    _close(event, a, b)
    trace = _load(p)
    (record,) = _slices(trace, cat="event_record")
    (wait,) = _slices(trace, cat="event_wait")
    assert record["args"]["event"] == wait["args"]["event"] == label
    assert _device_rows(trace)[record["args"]["stream"]] != _device_rows(trace)[wait["args"]["stream"]]
    flows = [e for e in trace["traceEvents"] if e["ph"] in ("s", "f")]
    start, finish = sorted(flows, key=lambda e: e["ph"] == "f")
    assert start["id"] == finish["id"]
    assert (start["pid"], start["tid"]) == (record["pid"], record["tid"])
    assert (finish["pid"], finish["tid"]) == (wait["pid"], wait["tid"])
    assert wait["ts"] <= finish["ts"] <= wait["ts"] + wait["dur"]  # inside the wait it ends
    host = {e["name"] for e in _slices(trace, pid=_profile.HOST_PID)}
    assert {"acl.rt.record_event", "acl.rt.stream_wait_event"} <= host


def test_a_graph_replay_is_a_slice_enclosing_its_kernels(backend, tmp_path):
    x = _x()
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(x, backend=backend, stream=stream)
        g = pyaclnn.Graph(backend=backend)
        with pyaclnn.profile(tmp_path, backend=backend) as p:
            with pyaclnn.graph(g, stream=stream):
                out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
                (twice, _) = pyaclnn.max_pool3d_with_argmax(out, 1, backend=backend, stream=stream)
            g.replay(stream)
            stream.synchronize()
        label = _timeline.handle_label(backend, g._state.handle)
        np.testing.assert_array_equal(twice.numpy(), pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)[0])
        g.close()
        dx.close()
    trace = _load(p)
    (replay,) = _slices(trace, cat="replay")
    assert replay["args"]["graph"] == label
    kernels = _slices(trace, cat="kernel")
    assert len(kernels) == 2 and all(k["args"].get("graph") == label for k in kernels)
    for k in kernels:  # on the replay's row, inside it
        assert (k["pid"], k["tid"]) == (replay["pid"], replay["tid"])
        assert replay["ts"] <= k["ts"] and k["ts"] + k["dur"] <= replay["ts"] + replay["dur"]
    (host,) = _slices(trace, name="Graph.replay")
    assert host["args"]["graph"] == label and host["args"]["stream"] == replay["args"]["stream"]
    captured = _slices(trace, name="max_pool3d_with_argmax", pid=_profile.HOST_PID)
    assert len(captured) == 2 and all(c["args"].get("captured") for c in captured)


def test_an_error_in_the_block_goes_on_and_the_profile_is_still_ended(backend, tmp_path):
    x = _x()
    with pytest.raises(ZeroDivisionError):
        with pyaclnn.profile(tmp_path / "first", backend=backend) as p:
            out, indices = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
            1 / 0  # noqa: B018
    assert not _timeline.recording
    trace = _load(p)  # written all the same
    assert len(_slices(trace, cat="host", name="max_pool3d_with_argmax")) == 1
    # finalized: CANN's profiler is not initialized any more, and a new profile works
    with pytest.raises(pyaclnn.AclError) as info:
        pyaclnn.acl.prof.finalize(backend=backend)
    assert info.value.status == ACL_ERROR_PROF_NOT_RUN
    with pyaclnn.profile(tmp_path / "second", backend=backend) as q:
        pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    assert len(_slices(_load(q), cat="kernel")) == 1


def test_profiles_do_not_nest(backend, tmp_path):
    x = _x()
    with pyaclnn.profile(tmp_path / "outer", backend=backend) as p:
        with pytest.raises(RuntimeError, match="profiles do not nest") as info:
            with pyaclnn.profile(tmp_path / "inner", backend=backend):
                pass
        assert str(tmp_path / "outer") in str(info.value)
        pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)  # the outer one still records
    assert len(_slices(_load(p), cat="kernel")) == 1
    assert not (tmp_path / "inner").exists()
    with pytest.raises(RuntimeError, match="records once"):
        with p:
            pass


def test_profiling_twice_into_one_directory_traces_each_profile_alone(backend, tmp_path):
    x = _x()
    traces = []
    for calls in (1, 2):
        with pyaclnn.profile(tmp_path, backend=backend) as p:
            for _ in range(calls):
                pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
        traces.append(_load(p))
    pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)  # after: nothing recorded
    assert [len(_slices(t, cat="kernel")) for t in traces] == [1, 2]
    assert [len(_slices(t, cat="host", name="max_pool3d_with_argmax")) for t in traces] == [1, 2]


def test_a_thread_keeps_at_most_the_cap_of_host_slices(backend, tmp_path, monkeypatch):
    monkeypatch.setattr(_timeline, "MAX_SLICES_PER_THREAD", 2)
    x = _x()
    with pyaclnn.profile(tmp_path, backend=backend) as p:
        for _ in range(3):
            pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    trace = _load(p)
    assert len(_slices(trace, pid=_profile.HOST_PID)) == 2
    assert trace["otherData"]["host_slices_dropped"] >= 1
    assert len(_slices(trace, cat="kernel")) == 3  # the device side is the emulation's, whole


def test_the_trace_of_device_records_alone_names_the_default_stream_and_sorts_rows():
    """The merge of device records (a real NPU gives none; this one is made up), unit-tested."""
    records = [
        {"device": 1, "stream": "0x0", "kind": "memcpy", "name": "aclrtMemcpyAsync H2D", "start_ns": 100_000,
         "end_ns": 103_000},
        {"device": 1, "stream": "0x10", "kind": "kernel", "name": "aclnnGridSampler3D", "start_ns": 101_000,
         "end_ns": 109_000},
    ]  # fmt: skip
    trace = _profile.chrome_trace(None, records)
    rows = _names(trace, "thread")
    assert sorted(rows.values()) == ["default stream", "stream 0x10"]
    assert _names(trace, "process")[(_profile.DEVICE_PID + 1, 0)] == "device 1"
    copy, kernel = sorted(_slices(trace), key=lambda e: e["ts"])
    assert (copy["ts"], copy["dur"]) == (0.0, 3.0) and (kernel["ts"], kernel["dur"]) == (1.0, 8.0)
    assert kernel["name"] == "grid_sampler3d" and copy["name"] == "aclrtMemcpyAsync H2D"


def test_work_queued_before_the_block_is_waited_for_not_recorded(backend, slow_kernels, tmp_path):
    with pyaclnn.Stream(backend=backend) as stream:
        dx = pyaclnn.to_device(_x(), backend=backend, stream=stream)
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        with pyaclnn.profile(tmp_path, backend=backend) as p:
            assert stream.query()  # the profile waited for it on entering
        _close(out, indices, dx)
    assert _slices(_load(p), cat="kernel") == []


def test_a_failing_ending_step_leaves_the_others_run_and_is_raised_or_warned(backend, tmp_path, monkeypatch):
    real_stop = pyaclnn.acl.prof.stop

    def failing_stop(config: Any, *, backend: str | None = None) -> None:
        real_stop(config, backend=backend)
        raise RuntimeError("stop failed (test)")

    monkeypatch.setattr(pyaclnn.acl.prof, "stop", failing_stop)
    with pytest.raises(RuntimeError, match="stop failed"):
        with pyaclnn.profile(tmp_path / "a", backend=backend) as p:
            pass
    assert Path(p.trace_path).exists()  # written after the failed step
    with pytest.raises(ZeroDivisionError), pytest.warns(RuntimeWarning, match="stop failed"):
        with pyaclnn.profile(tmp_path / "b", backend=backend):
            1 / 0  # noqa: B018
    monkeypatch.undo()
    with pyaclnn.profile(tmp_path / "c", backend=backend) as q:  # finalize ran both times
        pyaclnn.max_pool3d_with_argmax(_x(), 2, backend=backend)
    assert len(_slices(_load(q), cat="kernel")) == 1
