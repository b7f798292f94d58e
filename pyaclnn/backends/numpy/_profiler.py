"""CANN's profiler calls (``aclprof*``) on the numpy backend, and the device timeline they record.

The C emulator (tests/emulator/profiler.c) implements the same rules with the same codes;
tests/emulator/README.md lists them with their sources. They are those of hicann/runtime's
msprof (src/dfx/msprof/collector/dvvp) as they were before its commit 18799fa3 ("aclprofStart no
longer depends on aclprofInit"), where aclprofInit still had to come first, as in CANN 8.1.RC1:

* aclprofInit (profimpl/adapter/src/msprofiler_acl_api.cpp, CheckProfInitPath, then
  ProfAclMgr::ProfAclInit in msprof/engine/src/prof_acl_mgr.cpp): a NULL path, a length of 0
  or of 4096 and more, or a length other than the path's strlen is ACL_ERROR_INVALID_PARAM; a
  second aclprofInit before aclprofFinalize is ACL_ERROR_REPEAT_INITIALIZE; a directory that
  cannot be made or accessed is ACL_ERROR_INVALID_FILE. The directory is made then.
* aclprofCreateConfig returns NULL (msprofiler/prof_acl_api.cpp, IsValidProfConfig): a NULL
  deviceIdList with deviceNums > 0, a non-NULL aicoreEvents, deviceNums > 64, deviceNums above
  the device count, a device id not below the device count, a device id given twice, and
  deviceNums 0 without ACL_PROF_MSPROFTX. It stores dataTypeConfig as CANN does: the levels of
  task time imply the lower ones, ACL_PROF_API_STATS keeps only itself and ACL_PROF_ACL_API.
* aclprofDestroyConfig of NULL is ACL_ERROR_INVALID_PARAM.
* aclprofStart and aclprofStop (preCheckProfConfig): aclprofStart(NULL) is
  ACL_ERROR_INVALID_PARAM (newer CANN starts a default configuration instead), aclprofStop(NULL)
  stops what runs and succeeds when nothing does; a dataTypeConfig with a bit outside the supported set
  (PROF_SWITCH_SUPPORT of msprofiler/prof_api_common.h) is ACL_ERROR_PROF_MODULES_UNSUPPORTED;
  then, before aclprofInit, ACL_ERROR_PROF_NOT_RUN (ProfAclMgr::ProfStartPrecheck). An
  aclprofStart while profiling runs checks the configuration against the running one
  (CheckConfigConsistency): another dataTypeConfig is ACL_ERROR_INVALID_PROFILING_CONFIG, the
  same one changes nothing; so does an aclprofStop with another dataTypeConfig. An aclprofStop
  while nothing runs succeeds (CANN only warns "Device has not been started").
* aclprofFinalize before aclprofInit is ACL_ERROR_PROF_NOT_RUN (ProfFinalizePrecheck; newer
  CANN returns success); it stops what still runs (ProfAclMgr::ProfAclFinalize).

What is recorded (the emulations' own output; CANN writes its PROF_* data instead): between
aclprofStart and aclprofStop of a configuration with task time (ACL_PROF_TASK_TIME or
ACL_PROF_TASK_TIME_L0, after the implications above), every task of a listed device that
finishes, with its start and end on the monotonic clock; aclprofFinalize appends them, one JSON
object per line, to ``<path>/pyaclnn_emulated_device.jsonl``. Keys: ``device``, ``stream``,
``kind``, ``name``, ``start_ns``, ``end_ns``, and ``event`` / ``graph`` where they apply.

Recording costs the streams one global read per task while nothing is profiled:
``_streams.RECORDER`` is None then.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...constants import (
    ACL_PROF_ACL_API,
    ACL_PROF_AICORE_METRICS,
    ACL_PROF_AICPU,
    ACL_PROF_API_STATS,
    ACL_PROF_GE_API_L0,
    ACL_PROF_GE_API_L1,
    ACL_PROF_HCCL_TRACE,
    ACL_PROF_L2CACHE,
    ACL_PROF_MSPROFTX,
    ACL_PROF_OP_ATTR,
    ACL_PROF_RUNTIME_API,
    ACL_PROF_TASK_MEMORY,
    ACL_PROF_TASK_TIME,
    ACL_PROF_TASK_TIME_L0,
    ACL_PROF_TASK_TIME_L2,
    ACL_PROF_TASK_TIME_L3,
    ACL_PROF_TRAINING_TRACE,
)
from . import _streams
from ._streams import Task, Worker

#: CANN's internal bits aclprofCreateConfig adds or accepts besides the declared ones
#: (toolchain/prof_data_config.h): PROF_AICPU_MODEL, always added, and PROF_AICORE_SHAPE.
AICPU_MODEL = 0x4000000000000000
AICORE_SHAPE = 0x800000000
#: PROF_SWITCH_SUPPORT of a release build (msprofiler/prof_api_common.h), in acl_prof.h's names.
SUPPORTED = (
    ACL_PROF_ACL_API
    | ACL_PROF_TASK_TIME
    | ACL_PROF_TASK_TIME_L0
    | ACL_PROF_AICORE_METRICS
    | ACL_PROF_AICPU
    | ACL_PROF_L2CACHE
    | ACL_PROF_HCCL_TRACE
    | ACL_PROF_TRAINING_TRACE
    | ACL_PROF_MSPROFTX
    | ACL_PROF_RUNTIME_API
    | ACL_PROF_TASK_MEMORY
    | ACL_PROF_GE_API_L0
    | ACL_PROF_GE_API_L1
    | ACL_PROF_TASK_TIME_L2
    | ACL_PROF_OP_ATTR
    | ACL_PROF_TASK_TIME_L3
    | ACL_PROF_API_STATS
    | AICORE_SHAPE
    | AICPU_MODEL
)
TASK_TIME = ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L0
PATH_MAX = 4096  # aclProfPathMaxLen: the length must be below it
MAX_DEVICES = 64  # PROF_MAX_DEV_NUM
FILE_NAME = "pyaclnn_emulated_device.jsonl"
#: The kind of record of a task, by the C call that queued it; anything else is a kernel.
KINDS = {
    "aclrtMemcpyAsync": "memcpy",
    "aclrtMemsetAsync": "memset",
    "aclrtRecordEvent": "event_record",
    "aclrtStreamWaitEvent": "event_wait",
}


def stored_data_type_config(requested: int) -> int:
    """dataTypeConfig as aclprofCreateConfig stores it: PROF_AICPU_MODEL added, each level of
    task time with the levels below it, training trace with task time; ACL_PROF_API_STATS alone
    with ACL_PROF_ACL_API."""
    stored = requested | AICPU_MODEL
    if requested & ACL_PROF_TASK_TIME:
        stored |= ACL_PROF_TASK_TIME_L0
    if requested & (ACL_PROF_TASK_TIME_L2 | ACL_PROF_OP_ATTR):
        stored |= ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME
    if requested & ACL_PROF_TASK_TIME_L3:
        stored |= ACL_PROF_TASK_TIME_L0 | ACL_PROF_TASK_TIME | ACL_PROF_TASK_TIME_L2
    if stored & ACL_PROF_TASK_TIME_L0:
        stored |= ACL_PROF_TRAINING_TRACE
    if requested & ACL_PROF_API_STATS:
        stored = ACL_PROF_ACL_API | ACL_PROF_API_STATS
    return stored


@dataclass(eq=False)
class Config:
    """An aclprofConfig: the devices to profile, the AI Core metrics, dataTypeConfig as stored."""

    devices: tuple[int, ...]
    aicore_metrics: int
    data_type_config: int


class Recorder:
    """The records of one aclprofStart..aclprofStop, filled by the streams' workers."""

    __slots__ = ("devices", "records", "_lock", "_on")

    def __init__(self, devices: Sequence[int]) -> None:
        self.devices = frozenset(devices)
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._on = True

    def add(self, worker: Worker, task: Task, start_ns: int, end_ns: int) -> None:
        """Record ``task``, which ran on ``worker`` from ``start_ns`` to ``end_ns``."""
        if not task.what or worker.device not in self.devices:
            return  # "": a replay's bracket (ReplaySpan), recorded as one record of its own
        record: dict[str, Any] = {
            "device": worker.device,
            "stream": worker.label,
            "kind": KINDS.get(task.what, "kernel"),
            "name": task.what + task.detail,
            "start_ns": start_ns,
            "end_ns": end_ns,
        }
        if task.event:
            record["event"] = f"{task.event:#x}"
        if task.graph:
            record["graph"] = f"{task.graph:#x}"
        self.append(record)

    def append(self, record: dict[str, Any]) -> None:
        with self._lock:
            if self._on:  # a task that ends after aclprofStop is not recorded
                self.records.append(record)

    def stop(self) -> list[dict[str, Any]]:
        """Record nothing more; the records so far."""
        with self._lock:
            self._on = False
            return self.records


class ReplaySpan:
    """The ``replay`` record of one aclmdlRIExecuteAsync: two zero-time tasks around the
    replay's tasks, the first noting when they start, the second recording when they ended."""

    __slots__ = ("recorder", "worker", "graph", "start_ns")

    def __init__(self, recorder: Recorder, worker: Worker, graph: int) -> None:
        self.recorder = recorder
        self.worker = worker
        self.graph = graph
        self.start_ns = 0

    def begin(self) -> None:
        self.start_ns = time.monotonic_ns()

    def end(self) -> None:
        if self.worker.device in self.recorder.devices:
            self.recorder.append(
                {
                    "device": self.worker.device,
                    "stream": self.worker.label,
                    "kind": "replay",
                    "name": "aclmdlRIExecuteAsync",
                    "start_ns": self.start_ns,
                    "end_ns": time.monotonic_ns(),
                    "graph": f"{self.graph:#x}",
                }
            )


class Profiler:
    """The backend's aclprof state: the result path (None before aclprofInit), the running
    configuration's dataTypeConfig (None when nothing runs) and the records kept for
    aclprofFinalize. Calls hold ``lock`` (CANN: g_profMutex)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.path: str | None = None
        self.running: int | None = None
        self.recorder: Recorder | None = None
        self.records: list[dict[str, Any]] = []

    def start(self, config: Config) -> None:
        self.running = config.data_type_config
        if config.data_type_config & TASK_TIME:
            self.recorder = Recorder(config.devices)
            _streams.RECORDER = self.recorder

    def stop(self) -> None:
        self.running = None
        recorder, self.recorder = self.recorder, None
        if recorder is not None:
            if _streams.RECORDER is recorder:
                _streams.RECORDER = None
            self.records.extend(recorder.stop())

    def finalize(self) -> None:
        """Stop, and append the records to the result file (the directory exists since aclprofInit)."""
        self.stop()
        assert self.path is not None
        records, self.records = self.records, []
        records.sort(key=lambda r: (r["start_ns"], r["end_ns"]))
        with open(os.path.join(self.path, FILE_NAME), "a", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record) + "\n")
        self.path = None
