"""The repeated eager call of ``pyaclnn.ops`` in compiled form.

A call of ``pyaclnn.ops`` like an earlier one on the same stream (same operator and
non-tensor arguments, the same arrays described as before, each ordered for the
stream) is taken by :func:`pyaclnn._launch.eager` from the record the earlier call
left. :func:`module` gives a CPython extension that does that whole path in C: the
tests of each array, the key, the look-up, both phases called by address (no cffi,
the GIL released around them), the count of queued work and the marks of the written
arrays. It does exactly what the Python path does, in the same order and excluding
the same threads (the stream's lock; the marks' lock when another thread holds it, the
GIL otherwise); whatever it does not handle it gives back to Python before anything
happened, or hands to a Python function under the stream's lock (both named when
:func:`pyaclnn._launch._compiled` configures it).

How it is built and opened
--------------------------
``pyaclnn_repeat.c`` (package data) is compiled on first use, silently (a third of a
second), into the cache directory of the compiled kernels, under a name that holds a
hash of the source, the compiler command, the Python version and the machine, and
imported from there. It needs a C compiler and the Python headers (``Python.h``);
without either, or with ``PYACLNN_COMPILED_CALLS=0`` (read when the first record is
made), the Python path runs, with the same results.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .. import _compile, _env

SOURCE = Path(__file__).with_name("pyaclnn_repeat.c")
ABI = 1  # PYACLNN_REPEAT_ABI of the C source
CFLAGS = ("-O2", "-std=c11", "-fPIC", "-shared", "-Wall", "-Wextra")

_lock = threading.Lock()
_state: dict[str, Any] = {}  # "module": the module or None, "reason": why it is None


def _flags() -> tuple[str, ...]:
    include = sysconfig.get_paths()["include"]
    return (*CFLAGS, f"-I{include}")


def build(directory: Path | None = None) -> Path:
    """Compile the extension into ``directory`` (default: the cache), unless already there.

    Raises
    ------
    pyaclnn._compile.NoCompiler
        No compiler on PATH, or ``$CC`` is not on it, or no ``Python.h``.
    pyaclnn._compile.CompilerFailed
        The compiler failed (its output in the message).
    """
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        raise _compile.NoCompiler(f"no Python headers (no {include / 'Python.h'})")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return _compile.build(SOURCE, "_pyaclnn_repeat", suffix, _flags(), directory, announce=None)


def _open(path: Path) -> ModuleType:
    # Imported under its own name from the file: the cache is not on sys.path.
    loader = importlib.machinery.ExtensionFileLoader("_pyaclnn_repeat", str(path))
    spec = importlib.util.spec_from_file_location("_pyaclnn_repeat", path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    if module.abi() != ABI:
        raise ImportError(f"{path} has interface {module.abi()}, not {ABI}")
    return module


def module() -> ModuleType | None:
    """The compiled module, built and opened on the first call (once per process), or None when
    the Python path must run (see :func:`status`)."""
    try:
        return _state["module"]  # type: ignore[no-any-return]
    except KeyError:
        pass
    with _lock:
        if "module" not in _state:
            found: ModuleType | None = None
            reason = ""
            if _disabled():
                reason = "PYACLNN_COMPILED_CALLS=0"
            else:
                try:
                    found = _open(build())
                except Exception as exc:  # any failure leaves the Python path in charge, with the reason
                    reason = f"{type(exc).__name__}: {exc}"
            _state["reason"] = reason
            _state["module"] = found
    return _state["module"]  # type: ignore[no-any-return]


def _disabled() -> bool:
    return not _env.flag("PYACLNN_COMPILED_CALLS", True)


def status(load: bool = False) -> dict[str, Any]:
    """Whether the compiled module is in use (``active``) and, if not, why (``reason``: empty
    before the first record was made, unless ``load`` builds and opens it now)."""
    if load:
        module()
    return {"active": _state.get("module") is not None, "reason": _state.get("reason", "")}


def forget() -> None:
    """Forget the outcome of the first call (tests: as a new process would start)."""
    with _lock:
        _state.clear()
        sys.modules.pop("_pyaclnn_repeat", None)
