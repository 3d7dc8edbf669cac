//===- NNCost.cpp - CostOpInterface: FLOPs and bytes of every nn op -------===//
//
// The cost model the cluster simulator (lib/Analysis/Simulator.cpp) uses:
// each op's shapes read from its operands, counted by the formulas of
// fsdp/CostFormulas.h (with their sources), which fsdp-calibrate shares.
//
//===----------------------------------------------------------------------===//
#include "fsdp/CostFormulas.h"
#include "fsdp/Dialect/NN/NN.h"

using namespace mlir;
using namespace mlir::nn;
using namespace fsdp::cost;

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

int64_t flopsOf(LinearOp op) {
  int64_t m = rows(op.getInput()), k = cols(op.getInput());
  auto w = cast<RankedTensorType>(op.getWeight().getType());
  int64_t n = op.getTransposeWeight() ? w.getDimSize(1) : w.getDimSize(0);
  return linearFlops(m, k, n, static_cast<bool>(op.getBias()));
}
int64_t flopsOf(MatmulOp op) {
  int64_t ar = rows(op.getLhs()), ac = cols(op.getLhs());
  int64_t br = rows(op.getRhs()), bc = cols(op.getRhs());
  int64_t m = op.getTransposeA() ? ac : ar, k = op.getTransposeA() ? ar : ac;
  int64_t n = op.getTransposeB() ? br : bc;
  return matmulFlops(m, k, n);
}
/// [B, T, Hq·D] of an attention query.
struct QueryDims {
  int64_t b, t, hd;
};
QueryDims queryDims(Value query) {
  auto q = cast<RankedTensorType>(query.getType());
  return {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2)};
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
NN_BYTES(LrScheduleOp)
NN_BYTES(SumSquaresOp)
NN_BYTES(GradNormOp)
NN_BYTES(ScaleOp)
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
NN_BYTES(DropoutOp)
NN_BYTES(SplitOp)
NN_BYTES(ConcatOp)
NN_BYTES(ZerosLikeOp)
NN_BYTES(CastOp)
NN_BYTES(MicroBatchOp)
NN_BYTES(TpCopyOp)
NN_BYTES(TpAllReduceOp)
NN_BYTES(SpAllGatherOp)
NN_BYTES(SpReduceScatterOp)
NN_BYTES(SpSplitOp)
#undef NN_BYTES

int64_t LinearOp::getFlops() { return flopsOf(*this); }
int64_t MatmulOp::getFlops() { return flopsOf(*this); }
int64_t AttentionOp::getFlops() {
  auto [b, t, hd] = queryDims(getQuery());
  return attentionFlops(b, t, hd);
}
// The statistics change no FLOP count: the backward still recomputes
// q·kᵀ (five matmuls), only the row max and sum passes go, which the formula
// never counted. Its bytes (NN_BYTES) include the forward's output and
// statistics it now reads, and the forward's the statistics it writes.
int64_t AttentionGradOp::getFlops() {
  auto [b, t, hd] = queryDims(getQuery());
  return attentionGradFlops(b, t, hd);
}
int64_t AddOp::getFlops() { return kAdd * numel(getResult()); }
int64_t MulOp::getFlops() { return kMul * numel(getResult()); }
int64_t ReluOp::getFlops() { return kRelu * numel(getResult()); }
int64_t ReluGradOp::getFlops() { return kReluGrad * numel(getResult()); }
int64_t GeluOp::getFlops() { return kGelu * numel(getResult()); }
int64_t GeluGradOp::getFlops() { return kGeluGrad * numel(getResult()); }
int64_t SiluOp::getFlops() { return kSilu * numel(getResult()); }
int64_t SiluGradOp::getFlops() { return kSiluGrad * numel(getResult()); }
int64_t DropoutOp::getFlops() { return kMul * numel(getResult()); }
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
int64_t LrScheduleOp::getFlops() { return kLrSchedule; }
int64_t SumSquaresOp::getFlops() { return kSumSquares * numel(getInput()); }
int64_t GradNormOp::getFlops() { return kGradNorm; }
int64_t ScaleOp::getFlops() { return kMul * numel(getInput()); }
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
int64_t TpCopyOp::getFlops() { return 0; }
// The sum over the group: (T - 1) additions per element, counted as one.
int64_t TpAllReduceOp::getFlops() { return numel(getResult()); }
int64_t SpAllGatherOp::getFlops() { return 0; }
int64_t SpSplitOp::getFlops() { return 0; }
// The sum over the group of each kept element: (T - 1) additions, counted as
// one (as nn.tp_all_reduce).
int64_t SpReduceScatterOp::getFlops() { return numel(getResult()); }
