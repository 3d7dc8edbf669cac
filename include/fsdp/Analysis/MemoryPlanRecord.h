//===- MemoryPlanRecord.h - the memory plan recorded on the step ----------===//
//
// fsdp-memory-plan computes the plan once (MemoryPlan::compute) and records
// it on the step function as one attribute, fsdp.memory_plan; the plan's
// final consumers (the JSON schedule, the planner's report, fsdp-sweep) read
// it from there. A step that was not memory-planned (the output of a single
// pass) gets the plan computed on the fly through the same entry point,
// MemoryPlanRecord::get, so that the two cannot disagree.
//
// The attribute is a dictionary. Buffers are numbered as MemoryPlan numbers
// them (the function's arguments, then the results of its ops in order);
// instructions are the ops of its block without the terminator.
//   instructions, fingerprint    the step the plan was made for: a step
//                                changed after fsdp-memory-plan (another pass
//                                run after it) is refused, not misread
//   arena_bytes, alignment       one arena holding every buffer, its offsets'
//                                alignment (arena_bytes -1 and every offset
//                                -1: planned without the arena,
//                                fsdp-memory-plan's arena-offsets=false)
//   peak_bytes, peak_instruction, peak_bytes_with_scratch
//   peak_bytes_by_class          {class = bytes live at the peak}
//   max_bytes_by_class           {class = its most bytes live at any point}
//   phase_peak_bytes             per phase (micro-batch, backward 0/1, the
//                                most bytes live in it, of them gathered and
//                                gather-send bytes): optional
//                                (phasePeaks, PhasePeak)
//   send_buffer_bytes            comm_buffer split (SendBufferBytes):
//                                {gather_max, gather_at_peak, reduce_max,
//                                reduce_at_peak}
//   classes                      per buffer, its class (memoryClassName)
//   arena_offsets                per buffer, bytes from the arena's base
//                                (-1: a view, which has no memory of its own)
//   views                        pairs (view, the buffer whose memory it is)
//   aliases                      pairs (a returned state buffer, the state
//                                argument whose memory it takes)
//   in_place                     pairs (a gradient accumulation's sum, the
//                                running sum whose memory it takes over)
//   frees                        pairs (instruction, buffer freed after it)
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_MEMORYPLANRECORD_H
#define FSDP_ANALYSIS_MEMORYPLANRECORD_H

#include "fsdp/Analysis/MemoryPlan.h"

namespace mlir::fsdp {

/// The most bytes live in one phase of a step, and of them the gathered
/// parameters' and the all-gathers' send buffers' (what the allocator's
/// stream pools are measured against). Phases are StepPhases': in a
/// micro-batched step an op of no micro-batch is in the phase of the op
/// before it (the ops before any in (-1, forward)); without micro-batches
/// each op is placed by the step's loss; an optimizer update and the ops
/// after it (up to the next micro-batch's) are in (-2, backward).
struct PhasePeak {
  int64_t microBatch = -1;
  bool backward = false;
  int64_t bytes = 0, gatheredBytes = 0, gatherSendBytes = 0;
};

/// What the consumers of a plan read: its decisions (classes, offsets,
/// views, aliases, frees) and totals, without the liveness they came from.
struct MemoryPlanRecord {
  std::vector<Operation *> instructions;
  std::vector<Value> buffers;             // arguments, then results in op order
  llvm::DenseMap<Value, int64_t> indexOf; // value → buffer index
  std::vector<MemoryClass> classes;       // per buffer
  std::vector<int64_t> arenaOffsets;      // per buffer; -1 for views
  std::vector<int64_t> viewOf;            // per buffer: its owner, or -1
  std::vector<int64_t> aliases;   // per buffer: the state argument whose memory
                                  // it takes, or -1
  std::vector<int64_t> inPlaceOf; // per buffer: the running sum whose memory
                                  // it takes over, or -1
  std::vector<std::vector<int64_t>> freesAfter; // per instruction
  int64_t peakBytes = 0, peakBytesWithScratch = 0, peakInstruction = -1;
  std::vector<int64_t> peakBytesByClass, maxBytesByClass; // per MemoryClass
  /// Each phase's most live bytes, in the order the phases first run. Their
  /// maximum is peakBytes, unless the step's start is higher. What
  /// fsdp-sweep's advisor extrapolates phase by phase: the step's peak may
  /// move to another phase as the model deepens.
  std::vector<PhasePeak> phasePeaks;
  SendBufferBytes sendBytes;
  int64_t arenaBytes = 0, alignment = MemoryPlan::kAlignment;

  /// Whether every buffer has its arena offset (fsdp-memory-plan's
  /// arena-offsets=true, the default): what the JSON schedule needs.
  bool hasArena() const { return arenaBytes >= 0; }

  /// The value whose memory `v` is: a view's owner, else `v`.
  Value ownerOf(Value v) const;
  MemoryClass classOf(Value v) const { return classes[indexOf.lookup(v)]; }

  /// The decisions and totals of a computed plan.
  static MemoryPlanRecord of(const MemoryPlan &plan);

  /// Records this plan of `fn` as fsdp.memory_plan on `fn`, replacing any.
  void recordOn(func::FuncOp fn) const;

  /// The plan fsdp-memory-plan recorded on `fn`, or, without a record, the
  /// plan computed now. Fails with a diagnostic on a record that is
  /// malformed or stale, or on a step the plan cannot hold.
  static FailureOr<MemoryPlanRecord> get(func::FuncOp fn);
};

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_MEMORYPLANRECORD_H
