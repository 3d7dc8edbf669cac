//===- Handover.cpp - what a core handed between two ranks costs ----------===//
//
// progress_yield_s and waiting_rank_share (ClusterSpec::progressYield,
// ClusterSpec::waitingRankShare): on a node with more ranks than cores Open
// MPI yields the core in every progress call that moves nothing
// (mpi_yield_when_idle, on by default when oversubscribing; Open MPI 4.1
// opal/runtime/opal_progress.c: sched_yield() when no event progressed).
// The runtime tests its requests in flight after every instruction
// (FSDP_PROGRESS_TEST), so there each instruction hands the core to the
// other rank and back, and a rank waiting on a transfer polls and yields.
// Both are measured here the way a step runs them, with two ranks pinned to
// one core: the oversubscription the layouts see, whatever the number of
// ranks calibrating (bench/same_run_spec.sh calibrates with ranks <= cores,
// where Open MPI does not yield, so the yield is made here, after the
// runtime's own progress test).
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Benchmarks.h"
#include "fsdp/kernels.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

namespace fsdp::calibrate {

namespace {

/// Pins the calling process to one CPU while it lives, then restores the
/// CPUs it had (sched_setaffinity(2)).
class PinnedTo {
public:
  explicit PinnedTo(int cpu) {
    ok = sched_getaffinity(0, sizeof(saved), &saved) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ok = ok && sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedTo() {
    if (ok)
      sched_setaffinity(0, sizeof(saved), &saved);
  }
  PinnedTo(const PinnedTo &) = delete;
  PinnedTo &operator=(const PinnedTo &) = delete;
  bool ok = false;

private:
  cpu_set_t saved;
};

enum class Trial { Yielding, Sliced, Waiting, Asleep };

/// The calling thread's CPU seconds (CLOCK_THREAD_CPUTIME_ID): on a core
/// the two ranks keep busy, the pair's CPU seconds add up to the core's
/// wall seconds, and other processes' slices on a loaded machine stay out.
double threadSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

} // namespace

Handover measureHandover(const Machine &mc, const Options &o, double budget) {
  Handover r;
  if (mc.world < 2)
    return r;
  // Ranks 0 and 1 share rank 0's CPU; the others only join the reductions.
  int cpu = mc.rank == 0 ? sched_getcpu() : 0;
  MPI_Bcast(&cpu, 1, MPI_INT, 0, MPI_COMM_WORLD);
  bool pair = mc.rank < 2, worker = mc.rank == 0;
  int peer = 1 - mc.rank;
  std::optional<PinnedTo> pin;
  if (pair && cpu >= 0)
    pin.emplace(cpu);
  int pinned = pair ? int(pin && pin->ok) : 1, all = 0;
  MPI_Allreduce(&pinned, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all)
    return r; // no CPU to share: nothing measured (0 and 1)
  BlockForward forward(mc, o, 61);
  fsdp_event inFlight = nullptr;
  bool yield = false;
  int64_t tests = 0;
  // The runtime's progress test after each kernel, and the yield Open MPI
  // makes in it when oversubscribed.
  auto poke = [&] {
    int done = 0;
    if (inFlight)
      fsdp_event_query(inFlight, &done);
    if (yield)
      sched_yield();
    ++tests;
  };
  // A rank waiting as Open MPI waits oversubscribed: test, yield, again.
  auto pollUntil = [&](fsdp_event e) {
    int done = 0;
    for (check(fsdp_event_query(e, &done)); !done;
         check(fsdp_event_query(e, &done)))
      sched_yield();
    check(fsdp_wait(e));
  };
  float token = 1, got = 0;
  // The pair meets (a barrier of two made of yielding polls: a spinning
  // MPI_Barrier would keep a round-robin peer off the core).
  auto meet = [&] {
    fsdp_event in = nullptr, out = nullptr;
    check(fsdp_recv_start(mc.channel, &got, 1, FSDP_F32, peer, 8, &in));
    check(fsdp_send_start(mc.channel, &token, 1, FSDP_F32, peer, 8, &out));
    pollUntil(out);
    pollUntil(in);
  };
  // One trial: this rank's CPU seconds while rank 0 runs its blocks (summed
  // over the pair: the shared core's busy seconds). Yielding / Sliced: both
  // ranks of the pair run them, with / without the yield after each test;
  // Waiting / Asleep: rank 0 runs them (yielding) while rank 1 polls a
  // receive from it / sleeps `nap` seconds first (not runnable).
  auto trial = [&](Trial t, double nap) {
    meet();
    double cpu0 = threadSeconds(), seconds = 0;
    bool works = worker || t == Trial::Yielding || t == Trial::Sliced;
    yield = t != Trial::Sliced;
    fsdp_event e = nullptr;
    if (works) {
      check(fsdp_recv_start(mc.channel, &got, 1, FSDP_F32, peer, 7, &inFlight));
      tests = 0;
      for (int64_t i = 0; i < r.iterations; ++i)
        forward.run(poke);
      seconds = threadSeconds() - cpu0;
      check(fsdp_send_start(mc.channel, &token, 1, FSDP_F32, peer, 7, &e));
      pollUntil(e);
      pollUntil(inFlight);
      inFlight = nullptr;
    } else {
      if (t == Trial::Asleep)
        std::this_thread::sleep_for(std::chrono::duration<double>(nap));
      check(fsdp_recv_start(mc.channel, &got, 1, FSDP_F32, peer, 7, &e));
      pollUntil(e);
      seconds = t == Trial::Asleep ? 0 : threadSeconds() - cpu0;
      check(fsdp_send_start(mc.channel, &token, 1, FSDP_F32, peer, 7, &e));
      pollUntil(e);
    }
    return seconds;
  };
  // About budget / 16 CPU seconds per trial of both ranks; the tests per
  // block counted on the way.
  r.iterations = 1;
  double one = sumOverRanks(pair ? trial(Trial::Sliced, 0) : 0.0);
  r.testsPerBlock = maxOverRanks(double(tests));
  r.iterations = std::max<int64_t>(4, std::llround(budget / 16 / one));
  // The waiter's nap: longer than rank 0's blocks take in wall seconds on
  // a loaded machine.
  double nap = 4 * budget / 16;
  // A yield hands the core to the pair's other rank alone, as on a quiet
  // node, where permitted: round-robin real-time scheduling (sched(7):
  // SCHED_RR tasks run before every normal one; the kernel's RT throttling
  // leaves the others 5 %), so that other processes of a loaded machine
  // neither run at the yields nor fill the caches between them.
  sched_param rt{}, normal{};
  rt.sched_priority = 1;
  int allowed = pair ? int(sched_setscheduler(0, SCHED_RR, &rt) == 0) : 1;
  if (allowed)
    sched_setscheduler(0, SCHED_OTHER, &normal);
  MPI_Allreduce(MPI_IN_PLACE, &allowed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  r.realtime = allowed != 0;
  std::vector<double> mine; // 3 × (yielding, sliced, waiting, asleep)
  if (pair) {
    if (r.realtime)
      sched_setscheduler(0, SCHED_RR, &rt);
    for (int i = 0; i < 3; ++i)
      for (Trial t :
           {Trial::Yielding, Trial::Sliced, Trial::Waiting, Trial::Asleep})
        mine.push_back(trial(t, nap));
    if (r.realtime)
      sched_setscheduler(0, SCHED_OTHER, &normal);
  } else {
    mine.assign(12, 0.0);
  }
  std::vector<double> handover, share;
  for (int i = 0; i < 3; ++i) {
    double yielding = sumOverRanks(mine[4 * i]),
           sliced = sumOverRanks(mine[4 * i + 1]),
           waiting = sumOverRanks(mine[4 * i + 2]),
           asleep = sumOverRanks(mine[4 * i + 3]);
    r.yieldingSeconds.push_back(yielding);
    r.slicedSeconds.push_back(sliced);
    r.waitingSeconds.push_back(waiting);
    r.asleepSeconds.push_back(asleep);
    handover.push_back((yielding - sliced) /
                       double(2 * r.iterations * r.testsPerBlock));
    share.push_back(waiting / asleep - 1);
  }
  r.measured = true;
  r.seconds = std::max(0.0, median(handover));
  r.share = std::clamp(median(share), 0.0, 1.0);
  return r;
}

} // namespace fsdp::calibrate
