"""The functional API's docstrings: shared entries filled in, and every raised type listed.

The four calls share their parameter and error descriptions through
``pyaclnn._docstrings``; these tests check that each placeholder was filled and
that each kind of mistake a user can make raises a type its docstring's Raises
section names (the rule: every raised type is listed in the docstring's Raises).
"""

from __future__ import annotations

import re

import numpy as np
import operators
import pytest

import pyaclnn
from pyaclnn import _docstrings
from pyaclnn.errors import ArgumentOverflowError

FUNCTIONS = {name: getattr(pyaclnn, name) for name in operators.NAMES}


def raises_section(func) -> set[str]:
    """The exception names the NumPy-style Raises section of ``func`` lists."""
    doc = func.__doc__ or ""
    section = doc.split("Raises\n    ------\n", 1)[1]
    return set(re.findall(r"^    (\w+)$", section, re.MULTILINE))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_placeholder_is_filled(name):
    doc = FUNCTIONS[name].__doc__
    assert "%(" not in doc
    # the shared text stands in full, indented as a docstring section entry
    assert '    backend : {"numpy", "npu"}, optional\n        The active backend by default.' in doc
    assert {"AclnnError", "AclError", "TypeError", "ValueError"} <= raises_section(FUNCTIONS[name])


def test_an_unknown_placeholder_fails_at_definition():
    def documented() -> None:
        """Text.

        %(no_such_entry)s
        """

    with pytest.raises(KeyError, match="no_such_entry"):
        _docstrings.fill(documented)


def test_fill_keeps_a_missing_docstring():
    def bare() -> None:
        pass

    assert _docstrings.fill(bare).__doc__ is None


X = np.zeros((1, 1, 4, 4, 4), np.float32)
GRID = np.zeros((1, 2, 2, 2, 3), np.float32)
POOLED = np.zeros((1, 1, 2, 2, 2), np.float32)
INDICES = np.zeros((1, 1, 2, 2, 2), np.int32)

# One call per kind of mistake and function: (function, call, expected type).
MISTAKES = [
    ("max_pool3d_with_argmax", lambda f: f([[1.0]], 2), TypeError),
    ("max_pool3d_with_argmax", lambda f: f(X, 2, backend="gpu"), ValueError),
    ("max_pool3d_with_argmax", lambda f: f(X, 2**70), ArgumentOverflowError),
    ("max_pool3d_with_argmax", lambda f: f(X.astype(np.float64), 2), pyaclnn.AclnnError),
    ("max_pool3d_with_argmax_backward", lambda f: f(POOLED, X, INDICES.tolist(), 2), TypeError),
    ("max_pool3d_with_argmax_backward", lambda f: f(POOLED, X, INDICES, 2, ceil_mode="no"), TypeError),
    (
        "max_pool3d_with_argmax_backward",
        lambda f: f(POOLED[..., :1], X, INDICES[..., :1], 2),
        pyaclnn.AclnnError,
    ),
    ("max_pool3d_with_argmax_backward", lambda f: f(POOLED, X, INDICES, 2, stream=object()), ValueError),
    ("grid_sampler3d", lambda f: f(X, GRID, "bicubic"), ValueError),
    ("grid_sampler3d", lambda f: f(X, GRID, layout="NHWC"), ValueError),
    ("grid_sampler3d", lambda f: f(X, GRID, align_corners=None), TypeError),
    ("grid_sampler3d", lambda f: f(X, GRID[..., :2]), pyaclnn.AclnnError),
    ("grid_sampler3d_backward", lambda f: f(X, X, GRID, output_mask="yes"), TypeError),
    (
        "grid_sampler3d_backward",
        lambda f: f(X[:, :, :2, :2, :2], X, GRID, output_mask=(True,)),
        pyaclnn.AclnnError,
    ),
    ("grid_sampler3d_backward", lambda f: f(X[:, :, :2, :2, :2], X, GRID, padding_mode=2**64), ValueError),
]


operators.covering((m[0] for m in MISTAKES), "the docstrings' mistakes")


@pytest.mark.parametrize(
    "name, call, expected", MISTAKES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MISTAKES)]
)
def test_each_raised_type_is_in_the_docstring(name, call, expected):
    func = FUNCTIONS[name]
    with pytest.raises(Exception) as info:  # noqa: PT011 - the type is what is checked
        call(func)
    raised = info.type
    assert issubclass(raised, expected), f"{name} raised {raised.__name__}: {info.value}"
    assert raised.__name__ in raises_section(func), (raised, raises_section(func))
