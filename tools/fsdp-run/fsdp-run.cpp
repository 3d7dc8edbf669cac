//===- fsdp-run.cpp - Runs an fsdp schedule for K training steps ----------===//
//
//   mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]
//          [--device cpu|cuda|cuda:N] [--collectives auto|mpi|nccl]
//          [--alloc arena|per-buffer]
//          [--data FILE] [--data-order random|sequential]
//          [--init-from SAFETENSORS] [--export PATH.safetensors]
//          [--dump-params PATH] [--save DIR [--save-every K [--keep N]]]
//          [--load DIR]
//          [--progress none|test|thread] [--progress-interval MIN[:MAX]]
//          [--warmup W] [--profile] [--timeout S]
//          [--on-nonfinite stop|skip] [--loss-scale-init S]
//          [--loss-scale-growth-interval K]
//   mpirun -np N fsdp-run --compiled STEP.so [the same options]
//
// The main: the command line (fsdp/tooling/Options.h), MPI's start and end,
// and the exit status. The run itself is the runtime's tooling library
// (fsdp/tooling/TrainingRun.h). Any error on any rank aborts all ranks
// (MPI_Abort) with a message, exit status 1; bad arguments print the usage
// and exit 2. --progress picks how MPI collectives progress while kernels
// run (runtime.h, fsdp_progress; results are bit-identical across modes);
// --profile adds per-op seconds per step (mean over ranks) to the summary.
//
//===----------------------------------------------------------------------===//
#include "fsdp/runtime.h"
#include "fsdp/schedule/Error.h"
#include "fsdp/tooling/Options.h"
#include "fsdp/tooling/TrainingRun.h"

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

int main(int argc, char **argv) {
  fsdp::tooling::Options opt = fsdp::tooling::parseArgs(argc, argv);
  if (fsdp_set_progress(static_cast<fsdp_progress>(opt.progress)) != FSDP_OK ||
      (opt.intervalMin > 0 &&
       fsdp_set_progress_interval(opt.intervalMin, opt.intervalMax) !=
           FSDP_OK)) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 2;
  }
  // Timed from before MPI's start: a rank stopped there, or in the checks
  // before step 1, would otherwise hang every other rank in a collective.
  fsdp::tooling::Watchdog watchdog(opt.timeout);
  watchdog.begin("the start-up (MPI's start)");
  if (fsdp_init(&argc, &argv) != FSDP_OK) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 1;
  }
  watchdog.setRank(fsdp_rank());
  try {
    fsdp::tooling::runTraining(opt, watchdog);
  } catch (const fsdp::CollectiveError &e) {
    // Every rank found it; rank 0 reports, the others give its abort time
    // to arrive (then abort themselves, should rank 0 be gone).
    watchdog.end();
    if (fsdp_rank() != 0)
      std::this_thread::sleep_for(std::chrono::seconds(10));
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  } catch (const std::exception &e) {
    watchdog.end();
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  }
  watchdog.begin("the end of the run (MPI's end)");
  fsdp_finalize();
  watchdog.end();
  return 0;
}
