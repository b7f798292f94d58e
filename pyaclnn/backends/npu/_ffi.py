"""The one cffi FFI of the npu backend, declared from ``include/decl``.

ABI mode: cffi reads the declaration files verbatim (no compiler, no CANN
headers) and later resolves the functions in the shared libraries that
:mod:`._discovery` finds. Nothing here opens a library.
"""

from __future__ import annotations

import functools
import re

import cffi

from ... import _decl

ffi = cffi.FFI()
for _name in _decl.DECL_FILES:
    ffi.cdef(_decl.read(_name))
del _name

_PROTOTYPE = re.compile(r"\b(\w+)\s*\(([^()]*)\)\s*;")


@functools.cache
def function_names() -> tuple[str, ...]:
    """Every function the declaration files declare, in declaration order."""
    # cffi keeps its parse result in a private table; the "function " keys are
    # exactly the prototypes it will resolve by name.
    return tuple(
        key.split(" ", 1)[1] for key in ffi._parser._declarations if key.startswith("function ")
    )


@functools.cache
def parameter_names() -> dict[str, tuple[str, ...]]:
    """C parameter names of every declared function, for error messages.

    cffi drops parameter names, so they are read from the same declaration
    text cffi parsed (``void`` parameter lists give an empty tuple).
    """
    names: dict[str, tuple[str, ...]] = {}
    for decl_file in _decl.DECL_FILES:
        for func, params in _PROTOTYPE.findall(_decl.read(decl_file)):
            params = params.strip()
            if params in ("", "void"):
                names[func] = ()
            else:
                names[func] = tuple(re.findall(r"(\w+)\s*$", p.strip())[0] for p in params.split(","))
    return names


def integer_constants() -> dict[str, int]:
    """Every ``#define`` integer and enumerator value as cffi parsed them.

    This is what cffi passes to and compares with C, independent of
    pyaclnn's own regex-based reading in :mod:`pyaclnn._decl`; the tests
    compare the two.
    """
    values: dict[str, int] = {}
    process = _process_lib()
    for key in ffi._parser._declarations:  # the names only; values via public API
        kind, _, name = key.partition(" ")
        if kind == "macro":
            values[name] = int(getattr(process, name))
        elif kind == "typedef":
            ctype = ffi.typeof(name)
            if ctype.kind == "enum":
                values.update(ctype.relements)
    return values


@functools.cache
def _process_lib():
    # ABI mode exposes "#define NAME <int>" on any library object; the process
    # itself (dlopen(None)) is always there and holds no CANN state.
    return ffi.dlopen(None)
