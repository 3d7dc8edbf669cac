//===- FSDPToLLVM.cpp - the scheduled step to LLVM dialect runtime calls --===//
//
// --convert-fsdp-to-llvm (include/fsdp/Conversion/Passes.td). The step is
// read as the runtime reads it: translated to its JSON schedule
// (lib/Target/ScheduleJSON.cpp) and parsed by fsdp::rt::Program, so buffer
// ids, view roots, arena offsets and attribute defaults are the
// interpreter's own. StepEmitter then walks the instructions doing what
// fsdp::rt::Executor's Frame does at run time -- which buffers are live
// where, which collectives are in flight, when each is waited on, which
// buffer is zero-filled first -- but statically, emitting the runtime call
// the interpreter would make at each point (the decisions depend on the
// schedule alone, never on data). Every pointer is the arena base plus a
// constant. The kernels are the table kLowerings (KernelLowerings.cpp): one
// entry per op of the schedule format, each the same call with the same
// arguments as the Executor's case for it (runtime/lib/Executor.cpp,
// Frame::execute).
//
//===----------------------------------------------------------------------===//
#include "StepEmitter.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Target/Schedule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_CONVERTFSDPTOLLVM
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp::conversion;

namespace {

struct ConvertFSDPToLLVMPass
    : public mlir::fsdp::impl::ConvertFSDPToLLVMBase<ConvertFSDPToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> fn = mlir::fsdp::getStepFunction(module);
    if (failed(fn))
      return signalPassFailure();
    // Every op must have a lowering: named at its own location.
    SmallVector<Location> instLocs;
    bool ok = true;
    for (Operation &op : fn->getBody().front().without_terminator()) {
      instLocs.push_back(op.getLoc());
      std::string name = op.getName().getStringRef().str();
      if (!mlir::fsdp::hasLLVMLowering(name.c_str())) {
        op.emitOpError() << "has no lowering to the runtime's C API "
                            "(--convert-fsdp-to-llvm)";
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();
    std::string doc;
    {
      llvm::raw_string_ostream os(doc);
      if (failed(mlir::fsdp::translateToSchedule(module, os)))
        return signalPassFailure();
    }
    rt::Program prog;
    std::string err;
    if (!rt::Program::tryFromString(doc, prog, err, /*checkWorldSize=*/false,
                                    "the step")) {
      module.emitError() << err;
      return signalPassFailure();
    }
    // fsdp-run binds a compiled step's state by unit, as a JSON schedule's:
    // a whole unsharded parameter (the forward graph, or fsdp-autodiff
    // alone) would compile but never run.
    for (const rt::IoDesc &io : prog.inputs())
      if (rt::isStateRole(io.role) && !prog.findUnit(io.unit)) {
        fn->emitError() << "the step is not a planned FSDP step: input '"
                        << (io.fqn.empty() ? io.role : io.fqn)
                        << "' is a whole parameter with no unit; plan it "
                           "with fsdp-opt --fsdp-pipeline first";
        return signalPassFailure();
      }
    if (!prog.usesArena()) {
      fn->emitError() << "is not memory-planned (an arena offset for every "
                         "buffer): run fsdp-pipeline or fsdp-memory-plan "
                         "first";
      return signalPassFailure();
    }
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
    StepEmitter emitter(module, prog, instLocs);
    emitter.json = std::move(doc);
    if (failed(emitter.emit()))
      return signalPassFailure();
    for (Operation *op : llvm::reverse(old))
      op->erase();
  }
};

} // namespace
