//===- CudaReductions.cu - reductions and cross-entropy on the GPU --------===//
//
// reduce_sum and broadcast over axes, and cross-entropy with its gradient, for
// the cuda driver. reduce_sum is a two-stage column sum in double
// (CudaColumnSum.cuh, fsdp/SumOrder.h: rows are the reduced elements in x's
// row-major order, columns the output elements; the cpu driver's order where
// the rows are few); cross-entropy's row statistics (max and sum of
// exponentials, in double) are a tree within a block, one block a row.
//
//===----------------------------------------------------------------------===//
#include "CudaColumnSum.cuh"
#include "CudaKernelUtil.cuh"

#include "fsdp/ElementMath.h"

#include <vector>

namespace fsdp::hal::cuda {

namespace {

//===--- Reductions and broadcasts over axes ------------------------------===//

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

// reduce_sum's term (r, o): reduced element r of output element o.
template <int DT> struct ReduceSumTerm {
  const typename Elt<DT>::S *x;
  AxisMap m;
  __device__ double operator()(int64_t r, int64_t o) const {
    return Elt<DT>::ld(x, offsetOf(o, m.nk, m.kept, m.keptStride) +
                              offsetOf(r, m.nr, m.red, m.redStride));
  }
};
template <int DT> struct ReduceSumStore {
  typename Elt<DT>::S *y;
  __device__ void operator()(int64_t o, double v) const {
    y[o] = Elt<DT>::st(static_cast<typename Elt<DT>::C>(v));
  }
};

// y[i] = x[offset of i's coordinates]: `m` holds y's dims with x's strides
// (0 for the broadcast axes).
template <int DT>
__global__ void broadcastK(const typename Elt<DT>::S *x, AxisMap m, int64_t n,
                           typename Elt<DT>::S *y) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n)
  y[i] = E::st(E::ld(x, offsetOf(i, m.nk, m.kept, m.keptStride)));
}

//===--- Cross-entropy ----------------------------------------------------===//

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

/// The loss dtype of DT logits: f32 for bf16/f16 (fsdp_cross_entropy).
constexpr int lossDtOf(int dt) {
  return dt == FSDP_BF16 || dt == FSDP_F16 ? FSDP_F32 : dt;
}

template <int DT>
__global__ void
crossEntropyGradK(const typename Elt<DT>::S *logits, const void *labels,
                  int labelsI64, const typename Elt<lossDtOf(DT)>::S *dloss,
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
  double scale = static_cast<double>(Elt<lossDtOf(DT)>::ld(dloss, 0)) /
                 static_cast<double>(positions);
  using C = typename E::C;
  const C k = static_cast<C>(scale / s), sc = static_cast<C>(scale);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    C g = math::expT(static_cast<C>(E::ld(row, c) - cmx)) * k;
    out[c] = E::st(c == l ? static_cast<C>(g - sc) : g);
  }
}

//===--- The vocab-parallel cross-entropy ---------------------------------===//

/// One block per position: this rank's (m, s, z) in its slot (the other
/// slots zeroed by the caller), as the cpu driver computes them.
template <int DT>
__global__ void
vocabCeStatsK(const typename Elt<DT>::S *logits, const void *labels,
              int labelsI64, int64_t positions, int64_t classes, int64_t first,
              int64_t total, int64_t slot, typename Elt<lossDtOf(DT)>::S *stats,
              DeviceErrors *err) {
  using E = Elt<DT>;
  using L = Elt<lossDtOf(DT)>;
  __shared__ double sh[kThreads];
  int64_t p = blockIdx.x;
  const typename E::S *row = logits + p * classes;
  double mx, s;
  rowMaxSumExp<DT>(row, classes, sh, mx, s);
  if (threadIdx.x == 0) {
    int64_t l = loadIndex(labels, labelsI64, p);
    if (l < 0 || l >= total)
      report(err, kLabelOutOfRange, l, p, total);
    l -= first;
    typename L::S *out = stats + (slot * positions + p) * 3;
    out[0] = L::st(static_cast<typename L::C>(mx));
    out[1] = L::st(static_cast<typename L::C>(s));
    out[2] = l >= 0 && l < classes ? L::st(static_cast<typename L::C>(
                                         static_cast<double>(E::ld(row, l))))
                                   : L::st(typename L::C(0));
  }
}

/// Per position lse − z from the merged statistics (math::vocabCeMerge).
template <int LT>
__global__ void vocabCeRowK(const typename Elt<LT>::S *stats, int64_t positions,
                            int64_t tp, double *rowLoss) {
  FSDP_GRID_LOOP(p, positions) {
    double mx, s, z;
    math::vocabCeMerge(stats, positions, tp, p, mx, s, z);
    rowLoss[p] = (mx + log(s)) - z;
  }
}

template <int DT>
__global__ void
vocabCeGradK(const typename Elt<DT>::S *logits, const void *labels,
             int labelsI64, const typename Elt<lossDtOf(DT)>::S *stats,
             const typename Elt<lossDtOf(DT)>::S *dloss,
             typename Elt<DT>::S *dlogits, int64_t positions, int64_t classes,
             int64_t first, int64_t tp, DeviceErrors *err) {
  using E = Elt<DT>;
  using C = typename E::C;
  int64_t p = blockIdx.x;
  const typename E::S *row = logits + p * classes;
  typename E::S *out = dlogits + p * classes;
  int64_t l = loadIndex(labels, labelsI64, p);
  if (l < 0 || l >= classes * tp) {
    if (threadIdx.x == 0)
      report(err, kLabelOutOfRange, l, p, classes * tp);
    return;
  }
  l -= first;
  double mx, s, z;
  math::vocabCeMerge(stats, positions, tp, p, mx, s, z);
  // As the cpu driver: e^(x − max) · (scale / s), minus scale at the label.
  double scale = static_cast<double>(Elt<lossDtOf(DT)>::ld(dloss, 0)) /
                 static_cast<double>(positions);
  const C cmx = static_cast<C>(mx), k = static_cast<C>(scale / s),
          sc = static_cast<C>(scale);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    C g = math::expT(static_cast<C>(E::ld(row, c) - cmx)) * k;
    out[c] = E::st(c == l ? static_cast<C>(g - sc) : g);
  }
}

} // namespace

//===--- The entry points -------------------------------------------------===//

void CudaDevice::reduce_sum(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                            const int64_t *xShape, int rank,
                            const int64_t *axes, int naxes, void *y) {
  AxisMap m = axisMap(xShape, rank, axes, naxes, "fsdp_reduce_sum");
  floatDtype(t, "fsdp_reduce_sum", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    columnSum<double>(this, streamOf(s), m.redNumel, m.keptNumel,
                      ReduceSumTerm<DT>{static_cast<const S *>(x), m},
                      ReduceSumStore<DT>{static_cast<S *>(y)},
                      "reduce_sum kernels");
  });
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
    // bf16/f16 logits: an f32 loss (kernels.h), as autocast computes it.
    constexpr int LT = lossDtOf(DT);
    meanK<LT><<<1, kThreads, 0, st>>>(rows, positions,
                                      static_cast<typename Elt<LT>::S *>(loss));
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
        static_cast<const typename Elt<lossDtOf(DT)>::S *>(dloss),
        static_cast<S *>(dlogits), positions, classes, errors);
  });
  launched("cross_entropy_grad kernel");
}

void CudaDevice::vocab_ce_stats(fsdp_stream_s *s, fsdp_dtype t,
                                const void *logits, const void *labels,
                                fsdp_dtype lt, int64_t positions,
                                int64_t classes, int64_t first, int64_t total,
                                int64_t tp, int64_t slot, void *stats) {
  checkIndexType(lt, "fsdp_vocab_ce_stats: labels");
  if (classes <= 0)
    fail(FSDP_ERR_INVALID, "fsdp_vocab_ce_stats needs at least one class");
  cudaStream_t st = streamOf(s);
  floatDtype(t, "fsdp_vocab_ce_stats", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    constexpr int LT = lossDtOf(DT);
    using S = typename Elt<DT>::S;
    using SL = typename Elt<LT>::S;
    check(cudaMemsetAsync(stats, 0,
                          static_cast<size_t>(tp * positions * 3) * sizeof(SL),
                          st),
          "cudaMemsetAsync");
    if (positions > 0)
      vocabCeStatsK<DT><<<positions, kThreads, 0, st>>>(
          static_cast<const S *>(logits), labels, lt == FSDP_I64, positions,
          classes, first, total, slot, static_cast<SL *>(stats), errors);
  });
  launched("vocab_ce_stats kernel");
}

void CudaDevice::vocab_ce_loss(fsdp_stream_s *s, fsdp_dtype t,
                               const void *stats, int64_t positions, int64_t tp,
                               void *loss) {
  cudaStream_t st = streamOf(s);
  double *rows = static_cast<double *>(
      scratch(st, std::max<int64_t>(positions, 1) * sizeof(double)));
  floatDtype(t, "fsdp_vocab_ce_loss", [&](auto tag) {
    constexpr int LT = lossDtOf(decltype(tag)::value);
    using SL = typename Elt<LT>::S;
    if (positions > 0)
      vocabCeRowK<LT><<<blocksFor(positions), kThreads, 0, st>>>(
          static_cast<const SL *>(stats), positions, tp, rows);
    meanK<LT><<<1, kThreads, 0, st>>>(rows, positions, static_cast<SL *>(loss));
  });
  launched("vocab_ce_loss kernel");
  release(st, rows);
}

void CudaDevice::vocab_ce_grad(fsdp_stream_s *s, fsdp_dtype t,
                               const void *logits, const void *labels,
                               fsdp_dtype lt, const void *stats,
                               const void *dloss, void *dlogits,
                               int64_t positions, int64_t classes,
                               int64_t first, int64_t tp) {
  checkIndexType(lt, "fsdp_vocab_ce_grad: labels");
  if (classes <= 0)
    fail(FSDP_ERR_INVALID, "fsdp_vocab_ce_grad needs at least one class");
  if (positions == 0)
    return;
  floatDtype(t, "fsdp_vocab_ce_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    using SL = typename Elt<lossDtOf(DT)>::S;
    vocabCeGradK<DT><<<positions, kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(logits), labels, lt == FSDP_I64,
        static_cast<const SL *>(stats), static_cast<const SL *>(dloss),
        static_cast<S *>(dlogits), positions, classes, first, tp, errors);
  });
  launched("vocab_ce_grad kernel");
}

} // namespace fsdp::hal::cuda
