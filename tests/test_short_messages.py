"""Error messages stay short whatever the user passed, and say each thing once.

A value a message quotes goes through ``pyaclnn.errors.describe``: an array is
named by its type, shape and dtype (the repr of a 64x64x64 array is 1,596
characters), anything else by a repr cut short. The note naming the Python
arguments appears once, also when an error passes two handlers that add it.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import pyaclnn
from pyaclnn.errors import DESCRIBE_LIMIT, describe

BIG = np.zeros((64, 64, 64), np.float32)
X = np.arange(128, dtype=np.float32).reshape(1, 2, 4, 4, 4)
SHORT = 300  # characters: a sentence, not a dump


def test_describe_names_an_array_by_type_shape_and_dtype():
    assert describe(BIG) == "ndarray of shape (64, 64, 64) and dtype float32"
    assert len(repr(BIG)) > 1000  # what the message would have held


def test_describe_cuts_a_long_repr_and_describes_the_items_of_a_sequence():
    text = describe("x" * 1000)
    assert len(text) == DESCRIBE_LIMIT and text.endswith("...")
    assert describe((BIG,)) == "(ndarray of shape (64, 64, 64) and dtype float32,)"
    assert describe(list(range(10))) == "[0, 1, 2, 3, ... 6 more]"
    assert describe(3) == "3" and describe("NCDHW") == "'NCDHW'"


def test_describe_names_a_device_array_by_its_shape(backend):
    with pyaclnn.to_device(X, backend=backend) as xd:
        assert describe(xd) == "DeviceArray of shape (1, 2, 4, 4, 4) and dtype float32"


@pytest.mark.parametrize(
    "call",
    [
        lambda b: pyaclnn.max_pool3d_with_argmax(X, 2, out=BIG, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(X, 2, out=(BIG, BIG, BIG), backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(X, BIG, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(X, 2, ceil_mode=BIG, backend=b),
        lambda b: pyaclnn.grid_sampler3d(X, X, interpolation_mode=BIG, backend=b),
        lambda b: pyaclnn.max_pool3d_with_argmax(X, 2, indices_dtype=BIG, backend=b),
        lambda b: pyaclnn.Stream(backend=b).wait_stream(BIG),  # type: ignore[arg-type]
        lambda b: pyaclnn.empty(BIG, backend=b),  # type: ignore[arg-type]
    ],
    ids=["out", "out-triple", "kernel_size", "ceil_mode", "mode", "indices_dtype", "wait_stream", "shape"],
)
def test_a_huge_wrong_argument_gives_a_short_message_naming_its_shape(backend, call):
    with pytest.raises((TypeError, ValueError)) as error:
        call(backend)
    text = str(error.value)
    assert len(text) < SHORT, text
    assert "shape (64, 64, 64)" in text, text


def test_the_python_names_note_appears_once(backend):
    out = X[..., 1::2, 1::2, 1::2]
    idx = np.zeros(out.shape, np.int32)
    idx[0, 0, 0, 0, 1] = 99  # outside its plane: refused on the host, inside the launch
    with pytest.raises(pyaclnn.AclError) as error:
        pyaclnn.max_pool3d_with_argmax_backward(np.ones_like(out), X, idx, 2, backend=backend)
    text = str(error.value)
    assert text.count("(in Python:") == 1, text
    assert text.endswith("(in Python: indices)"), text


def test_docstrings_say_the_current_stream_where_stream_none_means_it():
    for name in ("max_pool3d_with_argmax", "grid_sampler3d_backward", "to_device"):
        doc = inspect.getdoc(getattr(pyaclnn, name)) or ""
        stream_entry = doc.split("stream : Stream, optional", 1)[1].split("\n    ", 1)[0]
        text = doc.split("stream : Stream, optional", 1)[1][:300]
        assert "current stream" in text, (name, stream_entry, text)
        assert "default stream (of its current device) by default" not in text, name
