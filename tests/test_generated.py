"""The backend interface is derived from include/decl (scripts/generate_interface.py) and current."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from pyaclnn.backends._interface import Backend

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    """scripts/generate_interface.py as a module (scripts/ is not a package)."""
    path = ROOT / "scripts" / "generate_interface.py"
    spec = importlib.util.spec_from_file_location("generate_interface", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_interface_is_current():
    generator = _generator()
    current = generator.OUTPUT.read_text(encoding="utf-8")
    assert current == generator.render(current), (
        "pyaclnn/backends/_interface.py is stale: run python scripts/generate_interface.py"
    )


def test_the_check_mode_exits_zero_when_current():
    assert _generator().main(["--check"]) == 0


def test_every_declared_function_of_the_backends_is_in_the_interface():
    from pyaclnn.backends.npu._ffi import function_names

    generator = _generator()
    expected = {name for name in function_names() if not name.startswith("pyaclnnEmu")}
    expected -= generator.NOT_IN_BACKENDS
    declared = {name for name, _ in inspect.getmembers(Backend, inspect.isfunction) if name.startswith("acl")}
    assert declared == expected


@pytest.mark.parametrize(
    "c_type, python",
    [
        ("aclError aclrtGetDevice(int32_t *deviceId);", "def aclrtGetDevice(self) -> tuple[int, int]: ..."),
        ("aclError aclrtFree(void *devPtr);", "def aclrtFree(self, dev_ptr: Pointer, /) -> int: ..."),
        (
            "aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size);",
            "def aclCreateIntArray(self, value: Sequence[int], /) -> Handle | None: ...",
        ),
        (
            "aclError aclrtCreateStream(aclrtStream *stream);",
            "def aclrtCreateStream(self) -> tuple[int, Handle]: ...",
        ),
    ],
)
def test_c_types_become_python_types_by_the_rules(c_type, python):
    generator = _generator()
    match = generator._PROTOTYPE.search(c_type)
    assert generator.method(match["result"], match["name"], match["params"]).strip() == python


def test_the_npu_backend_binds_out_parameters_from_the_declarations(emulator_home):
    from pyaclnn.backends.npu._ffi import out_parameters

    outs = out_parameters()
    assert [ctype.cname for _, ctype in outs["aclrtGetMemInfo"]] == ["size_t *", "size_t *"]
    assert [position for position, _ in outs["aclnnGridSampler3DGetWorkspaceSize"]] == [6, 7]
    assert outs["aclCreateTensor"] == ()  # const arrays are inputs
