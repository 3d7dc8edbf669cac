//===- Watchdog.cpp - Stops fsdp-run when a step hangs --------------------===//
#include "fsdp/tooling/Watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

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
    int64_t i = ex.currentInstruction();
    std::string where;
    if (i >= 0) {
      const std::string &op = p.instructions()[static_cast<size_t>(i)].op;
      bool coll = op == "fsdp.all_gather" || op == "fsdp.reduce_scatter" ||
                  op == "fsdp.all_reduce" || op == "fsdp.wait";
      where = "; it is in " + p.where(static_cast<size_t>(i)) +
              (coll ? ", a collective: another rank is stopped, dead or "
                      "running something else"
                    : "");
    } else if (i == Executor::kStepEnd) {
      where = "; it is waiting for the step's last collectives (another "
              "rank is stopped, dead or running something else)";
    }
    std::fprintf(stderr,
                 "[rank %d] fsdp-run: error: watchdog: %s has not finished "
                 "after %g s (--timeout)%s\n",
                 rank, phase.c_str(), timeout, where.c_str());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

} // namespace fsdp::tooling
