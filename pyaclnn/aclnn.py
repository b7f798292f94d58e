"""Low-level API of the four aclnn operators, two phases each, plus aclnnInit/aclnnFinalize.

Phase 1 (``*_get_workspace_size``) checks the arguments and returns
``(workspace_size, executor)``; phase 2 launches the executor on a stream and
consumes it unless it was made repeatable. ``executor`` is None when phase 1
found nothing to do (empty tensors); phase 2 then needs workspace_size 0 and
does nothing. Failures raise :class:`pyaclnn.AclnnError` with the status, its
name and the reason.

The wrappers are made from the backend interface
(:class:`pyaclnn.backends._interface.Backend`, generated from ``include/decl``),
so each C prototype is written once: a wrapper takes the C arguments
positionally, in the C order and under their snake_case names (its
``__signature__`` shows them), plus the keyword ``backend``.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol

from . import backends as _backends
from ._status import check as _check
from .acl._call import call as _call
from .backends._interface import Backend

__all__ = [
    "init",
    "finalize",
    "max_pool3d_with_argmax_get_workspace_size",
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward_get_workspace_size",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d_get_workspace_size",
    "grid_sampler3d",
    "grid_sampler3d_backward_get_workspace_size",
    "grid_sampler3d_backward",
]


# The two phases run on every operator call: one wrapper each, testing the status
# itself and calling _check only on failure (no name lookup or tuple slicing of acl._call).


class _Phase1(Protocol):
    def __call__(self, *args: Any, backend: str | None = None) -> tuple[int, Any]: ...


class _Phase2(Protocol):
    def __call__(
        self, workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
    ) -> None: ...


def _signature(api: str) -> inspect.Signature:
    """The C parameters of ``api`` as the backend interface has them, then ``*, backend=None``."""
    parameters = list(inspect.signature(getattr(Backend, api)).parameters.values())[1:]  # without self
    backend = inspect.Parameter(
        "backend", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="str | None"
    )
    return inspect.Signature([*parameters, backend])


def _phase1(api: str, note: str = "") -> _Phase1:
    """The wrapper of phase 1 ``api``: check the arguments, return ``(workspace_size, executor)``."""

    def get_workspace_size(*args: Any, backend: str | None = None) -> tuple[int, Any]:
        b = _backends.get(backend)
        status, workspace_size, executor = getattr(b, api)(*args)
        if status:
            _check(b, status, api)
        return workspace_size, executor

    get_workspace_size.__doc__ = f"``{api}``{note}: ``(workspace_size, executor)``."
    get_workspace_size.__signature__ = _signature(api)  # type: ignore[attr-defined]
    return get_workspace_size


def _phase2(api: str) -> _Phase2:
    """The wrapper of phase 2 ``api``: launch ``executor`` on ``stream`` with the workspace."""

    def launch(
        workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
    ) -> None:
        b = _backends.get(backend)
        status = getattr(b, api)(workspace, workspace_size, executor, stream)
        if status:
            _check(b, status, api)

    launch.__doc__ = f"``{api}``: launch ``executor`` (from phase 1) on ``stream``."
    return launch


def init(config_path: str | None = None, *, backend: str | None = None) -> None:
    """``aclnnInit``."""
    _call(backend, "aclnnInit", config_path)


def finalize(*, backend: str | None = None) -> None:
    """``aclnnFinalize``."""
    _call(backend, "aclnnFinalize")


_INT_ARRAYS = " (kernel_size, stride, padding, dilation from ``acl.create_int_array``)"
max_pool3d_with_argmax_get_workspace_size = _phase1("aclnnMaxPool3dWithArgmaxGetWorkspaceSize", _INT_ARRAYS)
max_pool3d_with_argmax = _phase2("aclnnMaxPool3dWithArgmax")
max_pool3d_with_argmax_backward_get_workspace_size = _phase1(
    "aclnnMaxPool3dWithArgmaxBackwardGetWorkspaceSize", _INT_ARRAYS
)
max_pool3d_with_argmax_backward = _phase2("aclnnMaxPool3dWithArgmaxBackward")
grid_sampler3d_get_workspace_size = _phase1("aclnnGridSampler3DGetWorkspaceSize")
grid_sampler3d = _phase2("aclnnGridSampler3D")
grid_sampler3d_backward_get_workspace_size = _phase1(
    "aclnnGridSampler3DBackwardGetWorkspaceSize", " (output_mask from ``acl.create_bool_array``)"
)
grid_sampler3d_backward = _phase2("aclnnGridSampler3DBackward")

for _name in __all__:  # the made wrappers go by their Python names (help(), pickling)
    globals()[_name].__name__ = globals()[_name].__qualname__ = _name
del _name
