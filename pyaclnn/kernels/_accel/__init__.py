"""Optional compiled CPU kernels of the numpy backend, reached through cffi.

The numpy backend's kernel choice (``pyaclnn.backends.numpy._kernels``) calls
:func:`max_pool3d`, :func:`max_pool3d_backward`, :func:`grid_sampler3d` or
:func:`grid_sampler3d_backward` here first; each returns False when the
compiled kernel cannot take the call (library off or absent, a dtype it has no
code for, no scratch memory, a plane too large for its int32 cells), and the
tuned NumPy path (:mod:`pyaclnn.kernels._tuned`) runs instead. The pure NumPy
kernels (:mod:`pyaclnn.kernels.max_pool3d`, :mod:`pyaclnn.kernels.grid_sampler3d`)
are the reference these are checked against. The arguments are those of a
plan of :mod:`pyaclnn.kernels.checks` (non-empty, 5-D, one float dtype, valid
parameters and modes) and are not checked again, here or in C. How many
threads a call uses is :func:`pyaclnn.kernels._workers.threads_for`'s decision;
the C library runs them on its own pthreads.

How the library is built and opened
-----------------------------------
``pyaclnn_accel.c`` (shipped as package data) is compiled **on first use** into
a plain shared library in a cache directory, and opened with cffi in **ABI
mode** (``ffi.dlopen``). Chosen over the alternatives because:

- *cffi API mode* compiles a CPython extension: it needs the Python headers
  and gives one binary per Python version. A plain library needs only a C
  compiler, and the per-call cost of ABI mode (about a microsecond) is nothing
  next to kernels that take milliseconds.
- *Building at install time* (an optional setuptools extension) would make the
  wheel platform-specific for an optional binary, print a setuptools warning
  whenever no compiler is found, and still leave source checkouts and editable
  installs without a library (or with a stale one after editing the C file).
  Building on first use covers all of them with one code path: ``pip install
  .`` never needs a compiler and the wheel stays pure Python.

The library's file name holds a hash of the C source, the compiler command and
the machine type, so an edited source or another compiler builds a new one;
concurrent processes serialise on a lock file and publish atomically. The first
call that builds pays a second or two, and says so in one line on stderr
(``pyaclnn: compiling the C kernels (once, into <cache>) ...``); later processes
just open the file, silently.

Environment
-----------
``PYACLNN_ACCEL=0``
    Never use the compiled kernels (read at every call).
``PYACLNN_ACCEL_F16C=0``
    Convert float16 in software even where the CPU has F16C, bfloat16 with
    the scalar loop instead of AVX2 lanes, scan the max-pool indices
    without AVX2 and copy the max-pool backward's direct planes out in
    16-byte SSE2 stores instead of 32-byte AVX ones (same results).
``PYACLNN_CACHE_DIR``
    Where the library is built (default ``$XDG_CACHE_HOME/pyaclnn`` or
    ``~/.cache/pyaclnn``).
``CC``
    The C compiler (default: Python's configured one, else ``cc``). A ``CC``
    that is not on PATH or fails to compile is not replaced by another
    compiler: the NumPy kernels run, and one line on stderr says that CC did
    not work (the reason is in :func:`accel_status`). Without ``CC`` and
    without a compiler the NumPy kernels run silently, as documented.

Agreement with the reference and the tuned NumPy kernels
--------------------------------------------------------
Max pooling agrees with the reference (and the tuned path, which gives the
reference's bits) bit for bit; the grid sampler's inputGrad with the tuned
path bit for bit, and every grid output with the reference to float32
rounding (tests/test_accel*.py).

Max-pool backward: the same accumulation order, so the same bits. Both sum
the gradients of each (n, c) plane in float32 (in place for float32) in the C
order of ``grad_output``, starting from +0, and round once (float16: to
nearest even, as NumPy and F16C; bfloat16: to nearest even with NaN -> quiet
0x7FC0, as ml_dtypes). One NaN-only difference, where IEEE 754 leaves the
choice to the implementation: when a cell adds two NaNs of different sign or
payload, which one survives depends on the compiler's operand order (each side
gives a NaN). A NaN gradient alone in its cell comes out as the float32 sum
gives it (quietened; bfloat16 NaN canonical) here, in the tuned paths and in
the reference. float64 stays with NumPy.

Max-pool forward: the same scan, so the same bits. Each window's in-bounds
cells in d, h, w order from -inf and its first in-bounds cell, a cell winning
when greater (in float32: float16 and bfloat16 widen exactly) or NaN; the
output is the winner's exact bits (a 16-bit NaN is read again from the input
for its payload), a window over padding only gives -inf and its first cell
(past the plane), as the reference. The inner loop runs over a row of
outputs for one kernel offset, on the input row split by stride phase so
that the loads are contiguous (AVX2 build chosen at load); rows of (n, c,
output depth) are shared out to the threads, so their number changes no
bit. Cells are int32 inside: planes (plus a dilation on each side) of 2**31
cells or more stay with NumPy, as does float64.

Max-pool backward from 1 MiB of grad_input on, with C-contiguous planes:
each plane is summed in a float32 scratch plane, then written in one pass
with streaming stores (float32 copied; float16 by F16C, 16 values a 32-byte
store; bfloat16 by AVX2 integer lanes), which skip reading grad_input's lines before
overwriting them and keep the output out of the caches (the kernel of the
fp16 benchmark case 1.4x faster; float32: see STREAM_MIN_BYTES in the C
source). Below 1 MiB the output is written normally (float32 summed in
place), so that it stays in the caches for the next op. Rounding only the
cells the indices touch (zeroing the rest in 16 bits) was measured too and
was slower in every case tried, down to one gradient per 64 cells: the
streaming plane conversion beats the per-index rounding. The index guard
and the scatter are one parallel task, so a call wakes the worker threads
once.

Max-pool backward with the pooling's parameters (the plan's, passed along):
the index guard checks, one vectorized pass a plane as before, that each
output depth's indices lie in the input depths its windows reach (instead of
only in the plane). A plane where they do is summed a slab of depths at a
time (two planes side by side, as above): the float32 sums of the depths the
current output depth reaches, in the caches, each depth written out (rounded
once, streamed from 1 MiB) as soon as the windows have moved past it. The
same additions in the same order, so the same bits; no float32 plane to
clear, sum into and read back. A plane with an index elsewhere (the indices
are the caller's) is summed in a whole plane. Kernel CPU time on one thread
against whole planes (medians of 20 calls), int64 / int32 indices: k2 s2
0.83x / 0.91x, k3 s2 0.85x / 0.94x, k3 s1 0.79x / 1.01x, k3 s2 float16
0.83x / 0.95x.

Max-pool backward with windows that overlap on no axis (stride at least
(kernel - 1) * dilation + 1, as k2 s2) and C-contiguous grad_input planes:
each cell receives at most one gradient of the forward's indices, and +0 + g
rounded once is g's own bits (+0 for -0, a NaN quietened; bfloat16's NaN
0x7FC0 with its sign), so the plane is assembled in grad_input's dtype
directly, a slab of depths at a time, with nothing widened, added or
rounded, and copied out as above. An index the caller repeated within a slab
(a cell already nonzero) sends that plane back to the float32 slabs, which
write it all again. The same bits as the reference. Kernel CPU time on one
thread, float16 k2 s2 benchmark case: 2.0 -> 1.75-1.85 ms; float32 (bound by
writing its 32 MiB) unchanged.

On the benchmark machine (2 cores, no hardware counters, shared) these
kernels are bound by instructions rather than by the memory: 16 MiB of
streaming stores take 0.55 ms on one thread, the fp16 k3 s2 kernel 4.5 ms.
Hence the 32-byte streaming stores (the float16 plane conversion, the direct
path's copy-out: 26.1M -> 23.0M instructions for the fp16 k3 s2 kernel) and
the direct path's row loop without a branch a cell (18.7M -> 17.0M for fp16
k2 s2), counted with callgrind on one thread. Writing the disjoint planes
row by row from the indices alone (a compare of every cell against its
window's index in AVX2 lanes, no slab) was tried and dropped: 46M
instructions against 18.7M, the gradients being an eighth of the cells.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from ... import _compile
from .. import _env, _workers
from ..grid_sampler3d import NEAREST

__all__ = [
    "BadIndex",
    "CompilerFailed",
    "NoCompiler",
    "accel_status",
    "grid_sampler3d",
    "grid_sampler3d_backward",
    "library",
    "max_pool3d",
    "max_pool3d_backward",
    "use_f16c",
    "gelu",
    "float_to_half",
]

SOURCE = Path(__file__).with_name("pyaclnn_accel.c")
ABI = 7  # PYACLNN_ACCEL_ABI of the C source

CDEF = """
int pyaclnn_accel_abi(void);
long long pyaclnn_accel_scratch_peak(int reset);
int pyaclnn_accel_use_f16c(int want);
void pyaclnn_accel_half_to_float(const uint16_t *src, float *dst, int64_t n);
void pyaclnn_accel_float_to_half(const float *src, uint16_t *dst, int64_t n);
int pyaclnn_max_pool3d_backward(intptr_t grad, const int64_t *grad_strides, int dtype, intptr_t index,
                                const int64_t *index_strides, int index_size, intptr_t grad_input,
                                const int64_t *grad_input_strides, const int64_t *out_shape,
                                const int64_t *in_spatial, const int64_t *params, int threads, int64_t *bad);
long long pyaclnn_accel_slab_planes(int reset);
long long pyaclnn_accel_disjoint_planes(int reset);
int pyaclnn_max_pool3d(intptr_t input, const int64_t *input_strides, int dtype, intptr_t out,
                       const int64_t *out_strides, intptr_t index, const int64_t *index_strides,
                       int index_size, const int64_t *in_shape, const int64_t *out_spatial,
                       const int64_t *params, int threads);
int pyaclnn_grid_sampler3d_backward(intptr_t grad, const int64_t *grad_strides, intptr_t input,
                                    const int64_t *input_strides, intptr_t grid, const int64_t *grid_strides,
                                    intptr_t input_grad, const int64_t *input_grad_strides,
                                    intptr_t grid_grad, const int64_t *grid_grad_strides,
                                    const int64_t *in_shape, const int64_t *out_spatial, int dtype,
                                    int interp, int padding, int align, int threads, int scatter_threads,
                                    int64_t budget);
int pyaclnn_grid_sampler3d(intptr_t input, const int64_t *input_strides, intptr_t grid,
                           const int64_t *grid_strides, intptr_t out, const int64_t *out_strides,
                           const int64_t *in_shape, const int64_t *out_spatial, int dtype, int interp,
                           int padding, int align, int threads);
void pyaclnn_gelu_float32(intptr_t x, intptr_t out, int64_t n);
void pyaclnn_float_to_half_numpy(intptr_t src, intptr_t dst, int64_t n);
"""

CFLAGS = ("-O3", "-std=c11", "-fPIC", "-shared", "-pthread", "-Wall", "-Wextra")

#: The kernels this module can run, as named in :func:`accel_status`.
KERNELS = (
    "max_pool3d_with_argmax",
    "max_pool3d_with_argmax_backward",
    "grid_sampler3d",
    "grid_sampler3d_backward",
    "gelu",
    "cast_float16",
)

# The work from which a second thread pays off (pyaclnn.kernels._workers.threads_for):
# waking the library's workers costs tens of microseconds. Max pooling: elements
# (inputs plus outputs); the grid sampler: points times (channels + 1) for the
# coordinates (8192 per batch item in the backward's pass over the points), points
# times channels for the backward's scatter, per batch item.
PARALLEL_MIN_ELEMENTS = 1 << 16
PARALLEL_MIN_POINT_WORK = 8192

_RC_OK, _RC_BAD_INDEX = 0, 1
# The max-pool backward's out-parameter, one per thread (calls may run in several at once).
_out_param = threading.local()
_NO_STRIDES = (0,) * 5  # of an output not wanted


class BadIndex(Exception):
    """The compiled kernel found an index outside its plane; nothing was written."""

    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


# (where they come from: pyaclnn._compile, which builds the compiled repeated call too)
NoCompiler = _compile.NoCompiler
CompilerFailed = _compile.CompilerFailed


class _Loaded:
    """The outcome of the one attempt to build and open the library."""

    def __init__(self, ffi: Any = None, lib: Any = None, path: Path | None = None, reason: str = "") -> None:
        self.ffi, self.lib, self.path, self.reason = ffi, lib, path, reason


_loaded: _Loaded | None = None
_load_lock = threading.Lock()


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------


_cc = _compile.cc
_compiler = _compile.compiler


def build(directory: Path | None = None) -> Path:
    """Compile the library into ``directory`` (default: the cache), unless already there; its
    path. Prints one line on stderr when it compiles (a second or two), none when the library
    is already there. Raises what :func:`pyaclnn._compile.build` raises."""
    # A first call that stops for seconds without a word looks hung: say why, once per cache.
    announce = "pyaclnn: compiling the C kernels (once, into {directory}) ..."
    return _compile.build(SOURCE, "libpyaclnn_accel", ".so", CFLAGS, directory, announce)


def _open(path: Path) -> _Loaded:
    import cffi  # only once the compiled kernels are wanted: `import pyaclnn` stays light

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    lib = ffi.dlopen(str(path))
    if lib.pyaclnn_accel_abi() != ABI:
        return _Loaded(reason=f"{path} has interface {lib.pyaclnn_accel_abi()}, not {ABI}")
    if not _env.flag("PYACLNN_ACCEL_F16C", True):
        lib.pyaclnn_accel_use_f16c(0)
    return _Loaded(ffi, lib, path)


def _load() -> _Loaded:
    global _loaded
    with _load_lock:
        if _loaded is None:
            try:
                _loaded = _open(build())
            except NoCompiler as exc:
                _loaded = _Loaded(reason=str(exc))
                _say_cc_failed(exc)
            except Exception as exc:  # any failure leaves the NumPy kernels in charge, with the reason
                _loaded = _Loaded(reason=f"build failed: {exc}")
                if isinstance(exc, CompilerFailed):
                    _say_cc_failed(exc)
        return _loaded


def _say_cc_failed(exc: Exception) -> None:
    """One line on stderr when the compiler ``$CC`` names did not work (silent without ``$CC``).

    The user chose that compiler: running the NumPy kernels instead without
    a word would hide that the choice had no effect.
    """
    import sys

    if _cc():
        # The first line only: a compiler's output can run to pages (accel_status has it all).
        reason = (str(exc).splitlines() or [type(exc).__name__])[0].removeprefix(f"CC={_cc()}: ")
        print(
            f"pyaclnn: CC={_cc()} did not work ({reason}): the NumPy kernels run instead "
            "(unset CC or name a working C compiler)",
            file=sys.stderr,
            flush=True,
        )


def _disabled() -> bool:
    return not _env.flag("PYACLNN_ACCEL", True)


def library() -> Any | None:
    """The opened library (cffi ``lib``), or None when the NumPy kernels must run."""
    if _disabled():
        return None
    loaded = _loaded if _loaded is not None else _load()
    return loaded.lib


def use_f16c(want: bool | None = None) -> bool:
    """Whether float16 conversion uses F16C; ``want`` switches it (software when False).

    False also turns off the AVX2 bfloat16 plane conversion, the AVX2 scan
    of the max-pool index guard and the AVX copy-out of the max-pool
    backward's direct planes. Every path gives the same results; for
    tests. Raises RuntimeError without a library.
    """
    lib = _load().lib
    if lib is None:
        raise RuntimeError(f"no compiled kernels: {_load().reason}")
    return bool(lib.pyaclnn_accel_use_f16c(-1 if want is None else int(bool(want))))


def accel_status() -> dict[str, Any]:
    """Which compiled kernels are active, and why not (for ``python -m pyaclnn info``).

    Builds the library on first use, like a kernel call would.

    Returns
    -------
    dict
        ``active`` (bool), ``reason`` ("" when active, else why the NumPy
        kernels run: ``PYACLNN_ACCEL=0``, no compiler, the build error),
        ``library`` (path or None), ``kernels`` ({kernel name: "compiled" or
        "numpy"}), ``f16c`` (hardware float16 conversion in use) and
        ``scratch_peak_bytes``.
    """
    if _disabled():
        loaded, reason = _loaded or _Loaded(), "PYACLNN_ACCEL=0"
    else:
        loaded = _load()
        reason = loaded.reason
    active = loaded.lib is not None and not reason
    return {
        "active": active,
        "reason": reason,
        "library": str(loaded.path) if loaded.path else None,
        "kernels": {name: "compiled" if active else "numpy" for name in KERNELS},
        "f16c": bool(loaded.lib.pyaclnn_accel_use_f16c(-1)) if loaded.lib is not None else False,
        "scratch_peak_bytes": int(loaded.lib.pyaclnn_accel_scratch_peak(0)) if loaded.lib is not None else 0,
    }


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------

# The dtypes the library takes: its DT_* codes (pyaclnn_accel.c), the one list of them.
_FLOAT_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}
# dtype -> its code or None, filled as dtypes come: ``dtype.name`` is Python code in
# NumPy, and every microsecond here runs cache-cold after the previous kernel.
_float_codes: dict[np.dtype, int | None] = {}


def _float_code(dtype: np.dtype) -> int | None:
    """The library's code of a float dtype it handles (native byte order), else None."""
    try:
        return _float_codes[dtype]
    except KeyError:
        code = _FLOAT_CODES.get(dtype.name) if dtype.isnative else None
        _float_codes[dtype] = code
        return code


def _address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _prelude(dtype: np.dtype) -> tuple[Any, int] | None:
    """(library, dtype code) when the compiled kernels take a call on ``dtype`` (the plan's
    one float dtype), else None: the library is on and loaded and has a code for it."""
    code = _float_code(dtype)
    if code is None:
        return None
    lib = library()
    if lib is None:
        return None
    return lib, code


def max_pool3d(
    x: np.ndarray,
    params: tuple[tuple[int, int, int], ...],
    out: np.ndarray,
    indices: np.ndarray,
) -> bool:
    """Run the compiled max-pool forward if it handles this call.

    The arrays are as :func:`pyaclnn.kernels.max_pool3d.max_pool3d_with_argmax`
    receives them for a plan (5-D, ``out`` and ``indices`` of the plan's output
    shape, native int32 or int64 indices); ``params`` is (kernel_size, stride,
    padding, dilation).

    Returns
    -------
    bool
        True when done (``out`` and ``indices`` written); False when another
        kernel must run (compiled kernels off or absent, float64, no scratch
        memory, or a plane whose cells, counted one dilation past each end,
        do not fit the library's int32).
    """
    ready = _prelude(x.dtype)
    if ready is None:
        return False
    lib, code = ready
    threads = _workers.threads_for(x.size + out.size, PARALLEL_MIN_ELEMENTS)
    rc = lib.pyaclnn_max_pool3d(
        _address(x),
        x.strides,
        code,
        _address(out),
        out.strides,
        _address(indices),
        indices.strides,
        indices.dtype.itemsize,
        x.shape,
        out.shape[2:],
        [int(v) for axis in params for v in axis],
        threads,
    )
    return bool(rc == _RC_OK)


def max_pool3d_backward(
    grad_output: np.ndarray,
    indices: np.ndarray,
    grad_input: np.ndarray,
    params: tuple[tuple[int, int, int], ...] | None = None,
) -> bool:
    """Run the compiled max-pool backward if it handles this call.

    The arrays are as :func:`pyaclnn.kernels.max_pool3d.max_pool3d_with_argmax_backward`
    receives them for a plan (5-D, matching shapes, native int32 or int64 indices);
    ``params`` is the plan's (kernel_size, stride, padding, dilation), or None.
    With them, the planes whose indices all lie in the depths their outputs'
    windows reach are summed a slab of depths at a time instead of in a whole
    float32 plane; the result is the same either way.

    Returns
    -------
    bool
        True when done (``grad_input`` written); False when another kernel
        must run (compiled kernels off or absent, float64, no memory for its
        scratch).

    Raises
    ------
    BadIndex
        With the C-order position of the first index outside its plane;
        nothing was written.
    """
    ready = _prelude(grad_output.dtype)
    if ready is None:
        return False
    lib, code = ready
    threads = _workers.threads_for(grad_output.size + grad_input.size, PARALLEL_MIN_ELEMENTS)
    try:
        bad = _out_param.bad
    except AttributeError:  # the thread's first call; ffi.new is two Python calls, cold on every call
        bad = _out_param.bad = _loaded.ffi.new("int64_t *")  # type: ignore[union-attr]
    # Tuples for the int64_t * arguments: cffi makes the temporary arrays, at
    # half the cost of ffi.new.
    rc = lib.pyaclnn_max_pool3d_backward(
        _address(grad_output),
        grad_output.strides,
        code,
        _address(indices),
        indices.strides,
        indices.dtype.itemsize,
        _address(grad_input),
        grad_input.strides,
        grad_output.shape,
        grad_input.shape[2:],
        _loaded.ffi.NULL if params is None else [int(v) for axis in params for v in axis],  # type: ignore[union-attr]
        threads,
        bad,
    )
    if rc == _RC_BAD_INDEX:
        raise BadIndex(int(bad[0]))
    # Out of scratch memory: another kernel overwrites all of grad_input again.
    return bool(rc == _RC_OK)


def grid_sampler3d_backward(
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    modes: tuple[int, int, bool],
    outputs: tuple[np.ndarray | None, np.ndarray | None],
) -> bool:
    """Run the compiled grid-sampler backward if it handles this call.

    The arguments of :func:`pyaclnn.kernels.grid_sampler3d.grid_sampler3d_backward`
    for a plan, grouped as the library treats them: ``data`` (grad_output,
    input, grid) is read, ``modes`` (interpolation_mode, padding_mode,
    align_corners) passed on, ``outputs`` (input_grad, grid_grad; None when not
    wanted, at least one given) written.

    Returns
    -------
    bool
        True when done (the given outputs written); False when another kernel
        must run (compiled kernels off or absent, float64, no memory for its
        scratch).
    """
    grad_output, input, grid = data
    ready = _prelude(input.dtype)
    if ready is None:
        return False
    lib, code = ready
    input_grad, grid_grad = outputs
    channels = input.shape[1]
    points = grid.shape[1] * grid.shape[2] * grid.shape[3]
    wants_grid = grid_grad is not None and modes[0] != NEAREST
    point_threads = _workers.threads_for(
        points * (channels + 1 if wants_grid else 1), PARALLEL_MIN_POINT_WORK
    )
    scatter_threads = (
        _workers.threads_for(points * channels, PARALLEL_MIN_ELEMENTS) if input_grad is not None else 1
    )
    out_bytes = sum(a.nbytes for a in outputs if a is not None)
    # Scratch: the per-point cache (up to 32 bytes a point) plus the scatter
    # blocks, within twice the outputs.
    budget = 2 * out_bytes - 32 * points
    return _run_grid(
        lib.pyaclnn_grid_sampler3d_backward,
        data,
        outputs,
        code,
        modes,
        point_threads,
        scatter_threads,
        budget,
    )


def grid_sampler3d(
    data: tuple[np.ndarray, np.ndarray],
    modes: tuple[int, int, bool],
    out: np.ndarray,
) -> bool:
    """Run the compiled grid-sampler forward if it handles this call.

    The arguments of :func:`pyaclnn.kernels.grid_sampler3d.grid_sampler3d`
    for a plan, grouped as for :func:`grid_sampler3d_backward`: ``data`` is
    (input, grid).

    Returns
    -------
    bool
        True when done (``out`` written); False when another kernel must run.
    """
    input, grid = data
    ready = _prelude(input.dtype)
    if ready is None:
        return False
    lib, code = ready
    threads = _workers.threads_for(out.size + out.size // max(1, input.shape[1]), PARALLEL_MIN_ELEMENTS)
    return _run_grid(lib.pyaclnn_grid_sampler3d, data, (out,), code, modes, threads)


def _run_grid(
    entry: Any,
    data: tuple[np.ndarray, ...],
    outputs: tuple[np.ndarray | None, ...],
    code: int,
    modes: tuple[int, int, bool],
    threads: int,
    *more: int,
) -> bool:
    """Call a grid-sampler entry point of the library; True when it succeeded.

    The arguments both entry points take, in their C order: each array of
    ``data`` (ending with input and grid) and of ``outputs`` as its address and
    byte strides (an output None, not wanted: 0 and zeros), the input's shape
    and the grid's spatial shape, the dtype code, the modes, the thread count,
    then ``more``.
    """
    args: list[Any] = []
    for a in (*data, *outputs):
        args += (_address(a), a.strides) if a is not None else (0, _NO_STRIDES)
    input, grid = data[-2:]
    interpolation_mode, padding_mode, align_corners = modes
    rc = entry(
        *args,
        input.shape,
        grid.shape[1:4],
        code,
        int(interpolation_mode),
        int(padding_mode),
        int(bool(align_corners)),
        threads,
        *more,
    )
    return bool(rc == _RC_OK)


# --------------------------------------------------------------------------
# Elementwise kernels of the references (pyaclnn.kernels.references)
# --------------------------------------------------------------------------

_FLOAT32 = np.dtype(np.float32)
_FLOAT16 = np.dtype(np.float16)


def _elementwise(
    kernel: str, source: np.ndarray, target: np.ndarray, dtypes: tuple[np.dtype, np.dtype]
) -> bool:
    """The library's elementwise ``kernel`` on ``source`` -> ``target``, if it takes them: the
    given (native) dtypes, one shape, both C-contiguous, and ``target`` either ``source`` itself
    or sharing no memory with it (the kernels read each element before writing it, no other).
    Whether it ran (False: the library is off or absent too)."""
    if not (
        source.dtype == dtypes[0]
        and target.dtype == dtypes[1]
        and source.shape == target.shape
        and source.flags.c_contiguous
        and target.flags.c_contiguous
        and (target is source or not np.may_share_memory(source, target))
    ):
        return False
    lib = library()
    if lib is None:
        return False
    getattr(lib, kernel)(_address(source), _address(target), source.size)
    return True


def gelu(x: np.ndarray, out: np.ndarray) -> bool:
    """Gelu in its erf form, ``out = x/2 * erfc(-x/sqrt(2))``, by the compiled kernel if it
    takes the call.

    float32 in and out, one shape, C-contiguous (``out`` may be ``x``). Computed in float64
    and rounded once, as the NumPy reference (:mod:`pyaclnn.kernels.references.unary`): a
    polynomial of erf near 0 (``-2.83 < x < 3.11``), else ``exp(-x*x/2) erfcx(|x|/sqrt2)``.
    The float64 value is within 1e-13 of the exact one, relative (measured 6e-14; the reference: 1e-12), so
    the float32 results are the reference's except where the exact value lies within their
    errors of a rounding boundary (tests/test_accel.py). One thread.

    Returns
    -------
    bool
        True when done (``out`` written); False when the NumPy reference must run (compiled
        kernels off or absent, another dtype or layout, ``out`` overlapping ``x``).
    """
    return _elementwise("pyaclnn_gelu_float32", x, out, (_FLOAT32, _FLOAT32))


def float_to_half(source: np.ndarray, out: np.ndarray) -> bool:
    """``out[...] = source`` from float32 to float16 by the compiled kernel if it takes the call:
    the bits of NumPy's ``astype`` (round to nearest even, overflow to inf, subnormals, a NaN's
    sign and payload top bits kept unquietened), by F16C where the CPU has it.

    Returns
    -------
    bool
        True when done; False when NumPy must convert (compiled kernels off or absent, other
        dtypes, shapes or layouts, overlapping arrays).
    """
    return _elementwise("pyaclnn_float_to_half_numpy", source, out, (_FLOAT32, _FLOAT16))
