//===- Schedule.h - scheduled fsdp IR to the JSON schedule ----------------===//
//
// The format is specified in runtime/docs/schedule-format.md, its version and
// op table in fsdp/ScheduleFormat.h (shared with the runtime's interpreter,
// which reads it).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TARGET_SCHEDULE_H
#define FSDP_TARGET_SCHEDULE_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::fsdp {

/// Writes the step function of `module` as a JSON schedule. Fails with a
/// diagnostic on the offending op (unsupported op, non-splat constant, ...).
LogicalResult translateToSchedule(ModuleOp module, llvm::raw_ostream &os);

/// Registers `--fsdp-to-schedule` with mlir-translate's registry.
void registerToScheduleTranslation();

} // namespace mlir::fsdp

#endif // FSDP_TARGET_SCHEDULE_H
