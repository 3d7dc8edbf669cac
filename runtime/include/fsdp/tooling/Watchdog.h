//===- Watchdog.h - Stops fsdp-run when a step hangs -----------*- C++ -*-===//
#ifndef FSDP_TOOLING_WATCHDOG_H
#define FSDP_TOOLING_WATCHDOG_H

#include "fsdp/Executor.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace fsdp::tooling {

/// Stops the job when a step (or a save) runs longer than --timeout: a
/// rank that stopped responding (SIGSTOP, a collective that never
/// completes) would otherwise hang every other rank forever. The thread
/// names the step and the instruction the Executor is in, writes the message
/// and exits the process non-zero, which makes mpirun stop every rank (the
/// main thread may be blocked inside MPI, so MPI_Abort is not called).
class Watchdog {
public:
  /// Watches `ex` on rank `rank`; a phase may last `timeout` seconds.
  Watchdog(double timeout, const fsdp::rt::Executor &ex, int rank);
  ~Watchdog();
  /// Starts timing `what` ("step 5", "the save of step 5").
  void begin(std::string what);
  void end();

private:
  void loop();

  const double timeout;
  const fsdp::rt::Executor &ex;
  const int rank;
  std::mutex m;
  std::condition_variable cv;
  bool stopping = false, active = false;
  std::string phase;
  double start = 0;
  std::thread thread; // last: started once the members above exist
};

/// How the watchdog names pipeline transfer `t` (an fsdp.send or fsdp.recv
/// instruction of `p`): "stage s is waiting for the gradient of
/// micro-batch k from stage t (<where t is>): stage t is stopped, dead or
/// running something else", or "... for stage t to receive the activation
/// of micro-batch k ...". The direction and micro-batch come from its tag,
/// (boundary value · m + micro-batch) · 2 + (1 for a gradient), times v
/// plus the sending chunk / P under interleaved 1F1B with v chunks
/// (runtime/docs/schedule-format.md, "Pipeline parallelism").
std::string describePipelineTransfer(const fsdp::schedule::Program &p,
                                     int64_t t);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_WATCHDOG_H
