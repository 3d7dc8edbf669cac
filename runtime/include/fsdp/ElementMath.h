//===- ElementMath.h - per-element formulas shared by the drivers ---------===//
//
// The per-element math of the kernels of fsdp/kernels.h, written once and
// compiled by g++ for the cpu driver and by nvcc (__host__ __device__) for
// the cuda driver, so that the CPU tests exercise the formulas the GPU runs.
// T is the compute type (float or double); an expression mixing T and double
// evaluates in double, as written. Sources of the formulas: fsdp/kernels.h.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ELEMENTMATH_H
#define FSDP_ELEMENTMATH_H

#include "fsdp/Half.h" // FSDP_HD

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace fsdp::math {

inline constexpr double kSqrt2OverPi = 0.79788456080286535588; // √(2/π)
inline constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1/√2
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/√(2π)

FSDP_HD inline float sqrtT(float x) { return sqrtf(x); }
FSDP_HD inline double sqrtT(double x) { return sqrt(x); }

template <typename T> FSDP_HD inline T relu(T x) { return x > T(0) ? x : T(0); }
template <typename T> FSDP_HD inline T reluGrad(T x, T dy) {
  return x > T(0) ? dy : T(0);
}

/// e^x in float without a library call, so that a loop of it vectorizes
/// (with -fno-trapping-math) and the CPU and CUDA drivers compute the same
/// bits: Cody–Waite reduction x = n·ln2 + r (ln2 split in two, exact n·C1),
/// e^r by the degree-6 minimax polynomial of Cephes' expf (S. L. Moshier,
/// Cephes Math Library 2.2, expf.c; ≤ 1.3 ulp, measured over ±87 against
/// the double exp), scaled by 2^n through the exponent bits. x is clamped
/// to [−87, 88] (results stay normal and finite); NaN stays NaN.
FSDP_HD inline float expPoly(float x) {
  // NaN fails every comparison: it keeps flowing through `xc` (hence r, p
  // and the result) while `xn` picks a finite n for the integer conversion.
  float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float xn = x >= -87.0f ? xc : -87.0f;
  float t = xn * 1.44269504088896341f + 0.5f;
  int32_t n = static_cast<int32_t>(t);
  n -= static_cast<int32_t>(static_cast<float>(n) >
                            t); // floor(t) = round(x/ln2)
  float fn = static_cast<float>(n);
  float r = xc - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  return p * bitsFloat(static_cast<uint32_t>(n + 127) << 23);
}

/// e^x in T: expPoly for float (vectorizable, the same bits on CPU and GPU),
/// the library's double exp for double.
FSDP_HD inline float expT(float x) { return expPoly(x); }
FSDP_HD inline double expT(double x) { return exp(x); }

/// tanh(u) for the float GELU approximation: 1 − 2/(e^{2u}+1) through
/// expPoly (a few ulp; saturates to ±1 where e^{2u} is clamped), branch-free.
FSDP_HD inline float fastTanh(float u) {
  return 1.0f - 2.0f / (expPoly(2.0f * u) + 1.0f);
}

/// GELU: the tanh approximation in float arithmetic for T = float, every
/// other case in double.
template <typename T> FSDP_HD inline T gelu(T x, bool approximateTanh) {
  if constexpr (std::is_same<T, float>::value) {
    if (approximateTanh) {
      const float c = static_cast<float>(kSqrt2OverPi);
      float v = x;
      return 0.5f * v * (1.0f + fastTanh(c * (v + 0.044715f * v * v * v)));
    }
  }
  double v = x;
  if (approximateTanh)
    return static_cast<T>(
        0.5 * v * (1.0 + tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v))));
  return static_cast<T>(0.5 * v * (1.0 + erf(v * kInvSqrt2)));
}

/// dy · dGELU/dx (exact: Φ(x) + x·φ(x); tanh: 0.5(1+t) +
/// 0.5x(1−t²)·√(2/π)(1 + 3·0.044715x²)).
template <typename T>
FSDP_HD inline T geluGrad(T x, T dy, bool approximateTanh) {
  if constexpr (std::is_same<T, float>::value) {
    if (approximateTanh) {
      const float c = static_cast<float>(kSqrt2OverPi);
      float v = x;
      float t = fastTanh(c * (v + 0.044715f * v * v * v));
      float d = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * c *
                                        (1.0f + 3.0f * 0.044715f * v * v);
      return d * static_cast<float>(dy);
    }
  }
  double v = x, d;
  if (approximateTanh) {
    double t = tanh(kSqrt2OverPi * (v + 0.044715 * v * v * v));
    d = 0.5 * (1.0 + t) +
        0.5 * v * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * v * v);
  } else {
    d = 0.5 * (1.0 + erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * exp(-0.5 * v * v);
  }
  return static_cast<T>(d * static_cast<double>(dy));
}

/// σ(x), stable for large |x| (never exponentiates a large positive number).
FSDP_HD inline double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

template <typename T> FSDP_HD inline T silu(T x) {
  double v = x;
  return static_cast<T>(v * sigmoid(v));
}
template <typename T> FSDP_HD inline T siluGrad(T x, T dy) {
  double v = x, s = sigmoid(v);
  return static_cast<T>(static_cast<double>(dy) * s * (1.0 + v * (1.0 - s)));
}

/// Philox4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers:
/// as easy as 1, 2, 3", SC'11, Figure 2 with the 10 rounds and constants of
/// Random123's philox.h; cuRAND's and PyTorch's generator): a bijection of
/// the 128-bit counter under a 64-bit key, so that any element's random
/// number is computed on its own, on any driver, in any order. Checked
/// against Random123's known-answer vectors (RuntimeKernelsTest).
FSDP_HD inline void philox4x32x10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t{0xD2511F53u} * ctr[0];
    uint64_t p1 = uint64_t{0xCD9E8D57u} * ctr[2];
    uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0,
                        static_cast<uint32_t>(p1),
                        static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1,
                        static_cast<uint32_t>(p0)};
    for (int i = 0; i < 4; ++i)
      ctr[i] = next[i];
    k0 += 0x9E3779B9u; // the Weyl sequence of the key (golden ratio)
    k1 += 0xBB67AE85u; // (√3 − 1)
  }
}

/// Dropout (Srivastava et al., JMLR 2014; torch.nn.functional.dropout's
/// inverted form): whether element `index` of the whole tensor survives at
/// optimizer step `step` in the op's stream `seed`. Its uniform number is the
/// first Philox word of counter (index, step) under key `seed`, scaled by
/// 2^-32; the element is kept when it is >= `rate`, so that P(keep) =
/// 1 − rate. A function of the element's place in the global batch, never
/// of the rank, world size or thread that computes it.
FSDP_HD inline bool dropoutKeeps(int64_t seed, int64_t step, int64_t index,
                                 double rate) {
  uint64_t i = static_cast<uint64_t>(index), t = static_cast<uint64_t>(step),
           k = static_cast<uint64_t>(seed);
  uint32_t ctr[4] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                     static_cast<uint32_t>(t), static_cast<uint32_t>(t >> 32)};
  philox4x32x10(ctr, static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32));
  return static_cast<double>(ctr[0]) * 0x1p-32 >= rate;
}
/// The global index of element `i` of a tensor that holds runs of `chunk`
/// elements `stride` apart in the global tensor, the first run at
/// `first + chunkFirst` (fsdp_dropout's g(i): rank t of a tensor-parallel
/// group holds piece t of dimension k, so chunk = its piece times the
/// dimensions after k, stride = T·chunk, chunkFirst = t·chunk).
FSDP_HD inline int64_t dropoutIndex(int64_t first, int64_t chunk,
                                    int64_t stride, int64_t chunkFirst,
                                    int64_t i) {
  return first + (i / chunk) * stride + chunkFirst + i % chunk;
}
/// A kept element is scaled by 1/(1 − rate) (in T: the factor is rounded
/// once, as torch's), a dropped one is 0.
template <typename T> FSDP_HD inline T dropout(T x, bool keep, T scale) {
  return keep ? x * scale : T(0);
}

/// The scalars of one AdamW step in T, computed as torch does (Python
/// floats, then cast): decay 1 − lr·wd, β1, β2, 1−β1, 1−β2, lr/(1−β1ᵗ),
/// √(1−β2ᵗ), ε.
template <typename T> struct AdamWScalars {
  T decay, b1, b2, omb1, omb2, stepSize, bc2Sqrt, eps;
};
template <typename T>
FSDP_HD inline AdamWScalars<T> adamwScalars(int64_t step, double lr,
                                            double beta1, double beta2,
                                            double eps, double weightDecay) {
  const double bc1 = 1.0 - pow(beta1, static_cast<double>(step));
  const double bc2 = 1.0 - pow(beta2, static_cast<double>(step));
  AdamWScalars<T> s;
  s.decay = static_cast<T>(1.0 - lr * weightDecay);
  s.b1 = static_cast<T>(beta1);
  s.b2 = static_cast<T>(beta2);
  s.omb1 = static_cast<T>(1.0 - beta1);
  s.omb2 = static_cast<T>(1.0 - beta2);
  s.stepSize = static_cast<T>(lr / bc1);
  s.bc2Sqrt = static_cast<T>(sqrt(bc2));
  s.eps = static_cast<T>(eps);
  return s;
}
/// One element of AdamW in torch's order: decay, moments, bias-corrected
/// step. Outputs may alias inputs (everything is read first).
template <typename T>
FSDP_HD inline void adamw(const AdamWScalars<T> &s, T p, T g, T m, T v, T &pOut,
                          T &mOut, T &vOut) {
  T pi = p * s.decay;
  T mi = s.b1 * m + s.omb1 * g;
  T vi = s.b2 * v + s.omb2 * g * g;
  T denom = sqrtT(vi) / s.bc2Sqrt + s.eps;
  pOut = pi - s.stepSize * (mi / denom);
  mOut = mi;
  vOut = vi;
}

/// SGD with L2 weight decay: p − lr·(g + wd·p), lr and wd already in T.
template <typename T> FSDP_HD inline T sgd(T p, T g, T lr, T wd) {
  return p - lr * (g + wd * p);
}

/// Learning-rate schedules (nn.lr_schedule, fsdp_lr_schedule): the factor
/// f(s) of LambdaLR at scheduler step s = t − 1 (t the 1-based optimizer
/// step: LambdaLR's first step uses f(0)), as the lambdas of transformers'
/// src/transformers/optimization.py: kind 0
/// _get_constant_schedule_with_warmup_lr_lambda, 1
/// _get_linear_schedule_with_warmup_lr_lambda, 2
/// _get_cosine_schedule_with_warmup_lr_lambda with num_cycles = 0.5
/// (warm-up s / max(1, W); linear max(0, (D − s) / max(1, D − W)); cosine
/// max(0, ½(1 + cos(π · 2 · 0.5 · p))), p = (s − W) / max(1, D − W)), W the
/// warm-up and D the decay (num_training_steps) steps; from s = D on the
/// cosine is 0 (held at the floor, as nanoGPT and torchtitan; transformers'
/// would rise again, which no run meant to do).
FSDP_HD inline double lrScheduleFactor(int kind, int64_t s, int64_t warmup,
                                       int64_t decay) {
  if (s < warmup)
    return static_cast<double>(s) /
           static_cast<double>(warmup > 1 ? warmup : 1);
  if (kind == 0)
    return 1.0;
  int64_t span = decay - warmup > 1 ? decay - warmup : 1;
  if (kind == 1) {
    double f = static_cast<double>(decay - s) / static_cast<double>(span);
    return f > 0.0 ? f : 0.0;
  }
  // Past the decay the rate holds at its floor, as nanoGPT's and
  // torchtitan's schedules (transformers' cosine would rise again there).
  if (s >= decay)
    return 0.0;
  const double kPi = 3.141592653589793; // Python's math.pi
  double progress = static_cast<double>(s - warmup) / static_cast<double>(span);
  double f = 0.5 * (1.0 + cos(kPi * 0.5 * 2.0 * progress));
  return f > 0.0 ? f : 0.0;
}
/// The rate of optimizer step t: a warm-up from 0 to base over the
/// warm-up steps (base·f(t − 1)), then min_lr + (base − min_lr)·f(t − 1),
/// the decay from base to the floor min_lr, as transformers'
/// get_cosine_with_min_lr_schedule_with_warmup
/// (_get_cosine_schedule_with_warmup_lr_lambda with min_lr_rate = min_lr /
/// base), Megatron-LM's OptimizerParamScheduler (init_lr 0) and nanoGPT's
/// get_lr; min_lr = 0 is transformers' base·f.
FSDP_HD inline double scheduledLr(int kind, int64_t step, double base,
                                  int64_t warmup, int64_t decay, double minLr) {
  double f = lrScheduleFactor(kind, step - 1, warmup, decay);
  if (step - 1 < warmup)
    return base * f;
  return minLr + (base - minLr) * f;
}

/// torch.nn.utils.clip_grad_norm_'s clip_coef_clamped: min(1, max_norm /
/// (norm + 1e-6)); 1 when max_norm is 0 (the norm only reported).
FSDP_HD inline double clipCoefficient(double norm, double maxNorm) {
  if (!(maxNorm > 0))
    return 1.0;
  double c = maxNorm / (norm + 1e-6);
  return c < 1.0 ? c : 1.0;
}

/// The norm of gradients of the loss times `lossScale` (S: a dynamic loss
/// scale, 1 without one), unscaled, and the factor that unscales and clips
/// them: ‖g‖ / S and clipCoefficient(‖g‖ / S) / S, as
/// torch.amp.GradScaler.unscale_ (multiply by 1 / S) followed by
/// clip_grad_norm_. S is a power of two, so dividing by it is exact.
FSDP_HD inline void unscaledGradNorm(double sumSquares, double maxNorm,
                                     double lossScale, double &norm,
                                     double &coef) {
  norm = sqrt(sumSquares) / lossScale;
  coef = clipCoefficient(norm, maxNorm) / lossScale;
}

/// Whether an optimizer update is skipped: its skip_if_nonfinite operand
/// (the global gradient norm) is given and not finite (GradScaler's inf/nan
/// check; a finite gradient's Σ g² in f64 never overflows).
FSDP_HD inline bool skipsUpdate(const double *skipIfNonfinite) {
  // |x| <= DBL_MAX is false for ±inf and NaN (fabs compiles on host and
  // device alike).
  return skipIfNonfinite && !(fabs(*skipIfNonfinite) <= 1.7976931348623157e308);
}

/// RoPE's static frequency transforms (fsdp_rope's rope_type, the
/// FSDP_ROPE_* of fsdp/kernels.h) and their parameters: the keys of
/// transformers' rope_parameters (src/transformers/modeling_rope_utils.py).
struct RopeScaling {
  int type = 0; ///< 0 default, 1 linear, 2 llama3, 3 yarn
  double factor = 1.0;
  double lowFreqFactor = 1.0, highFreqFactor = 4.0; ///< llama3
  double originalMaxPositions = 8192.0;             ///< llama3, yarn
  double betaFast = 32.0, betaSlow = 1.0;           ///< yarn
  bool truncate = true;                             ///< yarn
  double attentionFactor = 1.0; ///< yarn: scales cos and sin (mscale)
};

/// The inverse frequency of RoPE pair i < headDim/2: f = theta^(−2i/D)
/// (RoFormer eq. 15), transformed as transformers' ROPE_INIT_FUNCTIONS
/// (src/transformers/modeling_rope_utils.py, 5.24) compute it, in double:
/// - linear (_compute_linear_scaling_rope_parameters): f / factor;
/// - llama3 (_compute_llama3_parameters): with λ = 2π/f, L the original
///   context: f if λ < L/high_freq_factor, f/factor if λ > L/low_freq_factor,
///   else (1 − s)·f/factor + s·f, s = (L/λ − low) / (high − low);
/// - yarn (_compute_yarn_parameters; Peng et al. 2023, YaRN):
///   f/factor·(1 − e) + f·e, e = 1 − clamp((i − lo)/(hi − lo), 0, 1), the
///   correction range lo, hi = D·ln(L/(2π·β))/(2·ln theta) at β = beta_fast,
///   beta_slow, floored / ceiled when `truncate`, clamped to [0, D − 1]
///   (hi += 0.001 when equal).
FSDP_HD inline double ropeInvFreq(int64_t i, int64_t headDim, double theta,
                                  const RopeScaling &s) {
  const double kPi = 3.141592653589793; // Python's math.pi
  double d = static_cast<double>(headDim);
  double f = pow(theta, -2.0 * static_cast<double>(i) / d);
  switch (s.type) {
  case 1:
    return f / s.factor;
  case 2: {
    double wavelen = 2.0 * kPi / f;
    if (wavelen < s.originalMaxPositions / s.highFreqFactor)
      return f;
    if (wavelen > s.originalMaxPositions / s.lowFreqFactor)
      return f / s.factor;
    double smooth = (s.originalMaxPositions / wavelen - s.lowFreqFactor) /
                    (s.highFreqFactor - s.lowFreqFactor);
    return (1.0 - smooth) * f / s.factor + smooth * f;
  }
  case 3: {
    auto correctionDim = [&](double rotations) {
      return d * log(s.originalMaxPositions / (rotations * 2.0 * kPi)) /
             (2.0 * log(theta));
    };
    double lo = correctionDim(s.betaFast), hi = correctionDim(s.betaSlow);
    if (s.truncate) {
      lo = floor(lo);
      hi = ceil(hi);
    }
    lo = lo > 0.0 ? lo : 0.0;
    hi = hi < d - 1.0 ? hi : d - 1.0;
    if (lo == hi)
      hi += 0.001;
    double ramp = (static_cast<double>(i) - lo) / (hi - lo);
    ramp = ramp < 0.0 ? 0.0 : (ramp > 1.0 ? 1.0 : ramp);
    double extrapolation = 1.0 - ramp;
    return f / s.factor * (1.0 - extrapolation) + f * extrapolation;
  }
  default:
    return f;
  }
}

/// The RoPE angle of position t and pair i < headDim/2: t·ropeInvFreq(i),
/// negated for the inverse rotation (plain RoPE: t·theta^(−2i/headDim)).
FSDP_HD inline double ropeAngle(int64_t t, int64_t i, int64_t headDim,
                                double theta, const RopeScaling &s,
                                bool inverse) {
  double phi = static_cast<double>(t) * ropeInvFreq(i, headDim, theta, s);
  return inverse ? -phi : phi;
}

/// LayerNorm of one element given its row's mean and 1/√(σ²+eps).
template <typename T>
FSDP_HD inline T layerNorm(T x, double mean, double rstd, T w, T b) {
  return static_cast<T>((x - mean) * rstd * w + b);
}
/// LayerNorm's dx of one element: rstd·(g − mean(g) − x̂·mean(g·x̂)) with
/// g = dy·w and x̂ = (x − mean)·rstd.
template <typename T>
FSDP_HD inline T layerNormGrad(T x, T w, T dy, double mean, double rstd,
                               double meanG, double meanGX) {
  double xh = (x - mean) * rstd;
  double g = static_cast<double>(dy) * w;
  return static_cast<T>(rstd * (g - meanG - xh * meanGX));
}
/// RMSNorm of one element given its row's 1/√(mean(x²)+eps).
template <typename T> FSDP_HD inline T rmsNorm(T x, double rr, T w) {
  return static_cast<T>(x * rr * w);
}
/// RMSNorm's dx of one element: rr·(g − x·k) with k = rr²·mean(g·x).
template <typename T>
FSDP_HD inline T rmsNormGrad(T x, T w, T dy, double rr, double k) {
  double g = static_cast<double>(dy) * w;
  return static_cast<T>(rr * (g - x * k));
}

/// A vocab-parallel cross-entropy's statistics at position p merged over
/// the tp ranks: stats [tp, positions, 3] holds each rank's (m_t, s_t, z_t)
/// (fsdp_vocab_ce_stats); mx = max_t m_t (the row's max), sum = Σ_t s_t ·
/// e^(m_t − mx) = Σ_v e^(logit_v − mx) (Milakov & Gimelshein 2018, "Online
/// normalizer calculation for softmax", Sec. 3), z = Σ_t z_t (the label's
/// logit), in double.
template <typename S>
FSDP_HD inline void vocabCeMerge(const S *stats, int64_t positions, int64_t tp,
                                 int64_t p, double &mx, double &sum,
                                 double &z) {
  mx = static_cast<double>(stats[p * 3]);
  for (int64_t t = 1; t < tp; ++t) {
    double m = static_cast<double>(stats[(t * positions + p) * 3]);
    mx = m > mx ? m : mx;
  }
  sum = 0;
  z = 0;
  for (int64_t t = 0; t < tp; ++t) {
    const S *e = stats + (t * positions + p) * 3;
    sum += static_cast<double>(e[1]) * exp(static_cast<double>(e[0]) - mx);
    z += static_cast<double>(e[2]);
  }
}

} // namespace fsdp::math

#endif // FSDP_ELEMENTMATH_H
