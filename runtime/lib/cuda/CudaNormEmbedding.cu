//===- CudaNormEmbedding.cu - norms and embeddings on the GPU -------------===//
//
// layer_norm and rms_norm, embedding and position_embedding, and their
// gradients, for the cuda driver. Row statistics are a tree within a block
// (one block a row) in double. Every sum over rows runs in a fixed order
// (fsdp/SumOrder.h), so that a run repeats bit for bit: the weight and bias
// gradients of the norms and position_embedding's gradient are two-stage
// column sums (CudaColumnSum.cuh); the embedding gradient sorts the
// (token, position) pairs (cub::DeviceRadixSort, stable) and sums each
// token's rows in position order, the cpu driver's order, with no atomics.
//
//===----------------------------------------------------------------------===//
#include "CudaColumnSum.cuh"
#include "CudaKernelUtil.cuh"

#include <cub/device/device_radix_sort.cuh>

#include "fsdp/ElementMath.h"

namespace fsdp::hal::cuda {

namespace {

//===--- Embeddings -------------------------------------------------------===//

// Rows [first, first + vocab) of a vocabulary of `total`: an id outside the
// slice looks up a zero row (VocabParallelEmbedding), outside [0, total) it
// is reported.
template <int DT>
__global__ void
embeddingK(const void *idx, int idxI64, const typename Elt<DT>::S *table,
           typename Elt<DT>::S *y, int64_t n, int64_t vocab, int64_t dim,
           int64_t first, int64_t total, DeviceErrors *err) {
  FSDP_GRID_LOOP(e, n * dim) {
    int64_t i = e / dim, c = e % dim, v = loadIndex(idx, idxI64, i);
    if (v < 0 || v >= total) {
      if (c == 0)
        report(err, kIndexOutOfRange, v, i, total);
      y[e] = typename Elt<DT>::S{};
    } else if (v < first || v >= first + vocab) {
      y[e] = typename Elt<DT>::S{};
    } else {
      y[e] = table[(v - first) * dim + c];
    }
  }
}

// The sort keys of the embedding gradient: token ids less `first` (an id
// outside the slice keyed `vocab`, after every valid one, and reported if
// outside [0, total)), positions as values.
__global__ void embeddingKeysK(const void *idx, int idxI64, uint32_t *keys,
                               int32_t *pos, int64_t n, int64_t vocab,
                               int64_t first, int64_t total,
                               DeviceErrors *err) {
  FSDP_GRID_LOOP(i, n) {
    int64_t v = loadIndex(idx, idxI64, i);
    if (v < 0 || v >= total)
      report(err, kIndexOutOfRange, v, i, total);
    v -= first;
    if (v < 0 || v >= vocab)
      v = vocab;
    keys[i] = static_cast<uint32_t>(v);
    pos[i] = static_cast<int32_t>(i);
  }
}

// dtable[v, c] = Σ dy[pos, c] over token v's positions in increasing order
// (keys/pos sorted by token, stably), from 0 in A: thread (j, c) works when
// j starts a token's run. Rows of absent tokens stay as zeroed.
template <int DT, typename A>
__global__ void embeddingGradK(const uint32_t *keys, const int32_t *pos,
                               const typename Elt<DT>::S *dy,
                               typename Elt<DT>::S *dtable, int64_t n,
                               int64_t vocab, int64_t dim) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(e, n * dim) {
    int64_t j = e / dim, c = e % dim;
    uint32_t v = keys[j];
    if ((j > 0 && keys[j - 1] == v) || v >= vocab)
      continue;
    int64_t end = j + 1;
    while (end < n && keys[end] == v)
      ++end;
    A acc = order::segmentColumnSum<A>(pos, j, end, dim, c, [&](int64_t i) {
      return static_cast<A>(E::ld(dy, i));
    });
    dtable[static_cast<int64_t>(v) * dim + c] =
        E::st(static_cast<typename E::C>(acc));
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

// Column sums (CudaColumnSum.cuh) of the gradients below.

// position_embedding_grad: dtable[i] = Σ_b dy[b, i] in the compute type
// (rows b, columns i < positions·dim; 0 past the sequence).
template <int DT> struct PositionGradTerm {
  const typename Elt<DT>::S *dy;
  int64_t plane;
  __device__ typename Elt<DT>::C operator()(int64_t b, int64_t i) const {
    return i < plane ? Elt<DT>::ld(dy, b * plane + i) : typename Elt<DT>::C(0);
  }
};
template <int DT> struct StoreC {
  typename Elt<DT>::S *y;
  __device__ void operator()(int64_t c, typename Elt<DT>::C v) const {
    y[c] = Elt<DT>::st(v);
  }
};
// A double sum rounded once to the dtype.
template <int DT> struct StoreD {
  typename Elt<DT>::S *y;
  __device__ void operator()(int64_t c, double v) const {
    y[c] = Elt<DT>::st(static_cast<typename Elt<DT>::C>(v));
  }
};

/// layer_norm_grad's (dw, db) terms, summed together.
struct WB {
  double w = 0, b = 0;
  __device__ WB &operator+=(const WB &o) {
    w += o.w;
    b += o.b;
    return *this;
  }
};
// dw[c] = Σ_r dy·x̂, db[c] = Σ_r dy, x̂ from the row's (mean, rstd).
template <int DT> struct LayerNormColTerm {
  const typename Elt<DT>::S *x, *dy;
  const double *stats;
  int64_t dim;
  __device__ WB operator()(int64_t r, int64_t c) const {
    using E = Elt<DT>;
    double xh = (E::ld(x, r * dim + c) - stats[2 * r]) * stats[2 * r + 1];
    double g = E::ld(dy, r * dim + c);
    return WB{g * xh, g};
  }
};
template <int DT> struct LayerNormColStore {
  typename Elt<DT>::S *dw, *db;
  __device__ void operator()(int64_t c, const WB &a) const {
    using E = Elt<DT>;
    dw[c] = E::st(static_cast<typename E::C>(a.w));
    db[c] = E::st(static_cast<typename E::C>(a.b));
  }
};
// dw[c] = Σ_r dy·x·rr.
template <int DT> struct RmsNormColTerm {
  const typename Elt<DT>::S *x, *dy;
  const double *rrs;
  int64_t dim;
  __device__ double operator()(int64_t r, int64_t c) const {
    using E = Elt<DT>;
    return static_cast<double>(E::ld(dy, r * dim + c)) * E::ld(x, r * dim + c) *
           rrs[r];
  }
};

//===--- Norms ------------------------------------------------------------===//

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

} // namespace

//===--- The entry points -------------------------------------------------===//

void CudaDevice::embedding(fsdp_stream_s *s, fsdp_dtype t, const void *idx,
                           fsdp_dtype it, const void *table, void *y, int64_t n,
                           int64_t vocab, int64_t dim, int64_t first,
                           int64_t total) {
  checkIndexType(it, "fsdp_embedding: indices");
  if (n * dim == 0)
    return;
  floatDtype(t, "fsdp_embedding", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    embeddingK<DT><<<blocksFor(n * dim), kThreads, 0, streamOf(s)>>>(
        idx, it == FSDP_I64, static_cast<const S *>(table), static_cast<S *>(y),
        n, vocab, dim, first, total, errors);
  });
  launched("embedding kernel");
}

void CudaDevice::embedding_grad(fsdp_stream_s *s, fsdp_dtype t, const void *idx,
                                fsdp_dtype it, const void *dy, void *dtable,
                                int64_t n, int64_t vocab, int64_t dim,
                                int64_t first, int64_t total) {
  checkIndexType(it, "fsdp_embedding_grad: indices");
  if (n > INT32_MAX || vocab >= INT32_MAX)
    fail(FSDP_ERR_UNSUPPORTED, "fsdp_embedding_grad: " + std::to_string(n) +
                                   " positions or a vocabulary of " +
                                   std::to_string(vocab) +
                                   " above 2^31 - 1 (the sort's 32-bit keys)");
  cudaStream_t st = streamOf(s);
  floatDtype(t, "fsdp_embedding_grad", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    using A = std::conditional_t<DT == FSDP_F64, double, float>;
    check(cudaMemsetAsync(dtable, 0,
                          static_cast<size_t>(vocab * dim) * sizeof(S), st),
          "cudaMemsetAsync");
    if (n == 0 || dim == 0)
      return;
    // Keys need the bits of `vocab` (the out-of-range key) only.
    int endBit = 1;
    while (endBit < 32 &&
           (uint64_t{1} << endBit) <= static_cast<uint64_t>(vocab))
      ++endBit;
    int items = static_cast<int>(n);
    size_t sortBytes = 0;
    check(cub::DeviceRadixSort::SortPairs(
              nullptr, sortBytes, static_cast<const uint32_t *>(nullptr),
              static_cast<uint32_t *>(nullptr),
              static_cast<const int32_t *>(nullptr),
              static_cast<int32_t *>(nullptr), items, 0, endBit, st),
          "cub::DeviceRadixSort::SortPairs (size)");
    // One scratch block: keys and positions in and out, then cub's storage.
    size_t pairBytes = (static_cast<size_t>(n) * 4 + 255) / 256 * 256;
    char *sc = static_cast<char *>(scratch(st, 4 * pairBytes + sortBytes));
    auto *keysIn = reinterpret_cast<uint32_t *>(sc);
    auto *keys = reinterpret_cast<uint32_t *>(sc + pairBytes);
    auto *posIn = reinterpret_cast<int32_t *>(sc + 2 * pairBytes);
    auto *pos = reinterpret_cast<int32_t *>(sc + 3 * pairBytes);
    embeddingKeysK<<<blocksFor(n), kThreads, 0, st>>>(
        idx, it == FSDP_I64, keysIn, posIn, n, vocab, first, total, errors);
    launched("embedding_grad keys kernel");
    check(cub::DeviceRadixSort::SortPairs(sc + 4 * pairBytes, sortBytes, keysIn,
                                          keys, posIn, pos, items, 0, endBit,
                                          st),
          "cub::DeviceRadixSort::SortPairs");
    embeddingGradK<DT, A><<<blocksFor(n * dim), kThreads, 0, st>>>(
        keys, pos, static_cast<const S *>(dy), static_cast<S *>(dtable), n,
        vocab, dim);
    launched("embedding_grad kernel");
    release(st, sc);
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
    columnSum<typename Elt<DT>::C>(
        this, streamOf(s), batch, total,
        PositionGradTerm<DT>{static_cast<const S *>(dy), seq * dim},
        StoreC<DT>{static_cast<S *>(dtable)},
        "position_embedding_grad kernels");
  });
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
    columnSum<WB>(
        this, st, rows, dim,
        LayerNormColTerm<DT>{static_cast<const S *>(x),
                             static_cast<const S *>(dy), stats, dim},
        LayerNormColStore<DT>{static_cast<S *>(dw), static_cast<S *>(db)},
        "layer_norm_grad column sums");
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
    columnSum<double>(this, st, rows, dim,
                      RmsNormColTerm<DT>{static_cast<const S *>(x),
                                         static_cast<const S *>(dy), rrs, dim},
                      StoreD<DT>{static_cast<S *>(dw)},
                      "rms_norm_grad column sums");
  });
  launched("rms_norm_grad kernels");
  release(st, rrs);
}

} // namespace fsdp::hal::cuda
