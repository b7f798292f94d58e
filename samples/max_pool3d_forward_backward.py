"""Max pooling with argmax, then its backward, keeping the data on the device.

``pyaclnn.to_device`` copies the input once; the forward returns DeviceArrays
(pooled values and int32 argmax indices) that the backward takes as they are,
and only the printed results are copied back with ``.numpy()``. The windows
(kernel 3, stride 2, padding 1) overlap, so an input cell that is the maximum
of several windows receives the sum of their gradients.

Run::

    python samples/max_pool3d_forward_backward.py [--backend {numpy,npu}]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

import pyaclnn
from pyaclnn.backends.npu import LibraryNotFoundError

KERNEL_SIZE, STRIDE, PADDING = 3, 2, 1


def make_inputs() -> tuple[np.ndarray, np.ndarray]:
    """The sample's input (1, 1, 4, 4, 4) and the gradient of the pooled output (1, 1, 2, 2, 2)."""
    rng = np.random.default_rng(2024)
    x = rng.standard_normal((1, 1, 4, 4, 4)).astype(np.float32)
    grad_output = rng.standard_normal((1, 1, 2, 2, 2)).astype(np.float32)
    return x, grad_output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("numpy", "npu"), help="default: the active backend")
    args = parser.parse_args(argv)
    if args.backend:
        pyaclnn.set_backend(args.backend)

    x, grad_output = make_inputs()
    with pyaclnn.to_device(x) as x_dev, pyaclnn.to_device(grad_output) as grad_dev:
        out, indices = pyaclnn.max_pool3d_with_argmax(
            x_dev, kernel_size=KERNEL_SIZE, stride=STRIDE, padding=PADDING, ceil_mode=False
        )
        with out, indices:
            grad_input = pyaclnn.max_pool3d_with_argmax_backward(
                grad_dev, x_dev, indices, kernel_size=KERNEL_SIZE, stride=STRIDE, padding=PADDING
            )
            with grad_input:
                for i, value in enumerate(out.numpy().ravel()):
                    print(f"out[{i}] is: {value:f}")
                for i, value in enumerate(indices.numpy().ravel()):
                    print(f"indices[{i}] is: {value}")
                for i, value in enumerate(grad_input.numpy().ravel()):
                    print(f"gradInput[{i}] is: {value:f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LibraryNotFoundError as exc:  # no usable CANN (--backend npu without it): one line, exit 1
        sys.exit(f"{sys.argv[0]}: {exc.one_line()}")
