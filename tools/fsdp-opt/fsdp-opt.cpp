//===- fsdp-opt.cpp - the FSDP planner's opt driver -----------------------===//
//
//   fsdp-opt IN.mlir --fsdp-pipeline="world-size=N" -o OUT.mlir
//
//===----------------------------------------------------------------------===//
#include "fsdp/InitAll.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::fsdp::registerAllDialects(registry);
  mlir::fsdp::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "fsdp-opt: plans Fully Sharded Data Parallel training steps\n",
                        registry));
}
