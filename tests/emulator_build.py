"""Build the host emulator of the CANN libraries (tests/emulator) on demand.

``emulator_home("classic")`` / ``emulator_home("split")`` return
``<repo>/.emulator-build/emulator-home`` / ``<repo>/.emulator-build/emulator-home-split``,
a directory shaped like a CANN install (``lib64/``, ``include/``), configuring and
building it with CMake the first time a process asks and whenever the tree is
missing. The CMake tree is kept out of ``build/``, which belongs to setuptools
(whatever lands in ``build/lib`` could otherwise end up in a wheel). A file
lock keeps parallel test processes from building at once.
There is no skip: a failing build raises RuntimeError with CMake's output.

Sanitizers
----------
``PYACLNN_EMU_SANITIZE=address,undefined`` (or ``address``, or ``undefined``)
builds the emulator with ``-fsanitize=<list> -fno-omit-frame-pointer
-fno-sanitize-recover=undefined`` (RelWithDebInfo, so reports name lines) into
a tree of its own, ``.emulator-build/asan-ubsan`` (``asan``, ``ubsan``), and
``emulator_home`` returns its homes: every test that uses the emulator then
runs against the sanitized one. Its CMake cache holds other flags than the
plain tree's, hence the separate tree; it sits inside ``.emulator-build/`` so
that it stays out of git, the sdist and the docs checks as the plain one does.

Python itself is not instrumented, so ASan's runtime must be first in the
process: run the tests with ``LD_PRELOAD="$(gcc -print-file-name=libasan.so)
$(gcc -print-file-name=libubsan.so)"`` and ``ASAN_OPTIONS=detect_leaks=0``
(Python frees nothing at exit by design). :func:`emulator_home` refuses,
naming the missing ``LD_PRELOAD``, instead of letting ASan abort the process.
docs/reliability.md (section 5) has the whole recipe and the last result.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import threading
from collections.abc import Mapping

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / ".emulator-build"

#: The variable that selects a sanitized build, and the sanitizers it may name
#: (with the short name of each in the tree's name). Only these two: a sanitizer
#: whose runtime cannot be preloaded into an uninstrumented Python (thread, memory)
#: would check nothing here.
SANITIZE_VAR = "PYACLNN_EMU_SANITIZE"
SANITIZERS = {"address": "asan", "undefined": "ubsan"}

#: layout name -> (home directory name, libraries that must exist in lib64/)
LAYOUTS = {
    "classic": ("emulator-home", ("libascendcl.so", "libnnopbase.so", "libopapi.so", "libmsprofiler.so")),
    "split": (
        "emulator-home-split",
        (
            "libacl_rt.so",
            "libascendcl.so",
            "libnnopbase.so",
            "libopapi_nn.so",
            "libopapi_cv.so",
            "libopapi_math.so",
            "libmsprofiler.so",
        ),
    ),
}

# Build trees already built by this process (once each, then only when a tree is missing).
_built_in_this_process: set[pathlib.Path] = set()
_thread_lock = threading.Lock()


def sanitizers(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The sanitizers ``PYACLNN_EMU_SANITIZE`` names, in a fixed order; () when unset or empty.

    Raises
    ------
    ValueError
        For a name other than ``address`` and ``undefined``.
    """
    env = os.environ if environ is None else environ
    wanted = {word.strip() for word in env.get(SANITIZE_VAR, "").split(",") if word.strip()}
    unknown = sorted(wanted - set(SANITIZERS))
    if unknown:
        raise ValueError(
            f"{SANITIZE_VAR}={env[SANITIZE_VAR]!r}: unknown sanitizer {', '.join(unknown)} "
            f"(use {', '.join(SANITIZERS)} or both, comma-separated)"
        )
    return tuple(name for name in SANITIZERS if name in wanted)


def build_dir(environ: Mapping[str, str] | None = None) -> pathlib.Path:
    """The CMake tree for the sanitizers of ``environ``: ``.emulator-build`` or a tree inside it."""
    chosen = sanitizers(environ)
    if not chosen:
        return BUILD_DIR
    return BUILD_DIR / "-".join(SANITIZERS[name] for name in chosen)


def configure_command(cmake: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """The CMake configure command of the tree :func:`build_dir` names, with its sanitizer flags."""
    chosen = sanitizers(environ)
    command = [
        cmake,
        "-S",
        str(REPO),
        "-B",
        str(build_dir(environ)),
        "-DPYACLNN_BUILD_EMULATOR=ON",
    ]
    if not chosen:
        return [*command, "-DCMAKE_BUILD_TYPE=Release"]
    sanitize = "-fsanitize=" + ",".join(chosen)
    # Frame pointers: reports with whole stacks. No recovery from UB: a report must fail
    # the test (as ASan's own reports do), not scroll by in a passing run.
    cflags = f"{sanitize} -fno-omit-frame-pointer"
    if "undefined" in chosen:
        cflags += " -fno-sanitize-recover=undefined"
    return [
        *command,
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",  # -O2 -g: the reports name source lines
        f"-DCMAKE_C_FLAGS={cflags}",
        f"-DCMAKE_CXX_FLAGS={cflags}",  # the C++ samples of the same tree link the sanitized libraries
        f"-DCMAKE_SHARED_LINKER_FLAGS={sanitize}",
        f"-DCMAKE_EXE_LINKER_FLAGS={sanitize}",
    ]


def _asan_loaded() -> bool:
    """Whether ASan's runtime is mapped into this process (True where that cannot be told)."""
    try:
        return "libasan" in pathlib.Path("/proc/self/maps").read_text()
    except OSError:
        return True  # not Linux: let the loader say what it thinks


def _check_preloaded(chosen: tuple[str, ...]) -> None:
    """Refuse an ASan build that this process could not load: ASan would abort it."""
    # UBSan alone needs no preload: its runtime may come in with the first library that needs it.
    if "address" in chosen and not _asan_loaded():
        raise RuntimeError(
            f"{SANITIZE_VAR} includes address but ASan's runtime is not loaded in this Python: "
            'run with LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" '
            "ASAN_OPTIONS=detect_leaks=0 (docs/reliability.md, section 5)"
        )


def _complete(home: pathlib.Path, libs: tuple[str, ...]) -> bool:
    return all((home / "lib64" / lib).is_file() for lib in libs) and (home / "include" / "decl").is_dir()


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"building the CANN emulator failed: {' '.join(cmd)} exited with {proc.returncode}\n{proc.stdout}"
        )


def _build(environ: Mapping[str, str]) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("building the CANN emulator needs cmake on PATH (and a C compiler)")
    tree = build_dir(environ)
    tree.mkdir(parents=True, exist_ok=True)
    _run(configure_command(cmake, environ))
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    # Only the emulator's targets: a broken sample must not take the emulator down with it.
    _run([cmake, "--build", str(tree), "--target", "pyaclnn_emulator", "--parallel", jobs])


def emulator_home(layout: str = "classic") -> pathlib.Path:
    """Directory of the built emulator in ``layout`` ("classic" or "split").

    Builds (cmake configure + build) once per process, and again whenever the
    tree is missing; raises RuntimeError with CMake's output if the build
    fails. ``PYACLNN_EMU_SANITIZE`` (read at every call) selects a sanitized
    build in its own tree (see the module docstring).

    Raises
    ------
    ValueError
        For an unknown layout or sanitizer.
    RuntimeError
        The build failed, or an ASan build was asked for without ASan's
        runtime preloaded.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    environ = dict(os.environ)
    _check_preloaded(sanitizers(environ))
    name, libs = LAYOUTS[layout]
    tree = build_dir(environ)
    home = tree / name
    with _thread_lock:
        if tree in _built_in_this_process and _complete(home, libs):
            return home
        tree.mkdir(parents=True, exist_ok=True)
        with open(tree / ".emulator.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building right now
            try:
                # Always run the (incremental) build once per process, so edited
                # C sources are picked up; later calls only rebuild a missing tree.
                _build(environ)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        if not _complete(home, libs):
            raise RuntimeError(f"the CMake build finished but {home} lacks some of {libs} or include/decl")
        _built_in_this_process.add(tree)
    return home
