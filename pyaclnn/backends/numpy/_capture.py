"""Stream capture of the numpy backend: ``aclmdlRI`` graphs (the C emulator's: tests/emulator/streams.c).

Between aclmdlRICaptureBegin and aclmdlRICaptureEnd, the work queued on the
stream is recorded into a :class:`Graph` instead of run; aclmdlRIExecuteAsync
queues the recorded work on a stream, in order, each task with its simulated
kernel time. The rules, with their sources (hicann/runtime at 681ef76, the
runtime CANN 8.1.RC1's acl_mdl.h declarations belong to, and torch_npu's
docs/zh/developer_notes/npugraph.md); tests/emulator/README.md lists the same:

* the default stream cannot be captured: a NULL stream is refused by the ACL
  layer with ACL_ERROR_INVALID_PARAM (src/acl/aclrt_impl/model_ri.cpp,
  ACL_REQUIRES_NOT_NULL); torch_npu's NPUGraph::capture_begin refuses it too;
* a mode outside [GLOBAL, RELAXED] is ACL_ERROR_RT_PARAM_INVALID, a stream that
  is already capturing (active or invalidated) ACL_ERROR_RT_STREAM_CAPTURED
  (ApiErrorDecorator::StreamBeginCapture, Context::StreamBeginCapture);
* the calls that are not safe during a capture, aclrtMemcpy, aclrtMemset and
  an async copy of pageable host memory, are refused with
  ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT when the capture mode forbids them
  (Context::IsCaptureModeSupport: a GLOBAL capture of the context forbids
  them to every thread whose exchange mode is GLOBAL, the default; a thread
  that began a GLOBAL or THREAD_LOCAL capture is forbidden them unless it
  exchanged its mode to RELAXED with aclmdlRICaptureThreadExchangeMode). The
  capture goes on: CANN's test capture_mode_api_03 (tests/ut/runtime/runtime/
  test/platform/910B/rt_utest_capture_mode.cc) ends it successfully after a
  refused rtMemset;
* an async copy of pageable host memory on the capturing stream itself cannot
  become a task of the graph (CANN: "The pageable memory copy task does not
  support graph capture", ApiErrorDecorator::MemcpyAsync): it is refused
  (ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT as above, else
  ACL_ERROR_RT_PARAM_INVALID) and the capture becomes INVALIDATED, as a task
  the capture could not take invalidates it in CANN
  (Stream::SingleStreamTerminateCapture); the CANN FAQ "ACL Graph捕获过程中任务提交限制"
  says such a call makes the capture fail;
* aclrtSynchronizeStream, aclrtDestroyStream and aclmdlRIExecuteAsync on a
  capturing stream are ACL_ERROR_RT_STREAM_CAPTURED (ApiErrorDecorator::
  StreamSynchronize / StreamDestroy / ModelExecute), and so is
  aclrtSynchronizeDevice while a stream of the device captures
  (Context::Synchronize); the capture goes on;
* aclrtSynchronizeEvent, aclrtQueryEventStatus and aclrtEventElapsedTime of an
  event recorded into a capture that is still active are
  ACL_ERROR_RT_EVENT_CAPTURED (ApiErrorDecorator::EventSynchronize /
  EventQueryStatus / EventElapsedTime; Event::IsCapturing until the capture
  ends);
* aclmdlRICaptureEnd of a stream that is not capturing is
  ACL_ERROR_RT_STREAM_NOT_CAPTURED; of an invalidated capture
  ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED, the graph is then destroyed and the
  stream no longer captures (Context::StreamEndCapture, ClearCaptureModel);
* the device memory the recorded work uses must stay allocated until the graph
  is destroyed (CANN's capture docs, npugraph.md): freeing it meanwhile is a
  hazard of the emulation, as freeing memory under queued work is; so is destroying a
  repeatable executor whose launch a live graph holds, or an event a live graph
  records or waits for (its next replay would use the destroyed event).

Not emulated: cross-stream capture (a stream that waits on an event recorded
in a capture joins it in CANN), the end-capture thread check, task groups and
task updates.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ...constants import (
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
)
from ._streams import Task, Worker

#: No capture (CANN's RT_STREAM_CAPTURE_MODE_MAX).
NO_CAPTURE = ACL_MODEL_RI_CAPTURE_MODE_RELAXED + 1


@dataclass(eq=False)
class Graph:
    """An aclmdlRI: the work one capture recorded, as steps that queue it again on a stream.

    ``tasks`` are the recorded tasks (launches, copies, memsets), queued again
    as they are at each replay (they hold views of the memory and their
    simulated kernel time); the event records and waits are steps of their
    own, which record or wait the event anew at each replay.
    """

    device: int
    steps: list[Callable[[Worker], object]] = field(default_factory=list, repr=False)
    tasks: list[Task] = field(default_factory=list, repr=False)
    events: list[Any] = field(default_factory=list, repr=False)  # recorded or waited for by steps
    _replayed: tuple[Task, ...] | None = field(default=None, repr=False)  # the tasks, as a replay runs them

    def add_task(self, task: Task) -> None:
        task.graph = id(self)  # the profiler's "graph" of the task, at each replay
        self.tasks.append(task)
        self.steps.append(lambda worker: worker.submit(task))

    def add_event_step(self, step: Callable[[Worker], object], event: Any) -> None:
        """Record ``step``, a record of ``event`` or a wait for it, which each replay repeats."""
        self.steps.append(step)
        self.events.append(event)

    def replay(self, worker: Worker) -> None:
        """Queue the recorded work on ``worker``: one task that runs the recorded tasks in order (a
        device runs a model from one submission, so the host cost does not grow with the graph);
        step by step when the graph records or waits for events, whose records are numbered when
        queued."""
        if self.events:
            for step in self.steps:
                step(worker)
            return
        tasks = self._replayed
        if tasks is None or len(tasks) != len(self.tasks):  # once: the capture has ended
            tasks = self._replayed = tuple(self.tasks)
        worker.submit(Task(partial(worker.run_steps, tasks), steps=tasks, graph=id(self)))

    def uses(self, allocation: object) -> bool:
        """Whether a recorded task uses ``allocation``."""
        return any(allocation in task.uses for task in self.tasks)

    def uses_event(self, event: object) -> bool:
        """Whether a step records or waits for ``event``."""
        return any(e is event for e in self.events)


@dataclass(eq=False)
class Capture:
    """The capture of one stream: its mode, the thread that began it, its graph and its status."""

    mode: int
    thread: int
    graph: Graph
    invalidated: bool = False
    events: list[Any] = field(default_factory=list, repr=False)  # recorded into it: "capturing"


class Modes:
    """The capture modes in force: the captures of each device and each thread's exchange mode.

    :meth:`unsafe_allowed` is CANN's Context::IsCaptureModeSupport.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: list[tuple[int, Capture]] = []  # (device, capture) of every active capture
        self._tls = threading.local()

    def enter(self, device: int, capture: Capture) -> None:
        with self._lock:
            self._active.append((device, capture))

    def exit(self, capture: Capture) -> None:
        with self._lock:
            self._active = [(d, c) for d, c in self._active if c is not capture]

    def exchange(self, mode: int) -> int:
        """Set the calling thread's exchange mode to ``mode``; returns the previous one (GLOBAL at first)."""
        old: int = getattr(self._tls, "exchange", ACL_MODEL_RI_CAPTURE_MODE_GLOBAL)
        self._tls.exchange = mode
        return old

    def unsafe_allowed(self, device: int) -> bool:
        """Whether the calling thread may call aclrtMemcpy / aclrtMemset / a pageable async copy now."""
        me = threading.get_ident()
        with self._lock:
            modes = [c.mode for d, c in self._active if d == device]
            mine = [c.mode for d, c in self._active if d == device and c.thread == me]
        if not modes:
            return True
        context_mode = min(modes)
        thread_mode = min(mine, default=NO_CAPTURE)
        exchange = getattr(self._tls, "exchange", ACL_MODEL_RI_CAPTURE_MODE_GLOBAL)
        if exchange == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL:
            return not (
                context_mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
                or thread_mode == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL
            )
        if exchange == ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL:
            return thread_mode not in (
                ACL_MODEL_RI_CAPTURE_MODE_GLOBAL,
                ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
            )
        return True

    def graphs(self) -> list[Graph]:
        with self._lock:
            return [c.graph for _, c in self._active]
