/* Emulator-only introspection, exported by the host emulator of the CANN ABI
 * in tests/emulator (from its libascendcl.so). Real CANN has no such symbol;
 * pyaclnn looks it up lazily and only in tests.
 *
 * pyaclnnEmuLiveCounts fills counts[0..n) with the numbers of live
 * device allocations, host allocations, tensors, int arrays, bool arrays,
 * executors, streams, host registrations (aclrtHostRegister), graphs
 * (aclmdlRI, from aclmdlRICaptureBegin until aclmdlRIDestroy), scalars,
 * float arrays, tensor lists and scalar lists, in that order (at most 13),
 * and returns how many it wrote.
 */

int pyaclnnEmuLiveCounts(int64_t *counts, int n);

/* pyaclnnEmuHazardCount returns how many hazards the emulator has seen since
 * the process started: memory freed while queued work still uses it, a
 * stream destroyed with work pending, an executor destroyed while a queued
 * launch needs it, work on a stream of another device. Each one is also
 * printed to stderr when it happens.
 */

int64_t pyaclnnEmuHazardCount(void);

/* pyaclnnEmuDeviceLiveCounts is pyaclnnEmuLiveCounts restricted to one
 * emulated device (PYACLNN_EMU_DEVICES): the allocations made while it was
 * the calling thread's current device and the streams created on it;
 * tensors, arrays and executors are global. Returns 0 for a bad device.
 */

int pyaclnnEmuDeviceLiveCounts(int32_t device, int64_t *counts, int n);
