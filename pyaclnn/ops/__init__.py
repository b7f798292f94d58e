"""Every aclnn operator of the installed CANN, from Python: ``pyaclnn.ops.<name>``.

``pyaclnn.ops.add(x, y, 1, out)`` calls ``aclnnAdd``: the operator's C name in
snake_case without ``aclnn``, made on first use from its declaration in CANN's
operator headers (the npu backend's CANN home; on the numpy backend, the
declarations of its NumPy references). Parameters come in header order,
positional or by keyword, in snake_case (``keepDims`` is ``keep_dims``; a Python
keyword gets a trailing underscore, ``from_``); ``...Optional`` parameters may
be None and default to it; keyword-only ``stream=None`` means the current
stream. The call returns the operator's outputs: one as itself, several as a
tuple in header order. Arguments by C type (one table, :mod:`pyaclnn.ops._types`):

==========================================  ==============================================
C type (``const`` forms too)                Python
==========================================  ==============================================
``aclTensor*``                              DeviceArray or NumPy array (None if Optional)
``aclTensorList*``                          sequence of arrays
``aclScalar*``                              bool (ACL_BOOL), int (ACL_INT64), float
                                            (ACL_DOUBLE), NumPy scalar (its dtype)
``aclScalarList*``                          sequence of scalars, by the same rule
``aclIntArray*``, ``aclBoolArray*``,        sequence of int, bool, float
``aclFloatArray*``
``int64_t``, ``int32_t``, ``int8_t``,       int, checked against the C type's range
``int``, ``uint64_t``
``bool``                                    bool
``double``, ``float``                       float
``char*``                                   str
``aclDataType``                             NumPy dtype, ``pyaclnn.bfloat16`` or ACL_* constant
==========================================  ==============================================

An operator with a parameter of another type is refused, naming the type
(``python -m pyaclnn ops`` lists the refusals with their reasons). Which tensors
an operator writes, the headers do not say reliably: a tensor is an output when
its type is not ``const``, when its C name is ``out``/``output`` or ends in
``Out``, ``Ref`` or ``Output``, or when it is the first tensor of an ``Inplace``
operator. Outputs are returned and written back into NumPy arrays; a tensor an
operator writes without being an output by this rule must be a DeviceArray.
"""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _types
from ._headers import Declaration, HeaderError
from ._vendors import Layered, VendorError

if TYPE_CHECKING:
    from ..runtime import Stream

# The runtime is imported on first use, not here: the runtime itself reads this package's
# header reader (pyaclnn.ops._headers), whose import runs this module first.

__all__ = [
    "HeaderError",
    "VendorError",
    "catalogue",
    "load",
    "reference",
    "register_reference",
    "signature_of",
]

_lock = threading.Lock()
_functions: dict[tuple[str, str], Callable[..., Any]] = {}  # (backend, Python name) -> function


class _Required:
    """The default shown for a required parameter after an optional one (a Python signature needs
    a default there); the call refuses it as missing."""

    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


def catalogue(backend: str | None = None) -> Layered:
    """The declarations the operators of ``backend`` (the active one by default) are made from:
    custom packages first, then the built-in operators."""
    from .. import _generic

    return _generic.catalogue(backend)


def _forget_functions() -> None:
    """Drop the functions made so far (a package or a reference changed what a name calls)."""
    with _lock:
        _functions.clear()


def load(path: str | os.PathLike[str], outputs: Mapping[str, Sequence[str]] | None = None) -> list[str]:
    """Add a custom operator package (a vendor folder: ``op_api/include/`` headers,
    ``op_api/lib/libcust_opapi.so``, ``op_proto/inc/`` prototypes) at run time.

    It goes behind the packages already found (``ASCEND_CUSTOM_OPP_PATH``, then
    ``<opp>/vendors/config.ini``) and ahead of the built-in operators, so one of its
    operators shadows a built-in one of the same name; its operators' two phases come from
    its own library, opened now on the npu backend (locally: it does not interpose on the
    built-ins for other code). The numpy backend opens no library: it reads the headers and
    prototypes, and runs an operator through its NumPy reference (:func:`register_reference`).

    Parameters
    ----------
    path : str or path-like
        The vendor folder.
    outputs : mapping, optional
        ``{"aclnnMyOp": ["y"]}``: the C names of tensors an operator writes, where neither its
        prototype nor the name rule (docs/ops.md) tells. They become outputs: returned, and
        written back into NumPy arrays.

    Returns
    -------
    list of str
        The C names of the operators the package declares; empty when it was loaded already
        (loading it again changes nothing).

    Raises
    ------
    VendorError
        For a folder with neither headers under ``op_api/include`` nor a library (naming the
        folder and what is missing), or a library that does not open (naming it and the
        loader's message).
    """
    from .. import _generic

    folder = Path(os.fspath(path)).expanduser().resolve()
    written = {name: tuple(names) for name, names in (outputs or {}).items()}
    added = _generic.load(folder, written)
    _forget_functions()
    return added


def register_reference(name: str, fn: Callable[..., Any]) -> None:
    """Give operator ``name`` (its C name, ``"aclnnMyOp"`` or ``"MyOp"``, or its Python name,
    ``"my_op"``) a NumPy implementation.

    ``fn`` gets the call's arguments in header order: NumPy arrays for tensors (outputs as
    writable arrays it fills), lists of arrays for tensor lists, NumPy scalars for scalars,
    a NumPy dtype for an ``aclDataType``, tuples for int, bool and float arrays, and Python
    values for the rest. The numpy backend runs it behind the same surface as any operator
    (the same argument checks, NumPy and DeviceArray arguments, outputs written back and
    returned). On the npu backend the device runs the operator; ``pyaclnn.ops.<name>.reference(...)``
    runs ``fn`` on the host, to compare the two.
    """
    from ..kernels import references

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be an operator's C or Python name, got {name!r}")
    key = name.removeprefix("aclnn") if name.startswith("aclnn") else name
    references.register(references.Reference(key, fn))
    from .. import _generic

    _generic.forget("numpy")
    _forget_functions()


def reference(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """:func:`register_reference` as a decorator: ``@pyaclnn.ops.reference("my_op")``."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        register_reference(name, fn)
        return fn

    return decorate


def signature_of(declaration: Declaration) -> inspect.Signature:
    """The Python signature of an operator: its parameters in header order, then ``*, stream=None``."""
    params = _types.parameters(declaration)
    result = []
    for i, param in enumerate(params):
        if param.optional:
            default: Any = None
        elif any(p.optional for p in params[:i]):
            default = REQUIRED
        else:
            default = inspect.Parameter.empty
        # No annotations: the docstring says what each takes (a made-up type name would print
        # as a quoted string).
        result.append(
            inspect.Parameter(param.python_name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    stream = inspect.Parameter("stream", inspect.Parameter.KEYWORD_ONLY, default=None)
    return inspect.Signature([*result, stream])


def _docstring(declaration: Declaration, params: tuple[_types.Parameter, ...], where: str) -> str:
    outputs = _types.outputs(params)
    lines = [
        f"Run ``{declaration.phase2_api}`` (declared in {where}).",
        "",
        "Parameters",
        "----------",
    ]
    for param in params:
        lines.append(param.describe())
    lines += [
        "stream : Stream, optional",
        "    The stream to queue the work on; None: the current stream.",
        "",
    ]
    lines += ["Returns", "-------"]
    if outputs:
        for param in outputs:
            lines.append(f"{param.python_name}")
            lines.append(
                "    The array passed for it, written"
                + (" (None if None was passed)" if param.optional else "")
            )
    else:
        lines.append("None")
    lines += [
        "",
        "Notes",
        "-----",
        "The C prototypes::",
        "",
        f"    {declaration.phase1_prototype}",
        f"    {declaration.phase2_prototype}",
    ]
    return "\n".join(lines)


def make(declaration: Declaration, where: str = "") -> Callable[..., Any]:
    """The Python function of ``declaration``: checks its arguments, launches, returns the outputs."""
    params = _types.parameters(declaration)
    count = len(params)
    index = {p.python_name: i for i, p in enumerate(params)}
    python_name = _types.python_operator_name(declaration.name)
    missing = object()

    from .. import _launch
    from . import _call

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any], caller: str) -> list[Any]:
        """The arguments in header order (``missing`` where none was given), or TypeError."""
        if len(args) > count:
            raise TypeError(f"{caller}() takes {count} positional arguments but {len(args)} were given")
        values = [*args, *([missing] * (count - len(args)))]
        for key, value in kwargs.items():
            position = index.get(key)
            if position is None:
                raise TypeError(f"{caller}() got an unexpected keyword argument {key!r}")
            if values[position] is not missing:
                raise TypeError(f"{caller}() got multiple values for argument {key!r}")
            values[position] = value
        for i, (param, value) in enumerate(zip(params, values)):
            if value is missing or value is REQUIRED:
                if not param.optional:
                    raise TypeError(f"{caller}() missing required argument {param.python_name!r} ({param.c})")
                values[i] = None
        return values

    eager = _call.Eager(declaration, params)
    at_once = _call.AtOnce(declaration, params)

    def operator(*args: Any, stream: Stream | None = None, **kwargs: Any) -> Any:
        # Every argument given by position: bind has nothing to do but REQUIRED, which no entry of
        # the eager cache holds (it is never a DeviceArray, and no check passes it).
        values = args if not kwargs and len(args) == count else bind(args, kwargs, python_name)
        compiled = _launch.compiled_call  # (None until the first call left a record, or no compiler)
        done = eager(values, stream) if compiled is None else compiled(eager, values, stream)
        if done is not _call.NOT_TAKEN:
            return done
        if values is args:  # bind's one work here: a REQUIRED given in place of a value
            for value in args:
                if value is REQUIRED:
                    values = bind(args, kwargs, python_name)
                    break
        checked = [_call.check(param, value) for param, value in zip(params, values)]
        eager.record(values, checked)
        done = at_once(checked, stream)
        if done is not _call.NOT_TAKEN:
            return done
        return _call.launch(declaration, params, checked, stream, python_name)

    def run_reference(*args: Any, **kwargs: Any) -> Any:
        """Run the operator's NumPy reference on the host (see register_reference)."""
        from ..kernels import references

        found = references.get(declaration.name)
        if found is None:
            raise LookupError(
                f"{declaration.phase2_api} has no NumPy reference: register one with "
                f"pyaclnn.ops.register_reference({python_name!r}, fn)"
            )
        values = bind(args, kwargs, f"{python_name}.reference")
        host = [_call.host_value(param, value) for param, value in zip(params, values)]
        found.kernel(*host)
        outputs = [v for p, v in zip(params, host) if p.is_output]
        return outputs[0] if len(outputs) == 1 else tuple(outputs) if outputs else None

    operator.reference = run_reference  # type: ignore[attr-defined]
    operator.__name__ = operator.__qualname__ = python_name
    operator.__module__ = __name__
    operator.__doc__ = _docstring(declaration, params, where or str(declaration.header))
    operator.__signature__ = signature_of(declaration)  # type: ignore[attr-defined]
    operator.declaration = declaration  # type: ignore[attr-defined]
    return operator


def _unavailable(name: str, backend: str) -> AttributeError:
    if backend == "numpy":
        known = len(catalogue("numpy").index())
        return AttributeError(
            f"pyaclnn.ops.{name}: the numpy backend has no NumPy reference for an operator named {name!r} "
            f"(it runs {known}: python -m pyaclnn ops lists them); other operators need the npu backend "
            "with CANN, or a NumPy reference (pyaclnn.ops.register_reference) for an operator a loaded "
            "package declares"
        )
    return AttributeError(
        f"pyaclnn.ops.{name}: no operator header of this CANN declares aclnn operator {name!r}"
    )


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .. import _generic

    backend = _generic.active_backend()
    key = (backend, name)
    found = _functions.get(key)
    if found is not None:
        return found
    source = catalogue(backend)
    declaration = source.find(name)
    if declaration is None:
        raise _unavailable(name, backend)
    reason = _types.refusal(declaration)
    if reason is not None:
        raise AttributeError(f"pyaclnn.ops.{name} ({declaration.phase2_api}) cannot be called: {reason}")
    missing = (
        _generic.unavailable(declaration, backend) if declaration.library or backend == "numpy" else None
    )
    if missing is not None and backend != "numpy":
        raise AttributeError(f"pyaclnn.ops.{name} ({declaration.phase2_api}) cannot be called: {missing}")
    if missing is not None:
        raise AttributeError(
            f"pyaclnn.ops.{name} ({declaration.phase2_api}, declared in {declaration.source}) has no NumPy "
            "reference, and the numpy backend runs an operator only through one: register one with "
            f"pyaclnn.ops.register_reference({name!r}, fn) or @pyaclnn.ops.reference({name!r}), or run it "
            "on the npu backend with CANN"
        )
    function = make(declaration, source.relative(declaration.header))
    with _lock:
        return _functions.setdefault(key, function)


def __dir__() -> list[str]:
    return sorted({*__all__, "REQUIRED", *(_types.python_operator_name(n) for n in catalogue().index())})
