//===- StepFunction.h - find the training step function of a module -------===//
#ifndef FSDP_ANALYSIS_STEPFUNCTION_H
#define FSDP_ANALYSIS_STEPFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::fsdp {

/// The step function of a module: the only func.func with a body, or the one
/// with a result marked nn.loss. Emits an error on the module if ambiguous.
FailureOr<func::FuncOp> getStepFunction(ModuleOp module);

/// Index of the step function's result marked nn.loss, or -1 if none.
int lossResultIndex(func::FuncOp fn);

/// The op that defines the loss (the end of forward), or null if the loss is
/// not computed in the function's block.
Operation *lossDefiningOp(func::FuncOp fn);

/// The phases of a step: each micro-batch's forward (up to its loss op,
/// nn.micro_batch_loss, or the step's loss without micro-batches) and its
/// backward. Ops keep their micro-batch in nn.micro_batch (-1: none).
class StepPhases {
public:
  explicit StepPhases(func::FuncOp fn);
  /// (micro-batch, backward) of `op`; an op of no micro-batch is bounded by
  /// the step's loss op.
  std::pair<int64_t, bool> phaseOf(Operation *op) const;

private:
  Operation *lossOp;
  llvm::DenseMap<int64_t, Operation *> lossOf;
};

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_STEPFUNCTION_H
