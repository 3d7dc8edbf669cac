//===- Share.cpp - what a waiting rank takes from the working ones --------===//
//
// waiting_rank_share (ClusterSpec::waitingRankShare, the pipeline
// simulator's processor sharing): on a node with more ranks than cores, a
// rank waiting on a transfer stays runnable (Open MPI's progress loop polls
// and, with mpi_yield_when_idle, the default under --oversubscribe,
// sched_yield()s when nothing progressed: opal/runtime/opal_progress.c), and
// a working rank yields in its own progress tests between kernels (the
// runtime's FSDP_PROGRESS_TEST). Measured, not assumed.
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Benchmarks.h"
#include "fsdp/kernels.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

namespace fsdp::calibrate {

Share measureShare(const Machine &mc, const Options &o, double budget) {
  Share r;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  r.cores = online > 0 ? int(online) : 1;
  if (mc.world <= r.cores)
    return r; // every rank has a core: nothing to share
  r.working = r.cores;
  r.waiting = mc.world - r.working;
  bool working = mc.rank < r.working;
  BlockForward forward(mc, o, 51);
  // This rank's peers: a waiting rank's working rank, a working rank's
  // waiting ones.
  std::vector<int> peers;
  if (working) {
    for (int p = r.working; p < mc.world; ++p)
      if ((p - r.working) % r.working == mc.rank)
        peers.push_back(p);
  } else {
    peers.push_back((mc.rank - r.working) % r.working);
  }
  // A working rank's transformer block forward (the step's kernels at its
  // shapes, as measureSync runs them), each kernel followed by a progress
  // test on its transfers in flight, as the runtime's step does: the step's
  // granularity of yields.
  std::vector<fsdp_event> inFlight;
  auto poke = [&] {
    for (fsdp_event e : inFlight) {
      int done = 0;
      fsdp_event_query(e, &done);
    }
  };
  auto block = [&] { forward.run(poke); };
  // The blocks of one trial: about budget / 8 seconds with every rank
  // working.
  double t1 = secondsPerCall(mc, block, 0.05).mean;
  r.iterations = std::max<int64_t>(8, std::llround(budget / 8 / t1));
  float token = 1, got = 0;
  // One trial: the working ranks' seconds for their blocks (0 on the others)
  // while the waiting ranks wait in a receive (sleep false) or sleep.
  auto trial = [&](bool sleep, double nap) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = 0;
    if (working) {
      inFlight.clear();
      std::vector<float> back(peers.size());
      for (size_t i = 0; i < peers.size(); ++i) {
        fsdp_event e = nullptr;
        check(fsdp_recv_start(mc.channel, &back[i], 1, FSDP_F32, peers[i], 2,
                              &e));
        inFlight.push_back(e);
      }
      double t0 = fsdp_now();
      for (int64_t i = 0; i < r.iterations; ++i)
        block();
      t = fsdp_now() - t0;
      for (int p : peers) {
        fsdp_event e = nullptr;
        check(fsdp_send_start(mc.channel, &token, 1, FSDP_F32, p, 1, &e));
        check(fsdp_wait(e));
      }
      for (fsdp_event e : inFlight)
        check(fsdp_wait(e));
      inFlight.clear();
    } else {
      if (sleep) // not runnable while the working ranks work
        std::this_thread::sleep_for(std::chrono::duration<double>(nap));
      fsdp_event e = nullptr;
      check(fsdp_recv_start(mc.channel, &got, 1, FSDP_F32, peers[0], 1, &e));
      check(fsdp_wait(e));
      check(fsdp_send_start(mc.channel, &token, 1, FSDP_F32, peers[0], 2, &e));
      check(fsdp_wait(e));
    }
    return maxOverRanks(t);
  };
  std::vector<double> ratios;
  for (int i = 0; i < 5; ++i) {
    double waiting = trial(false, 0);
    // Asleep for twice the waiting trial's time: past the working ranks'
    // (no slower alone).
    double alone = trial(true, 2 * waiting);
    r.waitingSeconds.push_back(waiting);
    r.sleepingSeconds.push_back(alone);
    ratios.push_back(waiting / alone);
  }
  // k = cores working ranks run at cores / (k + share·w) of their rate
  // beside w waiting ones, at 1 beside sleeping ones.
  r.share = std::max(0.0, double(r.working) * (median(ratios) - 1) /
                              double(r.waiting));
  return r;
}

} // namespace fsdp::calibrate
