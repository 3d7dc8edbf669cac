//===- SequenceParallel.h - Megatron sequence parallelism -------*- C++ -*-===//
//
// Private to the transforms library: fsdp-tensor-parallel's second step
// under `sequence-parallel=true` (TensorParallel.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_SEQUENCEPARALLEL_H
#define FSDP_LIB_TRANSFORMS_SEQUENCEPARALLEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::fsdp {

/// The dimension sequence parallelism splits: the sequence of the
/// [batch, seq, hidden] activations the importer writes.
inline constexpr int64_t kSequenceDim = 1;

/// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
/// Transformer Models", Sec. 4.2.2, on the per-rank forward graph
/// fsdp-tensor-parallel made (its f = nn.tp_copy and g = nn.tp_all_reduce
/// around each region): the activations between the regions -- those
/// connected to the regions' inputs and outputs through ops that act on
/// each token alone (norms, residual adds, elementwise activations, casts,
/// broadcasts) -- hold this rank's chunk of the sequence (dimension
/// kSequenceDim, T = `tp` chunks). f becomes nn.sp_all_gather (backward
/// reduce-scatter), g nn.sp_reduce_scatter (backward all-gather); a value
/// made by another op (the embedding) enters through enterSequenceSplit,
/// one read by another op (the LM head) leaves through leaveSequenceSplit;
/// every other float operand of an op on chunks (a norm's weight, a row
/// bias: replicated in the group) is read through f, so that its gradient,
/// summed over this rank's tokens only, is all-reduced over the group
/// (Megatron all-reduces the layernorm gradients under SP). Result types are
/// left for the caller to re-infer. Errors (at the op whose result enters
/// the split, or at the region's first linear): activations without a
/// sequence dimension, regions of different [batch, seq], a sequence not
/// divisible by `tp`.
LogicalResult applySequenceParallel(func::FuncOp fn, int64_t tp);

/// The entry of a tensor replicated in the tensor-parallel group into the
/// sequence split: this rank's chunk (nn.sp_split; backward all-gather).
/// A vocab-parallel embedding, whose output is partial sums, would
/// reduce-scatter here instead.
Value enterSequenceSplit(OpBuilder &b, Location loc, Value whole, int64_t tp);

/// The exit of a sequence-split tensor into a consumer replicated in the
/// group (the LM head): all-gather whose backward takes this rank's chunk
/// of the (replicated) gradient (nn.sp_all_gather with replicated_grad). A
/// vocab-parallel head, a column-parallel linear, would all-gather with a
/// reduce-scatter backward here instead.
Value leaveSequenceSplit(OpBuilder &b, Location loc, Value chunk, int64_t tp);

/// Narayanan et al., SC'21, Sec. 4.1 (the scatter/gather optimisation;
/// Megatron-LM's scatter_gather_tensors_in_pipeline), on a pipeline stage's
/// forward function without sequence parallelism, where the activations
/// crossing between stages are replicated in the tensor-parallel group:
/// each received one (fsdp.pp_input) of [batch, seq, ...] floats whose
/// sequence (dimension kSequenceDim) divides by `tp` is retyped to this
/// rank's chunk [batch, seq/tp, ...] and all-gathered where it arrives
/// (nn.sp_all_gather with replicated_grad: its VJP sends back this rank's
/// chunk of the replicated gradient); each such sent one (fsdp.pp_output)
/// leaves as this rank's chunk (nn.sp_split: the chunk gradient received
/// back, its fsdp.pp_output_grad argument retyped, is all-gathered). So
/// 1/tp of the bytes cross the (inter-node) stage link per rank, for an
/// all-gather inside the group. Both sides decide by the value's type
/// alone, so that the sender's and the receiver's buffers agree. Result
/// types are left for the caller to re-infer.
void applyPipelineScatterGather(func::FuncOp fn, int64_t tp);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_SEQUENCEPARALLEL_H
