"""The one reader of pyaclnn's environment variables (``PYACLNN_*``), and their checks.

Every variable is read through one of the functions below, where it is used
(some at every call: :func:`text` is ``os.environ.get`` and a strip, 0.25 us
for a set variable). A value is stripped; unset or empty means the default. A
malformed value is never ignored silently: it is warned about once per
variable and value (:class:`EnvironmentWarning`, naming the variable, the value
and what it accepts) and the default is used, except where a wrong guess would
be worse than stopping (:func:`choice` with ``strict``: ``PYACLNN_BACKEND``),
which raises ValueError.

A shared fact (docs/architecture.md): every layer may read it, and it calls
into none.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TypeVar

from . import _warn

_T = TypeVar("_T")
_warned: set[tuple[str, str]] = set()
_lock = threading.Lock()

#: The spellings of a switch (:func:`flag`), lower-case.
_TRUE = ("1", "on", "true", "yes")
_FALSE = ("0", "off", "false", "no")


class EnvironmentWarning(RuntimeWarning):
    """A ``PYACLNN_*`` variable has a value pyaclnn does not accept; the default is used."""


def text(name: str) -> str:
    """The value of ``name``, stripped; "" when unset. For variables any text is right for
    (paths), and the fast read of the others."""
    return os.environ.get(name, "").strip()


def malformed(name: str, value: str, accepts: str, default: object) -> None:
    """Warn (once per ``name`` and ``value``) that ``value`` is not what ``name`` accepts."""
    key = (name, value)
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    # At the user's line that read it first (a variable is read at many depths, or at import).
    _warn.warn(f"{name}={value!r} is ignored: {name} accepts {accepts}; using {default}", EnvironmentWarning)


def integer(
    name: str, default: int, minimum: int | None = 0, maximum: int | None = None, meaning: str = ""
) -> int:
    """An integer from ``minimum`` to ``maximum`` (no bound where None); else ``default`` (warned,
    as ``meaning`` if given: what the caller does for ``default``)."""
    value = text(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    low = minimum is not None and number is not None and number < minimum
    if number is None or low or (maximum is not None and number > maximum):
        bounds = (
            "an integer"
            if minimum is None and maximum is None
            else f"an integer >= {minimum}"
            if maximum is None
            else f"an integer <= {maximum}"
            if minimum is None
            else f"an integer from {minimum} to {maximum}"
        )
        malformed(name, value, bounds, meaning or default)
        return default
    return number


def microseconds(name: str) -> float:
    """A number of microseconds >= 0 (``PYACLNN_EMU_KERNEL_US``); else 0 (warned)."""
    value = text(name)
    if not value:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):  # NaN fails too
        malformed(name, value, "a number of microseconds >= 0", 0)
        return 0.0
    return number


def flag(name: str, default: bool) -> bool:
    """A switch: 1, on, true, yes or 0, off, false, no (any case); else ``default`` (warned)."""
    value = text(name)
    if not value:
        return default
    lower = value.lower()
    if lower in _TRUE:
        return True
    if lower in _FALSE:
        return False
    malformed(name, value, "1, on, true, yes or 0, off, false, no", int(default))
    return default


def choice(name: str, choices: Mapping[str, _T], default: _T, strict: bool = False) -> _T:
    """The meaning in ``choices`` of the value of ``name`` (lower-cased); ``default`` when unset.

    A value not among ``choices`` is warned about and gives ``default``, or raises
    ValueError naming the variable and the choices if ``strict``.
    """
    value = text(name)
    if not value:
        return default
    found = choices.get(value.lower(), _MISSING)
    if found is not _MISSING:
        return found  # type: ignore[return-value]
    names = list(choices)
    accepts = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    if strict:
        raise ValueError(f"{name} must be {accepts}, got {value!r}")
    malformed(name, value, accepts, next((k for k, v in choices.items() if v == default), default))
    return default


_MISSING = object()
