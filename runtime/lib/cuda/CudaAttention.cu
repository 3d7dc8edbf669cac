//===- CudaAttention.cu - rope and causal attention on the GPU ------------===//
//
// rope, and causal attention with its gradient, for the cuda driver.
// bf16/f16 attention runs cuDNN's fused SDPA (CudnnAttention.cpp) when
// libcudnn loaded and supports the shape. Otherwise, and for f32/f64, the
// heads are repacked head-major ([batch·hq, seq, d], kv heads repeated over
// their query group) and every product is one cublasGemmStridedBatchedEx over
// all (batch, head) pairs (f32 without TF32, f64), in row blocks of 256 queries
// whose keys stop at the block's last row (the causal mask: the blocks above
// the diagonal are never computed). The softmax runs in kernels (row sums in
// double, a tree within a block); 2-byte tensors are widened while repacked
// and the results rounded once.
//
//===----------------------------------------------------------------------===//
#include "CudaKernelUtil.cuh"

#include "fsdp/ElementMath.h"

#include <cstdlib>
#include <string>
#include <vector>

namespace fsdp::hal::cuda {

namespace {

//===--- RoPE -------------------------------------------------------------===//

// The rotation of position t and pair i, cos and sin of ropeAngle times the
// attention factor in double, once per (t, i) rather than once per head:
// the same values (the same expressions), a heads-fold fewer f64 sin, cos
// and pow (on the H200 the per-element form took 11x its simulated time).
__global__ void ropeTableK(double2 *cs, int64_t seq, int64_t headDim,
                           double theta, math::RopeScaling scaling,
                           int inverse) {
  int64_t half = headDim / 2;
  FSDP_GRID_LOOP(e, seq * half) {
    double phi = math::ropeAngle(e / half, e % half, headDim, theta, scaling,
                                 inverse != 0);
    cs[e] = make_double2(cos(phi) * scaling.attentionFactor,
                         sin(phi) * scaling.attentionFactor);
  }
}

template <int DT>
__global__ void ropeK(const typename Elt<DT>::S *x, typename Elt<DT>::S *y,
                      const double2 *cs, int64_t batch, int64_t seq,
                      int64_t heads, int64_t headDim) {
  using E = Elt<DT>;
  int64_t half = headDim / 2, n = batch * seq * heads * half;
  FSDP_GRID_LOOP(e, n) {
    int64_t i = e % half, t = (e / (half * heads)) % seq;
    int64_t bt = e / (half * heads); // b * seq + t
    int64_t base = bt * heads * headDim + ((e / half) % heads) * headDim;
    double2 r = cs[t * half + i];
    double a = E::ld(x, base + i), b = E::ld(x, base + i + half);
    y[base + i] = E::st(static_cast<typename E::C>(a * r.x - b * r.y));
    y[base + i + half] = E::st(static_cast<typename E::C>(b * r.x + a * r.y));
  }
}

//===--- Attention on head-major tensors ----------------------------------===//

// dst[(b·hq + h), t, :] = src[b, t, h / group, :] widened to C (src holds
// `srcHeads` heads; group = hq / srcHeads repeats a kv head over its group).
template <int DT>
__global__ void toHeadsK(const typename Elt<DT>::S *src,
                         typename Elt<DT>::C *dst, int64_t batch, int64_t seq,
                         int64_t hq, int64_t srcHeads, int64_t d) {
  using E = Elt<DT>;
  int64_t group = hq / srcHeads, n = batch * hq * seq * d;
  FSDP_GRID_LOOP(e, n) {
    int64_t j = e % d, t = (e / d) % seq, h = (e / (d * seq)) % hq,
            b = e / (d * seq * hq);
    dst[e] = E::ld(src, ((b * seq + t) * srcHeads + h / group) * d + j);
  }
}

// dst[b, t, h, :] = Σ over the group of src[(b·hq + h·group + g), t, :]
// (group 1: the plain inverse of toHeadsK; > 1: dk and dv of a kv head),
// summed in double and rounded once to the storage type.
template <int DT>
__global__ void fromHeadsK(const typename Elt<DT>::C *src,
                           typename Elt<DT>::S *dst, int64_t batch, int64_t seq,
                           int64_t hq, int64_t dstHeads, int64_t d) {
  using E = Elt<DT>;
  int64_t group = hq / dstHeads, n = batch * seq * dstHeads * d;
  FSDP_GRID_LOOP(e, n) {
    int64_t j = e % d, h = (e / d) % dstHeads, t = (e / (d * dstHeads)) % seq,
            b = e / (d * dstHeads * seq);
    double acc = 0;
    for (int64_t g = 0; g < group; ++g)
      acc += static_cast<double>(
          src[((b * hq + h * group + g) * seq + t) * d + j]);
    dst[e] = E::st(static_cast<typename E::C>(acc));
  }
}

// Row t of matrix blockIdx.y of p [count, seq, seq] (scaled scores, keys
// s <= t computed): the causal softmax in place, 0 above the diagonal, and
// lse[y·seq + t] = max + log Σ exp(x − max). The cpu driver's arithmetic:
// e = math::expT(x − max) in T, Σe in double, e · T(1/Σe) in T.
template <typename T>
__global__ void causalSoftmaxK(T *p, T *lse, int64_t seq) {
  __shared__ double sh[kThreads];
  int64_t t = blockIdx.x, m = blockIdx.y;
  T *row = p + (m * seq + t) * seq;
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
  s = blockSum(s, sh);
  const T inv = static_cast<T>(1.0 / s);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    row[j] = j <= t ? static_cast<T>(row[j] * inv) : T(0);
  if (threadIdx.x == 0)
    lse[m * seq + t] = static_cast<T>(static_cast<double>(tmx) + log(s));
}

// The probabilities from the forward's statistics: p = exp(s − lse) on and
// below the diagonal, 0 above (FlashAttention-2, Dao 2023, Algorithm 2).
template <typename T>
__global__ void probabilitiesK(T *p, const T *lse, int64_t count, int64_t seq) {
  int64_t n = count * seq * seq;
  FSDP_GRID_LOOP(e, n) {
    int64_t j = e % seq, row = e / seq; // row = m·seq + t
    int64_t t = row % seq;
    p[e] = j <= t ? math::expT(static_cast<T>(p[e] - lse[row])) : T(0);
  }
}

// Row t of matrix blockIdx.y: ds = p ⊙ (ds − rowsum(p ⊙ ds)) · scale below
// the diagonal, 0 above (the row sum in double, a tree within the block; from
// the rebuilt p, as the cpu driver: a row of ds sums to zero at rounding
// level).
template <typename T>
__global__ void softmaxGradK(const T *p, T *ds, int64_t seq, double scale) {
  __shared__ double sh[kThreads];
  int64_t row = blockIdx.y * seq + blockIdx.x, t = blockIdx.x;
  const T *pr = p + row * seq;
  T *dr = ds + row * seq;
  double dot = 0;
  for (int64_t j = threadIdx.x; j <= t; j += blockDim.x)
    dot += static_cast<double>(pr[j]) * dr[j];
  dot = blockSum(dot, sh);
  for (int64_t j = threadIdx.x; j < seq; j += blockDim.x)
    dr[j] = j <= t ? static_cast<T>(pr[j] * (dr[j] - dot) * scale) : T(0);
}

/// Column-major C = α·op(A)·op(B) + β·C for `count` matrices at strides sa,
/// sb, sc, in T (f32: CUBLAS_COMPUTE_32F, no TF32 under the handle's default
/// math mode; f64).
template <typename T>
void gemmBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                 int64_t m, int64_t n, int64_t k, T alpha, const T *a,
                 int64_t lda, int64_t sa, const T *b, int64_t ldb, int64_t sb,
                 T beta, T *c, int64_t ldc, int64_t sc, int64_t count) {
  constexpr bool f32 = std::is_same<T, float>::value;
  cudaDataType dt = f32 ? CUDA_R_32F : CUDA_R_64F;
  cublasComputeType_t ct = f32 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_64F;
  check(cublasGemmStridedBatchedEx(
            h, ta, tb, static_cast<int>(m), static_cast<int>(n),
            static_cast<int>(k), &alpha, a, dt, static_cast<int>(lda), sa, b,
            dt, static_cast<int>(ldb), sb, &beta, c, dt, static_cast<int>(ldc),
            sc, static_cast<int>(count), ct, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

/// The query rows of one causal block: [r0, r1), whose keys are [0, r1).
constexpr int64_t kRowBlock = 256;
/// The most bytes one seq×seq score matrix set may take per chunk of pairs.
constexpr size_t kScoreBytes = size_t(1) << 30;

/// Attention (or its VJP) of `count` heads, head-major: q, k, v, o, dout,
/// dq, dk, dv [count, seq, d] (k, v repeated over the query group), lse
/// [count, seq]. Row-major S = scale·Q·Kᵀ is the column-major Sᵀ = K·Qᵀ.
/// Forward: P = causal softmax(S), lse, O = P·V. VJP (dk, dv accumulated,
/// zeroed here; o unused): P = exp(S − lse), dP = dO·Vᵀ,
/// dS = P ⊙ (dP − rowsum(P ⊙ dP))·scale, dQ = dS·K, dK = dSᵀ·Q, dV = Pᵀ·dO.
template <typename T>
void attentionHeads(CudaDevice *dev, cudaStream_t st, const T *q, const T *k,
                    const T *v, T *o, T *lse, const T *dout, T *dq, T *dk,
                    T *dv, int64_t count, int64_t seq, int64_t d) {
  cublasHandle_t h = dev->blasOn(st); // the stream, then the workspace again
  bool grad = dout != nullptr;
  size_t mat = static_cast<size_t>(seq * seq) * sizeof(T);
  // Pairs per chunk: the score matrices within kScoreBytes, and at most
  // 65535 (the softmax's grid y).
  int64_t chunk = std::max<int64_t>(
      1, std::min<int64_t>(
             {count, static_cast<int64_t>(kScoreBytes / mat), int64_t(65535)}));
  T *p = static_cast<T *>(dev->scratch(st, chunk * mat));
  T *ds = grad ? static_cast<T *>(dev->scratch(st, chunk * mat)) : nullptr;
  double scaleD = 1.0 / std::sqrt(static_cast<double>(d));
  T scale = static_cast<T>(scaleD);
  int64_t hs = seq * d, ss = seq * seq;
  if (grad) {
    check(cudaMemsetAsync(dk, 0, count * hs * sizeof(T), st), "cudaMemset");
    check(cudaMemsetAsync(dv, 0, count * hs * sizeof(T), st), "cudaMemset");
  }
  auto N = CUBLAS_OP_N, Tr = CUBLAS_OP_T;
  for (int64_t c0 = 0; c0 < count; c0 += chunk) {
    int64_t nc = std::min(chunk, count - c0), off = c0 * hs;
    const T *qc = q + off, *kc = k + off, *vc = v + off;
    // Scores of each row block against the keys up to its last row.
    for (int64_t r0 = 0; r0 < seq; r0 += kRowBlock) {
      int64_t r1 = std::min(seq, r0 + kRowBlock), nb = r1 - r0;
      gemmBatched<T>(h, Tr, N, r1, nb, d, scale, kc, d, hs, qc + r0 * d, d, hs,
                     T(0), p + r0 * seq, seq, ss, nc);
      if (grad) // dP = dO·Vᵀ over the same keys
        gemmBatched<T>(h, Tr, N, r1, nb, d, T(1), vc, d, hs,
                       dout + off + r0 * d, d, hs, T(0), ds + r0 * seq, seq, ss,
                       nc);
    }
    int64_t n = nc * ss;
    if (!grad) {
      causalSoftmaxK<T>
          <<<dim3(seq, nc), kThreads, 0, st>>>(p, lse + c0 * seq, seq);
      launched("attention softmax");
    } else {
      probabilitiesK<T>
          <<<blocksFor(n), kThreads, 0, st>>>(p, lse + c0 * seq, nc, seq);
      launched("attention probabilities");
      softmaxGradK<T><<<dim3(seq, nc), kThreads, 0, st>>>(p, ds, seq, scaleD);
      launched("attention softmax gradient");
    }
    for (int64_t r0 = 0; r0 < seq; r0 += kRowBlock) {
      int64_t r1 = std::min(seq, r0 + kRowBlock), nb = r1 - r0;
      const T *pb = p + r0 * seq;
      if (!grad) { // O = P·V
        gemmBatched<T>(h, N, N, d, nb, r1, T(1), vc, d, hs, pb, seq, ss, T(0),
                       o + off + r0 * d, d, hs, nc);
        continue;
      }
      const T *db = ds + r0 * seq;
      // dQ = dS·K; dK += dSᵀ·Q; dV += Pᵀ·dO.
      gemmBatched<T>(h, N, N, d, nb, r1, T(1), kc, d, hs, db, seq, ss, T(0),
                     dq + off + r0 * d, d, hs, nc);
      gemmBatched<T>(h, N, Tr, d, r1, nb, T(1), qc + r0 * d, d, hs, db, seq, ss,
                     T(1), dk + off, d, hs, nc);
      gemmBatched<T>(h, N, Tr, d, r1, nb, T(1), dout + off + r0 * d, d, hs, pb,
                     seq, ss, T(1), dv + off, d, hs, nc);
    }
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
  cudaStream_t st = streamOf(s);
  int64_t pairs = seq * (headDim / 2);
  auto *cs = static_cast<double2 *>(scratch(st, pairs * sizeof(double2)));
  ropeTableK<<<blocksFor(pairs), kThreads, 0, st>>>(cs, seq, headDim, theta,
                                                    scaling, inverse);
  floatDtype(t, "fsdp_rope", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    ropeK<DT><<<blocksFor(n), kThreads, 0, st>>>(static_cast<const S *>(x),
                                                 static_cast<S *>(y), cs, batch,
                                                 seq, heads, headDim);
  });
  launched("rope kernels");
  release(st, cs);
}

namespace {

void checkHeads(int64_t hq, int64_t hkv, int64_t d) {
  if (hq <= 0 || hkv <= 0 || d <= 0 || hq % hkv)
    fail(FSDP_ERR_INVALID, "attention: num_heads " + std::to_string(hq) +
                               " must be a positive multiple of num_kv_heads " +
                               std::to_string(hkv) + " and head_dim " +
                               std::to_string(d) + " positive");
}

/// FSDP_CUDA_ATTENTION: "cudnn" (the default: cuDNN for bf16/f16) or
/// "cublas" (the strided-batched path for every dtype, the reference the
/// GPU check compares cuDNN against).
bool cudnnWanted() {
  const char *e = std::getenv("FSDP_CUDA_ATTENTION");
  if (!e || !*e || std::string(e) == "cudnn")
    return true;
  if (std::string(e) == "cublas")
    return false;
  fail(FSDP_ERR_INVALID,
       std::string("FSDP_CUDA_ATTENTION=") + e + ": expected cudnn or cublas");
}

/// Attention or its VJP on the strided-batched path, in storage dtype DT:
/// repack head-major (2-byte tensors widened to f32), attentionHeads, and
/// repack the results (rounded once; dk, dv summed over the query group).
template <int DT>
void attentionBatched(CudaDevice *dev, cudaStream_t st, const void *q,
                      const void *k, const void *v, void *o, void *lse,
                      const void *dout, void *dq, void *dk, void *dv,
                      int64_t batch, int64_t seq, int64_t hq, int64_t hkv,
                      int64_t d) {
  using E = Elt<DT>;
  using S = typename E::S;
  using C = typename E::C;
  bool grad = dout != nullptr;
  int64_t count = batch * hq, n = count * seq * d;
  std::vector<C *> held;
  auto heads = [&](const void *src, int64_t srcHeads) {
    C *h = static_cast<C *>(dev->scratch(st, n * sizeof(C)));
    held.push_back(h);
    if (src) {
      toHeadsK<DT><<<blocksFor(n), kThreads, 0, st>>>(
          static_cast<const S *>(src), h, batch, seq, hq, srcHeads, d);
      launched("attention repack");
    }
    return h;
  };
  auto back = [&](const C *h, void *dst, int64_t dstHeads) {
    int64_t m = batch * seq * dstHeads * d;
    fromHeadsK<DT><<<blocksFor(m), kThreads, 0, st>>>(
        h, static_cast<S *>(dst), batch, seq, hq, dstHeads, d);
    launched("attention repack");
  };
  C *qh = heads(q, hq), *kh = heads(k, hkv), *vh = heads(v, hkv);
  C *stats = static_cast<C *>(lse);
  if (!grad) {
    C *oh = heads(nullptr, hq);
    attentionHeads<C>(dev, st, qh, kh, vh, oh, stats, nullptr, nullptr, nullptr,
                      nullptr, count, seq, d);
    back(oh, o, hq);
  } else {
    C *doh = heads(dout, hq);
    C *dqh = heads(nullptr, hq), *dkh = heads(nullptr, hq),
      *dvh = heads(nullptr, hq);
    attentionHeads<C>(dev, st, qh, kh, vh, nullptr, stats, doh, dqh, dkh, dvh,
                      count, seq, d);
    back(dqh, dq, hq);
    back(dkh, dk, hkv);
    back(dvh, dv, hkv);
  }
  for (C *h : held)
    dev->release(st, h);
}

/// Attention (o, lse) or its VJP (dout given: dq, dk, dv).
void attentionAny(CudaDevice *dev, fsdp_stream_s *s, fsdp_dtype t,
                  const void *q, const void *k, const void *v, void *o,
                  void *lse, const void *dout, void *dq, void *dk, void *dv,
                  int64_t batch, int64_t seq, int64_t hq, int64_t hkv,
                  int64_t d) {
  checkHeads(hq, hkv, d);
  bool grad = dout != nullptr;
  const char *op = grad ? "fsdp_attention_grad" : "fsdp_attention";
  if (batch == 0 || seq == 0)
    return;
  cudaStream_t st = streamOf(s);
  if ((t == FSDP_BF16 || t == FSDP_F16) && cudnnWanted()) {
    if (!dev->cudnn)
      fail(FSDP_ERR_DEVICE,
           std::string(op) + ": " + (t == FSDP_BF16 ? "bf16" : "f16") +
               " attention runs on cuDNN, which is not available: " +
               dev->cudnnNote +
               " (or set FSDP_CUDA_ATTENTION=cublas for the f32 path)");
    SdpaShape sh{t, batch, seq, hq, hkv, d};
    bool done =
        grad ? cudnnSdpaBackward(dev, st, sh, q, k, v, o, lse, dout, dq, dk, dv)
             : cudnnSdpaForward(dev, st, sh, q, k, v, o, lse);
    if (done)
      return; // else a shape cuDNN does not support: the f32 path
  }
  floatDtype(t, op, [&](auto tag) {
    attentionBatched<decltype(tag)::value>(dev, st, q, k, v, o, lse, dout, dq,
                                           dk, dv, batch, seq, hq, hkv, d);
  });
}

} // namespace

void CudaDevice::attention(fsdp_stream_s *s, fsdp_dtype t, const void *q,
                           const void *k, const void *v, void *o, void *lse,
                           int64_t batch, int64_t seq, int64_t hq, int64_t hkv,
                           int64_t d) {
  attentionAny(this, s, t, q, k, v, o, lse, nullptr, nullptr, nullptr, nullptr,
               batch, seq, hq, hkv, d);
}

void CudaDevice::attention_grad(fsdp_stream_s *s, fsdp_dtype t, const void *q,
                                const void *k, const void *v, const void *o,
                                const void *lse, const void *dout, void *dq,
                                void *dk, void *dv, int64_t batch, int64_t seq,
                                int64_t hq, int64_t hkv, int64_t d) {
  // o and lse are read, never written, on the VJP's path.
  attentionAny(this, s, t, q, k, v, const_cast<void *>(o),
               const_cast<void *>(lse), dout, dq, dk, dv, batch, seq, hq, hkv,
               d);
}

} // namespace fsdp::hal::cuda
