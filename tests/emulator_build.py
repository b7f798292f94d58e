"""Build the host emulator of the CANN libraries (tests/emulator) on demand.

``emulator_home("classic")`` / ``emulator_home("split")`` return
``<repo>/.emulator-build/emulator-home`` / ``<repo>/.emulator-build/emulator-home-split``,
a directory shaped like a CANN install (``lib64/``, ``include/``), configuring and
building it with CMake the first time a process asks and whenever the tree is
missing. The CMake tree is kept out of ``build/``, which belongs to setuptools
(whatever lands in ``build/lib`` could otherwise end up in a wheel). A file
lock keeps parallel test processes from building at once.
There is no skip: a failing build raises RuntimeError with CMake's output.
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
import subprocess
import threading

REPO = pathlib.Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / ".emulator-build"

#: layout name -> (home directory name, libraries that must exist in lib64/)
LAYOUTS = {
    "classic": ("emulator-home", ("libascendcl.so", "libnnopbase.so", "libopapi.so")),
    "split": (
        "emulator-home-split",
        ("libacl_rt.so", "libascendcl.so", "libnnopbase.so", "libopapi_nn.so", "libopapi_cv.so"),
    ),
}

_built_in_this_process = False
_thread_lock = threading.Lock()


def _complete(home: pathlib.Path, libs: tuple[str, ...]) -> bool:
    return all((home / "lib64" / lib).is_file() for lib in libs) and (home / "include" / "decl").is_dir()


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"building the CANN emulator failed: {' '.join(cmd)} exited with {proc.returncode}\n{proc.stdout}"
        )


def _build() -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("building the CANN emulator needs cmake on PATH (and a C compiler)")
    BUILD_DIR.mkdir(exist_ok=True)
    _run(
        [
            cmake,
            "-S",
            str(REPO),
            "-B",
            str(BUILD_DIR),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DPYACLNN_BUILD_EMULATOR=ON",
        ]
    )
    jobs = str(max(1, min(2, os.cpu_count() or 1)))
    # Only the emulator's targets: a broken sample must not take the emulator down with it.
    _run([cmake, "--build", str(BUILD_DIR), "--target", "pyaclnn_emulator", "--parallel", jobs])


def emulator_home(layout: str = "classic") -> pathlib.Path:
    """Directory of the built emulator in ``layout`` ("classic" or "split").

    Builds (cmake configure + build, Release) once per process, and again
    whenever the tree is missing; raises RuntimeError with CMake's output if
    the build fails.
    """
    global _built_in_this_process
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")
    name, libs = LAYOUTS[layout]
    home = BUILD_DIR / name
    with _thread_lock:
        if _built_in_this_process and _complete(home, libs):
            return home
        BUILD_DIR.mkdir(exist_ok=True)
        with open(BUILD_DIR / ".emulator.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building right now
            try:
                # Always run the (incremental) build once per process, so edited
                # C sources are picked up; later calls only rebuild a missing tree.
                _build()
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        if not _complete(home, libs):
            raise RuntimeError(f"the CMake build finished but {home} lacks some of {libs} or include/decl")
        _built_in_this_process = True
    return home
