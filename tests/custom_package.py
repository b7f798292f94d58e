"""Test fixture: installed custom operator packages (vendor folders) that run on the emulator.

A package built with CANN's operator project tools installs as ``<opp>/vendors/<vendor>/``
holding, among kernels and configuration this fixture leaves out:

- ``op_api/include/aclnn_<op_snake>.h``: the generated two-phase declarations of each operator;
- ``op_api/lib/libcust_opapi.so``: both phases of every operator;
- ``op_proto/inc/op_proto.h``: each operator's ``REG_OP`` prototype (inputs, outputs, attributes).

:func:`build_vendor` makes such a folder whose library runs on the host emulator
(tests/emulator): the C sources of ``tests/custom_opp/`` compiled with gcc and the emulator's
flags, with the emulator's ``ops_common.c`` inside as its operator libraries have it, linked
against the emulator home's ``libnnopbase.so`` and runtime with a RUNPATH to that ``lib64/``.
The headers are written here in the generated form, and the C sources include them, so the
compiler checks every definition against its declaration. :func:`write_config` writes the
``<opp>/vendors/config.ini`` that orders several vendors.

The operators (:data:`OPERATORS`; any subset per build, so one test can make several vendors):

``CustomAddMul``
    ``y1 = x1 + x2``, ``y2 = x1 * x2``; the header declares all four ``const aclTensor *``, so only
    the prototype says y1 and y2 are outputs.
``Add``
    CANN's built-in ``aclnnAdd`` signature, computing ``self + alpha * other + tag`` (``tag`` a build
    argument), to tell which vendor's Add ran.
``ScaleInPlace``
    ``x *= scale``: writes the tensor it declares as its only input (.INPUT(x), .ATTR(scale)).
``MissingLaunch``
    The header declares both phases, the library exports phase 1 only.
``SelfRef``
    ``xRef += y``: x is both .INPUT(x) and .OUTPUT(x), so the header lists it once as ``aclTensor *xRef``.

All take float32 only: a NULL required tensor gives 161001, a wrong dtype or shape 161002, with
an ``aclGetRecentErrMsg`` text naming the C parameter. Phase 2 queues the kernel on the stream's
worker, as the emulator's own operators do.

Builds are cached per process: each object once (Add's once per tag), a library once per
(emulator home, operators, tag); another vendor folder with the same ones gets a copy.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SOURCES = HERE / "custom_opp"
EMULATOR_SOURCES = HERE / "emulator"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # emulator_build, a sibling module

#: The first line of every generated header's opening comment, with the generator's spelling.
GENERATED_NOTE = "calution: this file was generated automaticlly donot change it."

FLOAT = "TensorType({DT_FLOAT})"


@dataclass(frozen=True)
class Param:
    """One phase-1 parameter as the generated header declares it."""

    type: str  # "const aclTensor *", "double", "aclTensor *"
    name: str
    kind: str = "required"  # what the header's comment block says: required, optional, dynamic

    @property
    def declaration(self) -> str:
        return f"{self.type}{self.name}" if self.type.endswith("*") else f"{self.type} {self.name}"


@dataclass(frozen=True)
class Operator:
    """A custom operator of the fixture: its header, prototype and C source."""

    op_type: str  # REG_OP name; the aclnn name is aclnn<op_type>
    header: str  # op_api/include/<header>
    params: tuple[Param, ...]  # phase 1 without workspaceSize and executor
    proto: tuple[str, ...]  # the REG_OP lines between REG_OP(...) and .OP_END_FACTORY_REG(...)
    source: str  # tests/custom_opp/<source>
    const_stream: bool  # phase 2 declares `const aclrtStream stream` (else `aclrtStream stream`)
    exports_phase2: bool = True

    @property
    def phase1(self) -> str:
        return f"aclnn{self.op_type}GetWorkspaceSize"

    @property
    def phase2(self) -> str:
        return f"aclnn{self.op_type}"


OPERATORS: dict[str, Operator] = {
    op.op_type: op
    for op in (
        Operator(
            "CustomAddMul",
            "aclnn_custom_add_mul.h",
            (
                Param("const aclTensor *", "x1"),
                Param("const aclTensor *", "x2"),
                Param("const aclTensor *", "y1"),
                Param("const aclTensor *", "y2"),
            ),
            (
                f".INPUT(x1, {FLOAT})",
                f".INPUT(x2, {FLOAT})",
                f".OUTPUT(y1, {FLOAT})",
                f".OUTPUT(y2, {FLOAT})",
            ),
            "custom_add_mul.c",
            const_stream=True,
        ),
        Operator(
            "Add",
            "aclnn_add.h",
            (
                Param("const aclTensor *", "self"),
                Param("const aclTensor *", "other"),
                Param("const aclScalar *", "alpha"),
                Param("aclTensor *", "out"),
            ),
            (
                f".INPUT(self, {FLOAT})",
                f".INPUT(other, {FLOAT})",
                f".INPUT(alpha, {FLOAT})",
                f".OUTPUT(out, {FLOAT})",
            ),
            "add.c",
            const_stream=False,
        ),
        Operator(
            "ScaleInPlace",
            "aclnn_scale_in_place.h",
            (Param("const aclTensor *", "x"), Param("double", "scale", "optional")),
            (f".INPUT(x, {FLOAT})", ".ATTR(scale, Float, 1.0)"),
            "scale_in_place.c",
            const_stream=True,
        ),
        Operator(
            "MissingLaunch",
            "aclnn_missing_launch.h",
            # a single output: the generator names it out (the prototype says y)
            (Param("const aclTensor *", "x"), Param("const aclTensor *", "out")),
            (f".INPUT(x, {FLOAT})", f".OUTPUT(y, {FLOAT})"),
            "missing_launch.c",
            const_stream=False,
            exports_phase2=False,
        ),
        Operator(
            "SelfRef",
            "aclnn_self_ref.h",
            (Param("aclTensor *", "xRef"), Param("const aclTensor *", "y")),
            (f".INPUT(x, {FLOAT})", f".INPUT(y, {FLOAT})", f".OUTPUT(x, {FLOAT})"),
            "self_ref.c",
            const_stream=False,
        ),
    )
}
ALL_OPERATORS: tuple[str, ...] = tuple(OPERATORS)
DEFAULT_TAG = 1000.0


# -- the installed files -----------------------------------------------------------------


def _guard(header: str) -> str:
    return header.removesuffix(".h").upper() + "_H_"


def _prototype(name: str, params: Sequence[str]) -> list[str]:
    lines = ['__attribute__((visibility("default")))', f"aclnnStatus {name}("]
    lines += [f"    {p}," for p in params[:-1]]
    lines.append(f"    {params[-1]});")
    return lines


def header_text(op_type: str) -> str:
    """The generated header of one operator (``op_api/include/aclnn_<op_snake>.h``)."""
    op = OPERATORS[op_type]
    guard = _guard(op.header)
    stream = "const aclrtStream stream" if op.const_stream else "aclrtStream stream"
    lines = [
        "",
        "/*",
        f" * {GENERATED_NOTE}",
        "*/",
        "",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        '#include "aclnn/acl_meta.h"',
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"/* function: {op.phase1}",
        " * parameters :",
        *(f" * {p.name} : {p.kind}" for p in op.params),
        " * workspaceSize : size of workspace(output).",
        " * executor : executor context(output).",
        " */",
        *_prototype(
            op.phase1,
            [*(p.declaration for p in op.params), "uint64_t *workspaceSize", "aclOpExecutor **executor"],
        ),
        "",
        f"/* function: {op.phase2}",
        " * parameters :",
        " * workspace : workspace memory addr(input).",
        " * workspaceSize : size of workspace(input).",
        " * executor : executor context(input).",
        " * stream : acl stream.",
        " */",
        *_prototype(
            op.phase2, ["void *workspace", "uint64_t workspaceSize", "aclOpExecutor *executor", stream]
        ),
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        "",
        "#endif",
        "",
    ]
    return "\n".join(lines)


def proto_text(op_types: Iterable[str]) -> str:
    """``op_proto/inc/op_proto.h`` of a package holding ``op_types``."""
    lines = [
        "#ifndef OP_PROTO_H_",
        "#define OP_PROTO_H_",
        "",
        '#include "graph/operator_reg.h"',
        '#include "register/op_impl_registry.h"',
        "",
        "namespace ge {",
        "",
    ]
    for op_type in op_types:
        op = OPERATORS[op_type]
        lines.append(f"REG_OP({op.op_type})")
        lines += [f"    {line}" for line in op.proto]
        lines += [f"    .OP_END_FACTORY_REG({op.op_type});", ""]
    lines += ["}", "", "#endif", ""]
    return "\n".join(lines)


def write_config(opp: Path, vendors: Sequence[str]) -> Path:
    """Write ``<opp>/vendors/config.ini`` as CANN's installer does: one ``load_priority=`` line
    naming the vendors, comma-separated, the first looked at first. Returns the file."""
    path = Path(opp) / "vendors" / "config.ini"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"load_priority={','.join(vendors)}\n")
    return path


# -- building the library ----------------------------------------------------------------

_lock = threading.Lock()
_cache_dir: Path | None = None
_objects: dict[tuple, Path] = {}  # (compiler flags, object name) -> object file
_libraries: dict[tuple, Path] = {}  # (home, operators, tag) -> built library


def _cache() -> Path:
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = Path(tempfile.mkdtemp(prefix="pyaclnn-custom-opp-"))
        atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
        include = _cache_dir / "include"
        include.mkdir()
        for op in OPERATORS.values():
            (include / op.header).write_text(header_text(op.op_type))
    return _cache_dir


def _compiler() -> str:
    for name in (os.environ.get("CC", ""), "gcc", "cc"):
        if name and shutil.which(name):
            return name
    raise RuntimeError("building the custom operator package needs gcc (or CC) on PATH")


def _sanitize_flags() -> list[str]:
    """The emulator's sanitizer flags when PYACLNN_EMU_SANITIZE selects a sanitized build."""
    from emulator_build import sanitizers

    chosen = sanitizers()
    if not chosen:
        return []
    flags = [f"-fsanitize={','.join(chosen)}", "-fno-omit-frame-pointer"]
    if "undefined" in chosen:
        flags.append("-fno-sanitize-recover=undefined")
    return flags


def _compile_flags() -> list[str]:
    # The emulator's (tests/emulator/CMakeLists.txt, Release): C11 without extensions, PIC,
    # hidden symbols unless declared otherwise, every warning an error.
    return [
        "-std=c11",
        "-O2",
        "-DNDEBUG",
        "-fPIC",
        "-fvisibility=hidden",
        "-Wall",
        "-Wextra",
        "-Werror",
        f"-I{REPO / 'include'}",
        f"-I{EMULATOR_SOURCES}",
        f"-I{_cache() / 'include'}",
        *_sanitize_flags(),
    ]


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the custom operator package failed: {' '.join(cmd)}\n{proc.stdout}")


def _tag_literal(tag: float) -> str:
    value = float(tag)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"tag must be a finite float, got {tag!r}")
    return f"({value.hex()})"  # a C99 hexadecimal literal: the exact double


def _object_names(operators: Sequence[str], tag: float) -> list[str]:
    """The objects of a library: the emulator's helpers, then one per operator (Add's per tag)."""
    names = ["common"]
    for op_type in operators:
        suffix = "-" + hashlib.sha1(_tag_literal(tag).encode()).hexdigest()[:8] if op_type == "Add" else ""
        names.append(op_type + suffix)
    return names


def _compile_missing(names: Sequence[str], tag: float) -> list[Path]:
    """Compile the objects this process has not compiled yet with the current flags (in parallel);
    returns every object's path. Objects do not depend on the emulator home, only the link does."""
    cc, flags = _compiler(), _compile_flags()
    out_dir = _cache() / "obj" / hashlib.sha1(repr(flags).encode()).hexdigest()[:12]
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in names:
        key = (tuple(flags), name)
        if key in _objects:
            continue
        op_type = name.split("-")[0]
        source = (
            EMULATOR_SOURCES / "ops_common.c" if name == "common" else SOURCES / OPERATORS[op_type].source
        )
        extra = [f"-DCUSTOM_ADD_TAG={_tag_literal(tag)}"] if op_type == "Add" else []
        obj = out_dir / f"{name}.o"
        jobs.append((key, [cc, *flags, *extra, "-c", str(source), "-o", str(obj)], obj))
    if jobs:
        with ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
            list(pool.map(lambda job: _run(job[1]), jobs))
        for key, _, obj in jobs:
            _objects[key] = obj
    return [_objects[(tuple(flags), name)] for name in names]


def _runtime_library(home: Path) -> str:
    """The runtime's link name: libacl_rt.so in the split layout (CANN >= 8.5), else libascendcl.so."""
    return "acl_rt" if (home / "lib64" / "libacl_rt.so").is_file() else "ascendcl"


def _build_library(home: Path, operators: tuple[str, ...], tag: float) -> Path:
    objects = _compile_missing(_object_names(operators, tag), tag)
    digest = hashlib.sha1(repr((str(home), operators, _tag_literal(tag))).encode()).hexdigest()[:16]
    lib = _cache() / "lib" / digest / "libcust_opapi.so"
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib64 = home / "lib64"
    _run(
        [
            _compiler(),
            "-shared",
            "-o",
            str(lib),
            *(str(obj) for obj in objects),
            *_sanitize_flags(),
            "-Wl,-soname,libcust_opapi.so",
            "-Wl,--no-undefined",
            "-Wl,--no-as-needed",  # DT_NEEDED on nnopbase and the runtime, as CANN's operator libraries
            "-Wl,--enable-new-dtags",  # RUNPATH (not RPATH)
            f"-Wl,-rpath,{lib64}",
            f"-L{lib64}",
            "-lnnopbase",
            f"-l{_runtime_library(home)}",
            "-lm",
            "-lpthread",
        ]
    )
    return lib


def library_path(vendor_folder: Path) -> Path:
    """Where a vendor folder keeps its operator library."""
    return Path(vendor_folder) / "op_api" / "lib" / "libcust_opapi.so"


def build_vendor(
    root: Path,
    vendor: str = "customize",
    operators: Sequence[str] = ALL_OPERATORS,
    tag: float = DEFAULT_TAG,
    emulator_home: Path | None = None,
) -> Path:
    """Install a custom operator package holding ``operators`` as ``<root>/vendors/<vendor>``.

    ``root`` plays the opp folder (``ASCEND_OPP_PATH``). ``tag`` is what the package's ``Add``
    adds to ``self + alpha * other``. ``emulator_home`` is the emulator the library links
    against (default: ``emulator_build.emulator_home("classic")``, built if needed): pass the
    home the process loads, since a library linked against another home's copy would bring a
    second emulator (its own handles and memory) into the process. A folder already there is
    replaced, so no header of an earlier build stays behind. Returns the vendor folder.

    Raises ValueError for an unknown operator or a tag that is not finite, RuntimeError when
    compiling or linking fails (with the compiler's output).
    """
    unknown = [op for op in operators if op not in OPERATORS]
    if unknown:
        raise ValueError(f"unknown operator(s) {unknown}; the fixture has {list(OPERATORS)}")
    if not operators:
        raise ValueError("a package needs at least one operator")
    ops = tuple(dict.fromkeys(operators))
    if emulator_home is None:
        from emulator_build import emulator_home as build_home

        emulator_home = build_home("classic")
    home = Path(emulator_home).resolve()
    literal = _tag_literal(tag)
    key = (str(home), ops, literal)
    with _lock:
        if key not in _libraries:
            _libraries[key] = _build_library(home, ops, tag)
        built = _libraries[key]
    folder = Path(root) / "vendors" / vendor
    if folder.exists():
        shutil.rmtree(folder)
    include = folder / "op_api" / "include"
    include.mkdir(parents=True, exist_ok=True)
    for op_type in ops:
        (include / OPERATORS[op_type].header).write_text(header_text(op_type))
    proto = folder / "op_proto" / "inc" / "op_proto.h"
    proto.parent.mkdir(parents=True, exist_ok=True)
    proto.write_text(proto_text(ops))
    target = library_path(folder)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, target)
    return folder
