//===- Watchdog.cpp - Stops fsdp-run when a step hangs --------------------===//
#include "fsdp/tooling/Watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

using fsdp::rt::Executor;
using fsdp::schedule::Program;

namespace fsdp::tooling {

Watchdog::Watchdog(double timeout, const Executor &ex, int rank)
    : timeout(timeout), ex(ex), rank(rank), thread([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> l(m);
    stopping = true;
  }
  cv.notify_all();
  thread.join();
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

void Watchdog::loop() {
  std::unique_lock<std::mutex> l(m);
  auto tick = std::chrono::duration<double>(std::min(0.25, timeout / 4));
  while (!cv.wait_for(l, tick, [this] { return stopping; })) {
    if (!active || fsdp_now() - start <= timeout)
      continue;
    const Program &p = ex.program();
    int64_t i = ex.currentInstruction(), c = ex.awaitedCollective();
    size_t n = p.instructions().size();
    const char *why = ": another rank is stopped, dead or running something "
                      "else";
    std::string where;
    std::string coll = c >= 0 && static_cast<size_t>(c) < n
                           ? p.where(static_cast<size_t>(c))
                           : std::string();
    if (i >= 0 && static_cast<size_t>(i) < n) {
      const std::string &op = p.instructions()[static_cast<size_t>(i)].op;
      bool isColl = op == "fsdp.all_gather" || op == "fsdp.reduce_scatter" ||
                    op == "fsdp.all_reduce" || op == "fsdp.wait";
      where = "; it is in " + p.where(static_cast<size_t>(i)) +
              (!coll.empty() ? ", waiting for the collective of " + coll + why
               : isColl      ? std::string(", a collective") + why
                             : std::string());
    } else if (i == Executor::kStepEnd) {
      where = "; it is waiting for the step's last collectives" +
              (!coll.empty() ? ", the collective of " + coll : std::string()) +
              why;
    }
    std::fprintf(stderr,
                 "[rank %d] fsdp-run: error: watchdog: %s has not finished "
                 "after %g s (--timeout)%s\n",
                 rank, phase.c_str(), timeout, where.c_str());
    std::fflush(stderr);
    // Abort the device's collectives (cuda: ncclCommAbort) so that the
    // ranks waiting on this one fail too; ncclCommAbort may itself hang on
    // some NCCL versions (NVIDIA/nccl#829), so the exit does not wait for it
    // more than a few seconds.
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([dev = ex.device(), msg = "watchdog: " + phase + where, done] {
      fsdp_device_abort(dev, msg.c_str());
      done->store(true);
    }).detach();
    for (int ms = 0; ms < 5000 && !done->load(); ms += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::_Exit(1);
  }
}

} // namespace fsdp::tooling
