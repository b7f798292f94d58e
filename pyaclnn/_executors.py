"""Repeatable executors of recent calls on one stream, so a repeated call skips phase 1.

A functional call with the same descriptors, parameter arrays and scalars as an
earlier call on the same stream would get the same plan from phase 1. So after
phase 1 the executor is made repeatable (``aclSetAclOpExecutorRepeatable``) and
kept here, keyed by everything phase 1 was given; the next such call runs
phase 2 on it directly. The key holds descriptor handles, and a handle always
describes the same memory, shape and dtype while it lives (the pool owns it
and caches it per block), so a hit is exactly the call phase 1 planned.

Rules that keep that true:

* Every entry is dropped, and its executor destroyed, *before* a descriptor in
  its key is destroyed (:meth:`ExecutorCache.forget`, called by the memory pool),
  so a new descriptor at a recycled address never matches an old plan.
* Only handles that outlive the entry go into a key: descriptors from the pool,
  parameter arrays from the context's cache; a call with per-call arrays is
  not cached.
* One cache per stream, used by launches under the stream's lock: an executor
  never runs on two streams or threads at once, which CANN does not promise to
  support. Dropping the entries of a destroyed descriptor takes only the
  cache's own lock, so it never waits for a stream (no lock-order cycle with
  threads whose garbage collection frees blocks inside a launch).
* An entry stays in while its executor runs: only a descriptor's destruction,
  ``set_deterministic`` or closing the stream remove entries, and none of them
  can reach a running entry (the call holds the arrays whose descriptors it
  uses; the other two wait for the stream's lock). A failed launch destroys
  the entry it ran.
* ``set_deterministic`` empties every cache (the plan may depend on it).

``PYACLNN_EXECUTOR_CACHE=0`` turns caching off (every call runs phase 1).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from . import acl
from .errors import AclError

_LIMIT = 32  # entries per stream; the oldest goes first


def enabled_by_environment() -> bool:
    """False when ``PYACLNN_EXECUTOR_CACHE`` is 0, off, false or no."""
    value = os.environ.get("PYACLNN_EXECUTOR_CACHE", "1").strip().lower()
    return value not in ("0", "off", "false", "no")


class ExecutorCache:
    """Repeatable executors of one stream: key -> (executor, workspace size).

    Launches use it under their stream's lock; its own (re-entrant) lock guards
    only its dict, so the pool can drop entries without taking stream locks.
    Executors are destroyed after the dict is updated, outside that lock.
    """

    __slots__ = ("backend", "enabled", "generation", "_entries", "_lock", "_unrepeatable")

    def __init__(self, backend: str, enabled: bool = True) -> None:
        self.backend = backend
        self.enabled = enabled
        self.generation = 0  # bumped by forget() and clear(): a plan made before may hold a dead handle
        self._entries: dict[tuple, tuple[Any, int]] = {}
        self._lock = threading.RLock()  # re-entrant: a collection inside may free descriptors
        self._unrepeatable: set[Any] = set()  # ops whose executors the runtime refused to make repeatable

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple) -> tuple[Any, int] | None:
        """The entry of ``key``, or None."""
        return self._entries.get(key)

    def put(self, key: tuple, entry: tuple[Any, int], generation: int) -> None:
        """Keep a new ``entry`` for ``key``, unless a descriptor was forgotten since ``generation``
        (read before its phase 1: the plan may hold it)."""
        dropped = []
        with self._lock:
            entries = self._entries
            if generation != self.generation or not self.enabled:
                dropped.append(entry)
            else:
                old = entries.pop(key, None)
                if old is not None:
                    dropped.append(old)
                if len(entries) >= _LIMIT:
                    dropped.append(entries.pop(next(iter(entries))))
                entries[key] = entry
        self._destroy_all(dropped)

    def discard(self, key: tuple) -> None:
        """Drop the entry of ``key`` (after a failed launch) and destroy its executor."""
        with self._lock:
            entry = self._entries.pop(key, None)
        if entry is not None:
            self.destroy(entry[0])

    def make_repeatable(self, executor: Any, op: Any) -> bool:
        """Make a fresh executor of ``op`` repeatable; False when the runtime cannot.

        After one refusal ``op`` is not tried again on this stream (an old CANN without
        the function, or an operator without a repeat mode); its executors stay
        non-repeatable and are consumed by their launch as usual.
        """
        if op in self._unrepeatable:
            return False
        try:
            acl.set_acl_op_executor_repeatable(executor, backend=self.backend)
        except AclError:
            self._unrepeatable.add(op)
            return False
        return True

    def forget(self, descriptor: Any) -> None:
        """Drop every entry whose key holds ``descriptor`` (which is about to be destroyed)."""
        with self._lock:
            self.generation += 1
            entries = self._entries
            stale = [key for key in entries if any(d is descriptor for d in key[1])]
            dropped = [entries.pop(key) for key in stale]
        self._destroy_all(dropped)

    def clear(self) -> None:
        """Destroy every executor; the caller holds the stream's lock, or is closing the stream."""
        with self._lock:
            self.generation += 1
            dropped = list(self._entries.values())
            self._entries.clear()
        self._destroy_all(dropped)

    def _destroy_all(self, entries: list[tuple[Any, int]]) -> None:
        for executor, _ in entries:
            self.destroy(executor)

    def destroy(self, executor: Any) -> None:
        try:
            acl.destroy_acl_op_executor(executor, backend=self.backend)
        except AclError:
            pass  # nothing more can be done with it; the error that brought us here says more
