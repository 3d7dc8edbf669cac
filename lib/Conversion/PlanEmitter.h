//===- PlanEmitter.h - a step plan as LLVM dialect calls --------*- C++ -*-===//
//
// Private to lib/Conversion. PlanEmitter turns a step plan
// (fsdp/schedule/StepPlan.h, arena mode) into the body of fsdp_step and the
// descriptor of fsdp/compiled.h: each action becomes what the executor does
// for it at run time (ExecutorStep.cpp), with every address the arena's
// base plus a constant, every call the plan's entry point with the plan's
// arguments, and a non-zero status returned from the step.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_CONVERSION_PLANEMITTER_H
#define FSDP_LIB_CONVERSION_PLANEMITTER_H

#include "fsdp/schedule/StepPlan.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <array>
#include <map>
#include <string>
#include <vector>

namespace mlir::fsdp::conversion {

namespace schedule = ::fsdp::schedule;

class PlanEmitter {
public:
  /// `suffix` is appended to every symbol the emitter defines (a pipeline
  /// stage's "_stage<s>", fsdp/compiled.h); "" for a one-program step.
  PlanEmitter(ModuleOp module, const schedule::Program &prog,
              const schedule::StepPlan &plan, std::string suffix = "");

  /// Appends fsdp_step, fsdp_step_describe (each + suffix) and their globals
  /// to the module; `document` is the step's schedule (JSON) the
  /// descriptor carries.
  void emit(const std::string &document);

private:
  void emitEntry();
  void emitAction(const schedule::Action &a);
  void emitCall(const schedule::Call &c);
  void emitDescriptor(const std::string &document);

  Value arg(const schedule::Arg &a);
  Value address(const schedule::Arg &a);
  Value channel(schedule::Group g);
  /// (rank(g) / divisor) · scale, an i64.
  Value rankTimes(schedule::Group g, int64_t scale, int64_t divisor = 1);
  Value slotAddress(int32_t slot, int64_t bytes);
  Value eventSlot(int64_t slot);
  Value int64Array(const std::vector<int64_t> &values);
  Value pointerArray(const std::vector<schedule::Arg> &list);
  /// Calls `fn` (declared from the arguments' types on first use).
  Value callValue(StringRef fn, ArrayRef<Value> args, Type result = {});
  /// A non-zero status returns it from the step.
  void checkRc(Value rc);
  void setInstruction(int64_t i);
  Value field(Value base, int64_t byteOffset, Type t);
  Value offset(Value p, Value bytes);
  Value offset(Value p, int64_t bytes);
  Value i64(int64_t v);
  Value i32(int64_t v);
  Value f64(double v);
  Value null();

  ModuleOp module;
  const schedule::Program &prog;
  const schedule::StepPlan &plan;
  std::string suffix;
  OpBuilder b;
  Location loc;
  Type ptrT, i32T, i64T, f64T;
  LLVM::LLVMFuncOp stepFn;
  Block *errBlock = nullptr;
  Value ctxV, inputsV, outputsV, streamV, arenaV, worldV, shardV, replicateV,
      tensorV, pipelineV, eventsV, progressTestV, doneV, scratchV;
  llvm::StringMap<LLVM::LLVMFuncOp> decls;
  std::map<std::vector<int64_t>, LLVM::GlobalOp> arrays;
  int64_t scratchSlots = 1, scratchUsed = 0;
};

/// Appends a descriptor (fsdp_step_descriptor<suffix>, its document and
/// fsdp_step_describe<suffix>) to `module`: `sizes` are its ten int64 fields
/// from world_size to peak_bytes in compiled.h's order; `stages` and `stage`
/// its pipeline_stages and pipeline_stage.
void emitDescriptorGlobals(ModuleOp module, const std::string &suffix,
                           const std::string &document,
                           const std::array<int64_t, 10> &sizes, int64_t stages,
                           int64_t stage);

} // namespace mlir::fsdp::conversion

#endif // FSDP_LIB_CONVERSION_PLANEMITTER_H
