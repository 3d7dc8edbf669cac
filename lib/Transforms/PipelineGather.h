//===- PipelineGather.h - a bound on gathering a stage once per step ------===//
//
// fsdp-pipeline's pp-gather=auto plans a stage with its units gathered once
// per step, and per micro-batch where that does not fit the memory budget
// (docs/pipeline-parallel.md, "Memory"). Planning a way costs as much as the
// stage's plan; oncePerStepLowerBound lets planStage skip the once-per-step
// plan where a proven lower bound of its peak already decides (over the
// budget, and per micro-batch fitting or below the bound).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_PIPELINEGATHER_H
#define FSDP_LIB_TRANSFORMS_PIPELINEGATHER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>

namespace mlir::fsdp {

/// What oncePerStepLowerBound needs of the pipeline's options.
struct OncePerStepBoundOptions {
  /// Bytes of a floating-point element in param-dtype (2 for bf16 and f16,
  /// 4 for f32); 0: the step's own element type (param-dtype unset).
  int64_t paramBytes = 0;
  /// Gradients accumulated whole over the micro-batches and reduced once
  /// (pp-gather's once-per-step default; accumulate=sharded reduces each).
  bool unshardedAccumulation = true;
  /// Data-parallel ranks of the stage (world-size / (pp · tp)): fsdp-shard
  /// splits an activation's batch over them.
  int64_t dataParallel = 1;
};

/// A lower bound (bytes per rank) of the planned peak of the pipeline stage
/// step `fn` with its units gathered once per step, for a strategy that
/// gathers (full-shard, hybrid-shard, shard-grad-op), from `fn` planned up
/// to fsdp-shard (its micro-batches, optimizer, units and activation
/// checkpointing; no memory plan). At the start T of the backward of the
/// micro-batch whose backward runs last, all of these are live at once, in
/// buffers of their own:
/// - each unit whose parameters that backward reads is gathered (once per
///   step: from its first use in the first micro-batch's forward to its last
///   use; the parameters read, in param-dtype);
/// - that micro-batch's forward values its backward reads (produced before
///   T, read after it; not those only a dead op reads, which canonicalize
///   erases, nor one computed from parameters alone, which may be a view of
///   a gathered unit), a data-parallel rank's share of each;
/// - with unsharded accumulation, every trainable parameter's whole
///   gradient, summed since an earlier micro-batch's backward and reduced
///   after T (in param-dtype; kept in f32 it only adds).
/// The training state, other activations and communication buffers only
/// add. 0 when no micro-batch's backward is found, or another micro-batch's
/// backward runs after T (an interleaved order).
/// Checked once against the planned once-per-step peaks of 432 stages (tiny
/// GPT-2 and Llama at f64, f32 and bf16 under every AC mode, 1F1B and
/// GPipe, either accumulation; Llama-3.1-405B at TP 1–8 and PP 2–16):
/// 0.10–0.94 of the peak (bench/README.md, "The advisor's bound mode by
/// mode"); test/lit/Integration/pipeline-gather.test pins one stage it
/// decides.
int64_t oncePerStepLowerBound(func::FuncOp fn,
                              const OncePerStepBoundOptions &o);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_PIPELINEGATHER_H
