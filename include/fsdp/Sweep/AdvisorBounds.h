//===- AdvisorBounds.h - proven lower bounds on a layout's step and bytes -===//
//
// The advisor's branch and bound (Advisor.h): before a family is planned,
// two lower bounds that need no plan, each no larger than what the planner
// and the simulator would report for any of the family's layouts:
//
// * Device bytes (deviceBytesLowerBound): at the end of the forward of a
//   stage's last block for the micro-batch that fills the stage (its
//   micro-batches in flight n_j: P − j under 1F1B, every one (>= P) under
//   GPipe, else 1), the rank holds at once
//   - the training state it keeps for the whole step, MemoryPlan's
//     param_shard and opt_state: the f32 master copy of its parameters (4
//     bytes each) and AdamW's two f32 moments (8 bytes each), sharded over
//     the shard group as the strategy shards them (full-shard and
//     shard-grad-op: both over the data-parallel group; shard-optimizer: the
//     moments only; hybrid-shard: over its shard group; no-shard: neither);
//   - with activation-checkpoint=full, every block's input for each
//     micro-batch in flight (ActivationCheckpoint.cpp: full AC keeps the
//     block's input alone, its sequence chunk under sequence parallelism:
//     m · (its elements per sequence) · param-dtype bytes / t);
//   - with the other modes (none, selective, selective-op), what the mode
//     keeps of each block's forward for the backward, for each micro-batch
//     in flight: the values a block's forward ops produce that a backward
//     op reads (a recomputed op's operands among them), measured on the
//     model itself after fsdp-autodiff, fsdp-optimizer, fsdp-wrap
//     (policy=block), fsdp-activation-checkpoint with that mode and the
//     canonicalizer (keptPerSequence; each is
//     live from its forward op to its backward use, so all are at that
//     point, in buffers of their own: the memory plan aliases parameter
//     views and collective results only), floats at param-dtype bytes (a
//     value kept in f32 only adds), integers at their width; a value split
//     by tensor parallelism is split over at most t ranks (/ t), and one
//     not proportional to the batch (a constant) is counted at m / B of its
//     size (B the imported batch >= m);
//   - the block's own parameters, gathered in param-dtype (full-shard,
//     shard-grad-op, hybrid-shard: its matmuls read them; / t);
//   plus the allocator's workspace (addAllocatorToReport). With L_j blocks
//   on stage j and w_j = state + checkpoints per block, the busiest stage
//   holds at least max_j L_j · w_j >= L / Σ_j (1 / w_j) over every split of
//   the L blocks (the parameters outside blocks only add); tensor
//   parallelism splits a parameter over at most t ranks. Gradients,
//   other activations and communication buffers only add. With
//   `optimizer=`, `frozen=` or `master-weights=` in --pipeline the state
//   per parameter is not known here and the bound is 0.
// * Step seconds (stepLowerBound): the compute stream runs its ops one
//   after another (Simulator.cpp), so a rank's step is at least the sum of
//   its ops' roofline times, each at least FLOPs / (peak · efficiency) with
//   the largest peak of the spec and the op's largest efficiency
//   (efficiency.matmul · K / (K + matmul_half_k) for the forward nn.linear
//   at the model's own K, which tensor parallelism can only shorten;
//   efficiency.matmul for the backward's GEMMs; efficiency.attention;
//   op_efficiency where it names the op). Counted: the forward's nn.linear,
//   nn.matmul and nn.attention ops (nn::CostOpInterface FLOPs, linear in
//   the batch) and, per nn.linear, its two backward GEMMs (dX and dW, each
//   the forward's FLOPs, Narayanan et al., SC'21, §3.2: every weight is
//   trainable and every linear's input needs its gradient) and, with
//   activation-checkpoint=full, the forward time of the linears it
//   recomputes (those of a block whose results stay inside the block's use,
//   ActivationCheckpoint.cpp); everything else (attention's backward, other
//   recomputation, elementwise ops, the optimizer, communication) only
//   adds, so it is left out. Per TP rank at
//   least 1/t of it. One micro-batch of m sequences through all P stages
//   costs at least C = m · c / t (c per sequence); with k micro-batches a
//   stage j computes k·c_j in series and cannot start before the first
//   micro-batch's forward passed stages 0..j−1 nor end before the last
//   one's backward passed them back, so step >= k·c_j + Σ_{i<j} c_i; its
//   minimum over every split of C into c_0..c_{P−1} is C / (1 − (1 −
//   1/k)^P) (k·C for P = 1; (k + P − 1)/P · C of equal stages is above it).
//
// Both are checked against planned layouts by
// test/lit/Sweep/advisor-bounds.test (Inputs/check-bounds.py).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SWEEP_ADVISORBOUNDS_H
#define FSDP_SWEEP_ADVISORBOUNDS_H

#include "fsdp/Analysis/Simulator.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace mlir::fsdp::sweep {

/// What the bounds need from the imported model (its forward, before any
/// pass), measured once.
struct ModelBoundFacts {
  int64_t params = 0;    ///< trainable parameters (fsdp_import::countParams)
  int64_t sequences = 0; ///< the imported model's batch (sequences)
  /// Lower bound of the compute seconds of one step of all `sequences`
  /// on one device (forward and backward GEMMs, forward attention).
  double computeSeconds = 0;
  /// Of the forward's nn.linear time, what activation-checkpoint=full
  /// recomputes (the linears inside a block's use, ActivationCheckpoint.cpp;
  /// 0 with ac-units=), for all `sequences`.
  double recomputeSeconds = 0;
  /// Blocks (fsdp-wrap's policy=block units other than the root), the
  /// fewest parameters of one, and the fewest elements per sequence of one's
  /// input (the non-parameter operand of the first op reading its
  /// parameters, as the residual stream into a block's first norm).
  int64_t blocks = 0;
  double blockParams = 0, blockInputPerSequence = 0;
  /// What each activation-checkpoint mode other than full keeps of a
  /// block's forward for the backward, per sequence: the fewest over the
  /// blocks of the kept floating-point elements (`first`; bytes at
  /// param-dtype) and of the kept bytes of other element types (`second`).
  /// A mode is missing when --pipeline sets an option that changes what a
  /// mode keeps (the measurement uses the passes' defaults).
  std::map<std::string, std::pair<double, double>> keptPerSequence;
  /// The persistent state per parameter is known (bytesLowerBound > 0).
  bool stateKnown = true;
};

/// A family of layouts (all but the micro-batch size m >= `microBatch` and
/// the number k >= P of micro-batches; any AC mode when `acMode` is empty)
/// for deviceBytesLowerBound.
struct BoundLayout {
  int64_t tp = 1, pp = 1;
  std::string ppSchedule; ///< gpipe, 1f1b, ...; empty for P = 1
  std::string strategy;
  int64_t dp = 1, shardSize = 1; ///< shardSize: hybrid-shard's group
  int64_t microBatch = 1;        ///< the smallest m of the family
  std::string acMode; ///< activation-checkpoint mode; empty: any mode
  std::string paramDtype = "bf16";
};

/// Measures `model` (imported with `sequences` sequences) against `spec`;
/// `pipelineOptions` is the advisor's --pipeline string (see above).
ModelBoundFacts measureModel(ModuleOp model, int64_t sequences,
                             const ClusterSpec &spec,
                             const std::string &pipelineOptions);

/// Lower bound of deviceBytes(report) (bytes) of any layout of `l`.
double deviceBytesLowerBound(const ModelBoundFacts &f, const ClusterSpec &spec,
                             const BoundLayout &l);

/// Lower bound of predicted_step_time_s (seconds) of a layout whose
/// data-parallel ranks take s sequences each in k micro-batches over P
/// stages of t-way tensor parallelism (with `fullAC`, full activation
/// checkpointing's recomputation too).
double stepLowerBound(const ModelBoundFacts &f, int64_t t, int64_t pp,
                      int64_t s, int64_t k, bool fullAC);

/// The planner's refusal of each tensor-parallel degree t > 1 of `degrees`
/// for `model` (its first error): fsdp-tensor-parallel, the pass
/// fsdp-pipeline runs first on the forward (Pipeline.cpp, buildPipeline),
/// with --pipeline's sequence-parallel and vocab-parallel, on a clone. Its
/// checks (heads and key/value heads, the vocabulary and the sequence
/// dividing by t, a tensor-parallel region to split) read the model and
/// those options alone, not the batch or any other layout dimension, so one
/// run decides every family of degree t. With pp > 1 a stage's forward is
/// a part of the model: the op refused (the embedding or LM head, an
/// attention, the op entering the sequence split) is on one of its stages,
/// which refuses it the same way.
std::map<int64_t, std::string>
tensorParallelRefusals(ModuleOp model, const std::vector<int64_t> &degrees,
                       const std::string &pipelineOptions);

} // namespace mlir::fsdp::sweep

#endif // FSDP_SWEEP_ADVISORBOUNDS_H
