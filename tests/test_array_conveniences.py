"""DeviceArray as CuPy and torch users expect it: ``copy_`` into an existing array (queued),
``empty_like`` / ``zeros_like``, one rule for host data, and ``from_ptr``'s alignment."""

from __future__ import annotations

import numpy as np
import pytest

import pyaclnn

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def test_copy_from_numpy_is_queued_on_the_stream_and_returns_the_array(backend, monkeypatch):
    s = pyaclnn.Stream(backend=backend)
    a = pyaclnn.zeros(X.shape, backend=backend, stream=s)
    host = X.copy()
    assert a.copy_(host) is a and a.stream is s
    host[...] = -1  # the copy has left host memory when copy_ returns
    np.testing.assert_array_equal(a.numpy(), X)
    # in stream order: a kernel queued before the copy reads the old contents
    x = pyaclnn.to_device(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2), backend=backend, stream=s)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200000")
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=s)
    monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
    x.copy_(np.full((1, 1, 2, 2, 2), 100, np.float32))
    assert float(out.numpy().reshape(-1)[0]) == 7.0 and float(x.numpy().reshape(-1)[0]) == 100.0
    for arr in (a, x, out, idx):
        arr.close()
    s.close()


def test_copy_from_a_device_array_on_another_stream_waits_for_its_writer(backend, monkeypatch):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(np.arange(8, dtype=np.float32).reshape(1, 1, 2, 2, 2), backend=backend, stream=a)
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200000")
    out, idx = pyaclnn.max_pool3d_with_argmax(x, 2, backend=backend, stream=a)  # slow writer of out
    monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
    target = pyaclnn.zeros(out.shape, backend=backend, stream=b)
    target.copy_(out, stream=b)
    np.testing.assert_array_equal(target.numpy().reshape(-1), [7.0])  # not the 0 before the kernel
    for arr in (x, out, idx, target):
        arr.close()
    a.close()
    b.close()


@pytest.mark.parametrize(
    "src, error, words",
    [
        ([[1.0, 2.0]], TypeError, r"src is a list: pass a NumPy array"),
        (
            np.zeros((3, 2, 4), np.float32),
            ValueError,
            r"src has shape \[3, 2, 4\], which does not broadcast to \[2, 3, 4\]",
        ),
        (np.zeros((2, 3, 4), np.str_), TypeError, r"src has dtype <U1, which has no aclDataType"),
    ],
)
def test_copy_refuses_what_does_not_fit_naming_src(backend, src, error, words):
    a = pyaclnn.zeros(X.shape, backend=backend)
    with pytest.raises(error, match=words):
        a.copy_(src)
    np.testing.assert_array_equal(a.numpy(), 0)  # nothing written
    a.close()


def test_copy_refuses_overlap_and_copies_through_strides(backend):
    base = pyaclnn.to_device(np.arange(16, dtype=np.float32), backend=backend)
    head = pyaclnn.DeviceArray.from_ptr(base.ptr, (8,), np.float32, backend=backend)
    tail = pyaclnn.DeviceArray.from_ptr(base.ptr, (8,), np.float32, offset=4, backend=backend)
    with pytest.raises(ValueError, match=r"src overlaps this array's memory"):
        tail.copy_(head)
    np.testing.assert_array_equal(base.numpy(), np.arange(16))
    strided = pyaclnn.DeviceArray.from_ptr(base.ptr, (8,), np.float32, strides=(2,), backend=backend)
    strided.copy_(np.full(8, -1.0, np.float32))  # a strided destination: aclnnInplaceCopy
    expected = np.arange(16, dtype=np.float32)
    expected[::2] = -1
    np.testing.assert_array_equal(base.numpy(), expected)
    dense = pyaclnn.zeros((8,), np.float64, backend=backend)
    dense.copy_(strided)  # a strided source of another dtype
    np.testing.assert_array_equal(dense.numpy(), np.full(8, -1.0))
    for arr in (strided, tail, head, base, dense):
        arr.close()


def test_like_takes_shape_dtype_backend_and_device_from_the_array(backend):
    a = pyaclnn.to_device(X, backend=backend)
    z = pyaclnn.zeros_like(a)
    e = pyaclnn.empty_like(a, np.float16)
    assert (z.shape, z.dtype, z.backend, z.device) == (X.shape, np.float32, backend, a.device)
    assert (e.shape, e.dtype, e.backend) == (X.shape, np.float16, backend)
    assert not z.numpy().any()
    host = pyaclnn.zeros_like(X, backend=backend)
    assert host.shape == X.shape and host.dtype == X.dtype and not host.numpy().any()
    with pytest.raises(TypeError, match=r"a is a list"):
        pyaclnn.empty_like([1.0], backend=backend)
    for arr in (a, z, e, host):
        arr.close()


@pytest.mark.parametrize(
    "value, words",
    [
        ([[1.0, 2.0]], r"x is a list: pass a NumPy array"),
        ((1.0, 2.0), r"x is a tuple: pass a NumPy array"),
        (2.5, r"x must be a NumPy array or a pyaclnn.DeviceArray, got float"),
    ],
)
def test_to_device_takes_host_data_by_the_rule_the_operators_use(backend, value, words):
    with pytest.raises(TypeError, match=words):
        pyaclnn.to_device(value, backend=backend)
    with pytest.raises(TypeError, match=words.replace("x ", "input ", 1)):
        pyaclnn.max_pool3d_with_argmax(value, 2, backend=backend)


def test_to_device_refuses_a_torch_tensor_naming_from_torch(backend):
    class FakeTensor:  # what the rule recognises a torch tensor by
        def data_ptr(self):
            return 0

        def stride(self):
            return ()

    with pytest.raises(TypeError, match=r"x is a FakeTensor \(a torch tensor\?\): pass pyaclnn.from_torch"):
        pyaclnn.to_device(FakeTensor(), backend=backend)


def test_from_ptr_refuses_an_unaligned_pointer_naming_ptr(backend):
    base = pyaclnn.to_device(np.arange(16, dtype=np.float32), backend=backend)
    assert base.ptr % 32 == 0
    with pytest.raises(ValueError, match=r"ptr 0x[0-9a-f]+ is not 32-byte aligned: .*offset="):
        pyaclnn.DeviceArray.from_ptr(base.ptr + 4, (4,), np.float32, backend=backend)
    view = pyaclnn.DeviceArray.from_ptr(base.ptr, (4,), np.float32, offset=1, backend=backend)
    np.testing.assert_array_equal(view.numpy(), [1, 2, 3, 4])  # the way to say it
    view.close()
    base.close()


# -- reshape: a view of the same memory --------------------------------------------------------------


def test_reshape_is_a_view_of_the_same_memory(backend):
    host = np.arange(24, dtype=np.float32)
    with pyaclnn.to_device(host, backend=backend) as flat:
        view = flat.reshape(2, 3, 4)
        assert view.shape == (2, 3, 4) and view.ptr == flat.ptr and view.dtype == flat.dtype
        np.testing.assert_array_equal(view.numpy(), host.reshape(2, 3, 4))
        assert flat.reshape((4, -1)).shape == (4, 6) and flat.reshape(-1).shape == (24,)
        # Written through the view, read through the array: one memory.
        view.copy_(np.full((2, 3, 4), 5.0, np.float32))
        np.testing.assert_array_equal(flat.numpy(), np.full(24, 5.0, np.float32))
        view.close()


@pytest.mark.parametrize(
    "shape, error, words",
    [
        ((5, 5), ValueError, r"shape \[5, 5\] has 25 elements, the array 24"),
        ((-1, -1), ValueError, "at most one -1"),
        ((7, -1), ValueError, r"shape \[7, -1\] cannot hold the array's 24 elements"),
        (("a",), TypeError, "shape must be ints"),
    ],
)
def test_reshape_refuses_a_shape_that_does_not_fit(backend, shape, error, words):
    with pyaclnn.zeros((2, 12), backend=backend) as a, pytest.raises(error, match=words):
        a.reshape(*shape)


def test_reshape_refuses_a_non_contiguous_array(backend):
    with pyaclnn.zeros((4, 4), backend=backend) as a:
        strided = pyaclnn.DeviceArray.from_ptr(a.ptr, (4, 2), np.float32, strides=(4, 2), backend=backend)
        with pytest.raises(ValueError, match=r"reshape needs a contiguous array \(shape \[4, 2\], strides"):
            strided.reshape(8)
        strided.close()


def test_work_through_a_view_is_ordered_with_work_through_its_base(backend, monkeypatch):
    a, b = pyaclnn.Stream(backend=backend), pyaclnn.Stream(backend=backend)
    x = pyaclnn.to_device(np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4), backend=backend, stream=a)
    flat = pyaclnn.zeros((8,), backend=backend, stream=b)  # the base's last use: stream b
    b.synchronize()
    monkeypatch.setenv("PYACLNN_EMU_KERNEL_US", "200000")
    values = flat.reshape(1, 1, 2, 2, 2)
    with pyaclnn.zeros((1, 1, 2, 2, 2), np.int32, backend=backend, stream=a) as idx:
        pyaclnn.max_pool3d_with_argmax(x, 2, out=(values, idx), backend=backend, stream=a)  # slow writer
        monkeypatch.delenv("PYACLNN_EMU_KERNEL_US")
        target = pyaclnn.zeros((8,), backend=backend, stream=b)
        target.copy_(flat, stream=b)  # through the base, on b: waits for the view's writer on a
        np.testing.assert_array_equal(target.numpy(), [21, 23, 29, 31, 53, 55, 61, 63])
    for arr in (x, flat, values, target):
        arr.close()
    a.close()
    b.close()


@pytest.mark.parametrize("first", ["base", "view"])
def test_the_memory_goes_back_when_the_base_and_its_views_are_closed(backend, first):
    pool = pyaclnn.memory_pool(backend=backend)
    before = pool.stats()["in_use_bytes"]
    base = pyaclnn.to_device(np.arange(1024, dtype=np.float32), backend=backend)
    view = base.reshape(32, 32)
    in_use = pool.stats()["in_use_bytes"]
    (base if first == "base" else view).close()
    assert pool.stats()["in_use_bytes"] == in_use  # the other one still holds the memory
    if first == "base":
        assert base.closed and not view.closed
        np.testing.assert_array_equal(view.numpy().reshape(-1), np.arange(1024, dtype=np.float32))
    (view if first == "base" else base).close()
    assert pool.stats()["in_use_bytes"] == before
    assert base.closed and view.closed


@pytest.mark.parametrize(
    ("shape", "want"),
    [((2, 3), (2, 3)), ((), ()), (4, (4,)), ([2, 3], (2, 3)), ((np.int64(2), 3), (2, 3)), ((0, 5), (0, 5))],
)
def test_empty_takes_a_shape_of_ints_as_a_tuple_of_python_ints(backend, shape, want):
    a = pyaclnn.empty(shape, np.float32, backend=backend)
    assert a.shape == want and all(type(d) is int for d in a.shape)
    a.close()


@pytest.mark.parametrize(
    ("shape", "error", "words"),
    [
        ((2, -1), ValueError, "shape [2, -1] has a negative value"),
        ((True, 2), TypeError, "shape must be a sequence of ints"),
        ((2, 2.0), TypeError, "shape must be a sequence of ints"),
        ((2, "3"), TypeError, "shape must be a sequence of ints"),
    ],
)
def test_empty_refuses_a_shape_that_is_not_ints_naming_shape(backend, shape, error, words):
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        pyaclnn.empty(shape, np.float32, backend=backend)
