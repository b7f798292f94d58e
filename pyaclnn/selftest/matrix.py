"""The selftest matrix: every operator's cases (:data:`pyaclnn.selftest.operators.OPERATORS`,
where each operator has its :class:`~pyaclnn.selftest.operators.Case` list), in the order of the
operator table. :func:`cases` checks that the matrix covers exactly the operators of the
table, so a new operator cannot be skipped silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import _optable
from . import operators as _ops
from .operators import Case

__all__ = ["cases", "check_coverage"]


def check_coverage(matrix: Sequence[Case]) -> None:
    """Raise LookupError unless ``matrix`` and :mod:`~pyaclnn.selftest.operators` cover exactly
    the operators of the operator table, each with a case and a ``--quick`` case."""
    table = {spec.python_name: spec.name for spec in _optable.operators()}
    where = f"the operator table (include/decl/{_optable.DECL_FILE})"
    problems = [
        f"{c_name} ({name}) is in {where}, but selftest has no inputs, call, reference and cases "
        "for it (an Operator registered in pyaclnn/selftest/operators.py's OPERATORS by a module of "
        "pyaclnn/selftest/ that pyaclnn/selftest/references.py imports)"
        for name, c_name in table.items()
        if name not in _ops.OPERATORS
    ]
    problems += [
        f"{name} is in pyaclnn/selftest/operators.py's OPERATORS but not in {where}"
        for name in _ops.OPERATORS
        if name not in table
    ]
    for name, c_name in table.items():
        if name not in _ops.OPERATORS:
            continue
        own = [c for c in matrix if c.operator == name]
        if not own:
            problems.append(
                f"{c_name} ({name}) has no case in the matrix (its cases in its module of pyaclnn/selftest/)"
            )
        elif not any(c.quick for c in own):
            problems.append(
                f"{c_name} ({name}) has no --quick case (its cases in its module of pyaclnn/selftest/)"
            )
    problems += [
        f"case {c.name!r}: unknown operator {c.operator!r}" for c in matrix if c.operator not in table
    ]
    if problems:
        raise LookupError("the selftest does not cover the operators:\n  " + "\n  ".join(problems))


def cases() -> list[Case]:
    """The selftest matrix; ``quick=True`` marks the subset of ``--quick``.

    Raises
    ------
    LookupError
        When the matrix does not cover the operator table (:func:`check_coverage`).
    """
    matrix = [
        case
        for spec in _optable.operators()
        if spec.python_name in _ops.OPERATORS
        for case in _ops.OPERATORS[spec.python_name].cases()
    ]
    check_coverage(matrix)
    return matrix
