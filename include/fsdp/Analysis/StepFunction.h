//===- StepFunction.h - find the training step function of a module -------===//
#ifndef FSDP_ANALYSIS_STEPFUNCTION_H
#define FSDP_ANALYSIS_STEPFUNCTION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {

/// The step function of a module: the only func.func with a body, or the one
/// with a result marked nn.loss. Emits an error on the module if ambiguous.
FailureOr<func::FuncOp> getStepFunction(ModuleOp module);

/// Index of the step function's result marked nn.loss, or -1 if none.
int lossResultIndex(func::FuncOp fn);

/// The op that defines the loss (the end of forward), or null if the loss is
/// not computed in the function's block.
Operation *lossDefiningOp(func::FuncOp fn);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_STEPFUNCTION_H
