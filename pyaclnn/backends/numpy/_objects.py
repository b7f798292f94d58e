"""Descriptor, array, stream and executor objects of the numpy backend.

Each is a plain Python object; a per-kind registry of live objects lets the
backend tell a live handle from a destroyed, foreign or made-up one and answer
with a status instead of misbehaving.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

_O = TypeVar("_O")


@dataclass(eq=False)
class Tensor:
    shape: tuple[int, ...]
    data_type: int
    strides: tuple[int, ...]
    offset: int
    format: int
    storage_dims: tuple[int, ...]
    data: int  # device address of the storage base
    # What phase 1 tells the references of it (a TensorInfo), made at its first launch: a
    # descriptor never changes, and a cached one is launched again and again.
    info: Any = field(default=None, repr=False)


_V = TypeVar("_V", int, bool)


@dataclass(eq=False)
class _Values(Generic[_V]):
    """What aclIntArray and aclBoolArray hold: the values copied at creation."""

    values: tuple[_V, ...]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[_V]:
        return iter(self.values)

    def __getitem__(self, i: int) -> _V:
        return self.values[i]


class IntArray(_Values[int]):
    """An aclIntArray."""


class BoolArray(_Values[bool]):
    """An aclBoolArray."""


@dataclass(eq=False)
class FloatArray:
    """An aclFloatArray: float32 values copied at creation, as Python floats."""

    values: tuple[float, ...]


@dataclass(eq=False)
class Scalar:
    """An aclScalar: its value copied at creation, as a NumPy scalar of its data type."""

    value: Any
    data_type: int


@dataclass(eq=False)
class HandleList:
    """An aclTensorList or aclScalarList: the handles it was made of, which it owns (destroying
    the list destroys them, as in CANN)."""

    items: tuple[Any, ...]


@dataclass(eq=False)
class Stream:
    device: int  # the device current when the stream was made
    worker: Any = None  # its _streams.Worker


@dataclass(eq=False)
class Executor:
    op: str  # C name of the phase-2 function that may run it
    # Called by phase 2 with a view resolver: resolves the tensors' memory now
    # and returns the kernel call, which holds those views and nothing else.
    bind: Callable[[Any], Callable[[], None]]
    workspace_size: int
    repeatable: bool = False
    # A repeatable executor's last binding, for phase 2 to reuse while nothing it
    # depends on changed: (workspace, heap generation, worker, kernel call, allocations).
    bound: tuple[int, int, Any, Callable[[], None], tuple[Any, ...]] | None = None


@dataclass
class Registry:
    """Live objects of one kind, safe to use from several threads."""

    kind: str
    _objects: dict[int, object] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, obj: _O) -> _O:
        with self._lock:
            self._objects[id(obj)] = obj
        return obj

    def is_live(self, obj: object) -> bool:
        # One dict look-up is atomic (the GIL): no lock, on every handle of every phase 1.
        return self._objects.get(id(obj)) is obj

    def remove(self, obj: object) -> bool:
        """Forget ``obj``; False when it was not live (double destroy, foreign handle)."""
        with self._lock:
            if self._objects.get(id(obj)) is not obj:
                return False
            del self._objects[id(obj)]
            return True

    def values(self) -> list[object]:
        """The live objects, a snapshot."""
        with self._lock:
            return list(self._objects.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)
