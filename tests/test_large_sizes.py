"""Large sizes: int32 plane limits, requests larger than memory, and the kernels' memory bound.

* A max-pool plane with D*H*W above INT32_MAX is rejected with the status of
  docs/operator-semantics.md (forward 561103, backward 161002) before anything is
  allocated: zero-stride views stand in for the huge arrays, and neither the
  process RSS nor the backend's device allocations grow.
* A request larger than the (emulated) device memory fails with
  pyaclnn.AclOutOfMemoryError (a MemoryError) and a clear message, frees
  what the call had allocated, and the next call works.
* One call of each tuned NumPy kernel (what the numpy backend runs on a large
  call the compiled kernels do not take) on a moderately large case allocates
  at most about twice its output (+ 16 MiB), measured with tracemalloc. The
  reference kernels, the specification, have no such bound; the backend runs
  one only on small calls (pyaclnn.backends.numpy._kernels.TUNED_MIN_ELEMENTS).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import pyaclnn
from pyaclnn import AclnnError, AclOutOfMemoryError, backends, constants, runtime
from pyaclnn.backends.numpy import _kernels
from pyaclnn.kernels._tuned import grid_sampler3d as kgrid
from pyaclnn.kernels._tuned import max_pool3d as kpool

HUGE = (1, 2, 2048, 2048, 1024)  # D*H*W = 2**32 per plane
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def _child(script: str, env: dict[str, str], timeout: float = 120) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert proc.stderr == "", proc.stderr
    return proc.stdout


# -- INT32_MAX planes ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [HUGE, HUGE[1:], (1, 1, 1, 2**31, 1)], ids=["5-D", "4-D", "one long axis"])
@pytest.mark.parametrize("as_device", [False, True], ids=["numpy", "device"])
def test_a_max_pool_plane_above_int32_max_is_rejected_without_allocating(backend, shape, as_device):
    x = np.broadcast_to(np.float32(1), shape)  # no memory behind it
    idx = np.broadcast_to(np.int32(0), shape)
    runtime.context(backend)
    if as_device:  # a zero-stride DeviceArray holds one element
        x, idx = pyaclnn.to_device(x, backend=backend), pyaclnn.to_device(idx, backend=backend)
        assert x.storage_nbytes == 4
    before_counts, before_rss = backends.get(backend).live_counts(), rss()
    with pytest.raises(AclnnError) as fwd:
        pyaclnn.max_pool3d_with_argmax(x, 1, backend=backend)
    with pytest.raises(AclnnError) as bwd:
        pyaclnn.max_pool3d_with_argmax_backward(x, x, idx, 1, backend=backend)
    assert fwd.value.status == constants.ACLNN_ERR_INNER_NULLPTR
    assert fwd.value.status_name == "ACLNN_ERR_INNER_NULLPTR"
    assert bwd.value.status == constants.ACLNN_ERR_PARAM_INVALID
    assert bwd.value.status_name == "ACLNN_ERR_PARAM_INVALID"
    for info in (fwd, bwd):
        assert "INT32_MAX" in str(info.value) and "D*H*W" in str(info.value)
    assert backends.get(backend).live_counts() == before_counts
    assert rss() - before_rss < 32 << 20
    if as_device:
        x.close()
        idx.close()


GRID_HUGE_SCRIPT = """
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    import numpy as np, pyaclnn
    x = np.broadcast_to(np.float32(2.5), (1, 1, 2048, 2048, 1024))
    grid = np.zeros((1, 1, 1, 2, 3), np.float32)
    try:
        out = pyaclnn.grid_sampler3d(x, grid)
    except MemoryError as exc:
        assert str(exc), "MemoryError without a message"
        print("MemoryError", type(exc).__name__)
    else:
        assert out.shape == (1, 1, 1, 1, 2) and np.allclose(out, 2.5), out
        print("result")
"""


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_grid_sampler_on_a_huge_broadcast_input_never_crashes(name, emulator_home):
    """The grid sampler has no plane limit (docs/operator-semantics.md, GridSampler3D): the emulator reads the
    zero-stride input lazily and answers; the numpy kernel copies the input into a channels-last
    table (16 GiB here), so under a 4 GiB address-space limit it must fail cleanly."""
    out = _child(GRID_HUGE_SCRIPT, {"PYACLNN_BACKEND": name, "PYACLNN_ASCEND_HOME": str(emulator_home)})
    assert out.split()[0] in ("MemoryError", "result")
    if name == "npu":
        assert out.strip() == "result"


# -- larger than memory --------------------------------------------------------------------------


def test_an_allocation_larger_than_device_memory_is_a_memory_error(backend):
    runtime.context(backend)
    before = backends.get(backend).live_counts()
    for make in (
        lambda: pyaclnn.empty((2**40,), backend=backend),
        lambda: pyaclnn.zeros((2**20, 2**20, 64), np.float16, backend=backend),
    ):
        with pytest.raises(AclOutOfMemoryError) as info:
            make()
        assert isinstance(info.value, MemoryError)
        assert info.value.api == "aclrtMalloc"
        assert info.value.status == constants.ACL_ERROR_RT_MEMORY_ALLOCATION
        assert "allocat" in info.value.message or "provide" in info.value.message
    assert backends.get(backend).live_counts() == before


OOM_SCRIPT = """
    import numpy as np, pyaclnn
    from pyaclnn import backends, runtime
    inp = np.ones((1, 64, 2, 2, 2), np.float32)
    grid = np.zeros((1, 32, 32, 32, 3), np.float32)       # 384 KiB
    pool = runtime.memory_pool()
    before = pool.stats()["in_use_bytes"]
    try:
        pyaclnn.grid_sampler3d(inp, grid)                   # output: 8 MiB > 4 MiB of device memory
    except pyaclnn.AclOutOfMemoryError as exc:
        assert isinstance(exc, MemoryError) and "cannot allocate" in str(exc), exc
        print("oom:", exc.api)
    else:
        raise SystemExit("no AclOutOfMemoryError")
    assert pool.stats()["in_use_bytes"] == before, (before, pool.stats())  # the call's copies went back
    small = pyaclnn.grid_sampler3d(inp, grid[:, :4, :4, :4])  # and the next call works
    assert small.shape == (1, 64, 4, 4, 4) and np.allclose(small, 1.0)
    x = np.ones((1, 1, 96, 96, 96), np.float32)            # 3.4 MiB in, out + indices 3.4 MiB more
    try:
        pyaclnn.max_pool3d_with_argmax(x, 1, 1)
    except MemoryError as exc:
        print("oom:", exc.api)
    pyaclnn.finalize()
    assert not any(backends.get().live_counts().values())
"""


def test_an_op_whose_output_exceeds_device_memory_fails_cleanly():
    # NumPy calls copy through device memory here, as on an NPU (no mapping of host memory).
    env = {"PYACLNN_BACKEND": "numpy", "PYACLNN_NUMPY_DEVICE_MEMORY": str(4 << 20), "PYACLNN_MAP_HOST": "0"}
    out = _child(OOM_SCRIPT, env)
    assert out.split("\n")[:2] == ["oom: aclrtMalloc", "oom: aclrtMalloc"]


MAPPED_SCRIPT = """
    import numpy as np, pyaclnn
    from pyaclnn import backends
    inp = np.ones((1, 64, 2, 2, 2), np.float32)
    grid = np.zeros((1, 8, 8, 8, 3), np.float32)
    out = pyaclnn.grid_sampler3d(inp, grid)  # 8 MiB written where it is: no device memory used
    assert out.shape == (1, 64, 8, 8, 8) and np.all(out == 1.0)
    pyaclnn.finalize()
    assert not any(backends.get().live_counts().values())
    print("ok")
"""


def test_a_numpy_call_on_the_numpy_backend_needs_no_device_memory_for_its_arrays():
    out = _child(MAPPED_SCRIPT, {"PYACLNN_BACKEND": "numpy", "PYACLNN_NUMPY_DEVICE_MEMORY": str(4 << 20)})
    assert out.strip() == "ok"


# -- the kernels' memory bound ------------------------------------------------------------------------

SLACK = 16 << 20
RNG = np.random.default_rng(4)


def _peak_extra(fn) -> int:
    """Peak bytes allocated (and traced: NumPy reports to tracemalloc) during ``fn()`` beyond what existed."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _pool_forward():
    x = RNG.standard_normal((2, 8, 96, 96, 96), dtype=np.float32)  # 54 MiB
    out = np.empty((2, 8, 95, 95, 95), np.float32)
    idx = np.empty(out.shape, np.int32)
    return (
        lambda: kpool.max_pool3d_with_argmax(x, ((2,) * 3, (1,) * 3, (0,) * 3, (1,) * 3), out, idx),
        out.nbytes + idx.nbytes,
        lambda: out[0, 0, 0, 0, :2].tolist() != [0, 0],
    )


def _pool_backward(dtype):
    x = RNG.standard_normal((2, 16, 64, 64, 64), dtype=np.float32)
    out = np.empty((2, 16, 32, 32, 32), np.float32)
    idx = np.empty(out.shape, np.int32)
    kpool.max_pool3d_with_argmax(x, ((2,) * 3, (2,) * 3, (0,) * 3, (1,) * 3), out, idx)
    g = RNG.standard_normal(out.shape).astype(dtype)
    gi = np.empty(x.shape, dtype)
    return lambda: kpool.max_pool3d_with_argmax_backward(g, idx, gi), gi.nbytes, lambda: gi.any()


def _grid_forward():
    inp = RNG.standard_normal((1, 32, 32, 32, 32), dtype=np.float32)
    grid = RNG.uniform(-1.1, 1.1, (1, 96, 96, 96, 3)).astype(np.float32)
    out = np.empty((1, 32, 96, 96, 96), np.float32)  # 108 MiB
    return (
        lambda: kgrid.grid_sampler3d((inp, grid), (0, 1, False), out),
        out.nbytes,
        lambda: np.isfinite(out).all(),
    )


def _grid_backward(points: int, mask=(True, True)):
    inp = RNG.standard_normal((1, 32, 64, 64, 64), dtype=np.float32)  # 32 MiB
    grid = RNG.uniform(-1.1, 1.1, (1, points, points, points, 3)).astype(np.float32)
    gout = RNG.standard_normal((1, 32, points, points, points), dtype=np.float32)
    ig = np.empty(inp.shape, np.float32) if mask[0] else None
    gg = np.empty(grid.shape, np.float32) if mask[1] else None
    size = sum(a.nbytes for a in (ig, gg) if a is not None)
    return (
        lambda: kgrid.grid_sampler3d_backward((gout, inp, grid), (0, 0, False), (ig, gg)),
        size,
        lambda: all(np.isfinite(a).all() for a in (ig, gg) if a is not None),
    )


CASES = {
    "max_pool3d_with_argmax": _pool_forward,
    "max_pool3d_with_argmax_backward fp32": lambda: _pool_backward(np.float32),
    "max_pool3d_with_argmax_backward fp16": lambda: _pool_backward(np.float16),
    "grid_sampler3d": _grid_forward,
    "grid_sampler3d_backward 64**3 points": lambda: _grid_backward(64),
    "grid_sampler3d_backward 72**3 points": lambda: _grid_backward(72),
    "grid_sampler3d_backward input_grad only, 72**3 points": lambda: _grid_backward(72, (True, False)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_tuned_kernel_allocates_at_most_twice_its_output(case):
    fn, output_bytes, sane = CASES[case]()
    assert output_bytes >= 4 * _kernels.TUNED_MIN_ELEMENTS  # a call the backend gives the tuned kernel
    peak = _peak_extra(fn)
    assert sane(), "the kernel did not write its output"
    assert peak <= 2 * output_bytes + SLACK, (
        f"{case}: {peak / 2**20:.1f} MiB of scratch for {output_bytes / 2**20:.1f} MiB of output"
    )
