//===- Report.h - What fsdp-run reports at the end of a run ----*- C++ -*-===//
//
// The last line of a run (one JSON summary on rank 0: losses, timings,
// memory, communication, the per-op profile) and the --dump-params file.
// Times are seconds, sizes bytes; "max over ranks" unless said otherwise.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_REPORT_H
#define FSDP_TOOLING_REPORT_H

#include "fsdp/tooling/Options.h"

#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp::tooling {

/// This process's peak resident set (getrusage ru_maxrss, KiB on Linux), in
/// bytes.
int64_t peakRssBytes();

/// What the step loop measured.
struct StepLog {
  std::vector<double> losses; ///< per step, mean over ranks
  /// Per step: the learning rate the step used (its nn.lr_schedule output,
  /// else the optimizer's constant rate; empty without an optimizer) and the
  /// global gradient norm before clipping (empty unless the schedule
  /// returns it: max-grad-norm or report-grad-norm). Rank 0's values.
  std::vector<double> lrs, gradNorms;
  /// Per step, the dynamic loss scale the step used (empty without one),
  /// and the steps whose update was skipped (a non-finite gradient norm).
  std::vector<double> lossScales;
  std::vector<int64_t> skippedSteps;
  /// Per timed step (after --warmup), max over ranks: the step's wall time,
  /// kernel time and collective wait time, seconds.
  std::vector<double> stepTimes, computeTimes, commTimes;
  /// Per timed step, this rank's: the host's waits on pipeline transfers,
  /// and its idle time (those waits plus the step's end on the slowest rank
  /// less its own: Executor::pipelineWaitSeconds), seconds.
  std::vector<double> pipelineWaits, idleTimes;
  int64_t peak = 0;           ///< the plan's bookkeeping peak, bytes
  double profiledSeconds = 0; ///< this rank's wall time of the timed steps
};

/// Per-op seconds and calls per timed step, mean over the job's ranks (an op
/// a rank did not run, e.g. another pipeline stage's, counts zero there), plus
/// "(step set-up)": the time in no instruction. An empty object unless
/// `enabled`
/// (--profile). Collective over MPI_COMM_WORLD when enabled.
nlohmann::json gatherProfile(bool enabled, const StepLog &log,
                             int64_t worldSize);

/// Writes the final unpadded parameters (the f32 master where a unit has
/// one) and AdamW moments as JSON to `path` on rank 0, with the largest
/// difference between replicated copies (a warning if not 0). Collective
/// over MPI_COMM_WORLD; throws fsdp::Error if it cannot write.
void dumpParams(const std::string &path, const fsdp::rt::Executor &ex,
                int rank);

/// The run's figures beyond the schedule, the executor and the step log.
struct RunTotals {
  int64_t startStep = 0;     ///< the step before this run's first
  int64_t globalBatch = 0;   ///< samples per step
  int64_t globalTokens = 0;  ///< tokens per step; 0 without a tokens input
  fsdp_device_stats stats{}; ///< the device's counters after the last step
  /// Max over ranks: the plan's bookkeeping peak, the arena, the
  /// allocator's peak, its workspace and communication buffers, and the
  /// allocator's peak less its bytes in use when the steps began (bytes).
  long long most[6] = {};
  /// Max over ranks: the resident set after initialisation, and its peak.
  long long maxRss[2] = {};
  /// Pipeline parallelism: per stage, max over the stage's ranks of the
  /// plan's bookkeeping peak, the allocator's peak, its peak less its bytes
  /// in use when the steps began, and the stage's planned peak without and
  /// with scratch (bytes; kStageFigures per stage, stage-major). Empty
  /// without stages.
  static constexpr int kStageFigures = 5;
  std::vector<long long> byStage;
  nlohmann::json profile; ///< gatherProfile's, or an empty object
  /// Pipeline parallelism: per world rank, the median over timed steps of
  /// StepLog::idleTimes and pipelineWaits (empty for one stage).
  std::vector<double> rankIdle, rankPipelineWait;
  /// Bytes this rank sent per channel over the steps
  /// (Executor::channelBytesSent, the last step's counts less the first's).
  std::map<std::string, int64_t> channelBytes;
  /// On rank 0: every rank's channelBytes, indexed by world rank (empty
  /// on the other ranks).
  std::vector<std::map<std::string, int64_t>> channelBytesByRank;
};

/// The summary JSON fsdp-run prints as its last line on rank 0.
nlohmann::json summaryJson(const Options &opt,
                           const fsdp::schedule::Program &prog,
                           const fsdp::rt::Executor &ex, fsdp_device device,
                           const StepLog &log, const RunTotals &t);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_REPORT_H
