"""Custom operator packages (vendor folders) and NumPy references in pyaclnn.ops: where packages
are found and in which order, roles from their prototypes, load(), and references run by the
numpy backend behind the same surface as any operator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import pyaclnn
from pyaclnn import _generic, ops
from pyaclnn.ops import _headers, _types, _vendors

MY_OP_H = """\
/*
 * calution: this file was generated automaticlly donot change it.
*/
#ifndef ACLNN_{upper}_H_
#define ACLNN_{upper}_H_
#include "aclnn/acl_meta.h"
#ifdef __cplusplus
extern "C" {{
#endif
/* function: aclnn{op}GetWorkspaceSize
 * parameters :
{comment}
 */
__attribute__((visibility("default")))
aclnnStatus aclnn{op}GetWorkspaceSize(
{params},
    uint64_t *workspaceSize,
    aclOpExecutor **executor);

__attribute__((visibility("default")))
aclnnStatus aclnn{op}(
    void *workspace,
    uint64_t workspaceSize,
    aclOpExecutor *executor,
    const aclrtStream stream);
#ifdef __cplusplus
}}
#endif
#endif
"""


def write_package(folder: Path, operators: dict[str, tuple[list[str], str]]) -> Path:
    """A vendor folder with generated-form headers and prototypes, no library:
    ``{OpType: ([header parameters], "REG_OP body")}``."""
    include = folder / "op_api" / "include"
    include.mkdir(parents=True, exist_ok=True)
    proto = folder / "op_proto" / "inc"
    proto.mkdir(parents=True, exist_ok=True)
    blocks = []
    for op, (params, body) in operators.items():
        snake = _headers.python_operator_name(op)
        text = MY_OP_H.format(
            upper=snake.upper(),
            op=op,
            comment="\n".join(f" * {p.split()[-1].lstrip('*')} : required" for p in params),
            params=",\n".join(f"    {p}" for p in params),
        )
        (include / f"aclnn_{snake}.h").write_text(text)
        blocks.append(f"REG_OP({op})\n{body}\n    .OP_END_FACTORY_REG({op})\n")
    (proto / "op_proto.h").write_text(
        "#include <graph/operator_reg.h>\nnamespace ge {\n" + "".join(blocks) + "}\n"
    )
    return folder


ADD_MUL = (
    ["const aclTensor *x1", "const aclTensor *x2", "const aclTensor *y1", "const aclTensor *y2"],
    "    .INPUT(x1, TensorType({DT_FLOAT}))\n    .INPUT(x2, TensorType({DT_FLOAT}))\n"
    "    .OUTPUT(y1, TensorType({DT_FLOAT}))\n    .OUTPUT(y2, TensorType({DT_FLOAT}))",
)
SCALE = (
    ["const aclTensor *x", "double scale"],
    "    .INPUT(x, TensorType({DT_FLOAT}))\n    .REQUIRED_ATTR(scale, Float)",
)
ACCUMULATE = (
    ["aclTensor *stateRef", "const aclTensor *delta", "int64_t steps", "const aclTensor *out"],
    "    .INPUT(state, TensorType({DT_FLOAT}))\n    .INPUT(delta, TensorType({DT_FLOAT}))\n"
    "    .REQUIRED_ATTR(steps, Int)\n    .OUTPUT(state, TensorType({DT_FLOAT}))\n"
    "    .OUTPUT(total_sum, TensorType({DT_FLOAT}))",
)


@pytest.fixture
def fresh_packages(monkeypatch):
    """No package found or loaded, and no function or reference kept from other tests."""
    from pyaclnn.kernels.references import _registry as references

    monkeypatch.delenv("ASCEND_CUSTOM_OPP_PATH", raising=False)
    monkeypatch.delenv("ASCEND_OPP_PATH", raising=False)
    monkeypatch.setattr(_generic, "_loaded", [])
    monkeypatch.setattr(_generic, "_catalogues", {})
    monkeypatch.setattr(_generic, "_operators", {})
    monkeypatch.setattr(_generic, "_at_once", {})
    monkeypatch.setattr(references, "_REFERENCES", dict(references._REFERENCES))
    ops._functions.clear()
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend("numpy")
    yield
    pyaclnn.set_backend(previous)
    ops._functions.clear()


def _declaration(folder: Path, op: str) -> _headers.Declaration:
    return next(d for d in _headers.Catalogue(folder / "op_api" / "include").declarations() if d.name == op)


# -- roles from the prototype ------------------------------------------------------------------------


def test_several_outputs_with_their_own_names_are_outputs_by_the_prototype(tmp_path):
    folder = write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL})
    entries = _vendors.prototypes(folder)["CustomAddMul"]
    declaration = _declaration(folder, "CustomAddMul")
    assert _vendors.written_by_prototype(declaration, entries) == ("y1", "y2")
    # without the prototype the name rule sees no output at all (all const, none named out)
    assert [p.role for p in _types.parameters(declaration)] == ["input"] * 4


def test_a_tensor_both_input_and_output_is_one_ref_parameter(tmp_path):
    folder = write_package(tmp_path / "v", {"Accumulate": ACCUMULATE})
    declaration = _declaration(folder, "Accumulate")
    written = _vendors.written_by_prototype(declaration, _vendors.prototypes(folder)["Accumulate"])
    assert written == ("stateRef", "out")


def test_a_header_that_does_not_follow_its_prototype_falls_back_to_the_name_rule(tmp_path):
    folder = write_package(tmp_path / "v", {"CustomAddMul": (ADD_MUL[0][:3], ADD_MUL[1])})
    declaration = _declaration(folder, "CustomAddMul")
    assert _vendors.written_by_prototype(declaration, _vendors.prototypes(folder)["CustomAddMul"]) is None


# -- where packages are found, in CANN's order ---------------------------------------------------------


def test_custom_opp_path_first_then_config_ini_in_its_order(tmp_path):
    first, second = tmp_path / "a" / "vendors" / "one", tmp_path / "b" / "vendors" / "two"
    opp = tmp_path / "opp"
    for folder in (first, second, opp / "vendors" / "x", opp / "vendors" / "y"):
        folder.mkdir(parents=True)
    (opp / "vendors" / "config.ini").write_text("load_priority=y,x,missing\n")
    environ = {
        "ASCEND_CUSTOM_OPP_PATH": f"{first}:{tmp_path / 'nowhere'}:{second}",
        "ASCEND_OPP_PATH": str(opp),
    }
    found = _vendors.found_vendors(environ, home=None)
    assert [v.folder for v in found] == [first, second, opp / "vendors" / "y", opp / "vendors" / "x"]
    assert [v.found_by for v in found] == ["ASCEND_CUSTOM_OPP_PATH"] * 2 + ["config.ini"] * 2
    # without ASCEND_OPP_PATH, the CANN home's opp/
    (tmp_path / "home" / "opp" / "vendors" / "z").mkdir(parents=True)
    (tmp_path / "home" / "opp" / "vendors" / "config.ini").write_text("[vendors]\nload_priority = z\n")
    assert [v.folder.name for v in _vendors.found_vendors({}, home=tmp_path / "home")] == ["z"]


def test_the_first_package_declaring_an_operator_wins_over_the_next_and_the_built_ins(tmp_path):
    one = write_package(tmp_path / "one", {"CustomAddMul": ADD_MUL})
    two = write_package(
        tmp_path / "two", {"CustomAddMul": (["const aclTensor *a", "const aclTensor *out"], "")}
    )
    builtin = _headers.Catalogue({"aclnn_custom_add_mul.h": ""})
    layered = _vendors.Layered([_vendors.Vendor(one, "test"), _vendors.Vendor(two, "test")], builtin)
    found = layered.find("custom_add_mul")
    assert found.source == str(one) and found.library == one / _vendors.LIBRARY
    assert found.written == ("y1", "y2")
    assert [d.source for d in layered.declarations()] == [str(one)]


# -- load() ----------------------------------------------------------------------------------------------


def test_load_returns_what_it_added_and_a_second_load_changes_nothing(tmp_path, fresh_packages):
    folder = write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL, "ScaleInPlace": SCALE})
    assert sorted(ops.load(folder)) == ["aclnnCustomAddMul", "aclnnScaleInPlace"]
    assert ops.load(folder) == []
    assert "custom_add_mul" in dir(ops)


def test_load_refuses_a_folder_that_is_no_package_naming_it(tmp_path, fresh_packages):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ops.VendorError, match=r"empty is not a custom operator package: it has no headers"):
        ops.load(tmp_path / "empty")


# -- references ------------------------------------------------------------------------------------------


def test_a_reference_runs_a_custom_operator_on_the_numpy_backend(tmp_path, fresh_packages):
    ops.load(write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL}))

    @ops.reference("custom_add_mul")
    def _(x1, x2, y1, y2):
        y1[...] = x1 + x2
        y2[...] = x1 * x2

    import inspect

    assert list(inspect.signature(ops.custom_add_mul).parameters) == ["x1", "x2", "y1", "y2", "stream"]
    assert "aclnnStatus aclnnCustomAddMulGetWorkspaceSize(const aclTensor* x1" in ops.custom_add_mul.__doc__
    assert "const aclrtStream stream);" in ops.custom_add_mul.__doc__
    a, b = np.arange(4, dtype=np.float32), np.full(4, 3, np.float32)
    y1, y2 = ops.custom_add_mul(a, b, np.empty(4, np.float32), np.empty(4, np.float32))
    np.testing.assert_array_equal(y1, a + b)
    np.testing.assert_array_equal(y2, a * b)
    d = pyaclnn.to_device(a)
    out1, out2 = pyaclnn.empty(4, np.float32), pyaclnn.empty(4, np.float32)
    r1, r2 = ops.custom_add_mul(d, d, out1, out2)
    assert r1 is out1 and r2 is out2
    np.testing.assert_array_equal(out2.numpy(), a * a)
    for x in (d, out1, out2):
        x.close()


def test_a_reference_by_c_name_and_outputs_given_to_load(tmp_path, fresh_packages):
    ops.load(write_package(tmp_path / "v", {"ScaleInPlace": SCALE}), outputs={"aclnnScaleInPlace": ["x"]})

    def scale(x, factor):
        x *= factor

    ops.register_reference("aclnnScaleInPlace", scale)
    x = np.arange(3, dtype=np.float32)
    result = ops.scale_in_place(x, 2.0)
    assert result is x  # written back into the NumPy array, and returned
    np.testing.assert_array_equal(x, [0, 2, 4])


def test_without_outputs_a_tensor_written_in_place_is_not_copied_back_to_numpy(tmp_path, fresh_packages):
    """The limit docs/ops.md states: a tensor written without being an output must be a DeviceArray."""
    ops.load(write_package(tmp_path / "v", {"ScaleInPlace": SCALE}))

    def scale(x, factor):
        x *= factor

    ops.register_reference("ScaleInPlace", scale)
    d = pyaclnn.to_device(np.ones(3, np.float32))
    assert ops.scale_in_place(d, 3.0) is None  # no output by the rules
    np.testing.assert_array_equal(d.numpy(), [3, 3, 3])  # the device array was written
    d.close()


def test_without_a_reference_the_numpy_backend_says_how_to_register_one(tmp_path, fresh_packages):
    ops.load(write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL}))
    with pytest.raises(AttributeError) as info:
        ops.custom_add_mul  # noqa: B018
    message = str(info.value)
    assert "aclnnCustomAddMul" in message and "register_reference('custom_add_mul', fn)" in message
    assert "npu backend with CANN" in message


def test_reference_runs_the_numpy_implementation_on_the_host(tmp_path, fresh_packages):
    ops.load(write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL}))
    ops.register_reference(
        "CustomAddMul", lambda x1, x2, y1, y2: (np.add(x1, x2, out=y1), np.multiply(x1, x2, out=y2))
    )
    y1, y2 = ops.custom_add_mul.reference(
        np.ones(2, np.float32), np.full(2, 2, np.float32), np.empty(2, np.float32), np.empty(2, np.float32)
    )
    np.testing.assert_array_equal(y1, [3, 3])
    np.testing.assert_array_equal(y2, [2, 2])


def test_the_catalogue_says_where_each_operator_comes_from(tmp_path, fresh_packages):
    from pyaclnn.ops import _listing

    folder = write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL})
    ops.load(folder)
    report = _listing.describe(ops.catalogue(), "numpy")
    sources = {o["name"]: o["source"] for o in report["operators"]}
    assert sources["aclnnCustomAddMul"] == str(folder.resolve())
    assert sources["aclnnAdd"] == "built-in"
    roles = {
        p["name"]: p["role"]
        for o in report["operators"]
        if o["name"] == "aclnnCustomAddMul"
        for p in o["params"]
    }
    assert roles == {"x1": "input", "x2": "input", "y1": "output", "y2": "output"}


# -- on the npu backend, with packages built for the C emulator (tests/custom_package.py) -------------


@pytest.fixture
def npu_packages(emulator_home, monkeypatch, fresh_packages):
    """The npu backend over the emulator, with no package found or loaded yet."""
    import os

    os.environ["PYACLNN_ASCEND_HOME"] = str(emulator_home)
    pyaclnn.set_backend("npu")
    yield emulator_home
    pyaclnn.finalize("npu")
    from pyaclnn import backends

    counts = backends.get("npu").live_counts()
    assert not any(counts.values()), counts


def test_a_loaded_package_runs_its_operators_from_its_own_library(tmp_path, npu_packages):
    from custom_package import build_vendor

    vendor = build_vendor(
        tmp_path / "opp", operators=("CustomAddMul", "ScaleInPlace", "MissingLaunch", "SelfRef")
    )
    added = ops.load(vendor, outputs={"aclnnScaleInPlace": ["x"]})
    assert sorted(added) == ["aclnnCustomAddMul", "aclnnMissingLaunch", "aclnnScaleInPlace", "aclnnSelfRef"]
    a, b = np.arange(4, dtype=np.float32), np.full(4, 2, np.float32)
    y1, y2 = ops.custom_add_mul(a, b, np.empty(4, np.float32), np.empty(4, np.float32))  # roles: op_proto
    np.testing.assert_array_equal(y1, a + b)
    np.testing.assert_array_equal(y2, a * b)
    # a reference never replaces the device there; .reference runs it on the host, to compare
    ops.register_reference(
        "custom_add_mul", lambda x1, x2, o1, o2: (np.add(x1, x2, out=o1), np.add(x1, x2, out=o2))
    )
    device = ops.custom_add_mul(a, b, np.empty(4, np.float32), np.empty(4, np.float32))
    np.testing.assert_array_equal(device[1], a * b)  # the device's, not the (different) reference's
    host = ops.custom_add_mul.reference(a, b, np.empty(4, np.float32), np.empty(4, np.float32))
    np.testing.assert_array_equal(host[1], a + b)
    x = np.ones(3, np.float32)
    assert ops.scale_in_place(x, 4.0) is x  # named by outputs=: written back
    np.testing.assert_array_equal(x, [4, 4, 4])
    with pytest.raises(AttributeError, match=r"aclnnMissingLaunch is not exported by .*libcust_opapi.so"):
        ops.missing_launch  # noqa: B018
    with pytest.raises(pyaclnn.AclnnError, match="ACLNN_ERR_PARAM_INVALID"):
        ops.custom_add_mul(a, np.ones(3, np.float32), np.empty(4, np.float32), np.empty(4, np.float32))
    from pyaclnn.ops import _listing

    refused = {
        r["name"]: r["reason"] for r in _listing.describe(ops.catalogue(), "npu", backend="npu")["refused"]
    }
    assert "aclnnMissingLaunch is not exported" in refused["aclnnMissingLaunch"]


def test_a_package_shadows_the_built_in_add_and_the_first_package_wins(tmp_path, npu_packages):
    from custom_package import build_vendor

    x, y = np.ones(2, np.float32), np.ones(2, np.float32)
    builtin = ops.add(x, y, 1, np.empty(2, np.float32))
    np.testing.assert_array_equal(builtin, [2, 2])
    first = build_vendor(tmp_path / "a", vendor="first", operators=("Add",), tag=1000.0)
    second = build_vendor(tmp_path / "b", vendor="second", operators=("Add",), tag=2000.0)
    ops.load(first)
    ops.load(second)
    np.testing.assert_array_equal(ops.add(x, y, 1, np.empty(2, np.float32)), [1002, 1002])
    assert ops.add.declaration.source == str(first.resolve())


def test_packages_found_by_the_environment_in_cann_order(tmp_path, emulator_home):
    """ASCEND_CUSTOM_OPP_PATH first, then config.ini's load_priority, then load(): in a child
    process, since the npu backend reads the environment when it is first used."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    from custom_package import build_vendor, write_config

    opp = tmp_path / "opp"
    env_first = build_vendor(tmp_path / "env", vendor="env", operators=("Add",), tag=10.0)
    build_vendor(opp, vendor="low", operators=("Add", "CustomAddMul"), tag=20.0)
    build_vendor(opp, vendor="high", operators=("Add",), tag=30.0)
    write_config(opp, ["high", "low"])
    code = textwrap.dedent(
        """
        import json, numpy as np
        from pyaclnn import ops
        add = ops.add(np.zeros(1, np.float32), np.zeros(1, np.float32), 1, np.empty(1, np.float32))
        print(json.dumps({"add": float(add[0]), "source": ops.add.declaration.source,
                          "custom": ops.custom_add_mul.declaration.source}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYACLNN_", "ASCEND_"))}
    env.update(
        PYACLNN_ASCEND_HOME=str(emulator_home),
        PYACLNN_BACKEND="npu",
        ASCEND_CUSTOM_OPP_PATH=str(env_first),
        ASCEND_OPP_PATH=str(opp),
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["add"] == 10.0 and result["source"] == str(env_first)
    assert result["custom"] == str(opp / "vendors" / "low")
    env.pop("ASCEND_CUSTOM_OPP_PATH")  # then config.ini decides: high before low
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["add"] == 30.0


def test_a_library_that_does_not_open_is_refused_naming_it(tmp_path, npu_packages):
    from custom_package import build_vendor

    vendor = build_vendor(tmp_path / "opp", operators=("CustomAddMul",))
    broken = tmp_path / "broken"
    import shutil

    shutil.copytree(vendor, broken)
    (broken / "op_api" / "lib" / "libcust_opapi.so").write_bytes(b"not an ELF file")
    with pytest.raises(ops.VendorError, match=r"libcust_opapi.so does not open: "):
        ops.load(broken)


def test_the_command_line_lists_a_vendor_folder_with_its_source_and_roles(tmp_path):
    import json
    import subprocess
    import sys

    folder = write_package(tmp_path / "v", {"CustomAddMul": ADD_MUL})
    done = subprocess.run(
        [sys.executable, "-m", "pyaclnn", "ops", "--headers", str(folder), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(done.stdout)
    assert report["headers"] == str(folder)
    [entry] = report["operators"]
    assert entry["source"] == str(folder)
    assert [p["role"] for p in entry["params"]] == ["input", "input", "output", "output"]


def test_inplace_add_of_an_array_with_itself_on_both_backends(backend):
    """x.add_(x): InplaceAdd given the same array as selfRef and other (the emulator's and the
    numpy backend's reference both read other before writing selfRef)."""
    previous = pyaclnn.get_backend()
    pyaclnn.set_backend(backend)
    try:
        x = np.arange(4, dtype=np.float32)
        result = ops.inplace_add(x, x, 2)
        assert result is x
        np.testing.assert_array_equal(x, [0, 3, 6, 9])
        d = pyaclnn.to_device(np.arange(4, dtype=np.float32))
        ops.inplace_add(d, d, 1)
        np.testing.assert_array_equal(d.numpy(), [0, 2, 4, 6])
        d.close()
    finally:
        pyaclnn.set_backend(previous)
