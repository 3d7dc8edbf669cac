//===- CostFormulas.h - FLOPs and bytes of the nn ops, without MLIR -------===//
//
// The one definition of the counts behind the nn dialect's CostOpInterface
// (dialects/nn/NNCost.cpp: getFlops, getBytesAccessed), which the cluster
// simulator (lib/Analysis/Simulator.cpp) uses, and which fsdp-calibrate
// (runtime/calibrate) uses to turn its measured kernel times into the
// efficiencies the simulator reads. Header-only, no dependencies:
// fsdp-calibrate is built without MLIR.
//
// Counts are from an op's current (per-rank) shapes; a multiply-add is 2
// FLOPs, as in Kaplan et al. 2020 ("Scaling Laws for Neural Language Models",
// Sec. 2.1: C ≈ 6N per token for training = 2N forward + 4N backward) and
// Narayanan et al., SC21 ("Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", Sec. 5.1, the per-layer matmul count).
//
//   linear        2·M·K·N (+ M·N with a bias): M rows, K = in, N = out
//   matmul        2·M·K·N of op(a)[M, K] · op(b)[K, N]
//   attention     causal: half of the dense 4·B·Hq·T²·D (2·B·Hq·T²·D for
//                 q·kᵀ and 2·B·Hq·T²·D for p·v), i.e. 2·B·Hq·T²·D
//                 (softmax not counted, as the papers above)
//   attention_grad 2.5× the forward (5 matmuls instead of 2: the recomputed
//                 q·kᵀ, dv, dp, dq, dk; Dao et al. 2022, FlashAttention,
//                 Sec. 3.1 and App. B.4): 5·B·Hq·T²·D
//   elementwise and normalisation ops: a constant per element, below
//                 (kGelu, ...); data movement (split, concat, cast,
//                 broadcast, zeros_like, embedding gather, micro_batch) 0.
//   optimizer     per parameter element: SGD 4 (decay, scale, add, sub);
//                 AdamW 16 (decay 2, m 3, v 4, bias corrections 2,
//                 sqrt/add/div/mul/sub 5)
//
// Bytes accessed: every tensor operand plus every tensor result, once (a
// kernel that streams its inputs and writes its outputs; no reuse beyond
// that, no re-reads).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COSTFORMULAS_H
#define FSDP_COSTFORMULAS_H

#include <cstdint>
#include <initializer_list>

namespace fsdp::cost {

// FLOPs per element (of the op's first operand unless stated; NNCost.cpp
// names the operand per op), counting a multiply-add as 2 and each
// transcendental (exp, erf, tanh, rsqrt, sin/cos) as 1, as the papers above
// count only arithmetic, not special-function cost.
inline constexpr int64_t kAdd = 1, kMul = 1, kRelu = 1, kReluGrad = 1;
/// erf/tanh form: x³, mul-adds, tanh, 0.5·x·(1+·).
inline constexpr int64_t kGelu = 8;
/// The derivative of the above, times dy.
inline constexpr int64_t kGeluGrad = 14;
/// exp, add, div, mul.
inline constexpr int64_t kSilu = 4;
/// σ, 1 − σ, x·(·), 1 + ·, σ·(·), ·dy.
inline constexpr int64_t kSiluGrad = 7;
/// One add per input element.
inline constexpr int64_t kReduce = 1;
/// Per logit: max, sub, exp, sum.
inline constexpr int64_t kCrossEntropy = 4;
/// Per logit: sub, exp, div, sub onehot, scale.
inline constexpr int64_t kCrossEntropyGrad = 5;
/// Per input element: mean 1, sub 1, square-sum 2, rsqrt·, ·w, +b.
inline constexpr int64_t kLayerNorm = 8;
inline constexpr int64_t kLayerNormGrad = 16;
/// Per input element: square-sum 2, ·rsqrt, ·w.
inline constexpr int64_t kRMSNorm = 4;
inline constexpr int64_t kRMSNormGrad = 10;
/// sin, cos, 2 mul, 1 add per output element (amortised).
inline constexpr int64_t kRope = 6;
/// embedding_grad, position_embedding(_grad): one add per element.
inline constexpr int64_t kScatterAdd = 1;
/// Per parameter element (see the file comment).
inline constexpr int64_t kSgd = 4;
inline constexpr int64_t kAdamW = 16;
/// Gradient-norm clipping: a square and an add per gradient element
/// (nn.sum_squares; the scaling by the clip coefficient is kMul). The
/// schedule's learning rate and the norm's square root, division and
/// minimum are a handful of scalar operations per step (counted as 8).
inline constexpr int64_t kSumSquares = 2;
inline constexpr int64_t kLrSchedule = 8;
inline constexpr int64_t kGradNorm = 8;

/// FLOPs of y[M, N] = x[M, K] · w + b: 2·M·K·N, plus M·N for the bias.
constexpr int64_t linearFlops(int64_t m, int64_t k, int64_t n, bool bias) {
  return 2 * m * k * n + (bias ? m * n : 0);
}

/// FLOPs of op(a)[M, K] · op(b)[K, N]: 2·M·K·N.
constexpr int64_t matmulFlops(int64_t m, int64_t k, int64_t n) {
  return 2 * m * k * n;
}

/// FLOPs of dense (non-causal) attention over q [B, T, Hq·D]: q·kᵀ plus
/// p·v, 4·B·Hq·T²·D = 4·B·T·T·(Hq·D). `hd` is Hq·D, the query's last dim.
constexpr int64_t denseAttentionFlops(int64_t b, int64_t t, int64_t hd) {
  return 4 * b * t * t * hd;
}

/// FLOPs of causal attention (nn.attention): half the dense count,
/// 2·B·Hq·T²·D.
constexpr int64_t attentionFlops(int64_t b, int64_t t, int64_t hd) {
  return denseAttentionFlops(b, t, hd) / 2;
}

/// FLOPs of its gradient (nn.attention_grad): 2.5 × the causal forward,
/// 5·B·Hq·T²·D.
constexpr int64_t attentionGradFlops(int64_t b, int64_t t, int64_t hd) {
  return denseAttentionFlops(b, t, hd) / 4 * 5;
}

/// Bytes an op accesses: the sum of its tensor operands' and results' bytes,
/// each once (a tensor's bytes: nn::checkedTensorBytes in the compiler).
constexpr int64_t bytesAccessed(std::initializer_list<int64_t> tensorBytes) {
  int64_t b = 0;
  for (int64_t t : tensorBytes)
    b += t;
  return b;
}

} // namespace fsdp::cost

#endif // FSDP_COSTFORMULAS_H
