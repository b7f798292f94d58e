"""The host side of :func:`pyaclnn.profile`: one slice per call, per Python thread, while a profile records.

The runtime asks one module attribute, :data:`recording`, on each path it
times (an operator launch, a graph replay, an enqueue, a wait, a host read):
that read is all a call pays when nothing is profiled. While a profile
records, those paths go through :func:`launch` / :func:`timed`, which add a
slice ``(name, start_ns, end_ns, args)`` to the calling thread's own list
(appended by that thread alone: no lock on the way), on the monotonic clock
the emulations use for their device records.

Memory is bounded: a thread keeps at most :data:`MAX_SLICES_PER_THREAD`
slices per profile; later ones are counted (:attr:`Session.dropped`), not kept.
This module imports nothing of the runtime, so the runtime's modules can all
import it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

#: Whether a profile records: the one check the runtime makes on each timed path.
recording = False
#: Host slices kept per thread and profile (about 200 bytes each: 100 000 is ~20 MB a thread).
MAX_SLICES_PER_THREAD = 100_000

Slice = tuple[str, int, int, dict[str, Any]]


class ThreadSlices:
    """One thread's slices of one session, appended by that thread only."""

    __slots__ = ("number", "name", "slices", "dropped")

    def __init__(self, number: int, name: str) -> None:
        self.number = number
        self.name = name
        self.slices: list[Slice] = []
        self.dropped = 0


class Session:
    """The host slices of one profile, by thread (in the order threads first recorded)."""

    def __init__(self) -> None:
        self.start_ns = time.monotonic_ns()
        self.threads: list[ThreadSlices] = []
        # stream label -> pyaclnn's name of that stream ("pyaclnn stream #3"), for the device rows
        self.stream_names: dict[str, str] = {}
        self._lock = threading.Lock()

    def thread(self) -> ThreadSlices:
        """The calling thread's list, registered at its first slice."""
        found: ThreadSlices | None = getattr(_local, "slices", None)
        if found is None or _local.session is not self:
            current = threading.current_thread()
            with self._lock:
                found = ThreadSlices(len(self.threads), current.name)
                self.threads.append(found)
            _local.session = self  # replaces an earlier session's list: one per thread at a time
            _local.slices = found
        return found

    @property
    def dropped(self) -> int:
        """Slices not kept, all threads together (see :data:`MAX_SLICES_PER_THREAD`)."""
        return sum(t.dropped for t in self.threads)

    def release(self) -> None:
        """Drop the slices (once written): a thread's local slot may keep its emptied list a while."""
        for thread in self.threads:
            thread.slices = []

    def add(self, name: str, start_ns: int, args: dict[str, Any]) -> None:
        end_ns = time.monotonic_ns()
        mine = self.thread()
        if len(mine.slices) < MAX_SLICES_PER_THREAD:
            mine.slices.append((name, start_ns, end_ns, args))
        else:
            mine.dropped += 1


_local = threading.local()
_session: Session | None = None


def begin() -> Session:
    """Start recording into a new session (the caller, pyaclnn.profile, refuses nesting)."""
    global recording, _session
    _session = Session()
    recording = True
    return _session


def end() -> Session | None:
    """Stop recording; the session that was recording."""
    global recording, _session
    recording = False
    session, _session = _session, None
    return session


def handle_label(backend: str, handle: Any) -> str:
    """A stream, event or graph handle as the emulations name it in their device records
    (``pyaclnn.acl._handles.label``)."""
    from .acl._handles import label

    return label(handle, backend)


def stream_args(state: Any) -> dict[str, Any]:
    """The args of a slice about a pyaclnn stream (a StreamState): its label, device, name."""
    label = handle_label(state.backend, state.handle)
    session = _session
    if session is not None:
        session.stream_names[label] = state.name
    return {"stream": label, "device": state.device}


def launch(state: Any, call: Any) -> None:
    """Launch ``call`` (a ``_executors.Call``) through ``state``'s executor cache, timed."""
    start = time.monotonic_ns()
    try:
        state.executors.launch(call)
    finally:
        session = _session
        if session is not None:
            spec = call.op.spec
            args = stream_args(state)
            args["operator"] = spec.python_name
            args["api"] = spec.phase2_api
            if state.capture is not None:  # recorded into a graph, not run: its replays run it
                args["captured"] = True
            session.add(spec.python_name, start, args)


def timed(name: str, state: Any, function: Callable[..., Any], *args: Any, **extra: Any) -> Any:
    """``function(*args)``, recorded as a slice ``name`` about stream ``state`` (a StreamState,
    or None) with ``extra`` added to its args."""
    start = time.monotonic_ns()
    try:
        return function(*args)
    finally:
        session = _session
        if session is not None:
            slice_args = stream_args(state) if state is not None else {}
            slice_args.update(extra)
            session.add(name, start, slice_args)
