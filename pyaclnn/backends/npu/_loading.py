"""Loading the npu backend's libraries: once per process, under a lock, on first use.

:func:`load` opens the libraries :func:`.discover` chose, in dependency order
(runtime, libnnopbase, operator libraries, then the optional profiler library
libmsprofiler.so when present and loadable) with ``RTLD_NOW | RTLD_GLOBAL``,
then binds every function of ``include/decl`` to the first library that
exports it. A function no library exports is bound to a stub: calling it
raises :class:`pyaclnn.errors.AclError` (:class:`~pyaclnn.errors.AclnnError`
for ``aclnn*``) with status ``ACL_ERROR_API_NOT_SUPPORT`` (200001) and a
message naming the function and every library searched. Everything else
still works: a CANN without the computer-vision operator package still runs
max-pool.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import errors
from ...constants import (
    ACL_ERROR_API_NOT_SUPPORT,
)
from ._discovery import Candidate, Discovery, LibraryNotFoundError, discover
from ._ffi import ffi, function_names

_LOAD_HINT = (
    "CANN's libraries are present but could not be opened; the NPU driver libraries "
    "(/usr/local/Ascend/driver/lib64/driver and .../common) must be on LD_LIBRARY_PATH or in "
    "ld.so.conf: source CANN's set_env.sh, or use PYACLNN_BACKEND=numpy."
)


@dataclass(frozen=True)
class Loaded:
    """The opened libraries and the bound functions (one per process).

    Attributes
    ----------
    candidate : Candidate
        The home the libraries came from.
    libraries : tuple[tuple[Path, Any], ...]
        ``(path, cffi lib)`` per opened library, in load order.
    symbols : types.SimpleNamespace
        One attribute per declared C function: the cffi function, or a stub
        that raises (see the module docstring).
    missing : frozenset[str]
        Declared functions no library exports.
    """

    candidate: Candidate
    libraries: tuple[tuple[Path, Any], ...]
    symbols: types.SimpleNamespace
    missing: frozenset[str] = field(default_factory=frozenset)


_lock = threading.Lock()
_loaded: Loaded | None = None


def _missing_stub(name: str, paths: Sequence[Path]) -> Any:
    searched = ", ".join(str(p) for p in paths)
    message = (
        f"{name} is not exported by any loaded CANN library (searched {searched}); "
        "this CANN install lacks the operator package or is too old for this function"
    )

    def call(*_args: Any, **_kwargs: Any) -> Any:
        raise errors.make_error(ACL_ERROR_API_NOT_SUPPORT, message, name)

    call.__name__ = call.__qualname__ = name
    return call


def _open(discovery: Discovery) -> Loaded:
    chosen = discovery.chosen
    if chosen is None:
        raise discovery.not_found_error()
    opened: list[tuple[Path, Any]] = []
    for path in chosen.libraries:
        try:
            # RTLD_GLOBAL: later libraries (and CANN's own plugins) resolve
            # their undefined symbols against the earlier ones.
            opened.append((path, ffi.dlopen(str(path), ffi.RTLD_NOW | ffi.RTLD_GLOBAL)))
        except OSError as exc:
            raise LibraryNotFoundError(
                f"CANN was found in {chosen.lib_dir} (from {chosen.source}) but {path.name} "
                f"could not be opened: {exc}\n{_LOAD_HINT}",
                discovery,
            ) from exc
    for path in chosen.optional:
        try:
            opened.append((path, ffi.dlopen(str(path), ffi.RTLD_NOW | ffi.RTLD_GLOBAL)))
        except OSError:
            pass  # optional: its functions are stubs, as when it is absent
    bound: dict[str, Any] = {}
    missing = set()
    for name in function_names():
        for _path, lib in opened:
            try:
                bound[name] = getattr(lib, name)
                break
            except AttributeError:
                continue
        else:
            bound[name] = _missing_stub(name, [p for p, _ in opened])
            missing.add(name)
    return Loaded(chosen, tuple(opened), types.SimpleNamespace(**bound), frozenset(missing))


_declared: set[str] = set()  # functions cdef'd here from operator headers (include/decl's are not)
_extra: list[tuple[Path, Any]] = []  # operator libraries opened for a generic operator
_extra_tried: set[Path] = set()


_custom: dict[Path, Any] = {}  # custom packages' libraries by path, opened RTLD_LOCAL


def custom_library(path: Path) -> Any:
    """A custom operator package's ``libcust_opapi.so``, opened once, locally (``RTLD_LOCAL``, as
    torch_npu opens them: its symbols must not interpose on the built-in operators for other
    code). OSError with the loader's message when it does not open."""
    with _lock:
        lib = _custom.get(path)
        if lib is None:
            lib = _custom[path] = ffi.dlopen(str(path), ffi.RTLD_NOW | ffi.RTLD_LOCAL)
        return lib


def _declare(name: str, prototype: str) -> None:
    """Declare C function ``name`` to cffi from ``prototype``, once (under the lock)."""
    if name not in _declared and name not in function_names():
        ffi.cdef(prototype)
        _declared.add(name)


def operator_function(loaded: Loaded, name: str, prototype: str, library: Path | None = None) -> Any:
    """The C function ``name`` of an operator header, declared to cffi from ``prototype`` (once) and
    looked up in the opened libraries, then in the other operator libraries of the home
    (``lib64/libopapi_*.so``, then ``lib64/libaclnn_*.so``: torch_npu's order), opened on demand.

    An operator of a custom package (``library``) comes from that library alone, never from
    another's.

    Raises
    ------
    LookupError
        When no library exports it; the message names every library searched.
    """
    if library is not None:
        lib = custom_library(library)
        with _lock:
            _declare(name, prototype)
        try:
            return getattr(lib, name)
        except AttributeError:
            raise LookupError(f"{name} is not exported by {library}") from None
    with _lock:
        _declare(name, prototype)
        if name in function_names():
            found = getattr(loaded.symbols, name)
            if name not in loaded.missing:
                return found
        searched = [*loaded.libraries, *_extra]
        for _path, lib in searched:
            try:
                return getattr(lib, name)
            except AttributeError:
                continue
        lib64 = loaded.candidate.home / "lib64"
        for path in [*sorted(lib64.glob("libopapi_*.so")), *sorted(lib64.glob("libaclnn_*.so"))]:
            if path in _extra_tried or any(path == p for p, _ in loaded.libraries):
                continue
            _extra_tried.add(path)
            try:
                lib = ffi.dlopen(str(path), ffi.RTLD_NOW | ffi.RTLD_GLOBAL)
            except OSError:
                continue  # a library that does not open exports nothing we can use
            _extra.append((path, lib))
            searched.append((path, lib))
            try:
                return getattr(lib, name)
            except AttributeError:
                continue
        libraries = ", ".join(str(p) for p, _ in searched) or "none"
        raise LookupError(f"{name} is not exported by any loaded CANN library (searched {libraries})")


def load(environ: dict[str, str] | None = None) -> Loaded:
    """Open CANN's libraries once per process (thread-safe) and return them.

    Parameters
    ----------
    environ : Mapping[str, str], optional
        Environment for the search (``os.environ`` by default); ignored once
        the libraries are loaded, since a process can hold only one CANN.

    Raises
    ------
    LibraryNotFoundError
        No usable home (the message lists every place searched and what each
        lacked) or a library failed to open. A failure is not cached: the
        next call searches again.
    """
    global _loaded
    loaded = _loaded
    if loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = _open(discover(environ))
            loaded = _loaded
    return loaded
