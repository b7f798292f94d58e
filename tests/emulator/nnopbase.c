/* Emulated aclnn meta API (libnnopbase.so): descriptors, arrays, executors.
 *
 * Every handle is registered with the runtime library, so a NULL, foreign or
 * already destroyed handle gives a status (161001 NULL, 161002 unknown)
 * instead of a crash. Descriptors own copies of everything they were given;
 * lists hold (and own) the handles they were given.
 * aclCreateTensor, unlike CANN, verifies that the described storage lies in
 * one live aclrtMalloc allocation and that the view fits in the storage.
 */
#include "emu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 0 if a dims argument is usable, else -1 with a message. */
static int check_dims(const char *api, const char *arg, const int64_t *dims, uint64_t n)
{
    if (n > EMU_MAX_DIMS) {
        pyaclnnEmuSetError("%s: %s has %llu dimensions; at most 8 are supported", api, arg,
                           (unsigned long long)n);
        return -1;
    }
    if (n > 0 && dims == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL but its length is %llu", api, arg, (unsigned long long)n);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        if (dims[i] < 0) {
            pyaclnnEmuSetError("%s: %s[%llu] = %lld is negative", api, arg, (unsigned long long)i,
                               (long long)dims[i]);
            return -1;
        }
    }
    return 0;
}

/* Number of elements of a shape, or -1 on overflow. */
static int64_t numel(const int64_t *dims, int n)
{
    int64_t count = 1;
    for (int i = 0; i < n; i++) {
        if (__builtin_mul_overflow(count, dims[i], &count)) {
            return -1;
        }
    }
    return count;
}

/* NULL if the storage of `t` at `addr` is usable, else the reason (printf
 * format with one %p). */
static const char *check_storage_addr(const aclTensor *t, const void *addr)
{
    int64_t elems = numel(t->storage_dims, t->storage_ndim);
    int64_t bytes;
    if (elems < 0 || __builtin_mul_overflow(elems, (int64_t)aclDataTypeSize(t->dtype), &bytes)) {
        return "storage size overflows (data %p)";
    }
    if (bytes > 0 && !pyaclnnEmuDeviceRange(addr, (size_t)bytes)) {
        return "data %p with the storage size described is not inside one live aclrtMalloc allocation";
    }
    return NULL;
}

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims,
                           uint64_t storageDimsNum, void *tensorData)
{
    static const char api[] = "aclCreateTensor";
    if (check_dims(api, "viewDims", viewDims, viewDimsNum) != 0
        || check_dims(api, "storageDims", storageDims, storageDimsNum) != 0) {
        return NULL;
    }
    size_t itemsize = aclDataTypeSize(dataType);
    if (itemsize == 0) {
        pyaclnnEmuSetError("%s: dataType %d has no element size (not a supported aclDataType)", api,
                           (int)dataType);
        return NULL;
    }
    if (offset < 0) {
        pyaclnnEmuSetError("%s: offset %lld is negative", api, (long long)offset);
        return NULL;
    }
    if (stride != NULL) {
        for (uint64_t i = 0; i < viewDimsNum; i++) {
            if (stride[i] < 0) {
                pyaclnnEmuSetError("%s: stride[%llu] = %lld is negative", api, (unsigned long long)i,
                                   (long long)stride[i]);
                return NULL;
            }
        }
    }
    aclTensor *t = calloc(1, sizeof *t);
    if (t == NULL) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        return NULL;
    }
    t->ndim = (int)viewDimsNum;
    t->dtype = dataType;
    t->format = format;
    t->offset = offset;
    t->storage_ndim = (int)storageDimsNum;
    t->data = tensorData;
    int64_t contiguous = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        t->dims[i] = viewDims[i];
        t->strides[i] = stride != NULL ? stride[i] : contiguous;
        /* Saturate: an element count that overflows is rejected just below. */
        if (__builtin_mul_overflow(contiguous, viewDims[i] > 0 ? viewDims[i] : 1, &contiguous)) {
            contiguous = INT64_MAX;
        }
    }
    for (int i = 0; i < t->storage_ndim; i++) {
        t->storage_dims[i] = storageDims[i];
    }
    int64_t view_elems = numel(t->dims, t->ndim);
    int64_t storage_elems = numel(t->storage_dims, t->storage_ndim);
    if (view_elems < 0 || storage_elems < 0) {
        pyaclnnEmuSetError("%s: the element count of viewDims or storageDims overflows", api);
        pyaclnnEmuFree(t);
        return NULL;
    }
    if (view_elems > 0) {
        /* The last element the view reaches must exist in the storage. */
        int64_t last = offset;
        for (int i = 0; i < t->ndim; i++) {
            int64_t step;
            if (__builtin_mul_overflow(t->dims[i] - 1, t->strides[i], &step)
                || __builtin_add_overflow(last, step, &last)) {
                last = INT64_MAX;
                break;
            }
        }
        if (last >= storage_elems) {
            pyaclnnEmuSetError("%s: the view (offset %lld, shape and strides given) reaches element %lld but "
                               "storageDims hold only %lld elements",
                               api, (long long)offset, (long long)last, (long long)storage_elems);
            pyaclnnEmuFree(t);
            return NULL;
        }
    }
    const char *err = check_storage_addr(t, tensorData);
    if (err != NULL) {
        char reason[256];
        snprintf(reason, sizeof reason, err, tensorData);
        pyaclnnEmuSetError("%s: tensorData: %s", api, reason);
        pyaclnnEmuFree(t);
        return NULL;
    }
    if (pyaclnnEmuHandleAdd(EMU_TENSOR, t) != 0) {
        pyaclnnEmuSetError("%s: out of host memory", api);
        pyaclnnEmuFree(t);
        return NULL;
    }
    return t;
}

/* 0 if `handle` is a live object of `kind`, else the status, with a message. */
static aclnnStatus check_live(const char *api, const char *arg, int kind, const void *handle)
{
    if (handle == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, arg);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleIsLive(kind, handle)) {
        pyaclnnEmuSetError("%s: %s %p is not a live handle of this kind (destroyed, or never created)", api,
                           arg, handle);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

/* Unregister and report; the caller frees on success. */
static aclnnStatus destroy_handle(const char *api, const char *arg, int kind, const void *handle)
{
    if (handle == NULL) {
        pyaclnnEmuSetError("%s: %s is NULL", api, arg);
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleRemove(kind, handle)) {
        pyaclnnEmuSetError("%s: %s %p is not live (destroyed twice, or never created)", api, arg, handle);
        return ACLNN_ERR_PARAM_INVALID;
    }
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor)
{
    aclnnStatus rc = destroy_handle("aclDestroyTensor", "tensor", EMU_TENSOR, tensor);
    if (rc == ACLNN_SUCCESS) {
        pyaclnnEmuFree((void *)tensor);
    }
    return rc;
}

aclScalar *aclCreateScalar(void *value, aclDataType dataType)
{
    size_t size = aclDataTypeSize(dataType);
    if (value == NULL || size == 0 || size > sizeof(((aclScalar *)0)->value)) {
        pyaclnnEmuSetError("aclCreateScalar: %s", value == NULL ? "value is NULL"
                                                                : "dataType has no supported element size");
        return NULL;
    }
    aclScalar *s = calloc(1, sizeof *s);
    if (s == NULL || pyaclnnEmuHandleAdd(EMU_SCALAR, s) != 0) {
        pyaclnnEmuFree(s);
        pyaclnnEmuSetError("aclCreateScalar: out of host memory");
        return NULL;
    }
    s->dtype = dataType;
    memcpy(s->value, value, size);
    return s;
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar)
{
    aclnnStatus rc = destroy_handle("aclDestroyScalar", "scalar", EMU_SCALAR, scalar);
    if (rc == ACLNN_SUCCESS) {
        pyaclnnEmuFree((void *)scalar);
    }
    return rc;
}

/* Shared body of the three array constructors: copies size * elem bytes. */
static void *create_array(const char *api, int kind, const void *value, uint64_t size, size_t elem,
                          size_t header)
{
    if (size > 0 && value == NULL) {
        pyaclnnEmuSetError("%s: value is NULL but size is %llu", api, (unsigned long long)size);
        return NULL;
    }
    if (size > ((uint64_t)1 << 32)) {
        pyaclnnEmuSetError("%s: size %llu is unreasonably large", api, (unsigned long long)size);
        return NULL;
    }
    /* Header (size + pointer) and the copied values in one block. */
    char *block = calloc(1, header + (size_t)size * elem + 1);
    if (block == NULL || pyaclnnEmuHandleAdd(kind, block) != 0) {
        pyaclnnEmuFree(block);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return NULL;
    }
    if (size > 0) {
        memcpy(block + header, value, (size_t)size * elem);
    }
    return block;
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size)
{
    aclIntArray *a = create_array("aclCreateIntArray", EMU_INT_ARRAY, value, size, sizeof(int64_t),
                                  sizeof(aclIntArray));
    if (a != NULL) {
        a->size = size;
        a->values = (int64_t *)(a + 1);
    }
    return a;
}

aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size)
{
    aclFloatArray *a = create_array("aclCreateFloatArray", EMU_FLOAT_ARRAY, value, size, sizeof(float),
                                    sizeof(aclFloatArray));
    if (a != NULL) {
        a->size = size;
        a->values = (float *)(a + 1);
    }
    return a;
}

aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size)
{
    aclBoolArray *a = create_array("aclCreateBoolArray", EMU_BOOL_ARRAY, value, size, sizeof(bool),
                                   sizeof(aclBoolArray));
    if (a != NULL) {
        a->size = size;
        a->values = (bool *)(a + 1);
    }
    return a;
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array)
{
    aclnnStatus rc = destroy_handle("aclDestroyIntArray", "array", EMU_INT_ARRAY, array);
    if (rc == ACLNN_SUCCESS) {
        pyaclnnEmuFree((void *)array);
    }
    return rc;
}

aclnnStatus aclDestroyFloatArray(const aclFloatArray *array)
{
    aclnnStatus rc = destroy_handle("aclDestroyFloatArray", "array", EMU_FLOAT_ARRAY, array);
    if (rc == ACLNN_SUCCESS) {
        pyaclnnEmuFree((void *)array);
    }
    return rc;
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray *array)
{
    aclnnStatus rc = destroy_handle("aclDestroyBoolArray", "array", EMU_BOOL_ARRAY, array);
    if (rc == ACLNN_SUCCESS) {
        pyaclnnEmuFree((void *)array);
    }
    return rc;
}

/* ---- lists ---------------------------------------------------------------
 * A list keeps the handles it was given (no copies of the tensors or
 * scalars) and owns them: CANN's documentation of aclDestroyTensorList and
 * aclDestroyScalarList says the elements are not to be released again, so
 * destroying the list destroys them. */

/* Shared body of the two list constructors: every element a live handle. */
static void *create_list(const char *api, int list_kind, int elem_kind, const char *elem_name,
                         const void *const *value, uint64_t size)
{
    if (size > 0 && value == NULL) {
        pyaclnnEmuSetError("%s: value is NULL but size is %llu", api, (unsigned long long)size);
        return NULL;
    }
    if (size > ((uint64_t)1 << 24)) {
        pyaclnnEmuSetError("%s: size %llu is unreasonably large", api, (unsigned long long)size);
        return NULL;
    }
    for (uint64_t i = 0; i < size; i++) {
        if (value[i] == NULL) {
            pyaclnnEmuSetError("%s: value[%llu] is NULL; expected an %s", api, (unsigned long long)i, elem_name);
            return NULL;
        }
        if (!pyaclnnEmuHandleIsLive(elem_kind, value[i])) {
            pyaclnnEmuSetError("%s: value[%llu] %p is not a live %s (destroyed, or never created)", api,
                               (unsigned long long)i, value[i], elem_name);
            return NULL;
        }
        for (uint64_t j = 0; j < i; j++) {
            if (value[j] == value[i]) {
                /* The list owns its elements: one handle twice would be destroyed twice. */
                pyaclnnEmuSetError("%s: value[%llu] and value[%llu] are the same %s; a list owns its elements, "
                                   "so each may appear once",
                                   api, (unsigned long long)j, (unsigned long long)i, elem_name);
                return NULL;
            }
        }
    }
    /* Header (size + pointer) and the copied handle pointers in one block. */
    char *block = calloc(1, sizeof(aclTensorList) + (size_t)size * sizeof(void *) + 1);
    if (block == NULL || pyaclnnEmuHandleAdd(list_kind, block) != 0) {
        pyaclnnEmuFree(block);
        pyaclnnEmuSetError("%s: out of host memory", api);
        return NULL;
    }
    if (size > 0) {
        memcpy(block + sizeof(aclTensorList), value, (size_t)size * sizeof(void *));
    }
    return block;
}

aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size)
{
    aclTensorList *l = create_list("aclCreateTensorList", EMU_TENSOR_LIST, EMU_TENSOR, "aclTensor",
                                   (const void *const *)value, size);
    if (l != NULL) {
        l->size = size;
        l->values = (const aclTensor **)(l + 1);
    }
    return l;
}

aclScalarList *aclCreateScalarList(const aclScalar *const *value, uint64_t size)
{
    aclScalarList *l = create_list("aclCreateScalarList", EMU_SCALAR_LIST, EMU_SCALAR, "aclScalar",
                                   (const void *const *)value, size);
    if (l != NULL) {
        l->size = size;
        l->values = (const aclScalar **)(l + 1);
    }
    return l;
}

/* Destroy a list and the elements still live. An element destroyed on its
 * own before (which CANN would free twice) gives 161002 naming it; the list
 * and the other elements are destroyed all the same. */
static aclnnStatus destroy_list(const char *api, int list_kind, int elem_kind, const void *list, uint64_t size,
                                const void *const *values)
{
    aclnnStatus rc = destroy_handle(api, "array", list_kind, list);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    for (uint64_t i = 0; i < size; i++) {
        if (pyaclnnEmuHandleRemove(elem_kind, values[i])) {
            pyaclnnEmuFree((void *)values[i]);
        } else if (rc == ACLNN_SUCCESS) {
            pyaclnnEmuSetError("%s: element %llu (%p) of array was already destroyed; the list owns its elements "
                               "(destroy the list only)",
                               api, (unsigned long long)i, values[i]);
            rc = ACLNN_ERR_PARAM_INVALID;
        }
    }
    pyaclnnEmuFree((void *)list);
    return rc;
}

aclnnStatus aclDestroyTensorList(const aclTensorList *array)
{
    if (array == NULL || !pyaclnnEmuHandleIsLive(EMU_TENSOR_LIST, array)) {
        return destroy_handle("aclDestroyTensorList", "array", EMU_TENSOR_LIST, array);
    }
    return destroy_list("aclDestroyTensorList", EMU_TENSOR_LIST, EMU_TENSOR, array, array->size,
                        (const void *const *)array->values);
}

aclnnStatus aclDestroyScalarList(const aclScalarList *array)
{
    if (array == NULL || !pyaclnnEmuHandleIsLive(EMU_SCALAR_LIST, array)) {
        return destroy_handle("aclDestroyScalarList", "array", EMU_SCALAR_LIST, array);
    }
    return destroy_list("aclDestroyScalarList", EMU_SCALAR_LIST, EMU_SCALAR, array, array->size,
                        (const void *const *)array->values);
}

#define GETTER_PROLOGUE(api, kind, handle, out)                                                              \
    aclnnStatus rc_ = check_live(api, #handle, kind, handle);                                                \
    if (rc_ != ACLNN_SUCCESS) {                                                                              \
        return rc_;                                                                                          \
    }                                                                                                        \
    if ((out) == NULL) {                                                                                     \
        pyaclnnEmuSetError("%s: %s is NULL", api, #out);                                                     \
        return ACLNN_ERR_PARAM_NULLPTR;                                                                      \
    }

aclnnStatus aclGetViewOffset(const aclTensor *tensor, int64_t *offset)
{
    GETTER_PROLOGUE("aclGetViewOffset", EMU_TENSOR, tensor, offset)
    *offset = tensor->offset;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetFormat(const aclTensor *tensor, aclFormat *format)
{
    GETTER_PROLOGUE("aclGetFormat", EMU_TENSOR, tensor, format)
    *format = tensor->format;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetDataType(const aclTensor *tensor, aclDataType *dataType)
{
    GETTER_PROLOGUE("aclGetDataType", EMU_TENSOR, tensor, dataType)
    *dataType = tensor->dtype;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetIntArraySize(const aclIntArray *array, uint64_t *size)
{
    GETTER_PROLOGUE("aclGetIntArraySize", EMU_INT_ARRAY, array, size)
    *size = array->size;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetBoolArraySize(const aclBoolArray *array, uint64_t *size)
{
    GETTER_PROLOGUE("aclGetBoolArraySize", EMU_BOOL_ARRAY, array, size)
    *size = array->size;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetFloatArraySize(const aclFloatArray *array, uint64_t *size)
{
    GETTER_PROLOGUE("aclGetFloatArraySize", EMU_FLOAT_ARRAY, array, size)
    *size = array->size;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetTensorListSize(const aclTensorList *tensorList, uint64_t *size)
{
    GETTER_PROLOGUE("aclGetTensorListSize", EMU_TENSOR_LIST, tensorList, size)
    *size = tensorList->size;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetScalarListSize(const aclScalarList *scalarList, uint64_t *size)
{
    GETTER_PROLOGUE("aclGetScalarListSize", EMU_SCALAR_LIST, scalarList, size)
    *size = scalarList->size;
    return ACLNN_SUCCESS;
}

aclnnStatus aclGetRawTensorAddr(const aclTensor *tensor, void **addr)
{
    GETTER_PROLOGUE("aclGetRawTensorAddr", EMU_TENSOR, tensor, addr)
    *addr = tensor->data;
    return ACLNN_SUCCESS;
}

aclnnStatus aclSetRawTensorAddr(aclTensor *tensor, void *addr)
{
    aclnnStatus rc = check_live("aclSetRawTensorAddr", "tensor", EMU_TENSOR, tensor);
    if (rc != ACLNN_SUCCESS) {
        return rc;
    }
    const char *err = check_storage_addr(tensor, addr);
    if (err != NULL) {
        char reason[256];
        snprintf(reason, sizeof reason, err, addr);
        pyaclnnEmuSetError("aclSetRawTensorAddr: addr: %s", reason);
        return ACLNN_ERR_PARAM_INVALID;
    }
    tensor->data = addr;
    return ACLNN_SUCCESS;
}

/* Executors: the op library creates and registers them; a repeatable one is
 * marked persistent so that phase 2 leaves it alive for the caller. */
aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor)
{
    if (executor == NULL) {
        pyaclnnEmuSetError("aclSetAclOpExecutorRepeatable: executor is NULL");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleSetPersistent(EMU_EXECUTOR, executor)) {
        pyaclnnEmuSetError("aclSetAclOpExecutorRepeatable: executor %p is not live (already consumed by its "
                           "second phase, destroyed, or never created)",
                           (void *)executor);
        return ACLNN_ERR_INNER_NULLPTR;
    }
    return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor)
{
    if (executor == NULL) {
        pyaclnnEmuSetError("aclDestroyAclOpExecutor: executor is NULL");
        return ACLNN_ERR_PARAM_NULLPTR;
    }
    if (!pyaclnnEmuHandleRemove(EMU_EXECUTOR, executor)) {
        pyaclnnEmuSetError("aclDestroyAclOpExecutor: executor %p is not live (a non-repeatable executor is "
                           "freed by its second phase; destroyed twice; or never created)",
                           (void *)executor);
        return ACLNN_ERR_INNER_NULLPTR;
    }
    /* Freed now, or by the last queued launch of it (then a hazard). */
    pyaclnnEmuExecutorDispose(executor, "aclDestroyAclOpExecutor");
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnInit(const char *configPath)
{
    (void)configPath;
    return ACLNN_SUCCESS;
}

aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }
