"""The registry of NumPy references: one entry per operator."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ops._headers import python_operator_name


@dataclass(frozen=True)
class TensorInfo:
    """What phase 1 knows of a tensor: its shape and dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Reference:
    """An operator's NumPy reference: its name (the C name without ``aclnn``, ``"Add"``, or the
    Python name, ``"add"``), its kernel, and for pyaclnn's own the header that declares it, the
    declaration's text and its phase-1 check (a user's reference has none: its operator is
    declared by a package's header, and CANN's checks are the device's)."""

    name: str
    kernel: Callable[..., None]
    header: str = ""
    declaration: str = ""
    check: Callable[..., None] | None = None
    dtypes: frozenset[str] = frozenset()  # the dtypes of its tensors, for the docs' table
    family: str = ""  # the module of references that holds it; "" for its kernel's module

    @property
    def module(self) -> str:
        """The family module (``"linalg"``, ...) of pyaclnn's own references, else the kernel's module."""
        if self.family:
            return self.family
        kernel: Any = self.kernel
        while isinstance(kernel, functools.partial):
            kernel = kernel.args[0] if kernel.args and callable(kernel.args[0]) else kernel.func
        return str(getattr(kernel, "__module__", "")).rsplit(".", 1)[-1]


_REFERENCES: dict[str, Reference] = {}
_lock = threading.Lock()


def register(reference: Reference) -> None:
    """Make ``reference`` the numpy backend's implementation of its operator (replacing one
    registered under the same name)."""
    with _lock:
        _REFERENCES[reference.name] = reference


def get(name: str) -> Reference | None:
    """The reference of operator ``name`` (C name without ``aclnn``), registered under that name
    or under its Python name; None if there is none."""
    found = _REFERENCES.get(name)
    return found if found is not None else _REFERENCES.get(python_operator_name(name))


def names() -> tuple[str, ...]:
    return tuple(_REFERENCES)


def headers() -> dict[str, str]:
    """``{header file name: C declarations}`` of the references that carry their declaration."""
    texts: dict[str, str] = {}
    for reference in list(_REFERENCES.values()):
        if reference.declaration:
            texts[reference.header] = texts.get(reference.header, "") + reference.declaration
    return texts
