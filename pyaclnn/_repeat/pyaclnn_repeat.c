/* The repeated eager call of pyaclnn.ops in compiled form (pyaclnn._repeat).
 *
 * call(eager, values, stream) is pyaclnn.ops._call.Eager.__call__ (with
 * pyaclnn._launch.eager and the launch of a found record) for the common case, a call like
 * an earlier one on the same stream: the entry of the non-tensor arguments, the stream
 * (by pyaclnn._launch.plain_stream), each tensor tested as pyaclnn._launch._find tests it,
 * the same key, the record (a _launch.Repeated) the earlier call left, both phases under
 * the stream's lock with the GIL released, the count of queued work, the marks of the
 * written arrays (as pyaclnn._array.writes_queued), the outputs. What it does not handle
 * it leaves to Python as the Python path would meet it:
 *   - before anything happened, to eager.rest(values, stream, state, ctx, entry, found):
 *     no record (found None: the general path), a record without a C form (found: the
 *     record and the written arrays, launched by Python);
 *   - once phase 1 ran, under the stream's lock, to the function configure() was given:
 *     a failing status, nothing to compute, a workspace larger than the stream's buffer.
 *
 * The C form of a record is a bytes object of native uint64 words:
 *     phase 1's address, phase 2's address, the stream's aclrtStream, n, then phase 1's
 *     first n arguments (each a pointer, an integer, an enum or a bool, extended to 64
 *     bits and passed as a uint64_t: the same registers and 8-byte stack slots on Linux
 *     on x86-64 and AArch64, where CANN runs; pyaclnn.backends.npu._c_form gives no C
 *     form for a float or a double, or on another machine).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

#define PYACLNN_REPEAT_ABI 1
#define MAX_TENSORS 32
#define MAX_ARGS 24 /* phase 1's arguments before its two out-parameters */

typedef uint64_t u64;
typedef int32_t (*phase2_fn)(void *, u64, void *, void *);

/* What configure() set. */
static PyTypeObject *device_array_type;
static PyObject *order_acquire, *order_release, *order_locked; /* the lock of writes_queued's methods */
static PyObject *rest;       /* the outcomes Python handles once phase 1 ran */
static PyObject *not_taken;  /* pyaclnn._launch.NOT_TAKEN */
static PyObject *timeline;   /* pyaclnn._timeline: its attribute "recording" */
static PyObject *plain_stream;

/* The DeviceArray slots read on every call, by offset (each a T_OBJECT_EX member). */
static Py_ssize_t o_last_descriptor, o_graphs, o_stream, o_readers, o_block, o_base, o_written_at;

/* The object slots of the other classes read on every call, by offset where the object is of
 * the class they were learnt from (else by getattr, which gives the same values). */
#define MAX_FIELDS 8
typedef struct {
    PyTypeObject *type; /* NULL: not learnt (or not every name is an object slot): getattr */
    int count;
    const char *names[MAX_FIELDS];
    PyObject *interned[MAX_FIELDS];
    Py_ssize_t offsets[MAX_FIELDS];
} Layout;

enum { E_ENABLED, E_OTHERS, E_ENTRIES, E_TENSORS, E_OUTPUTS };
static Layout eager_layout = {NULL, 5, {"enabled", "others", "entries", "tensors", "outputs"}, {0}, {0}};
enum { S_LOCK, S_OPEN, S_CAPTURE, S_WORKSPACE, S_QUEUED, S_DEVICE, S_EXECUTORS, S_CTX };
static Layout state_layout = {
    NULL, 8, {"lock", "open", "capture", "_workspace", "queued", "device", "executors", "_ctx"}, {0}, {0}};
enum { B_PTR, B_NBYTES };
static Layout block_layout = {NULL, 2, {"ptr", "nbytes"}, {0}, {0}};
enum { X_CHECKED };
static Layout executors_layout = {NULL, 1, {"checked"}, {0}, {0}};

static PyTypeObject *stream_type;
static PyObject *backends; /* pyaclnn.backends: its attribute "_active" */
static PyObject *backends_dict, *timeline_dict; /* (the two modules' __dict__, borrowed from them) */

static PyObject *s_c_form, *s_acquire, *s_release, *s_recording, *s_tls, *s_bound, *s_launch_blocking,
    *s_synchronize, *s_rest, *s_state, *s_name, *s_active;

/* The offset of type's object slot name, or -1 (with no error set) when it is not one. */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *d = PyObject_GetAttrString(type, name);
    if (d == NULL) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_TYPE(d) == &PyMemberDescr_Type && ((PyMemberDescrObject *)d)->d_member->type == Py_T_OBJECT_EX)
        offset = ((PyMemberDescrObject *)d)->d_member->offset;
    Py_DECREF(d);
    return offset;
}

/* Learn the layout of type (once: a layout keeps the first type it was learnt from). */
static void learn(Layout *layout, PyTypeObject *type) {
    if (layout->type != NULL)
        return;
    for (int i = 0; i < layout->count; i++) {
        layout->offsets[i] = slot_offset((PyObject *)type, layout->names[i]);
        if (layout->offsets[i] < 0)
            return;
    }
    Py_INCREF(type);
    layout->type = type;
}

/* obj's field i of layout (a new reference), or NULL with an error set. */
static inline PyObject *field(PyObject *obj, Layout *layout, int i) {
    if (Py_TYPE(obj) == layout->type) {
        PyObject *v = *(PyObject **)((char *)obj + layout->offsets[i]);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(obj, layout->interned[i]);
}

/* Set obj's field i of layout to value (a new reference taken), or -1 with an error set. */
static inline int set_field(PyObject *obj, Layout *layout, int i, PyObject *value) {
    if (Py_TYPE(obj) == layout->type) {
        Py_XSETREF(*(PyObject **)((char *)obj + layout->offsets[i]), value);
        return 0;
    }
    int r = PyObject_SetAttr(obj, layout->interned[i], value);
    Py_DECREF(value);
    return r;
}

/* obj.name where obj's own __dict__ holds it (an attribute __init__ set, with no descriptor of
 * the same name on the type): read from the dict, with no look-up along the type; else by
 * getattr. A new reference, or NULL with an error set. (Not for threading.local, whose
 * attributes are per thread.) */
static PyObject *own_attr(PyObject *obj, PyObject *name) {
    PyObject *dict = PyObject_GenericGetDict(obj, NULL);
    if (dict == NULL) {
        PyErr_Clear();
        return PyObject_GetAttr(obj, name);
    }
    PyObject *value = PyDict_GetItemWithError(dict, name);
    Py_XINCREF(value);
    Py_DECREF(dict);
    return value != NULL || PyErr_Occurred() ? value : PyObject_GetAttr(obj, name);
}

/* obj.name read from dict, obj's __dict__ (a module's, or one of own_attr's), else by getattr.
 * A new reference, or NULL with an error set. */
static PyObject *dict_attr(PyObject *dict, PyObject *obj, PyObject *name) {
    PyObject *value = dict == NULL ? NULL : PyDict_GetItemWithError(dict, name);
    if (value != NULL)
        return Py_NewRef(value);
    return PyErr_Occurred() ? NULL : PyObject_GetAttr(obj, name);
}

static int intern_layout(Layout *layout) {
    for (int i = 0; i < layout->count; i++) {
        layout->interned[i] = PyUnicode_InternFromString(layout->names[i]);
        if (layout->interned[i] == NULL)
            return -1;
    }
    return 0;
}

static int32_t call_phase1(u64 fn, Py_ssize_t n, const u64 *a, u64 *size, void **executor) {
    u64 s = (u64)(uintptr_t)size, e = (u64)(uintptr_t)executor;
    /* Phase 1 with its n arguments then its two out-parameters, each as a uint64_t. */
#define P(...) ((int32_t(*)(__VA_ARGS__))(uintptr_t)fn)
#define U u64
    switch (n) {
    case 0: return P(U, U)(s, e);
    case 1: return P(U, U, U)(a[0], s, e);
    case 2: return P(U, U, U, U)(a[0], a[1], s, e);
    case 3: return P(U, U, U, U, U)(a[0], a[1], a[2], s, e);
    case 4: return P(U, U, U, U, U, U)(a[0], a[1], a[2], a[3], s, e);
    case 5: return P(U, U, U, U, U, U, U)(a[0], a[1], a[2], a[3], a[4], s, e);
    case 6: return P(U, U, U, U, U, U, U, U)(a[0], a[1], a[2], a[3], a[4], a[5], s, e);
    case 7: return P(U, U, U, U, U, U, U, U, U)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], s, e);
    case 8: return P(U, U, U, U, U, U, U, U, U, U)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], s, e);
    }
    /* More: the call passes MAX_ARGS + 2 words, the out-parameters right after the n
     * arguments; the callee reads the words it declares, and the ones past them lie in
     * the caller's outgoing stack area, unread. */
    u64 w[MAX_ARGS + 2];
    memset(w, 0, sizeof w);
    memcpy(w, a, (size_t)n * sizeof(u64));
    w[n] = s;
    w[n + 1] = e;
#define U13 U, U, U, U, U, U, U, U, U, U, U, U, U
    return P(U13, U13)(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12], w[13],
                       w[14], w[15], w[16], w[17], w[18], w[19], w[20], w[21], w[22], w[23], w[24], w[25]);
#undef U13
#undef P
#undef U
}

/* A DeviceArray's slot (borrowed; NULL when unset). */
static inline PyObject *slot(PyObject *array, Py_ssize_t offset) {
    return *(PyObject **)((char *)array + offset);
}

static int call_method(PyObject *obj, PyObject *name) {
    PyObject *r = PyObject_CallMethodNoArgs(obj, name);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The stream's lock (a threading.RLock): acquire or release it by the methods of its type,
 * found once (no look-up per call), or by name for a lock of another type. */
static PyTypeObject *lock_type;
static PyObject *lock_acquire, *lock_release;

static int lock_call(PyObject *lock, PyObject *name, PyObject **method) {
    if (Py_TYPE(lock) != lock_type && lock_type == NULL) {
        PyObject *acquire = PyObject_GetAttr((PyObject *)Py_TYPE(lock), s_acquire);
        PyObject *release = acquire == NULL ? NULL : PyObject_GetAttr((PyObject *)Py_TYPE(lock), s_release);
        if (release == NULL) {
            Py_XDECREF(acquire);
            PyErr_Clear();
        } else {
            lock_acquire = acquire;
            lock_release = release;
            lock_type = (PyTypeObject *)Py_NewRef(Py_TYPE(lock));
        }
    }
    if (Py_TYPE(lock) != lock_type)
        return call_method(lock, name);
    PyObject *r = PyObject_Vectorcall(*method, &lock, 1, NULL);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static int call_bound(PyObject *method) {
    PyObject *r = PyObject_CallNoArgs(method);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* Whether v (a new reference, taken; NULL: an error is set) is true: 0 or 1, or -1. */
static int true_of(PyObject *v) {
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* v (a new reference, taken; NULL: an error is set) as a C integer >= 0, or -1 with an error. */
static long long size_of(PyObject *v) {
    if (v == NULL)
        return -1;
    long long r = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (r < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "a size or count is negative");
    return r;
}

/* writes_queued(stream, written): each written array (its base, for a view) still last
 * written on this stream gets the stream's count of queued work, under the order lock. */
static int writes_queued(PyObject *stream, PyObject *state, PyObject **written, int count) {
    /* Taken only when another thread holds it: this function keeps the GIL from start to end
     * (it runs no Python code and frees nothing but ints), so while the lock is free no
     * thread can be inside the section it guards, nor enter it, before this one is done. */
    PyObject *held = PyObject_CallNoArgs(order_locked);
    int locked = held == NULL ? -1 : PyObject_IsTrue(held);
    Py_XDECREF(held);
    if (locked < 0 || (locked && call_bound(order_acquire) < 0))
        return -1;
    int ok = -1;
    PyObject *queued = field(state, &state_layout, S_QUEUED);
    if (queued != NULL) {
        for (int i = 0; i < count; i++) {
            PyObject *array = written[i];
            PyObject *base = slot(array, o_base);
            if (base != NULL && base != Py_None) {
                if (Py_TYPE(base) != device_array_type)
                    goto out;
                array = base; /* the base keeps the streams of its views */
            }
            if (slot(array, o_stream) == stream) { /* (another stream's write may have come since) */
                Py_INCREF(queued);
                Py_XSETREF(*(PyObject **)((char *)array + o_written_at), queued);
            }
        }
        ok = 0;
    }
out:
    Py_XDECREF(queued);
    if (locked && call_bound(order_release) < 0)
        return -1;
    return ok;
}

/* Both phases of a record's C form on the stream of state, under its lock: 1 once queued
 * (or handled by rest), 0 when the stream closed or began a capture since (nothing done),
 * -1 with an error set. */
static int run(PyObject *state, PyObject *repeated, PyObject *form, PyObject *values, PyObject *tensors) {
    const u64 *words = (const u64 *)PyBytes_AS_STRING(form);
    u64 fn1 = words[0], fn2 = words[1], stream = words[2];
    Py_ssize_t n = (Py_ssize_t)words[3];
    const u64 *a = words + 4;
    if (n > MAX_ARGS || PyBytes_GET_SIZE(form) != (Py_ssize_t)((4 + n) * sizeof(u64))) {
        PyErr_SetString(PyExc_ValueError, "a record's C form has the wrong size");
        return -1;
    }
    PyObject *lock = field(state, &state_layout, S_LOCK);
    if (lock == NULL)
        return -1;
    if (lock_call(lock, s_acquire, &lock_acquire) < 0) {
        Py_DECREF(lock);
        return -1;
    }
    int result = -1;
    int open = true_of(field(state, &state_layout, S_OPEN));
    if (open < 0)
        goto out;
    PyObject *v = field(state, &state_layout, S_CAPTURE);
    if (v == NULL)
        goto out;
    int capturing = v != Py_None;
    Py_DECREF(v);
    if (!open || capturing) {
        result = 0;
        goto out;
    }
    u64 workspace = 0, capacity = 0;
    PyObject *block = field(state, &state_layout, S_WORKSPACE);
    if (block == NULL)
        goto out;
    if (block != Py_None) {
        learn(&block_layout, Py_TYPE(block));
        long long ptr = size_of(field(block, &block_layout, B_PTR));
        long long nbytes = ptr < 0 ? -1 : size_of(field(block, &block_layout, B_NBYTES));
        if (nbytes < 0) {
            Py_DECREF(block);
            goto out;
        }
        workspace = (u64)ptr;
        capacity = (u64)nbytes;
    }
    Py_DECREF(block);
    u64 size = 0;
    void *executor = NULL;
    int32_t status1, status2 = 0;
    int launched = 0;
    Py_BEGIN_ALLOW_THREADS
    status1 = call_phase1(fn1, n, a, &size, &executor);
    if (status1 == 0 && executor != NULL && size <= capacity) {
        void *buffer = size > 0 ? (void *)(uintptr_t)workspace : NULL;
        status2 = ((phase2_fn)(uintptr_t)fn2)(buffer, size, executor, (void *)(uintptr_t)stream);
        launched = 1;
    }
    Py_END_ALLOW_THREADS
    if (launched && status2 == 0) {
        long long queued = size_of(field(state, &state_layout, S_QUEUED)); /* once the runtime took it */
        if (queued < 0)
            goto out;
        PyObject *q = PyLong_FromLongLong(queued + 1);
        if (q == NULL || set_field(state, &state_layout, S_QUEUED, q) < 0)
            goto out;
        result = 1;
        goto out;
    }
    /* Everything else as the Python path meets it, still under the lock. */
    PyObject *r = PyObject_CallFunction(rest, "OOOOiiKK", state, repeated, values, tensors, (int)status1,
                                        (int)status2, (unsigned long long)size,
                                        (unsigned long long)(launched || status1 ? 0 : (uintptr_t)executor));
    if (r == NULL)
        goto out;
    Py_DECREF(r);
    result = 1;
out:;
    /* The lock goes back whatever happened; the error being raised, if any, is kept. */
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int released = lock_call(lock, s_release, &lock_release);
    Py_DECREF(lock);
    if (type != NULL) {
        if (released < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        return -1;
    }
    return released < 0 ? -1 : result;
}

/* The record the call takes, launched: 1 once launched, 0 when there is none to take or
 * it cannot be launched from here (*found: NULL, or the record and a list of the written
 * arrays, new references, for Python to launch), 2 when the stream closed or began a
 * capture since the look-up (nothing done), -1 with an error set. */
static int take(PyObject *entry, PyObject *values, PyObject *tensors, PyObject *stream, PyObject *state,
                PyObject **found) {
    *found = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(tensors);
    if (count > MAX_TENSORS)
        return 0;
    Py_ssize_t nvalues = PySequence_Fast_GET_SIZE(values);
    PyObject **items = PySequence_Fast_ITEMS(values);
    PyObject *parts[1 + 2 * MAX_TENSORS]; /* the key's items */
    PyObject *written[MAX_TENSORS];        /* borrowed: values holds them */
    int nparts = 0, nwritten = 0;
    parts[nparts++] = entry;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, i);
        Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(t, 0));
        if (position < 0 || position >= nvalues)
            return PyErr_Occurred() ? -1 : 0;
        int write = PyTuple_GET_ITEM(t, 1) == Py_True;
        PyObject *x = items[position];
        if (x == Py_None) {
            parts[nparts++] = Py_None;
            continue;
        }
        if (Py_TYPE(x) != device_array_type)
            return 0;
        /* As _find: described before, held by no graph, last written on this stream and,
         * when the call writes it, read by no other stream. */
        PyObject *last = slot(x, o_last_descriptor), *block = slot(x, o_block);
        if (last == NULL || !PyTuple_CheckExact(last) || PyTuple_GET_SIZE(last) != 3 || block == NULL ||
            slot(x, o_graphs) != Py_None || slot(x, o_stream) != stream ||
            (write && slot(x, o_readers) != Py_None))
            return 0;
        parts[nparts++] = block;
        parts[nparts++] = PyTuple_GET_ITEM(last, 2); /* its descriptor (format, block, descriptor) */
        if (write)
            written[nwritten++] = x;
    }
    /* Held before the key is allocated: a collection the allocation starts may run a finalizer
     * that gives an array another block or descriptor, dropping the ones read above. */
    for (int i = 0; i < nparts; i++)
        Py_INCREF(parts[i]);
    PyObject *key = PyTuple_New(nparts);
    if (key == NULL) {
        for (int i = 0; i < nparts; i++)
            Py_DECREF(parts[i]);
        return -1;
    }
    for (int i = 0; i < nparts; i++)
        PyTuple_SET_ITEM(key, i, parts[i]); /* (the references move to the key) */
    PyObject *executors = field(state, &state_layout, S_EXECUTORS);
    if (executors != NULL)
        learn(&executors_layout, Py_TYPE(executors));
    PyObject *records = executors == NULL ? NULL : field(executors, &executors_layout, X_CHECKED);
    Py_XDECREF(executors);
    if (records == NULL) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *repeated = PyDict_GetItemWithError(records, key);
    Py_XINCREF(repeated); /* another thread may drop it from records while the GIL is free */
    Py_DECREF(records);
    Py_DECREF(key);
    if (repeated == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int result = -1;
    PyObject *form = PyObject_GetAttr(repeated, s_c_form);
    if (form == NULL)
        goto done;
    if (!PyBytes_CheckExact(form)) {
        PyObject *list = PyList_New(nwritten);
        if (list != NULL) {
            for (int i = 0; i < nwritten; i++) {
                Py_INCREF(written[i]);
                PyList_SET_ITEM(list, i, written[i]);
            }
            *found = PyTuple_Pack(2, repeated, list);
            Py_DECREF(list);
            result = *found == NULL ? -1 : 0;
        }
        goto done;
    }
    int ran = run(state, repeated, form, values, tensors);
    if (ran == 1)
        result = writes_queued(stream, state, written, nwritten) < 0 ? -1 : 1;
    else
        result = ran < 0 ? -1 : 2;
done:
    Py_XDECREF(form);
    Py_DECREF(repeated);
    return result;
}

/* What eager.__call__ returns once the call was launched: its outputs. */
static PyObject *outputs_of(PyObject *eager, PyObject *values) {
    PyObject *outputs = field(eager, &eager_layout, E_OUTPUTS);
    if (outputs == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(outputs), nvalues = PySequence_Fast_GET_SIZE(values);
    PyObject **items = PySequence_Fast_ITEMS(values);
    PyObject *result = NULL;
    if (n == 0) {
        result = Py_None;
        Py_INCREF(result);
    } else if (n == 1) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(outputs, 0));
        if (i >= 0 && i < nvalues) {
            result = items[i];
            Py_INCREF(result);
        }
    } else {
        result = PyTuple_New(n);
        for (Py_ssize_t k = 0; result != NULL && k < n; k++) {
            Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(outputs, k));
            if (i < 0 || i >= nvalues) {
                Py_CLEAR(result);
                break;
            }
            Py_INCREF(items[i]);
            PyTuple_SET_ITEM(result, k, items[i]);
        }
    }
    Py_DECREF(outputs);
    if (result == NULL && !PyErr_Occurred())
        PyErr_SetString(PyExc_IndexError, "an output position outside the call's arguments");
    return result;
}

/* The entry of the call's non-tensor arguments (borrowed; NULL, no error, when none). */
static PyObject *entry_of(PyObject *eager, PyObject *values, int *failed) {
    *failed = 0;
    PyObject *others = field(eager, &eager_layout, E_OTHERS);
    if (others == NULL) {
        *failed = 1;
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(others), nvalues = PySequence_Fast_GET_SIZE(values);
    PyObject **items = PySequence_Fast_ITEMS(values);
    PyObject *key = PyTuple_New(2 * n); /* Eager._key: the values, then their types */
    for (Py_ssize_t k = 0; key != NULL && k < n; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(others, k));
        if (i < 0 || i >= nvalues) {
            Py_CLEAR(key);
            break;
        }
        PyObject *v = items[i], *t = (PyObject *)Py_TYPE(v);
        Py_INCREF(v);
        Py_INCREF(t);
        PyTuple_SET_ITEM(key, k, v);
        PyTuple_SET_ITEM(key, n + k, t);
    }
    Py_DECREF(others);
    if (key == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_IndexError, "an argument position outside the call's arguments");
        *failed = 1;
        return NULL;
    }
    PyObject *entries = field(eager, &eager_layout, E_ENTRIES);
    PyObject *entry = entries == NULL ? NULL : PyDict_GetItemWithError(entries, key);
    Py_XDECREF(entries); /* (eager holds the dict, the dict the entry: borrowed is safe here) */
    Py_DECREF(key);
    if (entry == NULL && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear(); /* an unhashable argument: never recorded */
        else
            *failed = 1;
    }
    return entry;
}

/* pyaclnn._launch.plain_stream(stream, None): 1 with *on, *state and *ctx (new references)
 * when the stream is plain, 0 when not, -1 with an error set. Inline for a Stream given (the
 * usual repeated call), by the Python function for the current stream (None). */
static int plain_of(PyObject *stream, PyObject **on, PyObject **state, PyObject **ctx) {
    *on = *state = *ctx = NULL;
    if (Py_TYPE(stream) == stream_type) {
        PyObject *active = dict_attr(backends_dict, backends, s_active);
        int chosen = active == NULL ? -1 : PyObject_IsTrue(active);
        if (chosen <= 0) { /* (none active yet: the Python function selects one) */
            Py_XDECREF(active);
            if (chosen < 0)
                return -1;
            goto python;
        }
        PyObject *st = own_attr(stream, s_state);
        PyObject *cx = st == NULL ? NULL : field(st, &state_layout, S_CTX);
        PyObject *name = cx == NULL ? NULL : own_attr(cx, s_name);
        int same = name == NULL ? -1 : PyObject_RichCompareBool(name, active, Py_EQ);
        Py_XDECREF(name);
        Py_DECREF(active);
        int open = same <= 0 ? same : true_of(field(st, &state_layout, S_OPEN));
        PyObject *capture = open <= 0 ? NULL : field(st, &state_layout, S_CAPTURE);
        int plain = open <= 0 ? open : capture == NULL ? -1 : capture == Py_None;
        Py_XDECREF(capture);
        if (plain <= 0) {
            Py_XDECREF(st);
            Py_XDECREF(cx);
            return plain;
        }
        *on = Py_NewRef(stream);
        *state = st;
        *ctx = cx;
        return 1;
    }
    if (stream != Py_None)
        return 0;
python:;
    PyObject *plain = PyObject_CallFunctionObjArgs(plain_stream, stream, Py_None, NULL);
    if (plain == NULL)
        return -1;
    if (!PyTuple_CheckExact(plain) || PyTuple_GET_SIZE(plain) != 3) {
        Py_DECREF(plain);
        return 0;
    }
    *on = Py_NewRef(PyTuple_GET_ITEM(plain, 0));
    *state = Py_NewRef(PyTuple_GET_ITEM(plain, 1));
    *ctx = Py_NewRef(PyTuple_GET_ITEM(plain, 2));
    Py_DECREF(plain);
    return 1;
}

/* call(eager, values, stream) -> the outputs | NOT_TAKEN: Eager.__call__ (see the top). */
static PyObject *call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "call() takes 3 arguments");
        return NULL;
    }
    if (device_array_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "call() before configure()");
        return NULL;
    }
    PyObject *eager = args[0], *values = args[1], *stream = args[2];
    if (!(PyTuple_CheckExact(values) || PyList_CheckExact(values))) {
        PyErr_SetString(PyExc_TypeError, "values must be a tuple or a list");
        return NULL;
    }
    learn(&eager_layout, Py_TYPE(eager));
    int enabled = true_of(field(eager, &eager_layout, E_ENABLED));
    if (enabled <= 0)
        return enabled < 0 ? NULL : Py_NewRef(not_taken);
    int failed;
    PyObject *entry = entry_of(eager, values, &failed);
    if (entry == NULL)
        return failed ? NULL : Py_NewRef(not_taken);
    Py_INCREF(entry);
    PyObject *result = NULL, *on = NULL, *state = NULL, *ctx = NULL, *tensors = NULL, *found = NULL;
    int recording = true_of(dict_attr(timeline_dict, timeline, s_recording));
    if (recording != 0) {
        result = recording < 0 ? NULL : Py_NewRef(not_taken);
        goto done;
    }
    int plain = plain_of(stream, &on, &state, &ctx);
    if (plain <= 0) {
        result = plain < 0 ? NULL : Py_NewRef(not_taken);
        goto done;
    }
    tensors = field(eager, &eager_layout, E_TENSORS);
    if (tensors == NULL)
        goto done;
    if (!PyTuple_CheckExact(tensors)) {
        PyErr_SetString(PyExc_TypeError, "eager.tensors must be a tuple");
        goto done;
    }
    /* A record is taken only with no device to bind (as _launch.eager). */
    PyObject *tls = own_attr(ctx, s_tls);
    PyObject *bound = tls == NULL ? NULL : PyObject_GetAttr(tls, s_bound);
    Py_XDECREF(tls);
    PyObject *device = bound == NULL ? NULL : field(state, &state_layout, S_DEVICE);
    int same = device == NULL ? -1 : PyObject_RichCompareBool(bound, device, Py_EQ);
    Py_XDECREF(bound);
    Py_XDECREF(device);
    if (same < 0)
        goto done;
    if (same) {
        int took = take(entry, values, tensors, on, state, &found);
        if (took < 0)
            goto done;
        if (took == 2) {
            result = Py_NewRef(not_taken);
            goto done;
        }
        if (took == 1) {
            int blocking = true_of(own_attr(ctx, s_launch_blocking));
            if (blocking < 0 || (blocking && call_method(on, s_synchronize) < 0))
                goto done;
            result = outputs_of(eager, values);
            goto done;
        }
    }
    /* Not taken here: the rest of the Python path, from where this one stopped. */
    result = PyObject_CallMethodObjArgs(eager, s_rest, values, on, state, ctx, entry, found ? found : Py_None,
                                        NULL);
done:
    Py_XDECREF(found);
    Py_XDECREF(tensors);
    Py_XDECREF(on);
    Py_XDECREF(state);
    Py_XDECREF(ctx);
    Py_DECREF(entry);
    return result;
}

static int intern(PyObject **slot_name, const char *name) {
    *slot_name = PyUnicode_InternFromString(name);
    return *slot_name == NULL ? -1 : 0;
}

/* configure(DeviceArray, StreamState, Stream, order_lock, rest, not_taken, timeline,
 * backends, plain_stream): once, before the first call(). */
static PyObject *configure(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *type, *state_type, *stream_class, *lock, *callback, *sentinel, *module, *backends_module, *plain;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOOOO", &PyType_Type, &type, &PyType_Type, &state_type, &PyType_Type,
                          &stream_class, &lock, &callback, &sentinel, &module, &backends_module, &plain))
        return NULL;
    Py_ssize_t offsets[7];
    const char *names[7] = {"_last_descriptor", "_graphs", "_stream", "_readers", "_block", "_base", "_written_at"};
    for (int i = 0; i < 7; i++) {
        offsets[i] = slot_offset(type, names[i]);
        if (offsets[i] < 0)
            return PyErr_Format(PyExc_TypeError, "DeviceArray.%s is not an object slot", names[i]);
    }
    learn(&state_layout, (PyTypeObject *)state_type);
    if (state_layout.type == NULL)
        return PyErr_Format(PyExc_TypeError, "a field of StreamState is not an object slot");
    PyObject *acquire = PyObject_GetAttr(lock, s_acquire);
    PyObject *release = acquire == NULL ? NULL : PyObject_GetAttr(lock, s_release);
    PyObject *locked = release == NULL ? NULL : PyObject_GetAttrString(lock, "locked");
    if (locked == NULL) {
        Py_XDECREF(acquire);
        Py_XDECREF(release);
        return NULL;
    }
    o_last_descriptor = offsets[0];
    o_graphs = offsets[1];
    o_stream = offsets[2];
    o_readers = offsets[3];
    o_block = offsets[4];
    o_base = offsets[5];
    o_written_at = offsets[6];
    Py_XSETREF(order_acquire, acquire);
    Py_XSETREF(order_release, release);
    Py_XSETREF(order_locked, locked);
    Py_XSETREF(rest, Py_NewRef(callback));
    Py_XSETREF(not_taken, Py_NewRef(sentinel));
    Py_XSETREF(timeline, Py_NewRef(module));
    Py_XSETREF(backends, Py_NewRef(backends_module));
    timeline_dict = PyModule_Check(timeline) ? PyModule_GetDict(timeline) : NULL;
    backends_dict = PyModule_Check(backends) ? PyModule_GetDict(backends) : NULL;
    Py_XSETREF(plain_stream, Py_NewRef(plain));
    Py_INCREF(stream_class);
    Py_XSETREF(stream_type, (PyTypeObject *)stream_class);
    Py_INCREF(type);
    Py_XSETREF(device_array_type, (PyTypeObject *)type);
    Py_RETURN_NONE;
}

static PyObject *abi(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong(PYACLNN_REPEAT_ABI);
}

static PyMethodDef methods[] = {
    {"call", (PyCFunction)(void (*)(void))call, METH_FASTCALL, "call(eager, values, stream): Eager.__call__ in C."},
    {"configure", configure, METH_VARARGS,
     "configure(DeviceArray, StreamState, Stream, order_lock, rest, not_taken, timeline, backends, plain_stream)"},
    {"abi", abi, METH_NOARGS, "The interface version of this build."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pyaclnn_repeat", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pyaclnn_repeat(void) {
    if (intern(&s_c_form, "c_form") || intern(&s_acquire, "acquire") || intern(&s_release, "release") ||
        intern(&s_recording, "recording") || intern(&s_tls, "tls") || intern(&s_bound, "bound") ||
        intern(&s_launch_blocking, "launch_blocking") || intern(&s_synchronize, "synchronize") ||
        intern(&s_rest, "rest") || intern(&s_state, "_state") || intern(&s_name, "name") ||
        intern(&s_active, "_active") || intern_layout(&eager_layout) || intern_layout(&state_layout) ||
        intern_layout(&block_layout) || intern_layout(&executors_layout))
        return NULL;
    return PyModule_Create(&module);
}
