"""The generated files are derived from include/decl, the operator table and functional.py's
signatures (scripts/generate_interface.py), and current."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from pyaclnn import _decl
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


@pytest.mark.parametrize("name", ["backends/_interface.py", "aclnn.pyi", "functional.pyi"])
def test_each_generated_file_is_current(name):
    generator = _generator()
    path = ROOT / "pyaclnn" / name
    assert path in generator.RENDERERS
    current = path.read_text(encoding="utf-8")
    assert current == generator.RENDERERS[path](current), (
        f"pyaclnn/{name} is stale: run python scripts/generate_interface.py"
    )


def test_a_change_of_a_functional_signature_makes_the_stub_stale(monkeypatch, tmp_path):
    generator = _generator()
    changed = tmp_path / "functional.py"
    text = generator.FUNCTIONAL.read_text(encoding="utf-8")
    changed.write_text(text.replace("    ceil_mode: bool = False,\n", "    ceil_mode: int = False,\n", 1))
    monkeypatch.setattr(generator, "FUNCTIONAL", changed)
    stub = generator.render_functional_stub("")
    assert "    ceil_mode: int = ...," in stub
    assert stub != generator.FUNCTIONAL_STUB.read_text(encoding="utf-8")


def test_the_check_mode_exits_zero_when_current():
    assert _generator().main(["--check"]) == 0


def test_symbols_types_every_declared_function_as_cffi_binds_it():
    # The npu backend's calls into C are type-checked against Symbols: one method per
    # declared function, with the number of parameters cffi passes.
    from pyaclnn.backends._interface import Symbols
    from pyaclnn.backends.npu._ffi import ffi, function_names

    typed = {
        name: fn for name, fn in inspect.getmembers(Symbols, inspect.isfunction) if not name.startswith("_")
    }
    assert list(typed) == sorted(function_names())
    for name, fn in typed.items():
        proto = _decl.prototypes()[name]
        ctype = ffi.typeof(f"{proto.result} (*)({', '.join(proto.params) or 'void'})")  # a function type
        assert len(inspect.signature(fn).parameters) - 1 == len(ctype.args), name


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
    (prototype,) = _decl.parse_prototypes(c_type)
    assert _generator().method(prototype.result, prototype.name, prototype.params).strip() == python


def test_the_npu_backend_binds_out_parameters_from_the_declarations(emulator_home):
    from pyaclnn.backends.npu._ffi import out_parameters

    outs = out_parameters()
    assert [ctype.cname for _, ctype in outs["aclrtGetMemInfo"]] == ["size_t *", "size_t *"]
    assert [position for position, _ in outs["aclnnGridSampler3DGetWorkspaceSize"]] == [6, 7]
    assert outs["aclCreateTensor"] == ()  # const arrays are inputs


def _fallback_table() -> ModuleType:
    """scripts/generate_fallback_table.py as a module."""
    path = ROOT / "scripts" / "generate_fallback_table.py"
    spec = importlib.util.spec_from_file_location("generate_fallback_table", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cpu_fallback_table_of_docs_ops_md_is_current():
    generator = _fallback_table()
    current = generator.OUTPUT.read_text(encoding="utf-8")
    assert current == generator.render(current), (
        "docs/ops.md's CPU fallback table is stale: run python scripts/generate_fallback_table.py"
    )
    assert generator.main(["--check"]) == 0


def test_the_cpu_fallback_table_lists_every_reference_and_goes_stale_with_a_new_one(monkeypatch):
    from pyaclnn.kernels import references
    from pyaclnn.kernels.references import _registry

    generator = _fallback_table()
    text = generator.table()
    for name in references.names():
        assert f"| `aclnn{name}` |" in text
    assert "| `aclnnMatmul` | linalg | float32, float16, bfloat16 |" in text
    monkeypatch.setitem(
        _registry._REFERENCES,
        "Extra",
        references.Reference(
            "Extra", lambda: None, "aclnn_extra.h", "x", None, frozenset({"int8"}), "movement"
        ),
    )
    current = generator.OUTPUT.read_text(encoding="utf-8")
    assert "| `aclnnExtra` | movement | int8 |" in generator.render(current) != current
