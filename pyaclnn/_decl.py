"""The C declarations in ``include/decl``: where they are and what they define.

They are the one source of truth for prototypes, enum values and status codes.
cffi reads them verbatim (npu backend); everything else derives its constants
from them here, so no value is typed twice.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import NamedTuple

#: Declaration files in the order cffi's ``cdef`` must read them.
DECL_FILES = (
    "acl_types.h",
    "acl_status.h",
    "acl_runtime.h",
    "acl_prof.h",
    "aclnn_meta.h",
    "aclnn_ops.h",
    "emulator.h",
)
#: Declaration files whose enums and ``#define`` values are constants (acl_status.h: the codes).
CONSTANT_FILES = ("acl_types.h", "acl_prof.h")

# Decimal, or hex with C's unsigned/long suffixes (acl_prof.h: ``0x0001ULL``).
_DEFINE = re.compile(r"^#define\s+(\w+)\s+(-?\d+|0[xX][0-9a-fA-F]+)[uUlL]*\s*$", re.MULTILINE)
_ENUM = re.compile(r"typedef\s+enum\s*\{(?P<body>[^}]*)\}\s*(?P<name>\w+)\s*;", re.DOTALL)
_ENUMERATOR = re.compile(r"(\w+)\s*=\s*(0[xX][0-9a-fA-F]+|-?\d+)")
_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_PROTOTYPE = re.compile(
    r"^(?P<result>[\w \*]+?)\s*\b(?P<name>\w+)\s*\((?P<params>[^()]*)\)\s*;", re.MULTILINE
)


@functools.cache
def include_dir() -> Path:
    """Directory holding ``decl/``: package data when installed, else the source tree."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "include", here.parent / "include"):
        if (candidate / "decl" / DECL_FILES[0]).is_file():
            return candidate
    raise FileNotFoundError(
        f"pyaclnn's C declarations are missing: looked for decl/{DECL_FILES[0]} under "
        f"{here / 'include'} and {here.parent / 'include'}; reinstall pyaclnn"
    )


@functools.cache
def read(name: str) -> str:
    """Text of one declaration file, comments removed (cffi needs none of them)."""
    return _COMMENT.sub("", (include_dir() / "decl" / name).read_text(encoding="utf-8"))


@functools.cache
def status_codes() -> dict[str, int]:
    """Every ``#define NAME <int>`` of acl_status.h, in file order."""
    return {name: int(value) for name, value in _DEFINE.findall(read("acl_status.h"))}


def _int(text: str) -> int:
    return int(text, 16) if text[:2] in ("0x", "0X") else int(text)


@functools.cache
def enums(file: str | None = None) -> dict[str, dict[str, int]]:
    """``{enum type name: {enumerator: value}}`` of ``file``, else of every file of CONSTANT_FILES."""
    return {
        match["name"]: {k: _int(v) for k, v in _ENUMERATOR.findall(match["body"])}
        for name in ((file,) if file else CONSTANT_FILES)
        for match in _ENUM.finditer(read(name))
    }


@functools.cache
def flags(file: str = "acl_types.h") -> dict[str, int]:
    """Every ``#define NAME <int>`` of ``file``: acl_types.h's flag values such as ``ACL_EVENT_SYNC``,
    acl_prof.h's data-type bits such as ``ACL_PROF_TASK_TIME``."""
    return {name: _int(value) for name, value in _DEFINE.findall(read(file))}


class Prototype(NamedTuple):
    """One C function as include/decl declares it."""

    result: str  # the result type, e.g. "aclError" or "const char *"
    name: str
    params: tuple[str, ...]  # each parameter as written, "const int64_t *viewDims"; () for (void)
    file: str  # the declaration file


@functools.cache
def prototypes() -> dict[str, Prototype]:
    """Every function of the declaration files, by name, in declaration order.

    The one reading of the prototypes: the npu backend (parameter names,
    out-parameters), the generated backend interface and the tests take them
    from here; the tests check that cffi parses the same functions.
    """
    return {p.name: p for file in DECL_FILES for p in parse_prototypes(read(file), file)}


def parse_prototypes(text: str, file: str = "") -> list[Prototype]:
    """The function prototypes of C declaration ``text`` (one per ``result name(params);``)."""
    found = []
    for m in _PROTOTYPE.finditer(text):
        params = m["params"].strip()
        split = () if params in ("", "void") else tuple(p.strip() for p in params.split(","))
        found.append(Prototype(m["result"].strip(), m["name"], split, file))
    return found


def constant(name: str) -> int:
    """Value of a status code, flag or enumerator by its C name."""
    for table in (status_codes(), *(flags(file) for file in CONSTANT_FILES)):
        if name in table:
            return table[name]
    for members in enums().values():
        if name in members:
            return members[name]
    raise KeyError(f"{name} is not declared in include/decl")
