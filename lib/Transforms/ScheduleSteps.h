//===- ScheduleSteps.h - the steps fsdp-schedule composes -----------------===//
//
// The mechanisms of fsdp-schedule (ScheduleSteps.cpp): collectives made
// async, reduction waits placed, bucketing, and the placements of all-gather
// starts (one ahead as FSDP1/FSDP2, or the list scheduler). Schedule.cpp
// composes them into the prefetch modes and lets the cost model choose.
// Private to lib/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_SCHEDULESTEPS_H
#define FSDP_LIB_TRANSFORMS_SCHEDULESTEPS_H

#include "fsdp/Transforms/Passes.h"

namespace mlir::fsdp {

/// A unit all-gather (feeds parameter views) with its shard cast and phase.
struct Gather {
  AllGatherOp start;
  /// Ops that move with the start, in order: the shards' casts to
  /// param-dtype and, for a bucket, the pack.
  SmallVector<Operation *> prelude;
  WaitOp wait;
  std::pair<int64_t, bool> phase; // (micro-batch, backward)
  /// The frees of the previous gathered copy of any of its units: the start
  /// must follow them (a unit is never gathered while still gathered).
  SmallVector<Operation *> previousFrees;
};

/// Step 1: every collective whose result is used becomes async (its result
/// an !fsdp.future), with an fsdp.wait right after it that all its uses read.
void makeAsync(Block &block);

/// Step 2: sink each reduction's wait (and the ops reading the reduced
/// gradient right away: casts, a chained all-reduce start) to the next
/// reduction of the same kind and group, or to the first other use; with
/// `toFirstUse`, the reduce-scatter of a unit reduced once per step (its
/// gradients accumulated whole) to the first use alone (every one in flight
/// until the optimizer reads it).
void placeReductionWaits(Block &block, bool toFirstUse = false);

/// Whether `fn` is a pipeline stage's step whose units are gathered once
/// per step (fsdp-pipeline's pp-gather decision, fsdp.pp_gather).
bool gathersOncePerStage(func::FuncOp fn);

/// Step 2b: each gradient accumulation (nn.add marked nn.accumulate) right
/// after the later of its operands.
void placeAccumulations(Block &block);

/// The async parameter all-gathers of `fn`, in program order.
SmallVector<Gather> unitGathers(func::FuncOp fn);

/// Consecutive unit all-gathers of one phase (and consecutive
/// reduce-scatters) of at most `bucketBytes` together become one collective
/// of a packed buffer.
void bucketGathers(func::FuncOp fn, int64_t bucketBytes);
void bucketReductions(func::FuncOp fn, int64_t bucketBytes);
/// ZeRO-1's all-gathers of the updated shards, bucketed the same way.
void bucketUpdateGathers(func::FuncOp fn, int64_t bucketBytes);

/// fsdp1 / fsdp2: within each phase, the next unit's gather is issued right
/// after the current unit's wait; fsdp1 in backward only.
void prefetchOneAhead(SmallVector<Gather> &gathers, bool backwardOnly);

/// A pipeline stage's units gathered once per step: chunks 0 and 1 gathered
/// at the step start, chunk c >= 2 before chunk c - 1's first op (the
/// pipeline schedule's parameter sync, Megatron-LM's interleaved schedule).
void pipelineParamSync(func::FuncOp fn, SmallVector<Gather> &gathers);

/// auto's list scheduler: each gather, in order, as early as `maxInFlight`
/// un-waited gathers and the memory `budget` allow.
LogicalResult listSchedule(func::FuncOp fn, SmallVector<Gather> &gathers,
                           int64_t maxInFlight, int64_t budget);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_SCHEDULESTEPS_H
