//===- PipelineSim.h - the pipeline stages simulated against each other ---===//
//
// A pipeline-parallel module (fsdp-pipeline with pp=P: nested modules
// @stage<s>, docs/pipeline-parallel.md) is simulated as the P stage programs
// running at once, one rank per stage standing for its N/P ranks (a stage is
// SPMD): each on its own streams (the Simulator's model), a transfer between
// two stages timed on the link they span. The bubble comes out of the
// simulation: the time a stage's compute stream waits for another stage.
// See lib/Analysis/PipelineSim.cpp for the model.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_PIPELINESIM_H
#define FSDP_ANALYSIS_PIPELINESIM_H

#include "fsdp/Analysis/Simulator.h"

#include "llvm/ADT/SmallVector.h"

namespace mlir::fsdp {

/// The stage modules of a pipeline-parallel module in stage order, or empty
/// for an ordinary (one-program) module.
llvm::SmallVector<ModuleOp> pipelineStages(ModuleOp module);

/// Seconds one point-to-point transfer of `bytes` takes from stage `from` to
/// stage `to` of a job of `world` ranks in `stages` stages (stage s holds
/// world ranks s·n .. s·n + n − 1, n = world / stages, pp outermost): α +
/// bytes / B on the intra-node link when every rank of `from` and its peer
/// (the rank n·(to − from) away) share a node (spec.devicesPerNode per
/// node), else on the inter-node link, where a node's k = min(n,
/// devicesPerNode) senders share its nics_per_node NICs (at most one NIC
/// each: a transfer is one NCCL channel's / one MPI message's) or, without
/// the key, each has inter_node.bus_bandwidth. A link with a measured
/// send_recv curve (ClusterSpec::intraCurves / interCurves) is priced by it
/// instead. Times spec.oversubscription(world).
double p2pTransferTime(const ClusterSpec &spec, int64_t bytes, int64_t world,
                       int64_t stages, int64_t from, int64_t to);
/// Whether that transfer leaves the node (the inter-node link).
bool p2pCrossesNodes(const ClusterSpec &spec, int64_t world, int64_t stages,
                     int64_t from, int64_t to);

struct StageSimResult {
  SimResult sim; // the stage's step (its stepTime: when the stage is done)
  /// Seconds the stage's compute stream is idle in the pipeline's step:
  /// its waits on transfers between stages (sim.p2pExposed, the transfers'
  /// own time, plus sim.p2pStall, waiting for the other stage to compute)
  /// and the tail after its last op until the slowest stage is done. Not
  /// its waits on its own collectives (exposed FSDP communication).
  double idle = 0;
  /// idle / (step − idle): the bubble over the stage's ideal time, as
  /// Narayanan et al., SC'21, §2.2 define the bubble time fraction ((P−1)/m
  /// for GPipe and 1F1B with equal stages and free transfers; more when the
  /// transfers take time).
  double bubble = 0;
};

struct PipelineSimResult {
  int64_t worldSize = 0, microBatches = 0;
  std::string schedule;
  double stepTime = 0; ///< seconds: when the last stage is done
  /// Σ idle / Σ (step − idle) over the stages.
  double bubble = 0;
  std::vector<StageSimResult> stages;
};

/// Simulates the stages of `module` (pipelineStages) against each other.
/// Fails with a diagnostic as Simulator::run does, and when the stage
/// programs deadlock (a wait on a transfer the other stage never issues):
/// an error at the module with a note at each stalled stage's wait.
FailureOr<PipelineSimResult> simulatePipeline(const ClusterSpec &spec,
                                              ModuleOp module);

/// The planner's report of a pipeline module (README.md, "The planner's
/// report", pipeline keys): each stage's buildPlanReport under "stages"
/// (with its simulation, bubble_fraction, idle_s and p2p keys when `spec`
/// is given); at the top the report of the stage with the most device bytes
/// (the one that must fit), the whole model's params, world_size N, the
/// "pipeline" object, "pipeline_stages" P, "stage_peak_bytes" (each stage's
/// per_rank.peak_bytes, bytes per rank of that stage) and "stage_gather" (each
/// stage's pp-gather decision, or null) and, with `spec`, the pipeline's
/// predicted step and
/// bubble_fraction, the other simulation keys of its busiest stage (least
/// idle), bubble_s (that stage's idle) and the most p2p_bytes / p2p_s /
/// p2p_exposed_s of any stage. `sim` receives the simulation if not null.
FailureOr<nlohmann::ordered_json>
buildPipelineReport(ModuleOp module, const ClusterSpec *spec,
                    PipelineSimResult *sim = nullptr);

/// How the pipeline `module`'s split was chosen (fsdp-pipeline's
/// fsdp.pp_split: boundaries, objective, constraint, ends, stage_layers,
/// stage_flops, stage_estimated_peak_bytes, budget_bytes and
/// stage_predicted_s when known) as the report's `pipeline.split`; null
/// when the module has none.
nlohmann::ordered_json pipelineSplitReport(ModuleOp module);

/// The Chrome trace of a simulated pipeline: one process per stage (its
/// first rank), each with chromeTrace's tracks.
nlohmann::ordered_json pipelineChromeTrace(const PipelineSimResult &result,
                                           llvm::StringRef clusterName);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_PIPELINESIM_H
