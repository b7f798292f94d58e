"""DeviceArray like an ndarray: basic indexing gives views of the same memory, len/iter/T/transpose,
strides in bytes and nbytes of the elements as NumPy reports them, and to_device of a strided view."""

from __future__ import annotations

import numpy as np
import pytest

import pyaclnn
from pyaclnn import ops

X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)

KEYS = [
    1,
    -1,
    (slice(None), 1),
    (Ellipsis, slice(1, None, 2)),
    (None, 0, Ellipsis, None),
    (slice(5, 1),),
    (-1, slice(None, None, 3), 2),
    (0, 1, 2, 3),
    (slice(None), None, slice(1, 3), Ellipsis, 4),
    (),
    Ellipsis,
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_agrees_with_numpy_and_shares_the_base(backend, key):
    with pyaclnn.to_device(X, backend=backend) as d:
        view = d[key]
        expected = X[key]
        assert view.shape == expected.shape and view.strides == expected.strides
        assert view.nbytes == expected.nbytes and view.itemsize == expected.itemsize
        assert view.ptr == d.ptr and view.storage_nbytes == d.storage_nbytes
        np.testing.assert_array_equal(view.numpy(), expected)
        view.close()


def test_a_copy_into_a_view_writes_the_base(backend):
    expected = X.copy()
    expected[1, :, 1::2] = -7
    with pyaclnn.to_device(X, backend=backend) as d:
        view = d[1, :, 1::2]
        view.copy_(np.full(view.shape, -7, np.float32))
        np.testing.assert_array_equal(d.numpy(), expected)
        view.close()


def test_fill_zero_of_a_view_leaves_the_rest_of_its_base(backend):
    expected = X.copy()
    expected[0, 1] = 0
    expected[1, :, ::2] = 0
    with pyaclnn.to_device(X, backend=backend) as d:
        with d[0, 1] as row, d[1, :, ::2] as strided:
            row.fill_zero()
            strided.fill_zero()
        np.testing.assert_array_equal(d.numpy(), expected)


def test_an_operator_writes_into_a_view_and_reads_views(backend):
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend(backend)
    try:
        with pyaclnn.to_device(X, backend=backend) as d, pyaclnn.zeros((3, 4, 5), backend=backend) as out:
            a, b = d[0], d[1, ::1, :, :]
            ops.add(a, b, 1, out)
            np.testing.assert_array_equal(out.numpy(), X[0] + X[1])
            target = d[:, 1]  # an operator's output that is a strided view of the base
            ops.add(d[0, 0], d[1, 2], 2, target[0])
            expected = X.copy()
            expected[0, 1] = X[0, 0] + 2 * X[1, 2]
            np.testing.assert_array_equal(d.numpy(), expected)
            for v in (a, b, target):
                v.close()
    finally:
        pyaclnn.set_backend(previous)


def test_max_pool_on_a_sliced_5d_array_gives_numpys_result(backend):
    x = np.random.default_rng(3).standard_normal((2, 3, 6, 8, 8)).astype(np.float32)
    with pyaclnn.to_device(x, backend=backend) as d:
        view = d[:, 1:, ::2, 1:7, ::2]
        out, idx = pyaclnn.max_pool3d_with_argmax(view, 1, backend=backend)
        expected, expected_idx = pyaclnn.max_pool3d_with_argmax(x[:, 1:, ::2, 1:7, ::2], 1, backend=backend)
        np.testing.assert_array_equal(out.numpy(), x[:, 1:, ::2, 1:7, ::2])
        np.testing.assert_array_equal(out.numpy(), expected)
        np.testing.assert_array_equal(idx.numpy(), expected_idx)
        pooled, _ = pyaclnn.max_pool3d_with_argmax(view, (1, 2, 2), backend=backend)
        reference = x[:, 1:, ::2, 1:7, ::2].reshape(2, 2, 3, 3, 2, 2, 2).max(axis=(4, 6))
        np.testing.assert_array_equal(pooled.numpy(), reference)
        for a in (view, out, idx, pooled, _):
            a.close()


def test_the_base_memory_goes_back_once_every_view_is_closed(backend):
    d = pyaclnn.to_device(X, backend=backend)
    view, t = d[1, ::2], d.T
    d.close()
    np.testing.assert_array_equal(view.numpy(), X[1, ::2])  # the block stays for the views
    view.close()
    np.testing.assert_array_equal(t.numpy(), X.T)
    t.close()
    assert d.closed and view.closed and t.closed


@pytest.mark.parametrize(
    ("key", "error", "words"),
    [
        ((slice(None, None, -1),), ValueError, "steps > 0 only"),
        ((0, slice(None, None, 0)), ValueError, "steps > 0 only"),
        (np.array([0, 1]), TypeError, "ints, slices of positive step, ... and None"),
        ([0, 1], TypeError, "ints, slices of positive step, ... and None"),
        (True, TypeError, "ints, slices of positive step, ... and None"),
        (1.0, TypeError, "ints, slices of positive step, ... and None"),
        ((0, 0, 0, 0, 0), IndexError, "too many indices"),
        (2, IndexError, "out of bounds for axis 0 with size 2"),
        ((0, -4), IndexError, "out of bounds for axis 1 with size 3"),
        ((Ellipsis, Ellipsis), IndexError, "single ellipsis"),
    ],
    ids=repr,
)
def test_other_indices_are_refused_naming_the_rule(backend, key, error, words):
    with pyaclnn.to_device(X, backend=backend) as d, pytest.raises(error, match=words.replace(".", r"\.")):
        d[key]


def test_len_iter_t_and_transpose_agree_with_numpy(backend):
    with pyaclnn.to_device(X, backend=backend) as d:
        assert len(d) == len(X)
        rows = list(d)
        assert len(rows) == 2 and all(r.ptr == d.ptr for r in rows)
        for r, expected in zip(rows, X):
            assert r.shape == expected.shape and r.strides == expected.strides
            np.testing.assert_array_equal(r.numpy(), expected)
            r.close()
        for axes in [(), ((1, 0, 3, 2),), (2, 0, 1, 3), (-1, 0, 1, 2)]:
            with d.transpose(*axes) as t:
                expected = X.transpose(*axes)
                assert t.shape == expected.shape and t.strides == expected.strides
                np.testing.assert_array_equal(t.numpy(), expected)
        with d.T as t:
            assert t.shape == X.T.shape and t.strides == X.T.strides
            np.testing.assert_array_equal(t.numpy(), X.T)
        with pytest.raises(ValueError, match="not a permutation"):
            d.transpose(0, 1)
        with pytest.raises(TypeError, match="axes must be ints"):
            d.transpose(0.5, 1, 2, 3)
        with d[0, 0, 0, 0] as scalar:
            assert scalar.shape == () and scalar.numpy() == X[0, 0, 0, 0]
            with pytest.raises(TypeError, match="unsized"):
                len(scalar)
            with pytest.raises(TypeError):
                iter(scalar).__next__()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.int8])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3), (2, 0, 3), (1, 2, 3, 4)])
def test_strides_nbytes_and_itemsize_agree_with_numpy(backend, dtype, shape):
    host = np.zeros(shape, dtype)
    with pyaclnn.to_device(host, backend=backend) as d:
        if host.size:  # NumPy gives an empty array no strides that mean anything (0 in NumPy 2)
            assert d.strides == host.strides
        assert d.nbytes == host.nbytes and d.itemsize == host.itemsize
        assert d.storage_nbytes == host.nbytes


def test_to_device_of_a_strided_view_copies_its_elements(backend):
    base = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    view = base[:, 1:, 1::2, ::2]
    with pyaclnn.to_device(view, backend=backend) as d:
        assert d.shape == view.shape and d.is_contiguous()
        assert d.nbytes == d.storage_nbytes == view.nbytes  # not the storage the view spans
        assert d.strides == np.ascontiguousarray(view).strides
        np.testing.assert_array_equal(d.numpy(), view)
