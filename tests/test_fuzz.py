"""Property-based bad-input tests of the functional and the low-level API, on both backends.

Each example starts from a valid call and breaks one thing (its *category*):
wrong kinds of arrays (None, lists, DeviceArrays of the other backend, closed
DeviceArrays), wrong dtypes, ranks and shapes, zero-size and non-contiguous
arrays, NaN/Inf data, bad or huge (beyond int64) kernel/stride/padding/
dilation, bad modes, masks, layouts and indices. Every call must

* raise AclnnError, AclError, TypeError or ValueError with a non-empty
  message that names the broken argument (Python or C spelling, e.g.
  ``kernel_size`` / ``kernelSize``), or
* return the reference result: ``pyaclnn.kernels`` on host arrays for the
  numpy backend; the numpy backend's result for npu over the emulator (which
  must then also accept the call, and reject what numpy rejects with the same
  status);

and must never modify its inputs. The numpy backend runs in this process;
npu runs in a child process (the emulator is C: a crash must not take pytest
down), which compares against the numpy backend in the same child.

A known, still open bug can be tolerated by the fuzz through ``fuzz.outcomes.KNOWN``
(counted under ``known:<id>``) while a strict xfail test below pins it; remove the entry
with the fix.

The machinery lives in the package ``tests/fuzz`` (strategies, outcomes, one module per
operator in ``tests/fuzz/ops`` with its property and reference, the registry of properties,
low-level property, harness); this module holds the tests only.

Examples per property: 300 by default (split evenly over its categories; Hypothesis stops a
category early when its space is exhausted), ``PYACLNN_FUZZ_EXAMPLES`` for more.
With ``PYACLNN_FUZZ_REPORT=<file>`` each property appends its per-category
counts to that file as one JSON line.
"""

from __future__ import annotations

import numpy as np
import operators
import pytest
from fuzz.harness import in_child, run_in_child
from fuzz.lowlevel_property import backward_args, free_handles, grid_args, make_handles
from fuzz.properties import PROPERTIES

import pyaclnn
from pyaclnn import AclError, AclnnError, acl, aclnn, backends, runtime
from pyaclnn.constants import ACL_FLOAT, ACL_FORMAT_ND


@pytest.mark.parametrize("name", list(PROPERTIES))
@pytest.mark.parametrize("backend_name", ["numpy", "npu"])
def test_fuzz(backend_name, name, emulator_home):
    """One property on one backend, in a child process (npu runs C code; both get a memory limit).

    The numpy child also holds npu DeviceArrays and handles (the other backend), and vice versa.
    """
    run_in_child(name, backend_name, emulator_home)


def test_the_properties_are_one_module_per_operator_of_the_table(monkeypatch):
    assert list(PROPERTIES) == [*operators.NAMES, "lowlevel"]
    real = operators.NAMES
    monkeypatch.setattr(operators, "NAMES", (*real, "grid_sampler2d"))
    with pytest.raises(LookupError, match=r"no entry for operator\(s\) \['grid_sampler2d'\]"):
        operators.per_operator_modules("fuzz.ops", "fuzz properties")
    monkeypatch.setattr(operators, "NAMES", real[:-1])
    with pytest.raises(LookupError, match=rf"entries for unknown operator\(s\) \['{real[-1]}'\]"):
        operators.per_operator_modules("fuzz.ops", "fuzz properties")


# -- bugs the fuzz found: regression tests, and strict xfails for those still open ---------------------


def test_a_huge_valid_kernel_neither_exhausts_memory_nor_time(emulator_home):
    proc = in_child(
        """
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        import numpy as np, pyaclnn
        x = np.arange(64, dtype=np.float32).reshape(1, 1, 4, 4, 4)
        out, idx = pyaclnn.max_pool3d_with_argmax(x, 2**31 - 1, ceil_mode=True)
        assert out.shape == (1, 1, 1, 1, 1) and out.item() == 63 and idx.item() == 63, (out, idx)
        print("ok")
    """,
        emulator_home,
        "numpy",
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_a_mode_beyond_int64_is_a_value_error_on_npu(emulator_home):
    proc = in_child(
        """
        import numpy as np, pyaclnn
        x, g = np.ones((1, 1, 2, 2, 2), np.float32), np.zeros((1, 1, 1, 1, 3), np.float32)
        for kw in ({"interpolation_mode": 2**70}, {"padding_mode": -2**64}):
            try:
                pyaclnn.grid_sampler3d(x, g, **kw)
            except (TypeError, ValueError) as exc:
                assert next(iter(kw)) in str(exc) or "Mode" in str(exc), exc
            except pyaclnn.AclError:
                pass
            else:
                raise SystemExit(f"{kw} accepted")
        from pyaclnn import acl
        for fn in (lambda: acl.create_int_array([2**63]), lambda: acl.rt.malloc(-1)):
            try:
                fn()
            except (TypeError, ValueError, pyaclnn.AclError):
                pass
            else:
                raise SystemExit("accepted")
        print("ok")
    """,
        emulator_home,
        "npu",
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("values", [[2**63], [-(2**63) - 1], [1.5], ["a"]])
def test_numpy_int_array_rejects_what_c_cannot_hold(values):
    with pytest.raises((TypeError, ValueError), match="values"):
        h = acl.create_int_array(values, backend="numpy")
        acl.destroy_int_array(h, backend="numpy")


@pytest.mark.parametrize("values", [["x"], [2], [None]])
def test_numpy_bool_array_rejects_non_bools(values):
    with pytest.raises(TypeError, match="values"):
        h = acl.create_bool_array(values, backend="numpy")
        acl.destroy_bool_array(h, backend="numpy")


@pytest.mark.parametrize(
    "what",
    [
        "create_tensor data",
        "memset ptr",
        "phase-2 workspace",
        "mode None",
        "mode str",
    ],
)
def test_numpy_a_str_address_names_the_argument(what):
    runtime.context("numpy")
    m = make_handles("numpy")
    try:
        with pytest.raises(
            (TypeError, ValueError, AclError), match="(?i)data|ptr|workspace|interpolationMode"
        ):
            if what == "create_tensor data":
                acl.create_tensor((1,), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (1,), "a", backend="numpy")
            elif what == "memset ptr":
                acl.rt.memset("a", 4, 0, 4, backend="numpy")
            elif what.startswith("mode"):
                args = grid_args(m)
                args[2] = None if what == "mode None" else "0"
                try:
                    _, executor = aclnn.grid_sampler3d_get_workspace_size(*args, backend="numpy")
                except (TypeError, ValueError) as exc:
                    assert "interpolationMode" in str(exc), exc
                    raise
                aclnn.grid_sampler3d(0, 0, executor, None, backend="numpy")
            else:
                size, executor = aclnn.max_pool3d_with_argmax_backward_get_workspace_size(
                    *backward_args(m), backend="numpy"
                )
                try:
                    aclnn.max_pool3d_with_argmax_backward("ws", size, executor, m["stream"], backend="numpy")
                finally:
                    if backends.get("numpy").live_counts()["executors"]:
                        aclnn.max_pool3d_with_argmax_backward(m["ws"], size, executor, None, backend="numpy")
    finally:
        free_handles("numpy", m)


def test_numpy_memcpy_negative_count_names_count():
    runtime.context("numpy")
    ptr = acl.rt.malloc(16, backend="numpy")
    try:
        with pytest.raises((AclError, ValueError), match="count"):
            acl.rt.memcpy(np.zeros(4, np.uint8), 4, ptr, -1, 2, backend="numpy")
    finally:
        acl.rt.free(ptr, backend="numpy")


def test_a_bad_indices_dtype_string_names_the_argument():
    with pytest.raises(TypeError, match="indices_dtype"):
        pyaclnn.max_pool3d_with_argmax(
            np.zeros((1, 1, 2, 2, 2), np.float32), 2, indices_dtype="foo", backend="numpy"
        )


@pytest.mark.parametrize("change", ["float dim", "negative storage", "storage beyond allocation"])
def test_numpy_create_tensor_checks_dims_like_the_emulator(change):
    runtime.context("numpy")
    ptr = acl.rt.malloc(16, backend="numpy")
    view, storage = {
        "float dim": ((1.5,), (1,)),
        "negative storage": ((1,), (-5,)),
        "storage beyond allocation": ((1,), (10**6,)),
    }[change]
    try:
        with pytest.raises((AclnnError, TypeError)):
            h = acl.create_tensor(view, ACL_FLOAT, None, 0, ACL_FORMAT_ND, storage, ptr, backend="numpy")
            acl.destroy_tensor(h, backend="numpy")
    finally:
        acl.rt.free(ptr, backend="numpy")
