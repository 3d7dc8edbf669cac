/*===- runtime.h - C API of the fsdp-opt device runtime ---------*- C -*-===//
//
// The C interface of libfsdp_runtime, a small hardware abstraction layer in
// the manner of IREE's HAL (runtime/src/iree/hal): the schedule interpreter
// and compiled steps call only this header and fsdp/kernels.h, and a driver
// (runtime/docs/drivers.md) implements it for one kind of device.
//
//   process    fsdp_init / fsdp_finalize (MPI), rank, world size, local rank,
//              the all-ranks abort, MPI progress mode, per-op profile
//   device     fsdp_device_create("cpu" | "cuda" | "cuda:N"): memory
//              (device pointers), a compute and a communication stream,
//              statistics (the allocator's own high-water mark included)
//   event      the completion of work on a stream (a collective's start
//              returns one); fsdp_wait makes the compute stream wait on it
//   channel    a process group as an object (world, then fsdp_channel_split
//              for the shard and replicate groups of a grid): MPI
//              communicators (cpu) or NCCL communicators (cuda)
//   collective all-gather, reduce-scatter, all-reduce over a channel, started
//              on the communication stream
//
// Pointers handed to devices, streams, channels and kernels are device
// pointers (host memory for "cpu", CUDA device memory for "cuda") obtained
// from fsdp_device_alloc, or offsets into such an allocation. Host data moves
// in and out with fsdp_memcpy.
//
// Errors: every function returns FSDP_OK or an fsdp_status and sets a
// thread-local message readable with fsdp_last_error(). No C++ exception
// crosses this interface. A data error inside a kernel (a label out of range)
// is FSDP_ERR_DATA: reported by the kernel call on "cpu"; on "cuda" (kernels
// run asynchronously) by the next fsdp_stream_synchronize of that device.
//
// Without an initialised MPI (neither fsdp_init nor the host program called
// MPI_Init) the process is rank 0 of a world of size 1 and a channel's
// collectives are local copies: unit tests run steps in-process this way.
//
//===----------------------------------------------------------------------===*/
#ifndef FSDP_RUNTIME_H
#define FSDP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
typedef enum fsdp_status {
  FSDP_OK = 0,
  FSDP_ERR_MPI = 1,        /* an MPI or NCCL call failed */
  FSDP_ERR_INVALID = 2,    /* a bad argument (null pointer, size, dtype) */
  FSDP_ERR_NOMEM = 3,      /* an allocation failed */
  FSDP_ERR_DATA = 4,       /* bad data in a kernel (an index out of range) */
  FSDP_ERR_DEVICE = 5,     /* no such device, no driver, a device call failed */
  FSDP_ERR_UNSUPPORTED = 6 /* the driver has no such kernel or dtype */
} fsdp_status;

/* Element types. FSDP_BF16 and FSDP_F16 are 2-byte floats (bfloat16, IEEE
 * binary16; fsdp/Half.h): kernels on them compute in f32 and round results
 * to nearest even; all-gather moves them as 2-byte elements; reduce-scatter
 * and all-reduce add them with f32 arithmetic and round each sum. */
typedef enum fsdp_dtype {
  FSDP_F32 = 0,
  FSDP_F64 = 1,
  FSDP_I32 = 2,
  FSDP_I64 = 3,
  FSDP_BF16 = 4,
  FSDP_F16 = 5
} fsdp_dtype;

/* Reduction of reduce-scatter and all-reduce. */
typedef enum fsdp_reduce_op {
  FSDP_REDUCE_SUM = 0,
  FSDP_REDUCE_AVG = 1 /* the sum divided by the channel's size (floats only;
                         bf16/f16: the sum is widened, divided in f32 and
                         rounded once) */
} fsdp_reduce_op;

/* Kinds of collectives, for the per-kind byte counters. */
typedef enum fsdp_collective {
  FSDP_COLL_ALL_GATHER = 0,
  FSDP_COLL_REDUCE_SCATTER = 1,
  FSDP_COLL_ALL_REDUCE = 2
} fsdp_collective;

/*===--- Process --------------------------------------------------------===*/

/* How in-flight MPI collectives progress while the caller computes (the cpu
 * driver and the cuda driver's MPI channels; runtime/docs/schedule-format.md,
 * "Runtime decisions"). Open MPI's non-blocking collectives (libnbc over
 * ob1/vader) advance round by round only inside MPI calls on the calling
 * process, so someone must call MPI while the kernels run. */
typedef enum fsdp_progress {
  FSDP_PROGRESS_NONE = 0,  /* only inside fsdp_wait */
  FSDP_PROGRESS_TEST = 1,  /* the caller calls fsdp_event_query between
                              kernels (the schedule interpreter does, after
                              every instruction) */
  FSDP_PROGRESS_THREAD = 2 /* a progress thread tests every in-flight MPI
                              request with an exponential back-off
                              (fsdp_set_progress_interval); MPI is
                              initialised with MPI_THREAD_MULTIPLE */
} fsdp_progress;

/* Selects the progress mode (default FSDP_PROGRESS_TEST). Call before
 * fsdp_init for FSDP_PROGRESS_THREAD, so that fsdp_init asks for
 * MPI_THREAD_MULTIPLE; after MPI is initialised, FSDP_PROGRESS_THREAD fails
 * with FSDP_ERR_MPI unless MPI provides it. Leaving thread mode stops the
 * thread (in-flight requests stay valid). Never changes results. */
int fsdp_set_progress(fsdp_progress mode);
fsdp_progress fsdp_get_progress(void);
/* "none", "test" or "thread"; fsdp_parse_progress reads those names
 * (-1 for anything else). */
const char *fsdp_progress_name(fsdp_progress mode);
int fsdp_parse_progress(const char *name);
/* The progress thread's back-off: `min_seconds` between rounds after a
 * request starts or completes, doubling to `max_seconds` while nothing
 * completes (defaults 2e-5 and 1e-3); 0 < min <= max <= 10. */
int fsdp_set_progress_interval(double min_seconds, double max_seconds);

/* Initialises MPI (MPI_Init, or MPI_Init_thread(MPI_THREAD_MULTIPLE) in
 * FSDP_PROGRESS_THREAD mode) unless it is already initialised, and sets
 * MPI_ERRORS_RETURN on MPI_COMM_WORLD. argc/argv may be NULL. */
int fsdp_init(int *argc, char ***argv);
/* Finalises MPI if fsdp_init initialised it. Devices and channels must be
 * destroyed first. */
int fsdp_finalize(void);
/* Rank and size of MPI_COMM_WORLD (0 and 1 without MPI). */
int fsdp_rank(void);
int fsdp_world_size(void);
/* Index of this process among the ranks on its node (MPI_Comm_split_type
 * MPI_COMM_TYPE_SHARED; 0 without MPI): device "cuda" means GPU
 * local_rank mod (number of GPUs). */
int fsdp_local_rank(void);
/* The message of the last error on this thread ("" if none). */
const char *fsdp_last_error(void);
/* Prints "[rank R] message" to stderr and stops all ranks: MPI_Abort(code)
 * if MPI is initialised, exit(code) otherwise. Never returns. */
void fsdp_abort(const char *message, int code)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;
/* Size in bytes of one element of `dtype` (0 for an invalid value). */
size_t fsdp_dtype_size(fsdp_dtype dtype);
/* Monotonic wall-clock time, seconds. */
double fsdp_now(void);

/* Per-op profile (fsdp-run --profile): while enabled, the schedule
 * interpreter adds each instruction's seconds under its op name. Reset by
 * fsdp_profile_reset only. Entries are sorted by name; out-of-range i gives
 * NULL / 0. */
void fsdp_profile_enable(int on);
int fsdp_profile_enabled(void);
void fsdp_profile_add(const char *op, double seconds);
void fsdp_profile_reset(void);
int fsdp_profile_count(void);
const char *fsdp_profile_op(int i);
int64_t fsdp_profile_calls(int i);
double fsdp_profile_seconds(int i);

/*===--- Devices, memory, streams --------------------------------------===*/

typedef struct fsdp_device_s *fsdp_device;
typedef struct fsdp_stream_s *fsdp_stream;
typedef struct fsdp_event_s *fsdp_event;
typedef struct fsdp_channel_s *fsdp_channel;

/* Which transport a device's channels use. */
typedef enum fsdp_collectives {
  FSDP_COLLECTIVES_NATIVE = 0, /* the device's own: MPI for "cpu", NCCL for
                                  "cuda" (one GPU per rank) */
  FSDP_COLLECTIVES_MPI = 1     /* MPI; on "cuda" device buffers are staged
                                  through pinned host memory (several ranks
                                  may then share one GPU, which NCCL refuses;
                                  a testing mode: the host blocks while the
                                  collective runs) */
} fsdp_collectives;

typedef struct fsdp_device_options {
  fsdp_collectives collectives;
} fsdp_device_options;

/* Creates the device `name`: "cpu" (or "cpu:0"); "cuda:N" (GPU N of this
 * node); "cuda" (GPU fsdp_local_rank() mod the number of GPUs). `options`
 * may be NULL (native collectives). FSDP_ERR_DEVICE with a message for an
 * unknown name, a build without the cuda driver, no CUDA device, or an
 * ordinal out of range. */
int fsdp_device_create(const char *name, const fsdp_device_options *options,
                       fsdp_device *out);
/* Destroys the device (after synchronising it). Its channels, events and
 * memory must be released first. NULL is ignored. */
void fsdp_device_destroy(fsdp_device device);
/* Thread-safe, for a watchdog about to end the process: aborts the device's
 * collectives in flight so that the ranks waiting on them fail instead of
 * hanging (cuda: ncclCommAbort on every NCCL communicator; the cpu driver's
 * are MPI's and have nothing to abort). Afterwards every collective and
 * synchronisation of the device fails with FSDP_ERR_MPI naming `reason`.
 * NULL is ignored. */
void fsdp_device_abort(fsdp_device device, const char *reason);
/* The canonical name ("cpu", "cuda:0"). */
const char *fsdp_device_name(fsdp_device device);
/* "mpi" or "nccl": the transport of the device's channels. */
const char *fsdp_device_collectives(fsdp_device device);

/* The dense linear algebra library the device's GEMMs run, and on "cpu" how
 * its kernels were chosen (runtime/lib/cpu/Blas.h; README, "BLAS kernels").
 * Strings are never NULL ("" where unknown or not applicable) and live as
 * long as the process. */
typedef struct fsdp_blas_info {
  const char *library;      /* "OpenBLAS" (cpu), "cuBLAS" (cuda) */
  const char *version;      /* "0.3.21" */
  const char *core;         /* OpenBLAS's kernel set the GEMMs run
                               ("Cooperlake"; openblas_get_corename) */
  const char *core_at_load; /* the core OpenBLAS chose when it loaded */
  const char *chosen_by;    /* "cpuid" (the runtime, from the CPU's
                               features), "FSDP_BLAS_CORE" (a core named
                               there), "OPENBLAS_CORETYPE" (kept from the
                               environment), "OpenBLAS" (its own table) */
  const char *cpu_isa;      /* the CPU's tier: "avx512", "avx2", "avx",
                               "generic" */
  const char *warning;      /* "" or why the GEMMs run below the CPU's tier */
  const char *note;         /* "" or the OPENBLAS_CORETYPE that the default
                               FSDP_BLAS_CORE=auto overrode, and why */
  double self_test_max_rel_error; /* sgemm and dgemm 67x45x129 against a
                                     double reference: max |C - C_ref| /
                                     max |C_ref|; < 0: not run */
  double self_test_gflops; /* sgemm 128^3 of `core`, 1e9 FLOP/s, best of 3 */
  double generic_gflops;   /* the same on OpenBLAS's generic "Prescott"
                              core; 0: not measured */
} fsdp_blas_info;
/* Fills `out` with the device's BLAS record. FSDP_ERR_INVALID for NULL. */
int fsdp_device_blas(fsdp_device device, fsdp_blas_info *out);

/* Allocates `bytes` of device memory aligned to 256 bytes, in stream order
 * on the compute stream (cuda: cudaMallocAsync from the device's pool).
 * The contents are undefined. bytes == 0 gives a valid unique pointer. */
int fsdp_device_alloc(fsdp_device device, size_t bytes, void **out);
/* Frees memory of fsdp_device_alloc in compute-stream order (work already
 * issued on the compute stream may still use it). NULL is ignored. */
int fsdp_device_free(fsdp_device device, void *ptr);

/* The device's streams. Work on one stream runs in issue order; the compute
 * stream runs kernels, the communication stream collectives. On "cpu" the
 * compute stream is the calling thread (kernels complete before they
 * return) and the communication stream is MPI's non-blocking requests. */
typedef enum fsdp_stream_kind {
  FSDP_STREAM_COMPUTE = 0,
  FSDP_STREAM_COMM = 1
} fsdp_stream_kind;
fsdp_stream fsdp_device_stream(fsdp_device device, fsdp_stream_kind kind);
/* The device a stream belongs to. */
fsdp_device fsdp_stream_device(fsdp_stream stream);

/* Copies `bytes` on `stream` between any two of host memory and device
 * memory (cuda: cudaMemcpyAsync, direction from unified addressing; a host
 * buffer must stay valid until the stream reaches the copy, i.e. call
 * fsdp_stream_synchronize before reusing it). */
int fsdp_memcpy(fsdp_stream stream, void *dst, const void *src, size_t bytes);
/* Copies `height` rows of `width` bytes: row i from src + i*spitch to
 * dst + i*dpitch (cudaMemcpy2DAsync). */
int fsdp_memcpy_2d(fsdp_stream stream, void *dst, size_t dpitch,
                   const void *src, size_t spitch, size_t width, size_t height);
/* Sets `bytes` of device memory to zero on `stream`. */
int fsdp_memset_zero(fsdp_stream stream, void *dst, size_t bytes);
/* Blocks the host until all work issued on `stream` has completed, then
 * reports the first data error a kernel of the device raised since the last
 * synchronisation (FSDP_ERR_DATA with the kernel's message). */
int fsdp_stream_synchronize(fsdp_stream stream);

/*===--- Events ---------------------------------------------------------===*/

/* Non-blocking: *done = 1 when the event's work has completed. On MPI
 * channels this drives the collective's progress (MPI_Test). */
int fsdp_event_query(fsdp_event event, int *done);
/* Work issued on `stream` after this call runs after `event`'s work (cuda:
 * cudaStreamWaitEvent; the host does not block). On "cpu" the compute
 * stream is the host thread, so this blocks until the collective completes
 * (MPI_Wait) and applies an average. The time it blocks the host is added
 * to the device's comm_wait_seconds. The event stays valid. */
int fsdp_stream_wait_event(fsdp_stream stream, fsdp_event event);
/* Releases an event. On cuda its work may still be in flight and completes on
 * its own (buffers it uses must stay untouched until a stream waited on it);
 * on cpu the release completes the MPI request first (it blocks). NULL is
 * ignored. */
void fsdp_event_release(fsdp_event event);
/* fsdp.wait: the compute stream of the event's device waits on it, then the
 * event is released. */
int fsdp_wait(fsdp_event event);

/*===--- Channels (process groups) --------------------------------------===*/

/* The channel of all MPI_COMM_WORLD ranks on `device` (cpu: a duplicate of
 * MPI_COMM_WORLD; cuda: an NCCL communicator bootstrapped by broadcasting
 * an ncclUniqueId over MPI). Collective over MPI_COMM_WORLD. */
int fsdp_channel_create(fsdp_device device, fsdp_channel *out);
/* The sub-group of `parent` of the ranks that pass the same `color`, ordered
 * by `key` (MPI_Comm_split semantics; a grid's shard group of rank r is
 * color r/S, key r mod S). Collective over `parent`. */
int fsdp_channel_split(fsdp_channel parent, int color, int key,
                       fsdp_channel *out);
/* This rank's index in the channel and the channel's size. */
int fsdp_channel_rank(fsdp_channel channel);
int fsdp_channel_size(fsdp_channel channel);
/* NULL is ignored; no collective may be in flight on it. */
void fsdp_channel_destroy(fsdp_channel channel);

/*===--- Collectives ----------------------------------------------------===*/
/* Each starts on the communication stream of the channel's device, after
 * all work issued on its compute stream so far, and returns an event that
 * completes with it (release it, usually through fsdp_wait). Its buffers
 * must stay untouched until a stream waited on the event. Each adds its
 * ring volume to the device's bytes-sent counters: (G-1)/G of the full
 * buffer for all-gather and reduce-scatter, 2(G-1)/G of the buffer for
 * all-reduce (G the channel's size; fsdp/Sharding.h). */

/* Rank i's `shard_count` elements at `shard` land at
 * full[i*shard_count, (i+1)*shard_count) on every rank (MPI_Iallgather /
 * ncclAllGather); `full` holds shard_count * G elements. */
int fsdp_all_gather_start(fsdp_channel channel, const void *shard, void *full,
                          int64_t shard_count, fsdp_dtype dtype,
                          fsdp_event *done);
/* Block i of `full` (shard_count * G elements), summed (or averaged) over
 * the channel, lands in `shard` on rank i (MPI_Ireduce_scatter_block /
 * ncclReduceScatter). An f16 average over G ranks divides each rank's input
 * by 2^k ≈ √G before the sum and the sum by G / 2^k after it (PyTorch
 * FSDP2's gradient divide factors), so that the sum does not overflow: on
 * cpu the input itself is divided in place (pass a buffer whose contents
 * are dead after the reduction, a gradient), on cuda NCCL's premultiplied
 * sum (or the mpi channels' staged copy) leaves it as it is. The same for
 * fsdp_all_reduce_start. */
int fsdp_reduce_scatter_start(fsdp_channel channel, const void *full,
                              void *shard, int64_t shard_count,
                              fsdp_dtype dtype, fsdp_reduce_op op,
                              fsdp_event *done);
/* out[i] = sum over the channel of in[i], i < count (or the average);
 * in == out reduces in place (MPI_Iallreduce / ncclAllReduce). */
/* Pipeline parallelism: sends `count` elements of `buf` to rank `peer` of the
 * channel with message tag `tag` (0..32767), or receives them from it into
 * `buf` (MPI_Isend / MPI_Irecv on cpu); `done` completes when `buf` may be
 * reused (send) or holds the message (recv). A message of another size is
 * an error at the wait. FSDP_ERR_UNSUPPORTED on a driver without them. */
int fsdp_send_start(fsdp_channel channel, const void *buf, int64_t count,
                    fsdp_dtype dtype, int32_t peer, int32_t tag,
                    fsdp_event *done);
int fsdp_recv_start(fsdp_channel channel, void *buf, int64_t count,
                    fsdp_dtype dtype, int32_t peer, int32_t tag,
                    fsdp_event *done);
int fsdp_all_reduce_start(fsdp_channel channel, const void *in, void *out,
                          int64_t count, fsdp_dtype dtype, fsdp_reduce_op op,
                          fsdp_event *done);

/*===--- Statistics -----------------------------------------------------===*/

typedef struct fsdp_device_stats {
  /* Ring volume sent by collectives, bytes, by fsdp_collective kind. */
  int64_t comm_bytes[3];
  /* Host seconds blocked in fsdp_stream_wait_event (cpu: time waiting for
   * collectives; cuda: 0, the host does not block). */
  double comm_wait_seconds;
  /* Host seconds inside kernel entry points (cpu: kernel time; cuda: the
   * time to enqueue them). */
  double compute_seconds;
  /* MPI_Test calls of the progress thread. */
  int64_t progress_tests;
  /* fsdp_device_alloc allocations not yet freed (not reset). */
  int64_t live_allocations;
  /* The allocator's own figures, bytes: cpu: glibc's bytes in use
   * (mallinfo2 uordblks + hblkhd; the peak is the high-water mark of samples
   * after every device allocation, kernel scratch allocation and collective
   * start, mallinfo2 skipped only where a bound of the bytes in use shows the
   * sample cannot raise the mark: runtime/docs/drivers.md) less those in
   * use when the device was created; cuda: the device pool's
   * cudaMemPoolAttrUsedMemCurrent and cudaMemPoolAttrUsedMemHigh (device
   * buffers and kernel scratch). */
  int64_t memory_in_use_bytes;
  int64_t memory_peak_bytes;
  /* Device memory outside that pool: the cuBLAS workspace, and what NCCL
   * communicator set-up took (cudaMemGetInfo before and after). 0 on cpu. */
  int64_t workspace_bytes;
  int64_t comm_buffer_bytes;
} fsdp_device_stats;

int fsdp_device_get_stats(fsdp_device device, fsdp_device_stats *out);
/* Zeroes the counters and sets the memory peak to the bytes in use now. */
int fsdp_device_reset_stats(fsdp_device device);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDP_RUNTIME_H */
