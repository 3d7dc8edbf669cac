//===- fsdp-opt.cpp - the FSDP planner's opt driver -----------------------===//
//
//   fsdp-opt IN.mlir --fsdp-pipeline="world-size=N" -o OUT.mlir
//
//===----------------------------------------------------------------------===//
#include "fsdp/Conversion/Passes.h"
#include "fsdp/InitAll.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

#include <vector>

int main(int argc, char **argv) {
  // Diagnostics name the source location; dumping the whole module after a
  // pass error only buries the message (a later flag can turn it back on).
  std::vector<char *> args(argv, argv + argc);
  static char noOpDump[] = "--mlir-print-op-on-diagnostic=false";
  args.insert(args.begin() + 1, noOpDump);
  argc = static_cast<int>(args.size());
  argv = args.data();
  mlir::DialectRegistry registry;
  mlir::fsdp::registerAllDialects(registry);
  mlir::fsdp::registerAllPasses();
  // --convert-fsdp-to-llvm (fsdp-compile runs it in-process).
  registry.insert<mlir::LLVM::LLVMDialect>();
  mlir::fsdp::registerFSDPConversionPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv,
      "fsdp-opt: plans Fully Sharded Data Parallel training steps\n",
      registry));
}
