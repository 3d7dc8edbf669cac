//===- CudaKernels.cu - the cuda driver's kernels -------------------------===//
//
// Every entry point of fsdp/kernels.h on the GPU. GEMMs are cuBLAS
// (cublasGemmEx, f32 accumulation; f64 in f64); the other ops are CUDA
// kernels whose per-element math is fsdp/ElementMath.h and fsdp/Half.h, the
// code the cpu driver runs (compiled with --fmad=false so that products are
// not fused differently). On bf16/f16 a kernel loads each element into f32,
// computes, and rounds each result once; attention (whose GEMMs run on whole
// matrices) widens its operands into f32 scratch first, as the cpu driver
// does. Statistics accumulate in double; reductions over rows run in the cpu
// driver's order where a thread owns a column (norm weight gradients,
// position-embedding gradients, reduce_sum) and as a tree within a block
// otherwise (row means, softmax sums). The embedding gradient's scatter-add
// uses atomics (no fixed order). A data error is recorded in the device's
// error record (the first one wins) and thrown by the next synchronisation.
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"

#include "fsdp/ElementMath.h"
#include "fsdp/Half.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

namespace fsdp::hal::cuda {

namespace {

constexpr int kThreads = 256;

int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(b, 1 << 16)));
}

void launched(const char *what) { check(cudaGetLastError(), what); }

//===--- Element types
//---------------------------------------------------------===//

/// Storage type S and compute type C of a float dtype, with the load and
/// the rounding store.
template <int DT> struct Elt;
template <> struct Elt<FSDP_F32> {
  using S = float;
  using C = float;
  __device__ static C ld(const S *p, int64_t i) { return p[i]; }
  __device__ static S st(C v) { return v; }
};
template <> struct Elt<FSDP_F64> {
  using S = double;
  using C = double;
  __device__ static C ld(const S *p, int64_t i) { return p[i]; }
  __device__ static S st(C v) { return v; }
};
template <> struct Elt<FSDP_BF16> {
  using S = uint16_t;
  using C = float;
  __device__ static C ld(const S *p, int64_t i) { return bf16ToFloat(p[i]); }
  __device__ static S st(C v) { return floatToBf16(v); }
};
template <> struct Elt<FSDP_F16> {
  using S = uint16_t;
  using C = float;
  __device__ static C ld(const S *p, int64_t i) { return f16ToFloat(p[i]); }
  __device__ static S st(C v) { return floatToF16(v); }
};

template <int V> using DtTag = std::integral_constant<int, V>;

/// Calls fn(DtTag<dtype>) for a float dtype.
template <typename Fn> void floatDtype(fsdp_dtype t, const char *op, Fn &&fn) {
  switch (t) {
  case FSDP_F32:
    fn(DtTag<FSDP_F32>{});
    return;
  case FSDP_F64:
    fn(DtTag<FSDP_F64>{});
    return;
  case FSDP_BF16:
    fn(DtTag<FSDP_BF16>{});
    return;
  case FSDP_F16:
    fn(DtTag<FSDP_F16>{});
    return;
  default:
    fail(FSDP_ERR_INVALID,
         std::string(op) + ": dtype must be f32, f64, bf16 or f16");
  }
}

/// f32 or f64 only (the optimizer updates).
template <typename Fn> void wideDtype(fsdp_dtype t, const char *op, Fn &&fn) {
  if (t == FSDP_F32)
    fn(DtTag<FSDP_F32>{});
  else if (t == FSDP_F64)
    fn(DtTag<FSDP_F64>{});
  else
    fail(FSDP_ERR_INVALID, std::string(op) + ": dtype must be f32 or f64");
}

__device__ int64_t loadIndex(const void *p, int isI64, int64_t i) {
  return isI64 ? static_cast<const int64_t *>(p)[i]
               : static_cast<const int32_t *>(p)[i];
}

__device__ void report(DeviceErrors *e, int kind, long long value,
                       long long position, long long bound) {
  if (atomicCAS(&e->flag, 0, -1) == 0) {
    e->value = value;
    e->position = position;
    e->bound = bound;
    __threadfence();
    atomicExch(&e->flag, kind);
  }
}

//===--- Block reductions (blockDim.x == kThreads)
//----------------------------===//

__device__ double blockSum(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

__device__ double blockMax(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

#define FSDP_GRID_LOOP(i, n)                                                   \
  for (int64_t i =                                                             \
           blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;        \
       i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

//===--- Elementwise
//------------------------------------------------------------===//

template <typename T> __global__ void fillK(T *y, int64_t n, T v) {
  FSDP_GRID_LOOP(i, n) y[i] = v;
}

__device__ double loadAny(const void *p, int t, int64_t i) {
  switch (t) {
  case FSDP_F32:
    return static_cast<const float *>(p)[i];
  case FSDP_F64:
    return static_cast<const double *>(p)[i];
  case FSDP_BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDP_F16:
    return f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}

// The cpu driver's nn.cast: f64 -> 2-byte rounds once; widening is exact;
// otherwise through f32.
__global__ void castK(const void *src, int st, void *dst, int dt, int64_t n) {
  FSDP_GRID_LOOP(i, n) {
    if (st == FSDP_F64 && (dt == FSDP_BF16 || dt == FSDP_F16)) {
      double d = static_cast<const double *>(src)[i];
      static_cast<uint16_t *>(dst)[i] =
          dt == FSDP_BF16 ? doubleToBf16(d) : doubleToF16(d);
    } else if (dt == FSDP_F64) {
      static_cast<double *>(dst)[i] = loadAny(src, st, i);
    } else {
      float v = static_cast<float>(loadAny(src, st, i));
      if (dt == FSDP_F32)
        static_cast<float *>(dst)[i] = v;
      else
        static_cast<uint16_t *>(dst)[i] =
            dt == FSDP_BF16 ? floatToBf16(v) : floatToF16(v);
    }
  }
}

void launchCast(const void *src, fsdp_dtype st, void *dst, fsdp_dtype dt,
                int64_t n, cudaStream_t s) {
  if (n == 0)
    return;
  castK<<<blocksFor(n), kThreads, 0, s>>>(src, st, dst, dt, n);
  launched("cast kernel");
}

struct AddOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    return a + b;
  }
};
struct MulOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    return a * b;
  }
};
struct ReluOp {
  template <typename C> __device__ C operator()(C x) const {
    return math::relu(x);
  }
};
struct ReluGradOp {
  template <typename C> __device__ C operator()(C x, C dy) const {
    return math::reluGrad(x, dy);
  }
};
struct GeluOp {
  bool tanhApprox;
  template <typename C> __device__ C operator()(C x) const {
    return math::gelu(x, tanhApprox);
  }
};
struct GeluGradOp {
  bool tanhApprox;
  template <typename C> __device__ C operator()(C x, C dy) const {
    return math::geluGrad(x, dy, tanhApprox);
  }
};
struct SiluOp {
  template <typename C> __device__ C operator()(C x) const {
    return math::silu(x);
  }
};
struct SiluGradOp {
  template <typename C> __device__ C operator()(C x, C dy) const {
    return math::siluGrad(x, dy);
  }
};

template <int DT, typename Op>
__global__ void unaryK(const typename Elt<DT>::S *x, typename Elt<DT>::S *y,
                       int64_t n, Op op) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n) y[i] = E::st(op(E::ld(x, i)));
}

template <int DT, typename Op>
__global__ void binaryK(const typename Elt<DT>::S *a,
                        const typename Elt<DT>::S *b, typename Elt<DT>::S *c,
                        int64_t n, Op op) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n) c[i] = E::st(op(E::ld(a, i), E::ld(b, i)));
}

template <typename Op>
void unary(fsdp_stream_s *s, fsdp_dtype t, const char *name, const void *x,
           void *y, int64_t n, Op op) {
  if (n == 0)
    return;
  floatDtype(t, name, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    unaryK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), static_cast<S *>(y), n, op);
  });
  launched(name);
}

template <typename Op>
void binary(fsdp_stream_s *s, fsdp_dtype t, const char *name, const void *a,
            const void *b, void *c, int64_t n, Op op) {
  if (n == 0)
    return;
  floatDtype(t, name, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    binaryK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(a), static_cast<const S *>(b),
        static_cast<S *>(c), n, op);
  });
  launched(name);
}

template <int DT>
__global__ void divideK(typename Elt<DT>::S *p, int64_t n, int divisor) {
  using E = Elt<DT>;
  using C = typename E::C;
  FSDP_GRID_LOOP(i, n) p[i] = E::st(E::ld(p, i) / static_cast<C>(divisor));
}

//===--- Reductions and broadcasts over axes
//------------------------------------===//

constexpr int kMaxRank = 8;

/// x's dims split into the kept ones (the output's, in order) and the
/// reduced ones, each with its stride in x.
struct AxisMap {
  int nk = 0, nr = 0;
  int64_t kept[kMaxRank], keptStride[kMaxRank];
  int64_t red[kMaxRank], redStride[kMaxRank];
  int64_t keptNumel = 1, redNumel = 1;
};

AxisMap axisMap(const int64_t *shape, int rank, const int64_t *axes, int naxes,
                const char *op) {
  if (rank > kMaxRank)
    fail(FSDP_ERR_UNSUPPORTED, std::string(op) + ": rank " +
                                   std::to_string(rank) + " above " +
                                   std::to_string(kMaxRank));
  std::vector<bool> dropped(rank, false);
  for (int i = 0; i < naxes; ++i) {
    if (axes[i] < 0 || axes[i] >= rank || dropped[axes[i]])
      fail(FSDP_ERR_INVALID,
           std::string(op) + ": bad axis " + std::to_string(axes[i]));
    dropped[axes[i]] = true;
  }
  AxisMap m;
  int64_t stride = 1;
  std::vector<int64_t> strides(rank);
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= shape[i];
  }
  for (int i = 0; i < rank; ++i) {
    if (dropped[i]) {
      m.red[m.nr] = shape[i];
      m.redStride[m.nr++] = strides[i];
      m.redNumel *= shape[i];
    } else {
      m.kept[m.nk] = shape[i];
      m.keptStride[m.nk++] = strides[i];
      m.keptNumel *= shape[i];
    }
  }
  return m;
}

/// Offset in x of row-major index `i` over `dims` with `strides`.
__device__ int64_t offsetOf(int64_t i, int n, const int64_t *dims,
                            const int64_t *strides) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; --d) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

// One thread per output element sums the reduced elements in x's row-major
// order (the cpu driver's order), in double.
template <int DT>
__global__ void reduceSumK(const typename Elt<DT>::S *x, AxisMap m,
                           typename Elt<DT>::S *y) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(o, m.keptNumel) {
    int64_t base = offsetOf(o, m.nk, m.kept, m.keptStride);
    double acc = 0;
    for (int64_t r = 0; r < m.redNumel; ++r)
      acc += E::ld(x, base + offsetOf(r, m.nr, m.red, m.redStride));
    y[o] = E::st(static_cast<typename E::C>(acc));
  }
}

// y[i] = x[offset of i's coordinates]: `m` holds y's dims with x's strides
// (0 for the broadcast axes).
template <int DT>
__global__ void broadcastK(const typename Elt<DT>::S *x, AxisMap m, int64_t n,
                           typename Elt<DT>::S *y) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n)
  y[i] = E::st(E::ld(x, offsetOf(i, m.nk, m.kept, m.keptStride)));
}

//===--- Cross-entropy
//----------------------------------------------------------===//

/// Row statistics of cross-entropy, as the cpu driver computes them: the
/// max of the row (exact in double) and Σ math::expT(x − max) in the
/// compute type, summed in double. Every thread of the block gets both.
template <int DT>
__device__ void rowMaxSumExp(const typename Elt<DT>::S *row, int64_t classes,
                             double *sh, double &mx, double &s) {
  using E = Elt<DT>;
  mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    mx = fmax(mx, static_cast<double>(E::ld(row, c)));
  mx = blockMax(mx, sh);
  const typename E::C cmx = static_cast<typename E::C>(mx);
  s = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    s += static_cast<double>(
        math::expT(static_cast<typename E::C>(E::ld(row, c) - cmx)));
  s = blockSum(s, sh);
}

template <int DT>
__global__ void crossEntropyRowK(const typename Elt<DT>::S *logits,
                                 const void *labels, int labelsI64,
                                 int64_t classes, double *rowLoss,
                                 DeviceErrors *err) {
  using E = Elt<DT>;
  __shared__ double sh[kThreads];
  int64_t p = blockIdx.x;
  const typename E::S *row = logits + p * classes;
  double mx, s;
  rowMaxSumExp<DT>(row, classes, sh, mx, s);
  if (threadIdx.x == 0) {
    int64_t l = loadIndex(labels, labelsI64, p);
    if (l < 0 || l >= classes) {
      report(err, kLabelOutOfRange, l, p, classes);
      rowLoss[p] = 0;
    } else {
      rowLoss[p] = (mx + log(s)) - static_cast<double>(E::ld(row, l));
    }
  }
}

template <int DT>
__global__ void meanK(const double *v, int64_t n, typename Elt<DT>::S *out) {
  __shared__ double sh[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += v[i];
  s = blockSum(s, sh);
  if (threadIdx.x == 0)
    *out = Elt<DT>::st(
        static_cast<typename Elt<DT>::C>(n ? s / static_cast<double>(n) : 0.0));
}

template <int DT>
__global__ void
crossEntropyGradK(const typename Elt<DT>::S *logits, const void *labels,
                  int labelsI64, const typename Elt<DT>::S *dloss,
                  typename Elt<DT>::S *dlogits, int64_t positions,
                  int64_t classes, DeviceErrors *err) {
  using E = Elt<DT>;
  __shared__ double sh[kThreads];
  int64_t p = blockIdx.x;
  const typename E::S *row = logits + p * classes;
  typename E::S *out = dlogits + p * classes;
  double mx, s;
  rowMaxSumExp<DT>(row, classes, sh, mx, s);
  const typename E::C cmx = static_cast<typename E::C>(mx);
  int64_t l = loadIndex(labels, labelsI64, p);
  if (l < 0 || l >= classes) {
    if (threadIdx.x == 0)
      report(err, kLabelOutOfRange, l, p, classes);
    return;
  }
  // As the cpu driver: e · (scale / s), minus scale at the label, in C.
  double scale =
      static_cast<double>(E::ld(dloss, 0)) / static_cast<double>(positions);
  using C = typename E::C;
  const C k = static_cast<C>(scale / s), sc = static_cast<C>(scale);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    C g = math::expT(static_cast<C>(E::ld(row, c) - cmx)) * k;
    out[c] = E::st(c == l ? static_cast<C>(g - sc) : g);
  }
}

//===--- Optimizers
//--------------------------------------------------------------===//

// The SGD and AdamW steps, the rate `lr` or, when lrDevice is not null, read
// from device memory (the _lr entry points: a scheduled rate).
template <typename T>
__global__ void sgdK(const T *p, const T *g, T *out, int64_t n, T lr,
                     const double *lrDevice, T wd) {
  T r = lrDevice ? static_cast<T>(*lrDevice) : lr;
  FSDP_GRID_LOOP(i, n) out[i] = math::sgd(p[i], g[i], r, wd);
}

template <typename T>
__global__ void adamwK(const T *p, const T *g, const T *m, const T *v,
                       const void *step, int stepI64, T *pOut, T *mOut, T *vOut,
                       int64_t n, double lr, const double *lrDevice,
                       double beta1, double beta2, double eps, double wd,
                       DeviceErrors *err) {
  __shared__ math::AdamWScalars<T> s;
  __shared__ int bad;
  if (threadIdx.x == 0) {
    int64_t t = loadIndex(step, stepI64, 0);
    bad = t < 1;
    if (bad && blockIdx.x == 0)
      report(err, kStepBelowOne, t, 0, 0);
    if (!bad)
      s = math::adamwScalars<T>(t, lrDevice ? *lrDevice : lr, beta1, beta2, eps,
                                wd);
  }
  __syncthreads();
  if (bad)
    return;
  FSDP_GRID_LOOP(i, n)
  math::adamw(s, p[i], g[i], m[i], v[i], pOut[i], mOut[i], vOut[i]);
}

//===--- Learning-rate schedule, gradient norm, clipping
//----------------------===//

__global__ void lrScheduleK(const void *step, int stepI64, double *lr, int kind,
                            double base, int64_t warmup,
                            const int64_t *decayDevice, int64_t decay,
                            double minLr, DeviceErrors *err) {
  int64_t t = loadIndex(step, stepI64, 0);
  if (t < 1) {
    report(err, kLrStepBelowOne, t, 0, 0);
    *lr = 0;
    return;
  }
  if (decayDevice) {
    decay = *decayDevice;
    if (decay < 1) {
      report(err, kLrTotalBelowOne, decay, 0, 0);
      *lr = 0;
      return;
    }
  }
  *lr = math::scheduledLr(kind, t, base, warmup, decay, minLr);
}

// Stage 1: block b sums the squares of its grid-strided elements (a
// fixed-order tree per block); stage 2 (sumK) sums the blocks' partials in
// one block. The grid size depends on n only: the same sum on every run.
template <int DT>
__global__ void sumSquaresK(const typename Elt<DT>::S *x, int64_t n,
                            double *partial) {
  __shared__ double sh[kThreads];
  double s = 0;
  FSDP_GRID_LOOP(i, n) {
    double v = static_cast<double>(Elt<DT>::ld(x, i));
    s += v * v;
  }
  s = blockSum(s, sh);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

__global__ void sumK(const double *v, int64_t n, double *out) {
  __shared__ double sh[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += v[i];
  s = blockSum(s, sh);
  if (threadIdx.x == 0)
    *out = s;
}

__global__ void gradNormK(const double *sumSquares, double maxNorm,
                          double *norm, double *coef) {
  double nv = sqrt(*sumSquares);
  *norm = nv;
  *coef = math::clipCoefficient(nv, maxNorm);
}

template <int DT>
__global__ void scaleK(const typename Elt<DT>::S *x, const double *factor,
                       typename Elt<DT>::S *y, int64_t n) {
  using E = Elt<DT>;
  using C = typename E::C;
  C c = static_cast<C>(*factor);
  FSDP_GRID_LOOP(i, n) y[i] = E::st(E::ld(x, i) * c);
}

//===--- Embeddings
//-----------------------------------------------------------------===//

template <int DT>
__global__ void embeddingK(const void *idx, int idxI64,
                           const typename Elt<DT>::S *table,
                           typename Elt<DT>::S *y, int64_t n, int64_t vocab,
                           int64_t dim, DeviceErrors *err) {
  FSDP_GRID_LOOP(e, n * dim) {
    int64_t i = e / dim, c = e % dim, v = loadIndex(idx, idxI64, i);
    if (v < 0 || v >= vocab) {
      if (c == 0)
        report(err, kIndexOutOfRange, v, i, vocab);
      y[e] = typename Elt<DT>::S{};
    } else {
      y[e] = table[v * dim + c];
    }
  }
}

// dtable (in f32 for 2-byte dtypes, else T) += dy rows at their index.
template <int DT, typename A>
__global__ void embeddingGradK(const void *idx, int idxI64,
                               const typename Elt<DT>::S *dy, A *acc, int64_t n,
                               int64_t vocab, int64_t dim, DeviceErrors *err) {
  FSDP_GRID_LOOP(e, n * dim) {
    int64_t i = e / dim, c = e % dim, v = loadIndex(idx, idxI64, i);
    if (v < 0 || v >= vocab) {
      if (c == 0)
        report(err, kIndexOutOfRange, v, i, vocab);
      continue;
    }
    atomicAdd(&acc[v * dim + c], static_cast<A>(Elt<DT>::ld(dy, e)));
  }
}

template <int DT>
__global__ void positionEmbeddingK(const typename Elt<DT>::S *x,
                                   const typename Elt<DT>::S *table,
                                   typename Elt<DT>::S *y, int64_t n,
                                   int64_t plane) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n) y[i] = E::st(E::ld(x, i) + E::ld(table, i % plane));
}

// dtable[t, c] = Σ_b dy[b, t, c] in the compute type, b in order.
template <int DT>
__global__ void positionEmbeddingGradK(const typename Elt<DT>::S *dy,
                                       typename Elt<DT>::S *dtable,
                                       int64_t batch, int64_t plane,
                                       int64_t total) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, total) {
    typename E::C acc = 0;
    if (i < plane)
      for (int64_t b = 0; b < batch; ++b)
        acc += E::ld(dy, b * plane + i);
    dtable[i] = E::st(acc);
  }
}

//===--- Norms
//------------------------------------------------------------------------===//

/// Mean and 1/√(var + eps) of one row, by the block, in double.
template <int DT>
__device__ void rowStats(const typename Elt<DT>::S *xr, int64_t dim, double eps,
                         double *sh, double &mean, double &rstd) {
  double s = 0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    s += Elt<DT>::ld(xr, c);
  mean = blockSum(s, sh) / static_cast<double>(dim);
  double v = 0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    double d = Elt<DT>::ld(xr, c) - mean;
    v += d * d;
  }
  rstd = 1.0 / sqrt(blockSum(v, sh) / static_cast<double>(dim) + eps);
}

template <int DT>
__global__ void layerNormK(const typename Elt<DT>::S *x,
                           const typename Elt<DT>::S *w,
                           const typename Elt<DT>::S *b, typename Elt<DT>::S *y,
                           int64_t dim, double eps) {
  using E = Elt<DT>;
  __shared__ double sh[kThreads];
  const typename E::S *xr = x + blockIdx.x * dim;
  double mean, rstd;
  rowStats<DT>(xr, dim, eps, sh, mean, rstd);
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    y[blockIdx.x * dim + c] = E::st(
        math::layerNorm(E::ld(xr, c), mean, rstd, E::ld(w, c), E::ld(b, c)));
}

// dx per row; each row's (mean, rstd) into stats for the column sums.
template <int DT>
__global__ void
layerNormGradRowK(const typename Elt<DT>::S *x, const typename Elt<DT>::S *w,
                  const typename Elt<DT>::S *dy, typename Elt<DT>::S *dx,
                  double *stats, int64_t dim, double eps) {
  using E = Elt<DT>;
  __shared__ double sh[kThreads];
  int64_t r = blockIdx.x;
  const typename E::S *xr = x + r * dim, *gr = dy + r * dim;
  double mean, rstd;
  rowStats<DT>(xr, dim, eps, sh, mean, rstd);
  double sg = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    double xh = (E::ld(xr, c) - mean) * rstd;
    double g = static_cast<double>(E::ld(gr, c)) * E::ld(w, c);
    sg += g;
    sgx += g * xh;
  }
  double mG = blockSum(sg, sh) / static_cast<double>(dim);
  double mGX = blockSum(sgx, sh) / static_cast<double>(dim);
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    dx[r * dim + c] = E::st(math::layerNormGrad(
        E::ld(xr, c), E::ld(w, c), E::ld(gr, c), mean, rstd, mG, mGX));
  if (threadIdx.x == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

template <int DT>
__global__ void
layerNormGradColK(const typename Elt<DT>::S *x, const typename Elt<DT>::S *dy,
                  const double *stats, typename Elt<DT>::S *dw,
                  typename Elt<DT>::S *db, int64_t rows, int64_t dim) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(c, dim) {
    double aw = 0, ab = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double xh = (E::ld(x, r * dim + c) - stats[2 * r]) * stats[2 * r + 1];
      aw += static_cast<double>(E::ld(dy, r * dim + c)) * xh;
      ab += E::ld(dy, r * dim + c);
    }
    dw[c] = E::st(static_cast<typename E::C>(aw));
    db[c] = E::st(static_cast<typename E::C>(ab));
  }
}

template <int DT>
__global__ void rmsNormK(const typename Elt<DT>::S *x,
                         const typename Elt<DT>::S *w, typename Elt<DT>::S *y,
                         int64_t dim, double eps) {
  using E = Elt<DT>;
  __shared__ double sh[kThreads];
  const typename E::S *xr = x + blockIdx.x * dim;
  double ss = 0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    double v = E::ld(xr, c);
    ss += v * v;
  }
  double rr = 1.0 / sqrt(blockSum(ss, sh) / static_cast<double>(dim) + eps);
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    y[blockIdx.x * dim + c] =
        E::st(math::rmsNorm(E::ld(xr, c), rr, E::ld(w, c)));
}

template <int DT>
__global__ void
rmsNormGradRowK(const typename Elt<DT>::S *x, const typename Elt<DT>::S *w,
                const typename Elt<DT>::S *dy, typename Elt<DT>::S *dx,
                double *rrs, int64_t dim, double eps) {
  using E = Elt<DT>;
  __shared__ double sh[kThreads];
  int64_t r = blockIdx.x;
  const typename E::S *xr = x + r * dim, *gr = dy + r * dim;
  double ss = 0, gx = 0;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    double v = E::ld(xr, c);
    ss += v * v;
    gx += static_cast<double>(E::ld(gr, c)) * E::ld(w, c) * v;
  }
  double rr = 1.0 / sqrt(blockSum(ss, sh) / static_cast<double>(dim) + eps);
  double k = rr * rr * blockSum(gx, sh) / static_cast<double>(dim);
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    dx[r * dim + c] = E::st(
        math::rmsNormGrad(E::ld(xr, c), E::ld(w, c), E::ld(gr, c), rr, k));
  if (threadIdx.x == 0)
    rrs[r] = rr;
}

template <int DT>
__global__ void rmsNormGradColK(const typename Elt<DT>::S *x,
                                const typename Elt<DT>::S *dy,
                                const double *rrs, typename Elt<DT>::S *dw,
                                int64_t rows, int64_t dim) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(c, dim) {
    double aw = 0;
    for (int64_t r = 0; r < rows; ++r)
      aw += static_cast<double>(E::ld(dy, r * dim + c)) *
            E::ld(x, r * dim + c) * rrs[r];
    dw[c] = E::st(static_cast<typename E::C>(aw));
  }
}

//===--- RoPE
//---------------------------------------------------------------------------===//

template <int DT>
__global__ void ropeK(const typename Elt<DT>::S *x, typename Elt<DT>::S *y,
                      int64_t batch, int64_t seq, int64_t heads,
                      int64_t headDim, double theta, int inverse) {
  using E = Elt<DT>;
  int64_t half = headDim / 2, n = batch * seq * heads * half;
  FSDP_GRID_LOOP(e, n) {
    int64_t i = e % half, h = (e / half) % heads,
            t = (e / (half * heads)) % seq;
    int64_t bt = e / (half * heads); // b * seq + t
    int64_t base = bt * heads * headDim + h * headDim;
    double phi = math::ropeAngle(t, i, headDim, theta, inverse != 0);
    double c = cos(phi), s = sin(phi);
    double a = E::ld(x, base + i), b = E::ld(x, base + i + half);
    y[base + i] = E::st(static_cast<typename E::C>(a * c - b * s));
    y[base + i + half] = E::st(static_cast<typename E::C>(b * c + a * s));
  }
}

//===--- Attention (one (batch, head) at a time, as the cpu driver)
//------------------===//

// p[t, :] = causal softmax of s[t, :] (s already scaled), in place; the
// cpu driver's arithmetic: e = math::expT(x − max) in T, Σe in double,
// e · T(1/Σe) in T.
template <typename T> __global__ void causalSoftmaxK(T *p, int64_t seq) {
  __shared__ double sh[kThreads];
  int64_t t = blockIdx.x;
  T *row = p + t * seq;
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x)
    mx = fmax(mx, static_cast<double>(row[j]));
  const T tmx = static_cast<T>(blockMax(mx, sh)); // exact: a max of T values
  double s = 0;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x) {
    T e = math::expT(static_cast<T>(row[j] - tmx));
    row[j] = e;
    s += static_cast<double>(e);
  }
  const T inv = static_cast<T>(1.0 / blockSum(s, sh));
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    row[j] = j <= t ? static_cast<T>(row[j] * inv) : T(0);
}

// ds = p ⊙ (ds − rowsum(p ⊙ ds)) · scale below the diagonal, 0 above.
template <typename T>
__global__ void softmaxGradK(const T *p, T *ds, int64_t seq, double scale) {
  __shared__ double sh[kThreads];
  int64_t t = blockIdx.x;
  const T *pr = p + t * seq;
  T *dr = ds + t * seq;
  double dot = 0;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x)
    dot += static_cast<double>(pr[j]) * dr[j];
  dot = blockSum(dot, sh);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    dr[j] = j <= t ? static_cast<T>(pr[j] * (dr[j] - dot) * scale) : T(0);
}

/// Column-major GEMM C = α·op(A)·op(B) + β·C in T (f32: no TF32; f64).
template <typename T>
void gemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
          int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda,
          const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {
  if constexpr (std::is_same<T, float>::value)
    check(
        cublasSgemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc),
        "cublasSgemm");
  else
    check(
        cublasDgemm(h, ta, tb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc),
        "cublasDgemm");
}

/// Attention (or its VJP with dout/dq/dk/dv) in compute type T on T
/// tensors: per (batch, query head) S = scale·Q·Kᵀ (row-major, i.e. the
/// column-major Sᵀ = K·Qᵀ), P = causal softmax, O = P·V; the VJP recomputes
/// P, dP = dO·Vᵀ, dS, dQ = dS·K, dK += dSᵀ·Q, dV += Pᵀ·dO.
template <typename T>
void attentionCore(CudaDevice *dev, cudaStream_t st, const T *q, const T *k,
                   const T *v, T *o, const T *dout, T *dq, T *dk, T *dv,
                   int64_t batch, int64_t seq, int64_t hq, int64_t hkv,
                   int64_t d) {
  cublasHandle_t h = dev->blas;
  check(cublasSetStream(h, st), "cublasSetStream");
  bool grad = dout != nullptr;
  size_t mat = static_cast<size_t>(seq * seq) * sizeof(T);
  T *p = static_cast<T *>(dev->scratch(st, mat));
  T *ds = grad ? static_cast<T *>(dev->scratch(st, mat)) : nullptr;
  int64_t group = hq / hkv, lq = hq * d, lk = hkv * d;
  double scaleD = 1.0 / std::sqrt(static_cast<double>(d));
  T scale = static_cast<T>(scaleD);
  if (grad) {
    check(cudaMemsetAsync(dq, 0, batch * seq * lq * sizeof(T), st),
          "cudaMemsetAsync");
    check(cudaMemsetAsync(dk, 0, batch * seq * lk * sizeof(T), st),
          "cudaMemsetAsync");
    check(cudaMemsetAsync(dv, 0, batch * seq * lk * sizeof(T), st),
          "cudaMemsetAsync");
  }
  auto N = CUBLAS_OP_N, Tr = CUBLAS_OP_T;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t hh = 0; hh < hq; ++hh) {
      int64_t qo = b * seq * lq + hh * d, ko = b * seq * lk + (hh / group) * d;
      gemm<T>(h, Tr, N, seq, seq, d, scale, k + ko, lk, q + qo, lq, T(0), p,
              seq);
      causalSoftmaxK<T><<<seq, kThreads, 0, st>>>(p, seq);
      launched("attention softmax");
      if (!grad) {
        gemm<T>(h, N, N, d, seq, seq, T(1), v + ko, lk, p, seq, T(0), o + qo,
                lq);
        continue;
      }
      gemm<T>(h, Tr, N, seq, seq, d, T(1), v + ko, lk, dout + qo, lq, T(0), ds,
              seq);
      softmaxGradK<T><<<seq, kThreads, 0, st>>>(p, ds, seq, scaleD);
      launched("attention softmax gradient");
      gemm<T>(h, N, N, d, seq, seq, T(1), k + ko, lk, ds, seq, T(0), dq + qo,
              lq);
      gemm<T>(h, N, Tr, d, seq, seq, T(1), q + qo, lq, ds, seq, T(1), dk + ko,
              lk);
      gemm<T>(h, N, Tr, d, seq, seq, T(1), dout + qo, lq, p, seq, T(1), dv + ko,
              lk);
    }
  dev->release(st, p);
  if (ds)
    dev->release(st, ds);
}

cudaDataType_t blasType(fsdp_dtype t) {
  switch (t) {
  case FSDP_F64:
    return CUDA_R_64F;
  case FSDP_BF16:
    return CUDA_R_16BF;
  case FSDP_F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

/// Row-major C[M,N] = op(A)·op(B) through cublasGemmEx (column-major
/// Cᵀ = op(B)ᵀ·op(A)ᵀ): A stored with row length lda, B with ldb; C of
/// ctype. f32 accumulation (f64 for f64).
void gemmEx(cublasHandle_t h, fsdp_dtype t, bool transA, bool transB, int64_t m,
            int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
            int64_t ldb, void *c, cudaDataType_t ctype) {
  double alpha64 = 1, beta64 = 0;
  float alpha32 = 1, beta32 = 0;
  bool f64 = t == FSDP_F64;
  check(cublasGemmEx(h, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                     transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                     f64 ? static_cast<const void *>(&alpha64) : &alpha32, b,
                     blasType(t), ldb, a, blasType(t), lda,
                     f64 ? static_cast<const void *>(&beta64) : &beta32, c,
                     ctype, n, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

// y[i, j] = round(acc[i, j] + b[j]): acc in the compute type (f32 scratch for
// 2-byte dtypes, the output itself otherwise), one rounding.
template <int DT, typename A>
__global__ void biasK(const A *acc, const typename Elt<DT>::S *b,
                      typename Elt<DT>::S *y, int64_t m, int64_t n) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, m * n) {
    typename E::C v = static_cast<typename E::C>(acc[i]);
    y[i] = E::st(b ? v + E::ld(b, i % n) : v);
  }
}

} // namespace

void launchDivide(void *data, int64_t count, fsdp_dtype t, int divisor,
                  cudaStream_t s) {
  if (count == 0)
    return;
  floatDtype(t, "avg", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    divideK<DT><<<blocksFor(count), kThreads, 0, s>>>(
        static_cast<typename Elt<DT>::S *>(data), count, divisor);
  });
  launched("avg kernel");
}

//===--- The entry points
//-----------------------------------------------------------===//

void CudaDevice::fill(fsdp_stream_s *s, fsdp_dtype t, void *y, int64_t n,
                      double value) {
  if (n == 0)
    return;
  cudaStream_t st = streamOf(s);
  int b = blocksFor(n);
  switch (t) {
  case FSDP_F32:
    fillK<<<b, kThreads, 0, st>>>(static_cast<float *>(y), n,
                                  static_cast<float>(value));
    break;
  case FSDP_F64:
    fillK<<<b, kThreads, 0, st>>>(static_cast<double *>(y), n, value);
    break;
  case FSDP_I32:
    fillK<<<b, kThreads, 0, st>>>(static_cast<int32_t *>(y), n,
                                  static_cast<int32_t>(value));
    break;
  case FSDP_I64:
    fillK<<<b, kThreads, 0, st>>>(static_cast<int64_t *>(y), n,
                                  static_cast<int64_t>(value));
    break;
  case FSDP_BF16:
  case FSDP_F16: {
    float f = static_cast<float>(value);
    uint16_t h = t == FSDP_BF16 ? floatToBf16(f) : floatToF16(f);
    fillK<<<b, kThreads, 0, st>>>(static_cast<uint16_t *>(y), n, h);
    break;
  }
  default:
    fail(FSDP_ERR_INVALID, "fsdp_fill: invalid dtype");
  }
  launched("fill kernel");
}

void CudaDevice::cast(fsdp_stream_s *s, fsdp_dtype xt, const void *x,
                      fsdp_dtype yt, void *y, int64_t n) {
  if (!isFloat(xt) || !isFloat(yt))
    fail(FSDP_ERR_INVALID, "fsdp_cast: float dtypes only");
  if (xt == yt) {
    copy(s, y, x, static_cast<size_t>(n) * dtypeSize(xt));
    return;
  }
  launchCast(x, xt, y, yt, n, streamOf(s));
}

void CudaDevice::linear(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                        const void *w, const void *b, void *y, int64_t m,
                        int64_t k, int64_t n, int transposeWeight) {
  if (m == 0 || n == 0)
    return;
  cudaStream_t st = streamOf(s);
  check(cublasSetStream(blas, st), "cublasSetStream");
  bool half = isHalf(t);
  floatDtype(t, "fsdp_linear", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    // With a bias, 2-byte outputs accumulate in f32 scratch and round once
    // after the bias, as the cpu driver.
    bool viaScratch = half && b;
    void *out = viaScratch
                    ? scratch(st, static_cast<size_t>(m * n) * sizeof(float))
                    : y;
    if (k == 0)
      check(cudaMemsetAsync(out, 0,
                            static_cast<size_t>(m * n) *
                                (viaScratch ? sizeof(float) : sizeof(S)),
                            st),
            "cudaMemsetAsync");
    else
      // y = x·wᵀ with w [N, K] (transpose), or y = x·w with w [K, N].
      gemmEx(blas, t, false, !transposeWeight, m, n, k, x, k, w,
             transposeWeight ? n : k, out,
             viaScratch ? CUDA_R_32F : blasType(t));
    if (viaScratch) {
      biasK<DT, float><<<blocksFor(m * n), kThreads, 0, st>>>(
          static_cast<const float *>(out), static_cast<const S *>(b),
          static_cast<S *>(y), m, n);
      launched("bias kernel");
      release(st, out);
    } else if (b) {
      biasK<DT, S><<<blocksFor(m * n), kThreads, 0, st>>>(
          static_cast<const S *>(y), static_cast<const S *>(b),
          static_cast<S *>(y), m, n);
      launched("bias kernel");
    }
  });
}

void CudaDevice::matmul(fsdp_stream_s *s, fsdp_dtype t, const void *a,
                        const void *b, void *c, int64_t aRows, int64_t aCols,
                        int64_t bRows, int64_t bCols, int transA, int transB) {
  int64_t m = transA ? aCols : aRows, k = transA ? aRows : aCols;
  int64_t kb = transB ? bCols : bRows, n = transB ? bRows : bCols;
  if (k != kb)
    fail(FSDP_ERR_INVALID, "matmul inner dimensions differ: " +
                               std::to_string(k) + " vs " + std::to_string(kb));
  if (m == 0 || n == 0)
    return;
  floatDtype(t, "fsdp_matmul", [](auto) {});
  cudaStream_t st = streamOf(s);
  if (k == 0) {
    zero(s, c, static_cast<size_t>(m * n) * dtypeSize(t));
    return;
  }
  check(cublasSetStream(blas, st), "cublasSetStream");
  gemmEx(blas, t, transA != 0, transB != 0, m, n, k, a, aCols, b, bCols, c,
         blasType(t));
}

void CudaDevice::add(fsdp_stream_s *s, fsdp_dtype t, const void *a,
                     const void *b, void *c, int64_t n) {
  binary(s, t, "fsdp_add", a, b, c, n, AddOp{});
}
void CudaDevice::mul(fsdp_stream_s *s, fsdp_dtype t, const void *a,
                     const void *b, void *c, int64_t n) {
  binary(s, t, "fsdp_mul", a, b, c, n, MulOp{});
}
void CudaDevice::relu(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t n) {
  unary(s, t, "fsdp_relu", x, y, n, ReluOp{});
}
void CudaDevice::relu_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const void *dy, void *dx, int64_t n) {
  binary(s, t, "fsdp_relu_grad", x, dy, dx, n, ReluGradOp{});
}
void CudaDevice::gelu(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t n, int approxTanh) {
  unary(s, t, "fsdp_gelu", x, y, n, GeluOp{approxTanh != 0});
}
void CudaDevice::gelu_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const void *dy, void *dx, int64_t n,
                           int approxTanh) {
  binary(s, t, "fsdp_gelu_grad", x, dy, dx, n, GeluGradOp{approxTanh != 0});
}
void CudaDevice::silu(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t n) {
  unary(s, t, "fsdp_silu", x, y, n, SiluOp{});
}
void CudaDevice::silu_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const void *dy, void *dx, int64_t n) {
  binary(s, t, "fsdp_silu_grad", x, dy, dx, n, SiluGradOp{});
}

void CudaDevice::reduce_sum(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                            const int64_t *xShape, int rank,
                            const int64_t *axes, int naxes, void *y) {
  AxisMap m = axisMap(xShape, rank, axes, naxes, "fsdp_reduce_sum");
  floatDtype(t, "fsdp_reduce_sum", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    reduceSumK<DT><<<blocksFor(m.keptNumel), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), m, static_cast<S *>(y));
  });
  launched("reduce_sum kernel");
}

void CudaDevice::broadcast(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const int64_t *yShape, int rank, const int64_t *axes,
                           int naxes, void *y) {
  // y's index decoded over y's dims; x's offset from the kept ones: a map
  // over y's shape whose dropped dims have stride 0.
  AxisMap m = axisMap(yShape, rank, axes, naxes, "fsdp_broadcast");
  AxisMap all;
  all.nk = rank;
  int64_t xs = 1;
  std::vector<int64_t> xStride(rank, 0);
  for (int i = rank - 1; i >= 0; --i)
    if (std::find(axes, axes + naxes, i) == axes + naxes) {
      xStride[i] = xs;
      xs *= yShape[i];
    }
  for (int i = 0; i < rank; ++i) {
    all.kept[i] = yShape[i];
    all.keptStride[i] = xStride[i];
  }
  int64_t n = m.keptNumel * m.redNumel;
  if (n == 0)
    return;
  floatDtype(t, "fsdp_broadcast", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    broadcastK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), all, n, static_cast<S *>(y));
  });
  launched("broadcast kernel");
}

void CudaDevice::cross_entropy(fsdp_stream_s *s, fsdp_dtype t,
                               const void *logits, const void *labels,
                               fsdp_dtype lt, int64_t positions,
                               int64_t classes, void *loss) {
  checkIndexType(lt, "fsdp_cross_entropy: labels");
  if (classes <= 0)
    fail(FSDP_ERR_INVALID, "cross_entropy needs at least one class");
  cudaStream_t st = streamOf(s);
  double *rows = static_cast<double *>(
      scratch(st, std::max<int64_t>(positions, 1) * sizeof(double)));
  floatDtype(t, "fsdp_cross_entropy", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    if (positions > 0)
      crossEntropyRowK<DT><<<positions, kThreads, 0, st>>>(
          static_cast<const S *>(logits), labels, lt == FSDP_I64, classes, rows,
          errors);
    meanK<DT><<<1, kThreads, 0, st>>>(rows, positions, static_cast<S *>(loss));
  });
  launched("cross_entropy kernel");
  release(st, rows);
}

void CudaDevice::cross_entropy_grad(fsdp_stream_s *s, fsdp_dtype t,
                                    const void *logits, const void *labels,
                                    fsdp_dtype lt, const void *dloss,
                                    void *dlogits, int64_t positions,
                                    int64_t classes) {
  checkIndexType(lt, "fsdp_cross_entropy_grad: labels");
  if (classes <= 0)
    fail(FSDP_ERR_INVALID, "cross_entropy_grad needs at least one class");
  if (positions == 0)
    return;
  floatDtype(t, "fsdp_cross_entropy_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    crossEntropyGradK<DT><<<positions, kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(logits), labels, lt == FSDP_I64,
        static_cast<const S *>(dloss), static_cast<S *>(dlogits), positions,
        classes, errors);
  });
  launched("cross_entropy_grad kernel");
}

namespace {
void sgdLaunch(fsdp_stream_s *s, fsdp_dtype t, const void *p, const void *g,
               void *out, int64_t n, double lr, const double *lrDevice,
               double weightDecay, const char *op) {
  if (n == 0)
    return;
  wideDtype(t, op, [&](auto tag) {
    using T = typename Elt<decltype(tag)::value>::S;
    sgdK<T><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const T *>(p), static_cast<const T *>(g),
        static_cast<T *>(out), n, static_cast<T>(lr), lrDevice,
        static_cast<T>(weightDecay));
  });
  launched((std::string(op + 5) + " kernel").c_str()); // "sgd_update kernel"
}

void adamwLaunch(fsdp_stream_s *s, fsdp_dtype t, const void *p, const void *g,
                 const void *m, const void *v, const void *step,
                 fsdp_dtype stepType, void *pOut, void *mOut, void *vOut,
                 int64_t n, double lr, const double *lrDevice, double beta1,
                 double beta2, double eps, double weightDecay,
                 DeviceErrors *errors, const char *op) {
  checkIndexType(stepType, (std::string(op) + ": step").c_str());
  wideDtype(t, op, [&](auto tag) {
    using T = typename Elt<decltype(tag)::value>::S;
    adamwK<T><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const T *>(p), static_cast<const T *>(g),
        static_cast<const T *>(m), static_cast<const T *>(v), step,
        stepType == FSDP_I64, static_cast<T *>(pOut), static_cast<T *>(mOut),
        static_cast<T *>(vOut), n, lr, lrDevice, beta1, beta2, eps, weightDecay,
        errors);
  });
  launched((std::string(op + 5) + " kernel").c_str()); // "sgd_update kernel"
}
} // namespace

void CudaDevice::sgd_update(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                            const void *g, void *out, int64_t n, double lr,
                            double weightDecay) {
  sgdLaunch(s, t, p, g, out, n, lr, nullptr, weightDecay, "fsdp_sgd_update");
}

void CudaDevice::adamw_update(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                              const void *g, const void *m, const void *v,
                              const void *step, fsdp_dtype stepType, void *pOut,
                              void *mOut, void *vOut, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weightDecay) {
  adamwLaunch(s, t, p, g, m, v, step, stepType, pOut, mOut, vOut, n, lr,
              nullptr, beta1, beta2, eps, weightDecay, errors,
              "fsdp_adamw_update");
}

void CudaDevice::sgd_update_lr(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                               const void *g, void *out, int64_t n,
                               const double *lr, double weightDecay) {
  sgdLaunch(s, t, p, g, out, n, 0.0, lr, weightDecay, "fsdp_sgd_update_lr");
}

void CudaDevice::adamw_update_lr(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                                 const void *g, const void *m, const void *v,
                                 const void *step, fsdp_dtype stepType,
                                 void *pOut, void *mOut, void *vOut, int64_t n,
                                 const double *lr, double beta1, double beta2,
                                 double eps, double weightDecay) {
  adamwLaunch(s, t, p, g, m, v, step, stepType, pOut, mOut, vOut, n, 0.0, lr,
              beta1, beta2, eps, weightDecay, errors, "fsdp_adamw_update_lr");
}

void CudaDevice::lr_schedule(fsdp_stream_s *s, const void *step,
                             fsdp_dtype stepType, double *lr, int kind,
                             double baseLr, int64_t warmup,
                             const int64_t *decayDevice, int64_t decay,
                             double minLr) {
  checkIndexType(stepType, "fsdp_lr_schedule: step");
  if (kind < FSDP_LR_CONSTANT || kind > FSDP_LR_COSINE)
    fail(FSDP_ERR_INVALID,
         "fsdp_lr_schedule: unknown kind " + std::to_string(kind));
  lrScheduleK<<<1, 1, 0, streamOf(s)>>>(step, stepType == FSDP_I64, lr, kind,
                                        baseLr, warmup, decayDevice, decay,
                                        minLr, errors);
  launched("lr_schedule kernel");
}

void CudaDevice::sum_squares(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                             int64_t n, double *out) {
  floatDtype(t, "fsdp_sum_squares", [](auto) {}); // before the scratch
  cudaStream_t st = streamOf(s);
  // At most 1024 partial sums (8 KiB of scratch).
  int blocks = std::min(blocksFor(n), 1024);
  double *partial =
      static_cast<double *>(scratch(st, static_cast<size_t>(blocks) * 8));
  floatDtype(t, "fsdp_sum_squares", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    sumSquaresK<DT>
        <<<blocks, kThreads, 0, st>>>(static_cast<const S *>(x), n, partial);
  });
  sumK<<<1, kThreads, 0, st>>>(partial, blocks, out);
  launched("sum_squares kernel");
  release(st, partial);
}

void CudaDevice::grad_norm(fsdp_stream_s *s, const double *sumSquares,
                           double maxNorm, double *norm, double *coef) {
  gradNormK<<<1, 1, 0, streamOf(s)>>>(sumSquares, maxNorm, norm, coef);
  launched("grad_norm kernel");
}

void CudaDevice::scale(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                       const double *factor, void *y, int64_t n) {
  if (n == 0)
    return;
  floatDtype(t, "fsdp_scale", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    scaleK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), factor, static_cast<S *>(y), n);
  });
  launched("scale kernel");
}

void CudaDevice::flatten(fsdp_stream_s *s, fsdp_dtype t,
                         const void *const *parts, const int64_t *numels,
                         const int64_t *offsets, int nparts, void *flat,
                         int64_t flatNumel) {
  floatDtype(t, "fsdp_flatten", [](auto) {});
  size_t es = dtypeSize(t);
  for (int i = 0; i < nparts; ++i)
    if (offsets[i] < 0 || offsets[i] + numels[i] > flatNumel)
      fail(FSDP_ERR_INVALID,
           "flatten: part " + std::to_string(i) + " (" +
               std::to_string(numels[i]) + " elements at offset " +
               std::to_string(offsets[i]) + ") does not fit in " +
               std::to_string(flatNumel));
  zero(s, flat, static_cast<size_t>(flatNumel) * es);
  for (int i = 0; i < nparts; ++i)
    copy(s, static_cast<char *>(flat) + offsets[i] * es, parts[i],
         static_cast<size_t>(numels[i]) * es);
}

void CudaDevice::embedding(fsdp_stream_s *s, fsdp_dtype t, const void *idx,
                           fsdp_dtype it, const void *table, void *y, int64_t n,
                           int64_t vocab, int64_t dim) {
  checkIndexType(it, "fsdp_embedding: indices");
  if (n * dim == 0)
    return;
  floatDtype(t, "fsdp_embedding", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    embeddingK<DT><<<blocksFor(n * dim), kThreads, 0, streamOf(s)>>>(
        idx, it == FSDP_I64, static_cast<const S *>(table), static_cast<S *>(y),
        n, vocab, dim, errors);
  });
  launched("embedding kernel");
}

void CudaDevice::embedding_grad(fsdp_stream_s *s, fsdp_dtype t, const void *idx,
                                fsdp_dtype it, const void *dy, void *dtable,
                                int64_t n, int64_t vocab, int64_t dim) {
  checkIndexType(it, "fsdp_embedding_grad: indices");
  cudaStream_t st = streamOf(s);
  bool half = isHalf(t);
  size_t tableN = static_cast<size_t>(vocab * dim);
  floatDtype(t, "fsdp_embedding_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    using A = std::conditional_t<DT == FSDP_F64, double, float>;
    A *acc = half ? static_cast<A *>(scratch(st, tableN * sizeof(A)))
                  : static_cast<A *>(dtable);
    check(cudaMemsetAsync(acc, 0, tableN * sizeof(A), st), "cudaMemsetAsync");
    if (n * dim > 0)
      embeddingGradK<DT, A><<<blocksFor(n * dim), kThreads, 0, st>>>(
          idx, it == FSDP_I64, static_cast<const S *>(dy), acc, n, vocab, dim,
          errors);
    launched("embedding_grad kernel");
    if (half) {
      launchCast(acc, FSDP_F32, dtable, t, static_cast<int64_t>(tableN), st);
      release(st, acc);
    }
  });
}

void CudaDevice::position_embedding(fsdp_stream_s *s, fsdp_dtype t,
                                    const void *x, const void *table, void *y,
                                    int64_t batch, int64_t seq, int64_t dim) {
  int64_t n = batch * seq * dim;
  if (n == 0)
    return;
  floatDtype(t, "fsdp_position_embedding", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    positionEmbeddingK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), static_cast<const S *>(table),
        static_cast<S *>(y), n, seq * dim);
  });
  launched("position_embedding kernel");
}

void CudaDevice::position_embedding_grad(fsdp_stream_s *s, fsdp_dtype t,
                                         const void *dy, void *dtable,
                                         int64_t batch, int64_t seq,
                                         int64_t dim, int64_t positions) {
  if (positions < seq)
    fail(FSDP_ERR_INVALID,
         "position_embedding_grad: " + std::to_string(positions) +
             " positions < sequence length " + std::to_string(seq));
  int64_t total = positions * dim;
  if (total == 0)
    return;
  floatDtype(t, "fsdp_position_embedding_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    positionEmbeddingGradK<DT><<<blocksFor(total), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(dy), static_cast<S *>(dtable), batch, seq * dim,
        total);
  });
  launched("position_embedding_grad kernel");
}

void CudaDevice::layer_norm(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                            const void *w, const void *b, void *y, int64_t rows,
                            int64_t dim, double eps) {
  if (rows == 0 || dim == 0)
    return;
  floatDtype(t, "fsdp_layer_norm", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    layerNormK<DT><<<rows, kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), static_cast<const S *>(w),
        static_cast<const S *>(b), static_cast<S *>(y), dim, eps);
  });
  launched("layer_norm kernel");
}

void CudaDevice::layer_norm_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                                 const void *w, const void *dy, void *dx,
                                 void *dw, void *db, int64_t rows, int64_t dim,
                                 double eps) {
  if (dim == 0)
    return;
  cudaStream_t st = streamOf(s);
  double *stats = static_cast<double *>(
      scratch(st, std::max<int64_t>(rows, 1) * 2 * sizeof(double)));
  floatDtype(t, "fsdp_layer_norm_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    if (rows > 0)
      layerNormGradRowK<DT><<<rows, kThreads, 0, st>>>(
          static_cast<const S *>(x), static_cast<const S *>(w),
          static_cast<const S *>(dy), static_cast<S *>(dx), stats, dim, eps);
    layerNormGradColK<DT><<<blocksFor(dim), kThreads, 0, st>>>(
        static_cast<const S *>(x), static_cast<const S *>(dy), stats,
        static_cast<S *>(dw), static_cast<S *>(db), rows, dim);
  });
  launched("layer_norm_grad kernels");
  release(st, stats);
}

void CudaDevice::rms_norm(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                          const void *w, void *y, int64_t rows, int64_t dim,
                          double eps) {
  if (rows == 0 || dim == 0)
    return;
  floatDtype(t, "fsdp_rms_norm", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    rmsNormK<DT><<<rows, kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), static_cast<const S *>(w),
        static_cast<S *>(y), dim, eps);
  });
  launched("rms_norm kernel");
}

void CudaDevice::rms_norm_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                               const void *w, const void *dy, void *dx,
                               void *dw, int64_t rows, int64_t dim,
                               double eps) {
  if (dim == 0)
    return;
  cudaStream_t st = streamOf(s);
  double *rrs = static_cast<double *>(
      scratch(st, std::max<int64_t>(rows, 1) * sizeof(double)));
  floatDtype(t, "fsdp_rms_norm_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    if (rows > 0)
      rmsNormGradRowK<DT><<<rows, kThreads, 0, st>>>(
          static_cast<const S *>(x), static_cast<const S *>(w),
          static_cast<const S *>(dy), static_cast<S *>(dx), rrs, dim, eps);
    rmsNormGradColK<DT><<<blocksFor(dim), kThreads, 0, st>>>(
        static_cast<const S *>(x), static_cast<const S *>(dy), rrs,
        static_cast<S *>(dw), rows, dim);
  });
  launched("rms_norm_grad kernels");
  release(st, rrs);
}

void CudaDevice::rope(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t batch, int64_t seq, int64_t heads,
                      int64_t headDim, double theta, int inverse) {
  if (headDim <= 0 || headDim % 2)
    fail(FSDP_ERR_INVALID, "rope: head_dim must be positive and even, got " +
                               std::to_string(headDim));
  int64_t n = batch * seq * heads * (headDim / 2);
  if (n == 0)
    return;
  floatDtype(t, "fsdp_rope", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    ropeK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), static_cast<S *>(y), batch, seq, heads,
        headDim, theta, inverse);
  });
  launched("rope kernel");
}

namespace {

void checkHeads(int64_t hq, int64_t hkv, int64_t d) {
  if (hq <= 0 || hkv <= 0 || d <= 0 || hq % hkv)
    fail(FSDP_ERR_INVALID, "attention: num_heads " + std::to_string(hq) +
                               " must be a positive multiple of num_kv_heads " +
                               std::to_string(hkv) + " and head_dim " +
                               std::to_string(d) + " positive");
}

/// Attention in f32/f64, or for 2-byte dtypes on f32 working copies of the
/// operands whose results are rounded once (the cpu driver's way).
void attentionAny(CudaDevice *dev, fsdp_stream_s *s, fsdp_dtype t,
                  const void *q, const void *k, const void *v, void *o,
                  const void *dout, void *dq, void *dk, void *dv, int64_t batch,
                  int64_t seq, int64_t hq, int64_t hkv, int64_t d) {
  checkHeads(hq, hkv, d);
  if (batch == 0 || seq == 0)
    return;
  cudaStream_t st = streamOf(s);
  bool grad = dout != nullptr;
  if (t == FSDP_F32 || t == FSDP_F64) {
    wideDtype(t, "fsdp_attention", [&](auto tag) {
      using T = typename Elt<decltype(tag)::value>::S;
      attentionCore<T>(dev, st, static_cast<const T *>(q),
                       static_cast<const T *>(k), static_cast<const T *>(v),
                       static_cast<T *>(o), static_cast<const T *>(dout),
                       static_cast<T *>(dq), static_cast<T *>(dk),
                       static_cast<T *>(dv), batch, seq, hq, hkv, d);
    });
    return;
  }
  if (t != FSDP_BF16 && t != FSDP_F16)
    fail(FSDP_ERR_INVALID,
         "fsdp_attention: dtype must be f32, f64, bf16 or f16");
  int64_t nq = batch * seq * hq * d, nk = batch * seq * hkv * d;
  auto widen = [&](const void *src, int64_t n) {
    float *f = static_cast<float *>(dev->scratch(st, n * sizeof(float)));
    launchCast(src, t, f, FSDP_F32, n, st);
    return f;
  };
  auto out = [&](int64_t n) {
    return static_cast<float *>(dev->scratch(st, n * sizeof(float)));
  };
  float *qf = widen(q, nq), *kf = widen(k, nk), *vf = widen(v, nk);
  std::vector<std::pair<float *, std::pair<void *, int64_t>>> results;
  if (!grad) {
    float *of = out(nq);
    attentionCore<float>(dev, st, qf, kf, vf, of, nullptr, nullptr, nullptr,
                         nullptr, batch, seq, hq, hkv, d);
    results.push_back({of, {o, nq}});
  } else {
    float *df = widen(dout, nq), *dqf = out(nq), *dkf = out(nk), *dvf = out(nk);
    attentionCore<float>(dev, st, qf, kf, vf, nullptr, df, dqf, dkf, dvf, batch,
                         seq, hq, hkv, d);
    results.push_back({dqf, {dq, nq}});
    results.push_back({dkf, {dk, nk}});
    results.push_back({dvf, {dv, nk}});
    dev->release(st, df);
  }
  for (auto &[f, dst] : results) {
    launchCast(f, FSDP_F32, dst.first, t, dst.second, st);
    dev->release(st, f);
  }
  dev->release(st, qf);
  dev->release(st, kf);
  dev->release(st, vf);
}

} // namespace

void CudaDevice::attention(fsdp_stream_s *s, fsdp_dtype t, const void *q,
                           const void *k, const void *v, void *o, int64_t batch,
                           int64_t seq, int64_t hq, int64_t hkv, int64_t d) {
  attentionAny(this, s, t, q, k, v, o, nullptr, nullptr, nullptr, nullptr,
               batch, seq, hq, hkv, d);
}

void CudaDevice::attention_grad(fsdp_stream_s *s, fsdp_dtype t, const void *q,
                                const void *k, const void *v, const void *dout,
                                void *dq, void *dk, void *dv, int64_t batch,
                                int64_t seq, int64_t hq, int64_t hkv,
                                int64_t d) {
  attentionAny(this, s, t, q, k, v, nullptr, dout, dq, dk, dv, batch, seq, hq,
               hkv, d);
}

void CudaDevice::split(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                       void *const *outs, const int64_t *sizes, int nparts,
                       int64_t outer, int64_t inner) {
  copyParts(this, s, t, const_cast<void *>(x), outs, sizes, nparts, outer,
            inner,
            /*toParts=*/true);
}

void CudaDevice::concat(fsdp_stream_s *s, fsdp_dtype t, const void *const *ins,
                        void *y, const int64_t *sizes, int nparts,
                        int64_t outer, int64_t inner) {
  copyParts(this, s, t, y, const_cast<void *const *>(ins), sizes, nparts, outer,
            inner, /*toParts=*/false);
}

} // namespace fsdp::hal::cuda
