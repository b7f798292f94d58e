"""Whether the npu backend can run here: load, initialise, count devices, and say why not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from ... import errors
from ...constants import (
    ACL_ERROR_REPEAT_INITIALIZE,
    ACL_ERROR_UNINITIALIZE,
    ACL_SUCCESS,
)
from ._backend import NpuBackend
from ._discovery import LibraryNotFoundError


@dataclass(frozen=True)
class ProbeResult:
    """Whether the npu backend is usable here, and why not.

    Attributes
    ----------
    ok : bool
        True when the libraries load and at least one device is visible.
    reason : str
        Empty when ``ok``; else what failed and how to fix it.
    home : str | None
        The CANN install root used.
    libraries : tuple[str, ...]
        Paths of the opened libraries, in load order.
    device_count : int | None
        What ``aclrtGetDeviceCount`` reported (None if it could not be asked).
    soc_name : str | None
        ``aclrtGetSocName()``, e.g. ``"Ascend910B1"``.
    missing_functions : tuple[str, ...]
        Declared C functions no opened library exports.
    """

    ok: bool
    reason: str
    home: str | None = None
    libraries: tuple[str, ...] = ()
    device_count: int | None = None
    soc_name: str | None = None
    missing_functions: tuple[str, ...] = ()


class _Found(TypedDict):
    """What ProbeResult reports of a loaded CANN, whatever the devices say."""

    home: str
    libraries: tuple[str, ...]
    missing_functions: tuple[str, ...]


def probe(environ: dict[str, str] | None = None) -> ProbeResult:
    """Try the npu backend without raising: load CANN, count devices, name the SoC.

    ``aclrtGetDeviceCount`` is asked first without ``aclInit``; only if it
    answers ``ACL_ERROR_UNINITIALIZE`` is ``aclInit(NULL)`` called (a repeat
    init, 100002, counts as success) and the count asked again.

    Returns
    -------
    ProbeResult
        Never raises; failures are described in ``reason``.
    """
    try:
        backend = NpuBackend(environ)
    except LibraryNotFoundError as exc:
        return ProbeResult(False, str(exc))
    except Exception as exc:  # noqa: BLE001 -- a broken install must not break backend selection
        return ProbeResult(False, f"loading CANN failed: {type(exc).__name__}: {exc}")
    found: _Found = {
        "home": str(backend.home),
        "libraries": tuple(str(p) for p in backend.libraries),
        "missing_functions": tuple(sorted(backend.missing_functions)),
    }
    try:
        status, count = backend.aclrtGetDeviceCount()
        if status == ACL_ERROR_UNINITIALIZE:
            init = backend.aclInit(None)
            if init not in (ACL_SUCCESS, ACL_ERROR_REPEAT_INITIALIZE):
                return ProbeResult(False, _failed("aclInit", init, backend), **found)
            status, count = backend.aclrtGetDeviceCount()
        if status != ACL_SUCCESS:
            return ProbeResult(False, _failed("aclrtGetDeviceCount", status, backend), **found)
        soc = backend.aclrtGetSocName() if count else None
    except Exception as exc:  # noqa: BLE001 -- probe never raises
        return ProbeResult(False, f"querying the devices failed: {type(exc).__name__}: {exc}", **found)
    if count < 1:
        return ProbeResult(
            False,
            "CANN loaded but aclrtGetDeviceCount reports no NPU device (is the driver installed?)",
            device_count=count,
            **found,
        )
    return ProbeResult(True, "", device_count=count, soc_name=soc, **found)


def _failed(api: str, status: int, backend: NpuBackend) -> str:
    try:
        message = backend.aclGetRecentErrMsg()
    except Exception:  # noqa: BLE001 -- reporting one failure must not raise another
        message = ""
    return str(errors.make_error(status, message, api))
