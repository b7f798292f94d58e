"""The one choke point that turns a failing status into an exception."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import make_error

if TYPE_CHECKING:
    from .backends._interface import Backend, Handle


def check(backend: Backend, status: int, api: str) -> None:
    """Return if ``status`` is 0; otherwise read the recent error message once and raise."""
    if status:
        raise make_error(status, backend.aclGetRecentErrMsg(), api)


def created(backend: Backend, handle: Handle | None, api: str, status: int) -> Handle:
    """Return ``handle`` from an aclCreate* call, or raise when it is NULL."""
    if handle is None:
        raise make_error(status, backend.aclGetRecentErrMsg() or f"{api} returned NULL", api)
    return handle
