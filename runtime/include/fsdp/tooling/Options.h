//===- Options.h - fsdp-run's command line ---------------------*- C++ -*-===//
//
// What fsdp-run was asked to do; parseArgs prints the usage and exits 2 on a
// bad argument (before MPI starts), or prints it and exits 0 for --help.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_OPTIONS_H
#define FSDP_TOOLING_OPTIONS_H

#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <cstdint>
#include <string>

namespace fsdp::tooling {

struct Options {
  std::string schedule;
  std::string compiled; // --compiled STEP.so (then no schedule)
  int64_t steps = 1;
  int64_t totalSteps = 0; // --total-steps: 0 = the checkpoint's or the last
  uint64_t seed = 0;
  /// --init-threads: host threads of the parameter init on the cpu
  /// device (0: std::thread::hardware_concurrency).
  int initThreads = 0;
  std::string dumpParams;
  std::string data;
  std::string dataOrder; // empty: random
  std::string initFrom, exportPath;
  std::string save, load;
  int64_t saveEvery = 0, keep = 0; // 0: save at the end only; keep all
  double timeout = 600;            // --timeout: the watchdog's seconds
  int progress = FSDP_PROGRESS_TEST;
  double intervalMin = 0, intervalMax = 0; // 0: the runtime's defaults
  int64_t warmup = 0;
  bool profile = false;
  /// --on-nonfinite: stop at the first non-finite loss or gradient norm
  /// (default), or skip such steps (GradScaler's behaviour).
  bool skipNonfinite = false;
  /// The dynamic loss scale (a schedule with a loss_scale input): its first
  /// value and the clean steps after which it doubles
  /// (torch.amp.GradScaler's init_scale and growth_interval).
  double lossScaleInit = 65536;
  int64_t lossScaleGrowthInterval = 2000;
  std::string device = "cpu";
  std::string collectives = "auto";
  fsdp::rt::AllocMode alloc = fsdp::rt::AllocMode::Arena;
};

/// The options of the command line; exits on a bad one (status 2, with the
/// usage on rank 0) or after --help (status 0).
Options parseArgs(int argc, char **argv);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_OPTIONS_H
