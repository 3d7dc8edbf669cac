//===- FSDPToLLVM.cpp - the scheduled step to LLVM dialect runtime calls --===//
//
// --convert-fsdp-to-llvm (include/fsdp/Conversion/Passes.td). The step is
// written as the schedule document the runtime reads
// (lib/Target/ScheduleJSON.cpp) and planned by the schedule library
// (fsdp/schedule/StepPlan.h) exactly as the executor plans it in arena
// mode; PlanEmitter then writes the plan's actions as LLVM calls of the
// same entry points with the same arguments. So the compiled and the
// interpreted step are one plan with two back ends, and the conversion
// links the schedule library only (no MPI, no BLAS).
//
//===----------------------------------------------------------------------===//
#include "PlanEmitter.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Target/Schedule.h"
#include "fsdp/compiled.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_CONVERTFSDPTOLLVM
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp::conversion;

bool mlir::fsdp::hasLLVMLowering(const char *name) {
  schedule::OpKind kind;
  return schedule::lookupOp(name, kind) && schedule::hasLowering(kind);
}

namespace {

/// Every op must have a lowering: named at its own location.
LogicalResult checkOps(func::FuncOp fn, SmallVector<Location> &locs) {
  bool ok = true;
  for (Operation &op : fn.getBody().front().without_terminator()) {
    locs.push_back(op.getLoc());
    std::string name = op.getName().getStringRef().str();
    if (!mlir::fsdp::hasLLVMLowering(name.c_str())) {
      op.emitOpError() << "has no lowering to the runtime's C API "
                          "(--convert-fsdp-to-llvm)";
      ok = false;
    }
  }
  return success(ok);
}

/// The step's program, which fsdp-run must be able to bind.
LogicalResult checkProgram(func::FuncOp fn, const schedule::Program &prog) {
  // fsdp-run binds a compiled step's state by unit, as a JSON schedule's: a
  // whole unsharded parameter (the forward graph, or fsdp-autodiff alone)
  // would compile but never run.
  for (const schedule::IoDesc &io : prog.inputs())
    if (schedule::isStateRole(io.role) && !prog.findUnit(io.unit))
      return fn.emitError()
             << "the step is not a planned FSDP step: input '"
             << (io.fqn.empty() ? io.role : io.fqn)
             << "' is a whole parameter with no unit; plan it with fsdp-opt "
                "--fsdp-pipeline first";
  if (!prog.usesArena())
    return fn.emitError() << "is not memory-planned (an arena offset for "
                             "every buffer): run fsdp-pipeline or "
                             "fsdp-memory-plan first";
  return success();
}

} // namespace

LogicalResult mlir::fsdp::planCompiledStep(ModuleOp module,
                                           std::string &document,
                                           schedule::Program &prog,
                                           schedule::StepPlan &plan) {
  // A stage module also says how many stages there are; the job's does not
  // say which stage it is.
  if (module->hasAttr(kPipelineStagesAttr) &&
      !module->hasAttr(kPipelineStageAttr))
    return module.emitError()
           << "a pipeline-parallel module is planned per stage (its nested "
              "stage modules)";
  FailureOr<func::FuncOp> fn = mlir::fsdp::getStepFunction(module);
  if (failed(fn))
    return failure();
  SmallVector<Location> instLocs;
  if (failed(checkOps(*fn, instLocs)))
    return failure();
  document.clear();
  {
    llvm::raw_string_ostream os(document);
    if (failed(mlir::fsdp::translateToSchedule(module, os)))
      return failure();
  }
  std::string err;
  if (!schedule::Program::tryFromString(document, prog, err,
                                        /*expectedWorldSize=*/0, "the step"))
    return module.emitError() << err;
  if (failed(checkProgram(*fn, prog)))
    return failure();
  // The plan of a compiled step: arena mode, at its own world size.
  plan = schedule::StepPlan::build(prog, schedule::StepPlan::Options());
  if (!plan.error.empty()) {
    int64_t at = plan.errorInstruction;
    Location where = at >= 0 && at < static_cast<int64_t>(instLocs.size())
                         ? instLocs[at]
                         : module.getLoc();
    return emitError(where)
           << (at >= 0 ? prog.instructionName(at) + ": " + plan.failure
                       : plan.error);
  }
  return success();
}

FailureOr<SmallVector<ModuleOp>>
mlir::fsdp::pipelineStageModules(ModuleOp module) {
  SmallVector<ModuleOp> stages;
  auto p = module->getAttrOfType<IntegerAttr>(kPipelineStagesAttr);
  if (!p || module->hasAttr(kPipelineStageAttr))
    return stages;
  if (failed(checkEveryStagePlanned(module)))
    return failure();
  for (ModuleOp stage : module.getOps<ModuleOp>()) {
    auto s = stage->getAttrOfType<IntegerAttr>(kPipelineStageAttr);
    if (!s || s.getInt() != static_cast<int64_t>(stages.size()))
      return stage.emitError()
             << "expects pipeline stage " << stages.size()
             << " here (the nested modules of fsdp-pipeline with pp > 1, in "
                "stage order)";
    stages.push_back(stage);
  }
  if (static_cast<int64_t>(stages.size()) != p.getInt())
    return module.emitError() << "expects " << p.getInt()
                              << " nested stage modules (fsdp-pipeline with "
                                 "pp > 1), found "
                              << stages.size();
  return stages;
}

namespace {

struct ConvertFSDPToLLVMPass
    : public mlir::fsdp::impl::ConvertFSDPToLLVMBase<ConvertFSDPToLLVMPass> {
protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<SmallVector<ModuleOp>> stages =
        mlir::fsdp::pipelineStageModules(module);
    if (failed(stages))
      return signalPassFailure();
    // Pipeline parallelism: every stage's step in one object under its own
    // symbols, and the job's descriptor with the whole document
    // (fsdp/compiled.h), which a rank reads to find its stage as it reads
    // the JSON file.
    std::string whole;
    if (!stages->empty()) {
      llvm::raw_string_ostream os(whole);
      if (failed(mlir::fsdp::translateToSchedule(module, os)))
        return signalPassFailure();
    }
    // Each stage is planned and emitted before any old op goes (the stage
    // modules are old ops of this module).
    std::vector<std::string> docs(std::max<size_t>(1, stages->size()));
    std::vector<schedule::Program> progs(docs.size());
    std::vector<schedule::StepPlan> plans(docs.size());
    for (size_t s = 0; s < docs.size(); ++s)
      if (failed(mlir::fsdp::planCompiledStep(stages->empty() ? module
                                                              : (*stages)[s],
                                              docs[s], progs[s], plans[s])))
        return signalPassFailure();
    // The step replaces the module's contents.
    SmallVector<Operation *> old;
    for (Operation &op : module.getBody()->getOperations())
      old.push_back(&op);
    SmallVector<StringAttr> drop;
    for (NamedAttribute a : module->getDiscardableAttrs())
      if (!a.getName().getValue().starts_with("llvm."))
        drop.push_back(a.getName());
    for (StringAttr a : drop)
      module->removeDiscardableAttr(a);
    if (stages->empty()) {
      PlanEmitter(module, progs[0], plans[0]).emit(docs[0]);
    } else {
      int64_t p = static_cast<int64_t>(stages->size());
      for (size_t s = 0; s < docs.size(); ++s)
        PlanEmitter(module, progs[s], plans[s],
                    FSDP_STEP_STAGE_SUFFIX + std::to_string(s))
            .emit(docs[s]);
      emitDescriptorGlobals(
          module, "", whole,
          {progs[0].worldSize() * p, 0, 0, 0, 0, 0, 0, 0, 0, 0}, p,
          /*stage=*/-1);
    }
    for (Operation *op : llvm::reverse(old))
      op->erase();
  }
};

} // namespace
