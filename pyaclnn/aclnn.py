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
:func:`bound_phase2` fixes every argument of a phase 2 once, for a repeatable
executor launched again and again (the executor cache's hits).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol

from . import _optable
from . import backends as _backends
from ._status import check as _check
from .acl._call import call as _call
from .backends._interface import Backend

__all__ = ["init", "finalize"]  # and two wrappers per operator of the table (made below)


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


_ARRAYS = {_optable.INT_ARRAY: "acl.create_int_array", _optable.BOOL_ARRAY: "acl.create_bool_array"}


def _array_note(spec: _optable.OperatorSpec) -> str:
    """`` (kernel_size, stride from ``acl.create_int_array``)``: where the array arguments come from."""
    notes = []
    for kind, maker in _ARRAYS.items():
        names = [_snake(p.c_name) for p in spec.attributes if p.kind == kind]
        if names:
            notes.append(f"{', '.join(names)} from ``{maker}``")
    return f" ({'; '.join(notes)})" if notes else ""


def _snake(c_name: str) -> str:
    return "self_" if c_name == "self" else _optable.snake_case(c_name)


def _phase1(operator: str) -> _Phase1:
    """The wrapper of phase 1 of ``operator``: check the arguments, return ``(workspace_size, executor)``."""
    spec = _optable.by_name()[operator]
    api = spec.phase1_api

    def get_workspace_size(*args: Any, backend: str | None = None) -> tuple[int, Any]:
        b = _backends.get(backend)
        status, workspace_size, executor = getattr(b, api)(*args)
        if status:
            _check(b, status, api)
        return workspace_size, executor

    get_workspace_size.__doc__ = f"``{api}``{_array_note(spec)}: ``(workspace_size, executor)``."
    get_workspace_size.__signature__ = _signature(api)  # type: ignore[attr-defined]
    get_workspace_size.__name__ = get_workspace_size.__qualname__ = f"{spec.python_name}_get_workspace_size"
    return get_workspace_size


def _phase2(operator: str) -> _Phase2:
    """The wrapper of phase 2 of ``operator``: launch ``executor`` on ``stream`` with the workspace."""
    spec = _optable.by_name()[operator]
    api = spec.phase2_api
    # backend name -> its method of ``api``: a backend object lives as long as the process, so
    # the launches of a loop skip the look-up of the backend and of its method. (backend=None,
    # the active backend, which may change, is looked up every time.)
    methods: dict[str | None, Callable[[int, int, Any, Any], int]] = {}

    def launch(
        workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
    ) -> None:
        method = methods.get(backend)
        if method is None:
            method = getattr(_backends.get(backend), api)
            if backend is not None:
                methods[backend] = method
        status = method(workspace, workspace_size, executor, stream)
        if status:
            _check(_backends.get(backend), status, api)

    launch.__doc__ = f"``{api}``: launch ``executor`` (from phase 1) on ``stream``."
    launch.__name__ = launch.__qualname__ = spec.python_name
    return launch


def bound_phase2(
    api: str, workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
) -> Callable[[], None]:
    """Phase 2 ``api`` with every argument fixed: a function of no argument that launches it.

    For a repeatable executor launched again and again with the same workspace on
    the same stream (the executor cache): the backend checks and marshals the
    arguments once, here (:meth:`~pyaclnn.backends._interface.Backend.phase2_call`),
    and each call of the result makes only the launch and the status check of the
    phase-2 wrapper (AclnnError naming ``api`` on failure).
    """
    b = _backends.get(backend)
    function, args = b.phase2_call(api, workspace, workspace_size, executor, stream)

    def launch() -> None:
        status = function(*args)
        if status:
            _check(b, status, api)

    launch.__qualname__ = launch.__name__ = f"{api}_bound"
    return launch


class _Once(Protocol):
    def __call__(
        self, args: tuple[Any, ...], workspace: int, capacity: int, stream: Any
    ) -> tuple[int, Any, bool]: ...


def operator_phases(declaration: Any, backend: str | None = None) -> tuple[_Phase1, _Phase2, _Once]:
    """The two phases of an operator read off a header (``pyaclnn.ops``), as the wrappers of the
    table's operators are: phase 1 returns ``(workspace_size, executor)``, phase 2 launches; a
    failing status raises :class:`~pyaclnn.AclnnError` naming the C function. Third, both in
    one call, for an executor used once (an eager call): ``once(args, workspace, capacity,
    stream)`` runs phase 1 on ``args``, then phase 2 on ``stream`` at once if the workspace it
    needs fits in the ``capacity`` bytes at ``workspace``, and returns ``(workspace_size,
    executor, launched)``: executor None when there is nothing to compute, launched False
    when the workspace was too small (the caller launches phase 2 with a larger one).

    ``declaration`` is the operator as its header declares it (its ``phase1_api``,
    ``phase2_api``, prototypes and parameters). LookupError when ``backend`` cannot run it.
    """
    b = _backends.get(backend)
    first, second = b.operator_phases(declaration)
    api, launch_api = declaration.phase1_api, declaration.phase2_api

    def get_workspace_size(*args: Any, backend: str | None = None) -> tuple[int, Any]:
        status, workspace_size, executor = first(*args)
        if status:
            _check(b, status, api)
        return workspace_size, executor

    def launch(
        workspace: int, workspace_size: int, executor: Any, stream: Any, *, backend: str | None = None
    ) -> None:
        status = second(workspace, workspace_size, executor, stream)
        if status:
            _check(b, status, launch_api)

    def once(args: tuple[Any, ...], workspace: int, capacity: int, stream: Any) -> tuple[int, Any, bool]:
        status, workspace_size, executor = first(*args)
        if status:
            _check(b, status, api)
        if executor is None or workspace_size > capacity:
            return workspace_size, executor, False
        status = second(workspace if workspace_size > 0 else 0, workspace_size, executor, stream)
        if status:
            _check(b, status, launch_api)
        return workspace_size, executor, True

    get_workspace_size.__name__ = get_workspace_size.__qualname__ = api
    launch.__name__ = launch.__qualname__ = launch_api
    once.__name__ = once.__qualname__ = f"{api}_{launch_api}"
    return get_workspace_size, launch, once


def init(config_path: str | None = None, *, backend: str | None = None) -> None:
    """``aclnnInit``."""
    _call(backend, "aclnnInit", config_path)


def finalize(*, backend: str | None = None) -> None:
    """``aclnnFinalize``."""
    _call(backend, "aclnnFinalize")


# Two wrappers per operator of the table, named by its Python name: ``<name>_get_workspace_size``
# (phase 1) and ``<name>`` (phase 2). Type checkers read their typed signatures in aclnn.pyi,
# generated from the table by scripts/generate_interface.py.
for _spec in _optable.operators():
    globals()[f"{_spec.python_name}_get_workspace_size"] = _phase1(_spec.name)
    globals()[_spec.python_name] = _phase2(_spec.name)
    __all__ += [f"{_spec.python_name}_get_workspace_size", _spec.python_name]
del _spec
