"""The numpy backend: a host emulation of the CANN C API subset.

"Device" memory is host memory behind synthetic addresses (``_heap``),
descriptors are Python objects (``_objects``). The operator adapters
(``_ops``, mixed into ``NumpyBackend``) run the NPU's checks in phase 1
(``pyaclnn.kernels.checks``) and, in phase 2, make the launch-time checks and
enqueue the NumPy kernel, on strided views of the emulated memory,
on the stream. Streams, events, device errors and hazards follow the
asynchronous device model of docs/architecture.md (``_streams``): every stream has a
worker thread that runs its tasks in order. See pyaclnn.backends._interface
for the calling convention.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import partial
from math import prod
from typing import Any

import numpy as np

from ... import _decl, _env
from ... import dtypes as _dtypes
from ...constants import (
    ACL_CONTINUE_ON_FAILURE,
    ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
    ACL_ERROR_HOST_MEMORY_NOT_REGISTERED,
    ACL_ERROR_INVALID_FILE,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_INVALID_PROFILING_CONFIG,
    ACL_ERROR_INVALID_RESOURCE_HANDLE,
    ACL_ERROR_PROF_MODULES_UNSUPPORTED,
    ACL_ERROR_PROF_NOT_RUN,
    ACL_ERROR_REPEAT_FINALIZE,
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_EVENT_CAPTURED,
    ACL_ERROR_RT_EVENT_NOT_COMPLETE,
    ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_RT_MEMORY_FREE,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
    ACL_ERROR_RT_STREAM_CAPTURED,
    ACL_ERROR_RT_STREAM_CONTEXT,
    ACL_ERROR_RT_STREAM_NOT_CAPTURED,
    ACL_ERROR_RT_SYSPARAMOPT_NOT_SET,
    ACL_EVENT_CAPTURE_STREAM_PROGRESS,
    ACL_EVENT_DEVICE_USE_ONLY,
    ACL_EVENT_EXTERNAL,
    ACL_EVENT_RECORDED_STATUS_COMPLETE,
    ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_EVENT_SYNC,
    ACL_EVENT_TIME_LINE,
    ACL_HOST_REGISTER_MAPPED,
    ACL_MEMCPY_DEFAULT,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED,
    ACL_MODEL_RI_CAPTURE_STATUS_NONE,
    ACL_PROF_MSPROFTX,
    ACL_STOP_ON_FAILURE,
    ACL_STREAM_FAST_LAUNCH,
    ACL_STREAM_FAST_SYNC,
    ACL_STREAM_STATUS_COMPLETE,
    ACL_STREAM_STATUS_NOT_READY,
    ACL_SUCCESS,
    ACLNN_ERR_INNER_NULLPTR,
    ACLNN_ERR_PARAM_INVALID,
    ACLNN_ERR_PARAM_NULLPTR,
    ACLNN_SUCCESS,
)
from .._interface import LIVE_COUNT_NAMES
from . import _streams
from ._capture import Capture, Graph, Modes
from ._cvalues import c_address, c_bools, c_floats, c_int, c_ints, c_size
from ._heap import Allocation, Heap, HeapError
from ._objects import BoolArray, FloatArray, HandleList, IntArray, Registry, Scalar, Stream, Tensor
from ._ops import BACKWARD_WORKSPACE as BACKWARD_WORKSPACE
from ._ops import OperatorsMixin
from ._profiler import (
    MAX_DEVICES,
    PATH_MAX,
    SUPPORTED,
    Config,
    Profiler,
    ReplaySpan,
    stored_data_type_config,
)
from ._streams import (
    SYNC_US,
    Device,
    Event,
    Hazards,
    Marker,
    Task,
    Worker,
    env_ns,
    sleep_ns,
)

_KNOWN_SYS_PARAM_OPTS = frozenset(_decl.enums()["aclSysParamOpt"].values())
# Flags that may be ORed together; ACL_EVENT_EXTERNAL only stands alone.
_EVENT_COMBINABLE = (
    ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE | ACL_EVENT_DEVICE_USE_ONLY
)

SOC_NAME = "Ascend910B (pyaclnn numpy emulation)"


HOST_PAGE = 4096  # aclrtHostRegister maps whole pages (CANN: ptr must be 4 KiB aligned)


def _not_mapped(located: tuple[np.ndarray, Allocation], what: str) -> tuple[np.ndarray, Allocation]:
    """``located`` (bytes and their allocation) unless they are host memory mapped for the device."""
    if located[1].mapped:
        raise HeapError(
            f"{what} {located[1].address:#x} is a device address of host memory mapped with "
            "aclrtHostRegister: it is for operators only, not for memory operations (copy through "
            "the host pointer)"
        )
    return located


def _host_address(ptr: Any, memory: np.ndarray) -> int:
    """The host address ``ptr`` stands for: itself for an int (aclrtMallocHost memory), else
    the start of the buffer object's bytes."""
    if isinstance(ptr, (int, np.integer)):
        return int(ptr)
    return int(memory.__array_interface__["data"][0])


def _record(event: Event, worker: Worker, graph: int = 0) -> None:
    """Queue a record of ``event`` on ``worker``: the event now stands for the work queued there so far.

    ``graph``: the ``id`` of the graph whose replay queues it (0: none), for the profiler.
    """
    marker = Marker()
    marker.worker = worker
    marker.seq = worker.submit(Task(marker.run, what="aclrtRecordEvent", event=id(event), graph=graph))
    event.marker = marker  # replaces what an earlier record captured


def _wait(event: Event, worker: Worker, graph: int = 0) -> None:
    """Queue on ``worker`` a wait for the latest record of ``event`` (nothing if never recorded)."""
    marker = event.marker
    if marker is not None:
        worker.submit(Task(marker.wait, what="aclrtStreamWaitEvent", event=id(event), graph=graph))


def _device_count() -> int:
    """PYACLNN_EMU_DEVICES (default 1), read once when the backend is made."""
    return _env.integer("PYACLNN_EMU_DEVICES", 1, minimum=1)


class NumpyBackend(OperatorsMixin):
    """Host emulation of the C API (PYACLNN_EMU_DEVICES devices, default 1; Atlas A2/A3 rules)."""

    name = "numpy"
    maps_host_memory = True  # its device memory is host memory (pyaclnn/_host_memory.py)

    def waited_at_once(self) -> _streams.waited_at_once:
        """A block whose tasks the calling thread waits for before it ends (a call on NumPy
        arrays): their stream threads are not woken for them (see
        :class:`~pyaclnn.backends.numpy._streams.waited_at_once`)."""
        return _streams.waited_at_once()

    def __init__(self) -> None:
        # One address space for all devices; every allocation is tagged with its device.
        self.heap = Heap(base=0x100000000)
        self.host_heap = Heap(base=0x7F0000000000)
        self.tensors = Registry("tensor")
        self.int_arrays = Registry("int array")
        self.bool_arrays = Registry("bool array")
        self.scalars = Registry("scalar")
        self.float_arrays = Registry("float array")
        self.tensor_lists = Registry("tensor list")
        self.scalar_lists = Registry("scalar list")
        self.executors = Registry("executor")
        self.streams = Registry("stream")
        self.events = Registry("event")
        self.graphs = Registry("graph")  # aclmdlRI, from aclmdlRICaptureBegin until aclmdlRIDestroy
        # aclprofConfig, from aclprofCreateConfig until aclprofDestroyConfig (not a live count)
        self.prof_configs = Registry("profiler config")
        self.profiler = Profiler()
        self.modes = Modes()
        self.devices = [Device(i) for i in range(_device_count())]
        self.hazards = Hazards()
        self._tls = threading.local()
        self._lock = threading.Lock()
        self._init_count = 0
        self._sys_params: dict[int, int] = {}
        # aclrtHostRegister: host address -> (end, device address of the mapping), under _lock
        self.mappings: dict[int, tuple[int, int]] = {}

    # -- errors -------------------------------------------------------------
    def _error(self, status: int, message: str) -> int:
        self._tls.message = message
        return status

    def _null(self, status: int, message: str) -> Tensor | None:
        """Failure of an aclCreate* call: NULL, with the reason left in the recent error message."""
        self._error(status, message)
        return None

    def aclGetRecentErrMsg(self) -> str:
        message = getattr(self._tls, "message", "")
        self._tls.message = ""
        return message

    # -- init, device -------------------------------------------------------
    def aclInit(self, config_path: str | None) -> int:
        with self._lock:
            self._init_count += 1
            if self._init_count > 1:
                return self._error(ACL_ERROR_REPEAT_INITIALIZE, "aclInit was already called in this process")
        return ACL_SUCCESS

    def aclFinalize(self) -> int:
        with self._lock:
            if self._init_count == 0:
                return self._error(ACL_ERROR_REPEAT_FINALIZE, "aclFinalize without a matching aclInit")
            self._init_count = 0
        return ACL_SUCCESS

    def aclnnInit(self, config_path: str | None) -> int:
        return ACLNN_SUCCESS

    def aclnnFinalize(self) -> int:
        return ACLNN_SUCCESS

    def _device_ok(self, device_id: int) -> bool:
        return isinstance(device_id, (int, np.integer)) and 0 <= device_id < len(self.devices)

    def _bad_device(self, device_id: int) -> int:
        last = len(self.devices) - 1
        valid = "the only device is 0" if last == 0 else f"the devices are 0..{last}"
        return self._error(ACL_ERROR_RT_INVALID_DEVICEID, f"deviceId {device_id} is invalid; {valid}")

    def aclrtSetDevice(self, device_id: int) -> int:
        if not self._device_ok(device_id):
            return self._bad_device(device_id)
        self._tls.device = int(device_id)
        return ACL_SUCCESS

    def aclrtResetDevice(self, device_id: int) -> int:
        if not self._device_ok(device_id):
            return self._bad_device(device_id)
        if getattr(self._tls, "device", None) == device_id:  # the thread loses its current context
            self._tls.device = None
        return ACL_SUCCESS

    # Contexts, as hicann/runtime 681ef76 has them (tests/emulator/README.md, "Contexts and
    # devices"): a thread has a current device only after aclrtSetDevice in that thread (the
    # context is thread-local, src/runtime/core/inc/common/inner_thread_local.hpp). The calls
    # that need one return ACL_ERROR_RT_CONTEXT_NULL without it; those that take a handle only
    # (aclrtFree, the event queries, nnopbase) do not ask.
    def _context(self, api: str) -> int:
        """The calling thread's current device, or -1 with the recent error message set (the
        caller returns ACL_ERROR_RT_CONTEXT_NULL)."""
        device: int | None = getattr(self._tls, "device", None)
        if device is None:
            self._error(
                ACL_ERROR_RT_CONTEXT_NULL,
                f"{api}: no device is set in this thread (ACL_ERROR_RT_CONTEXT_NULL: the thread has no "
                "current context); call aclrtSetDevice first",
            )
            return -1
        return device

    def aclrtGetDevice(self) -> tuple[int, int]:
        device = self._context("aclrtGetDevice")
        return (ACL_ERROR_RT_CONTEXT_NULL, -1) if device < 0 else (ACL_SUCCESS, device)

    def aclrtGetDeviceCount(self) -> tuple[int, int]:
        return ACL_SUCCESS, len(self.devices)

    def aclrtSynchronizeDevice(self) -> int:
        device = self._context("aclrtSynchronizeDevice")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL
        workers = self.devices[device].workers()
        for worker in workers:  # Context::Synchronize refuses before it waits for anything
            if worker.capture is not None:
                return self._captured("aclrtSynchronizeDevice", worker)
        return self._synchronize(workers)

    def aclrtGetSocName(self) -> str | None:
        return SOC_NAME

    def aclDataTypeSize(self, data_type: int) -> int:
        return _dtypes.size_of(data_type)

    def aclrtGetMemInfo(self, attr: int) -> tuple[int, int, int]:
        device = self._context("aclrtGetMemInfo")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL, 0, 0
        return ACL_SUCCESS, self.heap.capacity - self.heap.used(device), self.heap.capacity

    # -- system parameters --------------------------------------------------
    def aclrtCtxSetSysParamOpt(self, opt: int, value: int) -> int:
        if opt not in _KNOWN_SYS_PARAM_OPTS:
            return self._error(ACL_ERROR_RT_PARAM_INVALID, f"opt {opt} is not an aclSysParamOpt value")
        self._sys_params[opt] = int(value)
        return ACL_SUCCESS

    def aclrtCtxGetSysParamOpt(self, opt: int) -> tuple[int, int]:
        if opt not in self._sys_params:
            return self._error(ACL_ERROR_RT_SYSPARAMOPT_NOT_SET, f"system parameter {opt} was never set"), 0
        return ACL_SUCCESS, self._sys_params[opt]

    aclrtSetSysParamOpt = aclrtCtxSetSysParamOpt
    aclrtGetSysParamOpt = aclrtCtxGetSysParamOpt

    # -- streams ------------------------------------------------------------
    def aclrtCreateStream(self) -> tuple[int, Stream | None]:
        device = self._context("aclrtCreateStream")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL, None
        stream = Stream(device)
        stream.worker = self.devices[device].new_worker(f"{id(stream):#x}")
        return ACL_SUCCESS, self.streams.add(stream)

    def aclrtCreateStreamWithConfig(self, priority: int, flag: int) -> tuple[int, Stream | None]:
        api = "aclrtCreateStreamWithConfig"
        priority = c_int(priority, api, "priority", (0, 2**32 - 1))
        flag = c_int(flag, api, "flag", (0, 2**32 - 1))
        if priority > 7:  # acl_rt.h: "the priority of stream, value range:0~7"
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: priority {priority} is outside 0..7"), None
        if flag & ~(ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC):
            message = (
                f"{api}: flag {flag:#x} is not an OR of ACL_STREAM_FAST_LAUNCH (1) and "
                "ACL_STREAM_FAST_SYNC (2)"
            )
            return self._error(ACL_ERROR_INVALID_PARAM, message), None
        # One worker thread per stream runs as the OS schedules it: the priority changes nothing.
        return self.aclrtCreateStream()

    def aclrtSetStreamFailureMode(self, stream: Any, mode: int) -> int:
        api = "aclrtSetStreamFailureMode"
        mode = c_int(mode, api, "mode", (0, 2**64 - 1))
        if stream is None:  # CANN: the default stream's mode cannot be set
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: stream is NULL (the default stream)")
        status = self._stream_status(stream, api)
        if status:
            return status
        if mode not in (ACL_CONTINUE_ON_FAILURE, ACL_STOP_ON_FAILURE):
            message = f"{api}: mode {mode} is neither ACL_CONTINUE_ON_FAILURE (0) nor ACL_STOP_ON_FAILURE (1)"
            return self._error(ACL_ERROR_INVALID_PARAM, message)
        stream.worker.stop_on_failure = mode == ACL_STOP_ON_FAILURE
        return ACL_SUCCESS

    def aclrtStreamQuery(self, stream: Any) -> tuple[int, int]:
        api = "aclrtStreamQuery"
        status = self._stream_status(stream, api, own=False)
        if status:
            return status, ACL_STREAM_STATUS_NOT_READY
        if stream is None:
            worker = self.devices[self._tls.device].default_worker(create=False)
        else:
            if stream.worker.capture is not None:
                return self._captured(api, stream.worker), ACL_STREAM_STATUS_NOT_READY
            worker = stream.worker
        done = worker is None or worker.settled()
        return ACL_SUCCESS, ACL_STREAM_STATUS_COMPLETE if done else ACL_STREAM_STATUS_NOT_READY

    def _stream_status(self, stream: Any, api: str = "", own: bool = True) -> int:
        """ACL_SUCCESS when the calling thread may use ``stream`` (a live stream, or None: the
        current device's default stream) for ``api``, else the error: no current device
        (ACL_ERROR_RT_CONTEXT_NULL), not live, or (``own``) a stream of another device than the
        current one (ACL_ERROR_RT_STREAM_CONTEXT, CANN's check of every task submission and of
        aclrtDestroyStream)."""
        device = self._context(api)
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL
        if stream is None:
            return ACL_SUCCESS
        if not self.streams.is_live(stream):
            return self._bad_stream()
        if own and stream.device != device:
            return self._error(
                ACL_ERROR_RT_STREAM_CONTEXT,
                f"{api}: stream {id(stream):#x} belongs to device {stream.device}, not to this thread's "
                f"current device {device} (ACL_ERROR_RT_STREAM_CONTEXT: stream not in current context); "
                f"call aclrtSetDevice({stream.device}) first",
            )
        return ACL_SUCCESS

    def _bad_stream(self) -> int:
        return self._error(ACL_ERROR_INVALID_RESOURCE_HANDLE, "stream is not a live stream of this backend")

    def _worker(self, stream: Stream | None) -> Worker:
        """The worker of a live stream; None is the current device's default stream (the caller
        checked the stream with :meth:`_stream_status`, so there is a current device)."""
        worker: Worker | None = (
            self.devices[self._tls.device].default_worker() if stream is None else stream.worker
        )
        if worker is None:  # default_worker(create=True) and a live stream always have one
            raise RuntimeError("a stream of the numpy backend has no worker")
        return worker

    def _submit(self, worker: Worker, task: Task) -> int:
        """Enqueue ``task`` on ``worker`` (checked by :meth:`_stream_status`); returns its sequence number.

        On a capturing stream the task is recorded into the capture's graph instead (0 returned:
        nothing was queued; the callers that wait for a task refuse capture first).
        """
        capture = worker.capture
        if capture is not None:
            capture.graph.add_task(task)
            return 0
        return worker.submit(task)

    def aclrtDestroyStream(self, stream: Any) -> int:
        api = "aclrtDestroyStream"
        if stream is None or not self.streams.is_live(stream):
            # CANN resolves the context first (ApiImpl::StreamDestroy)
            return ACL_ERROR_RT_CONTEXT_NULL if self._context(api) < 0 else self._bad_stream()
        status = self._stream_status(stream, api)
        if status:
            return status
        if stream.worker.capture is not None:
            return self._captured(api, stream.worker)
        if not self.streams.remove(stream):
            return self._bad_stream()
        worker = stream.worker
        if worker.busy():
            self.hazards.report(
                f"stream {worker.label} destroyed with tasks pending (synchronize it first)",
                "aclrtDestroyStream",
            )
        worker.close()  # as CANN: the pending tasks still run; the thread then ends
        self.devices[stream.device].forget(worker)
        return ACL_SUCCESS

    def aclrtSynchronizeStream(self, stream: Any) -> int:
        # Any device's stream (CANN switches context for the wait), but a context is needed.
        status = self._stream_status(stream, "aclrtSynchronizeStream", own=False)
        if status:
            return status
        if stream is None:
            worker = self.devices[self._tls.device].default_worker(create=False)
            return self._synchronize([] if worker is None else [worker])
        if stream.worker.capture is not None:
            return self._captured("aclrtSynchronizeStream", stream.worker)
        return self._synchronize([stream.worker])

    def _captured(self, api: str, worker: Worker) -> int:
        """ACL_ERROR_RT_STREAM_CAPTURED: ``api`` is refused on a capturing stream (the capture goes on)."""
        return self._error(
            ACL_ERROR_RT_STREAM_CAPTURED,
            f"{api}: stream {worker.label} is capturing (aclmdlRICaptureBegin): not supported until "
            "aclmdlRICaptureEnd (ACL_ERROR_RT_STREAM_CAPTURED)",
        )

    def _synchronize(self, workers: list[Worker]) -> int:
        """Wait for what was submitted to ``workers`` so far, then report their sticky errors once."""
        for worker in workers:
            worker.wait()
        sleep_ns(env_ns(SYNC_US))
        first = None
        for worker in workers:  # every worker's error is taken (reported once), the first returned
            error = worker.take_error()
            first = first or error
        if first is not None:
            return self._error(*first)
        return ACL_SUCCESS

    # -- events -------------------------------------------------------------
    def aclrtCreateEvent(self) -> tuple[int, Event | None]:
        device = self._context("aclrtCreateEvent")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL, None
        return ACL_SUCCESS, self.events.add(Event(ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE, device))

    def aclrtCreateEventWithFlag(self, flag: int) -> tuple[int, Event | None]:
        flag = c_int(flag, "aclrtCreateEventWithFlag", "flag", (0, 2**32 - 1))
        device = self._context("aclrtCreateEventWithFlag")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL, None
        if flag != ACL_EVENT_EXTERNAL and flag & ~_EVENT_COMBINABLE:
            message = (
                f"aclrtCreateEventWithFlag: flag {flag:#x} is not an OR of ACL_EVENT_SYNC (1), "
                "ACL_EVENT_CAPTURE_STREAM_PROGRESS (2), ACL_EVENT_TIME_LINE (8), "
                "ACL_EVENT_DEVICE_USE_ONLY (16), nor ACL_EVENT_EXTERNAL (32) alone"
            )
            return self._error(ACL_ERROR_INVALID_PARAM, message), None
        return ACL_SUCCESS, self.events.add(Event(flag, device))

    def _event_status(self, event: Any, name: str = "event") -> int:
        """ACL_SUCCESS for a live event, else the error naming the argument ``name``."""
        return ACL_SUCCESS if event is not None and self.events.is_live(event) else self._bad_event(name)

    def _bad_event(self, name: str = "event") -> int:
        return self._error(ACL_ERROR_INVALID_RESOURCE_HANDLE, f"{name} is not a live event of this backend")

    def _event_and_stream_status(self, event: Any, stream: Any, api: str) -> int:
        """ACL_SUCCESS when ``api`` (aclrtRecordEvent, aclrtStreamWaitEvent) may use ``event`` with
        ``stream``, else the first error in this order: no current device (ACL_ERROR_RT_CONTEXT_NULL),
        then the event (:meth:`_event_status`), then the stream (:meth:`_stream_status`)."""
        if self._context(api) < 0:
            return ACL_ERROR_RT_CONTEXT_NULL
        if event is None or not self.events.is_live(event):  # as _event_status, inlined: no extra call
            return self._bad_event()
        return self._stream_status(stream, api)

    def aclrtDestroyEvent(self, event: Any) -> int:
        # A pending record still runs, and queued waits on it still work: they hold its Marker.
        if event is None or not self.events.remove(event):
            return self._bad_event()
        if any(isinstance(g, Graph) and g.uses_event(event) for g in self.graphs.values()):
            self.hazards.report(
                f"event {id(event):#x} destroyed while a live graph (aclmdlRI) records or waits for it "
                "(destroy the graph first)",
                "aclrtDestroyEvent",
            )
        return ACL_SUCCESS

    def aclrtRecordEvent(self, event: Any, stream: Any) -> int:
        api = "aclrtRecordEvent"
        status = self._event_and_stream_status(event, stream, api)
        if status:
            return status
        worker = self._worker(stream)
        if event.device != worker.device:
            # CANN's docs: recording fails when the event and the stream belong to different
            # devices; no code is documented (the emulations' choice, as the C emulator's).
            return self._error(
                ACL_ERROR_RT_STREAM_CONTEXT,
                f"{api}: event {id(event):#x} was created on device {event.device}, stream "
                f"{worker.label} belongs to device {worker.device}: an event cannot be recorded on a "
                "stream of another device (ACL_ERROR_RT_STREAM_CONTEXT)",
            )
        if worker.capture is not None:  # each replay records the event anew, on the replay's stream
            graph = worker.capture.graph
            graph.add_event_step(partial(_record, event, graph=id(graph)), event)
            worker.capture.events.append(event)
            event.capture = worker.capture
            return ACL_SUCCESS
        _record(event, worker)
        return ACL_SUCCESS

    def _event_captured(self, event: Event, api: str, name: str = "event") -> int:
        """ACL_ERROR_RT_EVENT_CAPTURED when ``event`` was recorded into a capture still active."""
        if event.capture is None:
            return ACL_SUCCESS
        return self._error(
            ACL_ERROR_RT_EVENT_CAPTURED,
            f"{api}: {name} {id(event):#x} was recorded into a capture that has not ended: not supported "
            "until aclmdlRICaptureEnd (ACL_ERROR_RT_EVENT_CAPTURED)",
        )

    def aclrtQueryEventStatus(self, event: Any) -> tuple[int, int]:
        status = self._event_status(event) or self._event_captured(event, "aclrtQueryEventStatus")
        if status:
            return status, ACL_EVENT_RECORDED_STATUS_NOT_READY
        marker = event.marker
        complete = marker is None or marker.query()
        return ACL_SUCCESS, (
            ACL_EVENT_RECORDED_STATUS_COMPLETE if complete else ACL_EVENT_RECORDED_STATUS_NOT_READY
        )

    def aclrtSynchronizeEvent(self, event: Any) -> int:
        status = self._event_status(event) or self._event_captured(event, "aclrtSynchronizeEvent")
        if status:
            return status
        marker = event.marker
        if marker is not None:
            marker.wait()
            sleep_ns(env_ns(SYNC_US))
        return ACL_SUCCESS

    def aclrtEventElapsedTime(self, start: Any, end: Any) -> tuple[int, float]:
        status = (
            self._event_status(start, "startEvent")
            or self._event_status(end, "endEvent")
            or self._event_captured(start, "aclrtEventElapsedTime", "startEvent")
            or self._event_captured(end, "aclrtEventElapsedTime", "endEvent")
            or self._timestamp_status(start, "startEvent")
            or self._timestamp_status(end, "endEvent")
        )
        if status:
            return status, 0.0
        return ACL_SUCCESS, (end.marker.timestamp_ns - start.marker.timestamp_ns) / 1e6

    def _timestamp_status(self, event: Event, name: str) -> int:
        """ACL_SUCCESS if ``event`` (aclrtEventElapsedTime's argument ``name``) has a timestamp to give."""
        api, handle = "aclrtEventElapsedTime", f"{id(event):#x}"
        if not event.flags & ACL_EVENT_TIME_LINE:
            return self._error(
                ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
                f"{api}: {name} {handle} was created with flag {event.flags:#x}, without "
                "ACL_EVENT_TIME_LINE: it has no timestamps",
            )
        if event.marker is None:
            return self._error(
                ACL_ERROR_INVALID_PARAM, f"{api}: {name} {handle} was never recorded (aclrtRecordEvent)"
            )
        if not event.marker.complete:
            return self._error(
                ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                f"{api}: {name} {handle} is recorded but not complete yet (aclrtSynchronizeEvent first)",
            )
        return ACL_SUCCESS

    def aclrtStreamWaitEvent(self, stream: Any, event: Any) -> int:
        # The stream must be the current device's; the event may be another device's (the
        # cross-device wait of Atlas A2/A3, Event::Wait in hicann/runtime's event.cc).
        api = "aclrtStreamWaitEvent"
        status = self._event_and_stream_status(event, stream, api)
        if status:
            return status
        if not event.flags & ACL_EVENT_SYNC:
            return self._error(
                ACL_ERROR_INVALID_PARAM,
                f"aclrtStreamWaitEvent: event {id(event):#x} was created with flag {event.flags:#x}, "
                "without ACL_EVENT_SYNC: it cannot be waited on",
            )
        worker = self._worker(stream)
        if worker.capture is not None:  # each replay waits for the record latest then
            graph = worker.capture.graph
            graph.add_event_step(partial(_wait, event, graph=id(graph)), event)
            return ACL_SUCCESS
        _wait(event, worker)  # the record latest now; a later record does not change this wait
        return ACL_SUCCESS

    # -- memory -------------------------------------------------------------
    def _malloc(self, heap: Heap, size: int, host: bool, api: str) -> tuple[int, int]:
        size = c_size(size, api, "size")
        if size == 0:
            message = f"size is {size}; it must be a positive number of bytes"
            return self._error(ACL_ERROR_INVALID_PARAM, message), 0
        device = self._context(api)  # aclrtMallocHost too: an assumption (tests/emulator/README.md)
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL, 0
        try:
            return ACL_SUCCESS, heap.allocate(size, host=host, device=device)
        except MemoryError as exc:
            return self._error(ACL_ERROR_RT_MEMORY_ALLOCATION, str(exc)), 0

    def aclrtMalloc(self, size: int, policy: int) -> tuple[int, int]:
        return self._malloc(self.heap, size, host=False, api="aclrtMalloc")

    def aclrtMallocHost(self, size: int) -> tuple[int, int]:
        return self._malloc(self.host_heap, size, host=True, api="aclrtMallocHost")

    def _free(self, heap: Heap, ptr: Any, host: bool, api: str, param: str, source: str) -> int:
        ptr = c_address(ptr, api, param)
        try:
            allocation = heap.allocation(ptr, host=host)
            kind = "host pinned" if host else "device"
            if self._in_use(allocation):
                # The tasks hold views of the buffer, so it lives until they finish.
                self.hazards.report(
                    f"{kind} memory {ptr:#x} freed while a queued or running task still uses it", api
                )
            elif self._graph_uses(allocation):
                # CANN: memory captured tasks use must stay unchanged until the graph is destroyed.
                self.hazards.report(
                    f"{kind} memory {ptr:#x} freed while a live graph (aclmdlRI) recorded work that uses it "
                    "(destroy the graph first)",
                    api,
                )
            heap.free(ptr, host=host)
        except HeapError as exc:
            message = f"{param}: {exc} (double free, or not from {source})"
            return self._error(ACL_ERROR_RT_MEMORY_FREE, message)
        return ACL_SUCCESS

    def _in_use(self, allocation: Allocation) -> bool:
        return any(w.uses(allocation) for device in self.devices for w in device.workers())

    def _graph_uses(self, allocation: Allocation) -> bool:
        """Whether a live graph (or one being captured) recorded work that uses ``allocation``."""
        return any(isinstance(g, Graph) and g.uses(allocation) for g in self.graphs.values())

    def aclrtFree(self, ptr: int) -> int:
        return self._free(self.heap, ptr, False, "aclrtFree", "devPtr", "aclrtMalloc")

    def aclrtFreeHost(self, ptr: int) -> int:
        return self._free(self.host_heap, ptr, True, "aclrtFreeHost", "hostPtr", "aclrtMallocHost")

    # -- host memory mapped for the device ------------------------------------
    # The checks and their order: hicann/runtime src/acl/aclrt_impl/memory.cpp
    # (aclrtHostRegisterImpl) and src/runtime/api/impl/api_error.cc; the page rule is CANN's
    # documented one, its status the emulations' choice (tests/emulator/README.md).
    def aclrtHostRegister(self, ptr: Any, size: int, type: int) -> tuple[int, int]:
        api = "aclrtHostRegister"
        if ptr is None or (isinstance(ptr, (int, np.integer)) and int(ptr) == 0):
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: ptr is NULL"), 0
        size = c_size(size, api, "size")
        if size == 0:
            message = f"{api}: size is 0; it must be a positive number of bytes"
            return self._error(ACL_ERROR_INVALID_PARAM, message), 0
        type = c_int(type, api, "type")
        if type != ACL_HOST_REGISTER_MAPPED:
            message = (
                f"{api}: type {type} is not supported; the only aclrtHostRegisterType is "
                "ACL_HOST_REGISTER_MAPPED (0)"
            )
            return self._error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, message), 0
        device = self._context(api)
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL, 0
        try:
            memory = self._bytes(ptr, size, "host", "ptr", False, api)[0]
        except HeapError as exc:
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: {exc}"), 0
        address = _host_address(ptr, memory)
        if address % HOST_PAGE:
            message = f"{api}: ptr {address:#x} is not {HOST_PAGE}-byte aligned (mapped in whole pages)"
            return self._error(ACL_ERROR_RT_PARAM_INVALID, message), 0
        with self._lock:
            for start, (end, _) in self.mappings.items():
                if start < address + size and address < end:
                    message = (
                        f"{api}: [{address:#x}, {address + size:#x}) overlaps the registered range "
                        f"[{start:#x}, {end:#x})"
                    )
                    return self._error(ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED, message), 0
            mapped = self.heap.map(memory, device)
            self.mappings[address] = (address + size, mapped)
        return ACL_SUCCESS, mapped

    def aclrtHostUnregister(self, ptr: Any) -> int:
        api = "aclrtHostUnregister"
        if ptr is None or (isinstance(ptr, (int, np.integer)) and int(ptr) == 0):
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: ptr is NULL")
        if self._context(api) < 0:
            return ACL_ERROR_RT_CONTEXT_NULL
        if isinstance(ptr, (int, np.integer)):
            address = c_address(ptr, api, "ptr")
        else:
            try:
                address = _host_address(ptr, self._bytes(ptr, 0, "host", "ptr", False, api)[0])
            except HeapError as exc:
                return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: {exc}")
        with self._lock:
            entry = self.mappings.pop(address, None)
        if entry is None:
            message = f"{api}: ptr {address:#x} is not the start of memory registered with aclrtHostRegister"
            return self._error(ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, message)
        allocation = self.heap.unmap(entry[1])
        if self._in_use(allocation):  # the tasks hold views: the memory is the caller's to keep alive
            self.hazards.report(
                f"host memory {address:#x} unregistered while a queued or running task still uses it", api
            )
        elif self._graph_uses(allocation):
            self.hazards.report(
                f"host memory {address:#x} unregistered while a live graph (aclmdlRI) recorded work that "
                "uses it (destroy the graph first)",
                api,
            )
        return ACL_SUCCESS

    def _bytes(
        self, where: Any, count: int, side: str, what: str, writable: bool, api: str
    ) -> tuple[np.ndarray, Allocation | None]:
        """uint8 view of ``count`` bytes of ``where`` (a device or host address, or a host
        buffer), and its allocation (None for a host buffer object: pageable memory)."""
        if isinstance(where, (int, np.integer)):
            heap = self.heap if side == "device" else self.host_heap
            return _not_mapped(heap.locate_bytes(c_address(where, api, what), count, what), what)
        if side == "device":
            raise HeapError(
                f"{what} must be a device address (an int from aclrtMalloc), got {type(where).__name__}"
            )
        if isinstance(where, np.ndarray):  # also dtypes without a buffer format, such as bfloat16
            if not where.flags.c_contiguous:
                raise HeapError(f"{what} must be a contiguous buffer")
            if writable and not where.flags.writeable:
                raise HeapError(f"{what} is a read-only buffer")
            flat = where.reshape(-1).view(np.uint8)
        else:
            view = memoryview(where)
            if writable and view.readonly:
                raise HeapError(f"{what} is a read-only buffer")
            if not view.c_contiguous:
                raise HeapError(f"{what} must be a contiguous buffer")
            flat = np.frombuffer(view.cast("B"), dtype=np.uint8) if view.nbytes else np.empty(0, np.uint8)
        if count > flat.size:
            raise HeapError(f"{what} holds {flat.size} bytes; {count} were asked for")
        return flat[:count], None

    def _copy_ranges(
        self, api: str, dst: Any, dest_max: int, src: Any, count: int, kind: int
    ) -> tuple[int, Any]:
        """Check a memcpy; returns ``(status, ranges)``, ranges None when there is nothing to copy,
        else ``(target, source, allocations, pageable, direction)``, direction " H2D" and so on."""
        dest_max = c_size(dest_max, api, "destMax")
        count = c_size(count, api, "count")
        kind = c_int(kind, api, "kind")
        if count > dest_max:
            return self._error(ACL_ERROR_INVALID_PARAM, f"count {count} exceeds destMax {dest_max}"), None
        sides = {
            ACL_MEMCPY_HOST_TO_HOST: ("host", "host"),
            ACL_MEMCPY_HOST_TO_DEVICE: ("device", "host"),
            ACL_MEMCPY_DEVICE_TO_HOST: ("host", "device"),
            ACL_MEMCPY_DEVICE_TO_DEVICE: ("device", "device"),
        }
        if kind == ACL_MEMCPY_DEFAULT:
            sides[kind] = (self._side(dst), self._side(src))
        if kind not in sides:
            message = f"kind {kind} is not an aclrtMemcpyKind this backend supports"
            return self._error(ACL_ERROR_INVALID_PARAM, message), None
        if count == 0:
            return ACL_SUCCESS, None
        dst_side, src_side = sides[kind]
        try:
            target, target_alloc = self._bytes(dst, count, dst_side, "dst", True, api)
            source, source_alloc = self._bytes(src, count, src_side, "src", False, api)
        except (HeapError, TypeError) as exc:
            return self._error(ACL_ERROR_INVALID_PARAM, str(exc)), None
        allocations = tuple(a for a in (target_alloc, source_alloc) if a is not None)
        pageable = target_alloc is None or source_alloc is None  # a host buffer object
        direction = f" {src_side[0].upper()}2{dst_side[0].upper()}"
        return ACL_SUCCESS, (target, source, allocations, pageable, direction)

    def aclrtMemcpy(self, dst: Any, dest_max: int, src: Any, count: int, kind: int) -> int:
        # Synchronous and immediate: CANN does not synchronize any stream for it.
        device = self._context("aclrtMemcpy")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL
        if not self.modes.unsafe_allowed(device):  # ApiImpl::MemCopySync checks it after the context
            return self._unsafe_refused("aclrtMemcpy")
        status, ranges = self._copy_ranges("aclrtMemcpy", dst, dest_max, src, count, kind)
        if ranges is not None:
            np.copyto(ranges[0], ranges[1])
        return status

    def _side(self, where: Any) -> str:
        if isinstance(where, (int, np.integer)) and self.heap.find(int(where)) is not None:
            return "device"
        return "host"

    def aclrtMemcpyAsync(self, dst: Any, dest_max: int, src: Any, count: int, kind: int, stream: Any) -> int:
        api = "aclrtMemcpyAsync"
        status = self._stream_status(stream, api)
        if status:
            return status
        status, ranges = self._copy_ranges(api, dst, dest_max, src, count, kind)
        if ranges is None:
            return status
        target, source, allocations, pageable, direction = ranges
        worker = self._worker(stream)
        if pageable:
            status = self._pageable_status(api, worker)
            if status:
                return status
        task = Task(partial(np.copyto, target, source), allocations, what=api, detail=direction)
        seq = self._submit(worker, task)
        if pageable:
            # CANN returns only once a copy from or to pageable memory is done,
            # still in order after the stream's earlier work.
            worker.wait(seq)
            sleep_ns(env_ns(SYNC_US))
        return ACL_SUCCESS

    def _unsafe_refused(self, api: str) -> int:
        return self._error(
            ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
            f"{api}: not permitted while a stream is capturing in a mode that forbids it (GLOBAL, or "
            "THREAD_LOCAL in the capturing thread); aclmdlRICaptureThreadExchangeMode(RELAXED) allows it "
            "in this thread (ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT)",
        )

    def _pageable_status(self, api: str, worker: Worker) -> int:
        """ACL_SUCCESS when an async copy of pageable host memory may be queued on ``worker`` now.

        The copy is synchronous to the caller, so it is one of the unsafe calls of a capture
        (refused as :meth:`_unsafe_refused` says); on the capturing stream itself it cannot be
        recorded at all: refused, and the capture is invalidated (see ``_capture``).
        """
        allowed = self.modes.unsafe_allowed(worker.device)
        capture = worker.capture
        if capture is not None:
            capture.invalidated = True
            if allowed:
                return self._error(
                    ACL_ERROR_RT_PARAM_INVALID,
                    f"{api}: a copy of pageable host memory cannot be captured (stream {worker.label} is "
                    "capturing; copy from aclrtMallocHost memory); the capture is now invalidated",
                )
        if not allowed:
            return self._unsafe_refused(api)
        return ACL_SUCCESS

    def _set_range(self, api: str, ptr: int, max_count: int, value: int, count: int) -> tuple[int, Any]:
        """Check a memset; returns ``(status, range)``, range None when there is nothing to set,
        else ``(bytes, allocation, byte value)``."""
        ptr = c_address(ptr, api, "devPtr")
        max_count = c_size(max_count, api, "maxCount")
        value = c_int(value, api, "value", (-(2**31), 2**31 - 1))
        count = c_size(count, api, "count")
        if count > max_count:
            return self._error(ACL_ERROR_INVALID_PARAM, f"count {count} exceeds maxCount {max_count}"), None
        if count == 0:
            return ACL_SUCCESS, None
        try:
            target, allocation = _not_mapped(self.heap.locate_bytes(ptr, count, "devPtr"), "devPtr")
        except (HeapError, TypeError) as exc:
            return self._error(ACL_ERROR_INVALID_PARAM, str(exc)), None
        return ACL_SUCCESS, (target, allocation, value & 0xFF)

    def aclrtMemset(self, ptr: int, max_count: int, value: int, count: int) -> int:
        device = self._context("aclrtMemset")
        if device < 0:
            return ACL_ERROR_RT_CONTEXT_NULL
        if not self.modes.unsafe_allowed(device):  # ApiImpl::MemSetSync checks it after the context
            return self._unsafe_refused("aclrtMemset")
        status, target = self._set_range("aclrtMemset", ptr, max_count, value, count)
        if target is not None:
            target[0].fill(target[2])
        return status

    def aclrtMemsetAsync(self, ptr: int, max_count: int, value: int, count: int, stream: Any) -> int:
        api = "aclrtMemsetAsync"
        status = self._stream_status(stream, api)
        if status:
            return status
        status, target = self._set_range(api, ptr, max_count, value, count)
        if target is not None:
            view, allocation, byte = target
            self._submit(self._worker(stream), Task(partial(view.fill, byte), (allocation,), what=api))
        return status

    # -- stream capture (aclmdlRI): the rules and their sources are in _capture.py -----------
    def aclmdlRICaptureBegin(self, stream: Any, mode: int) -> int:
        api = "aclmdlRICaptureBegin"
        if stream is None:  # the ACL layer's ACL_REQUIRES_NOT_NULL, before the runtime
            return self._error(
                ACL_ERROR_INVALID_PARAM,
                f"{api}: stream is NULL: the default stream cannot be captured; capture a stream from "
                "aclrtCreateStream",
            )
        mode = c_int(mode, api, "mode")
        if not ACL_MODEL_RI_CAPTURE_MODE_GLOBAL <= mode <= ACL_MODEL_RI_CAPTURE_MODE_RELAXED:
            message = (
                f"{api}: mode {mode} is not an aclmdlRICaptureMode (GLOBAL 0, THREAD_LOCAL 1, RELAXED 2)"
            )
            return self._error(ACL_ERROR_RT_PARAM_INVALID, message)
        status = self._stream_status(stream, api)
        if status:
            return status
        worker = stream.worker
        with self._lock:
            if worker.capture is not None:
                state = "invalidated" if worker.capture.invalidated else "active"
                return self._error(
                    ACL_ERROR_RT_STREAM_CAPTURED,
                    f"{api}: stream {worker.label} is already capturing ({state}); end that capture with "
                    "aclmdlRICaptureEnd first (ACL_ERROR_RT_STREAM_CAPTURED)",
                )
            capture = Capture(mode, threading.get_ident(), self.graphs.add(Graph(stream.device)))
            worker.capture = capture
        self.modes.enter(stream.device, capture)
        return ACL_SUCCESS

    def aclmdlRICaptureGetInfo(self, stream: Any) -> tuple[int, int, Graph | None]:
        api = "aclmdlRICaptureGetInfo"
        if stream is None:
            return (
                self._error(ACL_ERROR_INVALID_PARAM, f"{api}: stream is NULL"),
                ACL_MODEL_RI_CAPTURE_STATUS_NONE,
                None,
            )
        status = self._stream_status(stream, api, own=False)
        if status:
            return status, ACL_MODEL_RI_CAPTURE_STATUS_NONE, None
        capture = stream.worker.capture
        if capture is None:
            return ACL_SUCCESS, ACL_MODEL_RI_CAPTURE_STATUS_NONE, None
        state = (
            ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
            if capture.invalidated
            else ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
        )
        return ACL_SUCCESS, state, capture.graph

    def aclmdlRICaptureEnd(self, stream: Any) -> tuple[int, Graph | None]:
        api = "aclmdlRICaptureEnd"
        if stream is None:
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: stream is NULL"), None
        status = self._stream_status(stream, api)
        if status:
            return status, None
        worker = stream.worker
        with self._lock:
            capture, worker.capture = worker.capture, None
        if capture is None:
            return self._error(
                ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                f"{api}: stream {worker.label} is not capturing; call aclmdlRICaptureBegin first "
                "(ACL_ERROR_RT_STREAM_NOT_CAPTURED)",
            ), None
        self.modes.exit(capture)
        for event in capture.events:  # ResetCaptureEvents: no longer capturing
            if event.capture is capture:
                event.capture = None
        if capture.invalidated:  # CANN destroys the graph and leaves the stream out of capture
            self.graphs.remove(capture.graph)
            return self._error(
                ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                f"{api}: the capture of stream {worker.label} was invalidated by a call it could not "
                "record; its work is dropped (ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED)",
            ), None
        return ACL_SUCCESS, capture.graph

    def aclmdlRICaptureThreadExchangeMode(self, mode: int) -> tuple[int, int]:
        api = "aclmdlRICaptureThreadExchangeMode"
        mode = c_int(mode, api, "mode")
        if not ACL_MODEL_RI_CAPTURE_MODE_GLOBAL <= mode <= ACL_MODEL_RI_CAPTURE_MODE_RELAXED:
            message = (
                f"{api}: mode {mode} is not an aclmdlRICaptureMode (GLOBAL 0, THREAD_LOCAL 1, RELAXED 2)"
            )
            return self._error(ACL_ERROR_RT_PARAM_INVALID, message), mode
        return ACL_SUCCESS, self.modes.exchange(mode)

    def _graph_status(self, graph: Any, api: str) -> int:
        if graph is None:  # the ACL layer's ACL_REQUIRES_NOT_NULL
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: modelRI is NULL")
        if not self.graphs.is_live(graph):
            return self._error(
                ACL_ERROR_RT_PARAM_INVALID,
                f"{api}: modelRI is not a live graph (destroyed, or not from aclmdlRICaptureEnd)",
            )
        return ACL_SUCCESS

    def aclmdlRIExecuteAsync(self, model_ri: Any, stream: Any) -> int:
        api = "aclmdlRIExecuteAsync"
        status = self._graph_status(model_ri, api) or self._stream_status(stream, api)
        if status:
            return status
        worker = self._worker(stream)
        if worker.capture is not None:
            return self._captured(api, worker)
        if any(model_ri is w.capture.graph for d in self.devices for w in d.workers() if w.capture):
            return self._error(ACL_ERROR_RT_STREAM_CAPTURED, f"{api}: modelRI is still being captured")
        recorder = _streams.RECORDER
        span = None if recorder is None else ReplaySpan(recorder, worker, id(model_ri))
        if span is not None:  # the profiler's "replay" record, from its first task to its last
            worker.submit(Task(span.begin))
        model_ri.replay(worker)  # in order, each task with its simulated kernel time
        if span is not None:
            worker.submit(Task(span.end))
        return ACL_SUCCESS

    def aclmdlRIDestroy(self, model_ri: Any) -> int:
        api = "aclmdlRIDestroy"
        status = self._graph_status(model_ri, api)
        if status:
            return status
        if any(model_ri is w.capture.graph for d in self.devices for w in d.workers() if w.capture):
            # The emulations' choice: CANN gives the graph only at aclmdlRICaptureEnd.
            return self._error(
                ACL_ERROR_RT_STREAM_CAPTURED,
                f"{api}: modelRI is still being captured (aclmdlRICaptureEnd first)",
            )
        self.graphs.remove(model_ri)  # replays already queued hold their tasks and still run
        return ACL_SUCCESS

    # -- profiler (aclprof*): the rules and their sources are in _profiler.py --------------
    def aclprofInit(self, profiler_result_path: str | None, length: int) -> int:
        api = "aclprofInit"
        if profiler_result_path is None:
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: profilerResultPath is NULL")
        length = c_size(length, api, "length")
        if length == 0 or length >= PATH_MAX:
            return self._error(
                ACL_ERROR_INVALID_PARAM,
                f"{api}: length {length} of profilerResultPath must be in [1, {PATH_MAX})",
            )
        raw = profiler_result_path.encode("utf-8")
        strlen = raw.find(b"\0") if b"\0" in raw else len(raw)
        if strlen != length:
            return self._error(
                ACL_ERROR_INVALID_PARAM,
                f"{api}: length {length} is not the length of profilerResultPath ({strlen} bytes)",
            )
        profiler = self.profiler
        with profiler.lock:
            if profiler.path is not None:
                return self._error(
                    ACL_ERROR_REPEAT_INITIALIZE,
                    f"{api}: profiling is already initialized (result path {profiler.path}); call "
                    "aclprofFinalize first (ACL_ERROR_REPEAT_INITIALIZE)",
                )
            path = os.path.abspath(raw[:length].decode("utf-8", "replace"))
            try:
                os.makedirs(path, exist_ok=True)
            except OSError as exc:
                return self._error(
                    ACL_ERROR_INVALID_FILE, f"{api}: profilerResultPath {path} cannot be made: {exc}"
                )
            if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
                return self._error(
                    ACL_ERROR_INVALID_FILE, f"{api}: profilerResultPath {path} is not accessible"
                )
            profiler.path = path
        return ACL_SUCCESS

    def aclprofFinalize(self) -> int:
        profiler = self.profiler
        with profiler.lock:
            if profiler.path is None:
                return self._prof_not_run("aclprofFinalize")
            try:
                profiler.finalize()
            except OSError as exc:  # the directory went away since aclprofInit
                return self._error(ACL_ERROR_INVALID_FILE, f"aclprofFinalize: {exc}")
        return ACL_SUCCESS

    def _prof_not_run(self, api: str) -> int:
        return self._error(
            ACL_ERROR_PROF_NOT_RUN,
            f"{api}: profiling is not initialized; call aclprofInit first (ACL_ERROR_PROF_NOT_RUN)",
        )

    def aclprofCreateConfig(
        self,
        device_id_list: Sequence[int] | None,
        aicore_metrics: int,
        aicore_events: Any,
        data_type_config: int,
    ) -> Config | None:
        api = "aclprofCreateConfig"
        metrics = c_int(aicore_metrics, api, "aicoreMetrics")
        data_type_config = c_int(data_type_config, api, "dataTypeConfig", (0, 2**64 - 1))
        if device_id_list is None:
            devices: list[int] = []  # CANN: a NULL list with deviceNums 0
        else:
            devices = [c_int(d, api, "deviceIdList", (0, 2**32 - 1)) for d in device_id_list]
        if aicore_events is not None:
            return self._no_config(f"{api}: aicoreEvents must be NULL")
        if len(devices) > MAX_DEVICES:
            return self._no_config(f"{api}: deviceNums {len(devices)} is above {MAX_DEVICES}")
        count = len(self.devices)
        if len(devices) > count:
            return self._no_config(
                f"{api}: deviceNums {len(devices)} is above the device count {count}",
            )
        for i, device in enumerate(devices):
            if device >= count:
                return self._no_config(
                    f"{api}: deviceIdList[{i}] is {device}; a device id must be in [0, {count})",
                )
            if device in devices[:i]:
                return self._no_config(f"{api}: deviceIdList[{i}]: device {device} is given twice")
        if not devices and not data_type_config & ACL_PROF_MSPROFTX:
            return self._no_config(f"{api}: deviceNums is 0; it can be 0 only with ACL_PROF_MSPROFTX")
        config = Config(tuple(devices), metrics, stored_data_type_config(data_type_config))
        return self.prof_configs.add(config)

    def _no_config(self, message: str) -> Config | None:
        """aclprofCreateConfig's NULL, with the reason left in the recent error message."""
        self._error(ACL_ERROR_INVALID_PARAM, message)
        return None

    def aclprofDestroyConfig(self, profiler_config: Any) -> int:
        api = "aclprofDestroyConfig"
        if profiler_config is None:
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: profilerConfig is NULL")
        if not self.prof_configs.remove(profiler_config):
            return self._dead_config(api)
        return ACL_SUCCESS

    def _dead_config(self, api: str) -> int:
        # CANN does not check this (a destroyed config is freed memory): the emulations' choice.
        return self._error(
            ACL_ERROR_INVALID_PARAM,
            f"{api}: profilerConfig is not a live aclprofConfig (destroyed, or not from aclprofCreateConfig)",
        )

    def _config_status(self, config: Any, api: str) -> int:
        """preCheckProfConfig: a live config whose dataTypeConfig CANN supports."""
        if config is None:
            return self._error(ACL_ERROR_INVALID_PARAM, f"{api}: profilerConfig is NULL")
        if not self.prof_configs.is_live(config):
            return self._dead_config(api)
        unsupported = config.data_type_config & ~SUPPORTED
        if unsupported:
            return self._error(
                ACL_ERROR_PROF_MODULES_UNSUPPORTED,
                f"{api}: dataTypeConfig {config.data_type_config:#x} has bits {unsupported:#x} that are not "
                f"supported (supported: {SUPPORTED:#x}) (ACL_ERROR_PROF_MODULES_UNSUPPORTED)",
            )
        return ACL_SUCCESS

    def _consistent(self, config: Config, api: str) -> int:
        """CheckConfigConsistency: ``config`` asks for what runs (called while something runs)."""
        running = self.profiler.running
        if config.data_type_config != running:
            return self._error(
                ACL_ERROR_INVALID_PROFILING_CONFIG,
                f"{api}: dataTypeConfig {config.data_type_config:#x} differs from that of the running "
                f"aclprofStart ({running:#x}) (ACL_ERROR_INVALID_PROFILING_CONFIG)",
            )
        return ACL_SUCCESS

    def aclprofStart(self, profiler_config: Any) -> int:
        api = "aclprofStart"
        status = self._config_status(profiler_config, api)
        if status:
            return status
        profiler = self.profiler
        with profiler.lock:
            if profiler.running is not None:  # a second start changes nothing, if consistent
                return self._consistent(profiler_config, api)
            if profiler.path is None:
                return self._prof_not_run(api)
            profiler.start(profiler_config)
        return ACL_SUCCESS

    def aclprofStop(self, profiler_config: Any) -> int:
        api = "aclprofStop"
        profiler = self.profiler
        if profiler_config is None:  # CANN: the running configuration, success when none runs
            with profiler.lock:
                profiler.stop()
            return ACL_SUCCESS
        status = self._config_status(profiler_config, api)
        if status:
            return status
        with profiler.lock:
            if profiler.path is None:
                return self._prof_not_run(api)
            if profiler.running is not None:
                status = self._consistent(profiler_config, api)
                if status:
                    return status
            profiler.stop()
        return ACL_SUCCESS

    # -- descriptors --------------------------------------------------------
    # aclCreateTensor's parameter list stands here and in the npu backend: each backend
    # implements the generated Backend method; the bodies share nothing.
    def aclCreateTensor(
        self,
        view_dims: Sequence[int],
        data_type: int,
        strides: Sequence[int] | None,
        offset: int,
        fmt: int,
        storage_dims: Sequence[int],
        data: int,
    ) -> Tensor | None:
        api = "aclCreateTensor"
        shape = c_ints(view_dims, api, "viewDims")
        if any(d < 0 for d in shape):
            return self._null(ACLNN_ERR_PARAM_INVALID, f"viewDims {list(shape)} has a negative dim")
        strides = _dtypes.contiguous_strides(shape) if strides is None else c_ints(strides, api, "stride")
        if len(strides) != len(shape):
            message = f"stride has {len(strides)} values for {len(shape)} dims"
            return self._null(ACLNN_ERR_PARAM_INVALID, message)
        if any(s < 0 for s in strides):
            return self._null(
                ACLNN_ERR_PARAM_INVALID, f"stride {list(strides)} has a negative value; strides must be >= 0"
            )
        offset = c_int(offset, api, "offset")
        if offset < 0:
            return self._null(ACLNN_ERR_PARAM_INVALID, f"offset {offset} is negative")
        storage = c_ints(storage_dims, api, "storageDims")
        if any(d < 0 for d in storage):
            return self._null(ACLNN_ERR_PARAM_INVALID, f"storageDims {list(storage)} has a negative dim")
        data = c_address(data, api, "tensorData")
        try:
            dtype = _dtypes.to_numpy(c_int(data_type, api, "dataType"))
        except ValueError as exc:
            return self._null(ACLNN_ERR_PARAM_INVALID, str(exc))
        tensor = Tensor(shape, int(data_type), strides, offset, c_int(fmt, api, "format"), storage, data)
        if 0 not in shape:
            try:
                storage_bytes = prod(storage) * dtype.itemsize
                if storage_bytes:
                    self.heap.bytes_at(data, storage_bytes, "tensorData (storageDims)")
                self.heap.locate_view(tensor.data, dtype, shape, strides, tensor.offset, "tensorData")
            except HeapError as exc:
                return self._null(ACLNN_ERR_PARAM_INVALID, str(exc))
        return self.tensors.add(tensor)

    def aclDestroyTensor(self, tensor: Any) -> int:
        return self._destroy(self.tensors, tensor)

    def aclCreateIntArray(self, values: Sequence[int]) -> IntArray:
        return self.int_arrays.add(IntArray(c_ints(values, "aclCreateIntArray", "values")))

    def aclDestroyIntArray(self, array: Any) -> int:
        return self._destroy(self.int_arrays, array)

    def aclCreateBoolArray(self, values: Sequence[bool]) -> BoolArray:
        return self.bool_arrays.add(BoolArray(c_bools(values, "aclCreateBoolArray", "values")))

    def aclDestroyBoolArray(self, array: Any) -> int:
        return self._destroy(self.bool_arrays, array)

    def aclCreateScalar(self, value: Any, data_type: int) -> Scalar | None:
        api = "aclCreateScalar"
        try:
            dtype = _dtypes.to_numpy(c_int(data_type, api, "dataType"))
        except ValueError as exc:
            self._null(ACLNN_ERR_PARAM_INVALID, str(exc))
            return None
        if value is None:
            self._null(ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is a null pointer")
            return None
        try:
            raw = memoryview(value).cast("B")
        except TypeError:
            raise TypeError(
                f"{api}: value must be a host buffer holding the scalar, got {type(value).__name__}"
            ) from None
        if len(raw) < dtype.itemsize:
            raise ValueError(f"{api}: value holds {len(raw)} bytes, a {dtype} scalar needs {dtype.itemsize}")
        # Copied now, as CANN copies it: the caller's buffer may change after the call.
        number = np.frombuffer(bytes(raw[: dtype.itemsize]), dtype=dtype)[0]
        return self.scalars.add(Scalar(number, int(data_type)))

    def aclDestroyScalar(self, scalar: Any) -> int:
        return self._destroy(self.scalars, scalar)

    def aclCreateFloatArray(self, values: Sequence[float]) -> FloatArray:
        return self.float_arrays.add(FloatArray(c_floats(values, "aclCreateFloatArray", "value")))

    def aclDestroyFloatArray(self, array: Any) -> int:
        return self._destroy(self.float_arrays, array)

    def aclCreateTensorList(self, values: Sequence[Any]) -> HandleList | None:
        return self._handle_list(values, self.tensors, self.tensor_lists, "aclCreateTensorList")

    def aclDestroyTensorList(self, array: Any) -> int:
        return self._destroy_list(self.tensor_lists, self.tensors, array)

    def aclCreateScalarList(self, values: Sequence[Any]) -> HandleList | None:
        return self._handle_list(values, self.scalars, self.scalar_lists, "aclCreateScalarList")

    def aclDestroyScalarList(self, array: Any) -> int:
        return self._destroy_list(self.scalar_lists, self.scalars, array)

    def _destroy_list(self, lists: Registry, items: Registry, array: Any) -> int:
        """Destroy a list and the handles in it: CANN's list owns them ("the aclTensors in an
        aclTensorList need not be freed again", aclDestroyTensorList's documentation)."""
        status = self._destroy(lists, array)
        if status == ACL_SUCCESS:
            for item in array.items:
                items.remove(item)
        return status

    def _handle_list(self, values: Any, items: Registry, lists: Registry, api: str) -> HandleList | None:
        """A list of live handles of ``items`` (refused, NULL, if one is not live); it owns them from
        now on: destroying it destroys them."""
        if values is None:
            self._null(ACLNN_ERR_PARAM_NULLPTR, f"{api}: value is a null pointer")
            return None
        handles = tuple(values)
        for i, handle in enumerate(handles):
            if handle is None or not items.is_live(handle):
                message = f"{api}: value[{i}] is not a live {items.kind} of this backend"
                self._null(ACLNN_ERR_PARAM_INVALID, message)
                return None
        return lists.add(HandleList(handles))

    def _destroy(self, registry: Registry, obj: Any) -> int:
        if obj is None:
            return self._error(ACLNN_ERR_PARAM_NULLPTR, f"the {registry.kind} is a null pointer")
        if not registry.remove(obj):
            return self._error(
                ACLNN_ERR_PARAM_INVALID,
                f"the {registry.kind} is not live (destroyed already, or not from this backend)",
            )
        return ACL_SUCCESS

    def aclSetAclOpExecutorRepeatable(self, executor: Any) -> int:
        if executor is None or not self.executors.is_live(executor):
            return self._error(ACLNN_ERR_INNER_NULLPTR, "executor is not a live executor of this backend")
        executor.repeatable = True
        return ACL_SUCCESS

    def aclDestroyAclOpExecutor(self, executor: Any) -> int:
        if executor is None or not self.executors.is_live(executor):
            return self._error(ACLNN_ERR_INNER_NULLPTR, "executor is not a live executor of this backend")
        if not executor.repeatable:
            return self._error(
                ACLNN_ERR_PARAM_INVALID,
                "executor is not repeatable: phase 2 frees it, it must not be destroyed",
            )
        if any(w.runs_owner(executor) for device in self.devices for w in device.workers()):
            # The queued launches hold what they need, so they still run correctly.
            self.hazards.report(
                f"repeatable {executor.op} executor destroyed while a queued launch of it has not finished",
                "aclDestroyAclOpExecutor",
            )
        elif any(
            isinstance(g, Graph) and any(task.owner is executor for task in g.tasks)
            for g in self.graphs.values()
        ):
            # As the C emulator: a captured launch holds its executor until the graph goes.
            self.hazards.report(
                f"repeatable {executor.op} executor destroyed while a live graph (aclmdlRI) holds a "
                "launch of it",
                "aclDestroyAclOpExecutor",
            )
        self.executors.remove(executor)
        return ACL_SUCCESS

    def live_counts(self, device: int | None = None) -> dict[str, int]:
        """Live objects of each kind, as the emulator reports them through pyaclnnEmuLiveCounts.

        Parameters
        ----------
        device : int, optional
            Count only the allocations and streams of this device
            (pyaclnnEmuDeviceLiveCounts); descriptors and executors are global.
        """
        streams = len(self.streams) if device is None else self.devices[device].stream_count()
        counts = (
            self.heap.live_count(host=False, device=device),
            self.host_heap.live_count(host=True, device=device),
            len(self.tensors),
            len(self.int_arrays),
            len(self.bool_arrays),
            len(self.executors),
            streams,
            self.heap.live_count(host=False, device=device, mapped=True),
            sum(1 for g in self.graphs.values() if device is None or getattr(g, "device", None) == device),
            len(self.scalars),
            len(self.float_arrays),
            len(self.tensor_lists),
            len(self.scalar_lists),
        )
        return dict(zip(LIVE_COUNT_NAMES, counts))

    def hazard_count(self) -> int:
        """Hazards seen so far (the numpy side of pyaclnnEmuHazardCount)."""
        return self.hazards.count

    def adopt_stream(self, handle: Any) -> Stream:
        """``handle`` as a stream of this backend: only its own live streams qualify.

        Raises
        ------
        TypeError
            For anything else (an int cannot name a stream of the emulation).
        """
        if isinstance(handle, Stream) and self.streams.is_live(handle):
            return handle
        raise TypeError(
            "handle must be a live stream of the numpy backend (from pyaclnn.acl.rt.create_stream), "
            f"got {type(handle).__name__}"
        )

    def device_memory(self, ptr: int, nbytes: int) -> int:
        """The device owning ``[ptr, ptr + nbytes)`` inside one live aclrtMalloc allocation, else -1."""
        allocation = self.heap.find(int(ptr))
        if allocation is None or allocation.host or int(ptr) + nbytes > allocation.address + allocation.size:
            return -1
        return allocation.device
