"""selftest takes its operators from the operator table (pyaclnn/_optable.py): every operator
of the table has selftest's inputs, call, reference and cases (one Operator entry in
pyaclnn/selftest/operators.py's OPERATORS, registered by its family's module), and one
missing is an error, not a silently shorter matrix."""

from __future__ import annotations

import io

import pytest

from pyaclnn import _optable, selftest
from pyaclnn.selftest import operators


def test_selftest_knows_exactly_the_operators_of_the_table():
    table = [spec.python_name for spec in _optable.operators()]
    assert sorted(operators.OPERATORS) == sorted(table)
    assert sorted({case.operator for case in selftest.cases()}) == sorted(table)
    assert sorted({case.operator for case in selftest.cases() if case.quick}) == sorted(table)


def test_the_matrix_is_each_operators_own_cases_in_table_order():
    table = [spec.python_name for spec in _optable.operators()]
    for name, op in operators.OPERATORS.items():
        assert {case.operator for case in op.cases()} == {name}
    assert selftest.cases() == [case for name in table for case in operators.OPERATORS[name].cases()]


def test_an_operator_added_to_the_table_without_selftest_cases_is_refused(monkeypatch):
    real = _optable.operators()
    new = _optable.OperatorSpec("GridSampler2D", "grid_sampler2d", ())
    monkeypatch.setattr(_optable, "operators", lambda: (*real, new))
    with pytest.raises(LookupError, match=r"GridSampler2D \(grid_sampler2d\) is in the operator table"):
        selftest.cases()
    # and so is the run: no table of the other operators' cases passes for the whole. Which
    # part refuses first depends on whether this process made the numpy backend already: its
    # construction refuses a declared operator it has no check for (the run then reports the
    # backend unusable), an existing one leaves it to the matrix (LookupError).
    out = io.StringIO()
    try:
        status = selftest.run("numpy", quick=True, out=out)
    except LookupError as exc:
        assert "grid_sampler2d" in str(exc)
    else:
        assert status == 1 and "grid_sampler2d" in out.getvalue(), out.getvalue()


def test_an_operator_with_knowledge_but_no_case_is_refused(monkeypatch):
    matrix = [c for c in selftest.cases() if c.operator != "grid_sampler3d_backward"]
    with pytest.raises(LookupError, match=r"GridSampler3DBackward \(grid_sampler3d_backward\) has no case"):
        selftest.check_coverage(matrix)
    unquick = [c for c in selftest.cases() if not (c.quick and c.operator == "grid_sampler3d")]
    with pytest.raises(LookupError, match=r"GridSampler3D \(grid_sampler3d\) has no --quick case"):
        selftest.check_coverage(unquick)


def test_an_operator_selftest_knows_but_the_table_lost_is_refused(monkeypatch):
    real = _optable.operators()
    monkeypatch.setattr(_optable, "operators", lambda: real[:-1])
    with pytest.raises(
        LookupError, match=f"{real[-1].python_name} is in pyaclnn/selftest/operators.py's OPERATORS but not"
    ):
        selftest.cases()
