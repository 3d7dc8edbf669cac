//===- PlanReport.h - the planner's memory and communication report -------===//
//
// What `fsdp-opt --fsdp-pipeline="... report=PATH"` writes: parameter count,
// strategy and grid, per-rank peak bytes (and where), bytes per memory class
// at the peak, model-state bytes, communication bytes per step by collective,
// and every unit's numel and padding. The JSON schema is in README.md.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_PLANREPORT_H
#define FSDP_ANALYSIS_PLANREPORT_H

#include "fsdp/Analysis/MemoryPlanRecord.h"
#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

namespace mlir::fsdp {

/// Bytes each rank sends per step, by collective (ring algorithms, Thakur,
/// Rabenseifner & Gropp 2005): all-gather and reduce-scatter of B bytes over a
/// group of G ranks send (G−1)/G·B, an all-reduce 2·(G−1)/G·B. The FSDP
/// collectives by kind, and apart from them (not in total()) the
/// tensor-parallel ones (tensorCollectiveOf, Simulator.h).
struct CommPlan {
  int64_t allGather = 0, reduceScatter = 0, allReduce = 0;
  int64_t tensorParallel = 0;
  int64_t total() const { return allGather + reduceScatter + allReduce; }
  static CommPlan compute(const MemoryPlanRecord &plan, ModuleOp module);
};

/// Per-rank model-state bytes (ZeRO's "model states", Rajbhandari et al.,
/// SC20, Sec. 3.1): parameter storage, optimizer state and gradient storage.
struct ModelState {
  int64_t paramBytes = 0, optStateBytes = 0, gradBytes = 0;
  int64_t total() const { return paramBytes + optStateBytes + gradBytes; }
  static ModelState compute(const MemoryPlanRecord &plan, func::FuncOp fn);
};

/// The report as JSON (see README.md, "The planner's report"), from the step's
/// recorded memory plan (computed now if it has none: MemoryPlanRecord::get).
FailureOr<nlohmann::ordered_json> buildPlanReport(ModuleOp module);

struct SimResult;
/// Adds the simulator's keys (cluster, flops_per_rank, predicted_step_time_s,
/// compute_s, comm_s, exposed_comm_s, tp_bytes, tp_comm_s, tp_exposed_s,
/// lower_bound_s, mfu, mfu_dtype) to a
/// report from buildPlanReport.
void addSimulationToReport(nlohmann::ordered_json &report, const SimResult &sim,
                           llvm::StringRef clusterName);

struct ClusterSpec;
/// Adds per_rank.allocator to a report from buildPlanReport when the spec has
/// an allocator model (ClusterSpec::hasAllocator; otherwise nothing):
///   stream_pool_bytes: with per_stream_pools, the sum over the buffers FSDP
///     allocates on its communication streams (gathered_param, and of
///     comm_buffer the all-gathers' send buffers: per_rank.send_buffer_bytes
///     gather_max, MemoryPlan.h's SendBufferBytes) of their most bytes at any
///     point of the step less their bytes at the peak (a reduction's input
///     is made and freed on the compute stream, whose peak holds it: FSDP2's
///     foreach_reduce): a freed block of a stream's pool is reused only for
///     that stream
///     (PyTorch's caching allocator, torch.Tensor.record_stream docs;
///     pytorch/pytorch #86836 "avoid over-allocating blocks to the unshard
///     stream", #147168 FSDP2's "inter-stream memory fragmentation"); an
///     upper estimate where the classes peak at different times.
///     With per_rank.framework (a torch framework-memory,
///     addFrameworkMemoryToReport), the pools are counted against its peak
///     and its peak_bytes_by_class, and include its grad_shard_pool_bytes
///     (FSDP's gradient shards, allocated on the reduce-scatter stream; also
///     reported as allocator.grad_shard_pool_bytes).
///   workspace_bytes: the spec's (cuBLAS workspaces and the like);
///   overhead_bytes: their sum; reserved_bytes: peak_bytes (the framework's
///     where the report has one) + overhead_bytes, what
///     torch.cuda.max_memory_reserved() would read. Bytes per rank.
void addAllocatorToReport(nlohmann::ordered_json &report,
                          const ClusterSpec &spec);

/// The fields of each per_rank.peak_bytes_by_phase entry, an array in this
/// order (MemoryPlanRecord's PhasePeak): micro-batch (-1: none, -2: the
/// optimizer), backward (0/1), the most bytes live in the phase, and of them
/// the gathered parameters' and the all-gathers' send buffers' bytes.
enum PhasePeakField : size_t {
  kPhaseMicroBatch,
  kPhaseBackward,
  kPhaseBytes,
  kPhaseGatheredBytes,
  kPhaseGatherSendBytes,
  kNumPhasePeakFields
};

/// The bytes a plan needs on its device: per_rank.allocator.reserved_bytes
/// where the report has it, else per_rank.peak_bytes.
int64_t deviceBytes(const nlohmann::ordered_json &report);

/// The pipeline's peak stage (the report's peak_stage, whose per-rank
/// numbers are the pipeline report's): the first of `stages` (stage reports,
/// each with per_rank) of the largest deviceBytes. 0 for an empty list.
size_t fattestStage(const nlohmann::ordered_json &stages);

/// A human-readable table of a report from buildPlanReport.
std::string formatPlanReport(const nlohmann::ordered_json &report);

/// Parses a byte count with an optional suffix: B, K/KB (10^3), KiB (2^10),
/// M/MB, MiB, G/GB, GiB, T/TB, TiB; fractions allowed ("1.5GiB").
std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_PLANREPORT_H
