//===- UnfusedAttention.cpp - Megatron-LM's unfused core attention --------===//
//
// The kernels and saved bytes of nn.attention under `attention=unfused`
// (include/fsdp/Analysis/UnfusedAttention.h has the sources).
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::markAttentionImpl(Operation *root, StringRef impl) {
  if (impl == "flash")
    return;
  auto value = StringAttr::get(root->getContext(), impl);
  root->walk(
      [&](nn::AttentionOp op) { op->setAttr(kAttentionImplAttr, value); });
}

std::optional<UnfusedAttention> mlir::fsdp::unfusedAttentionOf(Operation *op) {
  auto impl = op->getAttrOfType<StringAttr>(kAttentionImplAttr);
  if (!impl || !isa<nn::AttentionOp, nn::AttentionGradOp>(op))
    return std::nullopt;
  // nn.attention and nn.attention_grad both read query, key, value first and
  // carry num_heads and num_kv_heads.
  auto q = cast<RankedTensorType>(op->getOperand(0).getType());
  auto heads = op->getAttrOfType<IntegerAttr>("num_heads");
  auto kvHeads = op->getAttrOfType<IntegerAttr>("num_kv_heads");
  if (!heads || !kvHeads || heads.getInt() <= 0 || q.getRank() != 3)
    return std::nullopt;
  UnfusedAttention a;
  a.batch = q.getDimSize(0);
  a.seq = q.getDimSize(1);
  a.heads = heads.getInt();
  a.kvHeads = kvHeads.getInt();
  a.headDim = q.getDimSize(2) / a.heads;
  a.elementBytes = q.getElementType().getIntOrFloatBitWidth() / 8;
  a.dropout = impl.getValue() != "unfused-no-dropout";
  return a;
}

int64_t UnfusedAttention::savedBytes() const {
  int64_t e = scoreElements();
  return dropout ? e * (2 * elementBytes + 1) : e * elementBytes;
}

// Bytes per kernel: each GEMM reads its two operands and writes its result
// once; q and the output are b·s·a·D elements, k and v b·s·a_kv·D.
SmallVector<AttentionKernel> UnfusedAttention::forwardKernels() const {
  const int64_t e = scoreElements(), w = elementBytes;
  const int64_t qBytes = batch * seq * heads * headDim * w;
  const int64_t kvBytes = batch * seq * kvHeads * headDim * w;
  const int64_t gemmFlops = 2 * e * headDim;
  SmallVector<AttentionKernel> k;
  // baddbmm(q, kᵀ): [s, D] x [D, s] per head, the scores written.
  k.push_back({"q.k^T", gemmFlops, qBytes + kvBytes + e * w, headDim});
  // scaled_upper_triang_masked_softmax: scores in, probabilities out.
  k.push_back({"scale-mask-softmax", 0, 2 * e * w, 0});
  // dropout: probabilities in, dropped probabilities and a 1-byte mask out.
  if (dropout)
    k.push_back({"dropout", 0, 2 * e * w + e, 0});
  // bmm(p, v): [s, s] x [s, D] per head.
  k.push_back({"p.v", gemmFlops, e * w + kvBytes + qBytes, seq});
  return k;
}

SmallVector<AttentionKernel> UnfusedAttention::backwardKernels() const {
  const int64_t e = scoreElements(), w = elementBytes;
  const int64_t qBytes = batch * seq * heads * headDim * w;
  const int64_t kvBytes = batch * seq * kvHeads * headDim * w;
  const int64_t gemmFlops = 2 * e * headDim;
  SmallVector<AttentionKernel> k;
  // bmm's backward: dP = dO·vᵀ (reduction over D), dv = Pᵀ·dO (over s).
  k.push_back({"dP = dO.v^T", gemmFlops, qBytes + kvBytes + e * w, headDim});
  k.push_back({"dv = P^T.dO", gemmFlops, e * w + qBytes + kvBytes, seq});
  // dropout's backward: the gradient and the mask in, the gradient out.
  if (dropout)
    k.push_back({"dropout backward", 0, 2 * e * w + e, 0});
  // the fused softmax's backward: output gradient and probabilities in,
  // input gradient out.
  k.push_back({"softmax backward", 0, 3 * e * w, 0});
  // baddbmm's backward: dq = dS·k, dk = dSᵀ·q (both over s).
  k.push_back({"dq = dS.k", gemmFlops, e * w + kvBytes + qBytes, seq});
  k.push_back({"dk = dS^T.q", gemmFlops, e * w + qBytes + kvBytes, seq});
  return k;
}
