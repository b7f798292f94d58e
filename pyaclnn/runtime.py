"""Pythonic runtime over the low-level API: contexts, streams, events, device arrays, launches.

The runtime layer of pyaclnn, in modules by job:

* :mod:`pyaclnn._context`: per-backend process state (initialisation, device
  binding, cached parameter arrays, shutdown), :func:`finalize`,
  :func:`synchronize`, :func:`set_deterministic`;
* :mod:`pyaclnn._stream`: :class:`Stream` and :class:`Event`;
* :mod:`pyaclnn._array`: :class:`DeviceArray`, :func:`to_device`, :func:`empty`, :func:`zeros`;
* :mod:`pyaclnn._pool`: the stream-ordered memory pool;
* :mod:`pyaclnn._executors`: the per-stream executor cache and the launch protocol of a call's two phases;
* :mod:`pyaclnn._launch`: :class:`Launch`, the owner of one functional call's lifetimes.

Execution is asynchronous as on the device: a call on DeviceArrays queues its
work on a stream and returns; reading the result waits.
"""

from __future__ import annotations

from ._array import DeviceArray, empty, to_device, zeros
from ._context import context, finalize, memory_pool, set_deterministic, synchronize
from ._launch import Launch
from ._stream import Event, Stream, default_stream

__all__ = [
    "DeviceArray",
    "Event",
    "Launch",
    "Stream",
    "context",
    "default_stream",
    "empty",
    "finalize",
    "memory_pool",
    "set_deterministic",
    "synchronize",
    "to_device",
    "zeros",
]
