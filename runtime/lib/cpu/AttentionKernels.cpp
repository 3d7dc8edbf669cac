//===- AttentionKernels.cpp - causal GQA attention and its VJP ------------===//
//
// cpu::attention / cpu::attentionGrad of TransformerKernels.h for float
// and double. For each (batch, query head) the scores S = q·kᵀ/√d are one
// seq×seq GEMM (CBLAS) into a scratch matrix, the causal softmax is a
// max-subtracted row loop (exponentials in T, their sum in double), and o = P·v
// is a second GEMM; heads are addressed in place through leading dimensions (no
// transposes or copies). The forward keeps each row's log-sum-exp L; the
// backward rebuilds P = exp(S − L) from it, as FlashAttention-2 (Dao 2023,
// Algorithm 2) and cuDNN's SDPA backward do (Vaswani et al. 2017; GQA: Ainslie
// et al. 2023), and takes rowsum(dP⊙P) from that P rather than as
// rowsum(dO⊙O): the same value, but a row of dS then sums to zero at rounding
// level, which a key bias's gradient (identically zero in exact arithmetic)
// reads directly.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "TransformerKernels.h"
#include "fsdp/ElementMath.h"

#include "Blas.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp::rt::cpu {

namespace {

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
          int64_t k, float alpha, const float *a, int64_t lda, const float *b,
          int64_t ldb, float beta, float *c, int64_t ldc) {
  selectBlas(); // the core is chosen before the first GEMM
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
          int64_t k, double alpha, const double *a, int64_t lda,
          const double *b, int64_t ldb, double beta, double *c, int64_t ldc) {
  selectBlas();
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

void checkHeads(int64_t hq, int64_t hkv, int64_t d) {
  if (hq <= 0 || hkv <= 0 || d <= 0 || hq % hkv)
    throw std::invalid_argument(
        "attention: num_heads " + std::to_string(hq) +
        " must be a positive multiple of num_kv_heads " + std::to_string(hkv) +
        " and head_dim " + std::to_string(d) + " positive");
}

/// p[seq, seq] = causal softmax of the rows of s (scaled scores); entries
/// above the diagonal are set to 0. p may alias s. The exponentials are
/// math::expT in T (one vectorizable loop), their sum in double. lse[t]
/// (stride 1) receives max + log(sum), the row's log-sum-exp.
template <typename T>
FSDP_CPU_MULTIVERSION void causalSoftmax(const T *s, T *p, T *lse,
                                         int64_t seq) {
  for (int64_t t = 0; t < seq; ++t) {
    const T *row = s + t * seq;
    T *out = p + t * seq;
    T mx = row[0];
    for (int64_t j = 1; j <= t; ++j)
      mx = row[j] > mx ? row[j] : mx;
    for (int64_t j = 0; j <= t; ++j)
      out[j] = math::expT(static_cast<T>(row[j] - mx));
    double sum = detail::sum8(
        t + 1, [&](int64_t j) { return static_cast<double>(out[j]); });
    const T inv = static_cast<T>(1.0 / sum);
    for (int64_t j = 0; j <= t; ++j)
      out[j] = out[j] * inv;
    for (int64_t j = t + 1; j < seq; ++j)
      out[j] = T(0);
    lse[t] = static_cast<T>(static_cast<double>(mx) + std::log(sum));
  }
}

/// p[seq, seq] = exp(s − lse[t]) on and below the diagonal, 0 above, in place
/// (the probabilities from the forward's statistics: no max or sum pass).
template <typename T>
FSDP_CPU_MULTIVERSION void probabilitiesFromStats(T *p, const T *lse,
                                                  int64_t seq) {
  for (int64_t t = 0; t < seq; ++t) {
    T *row = p + t * seq;
    const T l = lse[t];
    for (int64_t j = 0; j <= t; ++j)
      row[j] = math::expT(static_cast<T>(row[j] - l));
    for (int64_t j = t + 1; j < seq; ++j)
      row[j] = T(0);
  }
}

/// Strided views of one (batch, query head) pair.
struct HeadView {
  int64_t ldq, ldk;   // row strides of q-like and k-like tensors
  int64_t qOff, kOff; // element offsets of this head's first row
};

HeadView headView(int64_t b, int64_t h, int64_t seq, int64_t hq, int64_t hkv,
                  int64_t d) {
  int64_t group = hq / hkv;
  HeadView v;
  v.ldq = hq * d;
  v.ldk = hkv * d;
  v.qOff = b * seq * v.ldq + h * d;
  v.kOff = b * seq * v.ldk + (h / group) * d;
  return v;
}

} // namespace

template <typename T>
void attention(const T *q, const T *k, const T *v, T *o, T *lse, int64_t batch,
               int64_t seq, int64_t hq, int64_t hkv, int64_t d) {
  checkHeads(hq, hkv, d);
  if (batch == 0 || seq == 0)
    return;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d)));
  std::vector<T> p(seq * seq);
  detail::HeapScratch scratch(p);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      HeadView hv = headView(b, h, seq, hq, hkv, d);
      // S = scale · Q Kᵀ, then P = causal softmax(S) in place.
      gemm(CblasNoTrans, CblasTrans, seq, seq, d, scale, q + hv.qOff, hv.ldq,
           k + hv.kOff, hv.ldk, T(0), p.data(), seq);
      causalSoftmax(p.data(), p.data(), lse + (b * hq + h) * seq, seq);
      // O = P V.
      gemm(CblasNoTrans, CblasNoTrans, seq, d, seq, T(1), p.data(), seq,
           v + hv.kOff, hv.ldk, T(0), o + hv.qOff, hv.ldq);
    }
}

template <typename T>
FSDP_CPU_MULTIVERSION void
attentionGrad(const T *q, const T *k, const T *v, const T *lse, const T *dout,
              T *dq, T *dk, T *dv, int64_t batch, int64_t seq, int64_t hq,
              int64_t hkv, int64_t d) {
  checkHeads(hq, hkv, d);
  int64_t kvNumel = batch * seq * hkv * d;
  std::fill(dk, dk + kvNumel, T(0));
  std::fill(dv, dv + kvNumel, T(0));
  std::fill(dq, dq + batch * seq * hq * d, T(0));
  if (batch == 0 || seq == 0)
    return;
  const double scaleD = 1.0 / std::sqrt(static_cast<double>(d));
  const T scale = static_cast<T>(scaleD);
  std::vector<T> p(seq * seq), ds(seq * seq);
  detail::HeapScratch scratch(p, ds);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      HeadView hv = headView(b, h, seq, hq, hkv, d);
      const T *qh = q + hv.qOff, *kh = k + hv.kOff, *vh = v + hv.kOff;
      const T *doh = dout + hv.qOff;
      // P = exp(scale · Q Kᵀ − L): the forward's probabilities.
      gemm(CblasNoTrans, CblasTrans, seq, seq, d, scale, qh, hv.ldq, kh, hv.ldk,
           T(0), p.data(), seq);
      probabilitiesFromStats(p.data(), lse + (b * hq + h) * seq, seq);
      // dP = dO Vᵀ (into ds), then dS = P ⊙ (dP − rowsum(P ⊙ dP)) · scale.
      gemm(CblasNoTrans, CblasTrans, seq, seq, d, T(1), doh, hv.ldq, vh, hv.ldk,
           T(0), ds.data(), seq);
      for (int64_t t = 0; t < seq; ++t) {
        const T *pr = &p[t * seq];
        T *dr = &ds[t * seq];
        double dot = detail::sum8(t + 1, [&](int64_t j) {
          return static_cast<double>(pr[j]) * dr[j];
        });
        for (int64_t j = 0; j <= t; ++j)
          dr[j] = static_cast<T>(pr[j] * (dr[j] - dot) * scaleD);
        for (int64_t j = t + 1; j < seq; ++j)
          dr[j] = T(0);
      }
      // dQ = dS K; dK += dSᵀ Q; dV += Pᵀ dO (sums over the GQA group).
      gemm(CblasNoTrans, CblasNoTrans, seq, d, seq, T(1), ds.data(), seq, kh,
           hv.ldk, T(0), dq + hv.qOff, hv.ldq);
      gemm(CblasTrans, CblasNoTrans, seq, d, seq, T(1), ds.data(), seq, qh,
           hv.ldq, T(1), dk + hv.kOff, hv.ldk);
      gemm(CblasTrans, CblasNoTrans, seq, d, seq, T(1), p.data(), seq, doh,
           hv.ldq, T(1), dv + hv.kOff, hv.ldk);
    }
}

#define FSDP_INSTANTIATE_ATTN(T)                                               \
  template void attention<T>(const T *, const T *, const T *, T *, T *,        \
                             int64_t, int64_t, int64_t, int64_t, int64_t);     \
  template void attentionGrad<T>(const T *, const T *, const T *, const T *,   \
                                 const T *, T *, T *, T *, int64_t, int64_t,   \
                                 int64_t, int64_t, int64_t);

FSDP_INSTANTIATE_ATTN(float)
FSDP_INSTANTIATE_ATTN(double)

} // namespace fsdp::rt::cpu
