"""Low-level API: one Python function per C function of the ACL runtime and aclnn meta API.

Each mirrors its C function (``acl.create_tensor`` is ``aclCreateTensor``,
``acl.rt.malloc`` is ``aclrtMalloc``), takes out-parameters as return values
and raises :class:`pyaclnn.AclError` / :class:`pyaclnn.AclnnError` instead of
returning a status. Pointers are ints; handles are opaque objects of the
backend that made them. Every function takes ``backend=None`` (the active
backend) or "numpy" / "npu".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import backends as _backends
from .._status import check as _check
from .._status import created as _created
from ..constants import ACL_ERROR_REPEAT_INITIALIZE, ACLNN_ERR_PARAM_INVALID
from . import mdl, prof, rt
from ._call import call as _call

__all__ = [
    "rt",
    "mdl",
    "prof",
    "init",
    "finalize",
    "get_recent_err_msg",
    "data_type_size",
    "create_tensor",
    "destroy_tensor",
    "create_int_array",
    "destroy_int_array",
    "create_bool_array",
    "destroy_bool_array",
    "create_scalar",
    "destroy_scalar",
    "create_float_array",
    "destroy_float_array",
    "create_tensor_list",
    "destroy_tensor_list",
    "create_scalar_list",
    "destroy_scalar_list",
    "set_acl_op_executor_repeatable",
    "destroy_acl_op_executor",
]


def init(config_path: str | None = None, *, backend: str | None = None) -> None:
    """``aclInit``. A repeated call (ACL_ERROR_REPEAT_INITIALIZE) counts as success."""
    b = _backends.get(backend)
    status = b.aclInit(config_path)
    if status == ACL_ERROR_REPEAT_INITIALIZE:
        b.aclGetRecentErrMsg()  # consume the message so it does not leak into the next error
        _backends.mark_started(b.name)
        return
    _check(b, status, "aclInit")
    _backends.mark_started(b.name)  # a child forked from now on refuses the backend


def finalize(*, backend: str | None = None) -> None:
    """``aclFinalize``."""
    _call(backend, "aclFinalize")


def get_recent_err_msg(*, backend: str | None = None) -> str:
    """``aclGetRecentErrMsg``: the calling thread's latest error text ("" if none); reading clears it."""
    return _backends.get(backend).aclGetRecentErrMsg()


def data_type_size(data_type: int, *, backend: str | None = None) -> int:
    """``aclDataTypeSize``: bytes per element, 0 for an unknown type."""
    return _backends.get(backend).aclDataTypeSize(data_type)


def create_tensor(
    view_dims: Sequence[int],
    data_type: int,
    strides: Sequence[int] | None,
    offset: int,
    format: int,
    storage_dims: Sequence[int],
    data: int,
    *,
    backend: str | None = None,
) -> Any:
    """``aclCreateTensor``: a descriptor of ``data`` (strides and offset in elements).

    Raises
    ------
    AclnnError
        ACLNN_ERR_PARAM_INVALID when the C function returns NULL, with its reason.
    """
    b = _backends.get(backend)
    handle = b.aclCreateTensor(view_dims, data_type, strides, offset, format, storage_dims, data)
    return _created(b, handle, "aclCreateTensor", ACLNN_ERR_PARAM_INVALID)


def destroy_tensor(tensor: Any, *, backend: str | None = None) -> None:
    """``aclDestroyTensor``."""
    _call(backend, "aclDestroyTensor", tensor)


def create_int_array(values: Sequence[int], *, backend: str | None = None) -> Any:
    """``aclCreateIntArray`` (the values are copied)."""
    b = _backends.get(backend)
    return _created(b, b.aclCreateIntArray(values), "aclCreateIntArray", ACLNN_ERR_PARAM_INVALID)


def destroy_int_array(array: Any, *, backend: str | None = None) -> None:
    """``aclDestroyIntArray``."""
    _call(backend, "aclDestroyIntArray", array)


def create_bool_array(values: Sequence[bool], *, backend: str | None = None) -> Any:
    """``aclCreateBoolArray`` (the values are copied)."""
    b = _backends.get(backend)
    return _created(b, b.aclCreateBoolArray(values), "aclCreateBoolArray", ACLNN_ERR_PARAM_INVALID)


def destroy_bool_array(array: Any, *, backend: str | None = None) -> None:
    """``aclDestroyBoolArray``."""
    _call(backend, "aclDestroyBoolArray", array)


def create_scalar(value: Any, data_type: int, *, backend: str | None = None) -> Any:
    """``aclCreateScalar``: a scalar of ACL type ``data_type`` whose bytes are ``value`` (a host
    buffer, e.g. a 0-d NumPy array of that type); the value is copied."""
    b = _backends.get(backend)
    return _created(b, b.aclCreateScalar(value, data_type), "aclCreateScalar", ACLNN_ERR_PARAM_INVALID)


def destroy_scalar(scalar: Any, *, backend: str | None = None) -> None:
    """``aclDestroyScalar``."""
    _call(backend, "aclDestroyScalar", scalar)


def create_float_array(values: Sequence[float], *, backend: str | None = None) -> Any:
    """``aclCreateFloatArray`` (the values are copied, as C floats)."""
    b = _backends.get(backend)
    return _created(b, b.aclCreateFloatArray(values), "aclCreateFloatArray", ACLNN_ERR_PARAM_INVALID)


def destroy_float_array(array: Any, *, backend: str | None = None) -> None:
    """``aclDestroyFloatArray``."""
    _call(backend, "aclDestroyFloatArray", array)


def create_tensor_list(tensors: Sequence[Any], *, backend: str | None = None) -> Any:
    """``aclCreateTensorList`` of tensor descriptors, which the list owns from then on:
    :func:`destroy_tensor_list` destroys them with it (never destroy them yourself)."""
    b = _backends.get(backend)
    return _created(b, b.aclCreateTensorList(tensors), "aclCreateTensorList", ACLNN_ERR_PARAM_INVALID)


def destroy_tensor_list(tensor_list: Any, *, backend: str | None = None) -> None:
    """``aclDestroyTensorList``."""
    _call(backend, "aclDestroyTensorList", tensor_list)


def create_scalar_list(scalars: Sequence[Any], *, backend: str | None = None) -> Any:
    """``aclCreateScalarList`` of scalars, which the list owns from then on: :func:`destroy_scalar_list`
    destroys them with it."""
    b = _backends.get(backend)
    return _created(b, b.aclCreateScalarList(scalars), "aclCreateScalarList", ACLNN_ERR_PARAM_INVALID)


def destroy_scalar_list(scalar_list: Any, *, backend: str | None = None) -> None:
    """``aclDestroyScalarList``."""
    _call(backend, "aclDestroyScalarList", scalar_list)


def set_acl_op_executor_repeatable(executor: Any, *, backend: str | None = None) -> None:
    """``aclSetAclOpExecutorRepeatable``: the caller then owns the executor."""
    _call(backend, "aclSetAclOpExecutorRepeatable", executor)


def destroy_acl_op_executor(executor: Any, *, backend: str | None = None) -> None:
    """``aclDestroyAclOpExecutor``, for repeatable executors only."""
    _call(backend, "aclDestroyAclOpExecutor", executor)
