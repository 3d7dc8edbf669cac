//===- Driver.h - the interface a device driver implements ------*- C++ -*-===//
//
// The opaque structs of runtime.h are C++ classes with virtual methods: a
// driver (runtime/lib/cpu, runtime/lib/cuda) derives from fsdp_device_s,
// fsdp_event_s and fsdp_channel_s and implements them; Runtime.cpp turns the
// C calls into virtual calls and a DeviceError into a status and message.
// runtime/docs/drivers.md describes the contract for a new driver.
//
// Drivers report errors by throwing DeviceError (inside the runtime only;
// never across the C interface).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DRIVER_H
#define FSDP_RUNTIME_DRIVER_H

#include "fsdp/ElementMath.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"
#include "fsdp/schedule/Format.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace fsdp::hal {

/// An error inside a driver: an fsdp_status code and its message.
class DeviceError : public std::runtime_error {
public:
  DeviceError(int code, const std::string &message)
      : std::runtime_error(message), code(code) {}
  int code;
};

[[noreturn]] inline void fail(int code, const std::string &message) {
  throw DeviceError(code, message);
}

/// bf16 or f16; a float dtype (f32, f64, bf16, f16).
inline bool isHalf(fsdp_dtype t) { return t == FSDP_BF16 || t == FSDP_F16; }
inline bool isFloat(fsdp_dtype t) {
  return t == FSDP_F32 || t == FSDP_F64 || isHalf(t);
}
/// Throws FSDP_ERR_INVALID unless indices/labels/steps are i32 or i64.
inline void checkIndexType(fsdp_dtype t, const char *what) {
  if (t != FSDP_I32 && t != FSDP_I64)
    fail(FSDP_ERR_INVALID, std::string(what) + " must be i32 or i64");
}

/// Throws FSDP_ERR_INVALID unless fsdp_init_values' arguments are valid:
/// float dtypes (the master's too, when there is one), a known init kind,
/// n >= 0.
inline void checkInitValues(fsdp_dtype t, const void *master, fsdp_dtype mt,
                            int64_t n, int kind) {
  if (!isFloat(t) || (master && !isFloat(mt)))
    fail(FSDP_ERR_INVALID, "fsdp_init_values: float dtypes only");
  if (kind < 0 || kind > 4)
    fail(FSDP_ERR_INVALID,
         "fsdp_init_values: unknown init kind " + std::to_string(kind));
  if (n < 0)
    fail(FSDP_ERR_INVALID, "fsdp_init_values: negative element count");
}

/// fsdp_rope's frequency transform from its arguments (fsdp/kernels.h);
/// throws FSDP_ERR_INVALID for a head_dim, rope_type or factor it rejects.
inline math::RopeScaling
ropeScaling(int64_t headDim, int type, double factor, double lowFreqFactor,
            double highFreqFactor, double originalMaxPositions, double betaFast,
            double betaSlow, int truncate, double attentionFactor) {
  if (headDim <= 0 || headDim % 2)
    fail(FSDP_ERR_INVALID, "rope: head_dim must be positive and even, got " +
                               std::to_string(headDim));
  if (type < FSDP_ROPE_DEFAULT || type > FSDP_ROPE_YARN)
    fail(FSDP_ERR_INVALID, "rope: unknown rope_type " + std::to_string(type));
  if (!(factor > 0) || !(attentionFactor > 0))
    fail(FSDP_ERR_INVALID, "rope: factor and attention_factor must be > 0");
  if (type == FSDP_ROPE_LLAMA3 &&
      (!(originalMaxPositions > 0) || !(lowFreqFactor > 0) ||
       !(highFreqFactor > lowFreqFactor)))
    fail(FSDP_ERR_INVALID, "rope: llama3 needs original_max_positions > 0 and "
                           "0 < low_freq_factor < high_freq_factor");
  if (type == FSDP_ROPE_YARN &&
      (!(originalMaxPositions > 0) || !(betaFast > 0) || !(betaSlow > 0)))
    fail(FSDP_ERR_INVALID, "rope: yarn needs original_max_positions, "
                           "beta_fast and beta_slow > 0");
  math::RopeScaling s;
  s.type = type;
  s.factor = factor;
  s.lowFreqFactor = lowFreqFactor;
  s.highFreqFactor = highFreqFactor;
  s.originalMaxPositions = originalMaxPositions;
  s.betaFast = betaFast;
  s.betaSlow = betaSlow;
  s.truncate = truncate != 0;
  s.attentionFactor = attentionFactor;
  return s;
}

/// fsdp_dtype_size for the drivers (the cuda driver library does not link
/// the runtime's C functions): the format's element sizes; 0 if invalid.
inline size_t dtypeSize(fsdp_dtype t) {
  return static_cast<size_t>(
      fsdp::schedule::dtypeSize(static_cast<fsdp::schedule::DType>(t)));
}

} // namespace fsdp::hal

/// A stream of a device: the driver keeps its native handle.
struct fsdp_stream_s {
  fsdp_device_s *device = nullptr;
  fsdp_stream_kind kind = FSDP_STREAM_COMPUTE;
  void *native = nullptr; ///< cudaStream_t on cuda
};

/// The completion of work on a stream.
struct fsdp_event_s {
  virtual ~fsdp_event_s() = default;
  /// Non-blocking; drives progress where the transport needs it.
  virtual bool query() = 0;
  fsdp_device_s *device = nullptr;
};

/// A process group on one device.
struct fsdp_channel_s {
  virtual ~fsdp_channel_s() = default;
  /// The sub-group of ranks with the same color, ordered by key.
  virtual std::unique_ptr<fsdp_channel_s> split(int color, int key) = 0;
  virtual fsdp_event_s *allGather(const void *shard, void *full,
                                  int64_t shardCount, fsdp_dtype dtype) = 0;
  virtual fsdp_event_s *reduceScatter(const void *full, void *shard,
                                      int64_t shardCount, fsdp_dtype dtype,
                                      fsdp_reduce_op op) = 0;
  virtual fsdp_event_s *allReduce(const void *in, void *out, int64_t count,
                                  fsdp_dtype dtype, fsdp_reduce_op op) = 0;
  /// Point-to-point (pipeline parallelism) to / from rank `peer` of this
  /// channel; a driver without them says so.
  virtual fsdp_event_s *send(const void *buf, int64_t count, fsdp_dtype dtype,
                             int peer, int tag) {
    (void)buf, (void)count, (void)dtype, (void)peer, (void)tag;
    fsdp::hal::fail(FSDP_ERR_UNSUPPORTED,
                    "fsdp_send_start: this device's channels have "
                    "no point-to-point transfers yet (pipeline "
                    "parallelism runs on the cpu driver)");
  }
  virtual fsdp_event_s *recv(void *buf, int64_t count, fsdp_dtype dtype,
                             int peer, int tag) {
    (void)buf, (void)count, (void)dtype, (void)peer, (void)tag;
    fsdp::hal::fail(FSDP_ERR_UNSUPPORTED,
                    "fsdp_recv_start: this device's channels have "
                    "no point-to-point transfers yet (pipeline "
                    "parallelism runs on the cpu driver)");
  }
  fsdp_device_s *device = nullptr;
  int rank = 0, size = 1;
  /// Bytes this rank has sent on the channel since its creation, counted by
  /// the C entry points (Runtime.cpp) as the device's comm_bytes are (the
  /// ring volume, fsdp/Sharding.h) plus every point-to-point message's bytes:
  /// tells tensor-parallel, data-parallel and pipeline traffic apart
  /// (Executor::channelBytesSent).
  std::atomic<int64_t> bytesSent{0};
};

/// The kernel entry points of fsdp/kernels.h as (name, parameters after the
/// stream, arguments): Runtime.cpp defines the C functions from this list
/// and a driver overrides one virtual per entry. The parameters are named as
/// kernels.h names them, whose definitions these are.
#define FSDP_UNPAREN(...) __VA_ARGS__
#define FSDP_DRIVER_KERNELS(X)                                                 \
  X(fill, (fsdp_dtype dtype, void *y, int64_t n, double value),                \
    (dtype, y, n, value))                                                      \
  X(cast,                                                                      \
    (fsdp_dtype xdtype, const void *x, fsdp_dtype ydtype, void *y, int64_t n), \
    (xdtype, x, ydtype, y, n))                                                 \
  X(init_values,                                                               \
    (fsdp_dtype dtype, void *y, fsdp_dtype master_dtype, void *master,         \
     int64_t n, int64_t seed, int64_t fqn_hash, int64_t first_index, int kind, \
     double value, int threads),                                               \
    (dtype, y, master_dtype, master, n, seed, fqn_hash, first_index, kind,     \
     value, threads))                                                          \
  X(linear,                                                                    \
    (fsdp_dtype dtype, const void *x, const void *w, const void *b, void *y,   \
     int64_t m, int64_t k, int64_t n, int transpose_weight),                   \
    (dtype, x, w, b, y, m, k, n, transpose_weight))                            \
  X(matmul,                                                                    \
    (fsdp_dtype dtype, const void *a, const void *b, void *c, int64_t a_rows,  \
     int64_t a_cols, int64_t b_rows, int64_t b_cols, int trans_a,              \
     int trans_b),                                                             \
    (dtype, a, b, c, a_rows, a_cols, b_rows, b_cols, trans_a, trans_b))        \
  X(add, (fsdp_dtype dtype, const void *a, const void *b, void *c, int64_t n), \
    (dtype, a, b, c, n))                                                       \
  X(mul, (fsdp_dtype dtype, const void *a, const void *b, void *c, int64_t n), \
    (dtype, a, b, c, n))                                                       \
  X(relu, (fsdp_dtype dtype, const void *x, void *y, int64_t n),               \
    (dtype, x, y, n))                                                          \
  X(relu_grad,                                                                 \
    (fsdp_dtype dtype, const void *x, const void *dy, void *dx, int64_t n),    \
    (dtype, x, dy, dx, n))                                                     \
  X(gelu,                                                                      \
    (fsdp_dtype dtype, const void *x, void *y, int64_t n,                      \
     int approximate_tanh),                                                    \
    (dtype, x, y, n, approximate_tanh))                                        \
  X(gelu_grad,                                                                 \
    (fsdp_dtype dtype, const void *x, const void *dy, void *dx, int64_t n,     \
     int approximate_tanh),                                                    \
    (dtype, x, dy, dx, n, approximate_tanh))                                   \
  X(silu, (fsdp_dtype dtype, const void *x, void *y, int64_t n),               \
    (dtype, x, y, n))                                                          \
  X(silu_grad,                                                                 \
    (fsdp_dtype dtype, const void *x, const void *dy, void *dx, int64_t n),    \
    (dtype, x, dy, dx, n))                                                     \
  X(dropout,                                                                   \
    (fsdp_dtype dtype, const void *x, void *y, int64_t n, double rate,         \
     int64_t seed, const void *step, fsdp_dtype step_dtype,                    \
     int64_t first_index, int64_t chunk, int64_t stride, int64_t chunk_first), \
    (dtype, x, y, n, rate, seed, step, step_dtype, first_index, chunk, stride, \
     chunk_first))                                                             \
  X(reduce_sum,                                                                \
    (fsdp_dtype dtype, const void *x, const int64_t *x_shape, int rank,        \
     const int64_t *axes, int naxes, void *y),                                 \
    (dtype, x, x_shape, rank, axes, naxes, y))                                 \
  X(broadcast,                                                                 \
    (fsdp_dtype dtype, const void *x, const int64_t *y_shape, int rank,        \
     const int64_t *axes, int naxes, void *y),                                 \
    (dtype, x, y_shape, rank, axes, naxes, y))                                 \
  X(cross_entropy,                                                             \
    (fsdp_dtype dtype, const void *logits, const void *labels,                 \
     fsdp_dtype label_dtype, int64_t positions, int64_t classes, void *loss),  \
    (dtype, logits, labels, label_dtype, positions, classes, loss))            \
  X(cross_entropy_grad,                                                        \
    (fsdp_dtype dtype, const void *logits, const void *labels,                 \
     fsdp_dtype label_dtype, const void *dloss, void *dlogits,                 \
     int64_t positions, int64_t classes),                                      \
    (dtype, logits, labels, label_dtype, dloss, dlogits, positions, classes))  \
  X(vocab_ce_stats,                                                            \
    (fsdp_dtype dtype, const void *logits, const void *labels,                 \
     fsdp_dtype label_dtype, int64_t positions, int64_t classes,               \
     int64_t first, int64_t total, int64_t tp, int64_t slot, void *stats),     \
    (dtype, logits, labels, label_dtype, positions, classes, first, total, tp, \
     slot, stats))                                                             \
  X(vocab_ce_loss,                                                             \
    (fsdp_dtype dtype, const void *stats, int64_t positions, int64_t tp,       \
     void *loss),                                                              \
    (dtype, stats, positions, tp, loss))                                       \
  X(vocab_ce_grad,                                                             \
    (fsdp_dtype dtype, const void *logits, const void *labels,                 \
     fsdp_dtype label_dtype, const void *stats, const void *dloss,             \
     void *dlogits, int64_t positions, int64_t classes, int64_t first,         \
     int64_t tp),                                                              \
    (dtype, logits, labels, label_dtype, stats, dloss, dlogits, positions,     \
     classes, first, tp))                                                      \
  X(sgd_update,                                                                \
    (fsdp_dtype dtype, const void *p, const void *g, void *out, int64_t n,     \
     double lr, double weight_decay, const double *skip),                      \
    (dtype, p, g, out, n, lr, weight_decay, skip))                             \
  X(adamw_update,                                                              \
    (fsdp_dtype dtype, const void *p, const void *g, const void *m,            \
     const void *v, const void *step, fsdp_dtype step_dtype, void *p_out,      \
     void *m_out, void *v_out, int64_t n, double lr, double beta1,             \
     double beta2, double eps, double weight_decay, const double *skip),       \
    (dtype, p, g, m, v, step, step_dtype, p_out, m_out, v_out, n, lr, beta1,   \
     beta2, eps, weight_decay, skip))                                          \
  X(sgd_update_lr,                                                             \
    (fsdp_dtype dtype, const void *p, const void *g, void *out, int64_t n,     \
     const double *lr, double weight_decay, const double *skip),               \
    (dtype, p, g, out, n, lr, weight_decay, skip))                             \
  X(adamw_update_lr,                                                           \
    (fsdp_dtype dtype, const void *p, const void *g, const void *m,            \
     const void *v, const void *step, fsdp_dtype step_dtype, void *p_out,      \
     void *m_out, void *v_out, int64_t n, const double *lr, double beta1,      \
     double beta2, double eps, double weight_decay, const double *skip),       \
    (dtype, p, g, m, v, step, step_dtype, p_out, m_out, v_out, n, lr, beta1,   \
     beta2, eps, weight_decay, skip))                                          \
  X(lr_schedule,                                                               \
    (const void *step, fsdp_dtype step_dtype, double *lr, int kind,            \
     double base_lr, int64_t warmup_steps, const int64_t *decay_steps_device,  \
     int64_t decay_steps, double min_lr),                                      \
    (step, step_dtype, lr, kind, base_lr, warmup_steps, decay_steps_device,    \
     decay_steps, min_lr))                                                     \
  X(sum_squares, (fsdp_dtype dtype, const void *x, int64_t n, double *out),    \
    (dtype, x, n, out))                                                        \
  X(grad_norm,                                                                 \
    (const double *sum_squares, double max_norm, const double *loss_scale,     \
     double *norm, double *coef),                                              \
    (sum_squares, max_norm, loss_scale, norm, coef))                           \
  X(scale,                                                                     \
    (fsdp_dtype dtype, const void *x, const double *scale, void *y,            \
     int64_t n),                                                               \
    (dtype, x, scale, y, n))                                                   \
  X(flatten,                                                                   \
    (fsdp_dtype dtype, const void *const *parts, const int64_t *numels,        \
     const int64_t *offsets, int nparts, void *flat, int64_t flat_numel),      \
    (dtype, parts, numels, offsets, nparts, flat, flat_numel))                 \
  X(embedding,                                                                 \
    (fsdp_dtype dtype, const void *idx, fsdp_dtype idx_dtype,                  \
     const void *table, void *y, int64_t n, int64_t vocab, int64_t dim,        \
     int64_t first, int64_t total),                                            \
    (dtype, idx, idx_dtype, table, y, n, vocab, dim, first, total))            \
  X(embedding_grad,                                                            \
    (fsdp_dtype dtype, const void *idx, fsdp_dtype idx_dtype, const void *dy,  \
     void *dtable, int64_t n, int64_t vocab, int64_t dim, int64_t first,       \
     int64_t total),                                                           \
    (dtype, idx, idx_dtype, dy, dtable, n, vocab, dim, first, total))          \
  X(position_embedding,                                                        \
    (fsdp_dtype dtype, const void *x, const void *table, void *y,              \
     int64_t batch, int64_t seq, int64_t dim),                                 \
    (dtype, x, table, y, batch, seq, dim))                                     \
  X(position_embedding_grad,                                                   \
    (fsdp_dtype dtype, const void *dy, void *dtable, int64_t batch,            \
     int64_t seq, int64_t dim, int64_t positions),                             \
    (dtype, dy, dtable, batch, seq, dim, positions))                           \
  X(layer_norm,                                                                \
    (fsdp_dtype dtype, const void *x, const void *w, const void *b, void *y,   \
     int64_t rows, int64_t dim, double eps),                                   \
    (dtype, x, w, b, y, rows, dim, eps))                                       \
  X(layer_norm_grad,                                                           \
    (fsdp_dtype dtype, const void *x, const void *w, const void *dy, void *dx, \
     void *dw, void *db, int64_t rows, int64_t dim, double eps),               \
    (dtype, x, w, dy, dx, dw, db, rows, dim, eps))                             \
  X(rms_norm,                                                                  \
    (fsdp_dtype dtype, const void *x, const void *w, void *y, int64_t rows,    \
     int64_t dim, double eps),                                                 \
    (dtype, x, w, y, rows, dim, eps))                                          \
  X(rms_norm_grad,                                                             \
    (fsdp_dtype dtype, const void *x, const void *w, const void *dy, void *dx, \
     void *dw, int64_t rows, int64_t dim, double eps),                         \
    (dtype, x, w, dy, dx, dw, rows, dim, eps))                                 \
  X(rope,                                                                      \
    (fsdp_dtype dtype, const void *x, void *y, int64_t batch, int64_t seq,     \
     int64_t heads, int64_t head_dim, double theta, int rope_type,             \
     double factor, double low_freq_factor, double high_freq_factor,           \
     double original_max_positions, double beta_fast, double beta_slow,        \
     int truncate, double attention_factor, int inverse),                      \
    (dtype, x, y, batch, seq, heads, head_dim, theta, rope_type, factor,       \
     low_freq_factor, high_freq_factor, original_max_positions, beta_fast,     \
     beta_slow, truncate, attention_factor, inverse))                          \
  X(attention,                                                                 \
    (fsdp_dtype dtype, const void *q, const void *k, const void *v, void *o,   \
     void *lse, int64_t batch, int64_t seq, int64_t hq, int64_t hkv,           \
     int64_t d),                                                               \
    (dtype, q, k, v, o, lse, batch, seq, hq, hkv, d))                          \
  X(attention_grad,                                                            \
    (fsdp_dtype dtype, const void *q, const void *k, const void *v,            \
     const void *o, const void *lse, const void *dout, void *dq, void *dk,     \
     void *dv, int64_t batch, int64_t seq, int64_t hq, int64_t hkv,            \
     int64_t d),                                                               \
    (dtype, q, k, v, o, lse, dout, dq, dk, dv, batch, seq, hq, hkv, d))        \
  X(split,                                                                     \
    (fsdp_dtype dtype, const void *x, void *const *outs, const int64_t *sizes, \
     int nparts, int64_t outer, int64_t inner),                                \
    (dtype, x, outs, sizes, nparts, outer, inner))                             \
  X(concat,                                                                    \
    (fsdp_dtype dtype, const void *const *ins, void *y, const int64_t *sizes,  \
     int nparts, int64_t outer, int64_t inner),                                \
    (dtype, ins, y, sizes, nparts, outer, inner))

/// A device: memory, two streams, channels and kernels.
struct fsdp_device_s {
  virtual ~fsdp_device_s() = default;

  virtual void *allocate(size_t bytes) = 0;
  virtual void deallocate(void *ptr) = 0;
  virtual void copy(fsdp_stream_s *s, void *dst, const void *src,
                    size_t bytes) = 0;
  virtual void copy2d(fsdp_stream_s *s, void *dst, size_t dpitch,
                      const void *src, size_t spitch, size_t width,
                      size_t height) = 0;
  virtual void zero(fsdp_stream_s *s, void *dst, size_t bytes) = 0;
  /// Blocks until `s` is idle; throws the first deferred kernel error.
  virtual void synchronize(fsdp_stream_s *s) = 0;
  /// Work issued on `s` later runs after `e` (cpu: blocks, completes it).
  virtual void waitEvent(fsdp_stream_s *s, fsdp_event_s *e) = 0;
  virtual std::unique_ptr<fsdp_channel_s> createWorldChannel() = 0;
  /// Fills the memory_* and workspace fields of `out`.
  virtual void memoryStats(fsdp_device_stats &out) = 0;
  virtual void resetMemoryPeak() = 0;
  virtual int64_t progressTests() { return 0; }
  /// Thread-safe (a watchdog's thread calls it): stops the device's
  /// collectives in flight so that a rank waiting on a dead peer returns
  /// (cuda: ncclCommAbort on every NCCL communicator); afterwards every
  /// collective and synchronisation of the device fails with `reason`. The
  /// cpu driver has nothing to abort (its waits are MPI's; the process exit
  /// that follows makes mpirun end the job).
  virtual void abortCollectives(const std::string &reason) { (void)reason; }

#define FSDP_DECLARE_KERNEL(name, params, args)                                \
  virtual void name(fsdp_stream_s *s, FSDP_UNPAREN params) = 0;
  FSDP_DRIVER_KERNELS(FSDP_DECLARE_KERNEL)
#undef FSDP_DECLARE_KERNEL

  /// The largest row pitch one copy2d takes (bytes): cudaMemcpy2DAsync
  /// fails with cudaErrorInvalidValue above cudaDevAttrMaxPitch (2^31 - 1 on
  /// every CUDA GPU so far); the cpu driver keeps the same bound and refuses
  /// larger ones, so that it runs the copies the cuda driver runs
  /// (stridedCopy decides them).
  size_t maxCopyPitch = (size_t{1} << 31) - 1;
  std::string name;        ///< "cpu", "cuda:0"
  std::string collectives; ///< "mpi" or "nccl"
  /// The device's BLAS (fsdp_device_blas); null strings read as "".
  fsdp_blas_info blasInfo{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                          nullptr, nullptr, -1,      0,       0};
  fsdp_stream_s compute{this, FSDP_STREAM_COMPUTE, nullptr};
  fsdp_stream_s comm{this, FSDP_STREAM_COMM, nullptr};
  // Counters of fsdp_device_stats (Runtime.cpp and the channels add to them).
  std::atomic<int64_t> commBytes[3] = {{0}, {0}, {0}};
  std::atomic<int64_t> commWaitNs{0}, computeNs{0};
  std::atomic<int64_t> liveAllocations{0};
};

/// The override declarations of every kernel, for a driver's class body.
#define FSDP_OVERRIDE_KERNEL(name, params, args)                               \
  void name(fsdp_stream_s *s, FSDP_UNPAREN params) override;
#define FSDP_OVERRIDE_KERNELS FSDP_DRIVER_KERNELS(FSDP_OVERRIDE_KERNEL)

namespace fsdp::hal {

/// `height` rows of `width` bytes, row r from src + r·spitch to
/// dst + r·dpitch (fsdp_memcpy_2d; pitches >= width when height > 1), as the
/// copies `d` can take: one 1-D copy when the rows are contiguous (one row,
/// or both pitches equal to the width); one copy2d when both pitches are at
/// most d->maxCopyPitch; otherwise one 1-D copy per row (cudaMemcpy2DAsync
/// refuses a pitch of 2 GiB or more, e.g. a 4 GB f32 bucket of 2 blocks;
/// such a copy has at most bytes / 2 GiB + 1 rows, so the loop is short).
inline void stridedCopy(fsdp_device_s *d, fsdp_stream_s *s, void *dst,
                        size_t dpitch, const void *src, size_t spitch,
                        size_t width, size_t height) {
  if (!width || !height)
    return;
  if (height == 1 || (dpitch == width && spitch == width)) {
    d->copy(s, dst, src, width * height);
    return;
  }
  if (dpitch <= d->maxCopyPitch && spitch <= d->maxCopyPitch) {
    d->copy2d(s, dst, dpitch, src, spitch, width, height);
    return;
  }
  for (size_t r = 0; r < height; ++r)
    d->copy(s, static_cast<char *>(dst) + r * dpitch,
            static_cast<const char *>(src) + r * spitch, width);
}

/// nn.split (toParts) and nn.concat on any driver: `whole` viewed as
/// [outer, Σ sizes, inner] to or from parts[i] [outer, sizes[i], inner], one
/// strided copy (stridedCopy) per part; any dtype. The source is only read.
inline void copyParts(fsdp_device_s *d, fsdp_stream_s *s, fsdp_dtype t,
                      void *whole, void *const *parts, const int64_t *sizes,
                      int nparts, int64_t outer, int64_t inner, bool toParts) {
  size_t es = dtypeSize(t);
  if (!es)
    fail(FSDP_ERR_INVALID,
         toParts ? "fsdp_split: invalid dtype" : "fsdp_concat: invalid dtype");
  int64_t total = 0;
  for (int i = 0; i < nparts; ++i)
    total += sizes[i];
  size_t row = static_cast<size_t>(total * inner) * es;
  char *w = static_cast<char *>(whole);
  for (int i = 0; i < nparts;
       w += static_cast<size_t>(sizes[i++] * inner) * es) {
    size_t chunk = static_cast<size_t>(sizes[i] * inner) * es;
    if (!chunk || !outer)
      continue;
    if (toParts)
      stridedCopy(d, s, parts[i], chunk, w, row, chunk,
                  static_cast<size_t>(outer));
    else
      stridedCopy(d, s, w, row, parts[i], chunk, chunk,
                  static_cast<size_t>(outer));
  }
}

/// Creates the cpu device (runtime/lib/cpu/CpuDevice.cpp).
std::unique_ptr<fsdp_device_s> createCpuDevice(const fsdp_device_options &o);

/// The entry point a cuda driver library exports (extern "C", dlopen'd by
/// Runtime.cpp): creates device `ordinal` (-1: GPU localRank mod the GPUs),
/// or returns null and sets *error to a malloc'd message the caller frees.
using CreateDeviceFn = fsdp_device_s *(*)(int ordinal, int localRank,
                                          const fsdp_device_options *options,
                                          char **error);
inline constexpr const char *kCudaDriverEntry =
    "fsdp_cuda_driver_create_device";
inline constexpr const char *kCudaDriverLibrary = "libfsdp_cuda.so";

} // namespace fsdp::hal

#endif // FSDP_RUNTIME_DRIVER_H
