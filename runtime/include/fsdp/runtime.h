/*===- runtime.h - C API of the fsdp-opt runtime ----------------*- C -*-===//
//
// The C interface of libfsdp_runtime: MPI start/stop, rank and world size,
// byte-accounted buffer allocation, asynchronous FSDP collectives (all-gather
// and reduce-scatter of flat parameter shards), communication and timing
// counters, and an abort that stops every rank. No C++ exception ever crosses
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

/* Element types of buffers exchanged by collectives. */
typedef enum fsdp_dtype {
  FSDP_F32 = 0,
  FSDP_F64 = 1,
  FSDP_I32 = 2,
  FSDP_I64 = 3
} fsdp_dtype;

/* Reduction of fsdp_reduce_scatter_start. */
typedef enum fsdp_reduce_op {
  FSDP_REDUCE_SUM = 0,
  FSDP_REDUCE_AVG = 1 /* sum, then divide by the world size (floats only) */
} fsdp_reduce_op;

/* An in-flight collective; completed and released by fsdp_wait. */
typedef struct fsdp_request *fsdp_handle;

/* Initialises MPI (MPI_Init) unless it is already initialised, and sets
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

/* Starts an all-gather: every rank contributes `shard_count` elements at
 * `shard`; rank r's shard lands at full[r*shard_count, (r+1)*shard_count).
 * `full` holds shard_count * world_size elements. MPI_Iallgather. Both
 * buffers must stay untouched until fsdp_wait. Adds the ring volume
 * (N-1)/N * full bytes to the bytes-sent counter. */
int fsdp_all_gather_start(const void *shard, void *full, int64_t shard_count,
                          fsdp_dtype dtype, fsdp_handle *out);
/* Starts a reduce-scatter: `full` holds shard_count * world_size elements;
 * rank r receives the element-wise sum (or average) over ranks of block r in
 * `shard`. MPI_Ireduce_scatter_block with MPI_SUM; FSDP_REDUCE_AVG divides by
 * the world size in fsdp_wait. Adds the ring volume to the bytes counter. */
int fsdp_reduce_scatter_start(const void *full, void *shard,
                              int64_t shard_count, fsdp_dtype dtype,
                              fsdp_reduce_op op, fsdp_handle *out);
/* Drives progress of `h` without blocking; *done = 1 once complete (the
 * handle stays valid until fsdp_wait). */
int fsdp_test(fsdp_handle h, int *done);
/* Blocks until `h` completes, applies the average if any, releases `h`.
 * The time spent here is added to the comm-wait counter. */
int fsdp_wait(fsdp_handle h);

/* Bytes this rank sent in collectives since the last stats reset, counted as
 * the ring volume (fsdp::ringCollectiveBytesPerRank). */
int64_t fsdp_comm_bytes_sent(void);
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
