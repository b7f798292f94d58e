"""The low-level fuzz property: aclnn phase 1 and 2, aclCreateTensor and
aclCreateIntArray called with one junk argument (None, ints, handles of the
wrong kind, destroyed or of the other backend).

The handles are made once per backend (and for the other backend) and kept
in a module-level state until :func:`release_state`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from pyaclnn import acl, aclnn, backends, runtime
from pyaclnn.constants import ACL_FLOAT, ACL_FORMAT_NCDHW, ACL_FORMAT_ND, ACL_INT32

from .outcomes import KNOWN, check_error
from .strategies import HUGE_INTS, INT64_MAX, other_backend


def _junk_handle(data, backend: str, made: dict):
    """Something that is not the expected live handle; made at call time on ``backend``."""
    kind = data.draw(
        st.sampled_from(
            [
                "none",
                "int",
                "str",
                "float",
                "tensor",
                "int array",
                "bool array",
                "stream",
                "destroyed tensor",
                "destroyed int array",
                "other tensor",
                "other int array",
            ]
        )
    )
    return kind


def _make_junk(kind: str, backend: str, made: dict, names) -> Any:
    if kind == "none":
        return None
    if kind == "int":
        return 12345
    if kind == "str":
        return "handle"
    if kind == "float":
        return 1.5
    if kind == "tensor":
        return made["tensor"]
    if kind == "int array":
        return made["ints"]
    if kind == "bool array":
        return made["bools"]
    if kind == "stream":
        return made["stream"]
    if kind == "destroyed tensor":
        return made["dead tensor"]
    if kind == "destroyed int array":
        return made["dead ints"]
    if kind == "other tensor":
        return made["other"]["tensor"]
    if kind == "other int array":
        return made["other"]["ints"]
    raise AssertionError(kind)


def make_handles(backend: str) -> dict:
    made: dict = {}
    ptr = acl.rt.malloc(512, backend=backend)
    acl.rt.memset(ptr, 512, 0, 512, backend=backend)  # index 0 everywhere: a valid argmax
    made["ptr"] = ptr
    made["ws"] = acl.rt.malloc(64, backend=backend)
    made["dead ptr"] = acl.rt.malloc(64, backend=backend)
    acl.rt.free(made["dead ptr"], backend=backend)
    made["gin"] = acl.create_tensor(
        (1, 1, 2, 2, 2), ACL_FLOAT, None, 0, ACL_FORMAT_NCDHW, (8,), ptr + 256, backend=backend
    )
    made["tensor"] = acl.create_tensor(
        (1, 1, 2, 2, 2), ACL_FLOAT, None, 0, ACL_FORMAT_NCDHW, (8,), ptr, backend=backend
    )
    made["out"] = acl.create_tensor(
        (1, 1, 1, 1, 1), ACL_FLOAT, None, 0, ACL_FORMAT_NCDHW, (1,), ptr + 64, backend=backend
    )
    made["idx"] = acl.create_tensor(
        (1, 1, 1, 1, 1), ACL_INT32, None, 0, ACL_FORMAT_NCDHW, (1,), ptr + 96, backend=backend
    )
    made["grid"] = acl.create_tensor(
        (1, 1, 1, 1, 3), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (3,), ptr + 128, backend=backend
    )
    made["ints"] = acl.create_int_array((2,), backend=backend)
    made["empty ints"] = acl.create_int_array((), backend=backend)
    made["zero ints"] = acl.create_int_array((0,), backend=backend)
    made["one ints"] = acl.create_int_array((1,), backend=backend)
    made["bools"] = acl.create_bool_array((True, True), backend=backend)
    made["stream"] = acl.rt.create_stream(backend=backend)
    made["dead tensor"] = acl.create_tensor(
        (1,), ACL_FLOAT, None, 0, ACL_FORMAT_ND, (1,), ptr, backend=backend
    )
    acl.destroy_tensor(made["dead tensor"], backend=backend)
    made["dead ints"] = acl.create_int_array((1,), backend=backend)
    acl.destroy_int_array(made["dead ints"], backend=backend)
    return made


def free_handles(backend: str, made: dict) -> None:
    # Launches the properties queued (on the made stream or the default one) may still use
    # the memory: wait for the whole device first.
    acl.rt.synchronize_device(backend=backend)
    for key in ("tensor", "out", "idx", "grid", "gin"):
        acl.destroy_tensor(made[key], backend=backend)
    for key in ("ints", "empty ints", "zero ints", "one ints"):
        acl.destroy_int_array(made[key], backend=backend)
    acl.destroy_bool_array(made["bools"], backend=backend)
    acl.rt.destroy_stream(made["stream"], backend=backend)
    acl.rt.free(made["ptr"], backend=backend)
    acl.rt.free(made["ws"], backend=backend)


LOWLEVEL_CATEGORIES = [
    "pool self",
    "pool kernelSize",
    "pool stride",
    "pool out",
    "grid input",
    "grid grid",
    "grid interpolationMode",
    "grid out",
    "phase2 executor",
    "phase2 workspace",
    "phase2 stream",
    "create_tensor",
    "int array values",
]

_LL_STATE: dict[str, dict] = {}


def _ll_state(backend: str) -> dict:
    state = _LL_STATE.get(backend)
    if state is None:
        runtime.context(backend)
        runtime.context(other_backend(backend))
        state = _LL_STATE[backend] = make_handles(backend)
        state["other"] = _LL_STATE.get(other_backend(backend)) or make_handles(other_backend(backend))
        _LL_STATE.setdefault(other_backend(backend), state["other"])
    return state


def release_state() -> None:
    for name, state in list(_LL_STATE.items()):
        free_handles(name, state)
    _LL_STATE.clear()


def pool_args(m: dict) -> list:
    return [m["tensor"], m["ints"], m["empty ints"], m["zero ints"], m["one ints"], False, m["out"], m["idx"]]


def grid_args(m: dict) -> list:
    return [m["tensor"], m["grid"], 0, 0, False, m["out"]]


def _run_ll(backend: str, category: str, data, m: dict) -> tuple[BaseException | None, tuple[str, ...]]:
    """One low-level call with one bad argument; returns (error or None, names the error must mention)."""
    pool_slots = {
        "pool self": (0, "self"),
        "pool kernelSize": (1, "kernelSize"),
        "pool stride": (2, "stride"),
        "pool out": (6, "out"),
    }
    grid_slots = {"grid input": (0, "input"), "grid grid": (1, "grid"), "grid out": (5, "out")}
    try:
        if category in pool_slots or category in grid_slots:
            pool = category in pool_slots
            slot, name = (pool_slots if pool else grid_slots)[category]
            args = pool_args(m) if pool else grid_args(m)
            kind = _junk_handle(data, backend, m)
            args[slot] = _make_junk(kind, backend, m, name)
            phase1 = (
                aclnn.max_pool3d_with_argmax_get_workspace_size
                if pool
                else aclnn.grid_sampler3d_get_workspace_size
            )
            _, executor = phase1(*args, backend=backend)
            if executor is not None:  # accepted: only a live handle of the right kind may be
                aclnn.max_pool3d_with_argmax(
                    0, 0, executor, None, backend=backend
                ) if pool else aclnn.grid_sampler3d(0, 0, executor, None, backend=backend)
                assert (kind == "int array") == (name in ("kernelSize", "stride")) and kind in (
                    "tensor",
                    "int array",
                ), f"phase 1 accepted {kind!r} as {name}"
            return None, (name,)
        if category == "grid interpolationMode":
            args = grid_args(m)
            args[2] = data.draw(
                st.one_of(st.integers(-5, 5), st.sampled_from(HUGE_INTS), st.none(), st.just("0"))
            )
            valid = isinstance(args[2], int) and 0 <= args[2] <= 1
            try:
                _, executor = aclnn.grid_sampler3d_get_workspace_size(*args, backend=backend)
            except Exception as exc:  # noqa: BLE001
                return exc, ("interpolationMode",)
            assert valid, f"interpolationMode {args[2]!r} accepted"
            aclnn.grid_sampler3d(0, 0, executor, m["stream"], backend=backend)
            return None, ("interpolationMode",)
        if category.startswith("phase2"):
            return _ll_phase2(backend, category, data, m)
        if category == "create_tensor":
            return _ll_create_tensor(backend, data, m)
        if category == "int array values":
            values = data.draw(
                st.lists(st.one_of(st.integers(-(2**63), INT64_MAX), st.sampled_from(HUGE_INTS)), max_size=4)
            )
            fits = all(-(2**63) <= v <= INT64_MAX for v in values)
            try:
                h = acl.create_int_array(values, backend=backend)
            except Exception as exc:  # noqa: BLE001
                return exc, ("values", "int64", "aclCreateIntArray")
            acl.destroy_int_array(h, backend=backend)
            assert fits, f"aclCreateIntArray accepted {values} (beyond int64)"
            return None, ()
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        return exc, (pool_slots.get(category) or grid_slots.get(category) or (None, category))[1:]
    raise AssertionError(category)


def backward_args(m: dict) -> list:
    return [
        m["out"],
        m["tensor"],
        m["idx"],
        m["ints"],
        m["empty ints"],
        m["zero ints"],
        m["one ints"],
        False,
        m["gin"],
    ]


def _ll_phase2(backend: str, category: str, data, m: dict):
    """Phase 2 of the max-pool backward (which asks for 32 bytes of workspace) with one bad argument."""
    phase1, phase2 = (
        aclnn.max_pool3d_with_argmax_backward_get_workspace_size,
        aclnn.max_pool3d_with_argmax_backward,
    )
    size, executor = phase1(*backward_args(m), backend=backend)
    assert size > 0
    real = executor
    workspace, stream = m["ws"], m["stream"]
    if category == "phase2 executor":
        executor = _make_junk(
            data.draw(st.sampled_from(["none", "int", "str", "tensor", "stream"])), backend, m, "executor"
        )
        names: tuple[str, ...] = ("executor",)
    elif category == "phase2 workspace":
        workspace, size = data.draw(
            st.sampled_from(
                [
                    (12345, size),
                    (-1, size),
                    ("ws", size),
                    (1.5, size),
                    (2**64 + 5, size),
                    (0, size),
                    (m["ws"], 0),
                    (m["ws"], size // 2),
                    (m["dead ptr"], size),
                    (m["ptr"] + 500, size),
                ]
            )
        )
        names = ("workspace",)
    else:
        stream = _make_junk(
            data.draw(st.sampled_from(["int", "str", "tensor", "int array"])), backend, m, "stream"
        )
        names = ("stream",)
    try:
        phase2(workspace, size, executor, stream, backend=backend)
        error = None
    except Exception as exc:  # noqa: BLE001
        error = exc
    # A failed launch consumes a non-repeatable executor (test_lifetimes checks that); the junk-executor
    # case never launched the real one: run it off.
    if backends.get(backend).live_counts()["executors"]:
        phase2(m["ws"], 32, real, m["stream"], backend=backend)
    assert error is not None, f"{category}: a bad phase-2 argument was accepted"
    return error, names


def _ll_create_tensor(backend: str, data, m: dict):
    args = {
        "view_dims": (2, 3),
        "data_type": ACL_FLOAT,
        "strides": None,
        "offset": 0,
        "format": ACL_FORMAT_ND,
        "storage_dims": (6,),
        "data": m["ptr"],
    }
    which = data.draw(st.sampled_from(list(args)))
    names = {
        "view_dims": ("viewDims", "view_dims", "tensorData", "storageDims", "view"),
        "strides": ("stride", "tensorData", "storageDims", "view"),
        "offset": ("offset", "tensorData", "storageDims", "view"),
        "data_type": ("dataType", "data_type", "aclDataType"),
        "format": ("format",),
        "storage_dims": ("storageDims", "storage_dims", "tensorData"),
        "data": ("tensorData", "data"),
    }[which]
    ints = st.one_of(st.integers(-3, 8), st.sampled_from(HUGE_INTS))
    value = {
        "view_dims": st.lists(ints, max_size=3),
        "strides": st.lists(ints, min_size=2, max_size=3),
        "offset": ints,
        "data_type": st.one_of(st.integers(-2, 40), st.sampled_from(HUGE_INTS)),
        "format": st.one_of(st.sampled_from([2, 30, 27, 0]), st.sampled_from(HUGE_INTS)),
        "storage_dims": st.lists(ints, max_size=2),
        "data": st.sampled_from([0, 12345, "freed", "other", m["ptr"] + 200]),
    }[which]
    args[which] = data.draw(value)
    if args["data"] == "other":
        args["data"] = m["other"]["ptr"]
    elif args["data"] == "freed":
        args["data"] = m["dead ptr"]
    try:
        h = acl.create_tensor(*args.values(), backend=backend)
    except Exception as exc:  # noqa: BLE001
        return exc, names
    acl.destroy_tensor(h, backend=backend)
    return None, names


def prop_lowlevel(backend: str, category: str, data, counts) -> None:
    m = _ll_state(backend)
    error, names = _run_ll(backend, category, data, m)
    if error is None:
        counts[(category, "accepted")] += 1
        return
    for bug, known in KNOWN.items():
        if known(category, error, backend):
            counts[(category, f"known:{bug}")] += 1
            return
    check_error(error, names, f"lowlevel/{category} on {backend}")
    counts[(category, "error")] += 1
