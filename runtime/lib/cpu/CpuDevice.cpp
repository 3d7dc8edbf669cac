//===- CpuDevice.cpp - the cpu driver: host memory, C++ kernels -----------===//
//
// Device "cpu": device memory is host memory (aligned_alloc), the compute
// stream is the calling thread (a kernel has completed when it returns, and a
// data error is reported by the kernel call itself), the communication
// stream is MPI's non-blocking collectives (CpuChannel.cpp).
//
// Kernels are the templates of Kernels.h / TransformerKernels.h (OpenBLAS
// GEMMs, plain loops). On bf16/f16 tensors a kernel runs the f32 template on
// f32 working copies of its 2-byte operands and rounds each result once
// ("Mixed precision", runtime/docs/schedule-format.md).
//
// Memory measured by the allocator: glibc's bytes in use (mallinfo2
// uordblks + hblkhd: the arenas' allocated chunks, which exclude the free
// fast-bin ones, plus mmapped chunks; chunks in the per-thread cache count
// as in use) are sampled after every device allocation, after a kernel's
// scratch (the f32 copies, attention's probabilities, ...) is allocated,
// and after a collective starts, by HeapMeter.h (which skips a sample that
// provably cannot raise the mark); the device reports the high-water mark
// of those samples less the bytes in use when it was created. The samples
// cover the whole process (host copies included).
//
//===----------------------------------------------------------------------===//
#include "Blas.h"
#include "CpuDriver.h"
#include "CpuStage.h"
#include "HeapMeter.h"
#include "KernelUtil.h"
#include "Kernels.h"
#include "TransformerKernels.h"
#include "VocabParallelKernels.h"

#include "../mpi/Mpi.h"
#include "fsdp/ElementMath.h"
#include "fsdp/Half.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace fsdp::hal::cpu {

namespace {

namespace k = fsdp::rt::cpu;
namespace math = fsdp::math;
namespace heap = fsdp::rt::cpu::detail;

constexpr size_t kAlign = 256;

/// A skipped update (kernels.h, skip_if_nonfinite): outputs = inputs.
bool skipped(const double *skip, fsdp_dtype t, int64_t n,
             std::initializer_list<std::pair<const void *, void *>> io) {
  if (!math::skipsUpdate(skip))
    return false;
  for (auto [in, out] : io)
    if (in != out) // copied where they do not alias
      std::memmove(out, in, static_cast<size_t>(n) * hal::dtypeSize(t));
  return true;
}

/// The optimizer updates run on f32 or f64 only ("Mixed precision": the
/// compiler keeps f32 masters).
void checkWide(fsdp_dtype t, const char *op) {
  if (t != FSDP_F32 && t != FSDP_F64)
    fail(FSDP_ERR_INVALID, std::string(op) + ": dtype must be f32 or f64");
}

int64_t loadIndex(const void *p, fsdp_dtype t, const char *what) {
  if (t == FSDP_I32)
    return *static_cast<const int32_t *>(p);
  if (t == FSDP_I64)
    return *static_cast<const int64_t *>(p);
  fail(FSDP_ERR_INVALID, std::string(what) + " must be i32 or i64");
}

double loadDouble(const void *p, fsdp_dtype t, int64_t i) {
  switch (t) {
  case FSDP_F32:
    return static_cast<const float *>(p)[i];
  case FSDP_F64:
    return static_cast<const double *>(p)[i];
  case FSDP_I32:
    return static_cast<const int32_t *>(p)[i];
  case FSDP_I64:
    return static_cast<double>(static_cast<const int64_t *>(p)[i]);
  case FSDP_BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDP_F16:
    return f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}

const k::BlasInfo &blasOrFail() {
  try {
    return k::selectBlas();
  } catch (const std::exception &e) {
    fail(FSDP_ERR_DEVICE, std::string("device 'cpu': ") + e.what());
  }
}

class CpuDevice final : public fsdp_device_s {
public:
  explicit CpuDevice(const fsdp_device_options &) {
    name = "cpu";
    collectives = "mpi";
    // Before the first GEMM: OpenBLAS's kernels chosen and checked once.
    const k::BlasInfo &b = blasOrFail();
    blasInfo = {b.library.c_str(),    b.version.c_str(),  b.core.c_str(),
                b.coreAtLoad.c_str(), b.chosenBy.c_str(), b.cpuIsa.c_str(),
                b.warning.c_str(),    b.note.c_str(),     b.selfTestMaxRelError,
                b.selfTestGflops,     b.genericGflops};
    heap::resetHeapPeak();
    heapBase = heap::heapNow();
    testsBase = progressThreadTests();
  }

  void *allocate(size_t bytes) override {
    size_t total = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    if (total < bytes)
      fail(FSDP_ERR_NOMEM, "fsdp_device_alloc: size overflow");
    void *p = std::aligned_alloc(kAlign, total);
    if (!p)
      fail(FSDP_ERR_NOMEM, "fsdp_device_alloc: out of memory allocating " +
                               std::to_string(bytes) + " bytes");
    heap::heapAllocated(p, /*aligned=*/true);
    heap::sampleHeap();
    return p;
  }
  void deallocate(void *p) override {
    heap::heapFreeing(p);
    std::free(p);
  }
  void copy(fsdp_stream_s *, void *dst, const void *src,
            size_t bytes) override {
    if (bytes)
      std::memmove(dst, src, bytes);
  }
  void copy2d(fsdp_stream_s *, void *dst, size_t dpitch, const void *src,
              size_t spitch, size_t width, size_t height) override {
    // cudaMemcpy2DAsync's bound, so that a caller that skips stridedCopy
    // fails here as it would on the GPU.
    if (dpitch > maxCopyPitch || spitch > maxCopyPitch)
      fail(FSDP_ERR_INVALID, "copy2d: a pitch of " +
                                 std::to_string(std::max(dpitch, spitch)) +
                                 " bytes is above the driver's maximum " +
                                 std::to_string(maxCopyPitch));
    for (size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char *>(dst) + r * dpitch,
                  static_cast<const char *>(src) + r * spitch, width);
  }
  void zero(fsdp_stream_s *, void *dst, size_t bytes) override {
    if (bytes)
      std::memset(dst, 0, bytes);
  }
  void synchronize(fsdp_stream_s *) override {}
  void waitEvent(fsdp_stream_s *s, fsdp_event_s *e) override {
    // The communication stream is MPI itself: a collective started after an
    // event's work already follows it. Compute is this thread: block.
    if (s->kind != FSDP_STREAM_COMPUTE)
      return;
    auto *ce = static_cast<CpuEvent *>(e);
    if (ce->finished)
      return;
    double t0 = fsdp_now();
    ce->finish();
    commWaitNs += static_cast<int64_t>((fsdp_now() - t0) * 1e9);
  }
  std::unique_ptr<fsdp_channel_s> createWorldChannel() override {
    return cpu::createWorldChannel(this);
  }
  void memoryStats(fsdp_device_stats &o) override {
    o.memory_in_use_bytes = heap::heapNow() - heapBase;
    o.memory_peak_bytes = heap::heapPeak() - heapBase;
    o.workspace_bytes = 0;
    o.comm_buffer_bytes = 0;
  }
  void resetMemoryPeak() override {
    heap::resetHeapPeak();
    testsBase = progressThreadTests();
  }
  int64_t progressTests() override { return progressThreadTests() - testsBase; }

  FSDP_OVERRIDE_KERNELS

private:
  int64_t heapBase = 0;
  int64_t testsBase = 0;
};

//===--- Kernels ----------------------------------------------------------===//

void CpuDevice::fill(fsdp_stream_s *, fsdp_dtype t, void *y, int64_t n,
                     double value) {
  switch (t) {
  case FSDP_F32:
    k::fill(static_cast<float *>(y), n, value);
    break;
  case FSDP_F64:
    k::fill(static_cast<double *>(y), n, value);
    break;
  case FSDP_I32:
    k::fill(static_cast<int32_t *>(y), n, value);
    break;
  case FSDP_I64:
    k::fill(static_cast<int64_t *>(y), n, value);
    break;
  case FSDP_BF16:
  case FSDP_F16: {
    // Through f32, so that a constant equals nn.cast of its f32 rounding.
    float f = static_cast<float>(value);
    uint16_t h = t == FSDP_BF16 ? floatToBf16(f) : floatToF16(f);
    std::fill(static_cast<uint16_t *>(y), static_cast<uint16_t *>(y) + n, h);
    break;
  }
  default:
    fail(FSDP_ERR_INVALID, "fsdp_fill: invalid dtype");
  }
}

void CpuDevice::cast(fsdp_stream_s *, fsdp_dtype st, const void *src,
                     fsdp_dtype dt, void *dst, int64_t n) {
  if (!isFloat(st) || !isFloat(dt))
    fail(FSDP_ERR_INVALID, "fsdp_cast: float dtypes only");
  if (st == dt) {
    std::memmove(dst, src, static_cast<size_t>(n) * hal::dtypeSize(st));
    return;
  }
  if (st == FSDP_F64 && isHalf(dt)) { // one rounding, not two
    const double *s = static_cast<const double *>(src);
    uint16_t *d = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = dt == FSDP_BF16 ? doubleToBf16(s[i]) : doubleToF16(s[i]);
    return;
  }
  if (dt == FSDP_F64) { // widening is exact
    double *d = static_cast<double *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = loadDouble(src, st, i);
    return;
  }
  // st is f32 or 2-byte and dt f32 or 2-byte (different), or f64 -> f32.
  for (int64_t i = 0; i < n; ++i) {
    float v = st == FSDP_F64
                  ? static_cast<float>(static_cast<const double *>(src)[i])
                  : static_cast<float>(loadDouble(src, st, i));
    if (dt == FSDP_F32)
      static_cast<float *>(dst)[i] = v;
    else
      static_cast<uint16_t *>(dst)[i] =
          dt == FSDP_BF16 ? floatToBf16(v) : floatToF16(v);
  }
}

void CpuDevice::init_values(fsdp_stream_s *, fsdp_dtype t, void *y,
                            fsdp_dtype mt, void *master, int64_t n,
                            int64_t seed, int64_t fqnHash, int64_t first,
                            int kind, double value, int threads) {
  checkInitValues(t, master, mt, n, kind);
  k::initValues(t, y, mt, master, n, static_cast<uint64_t>(seed),
                static_cast<uint64_t>(fqnHash), static_cast<uint64_t>(first),
                kind, value, threads);
}

void CpuDevice::linear(fsdp_stream_s *, fsdp_dtype t, const void *x,
                       const void *w, const void *b, void *y, int64_t m,
                       int64_t kk, int64_t n, int transposeWeight) {
  floatKernel(t, "fsdp_linear", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::linear<T>(st.in<T>(x, m * kk), st.in<T>(w, n * kk),
                 b ? st.in<T>(b, n) : nullptr, st.out<T>(y, m * n), m, kk, n,
                 transposeWeight != 0);
  });
}

void CpuDevice::matmul(fsdp_stream_s *, fsdp_dtype t, const void *a,
                       const void *b, void *c, int64_t aRows, int64_t aCols,
                       int64_t bRows, int64_t bCols, int transA, int transB) {
  int64_t m = transA ? aCols : aRows, n = transB ? bRows : bCols;
  floatKernel(t, "fsdp_matmul", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::matmul<T>(st.in<T>(a, aRows * aCols), st.in<T>(b, bRows * bCols),
                 st.out<T>(c, m * n), aRows, aCols, bRows, bCols, transA != 0,
                 transB != 0);
  });
}

void CpuDevice::add(fsdp_stream_s *, fsdp_dtype t, const void *a, const void *b,
                    void *c, int64_t n) {
  floatKernel(t, "fsdp_add", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::add<T>(st.in<T>(a, n), st.in<T>(b, n), st.out<T>(c, n), n);
  });
}

void CpuDevice::mul(fsdp_stream_s *, fsdp_dtype t, const void *a, const void *b,
                    void *c, int64_t n) {
  floatKernel(t, "fsdp_mul", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::mul<T>(st.in<T>(a, n), st.in<T>(b, n), st.out<T>(c, n), n);
  });
}

void CpuDevice::relu(fsdp_stream_s *, fsdp_dtype t, const void *x, void *y,
                     int64_t n) {
  floatKernel(t, "fsdp_relu", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::relu<T>(st.in<T>(x, n), st.out<T>(y, n), n);
  });
}

void CpuDevice::relu_grad(fsdp_stream_s *, fsdp_dtype t, const void *x,
                          const void *dy, void *dx, int64_t n) {
  floatKernel(t, "fsdp_relu_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::reluGrad<T>(st.in<T>(x, n), st.in<T>(dy, n), st.out<T>(dx, n), n);
  });
}

void CpuDevice::gelu(fsdp_stream_s *, fsdp_dtype t, const void *x, void *y,
                     int64_t n, int approxTanh) {
  floatKernel(t, "fsdp_gelu", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::gelu<T>(st.in<T>(x, n), st.out<T>(y, n), n, approxTanh != 0);
  });
}

void CpuDevice::gelu_grad(fsdp_stream_s *, fsdp_dtype t, const void *x,
                          const void *dy, void *dx, int64_t n, int approxTanh) {
  floatKernel(t, "fsdp_gelu_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::geluGrad<T>(st.in<T>(x, n), st.in<T>(dy, n), st.out<T>(dx, n), n,
                   approxTanh != 0);
  });
}

void CpuDevice::silu(fsdp_stream_s *, fsdp_dtype t, const void *x, void *y,
                     int64_t n) {
  floatKernel(t, "fsdp_silu", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::silu<T>(st.in<T>(x, n), st.out<T>(y, n), n);
  });
}

void CpuDevice::silu_grad(fsdp_stream_s *, fsdp_dtype t, const void *x,
                          const void *dy, void *dx, int64_t n) {
  floatKernel(t, "fsdp_silu_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::siluGrad<T>(st.in<T>(x, n), st.in<T>(dy, n), st.out<T>(dx, n), n);
  });
}

int64_t product(const int64_t *shape, int rank) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    n *= shape[i];
  return n;
}

/// Elements of `shape` without `axes` (the reduced side of reduce_sum).
int64_t keptNumel(const int64_t *shape, int rank, const int64_t *axes,
                  int naxes) {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i)
    if (std::find(axes, axes + naxes, i) == axes + naxes)
      n *= shape[i];
  return n;
}

void CpuDevice::reduce_sum(fsdp_stream_s *, fsdp_dtype t, const void *x,
                           const int64_t *xShape, int rank, const int64_t *axes,
                           int naxes, void *y) {
  std::vector<int64_t> shape(xShape, xShape + rank), ax(axes, axes + naxes);
  floatKernel(t, "fsdp_reduce_sum", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::reduceSum<T>(st.in<T>(x, product(xShape, rank)), shape, ax,
                    st.out<T>(y, keptNumel(xShape, rank, axes, naxes)));
  });
}

void CpuDevice::broadcast(fsdp_stream_s *, fsdp_dtype t, const void *x,
                          const int64_t *yShape, int rank, const int64_t *axes,
                          int naxes, void *y) {
  std::vector<int64_t> shape(yShape, yShape + rank), ax(axes, axes + naxes);
  floatKernel(t, "fsdp_broadcast", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::broadcast<T>(st.in<T>(x, keptNumel(yShape, rank, axes, naxes)), shape,
                    ax, st.out<T>(y, product(yShape, rank)));
  });
}

void CpuDevice::cross_entropy(fsdp_stream_s *, fsdp_dtype t, const void *logits,
                              const void *labels, fsdp_dtype lt,
                              int64_t positions, int64_t classes, void *loss) {
  checkIndexType(lt, "fsdp_cross_entropy: labels");
  floatKernel(t, "fsdp_cross_entropy", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *l = st.in<T>(logits, positions * classes);
    T v =
        lt == FSDP_I32
            ? k::crossEntropy<T, int32_t>(
                  l, static_cast<const int32_t *>(labels), positions, classes)
            : k::crossEntropy<T, int64_t>(
                  l, static_cast<const int64_t *>(labels), positions, classes);
    // bf16/f16 logits: the loss is f32 (T, the compute type), not rounded.
    if (isHalf(t))
      *static_cast<float *>(loss) = static_cast<float>(v);
    else
      *st.out<T>(loss, 1) = v;
  });
}

void CpuDevice::cross_entropy_grad(fsdp_stream_s *, fsdp_dtype t,
                                   const void *logits, const void *labels,
                                   fsdp_dtype lt, const void *dloss,
                                   void *dlogits, int64_t positions,
                                   int64_t classes) {
  checkIndexType(lt, "fsdp_cross_entropy_grad: labels");
  floatKernel(t, "fsdp_cross_entropy_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t n = positions * classes;
    const T *l = st.in<T>(logits, n);
    // dloss is f32 for bf16/f16 logits (the loss dtype), else of t.
    T d = isHalf(t) ? static_cast<T>(*static_cast<const float *>(dloss))
                    : *st.in<T>(dloss, 1);
    T *out = st.out<T>(dlogits, n);
    if (lt == FSDP_I32)
      k::crossEntropyGrad<T, int32_t>(l, static_cast<const int32_t *>(labels),
                                      d, out, positions, classes);
    else
      k::crossEntropyGrad<T, int64_t>(l, static_cast<const int64_t *>(labels),
                                      d, out, positions, classes);
  });
}

// The vocab-parallel cross-entropy: VocabParallelKernels.cpp.
void CpuDevice::vocab_ce_stats(fsdp_stream_s *, fsdp_dtype t, const void *lg,
                               const void *lb, fsdp_dtype lt, int64_t n,
                               int64_t c, int64_t first, int64_t total,
                               int64_t tp, int64_t slot, void *stats) {
  vocabCeStatsKernel(t, lg, lb, lt, n, c, first, total, tp, slot, stats);
}
void CpuDevice::vocab_ce_loss(fsdp_stream_s *, fsdp_dtype t, const void *stats,
                              int64_t n, int64_t tp, void *loss) {
  vocabCeLossKernel(t, stats, n, tp, loss);
}
void CpuDevice::vocab_ce_grad(fsdp_stream_s *, fsdp_dtype t, const void *lg,
                              const void *lb, fsdp_dtype lt, const void *st,
                              const void *dl, void *out, int64_t n, int64_t c,
                              int64_t first, int64_t tp) {
  vocabCeGradKernel(t, lg, lb, lt, st, dl, out, n, c, first, tp);
}

void CpuDevice::sgd_update(fsdp_stream_s *, fsdp_dtype t, const void *p,
                           const void *g, void *out, int64_t n, double lr,
                           double weightDecay, const double *skip) {
  checkWide(t, "fsdp_sgd_update");
  if (skipped(skip, t, n, {{p, out}}))
    return;
  floatKernel(t, "fsdp_sgd_update", [&](auto tag, Stage &) {
    using T = decltype(tag);
    k::sgdUpdate<T>(static_cast<const T *>(p), static_cast<const T *>(g),
                    static_cast<T *>(out), n, lr, weightDecay);
  });
}

void CpuDevice::adamw_update(fsdp_stream_s *, fsdp_dtype t, const void *p,
                             const void *g, const void *m, const void *v,
                             const void *step, fsdp_dtype stepType, void *pOut,
                             void *mOut, void *vOut, int64_t n, double lr,
                             double beta1, double beta2, double eps,
                             double weightDecay, const double *skip) {
  checkWide(t, "fsdp_adamw_update");
  int64_t stepValue = loadIndex(step, stepType, "fsdp_adamw_update: step");
  if (skipped(skip, t, n, {{p, pOut}, {m, mOut}, {v, vOut}}))
    return;
  floatKernel(t, "fsdp_adamw_update", [&](auto tag, Stage &) {
    using T = decltype(tag);
    k::adamwUpdate<T>(static_cast<const T *>(p), static_cast<const T *>(g),
                      static_cast<const T *>(m), static_cast<const T *>(v),
                      stepValue, static_cast<T *>(pOut), static_cast<T *>(mOut),
                      static_cast<T *>(vOut), n, lr, beta1, beta2, eps,
                      weightDecay);
  });
}

void CpuDevice::sgd_update_lr(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                              const void *g, void *out, int64_t n,
                              const double *lr, double weightDecay,
                              const double *skip) {
  sgd_update(s, t, p, g, out, n, *lr, weightDecay, skip);
}

void CpuDevice::adamw_update_lr(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                                const void *g, const void *m, const void *v,
                                const void *step, fsdp_dtype stepType,
                                void *pOut, void *mOut, void *vOut, int64_t n,
                                const double *lr, double beta1, double beta2,
                                double eps, double weightDecay,
                                const double *skip) {
  adamw_update(s, t, p, g, m, v, step, stepType, pOut, mOut, vOut, n, *lr,
               beta1, beta2, eps, weightDecay, skip);
}

void CpuDevice::lr_schedule(fsdp_stream_s *, const void *step,
                            fsdp_dtype stepType, double *lr, int kind,
                            double baseLr, int64_t warmup,
                            const int64_t *decayDevice, int64_t decay,
                            double minLr) {
  int64_t t = loadIndex(step, stepType, "fsdp_lr_schedule: step");
  if (decayDevice) {
    decay = loadIndex(decayDevice, FSDP_I64, "fsdp_lr_schedule: total steps");
    if (decay < 1)
      fail(FSDP_ERR_DATA, "fsdp_lr_schedule: total steps must be >= 1, got " +
                              std::to_string(decay));
  }
  if (t < 1)
    fail(FSDP_ERR_DATA,
         "fsdp_lr_schedule: step must be >= 1, got " + std::to_string(t));
  if (kind < FSDP_LR_CONSTANT || kind > FSDP_LR_COSINE)
    fail(FSDP_ERR_INVALID,
         "fsdp_lr_schedule: unknown kind " + std::to_string(kind));
  *lr = math::scheduledLr(kind, t, baseLr, warmup, decay, minLr);
}

void CpuDevice::dropout(fsdp_stream_s *, fsdp_dtype t, const void *x, void *y,
                        int64_t n, double rate, int64_t seed, const void *step,
                        fsdp_dtype stepType, int64_t first, int64_t chunk,
                        int64_t stride, int64_t chunkFirst) {
  if (!(rate >= 0) || !(rate < 1))
    fail(FSDP_ERR_INVALID,
         "fsdp_dropout: rate must be in [0, 1), got " + std::to_string(rate));
  if (chunk < 1)
    fail(FSDP_ERR_INVALID,
         "fsdp_dropout: chunk must be >= 1, got " + std::to_string(chunk));
  int64_t stepValue = loadIndex(step, stepType, "fsdp_dropout: step");
  floatKernel(t, "fsdp_dropout", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *xs = st.in<T>(x, n);
    T *ys = st.out<T>(y, n);
    T scale = static_cast<T>(1.0 / (1.0 - rate));
    for (int64_t i = 0; i < n; ++i)
      ys[i] = math::dropout(
          xs[i],
          math::dropoutKeeps(
              seed, stepValue,
              math::dropoutIndex(first, chunk, stride, chunkFirst, i), rate),
          scale);
  });
}

void CpuDevice::sum_squares(fsdp_stream_s *, fsdp_dtype t, const void *x,
                            int64_t n, double *out) {
  floatKernel(t, "fsdp_sum_squares", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *xs = st.in<T>(x, n);
    double sum = 0; // statistics accumulate in double
    for (int64_t i = 0; i < n; ++i)
      sum += static_cast<double>(xs[i]) * static_cast<double>(xs[i]);
    *out = sum;
  });
}

void CpuDevice::grad_norm(fsdp_stream_s *, const double *sumSquares,
                          double maxNorm, const double *lossScale, double *norm,
                          double *coef) {
  math::unscaledGradNorm(*sumSquares, maxNorm, lossScale ? *lossScale : 1.0,
                         *norm, *coef);
}

void CpuDevice::scale(fsdp_stream_s *, fsdp_dtype t, const void *x,
                      const double *factor, void *y, int64_t n) {
  floatKernel(t, "fsdp_scale", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *xs = st.in<T>(x, n);
    T c = static_cast<T>(*factor);
    T *ys = st.out<T>(y, n);
    for (int64_t i = 0; i < n; ++i)
      ys[i] = xs[i] * c;
  });
}

void CpuDevice::flatten(fsdp_stream_s *, fsdp_dtype t, const void *const *parts,
                        const int64_t *numels, const int64_t *offsets,
                        int nparts, void *flat, int64_t flatNumel) {
  std::vector<int64_t> ns(numels, numels + nparts),
      offs(offsets, offsets + nparts);
  floatKernel(t, "fsdp_flatten", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::flatten<T>(st.ins<T>(parts, numels, nparts), ns, offs,
                  st.out<T>(flat, flatNumel), flatNumel);
  });
}

void CpuDevice::embedding(fsdp_stream_s *, fsdp_dtype t, const void *idx,
                          fsdp_dtype it, const void *table, void *y, int64_t n,
                          int64_t vocab, int64_t dim, int64_t first,
                          int64_t total) {
  checkIndexType(it, "fsdp_embedding: indices");
  floatKernel(t, "fsdp_embedding", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *tb = st.in<T>(table, vocab * dim);
    T *out = st.out<T>(y, n * dim);
    if (it == FSDP_I32)
      k::embedding<T, int32_t>(static_cast<const int32_t *>(idx), tb, out, n,
                               vocab, dim, first, total);
    else
      k::embedding<T, int64_t>(static_cast<const int64_t *>(idx), tb, out, n,
                               vocab, dim, first, total);
  });
}

void CpuDevice::embedding_grad(fsdp_stream_s *, fsdp_dtype t, const void *idx,
                               fsdp_dtype it, const void *dy, void *dtable,
                               int64_t n, int64_t vocab, int64_t dim,
                               int64_t first, int64_t total) {
  checkIndexType(it, "fsdp_embedding_grad: indices");
  floatKernel(t, "fsdp_embedding_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *g = st.in<T>(dy, n * dim);
    T *out = st.out<T>(dtable, vocab * dim);
    if (it == FSDP_I32)
      k::embeddingGrad<T, int32_t>(static_cast<const int32_t *>(idx), g, out, n,
                                   vocab, dim, first, total);
    else
      k::embeddingGrad<T, int64_t>(static_cast<const int64_t *>(idx), g, out, n,
                                   vocab, dim, first, total);
  });
}

void CpuDevice::position_embedding(fsdp_stream_s *, fsdp_dtype t, const void *x,
                                   const void *table, void *y, int64_t batch,
                                   int64_t seq, int64_t dim) {
  floatKernel(t, "fsdp_position_embedding", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t n = batch * seq * dim;
    k::positionEmbedding<T>(st.in<T>(x, n), st.in<T>(table, seq * dim),
                            st.out<T>(y, n), batch, seq, dim);
  });
}

void CpuDevice::position_embedding_grad(fsdp_stream_s *, fsdp_dtype t,
                                        const void *dy, void *dtable,
                                        int64_t batch, int64_t seq, int64_t dim,
                                        int64_t positions) {
  floatKernel(t, "fsdp_position_embedding_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::positionEmbeddingGrad<T>(st.in<T>(dy, batch * seq * dim),
                                st.out<T>(dtable, positions * dim), batch, seq,
                                dim, positions);
  });
}

void CpuDevice::layer_norm(fsdp_stream_s *, fsdp_dtype t, const void *x,
                           const void *w, const void *b, void *y, int64_t rows,
                           int64_t dim, double eps) {
  floatKernel(t, "fsdp_layer_norm", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::layerNorm<T>(st.in<T>(x, rows * dim), st.in<T>(w, dim), st.in<T>(b, dim),
                    st.out<T>(y, rows * dim), rows, dim, eps);
  });
}

void CpuDevice::layer_norm_grad(fsdp_stream_s *, fsdp_dtype t, const void *x,
                                const void *w, const void *dy, void *dx,
                                void *dw, void *db, int64_t rows, int64_t dim,
                                double eps) {
  floatKernel(t, "fsdp_layer_norm_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t n = rows * dim;
    k::layerNormGrad<T>(st.in<T>(x, n), st.in<T>(w, dim), st.in<T>(dy, n),
                        st.out<T>(dx, n), st.out<T>(dw, dim),
                        st.out<T>(db, dim), rows, dim, eps);
  });
}

void CpuDevice::rms_norm(fsdp_stream_s *, fsdp_dtype t, const void *x,
                         const void *w, void *y, int64_t rows, int64_t dim,
                         double eps) {
  floatKernel(t, "fsdp_rms_norm", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    k::rmsNorm<T>(st.in<T>(x, rows * dim), st.in<T>(w, dim),
                  st.out<T>(y, rows * dim), rows, dim, eps);
  });
}

void CpuDevice::rms_norm_grad(fsdp_stream_s *, fsdp_dtype t, const void *x,
                              const void *w, const void *dy, void *dx, void *dw,
                              int64_t rows, int64_t dim, double eps) {
  floatKernel(t, "fsdp_rms_norm_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t n = rows * dim;
    k::rmsNormGrad<T>(st.in<T>(x, n), st.in<T>(w, dim), st.in<T>(dy, n),
                      st.out<T>(dx, n), st.out<T>(dw, dim), rows, dim, eps);
  });
}

void CpuDevice::rope(fsdp_stream_s *, fsdp_dtype t, const void *x, void *y,
                     int64_t batch, int64_t seq, int64_t heads, int64_t headDim,
                     double theta, int ropeType, double factor,
                     double lowFreqFactor, double highFreqFactor,
                     double originalMaxPositions, double betaFast,
                     double betaSlow, int truncate, double attentionFactor,
                     int inverse) {
  math::RopeScaling scaling = ropeScaling(
      headDim, ropeType, factor, lowFreqFactor, highFreqFactor,
      originalMaxPositions, betaFast, betaSlow, truncate, attentionFactor);
  floatKernel(t, "fsdp_rope", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t n = batch * seq * heads * headDim;
    k::rope<T>(st.in<T>(x, n), st.out<T>(y, n), batch, seq, heads, headDim,
               theta, scaling, inverse != 0);
  });
}

// The statistics (lse) are in the compute type T already (f32 for 2-byte
// dtypes): they are read and written in place, never staged. The backward
// takes rowsum(dP⊙P) from the rebuilt P (AttentionKernels.cpp), so it does not
// read o, which cuDNN's backward does.
void CpuDevice::attention(fsdp_stream_s *, fsdp_dtype t, const void *q,
                          const void *kk, const void *v, void *o, void *lse,
                          int64_t batch, int64_t seq, int64_t hq, int64_t hkv,
                          int64_t d) {
  floatKernel(t, "fsdp_attention", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t nq = batch * seq * hq * d, nk = batch * seq * hkv * d;
    k::attention<T>(st.in<T>(q, nq), st.in<T>(kk, nk), st.in<T>(v, nk),
                    st.out<T>(o, nq), static_cast<T *>(lse), batch, seq, hq,
                    hkv, d);
  });
}

void CpuDevice::attention_grad(fsdp_stream_s *, fsdp_dtype t, const void *q,
                               const void *kk, const void *v, const void *,
                               const void *lse, const void *dout, void *dq,
                               void *dk, void *dv, int64_t batch, int64_t seq,
                               int64_t hq, int64_t hkv, int64_t d) {
  floatKernel(t, "fsdp_attention_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t nq = batch * seq * hq * d, nk = batch * seq * hkv * d;
    k::attentionGrad<T>(st.in<T>(q, nq), st.in<T>(kk, nk), st.in<T>(v, nk),
                        static_cast<const T *>(lse), st.in<T>(dout, nq),
                        st.out<T>(dq, nq), st.out<T>(dk, nk), st.out<T>(dv, nk),
                        batch, seq, hq, hkv, d);
  });
}

void CpuDevice::split(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                      void *const *outs, const int64_t *sizes, int nparts,
                      int64_t outer, int64_t inner) {
  copyParts(this, s, t, const_cast<void *>(x), outs, sizes, nparts, outer,
            inner,
            /*toParts=*/true);
}

void CpuDevice::concat(fsdp_stream_s *s, fsdp_dtype t, const void *const *ins,
                       void *y, const int64_t *sizes, int nparts, int64_t outer,
                       int64_t inner) {
  copyParts(this, s, t, y, const_cast<void *const *>(ins), sizes, nparts, outer,
            inner, /*toParts=*/false);
}

} // namespace

} // namespace fsdp::hal::cpu

std::unique_ptr<fsdp_device_s>
fsdp::hal::createCpuDevice(const fsdp_device_options &o) {
  return std::make_unique<cpu::CpuDevice>(o);
}
