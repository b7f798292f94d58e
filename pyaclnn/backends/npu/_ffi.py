"""The one cffi FFI of the npu backend, declared from ``include/decl``.

ABI mode: cffi reads the declaration files verbatim (no compiler, no CANN
headers) and later resolves the functions in the shared libraries that
:mod:`._discovery` finds. Nothing here opens a library.
"""

from __future__ import annotations

import functools
from typing import Any

import cffi

from ... import _decl

ffi = cffi.FFI()
for _name in _decl.DECL_FILES:
    ffi.cdef(_decl.read(_name))
del _name


@functools.cache
def function_names() -> tuple[str, ...]:
    """Every function the declaration files declare, in declaration order."""
    return tuple(_decl.prototypes())


@functools.cache
def parameter_names() -> dict[str, tuple[str, ...]]:
    """C parameter names of every declared function, for error messages (cffi drops them)."""
    return {
        name: tuple(_last_word(param) for param in proto.params) for name, proto in _decl.prototypes().items()
    }


def _last_word(text: str) -> str:
    return text.rsplit(None, 1)[-1].lstrip("*")


@functools.cache
def out_parameters() -> dict[str, tuple[tuple[int, Any], ...]]:
    """``{function: ((position, pointer ctype), ...)}`` of the out-parameters of every declared function.

    The convention of include/decl: an out-parameter is a pointer that is not
    ``const`` to a number, an enum or a pointer (``int32_t *deviceId``,
    ``void **devPtr``, ``aclOpExecutor **executor``); cffi drops ``const``, so
    the declaration text decides. ``char *`` strings are never out-parameters.
    """
    outs: dict[str, tuple[tuple[int, Any], ...]] = {}
    for name, proto in _decl.prototypes().items():
        found = []
        for position, param in enumerate(proto.params):
            ctype_text = param[: len(param) - len(_last_word(param))].strip()
            if ctype_text.startswith("const ") or "*" not in ctype_text:
                continue
            ctype = ffi.typeof(ctype_text)
            if ctype.item.kind in ("primitive", "enum", "pointer") and ctype.item.cname != "char":
                found.append((position, ctype))
        outs[name] = tuple(found)
    return outs


def integer_constants() -> dict[str, int]:
    """Every ``#define`` integer and enumerator value as cffi parsed them.

    This is what cffi passes to and compares with C, independent of
    pyaclnn's own regex-based reading in :mod:`pyaclnn._decl`; the tests
    compare the two. (``dir()`` of a library object lists every name the
    declarations define; all but the functions are integer constants here.)
    """
    process = _process_lib()
    functions = _decl.prototypes()
    found = {}
    for name in dir(process):
        if name in functions:
            continue
        try:
            value = getattr(process, name)
        except AttributeError:  # a function an operator header declared, which the process lacks
            continue
        if isinstance(value, int):  # (not a function pyaclnn.ops declared since)
            found[name] = value
    return found


@functools.cache
def _process_lib() -> Any:  # Any: a cffi library object (cffi has no stubs)
    # ABI mode exposes "#define NAME <int>" on any library object; the process
    # itself (dlopen(None)) is always there and holds no CANN state.
    return ffi.dlopen(None)
