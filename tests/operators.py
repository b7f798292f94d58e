"""The operators of the table (pyaclnn/_optable.py), for every test module that goes over all of them.

A test module that keeps something per operator (a case, a property, a
reference) writes it as a mapping by the operator's Python name and passes it
through :func:`per_operator`, or keeps one module per operator in a package and
reads them with :func:`per_operator_modules`, so a new operator in include/decl
fails at collection until each of those parts exists.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import TypeVar

from pyaclnn import _optable

SPECS = _optable.operators()
#: Python names, in declaration order: "max_pool3d_with_argmax", ...
NAMES = tuple(spec.python_name for spec in SPECS)
#: C names: "MaxPool3dWithArgmax", ...
C_NAMES = tuple(spec.name for spec in SPECS)
#: The C functions of both phases of every operator, phase 1 first.
APIS = tuple(api for spec in SPECS for api in (spec.phase1_api, spec.phase2_api))
#: The operators with a backward half (their name ends with "_backward"), and the forward ones.
BACKWARD = tuple(name for name in NAMES if name.endswith("_backward"))
FORWARD = tuple(name for name in NAMES if name not in BACKWARD)

_T = TypeVar("_T")


def per_operator(table: Mapping[str, _T], what: str) -> Mapping[str, _T]:
    """``table`` (by operator Python name) once it has exactly one entry per operator of the table."""
    missing = [name for name in NAMES if name not in table]
    unknown = [name for name in table if name not in NAMES]
    if missing or unknown:
        raise LookupError(
            f"{what}: no entry for operator(s) {missing} of include/decl/aclnn_ops.h"
            + (f"; entries for unknown operator(s) {unknown}" if unknown else "")
        )
    return table


def per_operator_modules(package: str, what: str) -> Mapping[str, ModuleType]:
    """The modules of ``package`` by name (those not starting with ``_``), in table order, once
    there is exactly one per operator of the table, named by its Python name (:func:`per_operator`)."""
    path = importlib.import_module(package).__path__
    found = [info.name for info in pkgutil.iter_modules(path) if not info.name.startswith("_")]
    order = sorted(found, key=lambda name: NAMES.index(name) if name in NAMES else len(NAMES))
    return per_operator({name: importlib.import_module(f"{package}.{name}") for name in order}, what)


def covering(names: Iterable[str], what: str) -> list[str]:
    """``names`` (case names that start with an operator's Python name) once every operator has one."""
    names = list(names)
    missing = [op for op in NAMES if not any(n == op or n.startswith(op + " ") for n in names)]
    if missing:
        raise LookupError(f"{what}: no case for operator(s) {missing} of include/decl/aclnn_ops.h")
    return names
