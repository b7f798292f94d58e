"""The sanitizer switch of the emulator's build (tests/emulator_build.py, docs/reliability.md section 5).

``PYACLNN_EMU_SANITIZE`` must select a tree of its own with the sanitizer
flags, and the suite's emulator must be the one it selects. These tests read
the configure command and fake the build: the real sanitized build and the
suite under it are the recipe of docs/reliability.md, too slow for every run.
Only the last test looks at a real sanitized tree, when the suite runs under
the switch.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import emulator_build
import operators
import pytest

SANITIZE = emulator_build.SANITIZE_VAR


def _flags(command: list[str], name: str) -> str:
    """The value of ``-D<name>=...`` in a CMake command ("" when absent)."""
    prefix = f"-D{name}="
    return next((arg[len(prefix) :] for arg in command if arg.startswith(prefix)), "")


def test_without_the_variable_the_plain_tree_is_built_without_sanitizers():
    for environ in ({}, {SANITIZE: ""}, {SANITIZE: " , "}):
        assert emulator_build.sanitizers(environ) == ()
        assert emulator_build.build_dir(environ) == emulator_build.BUILD_DIR
        command = emulator_build.configure_command("cmake", environ)
        assert not any("sanitize" in arg for arg in command), command
        assert _flags(command, "CMAKE_BUILD_TYPE") == "Release"
        assert command[command.index("-B") + 1] == str(emulator_build.BUILD_DIR)


def test_address_and_undefined_select_their_own_tree_and_flags():
    environ = {SANITIZE: "address,undefined"}
    tree = emulator_build.build_dir(environ)
    assert tree == emulator_build.BUILD_DIR / "asan-ubsan" != emulator_build.BUILD_DIR
    command = emulator_build.configure_command("cmake", environ)
    assert command[command.index("-B") + 1] == str(tree)
    cflags = _flags(command, "CMAKE_C_FLAGS").split()
    assert cflags == [
        "-fsanitize=address,undefined",
        "-fno-omit-frame-pointer",
        "-fno-sanitize-recover=undefined",
    ]
    assert _flags(command, "CMAKE_CXX_FLAGS").split() == cflags
    for linker in ("CMAKE_SHARED_LINKER_FLAGS", "CMAKE_EXE_LINKER_FLAGS"):
        assert _flags(command, linker) == "-fsanitize=address,undefined"
    assert _flags(command, "CMAKE_BUILD_TYPE") == "RelWithDebInfo"  # -g: reports name source lines
    # The same set spelled otherwise is the same tree.
    for spelling in ("undefined,address", " address , undefined ", "address,address,undefined"):
        assert emulator_build.build_dir({SANITIZE: spelling}) == tree


def test_one_sanitizer_alone_gets_a_tree_and_only_its_flags():
    asan = {SANITIZE: "address"}
    assert emulator_build.build_dir(asan) == emulator_build.BUILD_DIR / "asan"
    assert _flags(emulator_build.configure_command("cmake", asan), "CMAKE_C_FLAGS").split() == [
        "-fsanitize=address",
        "-fno-omit-frame-pointer",
    ]
    ubsan = {SANITIZE: "undefined"}
    assert emulator_build.build_dir(ubsan) == emulator_build.BUILD_DIR / "ubsan"
    assert "-fno-sanitize-recover=undefined" in _flags(
        emulator_build.configure_command("cmake", ubsan), "CMAKE_C_FLAGS"
    )


def test_an_unknown_sanitizer_is_refused_by_name():
    with pytest.raises(ValueError, match=r"PYACLNN_EMU_SANITIZE='address,thread': unknown sanitizer thread"):
        emulator_build.sanitizers({SANITIZE: "address,thread"})


def _fake_build(built: list[Path]):
    """A stand-in for the CMake build: records the tree and lays out both homes in it."""

    def build(environ) -> None:
        tree = emulator_build.build_dir(environ)
        built.append(tree)
        for home, libs in emulator_build.LAYOUTS.values():
            (tree / home / "include" / "decl").mkdir(parents=True, exist_ok=True)
            (tree / home / "lib64").mkdir(parents=True, exist_ok=True)
            for lib in libs:
                (tree / home / "lib64" / lib).touch()

    return build


@pytest.fixture
def fake_build(monkeypatch, tmp_path) -> list[Path]:
    """emulator_home over a fake build in tmp_path; the list of trees it built."""
    built: list[Path] = []
    monkeypatch.setattr(emulator_build, "BUILD_DIR", tmp_path)
    monkeypatch.setattr(emulator_build, "_build", _fake_build(built))
    monkeypatch.setattr(emulator_build, "_built_in_this_process", set())
    monkeypatch.setattr(emulator_build, "_asan_loaded", lambda: True)
    return built


def test_emulator_home_gives_the_tree_the_variable_selects(fake_build, monkeypatch, tmp_path):
    monkeypatch.delenv(SANITIZE, raising=False)
    assert emulator_build.emulator_home("classic") == tmp_path / "emulator-home"
    monkeypatch.setenv(SANITIZE, "address,undefined")
    assert emulator_build.emulator_home("classic") == tmp_path / "asan-ubsan" / "emulator-home"
    assert emulator_build.emulator_home("split") == tmp_path / "asan-ubsan" / "emulator-home-split"
    assert fake_build == [tmp_path, tmp_path / "asan-ubsan"]  # each tree built once in the process


def test_an_asan_build_without_asan_preloaded_is_refused_before_building(fake_build, monkeypatch):
    monkeypatch.setattr(emulator_build, "_asan_loaded", lambda: False)
    monkeypatch.setenv(SANITIZE, "address,undefined")
    with pytest.raises(RuntimeError, match=r"ASan's runtime is not loaded.*LD_PRELOAD=.*libasan\.so"):
        emulator_build.emulator_home("classic")
    assert fake_build == []
    monkeypatch.setenv(SANITIZE, "undefined")  # UBSan's runtime needs no preload
    assert emulator_build.emulator_home("classic").parent.name == "ubsan"


def test_the_suite_loads_the_emulator_of_the_selected_tree(emulator_home):
    # The fixture every npu test uses: under the switch it is the sanitized tree.
    assert emulator_home.parent == emulator_build.build_dir()


def test_the_emulator_links_exactly_the_selected_sanitizer_runtimes(emulator_home):
    # Without the switch the plain tree links none; under it, each selected runtime.
    wanted = {"address": "libasan", "undefined": "libubsan"}
    selected = set(emulator_build.sanitizers())
    libs = sorted((emulator_home / "lib64").glob("*.so"))
    assert libs
    for lib in libs:
        dynamic = subprocess.run(
            ["readelf", "-d", str(lib)], capture_output=True, text=True, check=True
        ).stdout
        for sanitizer, runtime in wanted.items():
            assert (f"[{runtime}.so" in dynamic) == (sanitizer in selected), (lib, sanitizer, selected)


def test_under_asan_the_tests_asan_cannot_run_are_skipped_with_their_reason():
    # Skipped before their fixtures run: no emulator is built, no LD_PRELOAD is needed for this.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    env[SANITIZE] = "address,undefined"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/test_lifetimes.py",
            "-k",
            "test_soak_memory_and_live_objects_stay_bounded",
        ],
        cwd=emulator_build.REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the soak's one test per operator of the table, on each backend
    soaks = 2 * len(operators.NAMES)
    assert f"{soaks} skipped" in proc.stdout and "passed" not in proc.stdout, proc.stdout
    assert "not under ASan: ASan keeps freed memory in quarantine" in proc.stdout


def test_under_asan_the_fuzz_children_get_no_address_space_limit():
    code = (
        "import sys; sys.path.insert(0, 'tests'); import conftest; from fuzz import harness; "
        "print(harness.CHILD_MEMORY)"
    )
    for value, limit in (("", 6 << 30), ("address,undefined", resource.RLIM_INFINITY)):
        env = dict(os.environ, **{SANITIZE: value})
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=emulator_build.REPO, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        assert int(proc.stdout) == limit, (value, proc.stdout)
