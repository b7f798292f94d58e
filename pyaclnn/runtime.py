"""Pythonic runtime over the low-level API: contexts, streams, events, device arrays, launches.

The runtime layer of pyaclnn, in modules by job:

* :mod:`pyaclnn._context`: per-backend process state (initialisation, device
  binding, cached parameter arrays, shutdown), :func:`finalize`,
  :func:`synchronize`, :func:`set_deterministic`, devices (:class:`Device`, :func:`set_device`);
* :mod:`pyaclnn._stream`: :class:`Stream`, :class:`ExternalStream` and :class:`Event`, and the
  private state behind each stream (its lock, counts of work, workspace and executor cache);
* :mod:`pyaclnn._array`: :class:`DeviceArray`, :func:`to_device`, :func:`empty`, :func:`zeros`;
* :mod:`pyaclnn._pool`: the stream-ordered memory pool;
* :mod:`pyaclnn._executors`: the per-stream executor cache and the launch protocol of a call's two phases;
* :mod:`pyaclnn._launch`: :class:`Launch`, the owner of one functional call's lifetimes;
* :mod:`pyaclnn._interop`: :func:`from_torch` (torch_npu tensors, without importing torch).

Execution is asynchronous as on the device: a call on DeviceArrays queues its
work on a stream and returns; reading the result waits.
"""

from __future__ import annotations

from ._array import DeviceArray, empty, empty_like, to_device, zeros, zeros_like
from ._context import (
    Device,
    device_count,
    empty_cache,
    finalize,
    get_device,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_pool,
    memory_reserved,
    memory_stats,
    reset_peak_memory_stats,
    set_deterministic,
    set_device,
    synchronize,
)
from ._context import (
    context as context,
)
from ._interop import from_torch
from ._launch import Launch as Launch
from ._stream import Event, ExternalStream, Stream, current_stream, default_stream

# The names the package re-exports as its own (pyaclnn/__init__.py star-imports them); Launch and
# context (imported `as` themselves above) serve the layer above and stay names of this module only.
__all__ = [
    "Device",
    "DeviceArray",
    "Event",
    "ExternalStream",
    "Stream",
    "current_stream",
    "default_stream",
    "device_count",
    "empty",
    "empty_cache",
    "empty_like",
    "finalize",
    "from_torch",
    "get_device",
    "max_memory_allocated",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_pool",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "set_deterministic",
    "set_device",
    "synchronize",
    "to_device",
    "zeros",
    "zeros_like",
]
