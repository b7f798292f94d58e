"""``pyaclnn.profile(path)``: record what ran where, as a Chrome trace.

The host side comes from :mod:`pyaclnn._timeline` (a slice per call, per Python
thread); the device side, on the emulations, from the records they append at
``aclprofFinalize`` to ``<path>/pyaclnn_emulated_device.jsonl`` (one JSON object
per task that finished while profiling ran; see :mod:`pyaclnn.acl.prof`). Both
are on the monotonic clock, so one time axis holds them. On an NPU there is no
such file: CANN writes its own ``PROF_*`` data into ``path`` for ``msprof``, and
the trace holds the host side only.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from . import _context, _optable, _timeline, _warn, acl
from .constants import ACL_AICORE_NONE, ACL_PROF_ACL_API, ACL_PROF_TASK_TIME
from .errors import describe

__all__ = ["Profile", "profile", "TRACE_FILE", "DEVICE_FILE"]

#: The Chrome trace written into the profile's directory.
TRACE_FILE = "pyaclnn_trace.json"
#: What the emulations append at aclprofFinalize (CANN on an NPU writes none).
DEVICE_FILE = "pyaclnn_emulated_device.jsonl"
HOST_PID = 1  # the "host" process of the trace; device d is DEVICE_PID + d
DEVICE_PID = 10

_lock = threading.Lock()
_active: Profile | None = None  # the profile recording now: CANN runs one aclprofInit at a time


class Profile:
    """A profile of the work between ``__enter__`` and ``__exit__``, written as a Chrome trace.

    Made by :func:`profile`; see there. Use it once, in one ``with`` block.

    Attributes
    ----------
    path : str
        The directory given to ``aclprofInit``.
    trace_path : str
        ``<path>/pyaclnn_trace.json``, written when the block ends.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        devices: Sequence[int] | None = None,
        backend: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"path must be a non-empty directory path, got {describe(path)}")
        if devices is not None:
            devices = list(devices)
            if not devices or not all(isinstance(d, int) and not isinstance(d, bool) for d in devices):
                raise ValueError(
                    f"devices must be a non-empty sequence of device ids (int), got {describe(devices)}"
                )
        self.devices: list[int] | None = devices
        self.backend = backend
        self.trace_path = os.path.join(self.path, TRACE_FILE)
        self._config: Any = None
        self._session: _timeline.Session | None = None
        self._device_offset = 0  # the device file's size before this profile (the emulations append)
        self._used = False

    # -- enter ----------------------------------------------------------------------
    def __enter__(self) -> Profile:
        global _active
        if self._used:
            raise RuntimeError("a pyaclnn.profile records once: make a new one with pyaclnn.profile(path)")
        with _lock:
            if _active is not None:
                raise RuntimeError(
                    f"pyaclnn.profile({self.path!r}): a profile is already recording (into "
                    f"{_active.path!r}); profiles do not nest (CANN's profiler runs one aclprofInit "
                    "at a time): end the first `with` block before starting another"
                )
            _active = self
        self._used = True
        try:
            self._start()
        except BaseException:
            with _lock:
                _active = None
            raise
        return self

    def _start(self) -> None:
        ctx = _context.context(self.backend)
        self.backend = name = ctx.name
        devices = self.devices
        if devices is None:
            devices = self.devices = list(range(_context.device_count(name)))
        # Work queued before the block would be recorded if it finished after aclprofStart.
        _synchronize(ctx, devices)
        device_file = os.path.join(self.path, DEVICE_FILE)
        self._device_offset = os.path.getsize(device_file) if os.path.exists(device_file) else 0
        acl.prof.init(self.path, backend=name)
        try:
            self._config = acl.prof.create_config(
                devices, ACL_AICORE_NONE, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME, backend=name
            )
            acl.prof.start(self._config, backend=name)
        except BaseException:
            self._release(ctx, started=False)
            raise
        self._session = _timeline.begin()

    # -- exit -----------------------------------------------------------------------
    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        global _active
        failures: list[BaseException] = []
        try:
            session = _timeline.end()  # first: nothing the ending does is recorded
            failures = self._release(_context.context(self.backend), started=True)
            try:
                self._write(session)
            except Exception as error:  # noqa: BLE001  (reported below, after every step ran)
                failures.append(error)
            if session is not None:
                session.release()
        finally:
            with _lock:
                _active = None
        if failures:
            interrupts = [f for f in failures if not isinstance(f, Exception)]
            if interrupts:  # a Ctrl-C while ending is never turned into a warning
                raise interrupts[0]
            if exc is not None:  # the block's own error goes on; the cleanup's are told, not raised
                for failure in failures:
                    # at the user's `with` line (the __exit__ may be reached through pyaclnn's frames)
                    _warn.warn(f"pyaclnn.profile: while ending the profile: {failure!r}", RuntimeWarning)
                return
            raise failures[0]

    def _release(self, ctx: _context._Context, started: bool) -> list[BaseException]:
        """Every step that ends the profile, each one run even when an earlier one failed; their errors."""
        name = ctx.name
        failures: list[BaseException] = []
        config, self._config = self._config, None
        steps: list[Any] = []
        if started:
            steps.append(lambda: _synchronize(ctx, self.devices or []))  # the tasks finish while recording
            steps.append(lambda: acl.prof.stop(config, backend=name))
        if config is not None:
            steps.append(lambda: acl.prof.destroy_config(config, backend=name))
        steps.append(lambda: acl.prof.finalize(backend=name))
        for step in steps:
            try:
                step()
            except BaseException as error:  # noqa: BLE001  (Ctrl-C too: the later steps still run)
                failures.append(error)
        return failures

    def _write(self, session: _timeline.Session | None) -> None:
        records = _device_records(os.path.join(self.path, DEVICE_FILE), self._device_offset)
        trace = chrome_trace(session, records)
        os.makedirs(self.path, exist_ok=True)
        with open(self.trace_path, "w", encoding="utf-8") as out:
            json.dump(trace, out)

    def __repr__(self) -> str:
        return f"<pyaclnn.Profile path={self.path!r} devices={self.devices!r}>"


def profile(
    path: str | os.PathLike[str], *, devices: Sequence[int] | None = None, backend: str | None = None
) -> Profile:
    """Record what runs in a ``with`` block, on the host and on the devices, as a Chrome trace.

    ``with pyaclnn.profile("prof") as p:`` starts CANN's profiler (``aclprofInit(path)``,
    ``aclprofCreateConfig(devices, ACL_AICORE_NONE, ACL_PROF_ACL_API | ACL_PROF_TASK_TIME)``,
    ``aclprofStart``) after waiting for the work already queued on those devices, and
    records a host slice for each operator call (both phases), graph replay, queued
    copy, event record or wait, ``Stream.synchronize`` and ``DeviceArray.numpy``, per
    Python thread. When the block ends, errors included, it waits for the devices, then
    stops, destroys the configuration and finalizes (each step runs even if an earlier one
    failed; the first error of those steps is raised once all ran, or, if the block raised,
    given as a RuntimeWarning: the block's error is never hidden), and writes ``p.trace_path``,
    ``<path>/pyaclnn_trace.json``: ``{"traceEvents": [...], "displayTimeUnit": "ms"}``, to
    open in https://ui.perfetto.dev or chrome://tracing.

    The trace has a process "host" with one row per Python thread, and on the emulations
    (the numpy backend, the npu backend over the C emulator) one process per device with
    one row per stream: kernels (named by the operator's Python name, the C name in args),
    copies, memsets, event records and waits (with an arrow from a record to the waits on
    it) and graph replays (a slice enclosing the replayed tasks). Host slices name the
    stream as the device rows do. On a real NPU the trace has the host side only: CANN
    writes its own data (``PROF_*``) into ``path``, which ``msprof --export=on
    --output=<path>`` turns into its own timeline.

    Parameters
    ----------
    path : str or path-like
        The directory to write into (made if missing; the device records are appended to
        ``pyaclnn_emulated_device.jsonl`` there, the trace is overwritten).
    devices : sequence of int, optional
        The devices to profile; all of the backend's by default.
    backend : {"numpy", "npu"}, optional
        The active backend by default.

    Returns
    -------
    Profile
        The context manager; ``trace_path`` names the trace.

    Raises
    ------
    RuntimeError
        On entering while another profile records: profiles do not nest, in one thread or
        across threads (CANN's profiler is one per process). Calls of other threads during
        the block are recorded too.
    AclError
        From CANN's profiler calls (a path that cannot be a directory, a device that does
        not exist).

    Notes
    -----
    Memory is bounded: each thread keeps at most 100 000 host slices per profile
    (``pyaclnn._timeline.MAX_SLICES_PER_THREAD``); later ones are counted in the trace's
    ``otherData.host_slices_dropped``, not kept. When nothing is profiled, each timed call
    costs one read of a module attribute.
    """
    return Profile(path, devices=devices, backend=backend)


def _synchronize(ctx: _context._Context, devices: Sequence[int]) -> None:
    """Wait for the open streams of ``devices`` (not a capturing one: a capture refuses waits);
    the first error is raised once all were waited for."""
    first: BaseException | None = None
    wanted = set(devices)
    for stream in ctx.open_streams():
        state = stream._state
        if stream.device in wanted and state.capture is None:
            try:
                state.synchronize()
            except Exception as error:  # noqa: BLE001  (every stream is waited for first)
                first = first or error
    if first is not None:
        raise first


def _device_records(file: str, offset: int) -> list[dict[str, Any]]:
    """The records the emulations appended to ``file`` after byte ``offset`` (none on an NPU)."""
    if not os.path.exists(file):
        return []
    with open(file, encoding="utf-8") as lines:
        lines.seek(offset)
        return [json.loads(line) for line in lines if line.strip()]


def _python_names() -> dict[str, str]:
    """Phase-2 C name -> the operator's Python name (``aclnnGridSampler3D`` -> ``grid_sampler3d``)."""
    return {spec.phase2_api: spec.python_name for spec in _optable.operators()}


def _us(ns: int, origin: int) -> float:
    return (ns - origin) / 1000.0


def chrome_trace(session: _timeline.Session | None, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The Chrome trace of a profile's host slices and device records (see :func:`profile`)."""
    origin = session.start_ns if session is not None else min((r["start_ns"] for r in records), default=0)
    events: list[dict[str, Any]] = []
    meta: list[dict[str, Any]] = []

    def name_row(pid: int, tid: int, name: str) -> None:
        """Metadata naming process ``pid`` (its row 0) or its row ``tid``, sorted by number."""
        what = "process" if tid == 0 else "thread"
        meta.append({"ph": "M", "name": f"{what}_name", "pid": pid, "tid": tid, "args": {"name": name}})
        order = {"sort_index": pid if tid == 0 else tid}
        meta.append({"ph": "M", "name": f"{what}_sort_index", "pid": pid, "tid": tid, "args": order})

    name_row(HOST_PID, 0, "host")
    stream_names = session.stream_names if session is not None else {}
    for thread in session.threads if session is not None else ():
        tid = thread.number + 1
        name_row(HOST_PID, tid, thread.name)
        for name, start, end, args in thread.slices:
            events.append(
                {
                    "ph": "X",
                    "cat": "host",
                    "name": name,
                    "pid": HOST_PID,
                    "tid": tid,
                    "ts": _us(start, origin),
                    "dur": (end - start) / 1000.0,
                    "args": args,
                }
            )
    python_names = _python_names()
    rows: dict[tuple[int, str], int] = {}  # (device, stream label) -> tid, in order of first task
    named: set[int] = set()  # device processes named so far
    for record in sorted(records, key=lambda r: (r["start_ns"], -r["end_ns"])):
        device, label = int(record["device"]), str(record["stream"])
        pid = DEVICE_PID + device
        if pid not in named:
            named.add(pid)
            name_row(pid, 0, f"device {device}")
        found = rows.get((device, label))
        if found is None:
            found = rows[(device, label)] = len(rows) + 1
            row = "default stream" if label == "0x0" else f"stream {label}"
            if label in stream_names:
                row += f" ({stream_names[label]})"
            name_row(pid, found, row)
        tid = found
        kind, c_name = record["kind"], record["name"]
        name = python_names.get(c_name, c_name) if kind == "kernel" else c_name
        task: dict[str, Any] = {"kind": kind, "api": c_name, "stream": label, "device": device}
        for key in ("event", "graph"):
            if key in record:
                task[key] = record[key]
        events.append(
            {
                "ph": "X",
                "cat": kind,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": _us(record["start_ns"], origin),
                "dur": (record["end_ns"] - record["start_ns"]) / 1000.0,
                "args": task,
            }
        )
    events.extend(_flows(events))
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "clock": "CLOCK_MONOTONIC, microseconds from the start of the profile",
            "host_slices_dropped": session.dropped if session is not None else 0,
            "device_records": len(records),
        },
    }


def _flows(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Arrows from each event record to the waits on it: a wait is joined to the last record of
    its event that ended before the wait ended (what it waited for)."""
    records: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("cat") == "event_record" and "event" in e["args"]:
            records.setdefault(e["args"]["event"], []).append(e)
    flows: list[dict[str, Any]] = []
    for e in events:
        if e.get("cat") != "event_wait" or "event" not in e["args"]:
            continue
        end = e["ts"] + e["dur"]
        before = [r for r in records.get(e["args"]["event"], ()) if r["ts"] + r["dur"] <= end]
        if not before:
            continue
        source = max(before, key=lambda r: r["ts"])
        number = len(flows) // 2 + 1
        common = {"name": "event", "cat": "event", "id": number}
        flows.append({**common, "ph": "s", "pid": source["pid"], "tid": source["tid"], "ts": source["ts"]})
        # the arrow ends where the wait ends, or where the record ended if the wait spans that
        arrive = min(max(source["ts"] + source["dur"], e["ts"]), end)
        flows.append({**common, "ph": "f", "bp": "e", "pid": e["pid"], "tid": e["tid"], "ts": arrive})
    return flows
