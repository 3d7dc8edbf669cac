//===- FSDP.h - the fsdp dialect: units, shards, collectives --------------===//
#ifndef FSDP_DIALECT_FSDP_FSDP_H
#define FSDP_DIALECT_FSDP_FSDP_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/schedule/Format.h" // ODS default attribute values

namespace mlir::fsdp {
/// The resource that collectives read and write: data moved between ranks.
struct CommunicationResource
    : public SideEffects::Resource::Base<CommunicationResource> {
  llvm::StringRef getName() final { return "<Communication>"; }
};

/// Attribute names. On the module: fsdp.world_size (i64). On function
/// arguments and results of the sharded step: fsdp.unit (symbol ref) with
/// fsdp.role (#fsdp.role<...>: param, master, exp_avg, exp_avg_sq); on data
/// arguments
/// fsdp.global_shape (the shape before the batch was split).
inline constexpr llvm::StringLiteral kWorldSizeAttr = "fsdp.world_size";
inline constexpr llvm::StringLiteral kUnitAttr = "fsdp.unit";
inline constexpr llvm::StringLiteral kRoleAttr = "fsdp.role";
inline constexpr llvm::StringLiteral kGlobalShapeAttr = "fsdp.global_shape";
/// On the module: the sharding strategy and the 2-D grid replicas × shard_size
/// (replicas = 1 and shard_size = world size unless hybrid-shard).
inline constexpr llvm::StringLiteral kStrategyAttr = "fsdp.strategy";
inline constexpr llvm::StringLiteral kReplicasAttr = "fsdp.replicas";
inline constexpr llvm::StringLiteral kShardSizeAttr = "fsdp.shard_size";
/// On the module after fsdp-tensor-parallel: the tensor-parallel degree T
/// (i64 >= 1; absent means 1). World = T x replicas x shard_size, the T ranks
/// of a tensor-parallel group adjacent (world rank = data-parallel rank · T +
/// tensor-parallel rank).
inline constexpr llvm::StringLiteral kTensorParallelAttr =
    "fsdp.tensor_parallel";
/// Pipeline parallelism (docs/pipeline-parallel.md). On a stage's module
/// (fsdp-pipeline-split): the number of stages P (i64 >= 1), this module's
/// stage s (0-based), the schedule ("gpipe", "1f1b") and the micro-batch
/// count m. World = P x (the stage's data- and tensor-parallel ranks), the
/// stage outermost: world rank = s · (world / P) + the rank in the stage.
inline constexpr llvm::StringLiteral kPipelineStagesAttr =
    "fsdp.pipeline_stages";
inline constexpr llvm::StringLiteral kPipelineStageAttr = "fsdp.pipeline_stage";
inline constexpr llvm::StringLiteral kPipelineScheduleAttr =
    "fsdp.pipeline_schedule";
inline constexpr llvm::StringLiteral kPipelineMicroBatchesAttr =
    "fsdp.pipeline_micro_batches";
/// On a stage's module: how fsdp-pipeline keeps its units gathered across
/// micro-batches ("once-per-step": gathered at the first micro-batch's use,
/// freed after the last one's, gradients reduced once; "per-micro-batch":
/// every micro-batch's forward and backward gather), its memory decision.
inline constexpr llvm::StringLiteral kPipelineGatherAttr = "fsdp.pp_gather";
/// On a pipeline module (fsdp-pipeline): how its split was chosen, a
/// dictionary (PipelineSplitPlan::toAttr, lib/Transforms/PipelineSplit.h)
/// that the report copies as `pipeline.split`.
inline constexpr llvm::StringLiteral kPipelineSplitAttr = "fsdp.pp_split";
/// On a pipeline module planned with pp-plan=fattest (a memory screen): the
/// one stage planned (i64); the pipeline is then neither simulated nor
/// translated.
inline constexpr llvm::StringLiteral kPipelineScreenAttr = "fsdp.pp_screen";
/// Interleaved 1F1B (absent means 1): the virtual stages per rank v on a
/// stage's module; the rank's local chunk i (virtual stage s + i·P) on a
/// chunk's module after fsdp-pipeline-split, and on the arguments, ops and
/// results of the rank's step function that came from chunk i.
inline constexpr llvm::StringLiteral kPipelineChunksAttr =
    "fsdp.pipeline_chunks";
inline constexpr llvm::StringLiteral kPPChunkAttr = "fsdp.pp_chunk";
/// On a stage function's arguments and results (i64: the boundary value's
/// index): an activation received from the previous stage (pp_input), the
/// gradient of an activation sent to the next stage, received back from it
/// (pp_output_grad); results: the activation sent to the next stage
/// (pp_output) and the gradient of a received one, sent back (pp_input_grad).
inline constexpr llvm::StringLiteral kPPInputAttr = "fsdp.pp_input";
inline constexpr llvm::StringLiteral kPPOutputGradAttr = "fsdp.pp_output_grad";
inline constexpr llvm::StringLiteral kPPOutputAttr = "fsdp.pp_output";
inline constexpr llvm::StringLiteral kPPInputGradAttr = "fsdp.pp_input_grad";
/// On a parameter argument of a pipeline stage (i64): the other stage that
/// uses the same parameter (tied weights: GPT-2's token embedding and LM
/// head); each holds a copy and their gradients are summed between the two
/// (Megatron-LM's _allreduce_word_embedding_grads). On the fsdp.send and
/// fsdp.recv of that exchange: the peer stage.
inline constexpr llvm::StringLiteral kPPTiedPeerAttr = "fsdp.pp_tied_peer";
/// The MPI tags of a pipeline's point-to-point transfers. MPI matches a
/// message on (communicator, source, tag) (MPI 4.0, Sec. 3.2.3), and each
/// pair of adjacent stages has its own (source, destination), so a tag need
/// only tell apart the transfers between one pair of ranks. The tied
/// gradients' exchange: kPPTiedTagBase + the parameter's index among the
/// tied ones of the two stages (by FQN), below kPPBoundaryTagBase (at most
/// 1024 tied parameters). The boundary transfers: kPPBoundaryTagBase +
/// ((i * m + j) * 2 + backward) * v + chunk, i the value's index among the
/// values crossing its boundary, j the micro-batch of m, v the chunks per
/// rank (fsdp-pipeline-micro-batch). fsdp-run checks the largest against
/// the communicator's MPI_TAG_UB before step 1 (at least 32767 by the
/// standard; Open MPI's ob1: 2^31 - 1).
inline constexpr int64_t kPPTiedTagBase = 0;
inline constexpr int64_t kPPBoundaryTagBase = 1024;
/// On the module after fsdp-tensor-parallel: a dictionary from the FQN of
/// each parameter that is split across the tensor-parallel group to a
/// DenseI64ArrayAttr [dim, blocks, global shape...]: the global tensor's
/// dimension `dim` is `blocks` equal blocks (3 for GPT-2's fused q, k, v),
/// each cut into T contiguous pieces, and tensor-parallel rank t holds piece
/// t of every block (Megatron-LM's column / row split).
inline constexpr llvm::StringLiteral kTensorSlicesAttr = "fsdp.tensor_slices";
/// On arguments and results of unit roles: #fsdp.layout<shard> (the default
/// when absent) or #fsdp.layout<full> (the whole padded flat buffer,
/// replicated on every rank).
inline constexpr llvm::StringLiteral kLayoutAttr = "fsdp.layout";
/// On the module after fsdp-schedule: the collective schedule applied
/// ("none", "fsdp1", "fsdp2", "list(max-in-flight=N)"; "auto: " + the
/// cost model's pick).
inline constexpr llvm::StringLiteral kScheduleAttr = "fsdp.schedule";
/// On the step function after fsdp-memory-plan: its memory plan, a dictionary
/// (fsdp/Analysis/MemoryPlanRecord.h gives the keys and reads them).
inline constexpr llvm::StringLiteral kMemoryPlanAttr = "fsdp.memory_plan";
} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/FSDPEnums.h.inc"

#include "fsdp/Dialect/FSDP/FSDPOpsDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/FSDPOpsTypes.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/FSDPAttrs.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/FSDPOps.h.inc"

namespace mlir::fsdp {
/// Size of process group `group` for the module that contains `op` (its
/// fsdp.world_size, fsdp.shard_size and fsdp.replicas); nullopt if the
/// module has no world size yet (before fsdp-shard).
std::optional<int64_t> groupSize(Operation *op, Group group);
/// The enclosing module's fsdp.strategy; nullopt before fsdp-shard.
std::optional<Strategy> strategyOf(Operation *op);
/// Fails, with an error on `module`, for a pipeline planned with
/// fsdp-pipeline's pp-plan=fattest (kPipelineScreenAttr: it holds one
/// stage) or pp-plan=split (kPipelineSplitAttr without kPipelineStagesAttr:
/// no stage), which are neither simulated nor translated.
LogicalResult checkEveryStagePlanned(ModuleOp module);
/// A pipeline module planned with pp-plan=split: its split, no stage.
inline bool holdsSplitOnly(ModuleOp module) {
  return module->hasAttr(kPipelineSplitAttr) &&
         !module->hasAttr(kPipelineStagesAttr);
}

/// `v`, or for the result of an fsdp.wait the async collective's result it
/// completes (the same buffer).
inline Value skipWait(Value v) {
  if (auto w = v.getDefiningOp<WaitOp>())
    return w.getToken();
  return v;
}
/// Bytes of a buffer of type `type` (a tensor, or the tensor an
/// !fsdp.future completes): nn::tensorBytes, the compiler's one definition.
inline int64_t bufferBytes(Type type) {
  if (auto f = dyn_cast<FutureType>(type))
    type = f.getValueType();
  return nn::tensorBytes(type);
}
/// The tensor type of a buffer: `type` itself, or the tensor an
/// !fsdp.future completes (the same buffer); null for any other type.
inline RankedTensorType bufferTensorType(Type type) {
  if (auto f = dyn_cast<FutureType>(type))
    return f.getValueType();
  return dyn_cast<RankedTensorType>(type);
}
inline int64_t bufferBytes(Value v) { return bufferBytes(v.getType()); }

/// True for the three collectives (all-gather, reduce-scatter, all-reduce).
inline bool isCollective(Operation *op) {
  return isa<AllGatherOp, ReduceScatterOp, AllReduceOp>(op);
}
/// The process group of a collective (isCollective(op)).
inline Group collectiveGroup(Operation *op) {
  if (auto ag = dyn_cast<AllGatherOp>(op))
    return ag.getGroup();
  if (auto rs = dyn_cast<ReduceScatterOp>(op))
    return rs.getGroup();
  return cast<AllReduceOp>(op).getGroup();
}
} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_FSDP_H
