//===- NNCost.cpp - CostOpInterface: FLOPs and bytes of every nn op -------===//
//
// The cost model the cluster simulator (lib/Analysis/Simulator.cpp) uses.
// Counts are from the op's current (per-rank) shapes; a multiply-add is 2
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
//                 (kFlopsPerElement); data movement (split, concat, cast,
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
#include "fsdp/Dialect/NN/NN.h"

using namespace mlir;
using namespace mlir::nn;

namespace {
int64_t numel(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}
int64_t bytes(Value v) { return checkedTensorBytes(v.getType()).value_or(0); }
int64_t operandAndResultBytes(Operation *op) {
  int64_t b = 0;
  for (Value v : op->getOperands())
    b += bytes(v);
  for (Value v : op->getResults())
    b += bytes(v);
  return b;
}
/// Rows of a tensor viewed as a matrix [rows, last dim].
int64_t rows(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  int64_t last = t.getRank() ? t.getShape().back() : 1;
  return last ? t.getNumElements() / last : 0;
}
int64_t cols(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getShape().back() : 1;
}

// FLOPs per element (of the first operand unless stated), counting a
// multiply-add as 2 and each transcendental (exp, erf, tanh, rsqrt, sin/cos)
// as 1, as the papers above count only arithmetic, not special-function cost.
constexpr int64_t kAdd = 1, kMul = 1, kRelu = 1, kReluGrad = 1;
constexpr int64_t kGelu = 8; // erf/tanh form: x³, mul-adds, tanh, 0.5·x·(1+·)
constexpr int64_t kGeluGrad = 14;    // the derivative of the above, times dy
constexpr int64_t kSilu = 4;         // exp, add, div, mul
constexpr int64_t kSiluGrad = 7;     // σ, 1 − σ, x·(·), 1 + ·, σ·(·), ·dy
constexpr int64_t kReduce = 1;       // one add per input element
constexpr int64_t kCrossEntropy = 4; // per logit: max, sub, exp, sum
constexpr int64_t kCrossEntropyGrad =
    5; // per logit: sub, exp, div, sub onehot, scale
constexpr int64_t kLayerNorm =
    8; // mean 1, sub 1, square-sum 2, rsqrt·, ·w, +b (per element)
constexpr int64_t kLayerNormGrad = 16;
constexpr int64_t kRMSNorm = 4; // square-sum 2, ·rsqrt, ·w
constexpr int64_t kRMSNormGrad = 10;
constexpr int64_t kRope =
    6; // sin, cos, 2 mul, 1 add per output element (amortised)
constexpr int64_t kScatterAdd =
    1; // embedding_grad, position_embedding(_grad): one add
constexpr int64_t kSgd = 4;
constexpr int64_t kAdamW = 16;

int64_t linearFlops(LinearOp op) {
  int64_t m = rows(op.getInput()), k = cols(op.getInput());
  auto w = cast<RankedTensorType>(op.getWeight().getType());
  int64_t n = op.getTransposeWeight() ? w.getDimSize(1) : w.getDimSize(0);
  return 2 * m * k * n + (op.getBias() ? m * n : 0);
}
int64_t matmulFlops(MatmulOp op) {
  int64_t ar = rows(op.getLhs()), ac = cols(op.getLhs());
  int64_t br = rows(op.getRhs()), bc = cols(op.getRhs());
  int64_t m = op.getTransposeA() ? ac : ar, k = op.getTransposeA() ? ar : ac;
  int64_t n = op.getTransposeB() ? br : bc;
  return 2 * m * k * n;
}
/// Dense q·kᵀ plus p·v: 4·B·Hq·T²·D = 4·B·T·T·(Hq·D).
int64_t denseAttentionFlops(Value query) {
  auto q = cast<RankedTensorType>(query.getType());
  int64_t b = q.getDimSize(0), t = q.getDimSize(1), hd = q.getDimSize(2);
  return 4 * b * t * t * hd;
}
} // namespace

#define NN_BYTES(Op)                                                           \
  int64_t Op::getBytesAccessed() {                                             \
    return operandAndResultBytes(getOperation());                              \
  }
NN_BYTES(LinearOp)
NN_BYTES(MatmulOp)
NN_BYTES(AddOp)
NN_BYTES(MulOp)
NN_BYTES(ReluOp)
NN_BYTES(GeluOp)
NN_BYTES(ReluGradOp)
NN_BYTES(GeluGradOp)
NN_BYTES(ReduceSumOp)
NN_BYTES(BroadcastOp)
NN_BYTES(CrossEntropyOp)
NN_BYTES(CrossEntropyGradOp)
NN_BYTES(SgdUpdateOp)
NN_BYTES(AdamWUpdateOp)
NN_BYTES(EmbeddingOp)
NN_BYTES(EmbeddingGradOp)
NN_BYTES(PositionEmbeddingOp)
NN_BYTES(PositionEmbeddingGradOp)
NN_BYTES(LayerNormOp)
NN_BYTES(LayerNormGradOp)
NN_BYTES(RMSNormOp)
NN_BYTES(RMSNormGradOp)
NN_BYTES(RopeOp)
NN_BYTES(AttentionOp)
NN_BYTES(AttentionGradOp)
NN_BYTES(SiluOp)
NN_BYTES(SiluGradOp)
NN_BYTES(SplitOp)
NN_BYTES(ConcatOp)
NN_BYTES(ZerosLikeOp)
NN_BYTES(CastOp)
NN_BYTES(MicroBatchOp)
#undef NN_BYTES

int64_t LinearOp::getFlops() { return linearFlops(*this); }
int64_t MatmulOp::getFlops() { return matmulFlops(*this); }
int64_t AttentionOp::getFlops() { return denseAttentionFlops(getQuery()) / 2; }
int64_t AttentionGradOp::getFlops() {
  // 2.5 × the causal forward (2·B·Hq·T²·D) = 5·B·Hq·T²·D.
  return denseAttentionFlops(getQuery()) / 4 * 5;
}
int64_t AddOp::getFlops() { return kAdd * numel(getResult()); }
int64_t MulOp::getFlops() { return kMul * numel(getResult()); }
int64_t ReluOp::getFlops() { return kRelu * numel(getResult()); }
int64_t ReluGradOp::getFlops() { return kReluGrad * numel(getResult()); }
int64_t GeluOp::getFlops() { return kGelu * numel(getResult()); }
int64_t GeluGradOp::getFlops() { return kGeluGrad * numel(getResult()); }
int64_t SiluOp::getFlops() { return kSilu * numel(getResult()); }
int64_t SiluGradOp::getFlops() { return kSiluGrad * numel(getResult()); }
int64_t ReduceSumOp::getFlops() { return kReduce * numel(getInput()); }
int64_t BroadcastOp::getFlops() { return 0; }
int64_t CrossEntropyOp::getFlops() {
  return kCrossEntropy * numel(getLogits());
}
int64_t CrossEntropyGradOp::getFlops() {
  return kCrossEntropyGrad * numel(getLogits());
}
int64_t SgdUpdateOp::getFlops() { return kSgd * numel(getParam()); }
int64_t AdamWUpdateOp::getFlops() { return kAdamW * numel(getParam()); }
int64_t EmbeddingOp::getFlops() { return 0; }
int64_t EmbeddingGradOp::getFlops() { return kScatterAdd * numel(getGrad()); }
int64_t PositionEmbeddingOp::getFlops() {
  return kScatterAdd * numel(getInput());
}
int64_t PositionEmbeddingGradOp::getFlops() {
  return kScatterAdd * numel(getGrad());
}
int64_t LayerNormOp::getFlops() { return kLayerNorm * numel(getInput()); }
int64_t LayerNormGradOp::getFlops() {
  return kLayerNormGrad * numel(getInput());
}
int64_t RMSNormOp::getFlops() { return kRMSNorm * numel(getInput()); }
int64_t RMSNormGradOp::getFlops() { return kRMSNormGrad * numel(getInput()); }
int64_t RopeOp::getFlops() { return kRope * numel(getInput()); }
int64_t SplitOp::getFlops() { return 0; }
int64_t ConcatOp::getFlops() { return 0; }
int64_t ZerosLikeOp::getFlops() { return 0; }
int64_t CastOp::getFlops() { return 0; }
int64_t MicroBatchOp::getFlops() { return 0; }
