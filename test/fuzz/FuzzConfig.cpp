//===- FuzzConfig.cpp - fuzz target: the Hugging Face config importer -----===//
//
// libFuzzer entry point for fsdp-import (fsdp/Import/Import.h): the input is
// written to an in-memory file (memfd) and imported as a config.json with a
// small --seq/--batch (so that a valid config builds its graph quickly).
// Any input must either import or set `error`; a crash, a sanitizer report
// or a hang is a bug. Built with clang 22 against MLIR 22 by
// tools/scripts/fuzz.sh; replayed in ctest by ReplayMain.cpp.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Import/Import.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("config.json", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  if (write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  static mlir::MLIRContext *ctx = [] {
    auto *c = new mlir::MLIRContext();
    c->loadDialect<mlir::nn::NNDialect, mlir::func::FuncDialect>();
    return c;
  }();
  fsdp_import::Overrides ov;
  ov.seq = 8;
  ov.batch = 1;
  ov.layers = 1; // keep a valid import small
  std::string error;
  auto module = fsdp_import::importConfig(
      ctx, "/proc/self/fd/" + std::to_string(fd), ov, error);
  if (module)
    (void)fsdp_import::countParams(*module);
  close(fd);
  return 0;
}
