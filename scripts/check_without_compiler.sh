#!/usr/bin/env bash
# Install pyaclnn into a fresh virtual environment on a PATH with no C compiler,
# then run the NumPy kernels' tests there (the rule:
# "pip install . succeeds without a compiler and then uses the NumPy kernels").
#
# The machine keeps its compiler; the environment does not see it: the commands
# run under `env -i` with PATH holding only the new venv's bin directory, and
# the compiled kernels' cache is a new empty directory, so no library built
# earlier can be opened. Usage: scripts/check_without_compiler.sh  (from anywhere)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The tracked tree only (what a clean checkout holds), as a user would unpack it.
git -C "$root" archive HEAD | tar -x -C "$work" 2>/dev/null || cp -r "$root/." "$work"
python="$(python3 -c 'import sys; print(sys.executable)')"
"$python" -m venv "$work/venv"

isolated() {
    env -i HOME="$work/home" PATH="$work/venv/bin" PYACLNN_CACHE_DIR="$work/cache" \
        PYACLNN_REQUIRE_TORCH=1 /bin/bash -c "$1"
}

cd "$work"
isolated 'for cc in cc gcc clang c99; do if command -v $cc >/dev/null; then echo "a compiler is visible: $cc" >&2; exit 1; fi; done'
isolated 'pip install --quiet torch==2.13.0 && pip install --quiet ".[test]"'
# The library must report the NumPy kernels, and why.
isolated 'python -c "
from pyaclnn.kernels import _accel
status = _accel.accel_status()
assert status[\"active\"] is False and \"no C compiler\" in status[\"reason\"], status
assert set(status[\"kernels\"].values()) == {\"numpy\"}, status
print(\"compiled kernels:\", status[\"reason\"])
"'
isolated 'python -m pytest -q -p no:cacheprovider tests/test_kernels_max_pool3d.py tests/test_kernels_grid_sampler3d.py'
