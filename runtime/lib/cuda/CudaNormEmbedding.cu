//===- CudaNormEmbedding.cu - norms and embeddings on the GPU -------------===//
//
// layer_norm and rms_norm, embedding and position_embedding, and their
// gradients, for the cuda driver. Row statistics are a tree within a block
// (one block a row) in double; weight and position-embedding gradients run in
// the cpu driver's order (a thread owns a column). The embedding gradient's
// scatter-add uses atomics (no fixed order), in f32 scratch for 2-byte dtypes.
//
//===----------------------------------------------------------------------===//
#include "CudaKernelUtil.cuh"

#include "fsdp/ElementMath.h"

namespace fsdp::hal::cuda {

namespace {

//===--- Embeddings -------------------------------------------------------===//

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

} // namespace

//===--- The entry points -------------------------------------------------===//

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

} // namespace fsdp::hal::cuda
