"""Operators read off headers as the runtime launches them: the catalogue of each backend and the
operator records of ``pyaclnn.ops``.

A backend says where its operators are declared
(:meth:`~pyaclnn.backends._interface.Backend.operator_headers`: the npu backend's
CANN home, the numpy backend's NumPy references); the catalogue of that source is
read lazily, once per backend. An operator record (:class:`pyaclnn._operators.Operator`)
is what :class:`~pyaclnn._launch.Launch` launches for the four crafted operators too:
its parameters with their Python names, and its two phases from the low-level API.
"""

from __future__ import annotations

import threading
from pathlib import Path

from . import aclnn
from . import backends as _backends
from ._operators import Operator
from ._optable import OperatorSpec, Param
from .ops import _types
from .ops._headers import Catalogue, Declaration, header_folder

_lock = threading.Lock()
_catalogues: dict[str, Catalogue] = {}
_operators: dict[tuple[str, str], Operator] = {}


def active_backend() -> str:
    """The name of the active backend ("npu" or "numpy")."""
    return _backends.active_name()


def catalogue(backend: str | None = None) -> Catalogue:
    """The operators ``backend`` (the active one by default) can be asked for.

    Raises
    ------
    pyaclnn.ops.HeaderError
        When the npu backend's CANN home holds no operator headers.
    """
    b = _backends.get(backend)
    found = _catalogues.get(b.name)
    if found is None:
        source = b.operator_headers()
        made = Catalogue(header_folder(source) if isinstance(source, Path) else dict(source))
        with _lock:
            found = _catalogues.setdefault(b.name, made)
    return found


def operator(declaration: Declaration, backend: str | None = None) -> Operator:
    """The record :class:`~pyaclnn._launch.Launch` launches for ``declaration`` on ``backend``
    (made once per backend and operator).

    Raises
    ------
    LookupError
        When the backend cannot run it: no library exports it (npu), no reference (numpy).
    """
    b = _backends.get(backend)
    key = (b.name, declaration.name)
    found = _operators.get(key)
    if found is None:
        phase1, phase2 = aclnn.operator_phases(declaration, b.name)
        params = tuple(Param(p.c.name, p.kind, p.python_name) for p in _types.parameters(declaration))
        spec = OperatorSpec(declaration.name, _types.python_operator_name(declaration.name), params)
        made = Operator(spec, phase1, phase2)
        with _lock:
            found = _operators.setdefault(key, made)
    return found


def forget(backend: str) -> None:
    """Drop what was read for ``backend`` (its libraries or references changed)."""
    with _lock:
        _catalogues.pop(backend, None)
        for key in [k for k in _operators if k[0] == backend]:
            del _operators[key]
