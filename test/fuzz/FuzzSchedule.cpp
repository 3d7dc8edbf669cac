//===- FuzzSchedule.cpp - fuzz target: the JSON schedule loader -----------===//
//
// libFuzzer entry point (tools/scripts/fuzz.sh builds it with clang and
// -fsanitize=fuzzer,address,undefined; ReplayMain.cpp replays the corpus
// in ctest). Any input must either load or throw fsdp::Error: another
// exception, a crash, a sanitizer report or a hang is a bug.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Executor.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    fsdp::schedule::Program p = fsdp::schedule::Program::fromString(
        std::string(reinterpret_cast<const char *>(data), size),
        /*expectedWorldSize=*/0, "fuzz.json");
    (void)p.collectiveFingerprint();
  } catch (const fsdp::Error &) {
  }
  return 0;
}
