//===- FuzzCluster.cpp - fuzz target: the cluster spec reader -------------===//
//
// libFuzzer entry point for ClusterSpec::load (fsdp/Analysis/Simulator.h),
// the --cluster / fsdp-sweep --cluster JSON: written to an in-memory file
// and loaded. Any input must either load or set `error`.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Simulator.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("cluster.json", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  if (write(fd, data, size) == static_cast<ssize_t>(size)) {
    std::string error;
    (void)mlir::fsdp::ClusterSpec::load("/proc/self/fd/" + std::to_string(fd),
                                        error);
  }
  close(fd);
  return 0;
}
