//===- FuzzCheckpointIndex.cpp - fuzz target: a checkpoint's index.json ---===//
//
// libFuzzer entry point for fsdp-run --load's index reader
// (checkCheckpointIndex, fsdp/tooling/Checkpoint.h). Any input must either
// parse or throw fsdp::Error.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/Checkpoint.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    (void)fsdp::tooling::checkCheckpointIndex(
        std::string(reinterpret_cast<const char *>(data), size),
        "/nonexistent/ck");
  } catch (const fsdp::Error &) {
  }
  return 0;
}
