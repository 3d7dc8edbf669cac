//===- FuzzSafeTensors.cpp - fuzz target: the safetensors header ----------===//
//
// libFuzzer entry point for fsdp-run --init-from's reader
// (fsdp/tooling/SafeTensors.h): the input is written to an anonymous in-memory
// file (memfd) and opened as a checkpoint, and every tensor it declares is
// read. Any input must either load or throw fsdp::Error.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/SafeTensors.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0)
      break;
    done += static_cast<size_t>(n);
  }
  try {
    auto a = fsdp::tooling::SafeTensorsArchive::open("/proc/self/fd/" +
                                                     std::to_string(fd));
    std::vector<double> v;
    for (const auto &[name, t] : a.tensors()) {
      int64_t n = t.numel < 4096 ? t.numel : 4096;
      v.resize(static_cast<size_t>(n));
      a.read(t, 0, n, v.data());
    }
  } catch (const fsdp::Error &) {
  }
  close(fd);
  return 0;
}
