//===- Sweep.h - Plans and simulates a grid of FSDP configurations --------===//
//
// The library behind fsdp-sweep: for one Hugging Face model config, every
// combination of world size, strategy, wrap policy and bucket limit is
// planned with fsdp-pipeline in-process (the model is imported once per
// world size, because the global batch b·N changes, and cloned for each
// plan), then the planner's report is built and the step simulated on the
// cluster through the analysis APIs (buildPlanReport, Simulator): exactly
// what `fsdp-opt --fsdp-pipeline="... cluster=SPEC report=PATH"` writes for
// the same options. The result prints as a table (one row per plan) or
// JSON (each row with its whole report).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SWEEP_SWEEP_H
#define FSDP_SWEEP_SWEEP_H

#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Import/Config.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace mlir::fsdp::sweep {

/// Builds one plan's fsdp-pipeline into a pass manager.
using PipelineBuilder = std::function<void(PassManager &)>;

/// The only place the sweep touches fsdp-pipeline's options
/// (createFSDPPipeline, fsdp/Transforms/Passes.h): parses `options` as
/// `fsdp-opt --fsdp-pipeline="..."` takes them, gives the pipeline the
/// cluster spec the sweep has read, `cluster`, unless it is null (it stands
/// for cluster=, so that any file name works and the file is read once), and
/// returns what builds that pipeline; on a parse error sets `error` to the
/// parser's message, trimmed.
FailureOr<PipelineBuilder>
parsePipeline(llvm::StringRef options,
              std::shared_ptr<const ClusterSpec> cluster, std::string &error);

/// What to sweep.
struct SweepOptions {
  std::string configPath;  ///< the Hugging Face config.json
  std::string clusterPath; ///< the cluster spec JSON
  /// Model overrides as fsdp-import's; `batch` is the batch b per
  /// data-parallel rank (the model of world size N and tensor-parallel degree
  /// T gets b·N/T: a TP group of T ranks shares its sequences).
  fsdp_import::Overrides overrides;
  int64_t microBatch = 1; ///< b, sequences per rank
  std::vector<int64_t> worldSizes;
  /// Tensor-parallel degrees T (fsdp-pipeline's tp=T); {1}: not set (no tp
  /// option, no column).
  std::vector<int64_t> tensorParallel = {1};
  bool tensorParallelGiven = false; ///< the table gets a tp column
  /// Pipeline-parallel degrees P (fsdp-pipeline's pp=P); {1}: not set (no
  /// pp option, no columns). The global batch stays b·N/T: a pipeline's P
  /// stages share their data-parallel rank's b·P sequences, in b·P
  /// micro-batches of one sequence unless `pipeline` sets micro-batches=.
  std::vector<int64_t> pipelineParallel = {1};
  bool pipelineParallelGiven = false; ///< the table gets pp and bubble
  /// pp-schedule values planned for each P > 1 (gpipe, 1f1b).
  std::vector<std::string> ppSchedules = {"1f1b"};
  std::vector<std::string> strategies;
  /// Wrap policies: 0 is policy=block, X > 0 policy=size min-unit-numel=X
  /// (elements).
  std::vector<int64_t> unitNumels = {0};
  /// fsdp-schedule bucket-bytes limits (bytes, 0: off); -1: not set.
  std::vector<int64_t> bucketLimits = {-1};
  bool bucketLimitsGiven = false; ///< the table gets a bucket limit column
  /// fsdp-activation-checkpoint modes (none, full, selective); empty: not
  /// set (no activation-checkpoint option, no column).
  std::vector<std::string> activationCheckpoints;
  std::string paramDtype = "bf16";
  /// fsdp-pipeline's attention (flash, unfused, unfused-no-dropout); empty:
  /// not given (the planner's default, flash).
  std::string attention;
  std::string pipeline; ///< more fsdp-pipeline options, verbatim
  /// The attention every plan is priced with: `attention`, else an
  /// attention= of `pipeline`, else the planner's default (flash).
  std::string attentionImpl() const;
};

/// Whether the fsdp-pipeline option string `options` (space-separated
/// name=value words, as --pipeline takes them) sets the option whose word
/// starts with `key` ("name=").
bool pipelineSets(llvm::StringRef options, llvm::StringRef key);

/// One plan of the sweep: its options and, after it ran, its report or error.
struct Plan {
  int64_t worldSize = 0;
  int64_t tp = 1;         // tensor-parallel degree T
  int64_t pp = 1;         // pipeline-parallel degree P
  std::string ppSchedule; // its pp-schedule; empty for P = 1
  std::string strategy;
  int64_t shardSize = 0;    // hybrid-shard: ranks per shard group; 0 otherwise
  int64_t minUnitNumel = 0; // policy=size: elements; 0 for policy=block
  int64_t bucketBytes = -1; // fsdp-schedule bucket-bytes (0: off); -1: not set
  std::string activationCheckpoint; // its mode; empty: not set
  int64_t microBatches = 1; // micro-batches=k (accumulate=sharded when > 1)
  /// Sequences of the imported model (global batch); 0: the sweep's b x N.
  int64_t globalBatch = 0;
  PipelineBuilder pipeline; // from parsePipeline; unset if it failed
  std::string optionString; // as fsdp-opt --fsdp-pipeline="..." takes it

  // Results.
  std::string error;             // why the plan failed; empty on success
  nlohmann::ordered_json report; // buildPlanReport + addSimulationToReport
  int64_t units = 0;
  int64_t bucketMaxBytes = 0, bucketMeanBytes = 0; // bytes per collective
  double planSeconds = 0; // pipeline + report + simulation, wall clock
  /// It fits the device, and the same plan without activation
  /// checkpointing (activation-checkpoint=none, swept beside it) does not.
  bool fitsOnlyWithAC = false;

  /// "block", or "size>=X" with X in short form (3e9 for 3000000000).
  std::string policy() const;
};

/// Imports the model once with o.overrides (a bad config fails here, before
/// any plan) for the table's title: its parameter count and sequence length
/// (of its tokens argument).
LogicalResult inspectModel(const SweepOptions &o, int64_t &params, int64_t &seq,
                           std::string &error);

/// Every plan, ordered by world size: world sizes × tensor-parallel degrees ×
/// pipeline-parallel degrees (× pp-schedules for P > 1) × strategies ×
/// policies × bucket limits × activation-checkpoint modes, with
/// hybrid-shard (shard groups of one node, spec.devicesPerNode ranks) left out
/// where N <= devicesPerNode, counted in `skippedHybrid`; a degree T (or
/// P·T) that does not divide N is a failed row saying so.
std::vector<Plan> makePlans(const SweepOptions &o, const ClusterSpec &spec,
                            int64_t &skippedHybrid);

/// Runs the plans on `jobs` threads (0: the hardware's; at most one per
/// plan), one MLIR context each, and returns the number of threads used;
/// then marks the plans that fit `spec`'s device only with activation
/// checkpointing (Plan::fitsOnlyWithAC).
unsigned runPlans(std::vector<Plan> &plans, unsigned jobs,
                  const SweepOptions &o, const ClusterSpec &spec);

/// Plans `plan` on a clone of `model` (imported in `ctx`): fsdp-pipeline,
/// the report (buildPlanReport, addSimulationToReport, addAllocatorToReport)
/// and the bucket sizes; on failure sets plan.error to the first error
/// diagnostic.
void runPlan(MLIRContext &ctx, ModuleOp model, const ClusterSpec &spec,
             Plan &plan);

/// What the sweep printed beside its rows.
struct SweepResult {
  std::vector<Plan> plans;
  int64_t params = 0, seq = 0; ///< the model's parameters and tokens per row
  int64_t skippedHybrid = 0;
  unsigned jobs = 0;
  double wallSeconds = 0; ///< the whole run, seconds
};

/// What bounds a planned row's predicted step (the report's keys, as the
/// simulator defines them, lib/Analysis/Simulator.cpp): "memory" when its
/// peak exceeds the device's memory; else "bubble" when a pipeline's
/// bubble_s (its busiest stage's idle time waiting on the other stages and
/// the transfers, PipelineSim.h) exceeds each of the terms below; else
/// "FSDP comm" when the FSDP
/// collectives' stream is busier than the compute stream (comm_s > compute_s
/// + host_overhead_s + tp_comm_s: the step is at least comm_s); else the
/// largest share of the compute stream's time: "compute" (compute_s +
/// host_overhead_s), "TP comm" (tp_exposed_s, blocking) or "FSDP comm"
/// (exposed_comm_s, waits for FSDP collectives).
std::string stepBound(const nlohmann::ordered_json &report, double memoryBytes);

/// The title, the table (every column padded to its widest cell), the note
/// on hybrid-shard and the time taken.
void printSweep(llvm::raw_ostream &os, const SweepOptions &o,
                const ClusterSpec &spec, const SweepResult &r);

/// The document fsdp-sweep --json writes: the settings and every row with
/// its whole report.
nlohmann::ordered_json sweepJson(const SweepOptions &o, const ClusterSpec &spec,
                                 const SweepResult &r);

} // namespace mlir::fsdp::sweep

#endif // FSDP_SWEEP_SWEEP_H
