"""Memory statistics as torch.cuda names them, on both backends.

``memory_allocated`` counts the blocks arrays hold, ``memory_reserved`` those
not freed (held or cached), each with its peak; ``empty_cache`` frees the cached
blocks once the work queued before their release is done; ``mem_get_info`` is
``aclrtGetMemInfo``, whose device size the emulations take from the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyaclnn

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20
X = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)


@pytest.fixture
def fresh(backend):
    """The backend from nothing: no block allocated or cached, peaks at zero."""
    pyaclnn.finalize(backend)
    pyaclnn.synchronize(backend=backend)
    pyaclnn.reset_peak_memory_stats(backend=backend)
    return backend


def test_allocated_follows_the_arrays_and_reserved_the_cache(fresh):
    b = fresh
    assert pyaclnn.memory_allocated(backend=b) == 0 and pyaclnn.memory_reserved(backend=b) == 0
    counted = pyaclnn.memory_stats(backend=b)  # the counts of calls are cumulative, as torch's
    a = pyaclnn.empty((MIB // 4 + 1,), np.float32, backend=b)  # 1 MiB + 4 B: two whole MiB
    assert pyaclnn.memory_allocated(backend=b) == 2 * MIB == pyaclnn.memory_reserved(backend=b)
    a.close()
    pyaclnn.synchronize(backend=b)
    assert pyaclnn.memory_allocated(backend=b) == 0  # released ...
    assert pyaclnn.memory_reserved(backend=b) == 2 * MIB  # ... and cached
    assert pyaclnn.max_memory_allocated(backend=b) == 2 * MIB
    again = pyaclnn.empty((MIB // 4 + 1,), np.float32, backend=b)  # the cached block again
    assert pyaclnn.memory_reserved(backend=b) == 2 * MIB
    stats = pyaclnn.memory_stats(backend=b)
    assert stats["num_device_alloc"] == counted["num_device_alloc"] + 1
    assert stats["allocated_bytes.all.current"] == 2 * MIB
    again.close()
    pyaclnn.empty_cache(backend=b)
    assert pyaclnn.memory_reserved(backend=b) == 0
    assert pyaclnn.memory_stats(backend=b)["num_device_free"] == counted["num_device_free"] + 1
    assert pyaclnn.max_memory_reserved(backend=b) == 2 * MIB
    pyaclnn.reset_peak_memory_stats(backend=b)
    assert pyaclnn.max_memory_reserved(backend=b) == 0 == pyaclnn.max_memory_allocated(backend=b)


def test_empty_cache_frees_a_block_only_once_the_work_using_it_is_done(fresh, monkeypatch):
    b = fresh
    with pyaclnn.Stream(backend=b) as s:
        x = pyaclnn.to_device(X, backend=b, stream=s)
        monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "300000")
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b, stream=s)
        monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
        x.close()  # released to s, whose kernel still reads it
        assert not s.query()
        pyaclnn.empty_cache(backend=b)  # waits for s's work before freeing x's block (no hazard)
        assert s.query()
        np.testing.assert_array_equal(out.numpy(), X[..., 1::2, 1::2, 1::2])
        assert pyaclnn.memory_allocated(backend=b) == pyaclnn.memory_reserved(backend=b) == 1024
        for a in (out, idx):
            a.close()


def test_a_graphs_memory_counts_while_the_graph_holds_it(fresh):
    b = fresh
    x = pyaclnn.to_device(X, backend=b)
    pyaclnn.synchronize(backend=b)
    before = pyaclnn.memory_allocated(backend=b)
    g = pyaclnn.Graph(backend=b)
    with pyaclnn.graph(g):
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=b)
    during = pyaclnn.memory_allocated(backend=b)
    assert during > before
    for a in (out, idx, g):
        a.close()
    assert pyaclnn.memory_allocated(backend=b) == before
    x.close()
    assert pyaclnn.memory_allocated(backend=b) == 0


def test_every_memory_function_takes_the_device_first_and_refuses_one_that_does_not_exist(fresh):
    calls = [
        pyaclnn.memory_allocated,
        pyaclnn.max_memory_allocated,
        pyaclnn.memory_reserved,
        pyaclnn.max_memory_reserved,
        pyaclnn.reset_peak_memory_stats,
        pyaclnn.memory_stats,
        pyaclnn.empty_cache,
        pyaclnn.mem_get_info,
    ]
    for call in calls:
        call(0, backend=fresh)
        with pytest.raises(ValueError, match=r"device 7 does not exist"):
            call(7, backend=fresh)
        assert "Returns" in (call.__doc__ or "") and "device : int or pyaclnn.Device" in (call.__doc__ or "")


def test_mem_get_info_is_the_devices_free_and_total_bytes(fresh):
    free, total = pyaclnn.mem_get_info(backend=fresh)
    a = pyaclnn.empty((MIB // 4,), np.float32, backend=fresh)
    assert pyaclnn.mem_get_info(backend=fresh) == (free - MIB, total)
    a.close()


@pytest.mark.parametrize(
    "backend_name, variable", [("numpy", "PYACLNN_NUMPY_DEVICE_MEMORY"), ("npu", "PYACLNN_EMU_DEVICE_MEMORY")]
)
def test_the_emulated_device_size_comes_from_the_environment(emulator_home, backend_name, variable):
    code = (
        "import numpy as np, pyaclnn\n"
        f"b = {backend_name!r}\n"
        "print(pyaclnn.mem_get_info(backend=b)[1])\n"
        "try:\n"
        "    pyaclnn.empty((64 << 20,), np.uint8, backend=b)\n"
        "except pyaclnn.AclOutOfMemoryError:\n"
        "    print('out of memory')\n"
        "print(pyaclnn.memory_stats(backend=b)['num_ooms'])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYACLNN_")}
    env.update(PYACLNN_ASCEND_HOME=str(emulator_home), PYTHONPATH=str(ROOT), **{variable: str(32 << 20)})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.stdout.split("\n")[:3] == [str(32 << 20), "out of memory", "1"], proc.stdout + proc.stderr


def test_a_memory_pool_says_what_it_holds_and_exposes_no_internals(fresh):
    pool = pyaclnn.memory_pool(backend=fresh)
    a = pyaclnn.empty((128,), np.float32, backend=fresh)
    assert repr(pool) == f"<pyaclnn.MemoryPool backend={fresh!r} device=0 allocated=512 reserved=512>"
    public = {name for name in vars(pool) if not name.startswith("_")}
    assert public == {"backend", "device"}
    a.close()
