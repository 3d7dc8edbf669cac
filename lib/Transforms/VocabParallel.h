//===- VocabParallel.h - Megatron's vocab-parallel embedding and head -----===//
//
// Private to fsdp-tensor-parallel (TensorParallel.cpp calls it after the
// blocks' regions are rewritten).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TRANSFORMS_VOCABPARALLEL_H
#define FSDP_TRANSFORMS_VOCABPARALLEL_H

#include "fsdp/Dialect/NN/NN.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {

/// Which slice of which global parameter this rank holds: FQN ->
/// [dim, blocks, global shape...] (the module's fsdp.tensor_slices).
using TensorSlices = llvm::MapVector<StringAttr, DenseI64ArrayAttr>;

/// Rewrites `fn` (the forward, on its way to one rank of a tensor-parallel
/// group of `tp` ranks) to Megatron-LM's vocab-parallel layout (Shoeybi et
/// al. 2019, Sec. 3): every nn.embedding of a parameter table keeps rows
/// [t·V/T, (t+1)·V/T) and its output is summed over the group; the LM head
/// (the nn.linear of a parameter whose output only nn.cross_entropy reads)
/// keeps the same rows of its weight (output features) and the loss becomes
/// nn.vocab_parallel_ce_stats → nn.tp_all_reduce →
/// nn.vocab_parallel_cross_entropy, so that no rank holds whole logits.
/// Records each split parameter in `slices`. Errors (at the op): a
/// vocabulary T does not divide, a head whose weight is tied to an
/// embedding but stored [in, out], a split table used by other ops.
LogicalResult applyVocabParallel(func::FuncOp fn, int64_t tp,
                                 TensorSlices &slices);

/// The embedding's boundary: its partial lookups (zero rows outside this
/// rank's slice) summed over the tensor-parallel group (Megatron's g;
/// sequence parallelism replaces it by a reduce-scatter along the sequence).
Value vocabEmbeddingOutput(OpBuilder &b, Location loc, Value partial);

/// The LM head's boundary: its replicated input entering the
/// column-parallel head (Megatron's f; sequence parallelism replaces it by
/// an all-gather along the sequence).
Value vocabHeadInput(OpBuilder &b, Location loc, Value input);

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_VOCABPARALLEL_H
