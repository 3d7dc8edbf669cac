//===- TransformerKernels.cpp - embeddings, norms, RoPE, SiLU -------------===//
//
// Implementations of TransformerKernels.h except attention (in
// AttentionKernels.cpp), for float and double. Plain loops; per-row
// statistics in double (KernelUtil.h's sum8 order). See the header for formulas
// and sources.
//
//===----------------------------------------------------------------------===//
#include "TransformerKernels.h"
#include "KernelUtil.h"
#include "fsdp/ElementMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fsdp::rt::cpu {

namespace {

template <typename I>
int64_t checkedIndex(const I *idx, int64_t i, int64_t vocab) {
  return detail::checkedIndex(idx, i, vocab, "index");
}

} // namespace

template <typename T, typename I>
void embedding(const I *idx, const T *table, T *y, int64_t n, int64_t vocab,
               int64_t dim, int64_t first, int64_t total) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = checkedIndex(idx, i, total) - first;
    if (v >= 0 && v < vocab)
      std::memcpy(y + i * dim, table + v * dim, dim * sizeof(T));
    else
      std::fill(y + i * dim, y + (i + 1) * dim, T(0));
  }
}

template <typename T, typename I>
void embeddingGrad(const I *idx, const T *dy, T *dtable, int64_t n,
                   int64_t vocab, int64_t dim, int64_t first, int64_t total) {
  std::fill(dtable, dtable + vocab * dim, T(0));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = checkedIndex(idx, i, total) - first;
    if (v < 0 || v >= vocab)
      continue;
    T *row = dtable + v * dim;
    const T *g = dy + i * dim;
    for (int64_t c = 0; c < dim; ++c)
      row[c] += g[c];
  }
}

template <typename T>
void positionEmbedding(const T *x, const T *table, T *y, int64_t batch,
                       int64_t seq, int64_t dim) {
  int64_t plane = seq * dim;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < plane; ++i)
      y[b * plane + i] = x[b * plane + i] + table[i];
}

template <typename T>
void positionEmbeddingGrad(const T *dy, T *dtable, int64_t batch, int64_t seq,
                           int64_t dim, int64_t positions) {
  if (positions < seq)
    throw std::invalid_argument(
        "position_embedding_grad: " + std::to_string(positions) +
        " positions < sequence length " + std::to_string(seq));
  int64_t plane = seq * dim;
  std::fill(dtable, dtable + positions * dim, T(0));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < plane; ++i)
      dtable[i] += dy[b * plane + i];
}

template <typename T>
FSDP_CPU_MULTIVERSION void layerNorm(const T *x, const T *w, const T *b, T *y,
                                     int64_t rows, int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    double mean, rstd;
    detail::rowMeanRstd(xr, dim, eps, mean, rstd);
    for (int64_t c = 0; c < dim; ++c)
      yr[c] = math::layerNorm(xr[c], mean, rstd, w[c], b[c]);
  }
}

template <typename T>
FSDP_CPU_MULTIVERSION void layerNormGrad(const T *x, const T *w, const T *dy,
                                         T *dx, T *dw, T *db, int64_t rows,
                                         int64_t dim, double eps) {
  std::vector<double> accW(dim, 0.0), accB(dim, 0.0);
  detail::HeapScratch scratch(accW, accB);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * dim, *gr = dy + r * dim;
    T *dxr = dx + r * dim;
    double mean, rstd;
    detail::rowMeanRstd(xr, dim, eps, mean, rstd);
    auto xh = [&](int64_t c) { return (xr[c] - mean) * rstd; };
    double sumG = detail::sum8(
        dim, [&](int64_t c) { return static_cast<double>(gr[c]) * w[c]; });
    double sumGX = detail::sum8(dim, [&](int64_t c) {
      return static_cast<double>(gr[c]) * w[c] * xh(c);
    });
    for (int64_t c = 0; c < dim; ++c) {
      accW[c] += static_cast<double>(gr[c]) * xh(c);
      accB[c] += gr[c];
    }
    double mG = sumG / static_cast<double>(dim);
    double mGX = sumGX / static_cast<double>(dim);
    for (int64_t c = 0; c < dim; ++c)
      dxr[c] = math::layerNormGrad(xr[c], w[c], gr[c], mean, rstd, mG, mGX);
  }
  for (int64_t c = 0; c < dim; ++c) {
    dw[c] = static_cast<T>(accW[c]);
    db[c] = static_cast<T>(accB[c]);
  }
}

template <typename T>
FSDP_CPU_MULTIVERSION void rmsNorm(const T *x, const T *w, T *y, int64_t rows,
                                   int64_t dim, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * dim;
    T *yr = y + r * dim;
    double ss = detail::sum8(
        dim, [&](int64_t c) { return static_cast<double>(xr[c]) * xr[c]; });
    double rr = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    for (int64_t c = 0; c < dim; ++c)
      yr[c] = math::rmsNorm(xr[c], rr, w[c]);
  }
}

template <typename T>
FSDP_CPU_MULTIVERSION void rmsNormGrad(const T *x, const T *w, const T *dy,
                                       T *dx, T *dw, int64_t rows, int64_t dim,
                                       double eps) {
  std::vector<double> accW(dim, 0.0);
  detail::HeapScratch scratch(accW);
  for (int64_t r = 0; r < rows; ++r) {
    const T *xr = x + r * dim, *gr = dy + r * dim;
    T *dxr = dx + r * dim;
    double ss = detail::sum8(
        dim, [&](int64_t c) { return static_cast<double>(xr[c]) * xr[c]; });
    double gx = detail::sum8(dim, [&](int64_t c) {
      return static_cast<double>(gr[c]) * w[c] * xr[c];
    });
    double rr = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    double k = rr * rr * gx / static_cast<double>(dim);
    for (int64_t c = 0; c < dim; ++c) {
      dxr[c] = math::rmsNormGrad(xr[c], w[c], gr[c], rr, k);
      accW[c] += static_cast<double>(gr[c]) * xr[c] * rr;
    }
  }
  for (int64_t c = 0; c < dim; ++c)
    dw[c] = static_cast<T>(accW[c]);
}

template <typename T>
void rope(const T *x, T *y, int64_t batch, int64_t seq, int64_t heads,
          int64_t headDim, double theta, const math::RopeScaling &scaling,
          bool inverse) {
  if (headDim <= 0 || headDim % 2)
    throw std::invalid_argument("rope: head_dim must be positive and even, "
                                "got " +
                                std::to_string(headDim));
  int64_t half = headDim / 2, width = heads * headDim;
  // Angle table for every position (shared by batch and heads), cos and sin
  // scaled by the attention factor (yarn's; 1 otherwise).
  std::vector<double> cs(seq * half), sn(seq * half);
  detail::HeapScratch scratch(cs, sn);
  double a = scaling.attentionFactor;
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t i = 0; i < half; ++i) {
      double phi = math::ropeAngle(t, i, headDim, theta, scaling, inverse);
      cs[t * half + i] = std::cos(phi) * a;
      sn[t * half + i] = std::sin(phi) * a;
    }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) {
      const double *c = &cs[t * half], *s = &sn[t * half];
      for (int64_t h = 0; h < heads; ++h) {
        int64_t base = (b * seq + t) * width + h * headDim;
        const T *xh = x + base;
        T *yh = y + base;
        for (int64_t i = 0; i < half; ++i) {
          double xa = xh[i], xb = xh[i + half];
          yh[i] = static_cast<T>(xa * c[i] - xb * s[i]);
          yh[i + half] = static_cast<T>(xb * c[i] + xa * s[i]);
        }
      }
    }
}

template <typename T> void silu(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = math::silu(x[i]);
}

template <typename T> void siluGrad(const T *x, const T *dy, T *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = math::siluGrad(x[i], dy[i]);
}

#define FSDP_INSTANTIATE_IDX(T, I)                                             \
  template void embedding<T, I>(const I *, const T *, T *, int64_t, int64_t,   \
                                int64_t, int64_t, int64_t);                    \
  template void embeddingGrad<T, I>(const I *, const T *, T *, int64_t,        \
                                    int64_t, int64_t, int64_t, int64_t);
#define FSDP_INSTANTIATE_TK(T)                                                 \
  FSDP_INSTANTIATE_IDX(T, int32_t)                                             \
  FSDP_INSTANTIATE_IDX(T, int64_t)                                             \
  template void positionEmbedding<T>(const T *, const T *, T *, int64_t,       \
                                     int64_t, int64_t);                        \
  template void positionEmbeddingGrad<T>(const T *, T *, int64_t, int64_t,     \
                                         int64_t, int64_t);                    \
  template void layerNorm<T>(const T *, const T *, const T *, T *, int64_t,    \
                             int64_t, double);                                 \
  template void layerNormGrad<T>(const T *, const T *, const T *, T *, T *,    \
                                 T *, int64_t, int64_t, double);               \
  template void rmsNorm<T>(const T *, const T *, T *, int64_t, int64_t,        \
                           double);                                            \
  template void rmsNormGrad<T>(const T *, const T *, const T *, T *, T *,      \
                               int64_t, int64_t, double);                      \
  template void rope<T>(const T *, T *, int64_t, int64_t, int64_t, int64_t,    \
                        double, const math::RopeScaling &, bool);              \
  template void silu<T>(const T *, T *, int64_t);                              \
  template void siluGrad<T>(const T *, const T *, T *, int64_t);

FSDP_INSTANTIATE_TK(float)
FSDP_INSTANTIATE_TK(double)

} // namespace fsdp::rt::cpu
