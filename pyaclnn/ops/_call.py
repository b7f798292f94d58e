"""One generic operator call: Python arguments checked and converted by their C types, then one
launch through the runtime the four crafted operators use.

Every argument is checked before anything is made for the call, so a wrong one
raises (TypeError, or ValueError for an int out of its C type's range) naming
the Python parameter and leaves nothing behind. Then a
:class:`~pyaclnn.runtime.Launch` puts the arrays on the device (NumPy inputs
uploaded or mapped, written NumPy arrays copied back), the scalars, arrays and
lists made for the call are owned by it (destroyed once phase 2 was queued),
and phase 1 runs every time: an executor of a generic operator is never made
repeatable outside a graph capture (operators with internal copies break when
reused); a capture keeps its executors for the replays.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from .. import _captures, _generic, _launch, _timeline
from .. import dtypes as _dtypes
from ..errors import ArgumentOverflowError
from ..kernels.references import TensorInfo
from ..runtime import DeviceArray, Launch, Stream
from . import _types
from ._headers import Declaration

# Descriptor format by rank, as torch_npu creates them (3-D NCL, 4-D NCHW, 5-D NCDHW, else ND).
_FORMATS = {3: _dtypes.FORMATS["ACL_FORMAT_NCL"], 4: _dtypes.ACL_FORMAT_NCHW, 5: _dtypes.ACL_FORMAT_NCDHW}
_ND = _dtypes.ACL_FORMAT_ND
_ARRAY_TYPES = (np.ndarray, DeviceArray)


def _format(array: DeviceArray) -> int:
    return _FORMATS.get(array.ndim, _ND)


def _describe(value: Any) -> str:
    """A value's type, and its shape for arrays: never the repr of a whole array."""
    if isinstance(value, _ARRAY_TYPES):
        return f"{type(value).__name__} of shape {list(value.shape)}"
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


class _Checked:
    """One argument checked by kind: what the launch needs to make its C value."""

    __slots__ = ("param", "value")

    def __init__(self, param: _types.Parameter, value: Any) -> None:
        self.param = param
        self.value = value


def _sequence(param: _types.Parameter, value: Any, what: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes, np.ndarray, DeviceArray)) or not isinstance(value, Sequence):
        if not (isinstance(value, np.ndarray) and param.kind in _NUMERIC_ARRAYS):
            raise TypeError(f"{param.python_name} must be a sequence of {what}, got {_describe(value)}")
        return list(value.tolist())
    return value


_NUMERIC_ARRAYS = (_types.INT_ARRAY, _types.BOOL_ARRAY, _types.FLOAT_ARRAY)


def _int(param: _types.Parameter, value: Any, bounds: tuple[int, int], what: str = "an int") -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{param.python_name} must be {what}, got {_describe(value)}")
    number = int(value)
    if not bounds[0] <= number <= bounds[1]:
        raise ArgumentOverflowError(
            f"{param.python_name} = {number} is outside the range of {_types.base_type(param.c.type)} "
            f"[{bounds[0]}, {bounds[1]}]"
        )
    return number


def _bool(param: _types.Parameter, value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{param.python_name} must be a bool, got {_describe(value)}")


def _float(param: _types.Parameter, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{param.python_name} must be a float, got {_describe(value)}")
    return float(value)


_INT64 = _types.INT_RANGES["int64_t"]


def scalar_value(name: str, value: Any) -> tuple[np.ndarray, int]:
    """A Python or NumPy scalar as (its bytes in a 0-d array, its aclDataType), typed as torch_npu
    types an ``at::Scalar``: bool -> ACL_BOOL, int -> ACL_INT64, float -> ACL_DOUBLE; a NumPy
    scalar (or 0-d array) keeps its dtype."""
    if isinstance(value, bool):
        array = np.array(value, dtype=np.bool_)
    elif isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        array = np.array(value)
    elif isinstance(value, numbers.Integral):
        if not _INT64[0] <= int(value) <= _INT64[1]:
            raise ArgumentOverflowError(f"{name} = {int(value)} is outside the range of an int64 scalar")
        array = np.array(int(value), dtype=np.int64)
    elif isinstance(value, numbers.Real):
        array = np.array(float(value), dtype=np.float64)
    else:
        raise TypeError(f"{name} must be a bool, int, float or NumPy scalar, got {_describe(value)}")
    try:
        data_type = _dtypes.from_numpy(array.dtype)
    except TypeError:
        raise TypeError(f"{name} has dtype {array.dtype}, which has no aclDataType") from None
    return array, data_type


def data_type(name: str, value: Any) -> int:
    """An ``aclDataType`` argument: a NumPy dtype (or anything ``numpy.dtype`` takes,
    ``pyaclnn.bfloat16`` included) or an ``ACL_*`` constant."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if int(value) not in _dtypes.DATA_TYPES.values():
            raise ValueError(
                f"{name} = {int(value)} is not an aclDataType (an ACL_* constant or a NumPy dtype)"
            )
        return int(value)
    try:
        return _dtypes.from_numpy(_dtypes.as_dtype(value))
    except TypeError:
        raise TypeError(
            f"{name} must be a NumPy dtype, pyaclnn.bfloat16 or an ACL_* constant, got {_describe(value)}"
        ) from None


def check(param: _types.Parameter, value: Any) -> Any:
    """``value`` checked for ``param`` and normalised (arrays and lists as they are; the rest as
    the C value, or what makes it)."""
    kind, name = param.kind, param.python_name
    if value is None:
        if param.optional:
            return None
        what = "an array" if kind in (_types.TENSOR, _types.TENSOR_LIST) else "a value"
        raise TypeError(f"{name} is required ({param.c}): got None, it needs {what}")
    if kind == _types.TENSOR:
        if not isinstance(value, _ARRAY_TYPES):
            raise TypeError(f"{name} must be a DeviceArray or a NumPy array, got {_describe(value)}")
        return value
    if kind == _types.TENSOR_LIST:
        items = _sequence(param, value, "arrays")
        for i, item in enumerate(items):
            if not isinstance(item, _ARRAY_TYPES):
                raise TypeError(f"{name}[{i}] must be a DeviceArray or a NumPy array, got {_describe(item)}")
        return list(items)
    if kind == _types.SCALAR:
        return scalar_value(name, value)
    if kind == _types.SCALAR_LIST:
        return [scalar_value(f"{name}[{i}]", v) for i, v in enumerate(_sequence(param, value, "scalars"))]
    if kind == _types.INT_ARRAY:
        return tuple(_int(param, v, _INT64, "a sequence of ints") for v in _sequence(param, value, "ints"))
    if kind == _types.BOOL_ARRAY:
        return tuple(_bool(param, v) for v in _sequence(param, value, "bools"))
    if kind == _types.FLOAT_ARRAY:
        return tuple(_float(param, v) for v in _sequence(param, value, "floats"))
    if kind == _types.INT:
        return _int(param, value, param.int_range)
    if kind == _types.BOOL:
        return _bool(param, value)
    if kind == _types.FLOAT:
        return _float(param, value)
    if kind == _types.STRING:
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, got {_describe(value)}")
        return value.encode("utf-8")
    if kind == _types.DTYPE:
        return data_type(name, value)
    raise AssertionError(kind)  # the type table has no other kind


# Values whose equality is their identity for every check here: the same type and an equal value
# pass or fail the same checks and give the same C value. Not a float zero (0.0 == -0.0) or a NaN,
# not a sequence (its items' types are not in the key), not an int or float subclass.
_EXACT_TYPES = frozenset({int, bool, str, type(None), type})
_EXACT_NUMPY = (np.integer, np.bool_, np.dtype)
_EAGER_LIMIT = 64  # recorded argument sets per operator
_EAGER_KINDS = frozenset(
    {_types.TENSOR, _types.SCALAR, _types.INT, _types.BOOL, _types.FLOAT, _types.STRING, _types.DTYPE}
)


def _exact(value: Any) -> bool:
    if type(value) in _EXACT_TYPES or isinstance(value, _EXACT_NUMPY):
        return True
    if type(value) is float or isinstance(value, np.floating):
        return bool(value != 0 and value == value)
    return False


class _Entry:
    """What the checks of one set of non-tensor arguments concluded (:meth:`Eager.record`):
    phase 1's arguments with their C values (``template``; the tensors' places empty) and the
    aclScalars to take from the context's cache (``scalars``). Compared by identity: the
    eager calls that follow key what they leave for the next one by it."""

    __slots__ = ("template", "scalars")

    def __init__(
        self, template: tuple[Any, ...], scalars: tuple[tuple[int, tuple[int, bytes], np.ndarray], ...]
    ) -> None:
        self.template = template
        self.scalars = scalars


class Eager:
    """The common call of one operator, with the checks of its other arguments cached: every
    tensor a DeviceArray (or None where optional), the rest equal, in value and type, to the
    arguments of an earlier call whose checks passed (:meth:`record`).

    A call is looked up by its non-tensor arguments and their types, which is all
    :func:`check` reads of them; only values whose equality is exact for those checks are
    recorded (:func:`_exact`), so an entry never lets through a value the checks would
    refuse. The tensors are checked at every call by :func:`pyaclnn._launch.eager`, which
    declines whatever is not its common case; the caller then takes the general path.
    """

    __slots__ = ("declaration", "params", "tensors", "others", "outputs", "entries", "enabled", "operator")

    def __init__(self, declaration: Declaration, params: Sequence[_types.Parameter]) -> None:
        self.declaration = declaration
        self.params = params
        unknown = not _types.roles_known(declaration)  # every tensor counts as written (see launch)
        tensors = [
            (i, p.is_output or unknown, p.optional, p.is_output)
            for i, p in enumerate(params)
            if p.kind == _types.TENSOR
        ]
        # Outputs first: a call on a new output (never described) is told from a repeated one
        # by its first tensor (pyaclnn._launch.eager).
        self.tensors = tuple(sorted(tensors, key=lambda t: not t[3]))
        self.others = tuple(i for i, p in enumerate(params) if p.kind != _types.TENSOR)
        self.outputs = tuple(i for i, p in enumerate(params) if p.is_output)
        self.entries: dict[tuple[Any, ...], _Entry] = {}
        self.enabled = all(p.kind in _EAGER_KINDS for p in params)
        self.operator = partial(_generic.operator, declaration)  # the active backend's record

    def _key(self, values: Sequence[Any]) -> tuple[Any, ...]:
        if len(self.others) == 1:  # the usual operator (add's alpha): no list, no map
            value = values[self.others[0]]
            return (value, type(value))
        others = [values[i] for i in self.others]
        return (*others, *map(type, others))

    def __call__(self, values: Sequence[Any], stream: Stream | None) -> Any:
        """The call's outputs, as :func:`launch` returns them; :data:`NOT_TAKEN` when it is not the
        common case (nothing was queued)."""
        if not self.enabled:
            return NOT_TAKEN
        try:
            entry = self.entries.get(self._key(values))
        except TypeError:  # an unhashable argument (a list, an array): never recorded
            return NOT_TAKEN
        if entry is None:
            return NOT_TAKEN
        if not _launch.eager(self.operator, stream, values, self.tensors, entry, _FORMATS, _ND):
            return NOT_TAKEN
        return self._outputs(values)

    def rest(
        self, values: Sequence[Any], stream: Stream, state: Any, ctx: Any, entry: _Entry, found: Any
    ) -> Any:
        """What the compiled call (:mod:`pyaclnn._repeat`, in place of :meth:`__call__`) leaves to
        Python once it knows ``entry`` and the plain ``stream`` (its ``state`` and context): the
        record ``found`` (with the arrays the call writes) to launch, or the general way when
        None (see :func:`pyaclnn._launch.eager_rest`). Returns what :meth:`__call__` returns."""
        taken = _launch.eager_rest(
            self.operator, stream, state, ctx, values, self.tensors, entry, _FORMATS, _ND, found
        )
        return self._outputs(values) if taken else NOT_TAKEN

    def _outputs(self, values: Sequence[Any]) -> Any:
        outputs = self.outputs
        if len(outputs) == 1:
            return values[outputs[0]]
        return tuple(values[i] for i in outputs) if outputs else None

    def record(self, values: Sequence[Any], checked: Sequence[Any]) -> None:
        """Keep the C values of ``values``' non-tensor arguments, which passed :func:`check` as
        ``checked``, for the next call with the same ones."""
        if not self.enabled or len(self.entries) >= _EAGER_LIMIT:
            return
        try:
            if self._key(values) in self.entries:  # (a NumPy call's, again: the entry is there)
                return
        except TypeError:  # an unhashable argument: never recorded
            return
        template: list[Any] = [None] * len(self.params)
        scalars = []
        for i in self.others:
            if not _exact(values[i]):
                return
            value = checked[i]
            if self.params[i].kind == _types.SCALAR and value is not None:
                array, data_type = value
                scalars.append((i, (data_type, array.tobytes()), array))
            else:
                template[i] = value
        self.entries[self._key(values)] = _Entry(tuple(template), tuple(scalars))


NOT_TAKEN = _launch.NOT_TAKEN  # what Eager and AtOnce return for a call they leave to the general path

_HOST_DTYPES: dict[np.dtype, np.dtype] = {}  # a host array's dtype -> its aclDataType's NumPy dtype
_INFOS: dict[tuple[Any, ...], Any] = {}  # (shape, dtype) -> the TensorInfo phase 1 would make
_INFO_LIMIT = 256
_HOST_FORMS = (_types.SCALAR, _types.SCALAR_LIST, _types.FLOAT_ARRAY)


class AtOnce:
    """A call of one operator whose every array is a NumPy array, run on the calling thread at
    once where the active backend can (:func:`pyaclnn._generic.at_once`: the numpy backend's
    NumPy reference), without the device's copies, mappings, descriptors and wait.

    It does what the general path does on the same arguments, in the same order: the
    reference's check, then its kernel as the stream's next task, both on NumPy arrays over
    the same memory (mapped, or copied: equal unless an output shares memory with another
    argument). Taken only when that holds and nothing else could differ: no DeviceArray,
    plain NumPy arrays of an aclDataType with non-negative element strides, written arrays
    writable and sharing memory with no other argument, no capture or profile, an open stream of
    the active backend on the thread's device with nothing pending and no failure, host
    arrays mapped (not ``PYACLNN_MAP_HOST=0``), and a check that passes. Anything else, and a
    refusal of the check, goes the general way, which gives every message.
    """

    __slots__ = ("declaration", "tensors", "converted", "outputs")

    def __init__(self, declaration: Declaration, params: Sequence[_types.Parameter]) -> None:
        self.declaration = declaration
        unknown = not _types.roles_known(declaration)  # every tensor counts as written (see launch)
        # (position, a tensor list, written) per tensor parameter
        self.tensors = tuple(
            (i, p.kind == _types.TENSOR_LIST, p.is_output or unknown)
            for i, p in enumerate(params)
            if p.kind in (_types.TENSOR, _types.TENSOR_LIST)
        )
        # (position, kind) of the parameters whose C value the reference gets in another form
        self.converted = tuple(
            (i, p.kind) for i, p in enumerate(params) if p.kind in (*_HOST_FORMS, _types.DTYPE)
        )
        self.outputs = tuple(i for i, p in enumerate(params) if p.is_output)

    def __call__(self, checked: Sequence[Any], stream: Stream | None) -> Any:
        """The call's outputs, as :func:`launch` returns them; :data:`NOT_TAKEN` when it is not
        this case (nothing was run)."""
        if _captures.active or _timeline.recording:
            return NOT_TAKEN
        run = _generic.at_once(self.declaration)
        if run is None:
            return NOT_TAKEN
        values = list(checked)
        for i, kind in self.converted:
            value = values[i]
            if value is None:
                continue
            if kind == _types.SCALAR:
                values[i] = value[0][()]  # as aclCreateScalar keeps it
            elif kind == _types.SCALAR_LIST:
                values[i] = [v[()] for v, _ in value]
            elif kind == _types.FLOAT_ARRAY:  # C floats
                values[i] = tuple(float(np.float32(v)) for v in value)
            else:
                values[i] = _dtypes.to_numpy(value)
        infos = values.copy()
        arrays: list[np.ndarray] = []
        written: list[np.ndarray] = []
        for i, is_list, write in self.tensors:
            value = values[i]
            if value is None:
                continue
            if is_list:
                items = []
                for item in value:
                    info = _host_info(item, write)
                    if info is None:
                        return NOT_TAKEN
                    items.append(info)
                infos[i] = items
                arrays.extend(value)
                if write:
                    written.extend(value)
            else:
                info = _host_info(value, write)
                if info is None:
                    return NOT_TAKEN
                infos[i] = info
                arrays.append(value)
                if write:
                    written.append(value)
        for w in written:  # the kernel writes where the caller sees it: no other argument may alias it
            shared = 0
            for a in arrays:
                if a is w or np.may_share_memory(w, a):
                    shared += 1
                    if shared > 1:
                        return NOT_TAKEN
        plain = _launch.plain_stream(stream, None)
        if plain is None:
            return NOT_TAKEN
        stream, state, ctx = plain
        if ctx.host_memory is None or state.device != ctx.tls.bound:  # PYACLNN_MAP_HOST=0: copies
            return NOT_TAKEN
        ran = run(infos, values, state.handle)
        if ran is None:
            return NOT_TAKEN
        if not ran:  # the kernel failed: the wait reports it, as the general path's
            state.synchronize()
        outputs = self.outputs
        if len(outputs) == 1:
            return checked[outputs[0]]
        return tuple(checked[i] for i in outputs) if outputs else None


def _host_info(x: Any, written: bool) -> Any:
    """What phase 1 knows of host array ``x`` (its TensorInfo), if the call on it may run at
    once (see :class:`AtOnce`); else None."""
    if type(x) is not np.ndarray:
        return None
    dtype = _HOST_DTYPES.get(x.dtype)
    if dtype is None:
        try:
            dtype = _dtypes.to_numpy(_dtypes.from_numpy(x.dtype))
        except TypeError:
            return None
        _HOST_DTYPES[x.dtype] = dtype
    itemsize = x.itemsize
    for stride in x.strides:
        if stride < 0 or stride % itemsize:
            return None
    if written and not x.flags.writeable:
        return None
    key = (x.shape, dtype)
    info = _INFOS.get(key)
    if info is None:
        info = TensorInfo(x.shape, dtype)
        if len(_INFOS) >= _INFO_LIMIT:
            _INFOS.clear()
        _INFOS[key] = info
    return info


def launch(
    declaration: Declaration,
    params: Sequence[_types.Parameter],
    values: Sequence[Any],
    stream: Stream | None,
    python_name: str,
) -> Any:
    """Run the operator on ``values`` (checked, in header order) on ``stream`` (None: the current
    stream); return its outputs: one as itself, several as a tuple in header order (None where
    an optional output was None, a list for a tensor list). ``python_name`` names the call in
    messages."""
    arrays: list[Any] = []
    for param, value in zip(params, values):
        if param.kind == _types.TENSOR and value is not None:
            arrays.append(value)
        elif param.kind == _types.TENSOR_LIST and value is not None:
            arrays.extend(value)
    on_device = any(isinstance(a, DeviceArray) for a in arrays)
    if on_device:
        for param, value in zip(params, values):
            items = value if param.kind == _types.TENSOR_LIST else [value]
            if param.is_output and any(isinstance(v, np.ndarray) for v in items or ()):
                raise TypeError(
                    f"{param.python_name} is a NumPy array the operator writes, but the call has a "
                    "DeviceArray, so it returns before its work is done: pass a DeviceArray"
                )
    op = _generic.operator(declaration)
    # Readers run together only where the roles are known: elsewhere every tensor counts as
    # written, so a wrong guess costs concurrency, never data.
    unknown = not _types.roles_known(declaration)
    # A call on NumPy arrays alone returns once its outputs are read back: it waits for its work.
    with (
        contextlib.nullcontext() if on_device else _generic.waited_at_once(),
        Launch(None, stream, arrays, python_name) as call,
    ):
        c_args: list[Any] = []
        written: list[Any] = []  # per output parameter: a DeviceArray, a list of them, or None
        made: list[DeviceArray] = []
        for param, value in zip(params, values):
            kind, name = param.kind, param.python_name
            if value is None:
                c_args.append(None)
                if param.is_output:
                    written.append(None)
            elif kind == _types.TENSOR:
                if param.is_output:
                    array: DeviceArray | None = call.written(name, value)
                else:  # an input it may still write (see _types.roles_known): ordered as written
                    array = call.device(name, value, write=unknown)
                assert array is not None
                c_args.append(array.descriptor(_format(array)))
                if param.is_output:
                    written.append(array)
                    made.append(array)
            elif kind == _types.TENSOR_LIST:
                if param.is_output:
                    items = [call.written(f"{name}[{i}]", v) for i, v in enumerate(value)]
                else:
                    items = [call.device(f"{name}[{i}]", v, write=unknown) for i, v in enumerate(value)]
                c_args.append(call.tensor_list(items, [_format(item) for item in items]))
                if param.is_output:
                    written.append(items)
                    made.extend(items)
            elif kind == _types.SCALAR:
                c_args.append(call.scalar(*value))
            elif kind == _types.SCALAR_LIST:
                c_args.append(call.scalar_list(value))
            elif kind == _types.INT_ARRAY:
                c_args.append(call.int_array(value))
            elif kind == _types.BOOL_ARRAY:
                c_args.append(call.bool_array(value))
            elif kind == _types.FLOAT_ARRAY:
                c_args.append(call.float_array(value))
            else:
                c_args.append(value)
        call.launch(op, *c_args, outputs=made, repeatable=False)
        results = [
            None if w is None else [call.result(a) for a in w] if isinstance(w, list) else call.result(w)
            for w in written
        ]
    if len(results) == 1:
        return results[0]
    return tuple(results) if results else None


def host_value(param: _types.Parameter, value: Any) -> Any:
    """``value`` (checked for ``param``) as a NumPy reference gets it on the host: NumPy arrays for
    tensors (a DeviceArray's copy), lists of them, NumPy scalars, a NumPy dtype, str, tuples."""
    checked = check(param, value)
    kind = param.kind
    if checked is None:
        return None
    if kind == _types.TENSOR:
        return checked.numpy() if isinstance(checked, DeviceArray) else checked
    if kind == _types.TENSOR_LIST:
        return [a.numpy() if isinstance(a, DeviceArray) else a for a in checked]
    if kind == _types.SCALAR:
        return checked[0][()]
    if kind == _types.SCALAR_LIST:
        return [v[()] for v, _ in checked]
    if kind == _types.STRING:
        return value
    if kind == _types.DTYPE:
        return _dtypes.to_numpy(checked)
    return checked
