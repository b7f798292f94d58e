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

import contextlib
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from . import _executors, aclnn
from . import backends as _backends
from ._operators import Operator
from ._optable import OperatorSpec, Param
from .ops import _types
from .ops._headers import Catalogue, Declaration, header_folder
from .ops._vendors import Layered, Vendor, VendorError, check_vendor, environment_vendors

_lock = threading.Lock()
_catalogues: dict[str, Layered] = {}
_operators: dict[tuple[str, str], Operator] = {}
# (backend, C name) -> the backend's runner of the operator on host arrays at once, or None
_at_once: dict[tuple[str, str], Callable[..., Any] | None] = {}
_loaded: list[Vendor] = []  # pyaclnn.ops.load's folders, in the order given


def active_backend() -> str:
    """The name of the active backend ("npu" or "numpy")."""
    return _backends.active_name()


def catalogue(backend: str | None = None) -> Layered:
    """The operators ``backend`` (the active one by default) can be asked for: the custom
    packages CANN would find, those given to :func:`load`, then the built-in operators.

    Raises
    ------
    pyaclnn.ops.HeaderError
        When the npu backend's CANN home holds no operator headers.
    """
    b = _backends.get(backend)
    found = _catalogues.get(b.name)
    if found is None:
        source = b.operator_headers()
        home = source if isinstance(source, Path) else None
        builtin = Catalogue(header_folder(source) if isinstance(source, Path) else dict(source))
        with _lock:
            found = _catalogues.get(b.name)
            if found is None:
                found = _catalogues[b.name] = Layered([*environment_vendors(home), *_loaded], builtin)
    return found


def load(folder: Path, outputs: dict[str, tuple[str, ...]], backend: str | None = None) -> list[str]:
    """Add the custom operator package ``folder`` behind the packages found so far and ahead of the
    built-in operators, for every backend; the C names of the operators it declares (none when
    it was there already). ``backend`` (the active one by default) opens its library now, if it
    runs libraries (the numpy backend reads headers and prototypes only).

    Raises
    ------
    pyaclnn.ops.VendorError
        For a folder with neither headers nor a library, or a library that does not open.
    """
    check_vendor(folder)
    vendor = Vendor(folder, "pyaclnn.ops.load", outputs)
    b = _backends.get(backend)
    if vendor.library.is_file():
        try:
            b.operator_library(vendor.library)
        except OSError as exc:
            raise VendorError(f"{vendor.library} does not open: {exc}") from None
    with _lock:
        if any(v.folder.resolve() == folder.resolve() for v in _loaded):
            return []
        _loaded.append(vendor)
        catalogues = list(_catalogues.values())
        _operators.clear()  # an operator of the package may shadow one already made
        _at_once.clear()
    added = [name for c in catalogues for name in c.add(vendor)]
    if not catalogues:
        added = [f"aclnn{n}" for n in Catalogue(vendor.headers).index()] if vendor.headers.is_dir() else []
    return list(dict.fromkeys(added))


def operator(declaration: Declaration, backend: str | None = None) -> Operator:
    """The record :class:`~pyaclnn._launch.Launch` launches for ``declaration`` on ``backend``
    (made once per backend and operator).

    Raises
    ------
    LookupError
        When the backend cannot run it: no library exports it (npu), no reference (numpy).
    """
    # The usual call finds it by the name alone: the backend object is needed only to make it.
    found = _operators.get((backend or _backends.active_name(), declaration.name))
    if found is None:
        b = _backends.get(backend)
        key = (b.name, declaration.name)
        phase1, phase2, once = aclnn.operator_phases(declaration, b.name)
        params = tuple(Param(p.c.name, p.kind, p.python_name) for p in _types.parameters(declaration))
        spec = OperatorSpec(declaration.name, _types.python_operator_name(declaration.name), params)
        make_c_form = getattr(b, "operator_c_form", None)  # (the npu backend's alone)
        made = Operator(spec, phase1, phase2, once, make_c_form(declaration) if make_c_form else None)
        with _lock:
            found = _operators.setdefault(key, made)
    return found


def unavailable(declaration: Declaration, backend: str | None = None) -> str | None:
    """Why ``backend`` cannot run ``declaration`` (no library exports both phases, no NumPy
    reference); None when it can."""
    try:
        operator(declaration, backend)
    except LookupError as exc:
        return str(exc.args[0]) if exc.args else type(exc).__name__
    return None


def forget(backend: str) -> None:
    """Drop the operator records of ``backend`` (its libraries or references changed), and what
    the streams' caches keep of them (the eager calls' records hold the operators)."""
    with _lock:
        for key in [k for k in _operators if k[0] == backend]:
            del _operators[key]
        for key in [k for k in _at_once if k[0] == backend]:
            del _at_once[key]
    _executors.clear_all(backend)


def at_once(declaration: Declaration) -> Callable[..., Any] | None:
    """The active backend's runner of ``declaration`` on host arrays, now, on the calling thread
    (the numpy backend's ``operator_at_once``: its NumPy reference); None where there is none
    (made once per backend and operator, dropped with the operator records)."""
    try:
        return _at_once[(_backends.active_name(), declaration.name)]
    except KeyError:
        pass
    b = _backends.get(None)
    key = (b.name, declaration.name)
    make = getattr(b, "operator_at_once", None)
    made = make(declaration) if make is not None else None
    with _lock:
        return _at_once.setdefault(key, made)


def waited_at_once() -> AbstractContextManager[None]:
    """A block whose launches the calling thread waits for before the block ends (a call on NumPy
    arrays, whose outputs are read back): the active backend may skip waking the threads that
    would otherwise run them (the numpy backend's streams); nothing elsewhere."""
    make = getattr(_backends.get(None), "waited_at_once", None)
    return make() if make is not None else contextlib.nullcontext()
