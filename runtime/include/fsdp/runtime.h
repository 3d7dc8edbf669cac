/*===- runtime.h - C API of the fsdp-opt runtime ----------------*- C -*-===//
//
// The C interface of libfsdp_runtime: MPI start/stop, rank and world size,
// byte-accounted buffer allocation (and planned arenas), the process groups of a sharding grid
// (world, shard, replicate; runtime/docs/schedule-format.md, "Sharding
// strategies"), asynchronous collectives over them (all-gather,
// reduce-scatter, all-reduce), communication and timing counters, and an
// abort that stops every rank. No C++ exception ever crosses
// this interface: functions return FSDP_OK or an error code and set a
// thread-local message readable with fsdp_last_error().
//
// Every function also works when MPI has not been initialised (neither by
// fsdp_init nor by the host program): the process then behaves as rank 0 of
// a world of size 1 and collectives are local copies. This lets unit tests run
// schedules in-process without mpirun.
//
//===----------------------------------------------------------------------===*/
#ifndef FSDP_RUNTIME_H
#define FSDP_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by the API. */
typedef enum fsdp_status {
  FSDP_OK = 0,
  FSDP_ERR_MPI = 1,      /* an MPI call failed */
  FSDP_ERR_INVALID = 2,  /* a bad argument (null pointer, count too large) */
  FSDP_ERR_NOMEM = 3     /* allocation failed */
} fsdp_status;

/* Element types of buffers exchanged by collectives. FSDP_BF16 and FSDP_F16
 * are 2-byte floats (bfloat16, IEEE binary16; fsdp/Half.h): all-gather moves
 * them as 2-byte elements; reduce-scatter and all-reduce add them in f32 and
 * round each sum to the storage dtype (an MPI user-defined operation). */
typedef enum fsdp_dtype {
  FSDP_F32 = 0,
  FSDP_F64 = 1,
  FSDP_I32 = 2,
  FSDP_I64 = 3,
  FSDP_BF16 = 4,
  FSDP_F16 = 5
} fsdp_dtype;

/* Reduction of fsdp_reduce_scatter_start. */
typedef enum fsdp_reduce_op {
  FSDP_REDUCE_SUM = 0,
  FSDP_REDUCE_AVG = 1 /* sum, then divide by the world size (floats only;
                         bf16/f16: the sum is widened, divided in f32 and
                         rounded once) */
} fsdp_reduce_op;

/* Process groups of the grid R x S (R replicas of S shard ranks, R*S = N).
 * Rank r: WORLD = all N ranks (index r); SHARD = ranks [floor(r/S)*S,
 * floor(r/S)*S + S) (index r mod S); REPLICATE = ranks {r mod S + k*S : k < R}
 * (index floor(r/S)). */
typedef enum fsdp_group {
  FSDP_GROUP_WORLD = 0,
  FSDP_GROUP_SHARD = 1,
  FSDP_GROUP_REPLICATE = 2
} fsdp_group;

/* Kinds of collectives, for the per-kind byte counters. */
typedef enum fsdp_collective {
  FSDP_COLL_ALL_GATHER = 0,
  FSDP_COLL_REDUCE_SCATTER = 1,
  FSDP_COLL_ALL_REDUCE = 2
} fsdp_collective;

/* An in-flight collective; completed and released by fsdp_wait. */
typedef struct fsdp_request *fsdp_handle;

/* How in-flight collectives progress while the caller computes
 * (runtime/docs/schedule-format.md, "Runtime decisions"). Open MPI's
 * non-blocking collectives (libnbc over ob1/vader) only advance, round by
 * round, inside MPI calls on the calling process, so someone must call MPI
 * while the kernels run. */
typedef enum fsdp_progress {
  FSDP_PROGRESS_NONE = 0,  /* only inside fsdp_wait (and explicit fsdp_test) */
  FSDP_PROGRESS_TEST = 1,  /* the caller calls fsdp_test between kernels (the
                              schedule interpreter does, after every
                              instruction) */
  FSDP_PROGRESS_THREAD = 2 /* a progress thread calls MPI_Test on every
                              in-flight request with an exponential back-off
                              (fsdp_set_progress_interval); MPI is initialised
                              with MPI_THREAD_MULTIPLE */
} fsdp_progress;

/* Selects the progress mode (default FSDP_PROGRESS_TEST). Call before
 * fsdp_init for FSDP_PROGRESS_THREAD, so that fsdp_init asks for
 * MPI_THREAD_MULTIPLE; after MPI is initialised, FSDP_PROGRESS_THREAD fails
 * with FSDP_ERR_MPI unless MPI provides MPI_THREAD_MULTIPLE. Leaving thread
 * mode stops the thread (every in-flight request stays valid and is
 * completed by fsdp_wait). No effect on results: only on when transfers run. */
int fsdp_set_progress(fsdp_progress mode);
/* The current progress mode. */
fsdp_progress fsdp_get_progress(void);
/* "none", "test" or "thread"; fsdp_parse_progress reads those names
 * (returns -1 for anything else). */
const char *fsdp_progress_name(fsdp_progress mode);
int fsdp_parse_progress(const char *name);
/* The progress thread's back-off: after a request is started or completes
 * it sleeps `min_seconds` between rounds of MPI_Test, doubling up to
 * `max_seconds` while nothing completes (defaults 2e-5 and 1e-3). Both must
 * be > 0 with min <= max. */
int fsdp_set_progress_interval(double min_seconds, double max_seconds);
/* MPI_Test calls the progress thread made since the last stats reset. */
int64_t fsdp_progress_thread_tests(void);

/* Initialises MPI (MPI_Init, or MPI_Init_thread(MPI_THREAD_MULTIPLE) in
 * FSDP_PROGRESS_THREAD mode) unless it is already initialised, and sets
 * MPI_ERRORS_RETURN on MPI_COMM_WORLD. argc/argv may be NULL. */
int fsdp_init(int *argc, char ***argv);
/* Finalises MPI if fsdp_init initialised it. */
int fsdp_finalize(void);
/* Rank in MPI_COMM_WORLD (0 without MPI). */
int fsdp_rank(void);
/* Size of MPI_COMM_WORLD (1 without MPI). */
int fsdp_world_size(void);
/* The message of the last error on this thread ("" if none). */
const char *fsdp_last_error(void);

/* Size in bytes of one element of `dtype` (0 for an invalid value). */
size_t fsdp_dtype_size(fsdp_dtype dtype);

/* Allocates `bytes` zero-filled bytes aligned to 64 and adds them to the
 * current-bytes counter (updating the high-water mark). Returns NULL and sets
 * the last error on failure. fsdp_alloc(0) returns a valid unique pointer. */
void *fsdp_alloc(size_t bytes);
/* Frees a pointer from fsdp_alloc (NULL is ignored) and subtracts its bytes. */
void fsdp_free(void *ptr);
/* Bytes currently allocated through fsdp_alloc on this process. */
int64_t fsdp_mem_current_bytes(void);
/* High-water mark of fsdp_mem_current_bytes since the last reset. */
int64_t fsdp_mem_peak_bytes(void);
/* Sets the high-water mark to the current bytes. */
void fsdp_mem_reset_peak(void);

/* Planned arenas (runtime/docs/schedule-format.md, "Runtime decisions"):
 * fsdp_arena_alloc allocates `bytes` zero-filled bytes aligned to 64 (or to
 * `alignment` if larger; 0 or a power of two) that are NOT added to the
 * current-bytes counter but to the arena counter; the buffers bound inside
 * the arena are accounted with fsdp_mem_account when they become live and
 * when they are freed. Returns NULL and sets the last error on failure. */
void *fsdp_arena_alloc(size_t bytes, size_t alignment);
/* Frees an arena from fsdp_arena_alloc (NULL is ignored). */
void fsdp_arena_free(void *arena);
/* Bytes currently held by arenas on this process. */
int64_t fsdp_mem_arena_bytes(void);
/* Adds `delta` bytes (negative: subtracts) to the current-bytes counter,
 * updating the high-water mark: a buffer bound inside an arena. */
void fsdp_mem_account(int64_t delta);

/* Sets the grid to shard groups of `shard_size` ranks (R = N / shard_size
 * replicas) and builds the SHARD and REPLICATE communicators with
 * MPI_Comm_split (keys chosen so that the indices are those of fsdp_group).
 * Collective over MPI_COMM_WORLD: every rank must call it with the same
 * value. A call with the current shard size does nothing. Until the first
 * call the grid is R = 1, S = N. FSDP_ERR_INVALID unless shard_size >= 1
 * divides N (without MPI, N = 1). No collective may be in flight. */
int fsdp_set_grid(int shard_size);
/* S of the current grid. */
int fsdp_grid_shard_size(void);
/* Number of ranks in `group` (N, S or R), or -1 for an invalid group. */
int fsdp_group_size(fsdp_group group);
/* This rank's index in `group` (see fsdp_group), or -1 for an invalid one. */
int fsdp_group_rank(fsdp_group group);

/* Starts an all-gather over the world group (fsdp_all_gather_start_in with
 * FSDP_GROUP_WORLD): every rank contributes `shard_count` elements at
 * `shard`; rank r's shard lands at full[r*shard_count, (r+1)*shard_count).
 * `full` holds shard_count * world_size elements. MPI_Iallgather. Both
 * buffers must stay untouched until fsdp_wait. Adds the ring volume
 * (N-1)/N * full bytes to the bytes-sent counter. */
int fsdp_all_gather_start(const void *shard, void *full, int64_t shard_count,
                          fsdp_dtype dtype, fsdp_handle *out);
/* Starts a reduce-scatter over the world group (as
 * fsdp_reduce_scatter_start_in with FSDP_GROUP_WORLD): `full` holds shard_count * world_size elements;
 * rank r receives the element-wise sum (or average) over ranks of block r in
 * `shard`. MPI_Ireduce_scatter_block with MPI_SUM; FSDP_REDUCE_AVG divides by
 * the world size in fsdp_wait. Adds the ring volume to the bytes counter. */
int fsdp_reduce_scatter_start(const void *full, void *shard,
                              int64_t shard_count, fsdp_dtype dtype,
                              fsdp_reduce_op op, fsdp_handle *out);
/* fsdp_all_gather_start over `group` (G ranks): the shard of the rank with
 * index i in the group lands at full[i*shard_count, (i+1)*shard_count);
 * `full` holds shard_count * G elements. Adds (G-1)/G * full bytes to the
 * bytes-sent counters (total and all-gather). */
int fsdp_all_gather_start_in(fsdp_group group, const void *shard, void *full,
                             int64_t shard_count, fsdp_dtype dtype,
                             fsdp_handle *out);
/* fsdp_reduce_scatter_start over `group` (G ranks): block i of `full`
 * (shard_count * G elements), reduced over the group, lands on the rank with
 * index i; FSDP_REDUCE_AVG divides by G. Adds (G-1)/G * full bytes to the
 * bytes-sent counters (total and reduce-scatter). */
int fsdp_reduce_scatter_start_in(fsdp_group group, const void *full,
                                 void *shard, int64_t shard_count,
                                 fsdp_dtype dtype, fsdp_reduce_op op,
                                 fsdp_handle *out);
/* Starts an all-reduce over `group` (G ranks): out[i] = sum over the group
 * of in[i] (i < count), divided by G for FSDP_REDUCE_AVG (floats only).
 * MPI_Iallreduce(MPI_SUM); `in` == `out` reduces in place. Adds
 * 2*(G-1)/G * count bytes (fsdp::ringAllReduceBytesPerRank) to the
 * bytes-sent counters (total and all-reduce). */
int fsdp_all_reduce_start(fsdp_group group, const void *in, void *out,
                          int64_t count, fsdp_dtype dtype, fsdp_reduce_op op,
                          fsdp_handle *handle);

/* Drives progress of `h` without blocking; *done = 1 once complete (the
 * handle stays valid until fsdp_wait). Safe in every progress mode (the
 * progress thread and the caller never test one request at once). */
int fsdp_test(fsdp_handle h, int *done);
/* Blocks until `h` completes, applies the average if any, releases `h`.
 * The time spent here is added to the comm-wait counter. */
int fsdp_wait(fsdp_handle h);

/* Bytes this rank sent in collectives since the last stats reset, counted as
 * the ring volume (fsdp::ringCollectiveBytesPerRank for all-gather and
 * reduce-scatter, fsdp::ringAllReduceBytesPerRank for all-reduce, over the
 * collective's group). */
int64_t fsdp_comm_bytes_sent(void);
/* The part of fsdp_comm_bytes_sent sent by collectives of `kind` (0 for an
 * invalid kind). */
int64_t fsdp_comm_bytes_sent_by(fsdp_collective kind);
/* Seconds spent in fsdp_wait since the last stats reset. */
double fsdp_comm_wait_seconds(void);
/* Seconds of compute reported through fsdp_add_compute_seconds. */
double fsdp_compute_seconds(void);
/* Adds `seconds` to the compute counter (called by the interpreter). */
void fsdp_add_compute_seconds(double seconds);
/* Zeroes the bytes-sent, comm-wait and compute counters. */
void fsdp_stats_reset(void);
/* Monotonic wall-clock time in seconds. */
double fsdp_now(void);

/* Per-op profile (fsdp-run --profile): while enabled, the schedule
 * interpreter adds each instruction's kernel seconds under its op name
 * ("nn.linear", "fsdp.all_gather" = the start call, ...). Off by default;
 * reset by fsdp_profile_reset (not by fsdp_stats_reset). */
void fsdp_profile_enable(int on);
int fsdp_profile_enabled(void);
void fsdp_profile_add(const char *op, double seconds);
void fsdp_profile_reset(void);
/* Number of op names recorded; entry i (0 <= i < count, sorted by name):
 * its name, calls and seconds. Out-of-range i: NULL / 0. */
int fsdp_profile_count(void);
const char *fsdp_profile_op(int i);
int64_t fsdp_profile_calls(int i);
double fsdp_profile_seconds(int i);

/* Prints "[rank R] message" to stderr and stops all ranks: MPI_Abort(code)
 * if MPI is initialised, exit(code) otherwise. Never returns. */
void fsdp_abort(const char *message, int code)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDP_RUNTIME_H */
