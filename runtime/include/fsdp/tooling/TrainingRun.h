//===- TrainingRun.h - One fsdp-run training run ----------------*- C++ -*-===//
//
// What fsdp-run does between MPI's start and end. Loads the schedule
// (world_size must be N; with --compiled, the step fsdp-compile built, whose
// descriptor carries the schedule: the Executor then runs its machine code
// instead of interpreting the instructions), creates the device, and
// initialises every rank's shards or full (replicated) buffers
// deterministically (the full parameters do not depend on N or the
// strategy), reads them from a Hugging Face safetensors checkpoint
// (SafeTensors.h) or loads a checkpoint (Checkpoint.h) into the executor's
// device-resident state. Feeds synthetic, CSV, byte-level text or uint16
// token data (Data.h), runs K optimizer steps (the state stays on the device;
// the host sees the data in, the loss out), prints "step s loss x" per step on
// rank 0 and, as the last line, one JSON summary (Report.h). The checks
// before step 1 are Preflight.h, the hang detector Watchdog.h.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_TRAININGRUN_H
#define FSDP_TOOLING_TRAININGRUN_H

#include "fsdp/tooling/Options.h"
#include "fsdp/tooling/Watchdog.h"

namespace fsdp::tooling {

/// Runs the training `opt` describes. Call on every rank of MPI_COMM_WORLD
/// between fsdp_init and fsdp_finalize. `watchdog` (started before MPI's
/// start) times each phase: the start-up, the state's initialisation, every
/// step and save, and the outputs at the end. Throws fsdp::Error on a failure
/// (fsdp::CollectiveError where every rank found the same one, e.g. ranks
/// started with different options), possibly on some ranks only.
void runTraining(const Options &opt, Watchdog &watchdog);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_TRAININGRUN_H
