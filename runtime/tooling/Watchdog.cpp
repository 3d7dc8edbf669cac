//===- Watchdog.cpp - Stops fsdp-run when a phase hangs -------------------===//
#include "fsdp/tooling/Watchdog.h"
#include "fsdp/schedule/PipelineTags.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

using fsdp::rt::Executor;
using fsdp::schedule::Program;

namespace fsdp::tooling {

namespace {

/// The pipeline transfer (fsdp.send / fsdp.recv) a stalled rank waits on:
/// `awaited` when it is one, else the start of the future that the
/// fsdp.wait at `inst` waits for (a compiled step records no awaited
/// instruction); -1 if neither.
int64_t awaitedTransfer(const Program &p, int64_t inst, int64_t awaited) {
  const auto &is = p.instructions();
  auto transfer = [&](int64_t i) {
    return i >= 0 && static_cast<size_t>(i) < is.size() &&
           (is[static_cast<size_t>(i)].op == "fsdp.send" ||
            is[static_cast<size_t>(i)].op == "fsdp.recv");
  };
  if (transfer(awaited))
    return awaited;
  if (inst < 0 || static_cast<size_t>(inst) >= is.size() ||
      is[static_cast<size_t>(inst)].op != "fsdp.wait" ||
      is[static_cast<size_t>(inst)].operands.empty())
    return -1;
  int64_t future = is[static_cast<size_t>(inst)].operands[0];
  for (int64_t i = inst; i-- > 0;)
    for (int64_t r : is[static_cast<size_t>(i)].results)
      if (r == future)
        return transfer(i) ? i : -1;
  return -1;
}

} // namespace

std::string describePipelineTransfer(const Program &p, int64_t t) {
  const schedule::Instruction &in = p.instructions()[static_cast<size_t>(t)];
  // The planner's tags (schedule/PipelineTags.h): below the boundary base
  // the tied weights' gradient exchange, once per step; then the boundary
  // transfers (pipelineBoundaryTag).
  int64_t raw = in.integer("tag"), peer = in.integer("peer");
  int64_t v = p.pipelineChunks(), m = p.pipelineMicroBatches();
  std::string what =
      raw < schedule::kPipelineBoundaryTagBase
          ? "the gradient of tied parameter " +
                std::to_string(raw - schedule::kPipelineTiedTagBase) +
                " (by FQN; the tied weights' exchange after the last "
                "micro-batch)"
          : (schedule::pipelineTagIsBackward(raw, v)
                 ? "the gradient of micro-batch "
                 : "the activation of micro-batch ") +
                (m > 0 ? std::to_string(
                             schedule::pipelineTagMicroBatch(raw, v, m))
                       : "?");
  std::string me = "stage " + std::to_string(p.pipelineStage());
  std::string other = "stage " + std::to_string(peer);
  return (in.op == "fsdp.recv"
              ? me + " is waiting for " + what + " from " + other
              : me + " is waiting for " + other + " to receive " + what) +
         " (" + p.where(static_cast<size_t>(t)) + "): " + other +
         " is stopped, dead or running something else";
}

Watchdog::Watchdog(double timeout)
    : timeout(timeout), thread([this] { loop(); }) {
  // Before MPI's start the rank is Open MPI's (mpirun sets it in every
  // process's environment).
  if (const char *r = std::getenv("OMPI_COMM_WORLD_RANK"))
    rank = std::atoi(r);
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> l(m);
    stopping = true;
  }
  cv.notify_all();
  thread.join();
}

void Watchdog::setRank(int r) {
  std::lock_guard<std::mutex> l(m);
  rank = r;
}

void Watchdog::watch(const Executor *e) {
  std::lock_guard<std::mutex> l(m);
  ex = e;
}

void Watchdog::begin(std::string what) {
  std::lock_guard<std::mutex> l(m);
  phase = std::move(what);
  start = fsdp_now();
  active = true;
}

void Watchdog::end() {
  std::lock_guard<std::mutex> l(m);
  active = false;
}

std::string Watchdog::whereInStep() const {
  const Program &p = ex->program();
  int64_t i = ex->currentInstruction(), c = ex->awaitedCollective();
  size_t n = p.instructions().size();
  const char *why = ": another rank is stopped, dead or running something "
                    "else";
  std::string coll = c >= 0 && static_cast<size_t>(c) < n
                         ? p.where(static_cast<size_t>(c))
                         : std::string();
  int64_t t = p.pipelineStages() > 1 ? awaitedTransfer(p, i, c) : -1;
  if (t >= 0) // Pipeline parallelism: the stage and micro-batch it waits on.
    return (i >= 0 && static_cast<size_t>(i) < n
                ? "; it is in " + p.where(static_cast<size_t>(i)) + ", "
                : std::string("; at the step's end, ")) +
           describePipelineTransfer(p, t);
  if (i >= 0 && static_cast<size_t>(i) < n) {
    const std::string &op = p.instructions()[static_cast<size_t>(i)].op;
    bool isColl = op == "fsdp.all_gather" || op == "fsdp.reduce_scatter" ||
                  op == "fsdp.all_reduce" || op == "fsdp.wait";
    return "; it is in " + p.where(static_cast<size_t>(i)) +
           (!coll.empty() ? ", waiting for the collective of " + coll + why
            : isColl      ? std::string(", a collective") + why
                          : std::string());
  }
  if (i == Executor::kStepEnd)
    return "; it is waiting for the step's last collectives" +
           (!coll.empty() ? ", the collective of " + coll : std::string()) +
           why;
  return {};
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> l(m);
  auto tick = std::chrono::duration<double>(std::min(0.25, timeout / 4));
  while (!cv.wait_for(l, tick, [this] { return stopping; })) {
    if (!active || fsdp_now() - start <= timeout)
      continue;
    // Outside a step (start-up, initialisation, outputs) the executor's
    // instruction says nothing: the phase alone is named.
    std::string where =
        ex && phase.rfind("step ", 0) == 0 ? whereInStep() : std::string();
    std::string who =
        rank >= 0 ? "[rank " + std::to_string(rank) + "] " : std::string();
    std::fprintf(stderr,
                 "%sfsdp-run: error: watchdog: %s has not finished after %g "
                 "s (--timeout)%s\n",
                 who.c_str(), phase.c_str(), timeout, where.c_str());
    std::fflush(stderr);
    if (ex) {
      // Abort the device's collectives (cuda: ncclCommAbort) so that the
      // ranks waiting on this one fail too; ncclCommAbort may itself hang
      // on some NCCL versions (NVIDIA/nccl#829), so the exit does not wait
      // for it more than a few seconds.
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread([dev = ex->device(), msg = "watchdog: " + phase + where,
                   done] {
        fsdp_device_abort(dev, msg.c_str());
        done->store(true);
      }).detach();
      for (int ms = 0; ms < 5000 && !done->load(); ms += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::_Exit(1);
  }
}

} // namespace fsdp::tooling
