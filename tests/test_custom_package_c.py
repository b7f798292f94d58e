"""The custom operator package fixture (tests/custom_package.py) in C: its libraries, headers and prototypes.

The vendor folders are built once per module, three of them: ``customize`` with every
operator and Add's tag 1000, ``second`` with Add and CustomAddMul and tag -7.5 (another
vendor shadowing the same built-in), ``scaled`` with ScaleInPlace only. A child process per
emulator layout (the layouts' libraries share SONAMEs, as in test_emulator_ops.py) loads the
emulator, then each vendor's ``libcust_opapi.so`` with cffi, declared from the vendor's own
headers as pyaclnn's reader reads them; it runs every ``_check_*`` below against NumPy and
reports, and the tests read the report. The headers, prototypes and config are checked here
without loading anything.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import custom_package  # noqa: E402
from emulator_build import emulator_home  # noqa: E402

PARAM_NULLPTR, PARAM_INVALID = 161001, 161002

#: vendor -> (operators, Add's tag)
VENDORS = {
    "customize": (custom_package.ALL_OPERATORS, 1000.0),
    "second": (("Add", "CustomAddMul"), -7.5),
    "scaled": (("ScaleInPlace",), custom_package.DEFAULT_TAG),
}

# -- child side ---------------------------------------------------------------------------


class _Vendor:
    """One vendor's library, declared from its headers, on the emulator of ``e`` (test_emulator_ops._Emu)."""

    def __init__(self, e, folder: Path) -> None:
        import cffi

        from pyaclnn.ops import _headers

        self.e, self.folder = e, folder
        self.ffi = ffi = cffi.FFI()
        ffi.include(e.ffi)  # the same aclTensor *, aclScalar * ... as the emulator's helpers
        self.decls = {d.name: d for d in _headers.Catalogue(folder / "op_api" / "include").declarations()}
        ffi.cdef("\n".join(f"{d.phase1_prototype}\n{d.phase2_prototype}" for d in self.decls.values()))
        self.lib = ffi.dlopen(str(custom_package.library_path(folder)), ffi.RTLD_NOW)

    def exports(self) -> dict[str, bool]:
        found = {}
        for d in self.decls.values():
            for api in (d.phase1_api, d.phase2_api):
                try:
                    getattr(self.lib, api)
                    found[api] = True
                except AttributeError:
                    found[api] = False
        return found

    def run(self, op: str, *args, stream=None) -> tuple[int, str, int]:
        """Phase 1 with args, then (on success) phase 2 on ``stream`` (default: the default stream)
        and a synchronize of it. Returns (status of the failing phase or 0, message, workspace)."""
        e, ffi = self.e, self.e.ffi
        stream = ffi.NULL if stream is None else stream
        ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
        rc = getattr(self.lib, f"aclnn{op}GetWorkspaceSize")(*args, ws, ex)
        if rc != 0:
            return rc, e.msg(), 0
        if ex[0] == ffi.NULL:
            assert ws[0] == 0
            return 0, "", 0
        rc = getattr(self.lib, f"aclnn{op}")(ffi.NULL, ws[0], ex[0], stream)
        msg = e.msg() if rc else ""
        assert e.rt.aclrtSynchronizeStream(stream) == 0, e.msg()
        return rc, msg, int(ws[0])


def _fails(v: _Vendor, code: int, param: str, op: str, *args) -> None:
    rc, msg, _ = v.run(op, *args)
    assert rc == code, (rc, msg)
    assert re.search(rf"(?<![\w\[]){re.escape(param)}(?!\w)", msg), (param, msg)


def _check_custom_add_mul(e, vendors) -> None:
    from test_emulator_ops import rng

    v = vendors["customize"]
    r = rng(21)
    base = r.standard_normal((4, 6)).astype(np.float32)
    x1, x2 = base[:, ::2], r.standard_normal((4, 3)).astype(np.float32)  # x1 strided
    t1, t2 = e.tensor(x1), e.tensor(x2)
    y1, y2 = e.empty((4, 3), "float32"), e.empty((4, 3), "float32")
    assert v.run("CustomAddMul", t1[0], t2[0], y1[0], y2[0]) == (0, "", 0), e.msg()
    np.testing.assert_array_equal(e.fetch(y1), x1 + x2)
    np.testing.assert_array_equal(e.fetch(y2), x1 * x2)
    # the second vendor's copy computes the same
    assert vendors["second"].run("CustomAddMul", t2[0], t2[0], y1[0], y2[0])[0] == 0
    np.testing.assert_array_equal(e.fetch(y1), x2 + x2)
    null = e.ffi.NULL
    _fails(v, PARAM_NULLPTR, "x2", "CustomAddMul", t1[0], null, y1[0], y2[0])
    _fails(v, PARAM_NULLPTR, "y2", "CustomAddMul", t1[0], t2[0], y1[0], null)
    i = e.empty((4, 3), "int32")
    _fails(v, PARAM_INVALID, "y1", "CustomAddMul", t1[0], t2[0], i[0], y2[0])
    wide = e.empty((4, 4), "float32")
    _fails(v, PARAM_INVALID, "y2", "CustomAddMul", t1[0], t2[0], y1[0], wide[0])
    _fails(v, PARAM_INVALID, "x2", "CustomAddMul", t1[0], wide[0], y1[0], y2[0])
    assert "aclnnCustomAddMulGetWorkspaceSize" in v.run("CustomAddMul", t1[0], wide[0], y1[0], y2[0])[1]
    gone = e.empty((4, 3), "float32")
    e.release(gone)
    _fails(v, PARAM_INVALID, "x1", "CustomAddMul", gone[0], t2[0], y1[0], y2[0])
    empty = e.empty((0, 3), "float32")
    assert v.run("CustomAddMul", empty[0], empty[0], empty[0], empty[0]) == (0, "", 0)
    e.release(t1, t2, y1, y2, i, wide, empty)


def _check_add_of_each_vendor_and_the_built_in(e, vendors) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.array([0.5, -1.0, 2.0], np.float32)  # broadcast over rows
    tx, ty, out = e.tensor(x), e.tensor(y), e.empty((2, 3), "float32")
    for alpha_value, alpha_type in ((2, "int64"), (0.25, "float64"), (-1.5, "float32")):
        alpha = e.scalar(alpha_value, alpha_type)
        want = x + np.float32(alpha_value) * y
        for name, tag in (("customize", 1000.0), ("second", -7.5)):
            assert vendors[name].run("Add", tx[0], ty[0], alpha, out[0])[0] == 0, e.msg()
            np.testing.assert_allclose(e.fetch(out), want + np.float32(tag), rtol=1e-6)
        assert e.run("aclnnAdd", tx[0], ty[0], alpha, out[0])[0] == 0, e.msg()  # the emulator's own
        np.testing.assert_allclose(e.fetch(out), want, rtol=1e-6)
        e.release(alpha)
    v, ffi = vendors["customize"], e.ffi
    alpha = e.scalar(1.0, "float32")
    _fails(v, PARAM_NULLPTR, "alpha", "Add", tx[0], ty[0], ffi.NULL, out[0])
    _fails(v, PARAM_NULLPTR, "self", "Add", ffi.NULL, ty[0], alpha, out[0])
    half = e.empty((2, 3), "float16")
    _fails(v, PARAM_INVALID, "self", "Add", half[0], ty[0], alpha, out[0])  # float32 only
    _fails(v, PARAM_INVALID, "out", "Add", tx[0], ty[0], alpha, half[0])
    wrong = e.empty((3, 2), "float32")
    _fails(v, PARAM_INVALID, "out", "Add", tx[0], ty[0], alpha, wrong[0])
    _fails(v, PARAM_INVALID, "other", "Add", tx[0], wrong[0], alpha, out[0])
    # executors do not cross: the built-in's phase 2 refuses a custom one and the other way round
    ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    assert v.lib.aclnnAddGetWorkspaceSize(tx[0], ty[0], alpha, out[0], ws, ex) == 0, e.msg()
    assert e.op("aclnnAdd")(ffi.NULL, 0, ex[0], ffi.NULL) == PARAM_INVALID
    assert v.lib.aclnnAdd(ffi.NULL, 0, ex[0], ffi.NULL) == 0, e.msg()
    assert e.rt.aclrtSynchronizeStream(ffi.NULL) == 0
    assert e.op("aclnnAddGetWorkspaceSize")(tx[0], ty[0], alpha, out[0], ws, ex) == 0, e.msg()
    assert v.lib.aclnnAdd(ffi.NULL, 0, ex[0], ffi.NULL) == PARAM_INVALID
    assert e.op("aclnnAdd")(ffi.NULL, 0, ex[0], ffi.NULL) == 0, e.msg()
    assert e.rt.aclrtSynchronizeStream(ffi.NULL) == 0
    np.testing.assert_array_equal(e.fetch(out), x + y)
    e.release(tx, ty, out, alpha, half, wrong)


def _check_scale_in_place(e, vendors) -> None:
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    for name in ("customize", "scaled"):
        v = vendors[name]
        tx = e.tensor(base[:, 1:3])  # a strided view: the other columns stay
        assert v.run("ScaleInPlace", tx[0], 2.5)[0] == 0, e.msg()
        full = np.empty_like(base)
        raw = full.reshape(-1).view(np.uint8)
        assert e.rt.aclrtMemcpy(e.ffi.from_buffer(raw), raw.nbytes, tx[1], raw.nbytes, 2) == 0
        want = base.copy()
        want[:, 1:3] *= np.float32(2.5)
        np.testing.assert_array_equal(full, want)
        e.release(tx)
    v = vendors["scaled"]
    _fails(v, PARAM_NULLPTR, "x", "ScaleInPlace", e.ffi.NULL, 2.0)
    i = e.empty((2,), "int32")
    _fails(v, PARAM_INVALID, "x", "ScaleInPlace", i[0], 2.0)
    e.release(i)


def _check_self_ref(e, vendors) -> None:
    v = vendors["customize"]
    x, y = np.arange(5, dtype=np.float32), np.full(5, 0.5, np.float32)
    tx, ty = e.tensor(x), e.tensor(y)
    assert v.run("SelfRef", tx[0], ty[0])[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(tx), x + y)
    assert v.run("SelfRef", tx[0], tx[0])[0] == 0, e.msg()  # y the same tensor as xRef
    np.testing.assert_array_equal(e.fetch(tx), 2 * (x + y))
    short = e.empty((4,), "float32")
    _fails(v, PARAM_INVALID, "y", "SelfRef", tx[0], short[0])
    _fails(v, PARAM_NULLPTR, "xRef", "SelfRef", e.ffi.NULL, ty[0])
    e.release(tx, ty, short)


def _check_missing_launch_has_phase_1_only(e, vendors) -> None:
    v = vendors["customize"]
    with pytest.raises(AttributeError):
        v.lib.aclnnMissingLaunch  # noqa: B018
    x, out = e.empty((2, 2), "float32"), e.empty((2, 2), "float32")
    ws, ex = e.ffi.new("uint64_t *"), e.ffi.new("aclOpExecutor **")
    assert v.lib.aclnnMissingLaunchGetWorkspaceSize(x[0], out[0], ws, ex) == 0, e.msg()
    assert ex[0] == e.ffi.NULL and ws[0] == 0  # no executor: nothing could run it
    wrong = e.empty((2, 3), "float32")
    _fails(v, PARAM_INVALID, "out", "MissingLaunch", x[0], wrong[0])
    e.release(x, out, wrong)


def _check_exports(e, vendors) -> None:
    for name, (ops, _) in VENDORS.items():
        found = vendors[name].exports()
        want = {}
        for op in ops:
            spec = custom_package.OPERATORS[op]
            want[spec.phase1] = True
            want[spec.phase2] = spec.exports_phase2
        assert found == want, (name, found)


def _check_phase_2_runs_on_the_stream_s_worker(e, vendors) -> None:
    """Phase 2 returns before the kernel ran (simulated device time), on a stream of the caller's."""
    import time

    v, ffi = vendors["customize"], e.ffi
    stream = ffi.new("aclrtStream *")
    assert e.rt.aclrtCreateStream(stream) == 0, e.msg()
    x = np.ones(4, np.float32)
    t1, y1, y2 = e.tensor(x), e.empty((4,), "float32"), e.empty((4,), "float32")
    os.environ["PYACLNN_EMU_KERNEL_US"] = "200000"
    try:
        ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
        assert v.lib.aclnnCustomAddMulGetWorkspaceSize(t1[0], t1[0], y1[0], y2[0], ws, ex) == 0, e.msg()
        start = time.monotonic()
        assert v.lib.aclnnCustomAddMul(ffi.NULL, 0, ex[0], stream[0]) == 0, e.msg()
        queued = time.monotonic() - start
        assert e.rt.aclrtSynchronizeStream(stream[0]) == 0, e.msg()
        waited = time.monotonic() - start
    finally:
        del os.environ["PYACLNN_EMU_KERNEL_US"]
    assert queued < 0.1 <= waited, (queued, waited)
    np.testing.assert_array_equal(e.fetch(y1), x + x)
    # the executor was consumed by its phase 2
    assert v.lib.aclnnCustomAddMul(ffi.NULL, 0, ex[0], stream[0]) == 561103
    assert e.rt.aclrtDestroyStream(stream[0]) == 0
    e.release(t1, y1, y2)


_CHECKS = [f for name, f in sorted(globals().items()) if name.startswith("_check_")]
_CHECK_NAMES = [f.__name__[len("_check_") :] for f in _CHECKS]


def _child_main(layout: str, home: str, folders_json: str) -> None:
    from test_emulator_ops import _Emu

    folders = json.loads(folders_json)
    report: dict = {"checks": {}, "left": {}}
    e = _Emu(layout, Path(home))
    vendors = {name: _Vendor(e, Path(folder)) for name, folder in folders.items()}
    assert e.rt.aclrtSetDevice(0) == 0, e.msg()
    for name, check in zip(_CHECK_NAMES, _CHECKS):
        before = e.counts()
        try:
            check(e, vendors)
            report["checks"][name] = None
        except Exception:
            report["checks"][name] = traceback.format_exc()
        e.keep.clear()
        e.memory.clear()
        report["left"][name] = [now - then for now, then in zip(e.counts(), before)]
    report["final_counts"] = e.counts()
    report["hazards"] = e.rt.pyaclnnEmuHazardCount()
    json.dump(report, sys.stdout)


# -- parent side: pytest ------------------------------------------------------------------------

LAYOUTS = ("classic", "split")


@pytest.fixture(scope="module")
def opps(tmp_path_factory) -> dict[str, Path]:
    """layout -> an opp folder holding the three vendors, built against that layout's emulator."""
    found = {}
    for layout in LAYOUTS:
        home = emulator_home(layout)
        opp = tmp_path_factory.mktemp(f"opp-{layout}")
        for vendor, (ops, tag) in VENDORS.items():
            custom_package.build_vendor(opp, vendor, ops, tag=tag, emulator_home=home)
        found[layout] = opp
    return found


_reports: dict[str, dict] = {}


def _report(layout: str, opp: Path) -> dict:
    if layout not in _reports:
        home = emulator_home(layout)
        folders = {vendor: str(opp / "vendors" / vendor) for vendor in VENDORS}
        path = os.pathsep.join([str(HERE.parent), str(HERE), os.environ.get("PYTHONPATH", "")])
        proc = subprocess.run(
            [sys.executable, __file__, layout, str(home), json.dumps(folders)],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=path),
            timeout=120,
        )
        assert proc.returncode == 0, f"child ({layout}) crashed:\n{proc.stderr}\n{proc.stdout[-2000:]}"
        _reports[layout] = json.loads(proc.stdout)
    return _reports[layout]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("check", _CHECK_NAMES)
def test_custom_library_on_the_emulator(opps, layout: str, check: str) -> None:
    report = _report(layout, opps[layout])
    assert report["checks"][check] is None, report["checks"][check]
    assert report["left"][check] == [0] * 13, "live objects left behind (or destroyed twice)"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nothing_left_alive_and_no_hazards(opps, layout: str) -> None:
    report = _report(layout, opps[layout])
    assert report["final_counts"] == [0] * 13
    assert report["hazards"] == 0


def _vendor(opps, name: str = "customize") -> Path:
    return opps["classic"] / "vendors" / name


def test_the_vendor_folder_is_laid_out_as_installed(opps) -> None:
    for name, (ops, _) in VENDORS.items():
        folder = _vendor(opps, name)
        headers = sorted(p.name for p in (folder / "op_api" / "include").iterdir())
        assert headers == sorted(custom_package.OPERATORS[op].header for op in ops)
        assert custom_package.library_path(folder).is_file()
        proto = (folder / "op_proto" / "inc" / "op_proto.h").read_text()
        assert re.findall(r"REG_OP\((\w+)\)", proto) == list(ops)
        assert re.findall(r"OP_END_FACTORY_REG\((\w+)\)", proto) == list(ops)


def test_the_headers_parse_with_pyaclnn_s_reader(opps) -> None:
    from pyaclnn.ops import _headers

    decls = {d.name: d for d in _headers.Catalogue(_vendor(opps) / "op_api" / "include").declarations()}
    assert set(decls) == set(custom_package.ALL_OPERATORS)
    params = {name: [(p.type, p.name) for p in d.params] for name, d in decls.items()}
    assert params == {
        "CustomAddMul": [("const aclTensor*", n) for n in ("x1", "x2", "y1", "y2")],
        "Add": [
            ("const aclTensor*", "self"),
            ("const aclTensor*", "other"),
            ("const aclScalar*", "alpha"),
            ("aclTensor*", "out"),
        ],
        "ScaleInPlace": [("const aclTensor*", "x"), ("double", "scale")],
        "MissingLaunch": [("const aclTensor*", "x"), ("const aclTensor*", "out")],
        "SelfRef": [("aclTensor*", "xRef"), ("const aclTensor*", "y")],
    }
    for name, d in decls.items():
        assert d.refused is None, (name, d.refused)
        stream = "const aclrtStream" if custom_package.OPERATORS[name].const_stream else "aclrtStream"
        assert [(p.type, p.name) for p in d.phase2_params] == [
            ("void*", "workspace"),
            ("uint64_t", "workspaceSize"),
            ("aclOpExecutor*", "executor"),
            (stream, "stream"),
        ]
    # both forms of phase 2's stream are there
    assert {custom_package.OPERATORS[n].const_stream for n in decls} == {True, False}
    # the built-in's signature exactly (the emulator's CANN-form aclnn_add.h)
    builtin = _headers.Catalogue(emulator_home("classic") / _headers.HEADER_FOLDERS[0]).find("add")
    assert builtin is not None and builtin.params == decls["Add"].params


def test_the_headers_have_the_generated_form(opps) -> None:
    for path in sorted((_vendor(opps) / "op_api" / "include").glob("*.h")):
        text = path.read_text()
        assert custom_package.GENERATED_NOTE in text
        assert '#include "aclnn/acl_meta.h"' in text and 'extern "C" {' in text
        assert text.count('__attribute__((visibility("default")))') == 2
        # one parameter per line, each parameter listed in the comment block
        op = custom_package.OPERATORS[re.search(r"aclnnStatus aclnn(\w+)GetWorkspaceSize\(", text)[1]]
        for p in op.params:
            assert f"\n    {p.declaration},\n" in text, (path, p)
            assert f" * {p.name} : {p.kind}\n" in text
        assert "\n    aclOpExecutor **executor);\n" in text


def test_the_headers_compile_as_c11_and_cpp(opps, tmp_path: Path) -> None:
    home = emulator_home("classic")
    include = _vendor(opps) / "op_api" / "include"
    src = (
        "".join(f'#include "{p.name}"\n' for p in sorted(include.glob("*.h")))
        + "int main(void) { return 0; }\n"
    )
    for compiler, ext, std in (("cc", "c", "-std=c11"), ("c++", "cpp", "-std=c++17")):
        if shutil.which(compiler) is None:
            pytest.skip(f"no {compiler}")
        f = tmp_path / f"all.{ext}"
        f.write_text(src)
        cmd = [
            compiler,
            std,
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            f"-I{home / 'include'}",
            f"-I{include}",
        ]
        proc = subprocess.run([*cmd, str(f)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


def test_the_prototypes(opps) -> None:
    proto = (_vendor(opps) / "op_proto" / "inc" / "op_proto.h").read_text()
    blocks = dict(re.findall(r"REG_OP\((\w+)\)(.*?)\.OP_END_FACTORY_REG\(\1\)", proto, re.S))
    lines = {op: re.findall(r"\.(\w+)\((\w+)", body) for op, body in blocks.items()}
    assert lines == {
        "CustomAddMul": [("INPUT", "x1"), ("INPUT", "x2"), ("OUTPUT", "y1"), ("OUTPUT", "y2")],
        "Add": [("INPUT", "self"), ("INPUT", "other"), ("INPUT", "alpha"), ("OUTPUT", "out")],
        "ScaleInPlace": [("INPUT", "x"), ("ATTR", "scale")],
        "MissingLaunch": [("INPUT", "x"), ("OUTPUT", "y")],
        "SelfRef": [("INPUT", "x"), ("INPUT", "y"), ("OUTPUT", "x")],
    }
    assert ".INPUT(x1, TensorType({DT_FLOAT}))" in proto and ".ATTR(scale, Float, 1.0)" in proto


def test_the_library_links_the_emulator_home_with_a_runpath(opps) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("no readelf")
    for layout, runtime in (("classic", "libascendcl.so"), ("split", "libacl_rt.so")):
        lib = custom_package.library_path(opps[layout] / "vendors" / "customize")
        dynamic = subprocess.run(
            ["readelf", "-d", str(lib)], capture_output=True, text=True, check=True
        ).stdout
        needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dynamic)
        assert "libnnopbase.so" in needed and runtime in needed, needed
        runpath = re.search(r"\(RUNPATH\).*\[(.*)\]", dynamic)
        assert runpath is not None and Path(runpath[1]) == emulator_home(layout).resolve() / "lib64"


def test_a_second_build_of_the_same_package_is_a_copy(opps, tmp_path: Path) -> None:
    built = dict(custom_package._libraries)
    folder = custom_package.build_vendor(tmp_path, "again", VENDORS["second"][0], tag=VENDORS["second"][1])
    assert custom_package._libraries == built  # nothing compiled or linked
    assert folder == tmp_path / "vendors" / "again"
    # building into the same folder again replaces it: no header of the earlier build stays
    custom_package.build_vendor(tmp_path, "again", ["ScaleInPlace"])
    assert [p.name for p in (folder / "op_api" / "include").iterdir()] == ["aclnn_scale_in_place.h"]
    custom_package.build_vendor(tmp_path, "again", VENDORS["second"][0], tag=VENDORS["second"][1])
    assert (
        custom_package.library_path(folder).read_bytes()
        == custom_package.library_path(_vendor(opps, "second")).read_bytes()
    )


def test_build_vendor_refuses_unknown_operators_and_tags(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Nope"):
        custom_package.build_vendor(tmp_path, operators=["Nope"])
    with pytest.raises(ValueError, match="finite"):
        custom_package.build_vendor(tmp_path, operators=["Add"], tag=float("nan"))


def test_write_config_writes_the_load_priority_line(tmp_path: Path) -> None:
    path = custom_package.write_config(tmp_path / "opp", ["second", "customize"])
    assert path == tmp_path / "opp" / "vendors" / "config.ini"
    assert path.read_text() == "load_priority=second,customize\n"


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    _child_main(sys.argv[1], sys.argv[2], sys.argv[3])
