//===- fsdp-translate.cpp - scheduled fsdp IR to other formats ------------===//
//
//   fsdp-translate OUT.mlir --fsdp-to-schedule -o schedule.json
//
//===----------------------------------------------------------------------===//
#include "fsdp/Target/Schedule.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"

int main(int argc, char **argv) {
  mlir::fsdp::registerToScheduleTranslation();
  return mlir::failed(mlir::mlirTranslateMain(argc, argv, "fsdp-translate"))
             ? 1
             : 0;
}
