//===- CudaAttention.cu - rope and causal attention on the GPU ------------===//
//
// rope, and causal attention with its gradient, for the cuda driver. Attention
// runs one (batch, head) at a time, as the cpu driver: GEMMs on whole
// matrices (cublasSgemm/cublasDgemm, no TF32) and the softmax in kernels (row
// sums in double, a tree within a block); bf16/f16 operands are widened into
// f32 scratch first and the results rounded once.
//
//===----------------------------------------------------------------------===//
#include "CudaKernelUtil.cuh"

#include "fsdp/ElementMath.h"

#include <vector>

namespace fsdp::hal::cuda {

namespace {

//===--- RoPE -------------------------------------------------------------===//

template <int DT>
__global__ void ropeK(const typename Elt<DT>::S *x, typename Elt<DT>::S *y,
                      int64_t batch, int64_t seq, int64_t heads,
                      int64_t headDim, double theta, math::RopeScaling scaling,
                      int inverse) {
  using E = Elt<DT>;
  int64_t half = headDim / 2, n = batch * seq * heads * half;
  FSDP_GRID_LOOP(e, n) {
    int64_t i = e % half, h = (e / half) % heads,
            t = (e / (half * heads)) % seq;
    int64_t bt = e / (half * heads); // b * seq + t
    int64_t base = bt * heads * headDim + h * headDim;
    double phi = math::ropeAngle(t, i, headDim, theta, scaling, inverse != 0);
    double c = cos(phi) * scaling.attentionFactor,
           s = sin(phi) * scaling.attentionFactor;
    double a = E::ld(x, base + i), b = E::ld(x, base + i + half);
    y[base + i] = E::st(static_cast<typename E::C>(a * c - b * s));
    y[base + i + half] = E::st(static_cast<typename E::C>(b * c + a * s));
  }
}

//===--- Attention (one (batch, head) at a time, as the cpu driver) -------===//

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

} // namespace

//===--- The entry points -------------------------------------------------===//

void CudaDevice::rope(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t batch, int64_t seq, int64_t heads,
                      int64_t headDim, double theta, int ropeType,
                      double factor, double lowFreqFactor,
                      double highFreqFactor, double originalMaxPositions,
                      double betaFast, double betaSlow, int truncate,
                      double attentionFactor, int inverse) {
  math::RopeScaling scaling = ropeScaling(
      headDim, ropeType, factor, lowFreqFactor, highFreqFactor,
      originalMaxPositions, betaFast, betaSlow, truncate, attentionFactor);
  int64_t n = batch * seq * heads * (headDim / 2);
  if (n == 0)
    return;
  floatDtype(t, "fsdp_rope", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    ropeK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), static_cast<S *>(y), batch, seq, heads,
        headDim, theta, scaling, inverse);
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

} // namespace fsdp::hal::cuda
