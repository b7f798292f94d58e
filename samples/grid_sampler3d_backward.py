"""aclnnGridSampler3DBackward on the low-level API, step by step as in C.

A Python port of the operator document's C++ sample: the same tensors
(bilinear, zeros padding, align_corners false, both gradients asked for), the
same calls in the same order, the same printed lines. Every ``acl.*`` /
``aclnn.*`` function mirrors one C function and raises ``pyaclnn.AclError`` /
``pyaclnn.AclnnError`` instead of returning a status; every resource is
registered for release right after it is created, so it is freed on error
paths too.

Run::

    python samples/grid_sampler3d_backward.py            # active backend
    python samples/grid_sampler3d_backward.py --backend numpy
    ASCEND_HOME_PATH=build/emulator-home python samples/grid_sampler3d_backward.py --backend npu
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


def copy_to_host(device_addr: int, shape: Sequence[int]) -> np.ndarray:
    """aclrtMemcpy of a float32 device tensor into a new host array."""
    size = get_shape_size(shape)
    result = np.zeros(size, dtype=np.float32)
    rt.memcpy(result, result.nbytes, device_addr, size * result.itemsize, ACL_MEMCPY_DEVICE_TO_HOST)
    return result


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
        interpolation_mode = 0  # bilinear
        padding_mode = 0  # zeros
        align_corners = False
        grad_output_shape = [1, 1, 1, 2, 2]
        input_shape = [1, 1, 1, 3, 3]
        grid_shape = [1, 1, 2, 2, 3]
        input_grad_shape = [1, 1, 1, 3, 3]
        grid_grad_shape = [1, 1, 2, 2, 3]
        grad_output_host_data = np.array([1, 1, 1, 1], dtype=np.float32)
        input_host_data = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9], dtype=np.float32)
        grid_host_data = np.array([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0], dtype=np.float32)
        input_grad_host_data = np.zeros(9, dtype=np.float32)
        grid_grad_host_data = np.zeros(12, dtype=np.float32)
        mask_value = [True, True]
        output_mask = acl.create_bool_array(mask_value)
        cleanup.callback(acl.destroy_bool_array, output_mask)

        _, grad_output = create_acl_tensor(cleanup, grad_output_host_data, grad_output_shape, ACL_FLOAT)
        _, input_tensor = create_acl_tensor(cleanup, input_host_data, input_shape, ACL_FLOAT)
        _, grid = create_acl_tensor(cleanup, grid_host_data, grid_shape, ACL_FLOAT)
        input_grad_device_addr, input_grad = create_acl_tensor(
            cleanup, input_grad_host_data, input_grad_shape, ACL_FLOAT
        )
        grid_grad_device_addr, grid_grad = create_acl_tensor(
            cleanup, grid_grad_host_data, grid_grad_shape, ACL_FLOAT
        )

        # 3. The operator: phase 1 checks the arguments and sizes the workspace ...
        workspace_size, executor = aclnn.grid_sampler3d_backward_get_workspace_size(
            grad_output,
            input_tensor,
            grid,
            interpolation_mode,
            padding_mode,
            align_corners,
            output_mask,
            input_grad,
            grid_grad,
        )
        workspace_addr = 0
        if workspace_size > 0:
            workspace_addr = rt.malloc(workspace_size, ACL_MEM_MALLOC_HUGE_FIRST)
            cleanup.callback(rt.free, workspace_addr)
        # ... phase 2 launches it on the stream.
        aclnn.grid_sampler3d_backward(workspace_addr, workspace_size, executor, stream)

        # 4. Wait for the stream.
        rt.synchronize_stream(stream)

        # 5. Copy the results back to the host and print them.
        input_grad_result_data = copy_to_host(input_grad_device_addr, input_grad_shape)
        for i, value in enumerate(input_grad_result_data):
            print(f"inputGradResultData[{i}] is: {value:f}")
        grid_grad_result_data = copy_to_host(grid_grad_device_addr, grid_grad_shape)
        for i, value in enumerate(grid_grad_result_data):
            print(f"gridGradResultData[{i}] is: {value:f}")
        # 6./7. Leaving the with-block destroys the tensors and the mask, frees
        # the memory, destroys the stream, resets the device and finalizes ACL.
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LibraryNotFoundError as exc:  # no usable CANN (--backend npu without it): one line, exit 1
        sys.exit(f"{sys.argv[0]}: {exc.one_line()}")
