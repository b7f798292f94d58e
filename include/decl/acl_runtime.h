/* ACL runtime calls (libascendcl.so, or libacl_rt.so on CANN >= 8.5).
 * Prototypes as CANN's acl/acl_rt.h declares them (8.1.RC1 and current), checked
 * against hicann/runtime include/external/acl/acl_rt.h (events ~l.1703-1810,
 * aclrtStreamWaitEvent ~l.2872). The aclmdlRI* stream-capture calls are declared as
 * CANN 8.1.RC1's acl/acl_mdl.h declares them (current CANN moves them to acl/acl_rt.h, same
 * prototypes); libascendcl.so exports them (libacl_rt.so on CANN >= 8.5). Read by cffi's
 * cdef() and by the C/C++ wrapper include/acl/acl.h.
 */

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclFinalizeReference(uint64_t *refCount);
const char *aclGetRecentErrMsg(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtGetDevice(int32_t *deviceId);
aclError aclrtSynchronizeDevice(void);
aclError aclrtGetDeviceCount(uint32_t *count);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag);
aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
aclError aclrtCreateEvent(aclrtEvent *event);
aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
aclError aclrtDestroyEvent(aclrtEvent event);
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status);
aclError aclrtSynchronizeEvent(aclrtEvent event);
aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent);
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMallocHost(void **hostPtr, size_t size);
aclError aclrtFreeHost(void *hostPtr);
aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type, void **devPtr);
aclError aclrtHostUnregister(void *ptr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind, aclrtStream stream);
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream);
aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);
aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value);
aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value);
aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value);
aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value);
aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion);
const char *aclrtGetSocName(void);
size_t aclDataTypeSize(aclDataType dataType);
aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI);
aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI);
aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode);
aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream);
aclError aclmdlRIDestroy(aclmdlRI modelRI);
