"""Trilinear sampling of a volume at grid points, then the gradients of both.

The forward samples a (1, 2, 3, 4, 5) volume at 2x2x2 points, some of them
outside [-1, 1] (border padding clamps those to the edge); the backward,
given the gradient of the sampled values, returns the gradients with respect
to the volume and to the grid coordinates. NumPy arrays in, NumPy arrays out.

Run::

    python samples/grid_sampler3d_forward_backward.py [--backend {numpy,npu}]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

import pyaclnn
from pyaclnn.backends.npu import LibraryNotFoundError

MODES = {"interpolation_mode": "bilinear", "padding_mode": "border", "align_corners": True}


def make_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The volume (1, 2, 3, 4, 5), the grid (1, 2, 2, 2, 3) and the output gradient (1, 2, 2, 2, 2)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, size=(1, 2, 2, 2, 3)).astype(np.float32)
    grad_output = rng.standard_normal((1, 2, 2, 2, 2)).astype(np.float32)
    return x, grid, grad_output


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("numpy", "npu"), help="default: the active backend")
    args = parser.parse_args(argv)

    x, grid, grad_output = make_inputs()
    out = pyaclnn.grid_sampler3d(x, grid, **MODES, backend=args.backend)
    input_grad, grid_grad = pyaclnn.grid_sampler3d_backward(
        grad_output, x, grid, **MODES, output_mask=(True, True), backend=args.backend
    )
    for name, values in (("out", out), ("inputGrad", input_grad), ("gridGrad", grid_grad)):
        for i, value in enumerate(values.ravel()):
            print(f"{name}[{i}] is: {value:f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except LibraryNotFoundError as exc:  # no usable CANN (--backend npu without it): one line, exit 1
        sys.exit(f"{sys.argv[0]}: {exc.one_line()}")
