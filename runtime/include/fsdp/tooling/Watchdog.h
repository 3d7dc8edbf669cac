//===- Watchdog.h - Stops fsdp-run when a phase hangs ----------*- C++ -*-===//
#ifndef FSDP_TOOLING_WATCHDOG_H
#define FSDP_TOOLING_WATCHDOG_H

#include "fsdp/Executor.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace fsdp::tooling {

/// Stops the job when a phase of the run (its start-up, the state's
/// initialisation, a step, a save, the outputs and the summary at its end)
/// runs longer than --timeout: a rank that stopped responding (SIGSTOP, a
/// collective that never completes) would otherwise hang every other rank
/// forever, in MPI's start or the checks before step 1 as well as in a step.
/// The thread names the phase and, in a step, the instruction the Executor
/// is in, writes the message and exits the process non-zero, which makes
/// mpirun stop every rank (the main thread may be blocked inside MPI, so
/// MPI_Abort is not called).
class Watchdog {
public:
  /// A phase may last `timeout` seconds. Nothing is timed before begin().
  explicit Watchdog(double timeout);
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;
  /// The rank its message names; before MPI's start, Open MPI's
  /// OMPI_COMM_WORLD_RANK (else none).
  void setRank(int rank);
  /// The executor whose instruction and device a message names and aborts
  /// (nullptr: none; set it back to nullptr before the executor goes).
  void watch(const fsdp::rt::Executor *ex);
  /// Starts timing `what` ("step 5", "the save of step 5"), ending the
  /// phase before it.
  void begin(std::string what);
  void end();

private:
  void loop();
  /// "; it is in ..." for the executor's instruction and collective.
  std::string whereInStep() const;

  const double timeout;
  int rank = -1;
  const fsdp::rt::Executor *ex = nullptr;
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
