"""The one generic call path of the low-level API, for functions off the hot path.

A C function's status is the only thing every wrapper in :mod:`pyaclnn.acl`,
:mod:`pyaclnn.acl.rt` and :mod:`pyaclnn.aclnn` used to test by hand; here it is
tested once. The backends (``pyaclnn.backends._interface.Backend``) return either
a status or ``(status, *out_parameters)``; :func:`call` looks the C function up on
the backend by its C name, so the wrapper names it once, raises through the one
choke point (:func:`pyaclnn._status.check`) and returns the out-parameters:
None, the one value, or a tuple of them.

The aclnn phase-1/phase-2 wrappers, which run on every operator call, keep
their own unpacking (no name lookup, no tuple slicing) in :mod:`pyaclnn.aclnn`.
"""

from __future__ import annotations

from typing import Any

from .. import backends as _backends
from ..errors import make_error


def call(backend: str | None, api: str, *args: Any) -> Any:
    """Call C function ``api`` of ``backend`` with ``args``; raise on a failing status.

    Returns None for a function with no out-parameter, else its one out-parameter,
    else a tuple of them.
    """
    b = _backends.get(backend)
    result = getattr(b, api)(*args)
    if type(result) is not tuple:  # a bare status
        if result:
            raise make_error(result, b.aclGetRecentErrMsg(), api)
        return None
    status = result[0]
    if status:
        raise make_error(status, b.aclGetRecentErrMsg(), api)
    return result[1] if len(result) == 2 else result[1:]
