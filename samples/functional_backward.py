"""The two operator documents' samples on the functional API, a few lines each.

The same inputs as ``max_pool3d_with_argmax_backward.py`` and
``grid_sampler3d_backward.py`` (the low-level ports of the C++ samples), and
the same printed lines: pyaclnn allocates the outputs, runs both phases,
copies the results back and frees everything.

Run::

    python samples/functional_backward.py [--backend {numpy,npu}]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

import pyaclnn
from pyaclnn.backends.npu import LibraryNotFoundError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("numpy", "npu"), help="default: the active backend")
    args = parser.parse_args(argv)

    # aclnnMaxPool3dWithArgmaxBackward: the gradient goes to the maximum (index 6) of the 2x2x2 window.
    grad_output = np.array([0.4757], dtype=np.float32).reshape(1, 1, 1, 1, 1)
    x = np.array(
        [0.0850, -0.5147, -0.0212, -0.5654, -0.3222, 0.5847, 1.7510, 0.9954], dtype=np.float32
    ).reshape(1, 1, 2, 2, 2)
    indices = np.array([6], dtype=np.int32).reshape(1, 1, 1, 1, 1)
    grad_input = pyaclnn.max_pool3d_with_argmax_backward(
        grad_output,
        x,
        indices,
        kernel_size=2,
        stride=2,
        padding=0,
        dilation=1,
        ceil_mode=False,
        backend=args.backend,
    )
    for i, value in enumerate(grad_input.ravel()):
        print(f"result[{i}] is: {value:f}")

    # aclnnGridSampler3DBackward: bilinear, zeros padding, align_corners=False, both gradients.
    grad_output = np.ones((1, 1, 1, 2, 2), dtype=np.float32)
    x = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 1, 3, 3)
    grid = np.array([-1, -1, 0, -1, 1, -1, -1, 0, 0, 0, 1, 0], dtype=np.float32).reshape(1, 1, 2, 2, 3)
    input_grad, grid_grad = pyaclnn.grid_sampler3d_backward(
        grad_output,
        x,
        grid,
        interpolation_mode="bilinear",
        padding_mode="zeros",
        align_corners=False,
        output_mask=(True, True),
        backend=args.backend,
    )
    for i, value in enumerate(input_grad.ravel()):
        print(f"inputGradResultData[{i}] is: {value:f}")
    for i, value in enumerate(grid_grad.ravel()):
        print(f"gridGradResultData[{i}] is: {value:f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LibraryNotFoundError as exc:  # no usable CANN (--backend npu without it): one line, exit 1
        sys.exit(f"{sys.argv[0]}: {exc.one_line()}")
