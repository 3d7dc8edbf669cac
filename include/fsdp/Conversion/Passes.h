//===- Passes.h - conversions out of the fsdp/nn dialects -----------------===//
//
// --convert-fsdp-to-llvm (Passes.td): the scheduled step to LLVM dialect
// calls of the runtime's C API (runtime/include/fsdp/compiled.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CONVERSION_PASSES_H
#define FSDP_CONVERSION_PASSES_H

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Conversion/Passes.h.inc"

/// Whether the conversion has a lowering for op `name` (an op of the
/// schedule format, ScheduleFormat.h's kOps, with an entry in the table).
bool hasLLVMLowering(const char *name);

} // namespace mlir::fsdp

#endif // FSDP_CONVERSION_PASSES_H
