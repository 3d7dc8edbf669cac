//===- FrameworkMemory.h - what another training stack keeps --------------===//
//
// The memory plan is what fsdp-run allocates (its arena, checked against the
// device allocator's peak in test/lit/Integration). A published PyTorch run
// kept more than that plan for the same step; `framework-memory=` on
// fsdp-memory-plan (and fsdp-pipeline) adds what that stack keeps beyond the
// plan, each term from PyTorch's sources, so that the report of a published
// row describes the stack that ran it:
//
//   fsdp-run       (default) the plan as it is
//   torch-eager    PyTorch eager blocks (torchtitan without torch.compile)
//   torch-compile  torchtitan's apply_compile: each transformer block
//                  compiled, the output projection and the loss eager
//
// Terms (bytes per rank):
//   eager_cross_entropy (both torch modes, unless framework-loss=fused):
//     torch's cross_entropy is
//     log_softmax + nll_loss under autograd; nll_loss_backward writes a
//     dense gradient of the logits' shape and dtype (aten/src/ATen/native/
//     LossNLL.cpp: grad_input zeroed, then the targets' entries), live with
//     log_softmax's saved output and _log_softmax_backward_data's result:
//     three [tokens, vocab] tensors where the fused nn.cross_entropy_grad
//     holds two. One more logits-sized buffer at each nn.cross_entropy_grad.
//   sac_cache (torch-eager): torch.utils.checkpoint's selective checkpoint
//     caches every MUST_SAVE output (_CachingTorchDispatchMode appends it to
//     its storage in forward) until the recomputation pops it
//     (_CachedTorchDispatchMode.pop_from_storage), even one the backward
//     never reads (a Llama block's w2 output, read only by the residual
//     add). An op marked nn.ac_saved = U whose buffer the plan frees earlier
//     is held until the first later op recomputed for U (nn.recompute = U).
//     torch.compile's partitioner saves only what the backward graph reads
//     (torch/_functorch/partitioners.py), hence no term under torch-compile.
//   grad_shard_pool (both torch modes, with a spec's per_stream_pools): FSDP
//     allocates each reduce-scatter's output, the gradient shard, on the
//     reduce-scatter stream and keeps it there until the optimizer step and
//     the next zero_grad (FSDP2: _fsdp_collectives.py foreach_reduce, "The RS
//     output is allocated in the RS stream and used in the default stream
//     (for optimizer)"; FSDP1: _runtime_utils.py _reduce_grad on the
//     post-backward stream); the caching allocator reuses a freed block only
//     on its stream, so that pool keeps the step's most gradient-shard bytes
//     reserved beside the compute stream's peak (addAllocatorToReport).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_FRAMEWORKMEMORY_H
#define FSDP_ANALYSIS_FRAMEWORKMEMORY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringRef.h"

#include <nlohmann/json.hpp>

#include <optional>

namespace mlir::fsdp {

/// The software stack a report's memory describes.
enum class FrameworkMemory { FsdpRun, TorchEager, TorchCompile };

/// `fsdp-run`, `torch-eager` or `torch-compile`; nullopt otherwise.
std::optional<FrameworkMemory> parseFrameworkMemory(llvm::StringRef name);
llvm::StringRef frameworkMemoryName(FrameworkMemory f);

/// Adds per_rank.framework to a report of `fn` (buildPlanReport's) for a
/// torch mode (nothing for fsdp-run): {memory, peak_bytes, peak_instruction,
/// peak_at, peak_bytes_by_class, gather_send_at_peak (the all-gathers' send
/// buffers at that peak, MemoryPlan.h's SendBufferBytes), terms_at_peak
/// {eager_cross_entropy,
/// sac_cache}, max_terms {same keys}, grad_shard_pool_bytes} in bytes per
/// rank. peak_bytes is the most of the plan's live bytes plus the terms over
/// the step's instructions; grad_shard_pool_bytes is the step's most
/// gradient-shard bytes less those live at that peak (what the
/// reduce-scatter stream's pool keeps beside it; added to the reserved bytes
/// by addAllocatorToReport where the spec has per_stream_pools). Fails with
/// a diagnostic where the plan cannot be computed.
/// `fusedLoss`: the stack ran a fused cross-entropy kernel (framework-loss=
/// fused; e.g. flash-attn's CrossEntropyLoss, which saves the logits and
/// their log-sum-exp and writes one gradient: flash_attn/losses/
/// cross_entropy.py), no eager_cross_entropy term.
LogicalResult addFrameworkMemoryToReport(nlohmann::ordered_json &report,
                                         func::FuncOp fn, FrameworkMemory f,
                                         bool fusedLoss = false);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_FRAMEWORKMEMORY_H
