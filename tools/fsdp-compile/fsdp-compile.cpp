//===- fsdp-compile.cpp - a scheduled step to a shared object -------------===//
//
//   fsdp-compile SCHEDULED.mlir -o STEP.so     # the compiled step
//   fsdp-compile SCHEDULED.mlir -c -o STEP.o   # its object file only
//   fsdp-compile SCHEDULED.mlir --emit-llvm -o STEP.ll
//   fsdp-compile SCHEDULED.mlir --emit-plan      # the step plan, as text
//
// Reads the output of `fsdp-opt --fsdp-pipeline=...` (scheduled and
// memory-planned), lowers it with --convert-fsdp-to-llvm
// (lib/Conversion/FSDPToLLVM.cpp), translates the LLVM dialect to LLVM IR in
// process (mlir::translateModuleToLLVMIR), emits position-independent object
// code for the host with LLVM's TargetMachine, and links STEP.so with the C
// compiler driver the build used (FSDP_LINKER). The result exports
// fsdp_step and fsdp_step_describe (runtime/include/fsdp/compiled.h) and
// references only the runtime's C API, which `fsdp-run --compiled STEP.so`
// provides. Errors are diagnostics with the input's locations; exit 1.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Conversion/Passes.h"
#include "fsdp/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <tuple>

using namespace mlir;

static llvm::cl::opt<std::string> inputFile(llvm::cl::Positional,
                                            llvm::cl::desc("SCHEDULED.mlir"),
                                            llvm::cl::init("-"));
static llvm::cl::opt<std::string>
    outputFile("o", llvm::cl::desc("output file (STEP.so, or STEP.o with -c)"),
               llvm::cl::value_desc("file"), llvm::cl::Required);
static llvm::cl::opt<bool>
    objectOnly("c", llvm::cl::desc("write the object file, do not link"));
static llvm::cl::opt<bool>
    emitLLVM("emit-llvm", llvm::cl::desc("write the LLVM IR (text) instead"));
static llvm::cl::opt<bool>
    emitPlan("emit-plan",
             llvm::cl::desc("print the step plan (every runtime call of a "
                            "step, with its arguments) instead"));
static llvm::cl::opt<unsigned> optLevel(
    "opt-level",
    llvm::cl::desc("LLVM code generation level 0-3 (default 0: the step is "
                   "straight-line calls; fast instruction selection keeps "
                   "compiling a large model's step quick)"),
    llvm::cl::init(0));
static llvm::cl::opt<bool>
    timing("time", llvm::cl::desc("print the seconds of each phase to stderr"));

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int fail(const llvm::Twine &msg) {
  llvm::errs() << "fsdp-compile: error: " << msg << "\n";
  return 1;
}

/// --emit-plan: the step plan the compiled step would run, as text (a
/// pipeline's: each stage's, after a "stage s of P" line).
int writePlan(ModuleOp module) {
  FailureOr<SmallVector<ModuleOp>> stages =
      mlir::fsdp::pipelineStageModules(module);
  if (failed(stages))
    return 1;
  SmallVector<ModuleOp> steps = *stages;
  if (steps.empty())
    steps.push_back(module);
  std::ostringstream text;
  for (size_t s = 0; s < steps.size(); ++s) {
    std::string doc;
    ::fsdp::schedule::Program prog;
    ::fsdp::schedule::StepPlan plan;
    if (failed(mlir::fsdp::planCompiledStep(steps[s], doc, prog, plan)))
      return 1;
    if (!stages->empty())
      text << "stage " << s << " of " << stages->size() << "\n";
    plan.print(text, prog);
  }
  std::error_code ec;
  llvm::ToolOutputFile out(outputFile, ec, llvm::sys::fs::OF_Text);
  if (ec)
    return fail("cannot write " + outputFile + ": " + ec.message());
  out.os() << text.str();
  out.keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  llvm::cl::ParseCommandLineOptions(
      argc, argv,
      "fsdp-compile: a scheduled fsdp step to a shared object that calls the "
      "runtime (fsdp-run --compiled)\n");
  auto t0 = Clock::now();
  if (emitPlan + emitLLVM + objectOnly > 1)
    return fail("--emit-plan, --emit-llvm and -c each choose the output: "
                "give one");
  if (optLevel > 3)
    return fail("--opt-level must be 0-3, got " +
                std::to_string(optLevel.getValue()));

  DialectRegistry registry;
  mlir::fsdp::registerAllDialects(registry);
  registry.insert<LLVM::LLVMDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A diagnostic names the op and its location; the whole module printed
  // after it (MLIR's default) would bury it.
  context.printOpOnDiagnostic(false);

  std::string err;
  auto file = openInputFile(inputFile, &err);
  if (!file)
    return fail(err);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  double tParse = since(t0);

  if (emitPlan)
    return writePlan(*module);

  auto t1 = Clock::now();
  PassManager pm(&context);
  pm.addPass(mlir::fsdp::createConvertFSDPToLLVM());
  if (failed(pm.run(*module)))
    return 1;
  double tConvert = since(t1);

  auto t2 = Clock::now();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "fsdp_step");
  if (!llvmModule)
    return fail("translating the LLVM dialect to LLVM IR failed");
  double tTranslate = since(t2);

  auto t3 = Clock::now();
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return fail("no LLVM target for " + triple.getTriple() + ": " + err);
  // A generic CPU: the code is calls and constants, and the shared object
  // then runs on any machine of the triple (the GPU hosts too).
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", options, llvm::Reloc::PIC_, std::nullopt,
      static_cast<llvm::CodeGenOptLevel>(optLevel.getValue())));
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  if (emitLLVM) {
    std::error_code ec;
    llvm::ToolOutputFile out(outputFile, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return fail("cannot write " + outputFile + ": " + ec.message());
    llvmModule->print(out.os(), nullptr);
    out.keep();
    return 0;
  }

  // The object: the output itself with -c, else a temporary beside it.
  std::string object = outputFile;
  if (!objectOnly)
    object = outputFile + ".o";
  {
    std::error_code ec;
    llvm::ToolOutputFile out(object, ec, llvm::sys::fs::OF_None);
    if (ec)
      return fail("cannot write " + object + ": " + ec.message());
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, out.os(), nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return fail("the target cannot emit an object file");
    codegen.run(*llvmModule);
    out.keep();
  }
  double tCodegen = since(t3);

  double tLink = 0;
  if (!objectOnly) {
    auto t4 = Clock::now();
    std::vector<std::string> args{FSDP_LINKER};
    for (llvm::StringRef f : llvm::split(llvm::StringRef(FSDP_LINK_FLAGS), ' '))
      if (!f.empty())
        args.push_back(f.str());
    args.insert(args.end(), {"-o", outputFile, object});
    std::vector<llvm::StringRef> argRefs(args.begin(), args.end());
    std::string linkErr;
    int rc = llvm::sys::ExecuteAndWait(FSDP_LINKER, argRefs, std::nullopt, {},
                                       0, 0, &linkErr);
    // Best effort: the link's result is what counts; a leftover temporary
    // object beside the output is harmless.
    std::ignore = llvm::sys::fs::remove(object);
    if (rc != 0)
      return fail(llvm::Twine("linking ") + outputFile + " with " +
                  FSDP_LINKER + " failed" +
                  (linkErr.empty() ? "" : ": " + linkErr));
    tLink = since(t4);
  }
  if (timing)
    llvm::errs() << llvm::format("fsdp-compile: parse %.3f s, convert %.3f s, "
                                 "translate %.3f s, codegen %.3f s, link "
                                 "%.3f s, total %.3f s\n",
                                 tParse, tConvert, tTranslate, tCodegen, tLink,
                                 since(t0));
  return 0;
}
