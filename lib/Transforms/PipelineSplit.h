//===- PipelineSplit.h - the default pipeline split -----------------------===//
//
// Where fsdp-pipeline-split cuts the layers when `pp-split` is not given:
// the contiguous partition into P (P·v interleaved) stages that minimises
// the largest stage's predicted time among those whose estimated peak fits
// the memory budget (docs/pipeline-parallel.md, "The default split").
// fsdp-pipeline decides it once for every stage and records it on the
// module (kPipelineSplitAttr, fsdp/Dialect/FSDP/FSDP.h) for the report.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_PIPELINESPLIT_H
#define FSDP_LIB_TRANSFORMS_PIPELINESPLIT_H

#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace mlir::fsdp {

struct ClusterSpec;

/// Whether the embedding and the final norm, head and loss count as layers
/// of the split (pp-split-embedding, pp-split-loss: Megatron-LM's
/// --account-for-embedding-in-pipeline-split and
/// --account-for-loss-in-pipeline-split).
struct PipelineEnds {
  bool embedding = false, loss = false;
  /// "none", "embedding", "loss" or "embedding, loss": the report's
  /// pipeline.split.ends and the diagnostics' wording.
  std::string name() const {
    return embedding && loss ? "embedding, loss"
           : embedding       ? "embedding"
           : loss            ? "loss"
                             : "none";
  }
};

/// What the default split knows about the job besides the model.
struct PipelineSplitConfig {
  int64_t pp = 1, chunks = 1, microBatches = 1;
  std::string schedule = "1f1b"; ///< gpipe, 1f1b or interleaved-1f1b
  /// With a spec, the objective is each stage's predicted seconds
  /// (Simulator::opTime of its forward ops, their VJPs and, under
  /// activation checkpointing, the recomputed forward); without, its
  /// forward FLOPs.
  const ClusterSpec *spec = nullptr;
  /// Bytes per rank no stage's estimated peak may exceed (none: no
  /// constraint).
  std::optional<int64_t> budget;
  /// Whether the budget was given (memory-budget=): no split fitting it is
  /// an error. Otherwise (the cluster's device memory) the unconstrained
  /// split is planned, so that the stages' memory plans report the layout
  /// as not fitting, as they do for pp = 1 (the advisor ranks it so).
  bool budgetGiven = false;
  /// Ranks that split a stage's batch (N / (P·T)) and ranks a unit's state
  /// is sharded over (the shard group: dp, shard-size under hybrid-shard,
  /// 1 for no-shard); shard-grad-op keeps the parameters whole.
  int64_t dataParallel = 1, shardGroup = 1, tp = 1;
  bool shardParams = true;
  /// Optimizer state per parameter element, in parameter elements (AdamW's
  /// two moments: 2; SGD: 0).
  int64_t optimizerStates = 2;
  ActivationCheckpoint mode = ActivationCheckpoint::None;
  PipelineEnds ends; ///< pp-split-embedding, pp-split-loss
  /// Bytes per element of param-dtype (the dtype fsdp-shard computes the
  /// forward in: 2 for bf16); 0 keeps the IR's dtypes.
  int64_t paramDtypeBytes = 0;
};

/// The split and what it was chosen by.
struct PipelineSplitPlan {
  SmallVector<int64_t> boundaries; ///< the first layer of stages 1..parts-1
  std::string objective;           ///< "given", "time" (with a spec) or "flops"
  /// "memory-budget", "none", or "none fits the device memory" (the
  /// unconstrained split, PipelineSplitConfig::budgetGiven false).
  std::string constraint;
  std::optional<int64_t> budget;
  /// The layers counted besides the model's (PipelineEnds::name).
  std::string ends = "none";
  /// Per stage (virtual stage under interleaving): layers, forward FLOPs,
  /// predicted seconds per step on one rank (with a spec) and estimated
  /// peak bytes per rank.
  SmallVector<int64_t> layers, peakBytes;
  SmallVector<double> flops, seconds;
  DictionaryAttr toAttr(MLIRContext *ctx) const;
};

/// The layer index in a parameter's FQN (`.h.<i>.` or `.layers.<i>.`), or
/// -1 (embeddings, final norm).
int64_t pipelineLayerOf(StringRef fqn);

/// "pp=P", or "pp x pp-chunks=P·v virtual stages", for messages.
std::string pipelinePartsName(int64_t pp, int64_t chunks);

/// The forward function's ops (its block without the terminator) in order,
/// each op's segment and the number of segments (`layers`, the layers of
/// the split). Without ends, segment l is model layer l: the ops from the
/// first use of layer l's parameters up to the first use of layer l + 1's
/// (-1 before layer 0; the last layer also holds the final norm, head and
/// loss). With ends.embedding the ops before layer 0 are segment 0 and model
/// layer l is segment l + 1 (firstLayer 1); with ends.loss the ops from the
/// first use of a non-layer parameter after the last layer's last parameter
/// use are a segment of their own after it.
struct PipelineLayers {
  SmallVector<Operation *> ops;
  SmallVector<int64_t> segment;
  int64_t layers = 0;
  int64_t firstLayer = 0; ///< the segment of model layer 0
  /// Each parameter argument's model layer (pipelineLayerOf of its FQN; -1
  /// outside every layer), found once here for every pass that asks.
  llvm::DenseMap<Value, int64_t> paramLayer;
  /// The segment of model layer l (pipelineLayerOf).
  int64_t segmentOfLayer(int64_t l) const { return l + firstLayer; }
};
/// Errors (emitted, "fsdp-pipeline-split: ..."): not a one-block forward
/// function returning the loss, no layers, fewer layers (segments) than
/// pp · chunks stages, layers first used out of order, an end to count that
/// has no ops (ends.embedding with nothing before layer 0; ends.loss with no
/// non-layer parameter used after the last layer).
FailureOr<PipelineLayers> segmentPipelineLayers(func::FuncOp fn, int64_t pp,
                                                int64_t chunks,
                                                PipelineEnds ends = {});

/// Checks a given pp-split (pp · chunks − 1 boundaries increasing within
/// 1..layers − 1, `layers` the segments, counting `ends`); emits the error
/// at fn.
LogicalResult checkPipelineSplit(func::FuncOp fn, ArrayRef<int64_t> split,
                                 int64_t layers, int64_t pp, int64_t chunks,
                                 PipelineEnds ends = {});

/// The contiguous partition of segments 0..n-1 into `parts` non-empty
/// stages that minimises the largest cost(stage, a, b) of a stage holding
/// [a, b), among those where fits(stage, a, b) for every stage (the linear
/// partition problem by dynamic programming; Skiena, The Algorithm Design
/// Manual, Sec. 10.7); the first segment of stages 1..parts-1, or nullopt
/// when none fits.
std::optional<SmallVector<int64_t>>
constrainedSplit(int64_t n, int64_t parts,
                 llvm::function_ref<double(int64_t, int64_t, int64_t)> cost,
                 llvm::function_ref<bool(int64_t, int64_t, int64_t)> fits);

/// Chooses (or, with `given` boundaries, evaluates) the split of the step
/// function `fn` (before fsdp-autodiff) into cfg.pp · cfg.chunks stages.
/// Errors (emitted at fn): no layers, fewer layers than stages, layers used
/// out of order, an op the spec cannot price, and — with a budget — no split
/// whose every stage fits (naming the least-memory split's peak).
FailureOr<PipelineSplitPlan> planPipelineSplit(func::FuncOp fn,
                                               const PipelineSplitConfig &cfg,
                                               ArrayRef<int64_t> given = {});

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_PIPELINESPLIT_H
