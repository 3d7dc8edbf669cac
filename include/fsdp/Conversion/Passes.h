//===- Passes.h - conversions out of the fsdp/nn dialects -----------------===//
//
// --convert-fsdp-to-llvm (Passes.td): the scheduled step to LLVM dialect
// calls of the runtime's C API (runtime/include/fsdp/compiled.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CONVERSION_PASSES_H
#define FSDP_CONVERSION_PASSES_H

#include "fsdp/schedule/StepPlan.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Conversion/Passes.h.inc"

/// Whether the conversion has a lowering for op `name`: an op of the
/// schedule format (fsdp/schedule/Format.h's kOps) that the schedule library
/// plans (runtime/schedule/ops).
bool hasLLVMLowering(const char *name);

/// The step of `module` as a compiled step runs it: its schedule `document`
/// (the JSON of fsdp-translate), the parsed `prog` and its step `plan` in
/// arena mode. Fails with diagnostics at the ops for an op without a
/// lowering, a step that is not planned or memory-planned, or a plan error
/// (a buffer used when it is not live, ...).
/// A pipeline-parallel module (pp > 1) is planned per stage: pass each of
/// pipelineStageModules' modules; the whole module is refused here.
LogicalResult planCompiledStep(ModuleOp module, std::string &document,
                               ::fsdp::schedule::Program &prog,
                               ::fsdp::schedule::StepPlan &plan);

/// The stage modules of a pipeline-parallel module in stage order (an empty
/// list for a one-program module); fails at the module unless there is
/// one nested module per stage, stage s the s-th.
FailureOr<SmallVector<ModuleOp>> pipelineStageModules(ModuleOp module);

} // namespace mlir::fsdp

#endif // FSDP_CONVERSION_PASSES_H
