"""The emulator's math, norm and resize operators and its tensor / scalar lists, through cffi.

The eleven operators (aclnnAdd, aclnnInplaceAdd, aclnnCast, aclnnInplaceCopy, aclnnCat, aclnnReduceSum,
aclnnSplitTensor, aclnnNanToNum, aclnnLayerNorm, aclnnForeachAddScalarList, aclnnResize)
are not in include/decl: their prototypes come from the CANN-form headers each emulator
home carries (tests/emulator/aclnnop), read here with a few regular expressions and given
to cffi, so the headers are checked as well. As in test_emulator_c.py each layout runs in
a child process of its own (the two layouts' libraries share SONAMEs); the child runs
every ``_check_*`` against NumPy and reports, the tests below read the report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from emulator_build import emulator_home  # noqa: E402

#: where each layout keeps the CANN-form operator headers (the Python reader looks at the
#: opp path first, then include/aclnnop)
HEADER_DIRS = {
    "classic": "opp/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop",
    "split": "include/aclnnop",
}
LIBS = {
    "classic": ("libascendcl.so", "libnnopbase.so", "libopapi.so"),
    "split": ("libacl_rt.so", "libnnopbase.so", "libopapi_nn.so", "libopapi_cv.so", "libopapi_math.so"),
}
#: operator -> the split layout's library that must export it (CANN >= 8.5's split)
SPLIT_LIBRARY = {
    "aclnnAdd": "libopapi_math.so",
    "aclnnInplaceAdd": "libopapi_math.so",
    "aclnnCast": "libopapi_math.so",
    "aclnnInplaceCopy": "libopapi_math.so",
    "aclnnCat": "libopapi_math.so",
    "aclnnReduceSum": "libopapi_math.so",
    "aclnnSplitTensor": "libopapi_math.so",
    "aclnnNanToNum": "libopapi_math.so",
    "aclnnForeachAddScalarList": "libopapi_math.so",
    "aclnnLayerNorm": "libopapi_nn.so",
    "aclnnResize": "libopapi_cv.so",
    "aclnnMaxPool3dWithArgmax": "libopapi_nn.so",
    "aclnnMaxPool3dWithArgmaxBackward": "libopapi_nn.so",
    "aclnnGridSampler3D": "libopapi_cv.so",
    "aclnnGridSampler3DBackward": "libopapi_cv.so",
}
NEW_OPS = tuple(list(SPLIT_LIBRARY)[:11])

PARAM_NULLPTR, PARAM_INVALID = 161001, 161002

# -- the headers --------------------------------------------------------------------------


def header_files(home: Path, layout: str) -> list[Path]:
    return sorted((home / HEADER_DIRS[layout]).rglob("*.h"))


def declarations(text: str) -> list[str]:
    """The function declarations of a CANN-form header, as plain C for cffi's cdef."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)
    text = text.replace('extern "C" {', " ").replace("}", " ")
    text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", " ", text)
    text = re.sub(r"\bACLNN_API\b", " ", text)
    return [" ".join(d.split()) + ";" for d in text.split(";") if d.strip()]


def phases(home: Path, layout: str) -> dict[str, list[str]]:
    """Function name -> its declarations found in the layout's headers (one per file)."""
    found: dict[str, list[str]] = {}
    for path in header_files(home, layout):
        for decl in declarations(path.read_text()):
            name = re.search(r"(\w+)\s*\(", decl)
            assert name is not None, (path, decl)
            found.setdefault(name.group(1), []).append(decl)
    return found


# -- child side ---------------------------------------------------------------------------

DTYPES: dict[str, int] = {
    "float32": 0,
    "float16": 1,
    "int8": 2,
    "int32": 3,
    "uint8": 4,
    "int16": 6,
    "int64": 9,
    "float64": 11,
    "bool": 12,
    "bfloat16": 27,
}


def np_dtype(name: str):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


class _Emu:
    def __init__(self, layout: str, home: Path) -> None:
        import cffi

        from pyaclnn import _decl

        self.layout, self.home = layout, home
        self.ffi = ffi = cffi.FFI()
        ffi.cdef("".join(_decl.read(name) for name in _decl.DECL_FILES))
        self.decls = phases(home, layout)
        ops = {n: d[0] for n, d in self.decls.items() if n.startswith(NEW_OPS)}
        ffi.cdef("\n".join(ops.values()))
        flags = ffi.RTLD_GLOBAL | ffi.RTLD_NOW
        self.libs = {n: ffi.dlopen(str(home / "lib64" / n), flags) for n in LIBS[layout]}
        names = LIBS[layout]
        self.rt, self.nn = self.libs[names[0]], self.libs[names[1]]
        self.where = {}
        for sym in ops:
            owners = [n for n in names[2:] if hasattr(self.libs[n], sym)]
            assert len(owners) == 1, (sym, owners)
            self.where[sym] = owners[0]
        self.keep: list = []  # device memory of each check, freed when it ends
        self.memory: dict = {}  # tensor handle -> its device memory
        self.members: dict = {}  # tensor list handle -> its tensors

    def op(self, name):
        return getattr(self.libs[self.where[name]], name)

    def msg(self) -> str:
        return self.ffi.string(self.rt.aclGetRecentErrMsg()).decode()

    def counts(self) -> list[int]:
        out = self.ffi.new("int64_t[13]")
        assert self.rt.pyaclnnEmuLiveCounts(out, 13) == 13
        return list(out)

    def malloc(self, size: int):
        p = self.ffi.new("void **")
        assert self.rt.aclrtMalloc(p, max(size, 1), 0) == 0, self.msg()
        return p[0]

    def tensor(self, array: np.ndarray, dtype: str | None = None):
        """An aclTensor over a device copy of `array` (a view keeps its strides and offset)."""
        dtype = dtype or ("bfloat16" if array.dtype == np_dtype("bfloat16") else array.dtype.name)
        base = array
        while base.base is not None and isinstance(base.base, np.ndarray):
            base = base.base
        if not base.flags.c_contiguous or base.dtype != array.dtype:
            base = array = np.ascontiguousarray(array)
        raw = base.reshape(-1).view(np.uint8)
        ptr = self.malloc(raw.nbytes)
        if raw.nbytes:
            assert self.rt.aclrtMemcpy(ptr, raw.nbytes, self.ffi.from_buffer(raw), raw.nbytes, 1) == 0, (
                self.msg()
            )
        item = array.itemsize
        offset = (array.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
        dims = self.ffi.new("int64_t[]", list(array.shape) or [1])
        strides = self.ffi.new("int64_t[]", [s // item for s in array.strides] or [1])
        storage = self.ffi.new("int64_t[]", [base.size])
        t = self.nn.aclCreateTensor(dims, array.ndim, DTYPES[dtype], strides, offset, 2, storage, 1, ptr)
        assert t != self.ffi.NULL, self.msg()
        self.memory[t] = ptr
        return (t, ptr, array.shape, np_dtype(dtype))

    def empty(self, shape, dtype: str):
        return self.tensor(np.zeros(shape, np_dtype(dtype)))

    def fetch(self, t) -> np.ndarray:
        _, ptr, shape, dtype = t
        out = np.empty(shape, dtype)
        raw = out.reshape(-1).view(np.uint8)
        if raw.nbytes:
            assert self.rt.aclrtMemcpy(self.ffi.from_buffer(raw), raw.nbytes, ptr, raw.nbytes, 2) == 0, (
                self.msg()
            )
        return out

    def scalar(self, value, dtype: str):
        box = np.array([value], np_dtype(dtype))
        s = self.nn.aclCreateScalar(self.ffi.from_buffer(box.view(np.uint8)), DTYPES[dtype])
        assert s != self.ffi.NULL, self.msg()
        return s

    def tensor_list(self, tensors):
        arr = self.ffi.new("aclTensor *[]", [t[0] for t in tensors])
        lst = self.nn.aclCreateTensorList(arr, len(tensors))
        assert lst != self.ffi.NULL, self.msg()
        self.members[lst] = [t[0] for t in tensors]
        return lst

    def run(self, name: str, *args) -> tuple[int, str, int]:
        """Phase 1 with args, then (on success) phase 2 on the default stream and a synchronize.
        Returns (status of the failing phase or 0, message, workspace size)."""
        ws, ex = self.ffi.new("uint64_t *"), self.ffi.new("aclOpExecutor **")
        rc = self.op(name + "GetWorkspaceSize")(*args, ws, ex)
        if rc != 0:
            return rc, self.msg(), 0
        if ex[0] == self.ffi.NULL:
            assert ws[0] == 0
        work = self.malloc(ws[0]) if ws[0] else self.ffi.NULL
        rc = self.op(name)(work, ws[0], ex[0], self.ffi.NULL)
        msg = self.msg() if rc else ""
        assert self.rt.aclrtSynchronizeStream(self.ffi.NULL) == 0, self.msg()
        if ws[0]:
            assert self.rt.aclrtFree(work) == 0
        return rc, msg, int(ws[0])

    def free_all(self) -> None:
        """Free the device memory of every tensor made (for checks that destroy handles themselves)."""
        self.keep.extend(self.memory.values())
        self.memory.clear()
        self.release()

    def release(self, *handles) -> None:
        """Destroy the handles (a list with its tensors) and free the tensors' device memory."""
        for h in handles:
            t = h[0] if isinstance(h, tuple) else h
            kind = self.ffi.typeof(t).item.cname
            for member in [t, *self.members.pop(t, [])]:
                if member in self.memory:
                    self.keep.append(self.memory.pop(member))
            destroy = {
                "aclTensor": self.nn.aclDestroyTensor,
                "aclScalar": self.nn.aclDestroyScalar,
                "aclIntArray": self.nn.aclDestroyIntArray,
                "aclFloatArray": self.nn.aclDestroyFloatArray,
                "aclTensorList": self.nn.aclDestroyTensorList,
                "aclScalarList": self.nn.aclDestroyScalarList,
            }[kind]
            rc = destroy(t)
            assert rc == 0 or kind == "aclTensor" and rc == PARAM_INVALID, self.msg()  # a tensor of a list
        for p in self.keep:
            assert self.rt.aclrtFree(p) == 0
        self.keep.clear()


def rng(seed=0):
    return np.random.default_rng(seed)


def close(got, want, dtype: str) -> None:
    tol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-12}.get(dtype)
    got64, want64 = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    if tol is None:
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))
    else:
        np.testing.assert_allclose(got64, want64, rtol=tol, atol=tol)


def fails(e: _Emu, code: int, param: str, name: str, *args) -> None:
    rc, msg, _ = e.run(name, *args)
    assert rc == code, (rc, msg)
    assert re.search(rf"(?<![\w\[]){re.escape(param)}(?!\w)", msg), (param, msg)


# -- lists and the meta API additions -------------------------------------------------------


def _check_lists_own_their_elements(e: _Emu) -> None:
    ffi, nn = e.ffi, e.nn
    before = e.counts()
    a, b = e.tensor(np.ones(3, np.float32)), e.tensor(np.zeros((2, 2), np.int32))
    lst = e.tensor_list([a, b])
    size = ffi.new("uint64_t *")
    assert nn.aclGetTensorListSize(lst, size) == 0 and size[0] == 2
    s1, s2 = e.scalar(1.5, "float32"), e.scalar(3, "int32")
    sl = nn.aclCreateScalarList(ffi.new("aclScalar *[]", [s1, s2]), 2)
    assert sl != ffi.NULL, e.msg()
    assert nn.aclGetScalarListSize(sl, size) == 0 and size[0] == 2
    fa = nn.aclCreateFloatArray(ffi.new("float[]", [1.0, 2.0, 3.0]), 3)
    assert nn.aclGetFloatArraySize(fa, size) == 0 and size[0] == 3
    counts = [now - then for now, then in zip(e.counts(), before)]
    assert counts[2] == 2 and counts[9:13] == [2, 1, 1, 1], counts
    # destroying a list destroys its elements (CANN: they are not to be released again)
    assert nn.aclDestroyTensorList(lst) == 0
    assert nn.aclDestroyTensor(a[0]) == PARAM_INVALID
    assert nn.aclDestroyScalarList(sl) == 0
    assert nn.aclDestroyScalar(s1) == PARAM_INVALID
    assert nn.aclDestroyFloatArray(fa) == 0
    e.free_all()
    assert e.counts() == before


def _check_list_errors_name_function_and_argument(e: _Emu) -> None:
    ffi, nn = e.ffi, e.nn
    before = e.counts()
    size = ffi.new("uint64_t *")
    for fn, arg in (
        ("aclGetTensorListSize", "tensorList"),
        ("aclGetScalarListSize", "scalarList"),
        ("aclGetFloatArraySize", "array"),
    ):
        assert getattr(nn, fn)(ffi.NULL, size) == PARAM_NULLPTR
        assert fn in (m := e.msg()) and arg in m, m
        bogus = ffi.cast(
            {"tensorList": "aclTensorList *", "scalarList": "aclScalarList *"}.get(arg, "aclFloatArray *"), 64
        )
        assert getattr(nn, fn)(bogus, size) == PARAM_INVALID
        assert fn in e.msg()
    assert nn.aclDestroyTensorList(ffi.NULL) == PARAM_NULLPTR and "aclDestroyTensorList" in e.msg()
    assert nn.aclDestroyScalarList(ffi.cast("aclScalarList *", 64)) == PARAM_INVALID
    assert "aclDestroyScalarList" in e.msg()
    assert nn.aclCreateTensorList(ffi.NULL, 2) == ffi.NULL and "value" in e.msg()
    a = e.tensor(np.ones(2, np.float32))
    assert nn.aclCreateTensorList(ffi.new("aclTensor *[]", [a[0], a[0]]), 2) == ffi.NULL
    assert "value[1]" in e.msg()
    assert nn.aclCreateTensorList(ffi.new("aclTensor *[]", [a[0], ffi.NULL]), 2) == ffi.NULL
    assert "value[1]" in e.msg()
    empty = nn.aclCreateTensorList(ffi.NULL, 0)
    assert empty != ffi.NULL and nn.aclGetTensorListSize(empty, size) == 0 and size[0] == 0
    # an element destroyed on its own first: the list still goes, the status says so
    b = e.tensor(np.ones(2, np.float32))
    lst = e.tensor_list([a, b])
    assert nn.aclDestroyTensor(b[0]) == 0
    assert nn.aclDestroyTensorList(lst) == PARAM_INVALID and "already destroyed" in e.msg()
    assert nn.aclDestroyTensorList(empty) == 0
    e.free_all()
    assert e.counts() == before


# -- the operators ----------------------------------------------------------------------------


def _check_add(e: _Emu) -> None:
    r = rng(1)
    for dtype in ("float32", "float16", "bfloat16"):
        x = r.standard_normal((3, 1, 4)).astype(np_dtype(dtype))
        y = r.standard_normal((2, 4)).astype(np_dtype(dtype))
        tx, ty, out = e.tensor(x), e.tensor(y), e.empty((3, 2, 4), dtype)
        alpha = e.scalar(2.5, "float32")
        assert e.run("aclnnAdd", tx[0], ty[0], alpha, out[0])[0] == 0, e.msg()
        want = x.astype(np.float32) + np.float32(2.5) * y.astype(np.float32)
        close(e.fetch(out), want.astype(np_dtype(dtype)), dtype)
        e.release(tx, ty, out, alpha)
    # integers exactly, a strided (transposed) self, int64 beyond float's precision
    base = r.integers(-1000, 1000, (4, 3)).astype(np.int32)
    x, y = base.T, r.integers(-1000, 1000, (3, 4)).astype(np.int32)
    tx, ty, out, alpha = e.tensor(x), e.tensor(y), e.empty((3, 4), "int32"), e.scalar(3, "int32")
    assert e.run("aclnnAdd", tx[0], ty[0], alpha, out[0])[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(out), x + 3 * y)
    e.release(tx, ty, out, alpha)
    x = np.array([2**60 + 1, -(2**59) + 3], np.int64)
    y = np.array([7, 2**40 + 1], np.int64)
    tx, ty, out, alpha = e.tensor(x), e.tensor(y), e.empty((2,), "int64"), e.scalar(-2, "int64")
    assert e.run("aclnnAdd", tx[0], ty[0], alpha, out[0])[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(out), x - 2 * y)
    e.release(tx, ty, out, alpha)
    # int32 + float32 promotes to float32
    x, y = np.arange(6, dtype=np.int32).reshape(2, 3), np.full((3,), 0.25, np.float32)
    tx, ty, out, alpha = e.tensor(x), e.tensor(y), e.empty((2, 3), "float32"), e.scalar(1, "int64")
    assert e.run("aclnnAdd", tx[0], ty[0], alpha, out[0])[0] == 0, e.msg()
    close(e.fetch(out), x + y, "float32")
    e.release(tx, ty, out, alpha)
    # empty: no executor, nothing to do
    tx, ty, out, alpha = (
        e.empty((0, 3), "float32"),
        e.empty((3,), "float32"),
        e.empty((0, 3), "float32"),
        e.scalar(1.0, "float32"),
    )
    assert e.run("aclnnAdd", tx[0], ty[0], alpha, out[0]) == (0, "", 0)
    e.release(tx, ty, out, alpha)


def _check_add_errors(e: _Emu) -> None:
    ffi = e.ffi
    a, b, out = e.empty((2, 3), "float32"), e.empty((4, 3), "float32"), e.empty((2, 3), "float32")
    alpha = e.scalar(1.0, "float32")
    fails(e, PARAM_NULLPTR, "alpha", "aclnnAdd", a[0], a[0], ffi.NULL, out[0])
    fails(e, PARAM_NULLPTR, "self", "aclnnAdd", ffi.NULL, a[0], alpha, out[0])
    fails(e, PARAM_INVALID, "other", "aclnnAdd", a[0], b[0], alpha, out[0])
    fails(e, PARAM_INVALID, "out", "aclnnAdd", a[0], a[0], alpha, b[0])
    i, iout = e.empty((2, 3), "int32"), e.empty((2, 3), "int32")
    fails(e, PARAM_INVALID, "out", "aclnnAdd", a[0], i[0], alpha, iout[0])  # float result into int32
    fails(e, PARAM_INVALID, "alpha", "aclnnAdd", i[0], i[0], alpha, iout[0])  # fractional alpha, int tensors
    c = e.empty((2, 3), "float32")
    e.release(c)
    fails(e, PARAM_INVALID, "self", "aclnnAdd", c[0], a[0], alpha, out[0])  # destroyed
    ws = ffi.new("uint64_t *")
    assert e.op("aclnnAddGetWorkspaceSize")(a[0], a[0], alpha, out[0], ws, ffi.NULL) == PARAM_NULLPTR
    assert "executor" in e.msg()
    e.release(a, b, out, alpha, i, iout)


def _check_inplace_add(e: _Emu) -> None:
    r = rng(11)
    # other broadcast to selfRef's shape; the result cast to selfRef's type
    for dtype, other_dtype in (("float32", "float32"), ("float16", "float32"), ("bfloat16", "bfloat16")):
        x = r.standard_normal((3, 4)).astype(np_dtype(dtype))
        y = r.standard_normal((1, 4)).astype(np_dtype(other_dtype))
        tx, ty, alpha = e.tensor(x), e.tensor(y), e.scalar(2.5, "float32")
        assert e.run("aclnnInplaceAdd", tx[0], ty[0], alpha)[0] == 0, e.msg()
        want = x.astype(np.float32) + np.float32(2.5) * y.astype(np.float32)
        close(e.fetch(tx), want.astype(np_dtype(dtype)), dtype)
        e.release(tx, ty, alpha)
    # a strided selfRef inside a larger storage: only its elements change
    base = r.standard_normal((3, 6)).astype(np.float32)
    tx, ty = e.tensor(base[:, 1:5:2]), e.tensor(np.full((3, 2), 0.5, np.float32))
    alpha = e.scalar(-1, "int64")
    assert e.run("aclnnInplaceAdd", tx[0], ty[0], alpha)[0] == 0, e.msg()
    full = np.empty_like(base)
    raw = full.reshape(-1).view(np.uint8)
    assert e.rt.aclrtMemcpy(e.ffi.from_buffer(raw), raw.nbytes, tx[1], raw.nbytes, 2) == 0
    want = base.copy()
    want[:, 1:5:2] -= np.float32(0.5)
    np.testing.assert_array_equal(full, want)
    e.release(tx, ty, alpha)
    # integers exactly (wrapping), an integral alpha
    x = np.array([2**62, -5, 7], np.int64)
    y = np.array([2**62, 3, -1], np.int64)
    tx, ty, alpha = e.tensor(x), e.tensor(y), e.scalar(3, "int64")
    assert e.run("aclnnInplaceAdd", tx[0], ty[0], alpha)[0] == 0, e.msg()
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(e.fetch(tx), x + 3 * y)
    e.release(tx, ty, alpha)
    # empty: no executor
    tx, ty, alpha = e.empty((0, 3), "float32"), e.empty((3,), "float32"), e.scalar(1.0, "float32")
    assert e.run("aclnnInplaceAdd", tx[0], ty[0], alpha) == (0, "", 0)
    e.release(tx, ty, alpha)


def _alias(e: _Emu, t, shape, offset: int = 0):
    """A second descriptor over t's memory (its storage), shaped `shape` (row-major) at `offset`."""
    dims = e.ffi.new("int64_t[]", list(shape))
    strides = e.ffi.new("int64_t[]", [int(np.prod(shape[i + 1 :])) for i in range(len(shape))])
    storage = e.ffi.new("int64_t[]", [int(np.prod(t[2]))])
    a = e.nn.aclCreateTensor(dims, len(shape), DTYPES[t[3].name], strides, offset, 2, storage, 1, t[1])
    assert a != e.ffi.NULL, e.msg()
    return a


def _check_inplace_add_of_itself(e: _Emu) -> None:
    x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) * np.float32(0.75)
    # torch's x.add_(x): the same descriptor as selfRef and other
    tx, alpha = e.tensor(x), e.scalar(1, "int64")
    assert e.run("aclnnInplaceAdd", tx[0], tx[0], alpha)[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(tx), x + x)
    # another descriptor over the same memory
    same = _alias(e, tx, (3, 4))
    half = e.scalar(0.5, "float32")
    assert e.run("aclnnInplaceAdd", tx[0], same, half)[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(tx), (x + x) * np.float32(1.5))
    # other is selfRef's first row, broadcast over all rows: every row adds the row as it was
    row = _alias(e, tx, (1, 4))
    before = e.fetch(tx)
    assert e.run("aclnnInplaceAdd", tx[0], row, alpha)[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(tx), before + before[:1])
    # integers: x.add_(x, alpha=-2) is -x
    xi = np.arange(5, dtype=np.int32)
    ti, minus2 = e.tensor(xi), e.scalar(-2, "int32")
    assert e.run("aclnnInplaceAdd", ti[0], ti[0], minus2)[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(ti), -xi)
    e.release(same, row, tx, alpha, half, ti, minus2)


def _check_inplace_add_errors(e: _Emu) -> None:
    ffi = e.ffi
    a, wide, alpha = e.empty((1, 4), "float32"), e.empty((2, 4), "float32"), e.scalar(1.0, "float32")
    fails(e, PARAM_NULLPTR, "selfRef", "aclnnInplaceAdd", ffi.NULL, a[0], alpha)
    fails(e, PARAM_NULLPTR, "other", "aclnnInplaceAdd", a[0], ffi.NULL, alpha)
    fails(e, PARAM_NULLPTR, "alpha", "aclnnInplaceAdd", a[0], a[0], ffi.NULL)
    # other must broadcast to selfRef's shape (not merely with it)
    fails(e, PARAM_INVALID, "other", "aclnnInplaceAdd", a[0], wide[0], alpha)
    i = e.empty((1, 4), "int32")
    fails(e, PARAM_INVALID, "selfRef", "aclnnInplaceAdd", i[0], a[0], alpha)  # float result into int32
    one = e.scalar(1, "int32")
    assert e.run("aclnnInplaceAdd", a[0], i[0], one)[0] == 0, e.msg()  # int32 other into float32 selfRef
    fails(e, PARAM_INVALID, "alpha", "aclnnInplaceAdd", i[0], i[0], alpha)  # fractional alpha, int tensors
    c = e.empty((1, 4), "float32")
    e.release(c)
    fails(e, PARAM_INVALID, "selfRef", "aclnnInplaceAdd", c[0], a[0], alpha)  # destroyed
    ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    assert e.op("aclnnInplaceAddGetWorkspaceSize")(a[0], a[0], alpha, ws, ffi.NULL) == PARAM_NULLPTR
    assert "executor" in e.msg()
    # an executor of aclnnAdd is not one of aclnnInplaceAdd
    out = e.empty((1, 4), "float32")
    assert e.op("aclnnAddGetWorkspaceSize")(a[0], a[0], alpha, out[0], ws, ex) == 0, e.msg()
    assert e.op("aclnnInplaceAdd")(ffi.NULL, 0, ex[0], ffi.NULL) == PARAM_INVALID
    assert "aclnnAddGetWorkspaceSize" in e.msg()
    assert e.op("aclnnAdd")(ffi.NULL, 0, ex[0], ffi.NULL) == 0, e.msg()
    assert e.rt.aclrtSynchronizeStream(ffi.NULL) == 0
    e.release(a, wide, alpha, i, one, out)


CAST_TYPES = ("float32", "float16", "bfloat16", "int32", "int64", "bool", "int8", "uint8", "int16")


def _check_cast(e: _Emu) -> None:
    r = rng(2)
    values = np.concatenate([r.uniform(-100, 100, 20), [0.0, -0.0, 1.5, -2.5, 127.0, 0.3]]).reshape(2, 13)
    for src in CAST_TYPES:
        x = values.astype(np_dtype(src)) if src != "bool" else values > 0
        if src in ("uint8",):
            x = np.abs(values).astype(np.uint8)
        tx = e.tensor(x[:, ::2])  # strided
        for dst in CAST_TYPES:
            want = (
                x[:, ::2].astype(np.float32).astype(np_dtype(dst)) if src in ("float16", "bfloat16") else None
            )
            if want is None:
                want = x[:, ::2].astype(np_dtype(dst))
            if dst in ("int8", "uint8") and src not in ("bool", "int8", "uint8"):
                continue  # out-of-range float -> small int is undefined in numpy
            out = e.empty(want.shape, dst)
            rc, msg, _ = e.run("aclnnCast", tx[0], DTYPES[dst], out[0])
            assert rc == 0, (src, dst, rc, msg)
            got = e.fetch(out)
            assert np.array_equal(got.astype(np.float64), want.astype(np.float64)), (src, dst, got, want)
            e.release(out)
        e.release(tx)
    # errors: out's dtype must be dtype; shapes must match
    a, out = e.empty((2, 2), "float32"), e.empty((2, 2), "int32")
    fails(e, PARAM_INVALID, "out", "aclnnCast", a[0], DTYPES["float16"], out[0])
    fails(e, PARAM_NULLPTR, "out", "aclnnCast", a[0], DTYPES["int32"], e.ffi.NULL)
    fails(e, PARAM_INVALID, "dtype", "aclnnCast", a[0], 16, out[0])  # complex64
    wrong = e.empty((4,), "int32")
    fails(e, PARAM_INVALID, "out", "aclnnCast", a[0], DTYPES["int32"], wrong[0])
    e.release(a, out, wrong)


def _check_inplace_copy(e: _Emu) -> None:
    r = rng(3)
    for dst_t, src_t in (
        ("float16", "float32"),
        ("int32", "float32"),
        ("bfloat16", "int64"),
        ("float32", "bool"),
    ):
        src_full = (r.standard_normal((4, 6)) * 10).astype(np_dtype(src_t))
        src = src_full[1:2, ::2]  # (1, 3), strided, broadcast along dim 0
        dst_base = np.zeros((3, 5), np_dtype(dst_t))
        dst_view = dst_base[:, 1:4]  # strided destination inside a larger storage
        ts, td = e.tensor(src), e.tensor(dst_view)
        assert e.run("aclnnInplaceCopy", td[0], ts[0])[0] == 0, e.msg()
        want = np.broadcast_to(src, (3, 3)).astype(np.float32 if src_t != "int64" else np.float64)
        want = want.astype(np_dtype(dst_t)) if dst_t != "int32" else np.trunc(want).astype(np.int32)
        full = np.empty_like(dst_base)
        raw = full.reshape(-1).view(np.uint8)
        assert e.rt.aclrtMemcpy(e.ffi.from_buffer(raw), raw.nbytes, td[1], raw.nbytes, 2) == 0
        close(full[:, 1:4], want, dst_t)
        assert not full[:, 0].astype(np.float64).any() and not full[:, 4].astype(np.float64).any()
        e.release(ts, td)
    a, b = e.empty((3, 4), "float32"), e.empty((2, 4), "float32")
    fails(e, PARAM_INVALID, "src", "aclnnInplaceCopy", a[0], b[0])
    fails(e, PARAM_NULLPTR, "selfRef", "aclnnInplaceCopy", e.ffi.NULL, b[0])
    empty = e.empty((0, 4), "float32")
    assert (
        e.run("aclnnInplaceCopy", empty[0], a[0])[0] == PARAM_INVALID
    )  # (3, 4) does not broadcast to (0, 4)
    one = e.empty((1, 4), "float32")
    assert e.run("aclnnInplaceCopy", empty[0], one[0]) == (0, "", 0)
    e.release(a, b, empty, one)


def _check_cat(e: _Emu) -> None:
    r = rng(4)
    for dtype in ("float32", "float16", "bfloat16", "int32", "int64", "bool"):
        parts = [r.standard_normal((2, n, 3)) * 5 for n in (1, 3, 2)]
        parts = [p > 0 if dtype == "bool" else p.astype(np_dtype(dtype)) for p in parts]
        ts = [
            e.tensor(parts[0]),
            e.tensor(np.zeros((0,), np_dtype(dtype))),
            e.tensor(parts[1]),
            e.tensor(parts[2]),
        ]
        lst = e.tensor_list(ts)
        out = e.empty((2, 6, 3), dtype)
        assert e.run("aclnnCat", lst, -2, out[0])[0] == 0, e.msg()
        np.testing.assert_array_equal(e.fetch(out), np.concatenate(parts, axis=1))
        e.release(lst, out)
    # more views than the launch keeps on its stack (16)
    parts = [np.full((2, 1), i, np.int64) for i in range(20)]
    lst, out = e.tensor_list([e.tensor(p) for p in parts]), e.empty((2, 20), "int64")
    assert e.run("aclnnCat", lst, 1, out[0])[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(out), np.concatenate(parts, axis=1))
    e.release(lst, out)
    # strided inputs, mixed types promoted into out
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    b = np.arange(6, dtype=np.int32).reshape(3, 2)
    lst, out = e.tensor_list([e.tensor(a), e.tensor(b)]), e.empty((3, 4), "float32")
    assert e.run("aclnnCat", lst, 1, out[0])[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(out), np.concatenate([a, b.astype(np.float32)], axis=1))
    bad_out = e.empty((3, 5), "float32")
    fails(e, PARAM_INVALID, "out", "aclnnCat", lst, 1, bad_out[0])
    fails(e, PARAM_INVALID, "dim", "aclnnCat", lst, 2, out[0])
    int_out = e.empty((3, 4), "int32")
    fails(e, PARAM_INVALID, "out", "aclnnCat", lst, 1, int_out[0])  # float into int
    e.release(lst, out, bad_out, int_out)
    lst = e.tensor_list([e.empty((3, 2), "float32"), e.empty((2, 2), "float32")])
    out = e.empty((3, 4), "float32")
    fails(e, PARAM_INVALID, "tensors[1]", "aclnnCat", lst, 1, out[0])
    fails(e, PARAM_NULLPTR, "tensors", "aclnnCat", e.ffi.NULL, 1, out[0])
    e.release(lst, out)


def _check_reduce_sum(e: _Emu) -> None:
    r = rng(5)
    x32 = r.standard_normal((3, 4, 5)).astype(np.float32)
    cases = [
        ("float32", [], False, "float32"),
        ("float32", [0, 2], True, "float32"),
        ("float16", [-1], False, "float32"),
        ("bfloat16", [1], False, "bfloat16"),
        ("int32", [0], False, "int64"),
        ("int64", [1, 2], False, "int64"),
        ("bool", [2], True, "int64"),
        ("float32", [1], False, "float16"),
    ]
    for src, dims, keep, dtype in cases:
        x = (
            x32 > 0
            if src == "bool"
            else (x32 * 100).astype(np_dtype(src))
            if "int" in src
            else x32.astype(np_dtype(src))
        )
        view = (
            x.transpose(0, 2, 1).copy().transpose(0, 2, 1)
        )  # the same values through non-contiguous strides
        want = x.astype(np.float64 if "int" not in src and src != "bool" else np.int64).sum(
            axis=tuple(dims) if dims else None, keepdims=keep
        )
        want = np.asarray(want).astype(np_dtype(dtype))
        shape = want.shape or ()
        tx, arr = e.tensor(view), e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", dims or [0]), len(dims))
        out = e.tensor(np.zeros(shape or (1,), np_dtype(dtype)).reshape(shape)) if shape else None
        if out is None:  # a 0-d result
            zero = np.zeros((1,), np_dtype(dtype))
            out = e.tensor(zero)
            dims0 = e.ffi.new("int64_t[]", [1])
            assert e.nn.aclDestroyTensor(out[0]) == 0
            t0 = e.nn.aclCreateTensor(dims0, 0, DTYPES[dtype], dims0, 0, 2, dims0, 1, out[1])
            e.memory[t0] = e.memory.pop(out[0])
            out = (t0, out[1], (), np_dtype(dtype))
        assert e.run("aclnnReduceSum", tx[0], arr, keep, DTYPES[dtype], out[0])[0] == 0, (src, dims, e.msg())
        close(e.fetch(out), want, dtype)
        e.release(tx, arr, out)
    # an empty reduction writes zeros; an empty result needs no executor
    tx, arr, out = (
        e.empty((0, 3), "float32"),
        e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", [0]), 1),
        e.tensor(np.full((3,), 7, np.float32)),
    )
    assert e.run("aclnnReduceSum", tx[0], arr, False, 0, out[0])[0] == 0
    np.testing.assert_array_equal(e.fetch(out), np.zeros(3, np.float32))
    out2 = e.empty((3, 0), "float32")
    tx2 = e.empty((3, 0, 2), "float32")
    arr2 = e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", [2]), 1)
    assert e.run("aclnnReduceSum", tx2[0], arr2, False, 0, out2[0]) == (0, "", 0)
    dup = e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", [1, -1]), 2)
    fails(e, PARAM_INVALID, "dims", "aclnnReduceSum", tx2[0], dup, False, 0, out2[0])
    fails(e, PARAM_INVALID, "out", "aclnnReduceSum", tx2[0], arr2, False, DTYPES["float16"], out2[0])
    fails(e, PARAM_NULLPTR, "dims", "aclnnReduceSum", tx2[0], e.ffi.NULL, False, 0, out2[0])
    e.release(tx, arr, out, out2, tx2, arr2, dup)


def _check_split_tensor(e: _Emu) -> None:
    r = rng(6)
    for dtype in ("float32", "float16", "bfloat16", "int32", "int64", "bool"):
        base = r.standard_normal((7, 6))
        x = base > 0 if dtype == "bool" else (base * 10).astype(np_dtype(dtype))
        view = x[:, ::2]  # (7, 3) strided
        want = [view[0:3], view[3:6], view[6:7]]
        tx = e.tensor(view)
        outs = [e.empty(w.shape, dtype) for w in want]
        lst = e.tensor_list(outs)
        assert e.run("aclnnSplitTensor", tx[0], 3, 0, lst)[0] == 0, e.msg()
        for o, w in zip(outs, want):
            np.testing.assert_array_equal(e.fetch(o), w)
        e.release(lst, tx)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    tx = e.tensor(x)
    outs = [e.empty((2, 2), "float32"), e.empty((2, 2), "float32"), e.empty((2, 1), "float32")]
    lst = e.tensor_list(outs)
    assert e.run("aclnnSplitTensor", tx[0], 2, -1, lst)[0] == 0, e.msg()
    for o, w in zip(outs, np.split(x, [2, 4], axis=1)):
        np.testing.assert_array_equal(e.fetch(o), w)
    fails(e, PARAM_INVALID, "out", "aclnnSplitTensor", tx[0], 3, 1, lst)  # two chunks, three tensors
    fails(e, PARAM_INVALID, "splitSections", "aclnnSplitTensor", tx[0], 0, 1, lst)
    fails(e, PARAM_INVALID, "dim", "aclnnSplitTensor", tx[0], 2, 2, lst)
    fails(e, PARAM_NULLPTR, "out", "aclnnSplitTensor", tx[0], 2, 1, e.ffi.NULL)
    e.release(lst)
    lst = e.tensor_list([e.empty((2, 3), "float32"), e.empty((2, 2), "int32")])
    fails(e, PARAM_INVALID, "out[1]", "aclnnSplitTensor", tx[0], 3, 1, lst)
    e.release(lst, tx)


def _check_nan_to_num(e: _Emu) -> None:
    x = np.array([[np.nan, np.inf, -np.inf, 1.5], [-2.0, np.nan, 0.0, np.inf]], np.float32)
    for dtype in ("float32", "float16", "bfloat16"):
        xs = x.astype(np_dtype(dtype))
        tx, out = e.tensor(xs.T), e.empty((4, 2), dtype)  # strided (transposed)
        assert e.run("aclnnNanToNum", tx[0], 9.0, 100.0, -1000.0, out[0])[0] == 0, e.msg()
        want = np.nan_to_num(x.T, nan=9.0, posinf=100.0, neginf=-1000.0).astype(np_dtype(dtype))
        close(e.fetch(out), want, dtype)
        e.release(tx, out)
    xi = np.array([1, -5, 7], np.int32)
    tx, out = e.tensor(xi), e.empty((3,), "int32")
    assert e.run("aclnnNanToNum", tx[0], 0.0, 1.0, -1.0, out[0])[0] == 0
    np.testing.assert_array_equal(e.fetch(out), xi)
    bad = e.empty((3,), "float32")
    fails(e, PARAM_INVALID, "out", "aclnnNanToNum", tx[0], 0.0, 1.0, -1.0, bad[0])
    fails(e, PARAM_NULLPTR, "self", "aclnnNanToNum", e.ffi.NULL, 0.0, 1.0, -1.0, bad[0])
    e.release(tx, out, bad)


def _layer_norm_ref(x, k, w, b, eps):
    x64 = x.astype(np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    y = (x64 - mean) * rstd
    if w is not None:
        y = y * w.astype(np.float64)
    if b is not None:
        y = y + b.astype(np.float64)
    return y, mean, rstd


def _check_layer_norm(e: _Emu) -> None:
    r = rng(7)
    for dtype, stat in (("float32", "float32"), ("float16", "float32"), ("bfloat16", "bfloat16")):
        x = r.standard_normal((2, 3, 4)).astype(np_dtype(dtype))
        w = r.standard_normal((3, 4)).astype(np_dtype(dtype))
        b = r.standard_normal((3, 4)).astype(np_dtype(dtype))
        shape = e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", [3, 4]), 2)
        tx, tw, tb = e.tensor(x), e.tensor(w), e.tensor(b)
        out, mean, rstd = e.empty(x.shape, dtype), e.empty((2, 1, 1), stat), e.empty((2, 1, 1), stat)
        assert e.run("aclnnLayerNorm", tx[0], shape, tw[0], tb[0], 1e-5, out[0], mean[0], rstd[0])[0] == 0, (
            e.msg()
        )
        y, m, s = _layer_norm_ref(x, 2, w, b, 1e-5)
        close(e.fetch(out), y.astype(np_dtype(dtype)), dtype)
        close(e.fetch(mean), m.astype(np_dtype(stat)), stat)
        close(e.fetch(rstd), s.astype(np_dtype(stat)), stat)
        e.release(shape, tx, tw, tb, out, mean, rstd)
    # no weight, bias, mean or rstd; a strided input
    x = r.standard_normal((5, 8)).astype(np.float32)[:, ::2]
    shape = e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", [4]), 1)
    tx, out = e.tensor(x), e.empty((5, 4), "float32")
    null = e.ffi.NULL
    assert e.run("aclnnLayerNorm", tx[0], shape, null, null, 1e-6, out[0], null, null)[0] == 0, e.msg()
    close(e.fetch(out), _layer_norm_ref(x, 1, None, None, 1e-6)[0], "float32")
    wrong_shape = e.nn.aclCreateIntArray(e.ffi.new("int64_t[]", [5]), 1)
    fails(
        e,
        PARAM_INVALID,
        "normalizedShape",
        "aclnnLayerNorm",
        tx[0],
        wrong_shape,
        null,
        null,
        1e-6,
        out[0],
        null,
        null,
    )
    w = e.empty((5,), "float32")
    fails(
        e,
        PARAM_INVALID,
        "weightOptional",
        "aclnnLayerNorm",
        tx[0],
        shape,
        w[0],
        null,
        1e-6,
        out[0],
        null,
        null,
    )
    mean = e.empty((5,), "float32")
    fails(
        e,
        PARAM_INVALID,
        "meanOutOptional",
        "aclnnLayerNorm",
        tx[0],
        shape,
        null,
        null,
        1e-6,
        out[0],
        mean[0],
        null,
    )
    fails(e, PARAM_NULLPTR, "input", "aclnnLayerNorm", null, shape, null, null, 1e-6, out[0], null, null)
    ix = e.empty((5, 4), "int32")
    fails(e, PARAM_INVALID, "input", "aclnnLayerNorm", ix[0], shape, null, null, 1e-6, out[0], null, null)
    empty_x, empty_out = e.empty((0, 4), "float32"), e.empty((0, 4), "float32")
    assert e.run("aclnnLayerNorm", empty_x[0], shape, null, null, 1e-6, empty_out[0], null, null) == (
        0,
        "",
        0,
    )
    e.release(shape, wrong_shape, tx, out, w, mean, ix, empty_x, empty_out)


def _check_foreach_add_scalar_list(e: _Emu) -> None:
    r = rng(8)
    ffi = e.ffi
    for dtype, sdtype, values in (
        ("float32", "float32", [0.5, -2.0, 3.25]),
        ("float16", "float32", [1.5, 0.0, -4.0]),
        ("bfloat16", "float64", [2.0, 0.125, -1.0]),
        ("int32", "int64", [3, -7, 100]),
        ("int64", "int64", [2**40, -1, 5]),
    ):
        shapes = [(2, 3), (0, 4), (5,)]
        xs = [(r.standard_normal(s) * 10).astype(np_dtype(dtype)) for s in shapes]
        xs[0] = xs[0].T.copy().T  # through transposed strides
        tx = [e.tensor(x) for x in xs]
        to = [e.empty(x.shape, dtype) for x in xs]
        scal = [e.scalar(v, sdtype) for v in values]
        xl, ol = e.tensor_list(tx), e.tensor_list(to)
        sl = e.nn.aclCreateScalarList(ffi.new("aclScalar *[]", scal), 3)
        assert e.run("aclnnForeachAddScalarList", xl, sl, ol)[0] == 0, e.msg()
        for x, o, v in zip(xs, to, values):
            if "int" in dtype:
                want = x + np.asarray(v, x.dtype)
            else:
                want = (x.astype(np.float32) + np.float32(v)).astype(np_dtype(dtype))
            close(e.fetch(o), want, dtype)
        e.release(xl, ol, sl)
    # errors
    tx = [e.empty((2,), "float32"), e.empty((3,), "float32")]
    to = [e.empty((2,), "float32"), e.empty((3,), "float16")]
    xl, ol = e.tensor_list(tx), e.tensor_list(to)
    one = e.nn.aclCreateScalarList(ffi.new("aclScalar *[]", [e.scalar(1.0, "float32")]), 1)
    two = e.nn.aclCreateScalarList(
        ffi.new("aclScalar *[]", [e.scalar(1.0, "float32"), e.scalar(2.0, "float32")]), 2
    )
    fails(e, PARAM_INVALID, "scalars", "aclnnForeachAddScalarList", xl, one, ol)
    fails(e, PARAM_INVALID, "out[1]", "aclnnForeachAddScalarList", xl, two, ol)
    fails(e, PARAM_NULLPTR, "x", "aclnnForeachAddScalarList", ffi.NULL, two, ol)
    ints = e.tensor_list([e.empty((2,), "int32")])
    fails(e, PARAM_INVALID, "scalars[0]", "aclnnForeachAddScalarList", ints, one, ints)
    e.release(xl, ol, one, two, ints)


def _nearest_ref(x, oh, ow):
    ih, iw = x.shape[2:]
    ys = np.minimum(np.floor(np.arange(oh, dtype=np.float32) * np.float32(ih / oh)).astype(int), ih - 1)
    xs = np.minimum(np.floor(np.arange(ow, dtype=np.float32) * np.float32(iw / ow)).astype(int), iw - 1)
    return x[:, :, ys][:, :, :, xs]


def _check_resize(e: _Emu) -> None:
    r = rng(9)
    ffi = e.ffi
    for dtype, (oh, ow) in (("float32", (7, 4)), ("float16", (3, 10)), ("bfloat16", (6, 5))):
        x = r.standard_normal((2, 3, 3, 5)).astype(np_dtype(dtype))
        tx, out = e.tensor(x), e.empty((2, 3, oh, ow), dtype)
        scales = e.nn.aclCreateFloatArray(ffi.new("float[]", [1, 1, oh / 3, ow / 5]), 4)
        mode = ffi.new("char[]", b"nearest")
        assert e.run("aclnnResize", tx[0], scales, mode, out[0])[0] == 0, e.msg()
        np.testing.assert_array_equal(e.fetch(out), _nearest_ref(x, oh, ow))
        e.release(tx, out, scales)
    x = r.standard_normal((1, 2, 4, 4)).astype(np.float32)
    tx, out = e.tensor(x), e.empty((1, 2, 2, 2), "float32")
    scales = e.nn.aclCreateFloatArray(ffi.new("float[]", [1, 1, 0.5, 0.5]), 4)
    fails(e, PARAM_INVALID, "mode", "aclnnResize", tx[0], scales, ffi.new("char[]", b"bilinear"), out[0])
    fails(e, PARAM_NULLPTR, "mode", "aclnnResize", tx[0], scales, ffi.NULL, out[0])
    three = e.nn.aclCreateFloatArray(ffi.new("float[]", [1, 0.5, 0.5]), 3)
    fails(e, PARAM_INVALID, "scales", "aclnnResize", tx[0], three, ffi.new("char[]", b"nearest"), out[0])
    wrong = e.empty((1, 3, 2, 2), "float32")
    fails(e, PARAM_INVALID, "out", "aclnnResize", tx[0], scales, ffi.new("char[]", b"nearest"), wrong[0])
    e.release(tx, out, scales, three, wrong)


def _check_phase2_executors_and_list_lifetimes(e: _Emu) -> None:
    a, out = e.tensor(np.ones((2, 2), np.float32)), e.empty((2, 2), "int32")
    ws, ex = e.ffi.new("uint64_t *"), e.ffi.new("aclOpExecutor **")
    assert e.op("aclnnCastGetWorkspaceSize")(a[0], DTYPES["int32"], out[0], ws, ex) == 0
    assert e.op("aclnnNanToNum")(e.ffi.NULL, 0, ex[0], e.ffi.NULL) == PARAM_INVALID  # made by aclnnCast
    assert "aclnnCastGetWorkspaceSize" in e.msg()
    assert e.op("aclnnCast")(e.ffi.NULL, 0, ex[0], e.ffi.NULL) == 0
    assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == 0
    assert e.op("aclnnCast")(e.ffi.NULL, 0, ex[0], e.ffi.NULL) == 561103  # consumed
    np.testing.assert_array_equal(e.fetch(out), np.ones((2, 2), np.int32))
    e.release(a, out)
    # phase 1 snapshots the list's tensors: destroying the list (and so its tensors) before
    # phase 2 is allowed, as for any descriptor; the memory must stay allocated
    parts = [e.tensor(np.full((2,), i, np.float32)) for i in range(3)]
    lst, out = e.tensor_list(parts), e.empty((6,), "float32")
    ws, ex = e.ffi.new("uint64_t *"), e.ffi.new("aclOpExecutor **")
    assert e.op("aclnnCatGetWorkspaceSize")(lst, 0, out[0], ws, ex) == 0, e.msg()
    assert e.nn.aclDestroyTensorList(lst) == 0
    e.members.pop(lst)  # their memory is freed below, after phase 2 ran
    assert e.op("aclnnCat")(e.ffi.NULL, 0, ex[0], e.ffi.NULL) == 0, e.msg()
    assert e.rt.aclrtSynchronizeStream(e.ffi.NULL) == 0
    np.testing.assert_array_equal(e.fetch(out), np.repeat(np.arange(3, dtype=np.float32), 2))
    e.release(out)
    e.free_all()  # the inputs' memory, before new descriptors may reuse their addresses as keys
    # the same list as x and out: in place
    xs = [e.tensor(np.arange(3, dtype=np.float32) * (i + 1)) for i in range(2)]
    xl = e.tensor_list(xs)
    sl = e.nn.aclCreateScalarList(
        e.ffi.new("aclScalar *[]", [e.scalar(10, "int32"), e.scalar(0.5, "float32")]), 2
    )
    assert e.run("aclnnForeachAddScalarList", xl, sl, xl)[0] == 0, e.msg()
    np.testing.assert_array_equal(e.fetch(xs[0]), [10, 11, 12])
    np.testing.assert_array_equal(e.fetch(xs[1]), [0.5, 2.5, 4.5])
    e.release(xl, sl)


_CHECKS = [f for name, f in sorted(globals().items()) if name.startswith("_check_")]
_CHECK_NAMES = [f.__name__[len("_check_") :] for f in _CHECKS]


def _child_main(layout: str, home: str) -> None:
    report: dict = {"checks": {}, "left": {}}
    e = _Emu(layout, Path(home))
    report["where"] = e.where
    assert e.rt.aclrtSetDevice(0) == 0, e.msg()
    for name, check in zip(_CHECK_NAMES, _CHECKS):
        before = e.counts()
        try:
            check(e)
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

_reports: dict[str, dict] = {}


def _report(layout: str) -> dict:
    if layout not in _reports:
        home = emulator_home(layout)
        path = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
        env = dict(os.environ, PYTHONPATH=path)
        proc = subprocess.run(
            [sys.executable, __file__, layout, str(home)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0, (
            f"emulator child ({layout}) crashed:\n{proc.stderr}\n{proc.stdout[-2000:]}"
        )
        _reports[layout] = json.loads(proc.stdout)
    return _reports[layout]


LAYOUTS = pytest.mark.parametrize("layout", ["classic", "split"])


@LAYOUTS
@pytest.mark.parametrize("check", _CHECK_NAMES)
def test_operator_and_list_behaviour(layout: str, check: str) -> None:
    report = _report(layout)
    assert report["checks"][check] is None, report["checks"][check]
    assert report["left"][check] == [0] * 13, "live objects left behind (or destroyed twice)"


@LAYOUTS
def test_nothing_left_alive_and_no_hazards(layout: str) -> None:
    report = _report(layout)
    assert report["final_counts"] == [0] * 13
    assert report["hazards"] == 0


def test_split_layout_puts_each_operator_in_cann_s_library() -> None:
    where = _report("split")["where"]
    for op in NEW_OPS:
        assert where[op + "GetWorkspaceSize"] == where[op] == SPLIT_LIBRARY[op], (op, where)


@LAYOUTS
def test_every_header_declares_both_phases(layout: str) -> None:
    home = emulator_home(layout)
    files = header_files(home, layout)
    assert any(p.parent.name == "level2" for p in files)  # CANN keeps some of them in level2/
    found = phases(home, layout)
    for op in SPLIT_LIBRARY:
        for fn, pattern in (
            (op + "GetWorkspaceSize", r"uint64_t\s*\*\s*workspaceSize,\s*aclOpExecutor\s*\*\*\s*executor\)"),
            (
                op,
                r"\(\s*void\s*\*\s*workspace,\s*uint64_t workspaceSize,\s*aclOpExecutor\s*\*\s*executor,"
                r"\s*(const )?aclrtStream stream\)",
            ),
        ):
            assert fn in found, (layout, fn)
            assert all(re.search(pattern, d) for d in found[fn]), found[fn]
    # every file is one operator family: guards, extern "C", the meta include (the split home's
    # include/aclnnop/ also keeps the project's aclnn_ops.h, which the shims there used)
    for path in files:
        text = path.read_text()
        if path.name == "aclnn_util.h":
            assert "define ACLNN_API" in text
            continue
        if path.name == "aclnn_ops.h":
            continue
        assert '#include "aclnn/acl_meta.h"' in text and 'extern "C" {' in text, path


@LAYOUTS
def test_headers_compile_as_c11_and_cpp(layout: str, tmp_path: Path) -> None:
    import shutil

    home = emulator_home(layout)
    inc = home / HEADER_DIRS[layout]
    lines = [
        f'#include "{p.relative_to(inc)}"' for p in header_files(home, layout) if p.name != "aclnn_util.h"
    ]
    src = "\n".join(lines) + "\nint main(void) { return 0; }\n"
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
            f"-I{inc}",
            str(f),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr


if __name__ == "__main__":
    _child_main(sys.argv[1], sys.argv[2])
