//===- PipelineMemory.h - a pipeline stage's micro-batches in flight ------===//
//
// The memory plan of one pipeline stage (docs/pipeline-parallel.md,
// "Memory"), read from its recorded plan: which micro-batches hold forward
// activations while the stage is at its peak, and the most that ever do at
// once. 1F1B keeps at most P - s micro-batches in flight on stage s of P,
// GPipe all m (Narayanan et al., SC'21, Sec. 2.2; Korthikanti et al. 2022,
// Sec. 4.3); this counts what the planned step actually keeps.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_PIPELINEMEMORY_H
#define FSDP_ANALYSIS_PIPELINEMEMORY_H

#include "fsdp/Analysis/MemoryPlanRecord.h"

#include <nlohmann/json.hpp>

namespace mlir::fsdp {

/// A micro-batch is *in flight* at an instruction while a buffer that one of
/// its forward ops defined (nn.micro_batch = j, before its forward's end:
/// StepPhases) is live there: its activations, kept for its backward, and
/// the activations it received from the previous stage. Gathered
/// parameters, packed gradients and constants are not a micro-batch's.
struct MicroBatchesInFlight {
  /// The micro-batches in flight at the plan's peak instruction, ascending.
  std::vector<int64_t> atPeak;
  /// Their forward bytes live at the peak instruction, per entry of atPeak.
  std::vector<int64_t> bytesAtPeak;
  /// The most micro-batches in flight at one instruction, and the first
  /// instruction where (-1: none ever is).
  int64_t most = 0, mostInstruction = -1;

  /// Computes it from `plan` (liveness: each buffer from the instruction
  /// that defines it to the one after which the plan frees it, or to the
  /// step's end).
  static MicroBatchesInFlight compute(const MemoryPlanRecord &plan);
};

/// The memory of a pipeline stage's module, or null for a module that is no
/// stage: {"stage", "stages", "schedule", "micro_batches", "gather"
/// (fsdp.pp_gather: "once-per-step" or "per-micro-batch"; each of these four
/// only where the module says), "peak_bytes" (the plan's, per rank of the
/// stage), "micro_batches_in_flight_at_peak" (ascending),
/// "micro_batch_bytes_at_peak" (their forward bytes there, in that order),
/// "max_micro_batches_in_flight"}. The report's and the JSON schedule's
/// "pipeline" objects.
nlohmann::ordered_json pipelineStageMemory(ModuleOp module,
                                           const MemoryPlanRecord &plan);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_PIPELINEMEMORY_H
