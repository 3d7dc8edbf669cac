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
  fsdp_stream gs = mc.stream;
  int64_t M = o.rows, H = o.hidden, Bt = o.rows / o.seq, A = o.heads;
  std::vector<float> x = randomVec<float>(mc, M * H, 51), ln(M * H),
                     qkv(M * 3 * H), att(M * H), lse(M * A), proj(M * H),
                     res(M * H), fc(M * 4 * H), act(M * 4 * H), out(M * H);
  std::vector<float> g = randomVec<float>(mc, H, 52),
                     bb = randomVec<float>(mc, H, 53),
                     wQkv = randomVec<float>(mc, H * 3 * H, 54),
                     bQkv = randomVec<float>(mc, 3 * H, 55),
                     wProj = randomVec<float>(mc, H * H, 56),
                     bProj = randomVec<float>(mc, H, 57),
                     wFc = randomVec<float>(mc, H * 4 * H, 58),
                     bFc = randomVec<float>(mc, 4 * H, 59),
                     wOut = randomVec<float>(mc, 4 * H * H, 60),
                     bOut = randomVec<float>(mc, H, 61);
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
  auto block = [&] {
    check(fsdp_layer_norm(gs, FSDP_F32, x.data(), g.data(), bb.data(),
                          ln.data(), M, H, 1e-5));
    poke();
    check(fsdp_linear(gs, FSDP_F32, ln.data(), wQkv.data(), bQkv.data(),
                      qkv.data(), M, H, 3 * H, 1));
    poke();
    check(fsdp_attention(gs, FSDP_F32, qkv.data(), qkv.data() + M * H,
                         qkv.data() + 2 * M * H, att.data(), lse.data(), Bt,
                         o.seq, A, A, H / A));
    poke();
    check(fsdp_linear(gs, FSDP_F32, att.data(), wProj.data(), bProj.data(),
                      proj.data(), M, H, H, 1));
    poke();
    check(fsdp_add(gs, FSDP_F32, x.data(), proj.data(), res.data(), M * H));
    poke();
    check(fsdp_layer_norm(gs, FSDP_F32, res.data(), g.data(), bb.data(),
                          ln.data(), M, H, 1e-5));
    poke();
    check(fsdp_linear(gs, FSDP_F32, ln.data(), wFc.data(), bFc.data(),
                      fc.data(), M, H, 4 * H, 1));
    poke();
    check(fsdp_gelu(gs, FSDP_F32, fc.data(), act.data(), M * 4 * H, 1));
    poke();
    check(fsdp_linear(gs, FSDP_F32, act.data(), wOut.data(), bOut.data(),
                      out.data(), M, 4 * H, H, 1));
    poke();
    check(fsdp_add(gs, FSDP_F32, res.data(), out.data(), x.data(), M * H));
    poke();
  };
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
