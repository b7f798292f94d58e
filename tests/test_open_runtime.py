"""Memory and streams of other libraries, out=, several devices, no silent conversion.

Memory from the low-level ``acl.rt.malloc`` and streams from
``acl.rt.create_stream`` stand in for what torch_npu or pyACL hold. The
oracles: max-pooling an increasing input picks each window's last element,
and the grid sampler at the voxel centres with align_corners=True returns the
input itself. Several devices run in a child process (the emulations read
``PYACLNN_EMU_DEVICES`` once per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import pyaclnn
from pyaclnn import acl, constants

H2D = constants.ACL_MEMCPY_HOST_TO_DEVICE
ROOT = Path(__file__).resolve().parent.parent


def _increasing() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)
    return x, x[..., 1::2, 1::2, 1::2]


def _identity_grid(shape: tuple[int, ...]) -> np.ndarray:
    """The voxel centres of a (D, H, W) volume as (x, y, z) in [-1, 1] (align_corners=True)."""
    d, h, w = shape
    z, y, x = np.meshgrid(np.linspace(-1, 1, d), np.linspace(-1, 1, h), np.linspace(-1, 1, w), indexing="ij")
    return np.stack([x, y, z], axis=-1)[np.newaxis].astype(np.float32)


def _as_the_other_library_does(backend: str) -> None:
    """The other library (torch_npu, pyACL) sets its device in its thread before it allocates or
    makes a stream: CANN's current context is per thread (tests/emulator/README.md)."""
    acl.rt.set_device(0, backend=backend)


class _Foreign:
    """Device memory another library owns: acl.rt.malloc'd, uploaded, freed exactly once."""

    def __init__(self, backend: str, host: np.ndarray) -> None:
        _as_the_other_library_does(backend)
        self.backend = backend
        self.nbytes = max(host.nbytes, 1)
        self.ptr = acl.rt.malloc(self.nbytes, backend=backend)
        if host.nbytes:
            data = np.ascontiguousarray(host).view(np.uint8)
            acl.rt.memcpy(self.ptr, self.nbytes, data, data.nbytes, H2D, backend=backend)

    def free(self) -> None:
        acl.rt.free(self.ptr, backend=self.backend)
        with pytest.raises(pyaclnn.AclError):  # exactly once: pyaclnn freed nothing of it
            acl.rt.free(self.ptr, backend=self.backend)


def test_wrapped_memory_works_as_input_and_out_and_is_never_freed_by_pyaclnn(backend):
    x, expected = _increasing()
    source = _Foreign(backend, x)
    target = _Foreign(backend, np.zeros(expected.shape, np.float32))
    index = _Foreign(backend, np.zeros(expected.shape, np.int32))
    dx = pyaclnn.DeviceArray.from_ptr(source.ptr, x.shape, np.float32, backend=backend)
    out = pyaclnn.DeviceArray.from_ptr(target.ptr, expected.shape, np.float32, backend=backend)
    indices = pyaclnn.DeviceArray.from_ptr(index.ptr, expected.shape, "int32", backend=backend)
    got = pyaclnn.max_pool3d_with_argmax(dx, 2, out=(out, indices), backend=backend)
    assert got[0] is out and got[1] is indices
    np.testing.assert_array_equal(out.numpy(), expected)
    for wrapper in (dx, out, indices):
        wrapper.close()
        wrapper.close()  # idempotent, and it never frees
    for memory in (source, target, index):
        memory.free()


def test_a_strided_wrapper_with_an_offset_reads_the_view_it_describes(backend):
    x, expected = _increasing()
    big = np.zeros((3, *x.shape[1:]), np.float32)
    big[1] = x[0]
    memory = _Foreign(backend, big)
    element_strides = tuple(s // 4 for s in big.strides)
    view = pyaclnn.DeviceArray.from_ptr(
        memory.ptr, x.shape, np.float32, strides=element_strides, offset=element_strides[0], backend=backend
    )
    np.testing.assert_array_equal(view.numpy(), x)
    out, indices = pyaclnn.max_pool3d_with_argmax(view, 2, backend=backend)
    np.testing.assert_array_equal(out.numpy(), expected)
    for array in (view, out, indices):
        array.close()
    memory.free()


def test_the_numpy_backend_refuses_a_pointer_it_does_not_know_or_a_range_past_its_end():
    with pytest.raises(ValueError, match="is not inside one allocation"):
        pyaclnn.DeviceArray.from_ptr(0x12340, (4,), np.float32, backend="numpy")  # aligned, unknown
    memory = _Foreign("numpy", np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="is not inside one allocation"):
        pyaclnn.DeviceArray.from_ptr(memory.ptr, (5,), np.float32, backend="numpy")
    with pytest.raises(TypeError, match="ptr must be an int"):
        pyaclnn.DeviceArray.from_ptr("0x10", (4,), np.float32, backend="numpy")
    with pytest.raises(ValueError, match="negative"):
        pyaclnn.DeviceArray.from_ptr(memory.ptr, (-1,), np.float32, backend="numpy")
    memory.free()
    pyaclnn.finalize("numpy")


def test_an_external_stream_runs_the_ops_and_is_never_destroyed_by_pyaclnn(backend):
    x, expected = _increasing()
    _as_the_other_library_does(backend)
    handle = acl.rt.create_stream(backend=backend)
    stream = pyaclnn.ExternalStream(handle, backend=backend)
    with pyaclnn.to_device(x, backend=backend, stream=stream) as dx:
        out, indices = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend, stream=stream)
        grid = _identity_grid(x.shape[2:])
        sampled = pyaclnn.grid_sampler3d(x, grid, align_corners=True, backend=backend, stream=stream)
        np.testing.assert_allclose(sampled, x, atol=1e-5)
        np.testing.assert_array_equal(out.numpy(), expected)
        stream._state.workspace(64)  # pyaclnn's own buffer for it, given back at close
    out.close()
    indices.close()
    stream.close()
    assert stream.closed
    acl.rt.destroy_stream(handle, backend=backend)
    with pytest.raises(pyaclnn.AclError):
        acl.rt.destroy_stream(handle, backend=backend)


def test_an_external_stream_takes_an_int_handle_on_the_npu_backend(emulator_home):
    os.environ["PYACLNN_ASCEND_HOME"] = str(emulator_home)
    from pyaclnn.backends.npu._ffi import ffi

    x, expected = _increasing()
    _as_the_other_library_does("npu")
    handle = acl.rt.create_stream(backend="npu")
    address = int(ffi.cast("uintptr_t", handle))
    stream = pyaclnn.ExternalStream(address, backend="npu")
    out, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend="npu", stream=stream)
    np.testing.assert_array_equal(out, expected)
    stream.close()
    acl.rt.destroy_stream(handle, backend="npu")
    with pytest.raises(TypeError, match="aclrtStream"):
        pyaclnn.ExternalStream("stream", backend="npu")
    pyaclnn.finalize("npu")


def test_out_on_the_four_ops_is_written_and_returned(backend):
    x, expected = _increasing()
    grad = np.ones(expected.shape, np.float32)
    _, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
    reference_grad = pyaclnn.max_pool3d_with_argmax_backward(grad, x, idx, 2, backend=backend)
    grid = _identity_grid(x.shape[2:])
    reference_ig, reference_gg = pyaclnn.grid_sampler3d_backward(
        x, x, grid, align_corners=True, backend=backend
    )
    with (
        pyaclnn.empty(x.shape, backend=backend) as grad_input,
        pyaclnn.empty(x.shape, backend=backend) as sampled,
    ):
        assert (
            pyaclnn.max_pool3d_with_argmax_backward(grad, x, idx, 2, out=grad_input, backend=backend)
            is grad_input
        )
        np.testing.assert_array_equal(grad_input.numpy(), reference_grad)
        assert pyaclnn.grid_sampler3d(x, grid, align_corners=True, out=sampled, backend=backend) is sampled
        np.testing.assert_allclose(sampled.numpy(), x, atol=1e-5)
        with pyaclnn.empty(grid.shape, backend=backend) as grid_grad:
            ig, gg = pyaclnn.grid_sampler3d_backward(
                x, x, grid, align_corners=True, out=(None, grid_grad), backend=backend
            )
            assert gg is grid_grad
            np.testing.assert_allclose(gg.numpy(), reference_gg, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(ig.numpy(), reference_ig, rtol=1e-5, atol=1e-5)
            ig.close()


def test_a_non_contiguous_out_gets_the_values_in_its_own_layout(backend):
    x, _ = _increasing()
    grid = _identity_grid(x.shape[2:])
    channels_last = np.zeros((1, 4, 4, 4, 2), np.float32)  # NDHWC storage seen as NCDHW
    memory = _Foreign(backend, channels_last)
    strides = (128, 1, 32, 8, 2)
    out = pyaclnn.DeviceArray.from_ptr(memory.ptr, x.shape, np.float32, strides=strides, backend=backend)
    pyaclnn.grid_sampler3d(x, grid, align_corners=True, out=out, backend=backend)
    np.testing.assert_allclose(out.numpy(), x, atol=1e-5)
    assert not out.is_contiguous()
    out.close()
    memory.free()


def test_a_wrong_out_is_refused_naming_out(backend):
    x, expected = _increasing()
    with pyaclnn.empty((1, 2, 2, 2, 3), backend=backend) as wrong_shape:
        with pytest.raises(ValueError, match=r"out\[0\] has shape \[1, 2, 2, 2, 3\]"):
            pyaclnn.max_pool3d_with_argmax(x, 2, out=(wrong_shape, None), backend=backend)
    with pyaclnn.empty(expected.shape, np.float16, backend=backend) as wrong_dtype:
        with pytest.raises(ValueError, match="out has shape .* and dtype float16"):
            pyaclnn.grid_sampler3d(x, _identity_grid((2, 2, 2)), out=wrong_dtype, backend=backend)
    closed = pyaclnn.empty(x.shape, backend=backend)
    closed.close()
    with pytest.raises(ValueError, match="out is a closed DeviceArray"):
        pyaclnn.grid_sampler3d(x, _identity_grid((4, 4, 4)), out=closed, backend=backend)
    with pytest.raises(TypeError, match="out must be a pair"):
        pyaclnn.grid_sampler3d_backward(x, x, _identity_grid((4, 4, 4)), out=np.zeros(3), backend=backend)
    with pytest.raises(TypeError, match="out must be a pyaclnn.DeviceArray, a NumPy array or None"):
        pyaclnn.grid_sampler3d(x, _identity_grid((4, 4, 4)), out=x.tolist(), backend=backend)


def test_from_torch_wraps_an_object_with_the_tensor_interface_and_keeps_it_alive(backend):
    x, expected = _increasing()
    memory = _Foreign(backend, x)
    storage = SimpleNamespace(data_ptr=lambda: memory.ptr)
    tensor = SimpleNamespace(
        data_ptr=lambda: memory.ptr,
        untyped_storage=lambda: storage,
        storage_offset=lambda: 0,
        shape=x.shape,
        stride=lambda: tuple(s // 4 for s in x.strides),
        dtype="torch.float32",
        device=SimpleNamespace(type="npu", index=0),
    )
    wrapped = pyaclnn.from_torch(tensor, backend=backend)
    assert wrapped._block.owner is tensor
    out, indices = pyaclnn.max_pool3d_with_argmax(wrapped, 2, backend=backend)
    np.testing.assert_array_equal(out.numpy(), expected)
    for array in (wrapped, out, indices):
        array.close()
    memory.free()
    _as_the_other_library_does(backend)
    handle = acl.rt.create_stream(backend=backend)
    stream = pyaclnn.ExternalStream.from_torch(SimpleNamespace(npu_stream=handle), backend=backend)
    stream.close()
    acl.rt.destroy_stream(handle, backend=backend)
    with pytest.raises(TypeError, match="not an NPU"):
        pyaclnn.from_torch(SimpleNamespace(**{**vars(tensor), "device": SimpleNamespace(type="cpu")}))


def test_device_arrays_are_never_converted_silently(backend, torch):
    with pyaclnn.zeros((2, 3), backend=backend) as array:
        with pytest.raises(TypeError, match=r"call \.numpy\(\)"):
            np.asarray(array)
        with pytest.raises(TypeError, match=r"call \.numpy\(\)"):
            np.array(array)
    with pytest.raises(TypeError, match="from_torch"):
        pyaclnn.max_pool3d_with_argmax(torch.zeros(1, 1, 2, 2, 2), 2, backend=backend)
    with pytest.raises(TypeError, match="input is a list: pass a NumPy array"):
        pyaclnn.max_pool3d_with_argmax([[[[0.0]]]], 1, backend=backend)


_TWO_DEVICES = textwrap.dedent(
    """
    import json, sys, threading
    import numpy as np
    import pyaclnn
    from pyaclnn import backends

    backend = sys.argv[1]
    report = {"count": pyaclnn.device_count(backend=backend)}
    x = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)
    expected = x[..., 1::2, 1::2, 1::2]
    with pyaclnn.Device(1, backend=backend):
        report["current"] = pyaclnn.get_device(backend=backend)
        dx = pyaclnn.to_device(x, backend=backend)
        out, idx = pyaclnn.max_pool3d_with_argmax(dx, 2, backend=backend)
        grad = pyaclnn.max_pool3d_with_argmax_backward(pyaclnn.to_device(np.ones(expected.shape, np.float32),
                                                       backend=backend), dx, idx, 2, backend=backend)
        d, h, w = np.meshgrid(*(np.linspace(-1, 1, 4),) * 3, indexing="ij")
        grid = np.stack([w, h, d], -1)[None].astype(np.float32)
        sampled = pyaclnn.grid_sampler3d(dx, pyaclnn.to_device(grid, backend=backend), align_corners=True,
                                         backend=backend)
        ig, gg = pyaclnn.grid_sampler3d_backward(sampled, dx, pyaclnn.to_device(grid, backend=backend),
                                                 align_corners=True, backend=backend)
        report["devices"] = [a.device for a in (dx, out, idx, grad, sampled, ig, gg)]
        report["pool_ok"] = bool(np.array_equal(out.numpy(), expected))
        report["grad_sum"] = float(grad.numpy().sum())
        report["sampled_ok"] = bool(np.allclose(sampled.numpy(), x, atol=1e-5))
        report["ig_finite"] = bool(np.isfinite(ig.numpy()).all() and np.isfinite(gg.numpy()).all())
        report["device1_allocs"] = backends.get(backend).live_counts(device=1)["device_allocs"]
    report["back"] = pyaclnn.get_device(backend=backend)
    on_zero = pyaclnn.to_device(x, backend=backend)
    try:
        with pyaclnn.Device(1, backend=backend):
            pyaclnn.max_pool3d_with_argmax(on_zero, 2, backend=backend)
        report["refused"] = ""
    except ValueError as exc:
        report["refused"] = str(exc)
    results = {}
    def work(device):
        pyaclnn.set_device(device, backend=backend)
        for _ in range(20):
            got, _ = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend)
            assert np.array_equal(got, expected)
        results[device] = pyaclnn.get_device(backend=backend)
    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads: t.start()
    for t in threads: t.join()
    report["threads"] = results
    for a in (dx, out, idx, grad, sampled, ig, gg, on_zero):
        a.close()
    pyaclnn.finalize(backend)
    report["left"] = backends.get(backend).live_counts()
    report["hazards"] = backends.get(backend).hazard_count()
    print(json.dumps(report))
    """
)


@pytest.mark.parametrize("name", ["numpy", "npu"])
def test_two_emulated_devices_run_the_ops_on_device_1_and_refuse_mixing(name, emulator_home):
    env = {
        **os.environ,
        "PYACLNN_EMU_DEVICES": "2",
        "PYACLNN_ASCEND_HOME": str(emulator_home),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES, name], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["count"] == 2 and report["current"] == 1 and report["back"] == 0
    assert report["devices"] == [1] * 7
    assert report["pool_ok"] and report["sampled_ok"] and report["ig_finite"]
    assert report["grad_sum"] == 16.0  # one gradient per window, each written once
    assert report["device1_allocs"] > 0
    assert "lives on device 0, but this call runs on device 1" in report["refused"]
    assert report["threads"] == {"0": 0, "1": 1}
    assert not any(report["left"].values()) and report["hazards"] == 0
