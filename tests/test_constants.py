"""pyaclnn.constants: generated from include/decl, current, and equal to what cffi parses."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

import pyaclnn
from pyaclnn import constants

ROOT = Path(__file__).resolve().parent.parent
CONSTANTS_FILE = ROOT / "pyaclnn" / "constants.py"


def _generator() -> ModuleType:
    """scripts/generate_constants.py as a module (scripts/ is not a package)."""
    path = ROOT / "scripts" / "generate_constants.py"
    spec = importlib.util.spec_from_file_location("generate_constants", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _assigned_names() -> list[str]:
    """Every ``NAME = value`` target of constants.py, in file order, repeats kept."""
    tree = ast.parse(CONSTANTS_FILE.read_text(encoding="utf-8"))
    return [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets]


def _module_constants() -> dict[str, int]:
    return {name: value for name, value in vars(constants).items() if name.isupper()}


def test_generated_file_is_current():
    text = _generator().render()
    assert CONSTANTS_FILE.read_text(encoding="utf-8") == text, (
        "pyaclnn/constants.py is stale: run python scripts/generate_constants.py"
    )


def test_every_value_agrees_with_what_cffi_parsed():
    from pyaclnn.backends.npu._ffi import integer_constants

    parsed = integer_constants()
    ours = _module_constants()
    # The same names both ways: nothing cffi knows is missing, nothing is invented.
    assert set(ours) == set(parsed)
    for name, value in ours.items():
        assert type(value) is int and value == parsed[name], name


def test_names_are_unique():
    names = _assigned_names()
    assert len(names) == len(set(names)) == len(_module_constants())


def test_a_name_declared_twice_is_refused():
    generator = _generator()
    decl = generator.load_decl()

    class Twice:  # a stand-in _decl whose enum repeats a status name
        status_codes = staticmethod(decl.status_codes)
        flags = staticmethod(decl.flags)

        @staticmethod
        def enums() -> dict[str, dict[str, int]]:
            return {"aclDataType": {"ACL_SUCCESS": 0}}

    try:
        generator.render(Twice)  # type: ignore[arg-type]
    except ValueError as exc:
        assert "ACL_SUCCESS" in str(exc)
    else:
        raise AssertionError("a repeated name was accepted")


def test_public_and_known_values():
    assert pyaclnn.constants is constants
    assert constants.ACLNN_ERR_PARAM_INVALID == 161002
    assert constants.ACL_FORMAT_NCDHW == 30 and constants.ACL_BF16 == 27
    assert constants.ACL_EVENT_SYNC == 1 and constants.ACL_EVENT_RECORDED_STATUS_COMPLETE == 1
