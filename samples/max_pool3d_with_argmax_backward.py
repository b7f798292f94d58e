"""aclnnMaxPool3dWithArgmaxBackward on the low-level API, step by step as in C.

A Python port of the operator document's C++ sample: the same tensors, the
same calls in the same order, the same printed lines. Every ``acl.*`` /
``aclnn.*`` function mirrors one C function and raises ``pyaclnn.AclError`` /
``pyaclnn.AclnnError`` instead of returning a status, so there are no status
checks to write; every resource is registered for release right after it is
created, so it is freed on error paths too.

Run::

    python samples/max_pool3d_with_argmax_backward.py            # active backend
    python samples/max_pool3d_with_argmax_backward.py --backend numpy
    ASCEND_HOME_PATH=build/emulator-home python samples/max_pool3d_with_argmax_backward.py --backend npu

Prints gradInput, ``result[6] is: 0.475700`` and zeros elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence

import numpy as np

import pyaclnn
from pyaclnn import acl, aclnn
from pyaclnn.acl import rt
from pyaclnn.backends.npu import LibraryNotFoundError
from pyaclnn.constants import (
    ACL_FLOAT,
    ACL_FORMAT_ND,
    ACL_INT32,
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
)


def get_shape_size(shape: Sequence[int]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size


def create_acl_tensor(
    cleanup: contextlib.ExitStack, host_data: np.ndarray, shape: Sequence[int], data_type: int
) -> tuple[int, object]:
    """Device copy of ``host_data`` and its aclTensor (contiguous strides, ND); both freed by ``cleanup``."""
    size = get_shape_size(shape) * host_data.itemsize
    device_addr = rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)  # aclrtMalloc
    cleanup.callback(rt.free, device_addr)
    rt.memcpy(device_addr, size, host_data, size, ACL_MEMCPY_HOST_TO_DEVICE)  # aclrtMemcpy
    # Strides of a contiguous tensor, in elements.
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = shape[i + 1] * strides[i + 1]
    tensor = acl.create_tensor(shape, data_type, strides, 0, ACL_FORMAT_ND, shape, device_addr)
    cleanup.callback(acl.destroy_tensor, tensor)
    return device_addr, tensor


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("numpy", "npu"), help="default: the active backend")
    args = parser.parse_args(argv)
    if args.backend:
        pyaclnn.set_backend(args.backend)

    with contextlib.ExitStack() as cleanup:  # releases everything below in reverse order
        # 1. Device/stream initialisation.
        device_id = 0
        acl.init()
        cleanup.callback(acl.finalize)
        rt.set_device(device_id)
        cleanup.callback(rt.reset_device, device_id)
        stream = rt.create_stream()
        cleanup.callback(rt.destroy_stream, stream)

        # 2. Inputs and outputs.
        grad_out_shape = [1, 1, 1, 1, 1]
        self_shape = [1, 1, 2, 2, 2]
        indices_shape = [1, 1, 1, 1, 1]
        grad_in_shape = [1, 1, 2, 2, 2]
        kernel_size_data = [2, 2, 2]
        stride_data = [2, 2, 2]
        padding_data = [0, 0, 0]
        dilation_data = [1, 1, 1]
        grad_out_host_data = np.array([0.4757], dtype=np.float32)
        self_host_data = np.array(
            [0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954], dtype=np.float32
        )
        indices_host_data = np.array([6], dtype=np.int32)
        grad_in_host_data = np.zeros(8, dtype=np.float32)

        _, grad_out = create_acl_tensor(cleanup, grad_out_host_data, grad_out_shape, ACL_FLOAT)
        _, self_tensor = create_acl_tensor(cleanup, self_host_data, self_shape, ACL_FLOAT)
        _, indices = create_acl_tensor(cleanup, indices_host_data, indices_shape, ACL_INT32)
        grad_in_device_addr, grad_in = create_acl_tensor(cleanup, grad_in_host_data, grad_in_shape, ACL_FLOAT)

        kernel_size = acl.create_int_array(kernel_size_data)
        cleanup.callback(acl.destroy_int_array, kernel_size)
        stride = acl.create_int_array(stride_data)
        cleanup.callback(acl.destroy_int_array, stride)
        padding = acl.create_int_array(padding_data)
        cleanup.callback(acl.destroy_int_array, padding)
        dilation = acl.create_int_array(dilation_data)
        cleanup.callback(acl.destroy_int_array, dilation)
        ceil_mode = False

        # 3. The operator: phase 1 checks the arguments and sizes the workspace ...
        workspace_size, executor = aclnn.max_pool3d_with_argmax_backward_get_workspace_size(
            grad_out, self_tensor, indices, kernel_size, stride, padding, dilation, ceil_mode, grad_in
        )
        workspace_addr = 0
        if workspace_size > 0:
            workspace_addr = rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
            cleanup.callback(rt.free, workspace_addr)
        # ... phase 2 launches it on the stream.
        aclnn.max_pool3d_with_argmax_backward(workspace_addr, workspace_size, executor, stream)

        # 4. Wait for the stream.
        rt.synchronize_stream(stream)

        # 5. Copy the result back to the host and print it.
        size = get_shape_size(grad_in_shape)
        result_data = np.zeros(size, dtype=np.float32)
        rt.memcpy(
            result_data,
            result_data.nbytes,
            grad_in_device_addr,
            size * result_data.itemsize,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
        for i in range(size):
            print(f"result[{i}] is: {result_data[i]:f}")
        # 6./7. Leaving the with-block destroys the tensors and arrays, frees the
        # memory, destroys the stream, resets the device and finalizes ACL.
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LibraryNotFoundError as exc:  # no usable CANN (--backend npu without it): one line, exit 1
        sys.exit(f"{sys.argv[0]}: {exc.one_line()}")
