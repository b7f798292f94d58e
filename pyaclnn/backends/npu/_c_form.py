"""An operator's phase-1 arguments as machine words, for the compiled repeated call.

:mod:`pyaclnn._repeat` runs both phases of a repeated eager call of ``pyaclnn.ops`` from C,
without cffi: it calls phase 1 by its address with every argument passed as a ``uint64_t``
(the value sign- or zero-extended). On Linux on x86-64 and AArch64, the hosts CANN runs
on, that is the same call, register for register and stack slot for stack slot, when each
parameter is a pointer, an integer, an enum or a ``bool``: all go in general registers, then in
8-byte stack slots, and the callee reads the low bytes it declares. An operator with a
``float`` or ``double`` parameter (passed in other registers), or on another machine, has
no C form and keeps the cffi call.
"""

from __future__ import annotations

import platform
import struct
import sys
from typing import Any

from ._ffi import ffi

# Phase 1's parameters before its two out-parameters that one uint64_t word passes as the C
# call would (the compiled caller's limit).
MAX_ARGS = 24
_WORDS = frozenset(
    {
        *(f"{sign}int{bits}_t" for sign in ("", "u") for bits in (8, 16, 32, 64)),
        *(f"{sign}{name}" for sign in ("", "unsigned ") for name in ("int", "long", "long long", "short")),
        "_Bool",
        "signed char",
        "unsigned char",
    }
)
_MACHINES = frozenset({"x86_64", "aarch64"})
_STATUS = frozenset({"int32_t", "int"})
_MASK = (1 << 64) - 1


def _address(pointer: Any) -> int:
    return int(ffi.cast("uintptr_t", pointer))


class CForm:
    """How one operator's phase-1 arguments become the words of :mod:`pyaclnn._repeat`."""

    __slots__ = ("_head", "_pointers")

    def __init__(self, head: tuple[int, int], pointers: tuple[bool, ...]) -> None:
        self._head = head  # the addresses of phase 1 and phase 2
        self._pointers = pointers  # per parameter of phase 1 (out-parameters left out): a pointer

    def pack(self, args: tuple[Any, ...], stream: Any) -> bytes | None:
        """Phase 1's C arguments ``args`` (cffi pointers, None for NULL, ints) with both phases'
        addresses and ``stream``'s, as native uint64 words; None when one of them is not in a
        form the words can carry (a Python string, say, that cffi would convert per call)."""
        if len(args) != len(self._pointers):
            return None
        words = [*self._head, _address(stream), len(args)]
        for pointer, value in zip(self._pointers, args):
            if pointer:
                if value is None:
                    words.append(0)
                elif isinstance(value, ffi.CData) and ffi.typeof(value).kind in ("pointer", "array"):
                    words.append(_address(value))
                else:
                    return None
            elif type(value) is int or type(value) is bool:  # (checked for its C type: as cffi passes it)
                words.append(int(value) & _MASK)
            else:
                return None
        return struct.pack(f"={len(words)}Q", *words)

    @staticmethod
    def executor(address: int) -> Any:
        """The ``aclOpExecutor *`` at ``address``, as cffi passes it to phase 2."""
        return ffi.cast("aclOpExecutor *", address)


def c_form(first: Any, second: Any) -> CForm | None:
    """The :class:`CForm` of the operator whose phases are the cffi functions ``first`` and
    ``second``; None when a parameter type has none (see the module)."""
    linux_64 = sys.platform.startswith("linux") and platform.machine() in _MACHINES
    if not linux_64 or ffi.sizeof("void *") != 8:
        return None
    one, two = ffi.typeof(first), ffi.typeof(second)
    if one.result.cname not in _STATUS or two.result.cname not in _STATUS or one.ellipsis:
        return None
    params = one.args[:-2]
    if len(params) > MAX_ARGS or [p.kind for p in one.args[-2:]] != ["pointer", "pointer"]:
        return None
    words = ("pointer", "enum")
    if any(p.kind not in words and (p.kind != "primitive" or p.cname not in _WORDS) for p in params):
        return None
    kinds = [p.kind if p.kind == "pointer" else p.cname for p in two.args]
    if len(kinds) != 4 or kinds[0] != "pointer" or kinds[1] not in _WORDS or kinds[2:] != ["pointer"] * 2:
        return None
    return CForm((_address(first), _address(second)), tuple(p.kind == "pointer" for p in params))
