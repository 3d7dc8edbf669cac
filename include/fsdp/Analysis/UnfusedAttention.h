//===- UnfusedAttention.h - Megatron-LM's unfused core attention -*- C++
//-*-===//
//
// The attention implementation a plan names (`attention=` of fsdp-autodiff
// and fsdp-pipeline): `flash` (the default) prices nn.attention as one
// FlashAttention-class kernel that never writes the scores; `unfused` is
// Megatron-LM's core attention of 2021-22 (megatron/model/transformer.py,
// ParallelAttention.forward): the scores q·kᵀ as one batched GEMM
// (torch.baddbmm, beta 0, alpha 1/√D) into a [b·a, s, s] buffer, the fused
// scale-mask-softmax kernel (megatron/fused_kernels/
// scaled_upper_triang_masked_softmax.h: one warp per row, reads the scores
// once and writes the probabilities once; its backward reads the output
// gradient and the probabilities and writes the input gradient), attention
// dropout on the probabilities (torch.nn.Dropout: reads them, writes the
// dropped probabilities and a one-byte mask; its backward reads the gradient
// and the mask and writes the gradient), and the probabilities times v as a
// second batched GEMM (torch.bmm). `unfused-no-dropout` is the same without
// the dropout (attention_dropout 0).
//
// The implementation changes the prediction and the memory plan, not the
// step: the op is marked `nn.attention_impl` and fsdp-run computes it with
// its one attention kernel either way.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_UNFUSEDATTENTION_H
#define FSDP_ANALYSIS_UNFUSEDATTENTION_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace mlir::fsdp {

/// The discardable attribute that carries the implementation on
/// nn.attention and nn.attention_grad: "unfused" or "unfused-no-dropout"
/// (absent: flash). fsdp-autodiff (and fsdp-pipeline, before its pipeline
/// split prices the layers) sets it on the forward's nn.attention ops,
/// nn.attention's VJP copies it to its nn.attention_grad
/// (dialects/nn/NNAutodiff.cpp), and clones (micro-batches, recomputation,
/// pipeline stages) keep it. The JSON schedule leaves it out, as every pass
/// marker.
inline constexpr llvm::StringLiteral kAttentionImplAttr = "nn.attention_impl";

/// Marks every nn.attention under `root` with `impl` ("unfused",
/// "unfused-no-dropout"); "flash" marks nothing.
void markAttentionImpl(Operation *root, llvm::StringRef impl);

/// One kernel of the unfused attention, for the roofline: `flops` (0 for a
/// memory-bound kernel), `bytes` read and written once, and for a GEMM its
/// reduction length `k` (ClusterSpec::matmulEfficiency).
struct AttentionKernel {
  llvm::StringLiteral name;
  int64_t flops = 0, bytes = 0, k = 0;
};

/// The shape of one marked nn.attention (or its nn.attention_grad), per
/// rank: batch b, query heads a (a/t under tensor parallelism: the op's
/// num_heads), key/value heads, sequence s, head dimension D, and the bytes
/// of the compute dtype w (2 for fp16/bf16).
struct UnfusedAttention {
  int64_t batch = 0, heads = 0, kvHeads = 0, seq = 0, headDim = 0;
  int64_t elementBytes = 0;
  bool dropout = true;

  /// b·a·s² score elements (Megatron computes every score, the causal mask
  /// is applied by the softmax, so the GEMMs are dense).
  int64_t scoreElements() const { return batch * heads * seq * seq; }
  /// Bytes the forward keeps for the backward beyond q, k, v and the output
  /// (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  /// Transformer Models", Sec. 4.1 and Eq. (1)): the softmax output (w
  /// bytes per score), the dropout mask (1 byte) and the dropout output (w):
  /// 5·a·s²·b at w = 2; without dropout the softmax output alone, 2·a·s²·b.
  int64_t savedBytes() const;
  /// The forward's kernels: q·kᵀ, scale-mask-softmax, dropout, p·v.
  llvm::SmallVector<AttentionKernel> forwardKernels() const;
  /// The backward's (Megatron's autograd of the forward, no recomputation
  /// of the scores): dP = dO·vᵀ, dv = Pᵀ·dO, the dropout's and the
  /// softmax's backward, dq = dS·k, dk = dSᵀ·q.
  llvm::SmallVector<AttentionKernel> backwardKernels() const;
};

/// The unfused attention of `op` when it is an nn.attention or
/// nn.attention_grad marked kAttentionImplAttr; std::nullopt otherwise
/// (flash, or another op).
std::optional<UnfusedAttention> unfusedAttentionOf(Operation *op);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_UNFUSEDATTENTION_H
