//===- Collectives.cpp - fsdp-calibrate's collective benchmarks -----------===//
//
// The collectives alone (their ring fit is in Fit.cpp), a collective beside
// compute (comm_overlap) and FSDP's step pattern without the interpreter
// (collective_sync_s), through the runtime's C API (runtime.h, kernels.h).
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Benchmarks.h"
#include "fsdp/kernels.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>

namespace fsdp::calibrate {

std::vector<CollPoint> measureCollectives(const Machine &mc, double budget) {
  int world = mc.world;
  fsdp_channel gworld = mc.channel;
  constexpr int kBatch = 8;
  std::vector<CollPoint> pts;
  // One kind at one size: kBatch collectives back to back after a barrier,
  // the batch's time / kBatch, max over ranks, median over the batches.
  auto measure = [&](const char *kind, double bytes, auto &&one) {
    std::vector<double> times;
    double spent = 0;
    for (int rep = 0; rep < 100 && (rep < 3 || spent < budget); ++rep) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = fsdp_now();
      for (int i = 0; i < kBatch; ++i)
        one();
      double mx = maxOverRanks((fsdp_now() - t0) / kBatch);
      times.push_back(mx);
      spent += mx * kBatch;
    }
    pts.push_back({kind, bytes, median(times)});
  };
  for (int64_t full = 64; full <= (4 << 20); full *= 2) {
    int64_t shardCount = std::max<int64_t>(1, full / 4 / world);
    int64_t count = shardCount * world, n = full / 4;
    std::vector<float> shard(shardCount, 1.0f), all(std::max(count, n), 1.0f),
        out(std::max(count, n));
    double bytes = static_cast<double>(count * 4);
    measure("all_gather", bytes, [&] {
      fsdp_event h = nullptr;
      check(fsdp_all_gather_start(gworld, shard.data(), all.data(), shardCount,
                                  FSDP_F32, &h));
      check(fsdp_wait(h));
    });
    measure("reduce_scatter", bytes, [&] {
      fsdp_event h = nullptr;
      check(fsdp_reduce_scatter_start(gworld, all.data(), shard.data(),
                                      shardCount, FSDP_F32, FSDP_REDUCE_SUM,
                                      &h));
      check(fsdp_wait(h));
    });
    measure("all_reduce", bytes, [&] {
      fsdp_event h = nullptr;
      check(fsdp_all_reduce_start(gworld, all.data(), out.data(), count,
                                  FSDP_F32, FSDP_REDUCE_SUM, &h));
      check(fsdp_wait(h));
    });
    // One message from rank 0 to rank 1, as a pipeline stage sends its
    // boundary activation to the next (the other ranks idle).
    measure("send_recv", static_cast<double>(n * 4), [&] {
      if (mc.rank > 1)
        return;
      fsdp_event h = nullptr;
      check(mc.rank == 0 ? fsdp_send_start(gworld, all.data(), n, FSDP_F32,
                                           /*peer=*/1, /*tag=*/7, &h)
                         : fsdp_recv_start(gworld, out.data(), n, FSDP_F32,
                                           /*peer=*/0, /*tag=*/7, &h));
      check(fsdp_wait(h));
    });
  }
  return pts;
}

Overlap measureOverlap(const Machine &mc, const Options &o, double budget) {
  fsdp_stream gs = mc.stream;
  fsdp_channel gworld = mc.channel;
  int world = mc.world;
  Overlap r;
  if (world < 2)
    return r;
  int64_t M = o.rows, K = o.hidden, N = 4 * o.hidden;
  std::vector<float> x = randomVec<float>(mc, M * K, 21),
                     w = randomVec<float>(mc, K * N, 22),
                     b = randomVec<float>(mc, N, 23), y(M * N);
  int64_t shardCount = (1 << 20) / 4 / world;
  r.bytes = shardCount * world * 4;
  std::vector<float> shard(shardCount, 1.0f), all(shardCount * world);
  auto gemm = [&] {
    check(fsdp_linear(gs, FSDP_F32, x.data(), w.data(), b.data(), y.data(), M,
                      K, N, 1));
  };
  // One trial: mode 0 compute, 1 comm, 2 both.
  auto trial = [&](int mode) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = fsdp_now();
    fsdp_event h = nullptr;
    if (mode >= 1)
      check(fsdp_all_gather_start(gworld, shard.data(), all.data(), shardCount,
                                  FSDP_F32, &h));
    if (mode != 1)
      for (int64_t i = 0; i < r.gemms; ++i) {
        gemm();
        int done = 0;
        if (h)
          fsdp_event_query(h, &done);
      }
    if (h)
      check(fsdp_wait(h));
    return maxOverRanks(fsdp_now() - t0);
  };
  double tg = secondsPerCall(mc, gemm, budget / 10).mean;
  r.gemms = 1;
  std::vector<double> tm0;
  for (int i = 0; i < 5; ++i)
    tm0.push_back(trial(1));
  r.gemms = std::max<int64_t>(1, std::llround(median(tm0) / tg));
  std::vector<double> tc, tm, tb;
  double spent = 0;
  for (int rep = 0; rep < 200 && (rep < 9 || spent < budget); ++rep) {
    tc.push_back(trial(0));
    tm.push_back(trial(1));
    tb.push_back(trial(2));
    spent += tc.back() + tm.back() + tb.back();
  }
  r.compute = median(tc);
  r.comm = median(tm);
  r.both = median(tb);
  r.overlap = std::clamp(
      (r.compute + r.comm - r.both) / std::min(r.compute, r.comm), 0.0, 1.0);
  return r;
}

BlockForward::BlockForward(const Machine &mc, const Options &o, uint32_t seed)
    : stream(mc.stream), M(o.rows), H(o.hidden), Bt(o.rows / o.seq), A(o.heads),
      T(o.seq), x(randomVec<float>(mc, M * H, seed)), ln(M * H), qkv(M * 3 * H),
      att(M * H), lse(M * A), proj(M * H), res(M * H), fc(M * 4 * H),
      act(M * 4 * H), out(M * H), g(randomVec<float>(mc, H, seed + 1)),
      bb(randomVec<float>(mc, H, seed + 2)),
      wQkv(randomVec<float>(mc, H * 3 * H, seed + 3)),
      bQkv(randomVec<float>(mc, 3 * H, seed + 4)),
      wProj(randomVec<float>(mc, H * H, seed + 5)),
      bProj(randomVec<float>(mc, H, seed + 6)),
      wFc(randomVec<float>(mc, H * 4 * H, seed + 7)),
      bFc(randomVec<float>(mc, 4 * H, seed + 8)),
      wOut(randomVec<float>(mc, 4 * H * H, seed + 9)),
      bOut(randomVec<float>(mc, H, seed + 10)) {}

void BlockForward::run(const std::function<void()> &poke) {
  fsdp_stream gs = stream;
  check(fsdp_layer_norm(gs, FSDP_F32, x.data(), g.data(), bb.data(), ln.data(),
                        M, H, 1e-5));
  poke();
  check(fsdp_linear(gs, FSDP_F32, ln.data(), wQkv.data(), bQkv.data(),
                    qkv.data(), M, H, 3 * H, 1));
  poke();
  check(fsdp_attention(gs, FSDP_F32, qkv.data(), qkv.data() + M * H,
                       qkv.data() + 2 * M * H, att.data(), lse.data(), Bt, T, A,
                       A, H / A));
  poke();
  check(fsdp_linear(gs, FSDP_F32, att.data(), wProj.data(), bProj.data(),
                    proj.data(), M, H, H, 1));
  poke();
  check(fsdp_add(gs, FSDP_F32, x.data(), proj.data(), res.data(), M * H));
  poke();
  check(fsdp_layer_norm(gs, FSDP_F32, res.data(), g.data(), bb.data(),
                        ln.data(), M, H, 1e-5));
  poke();
  check(fsdp_linear(gs, FSDP_F32, ln.data(), wFc.data(), bFc.data(), fc.data(),
                    M, H, 4 * H, 1));
  poke();
  check(fsdp_gelu(gs, FSDP_F32, fc.data(), act.data(), M * 4 * H, 1));
  poke();
  check(fsdp_linear(gs, FSDP_F32, act.data(), wOut.data(), bOut.data(),
                    out.data(), M, 4 * H, H, 1));
  poke();
  check(fsdp_add(gs, FSDP_F32, res.data(), out.data(), x.data(), M * H));
  poke();
}

Sync measureSync(const Machine &mc, const Options &o, double budget) {
  fsdp_channel gworld = mc.channel;
  int world = mc.world;
  Sync r;
  if (world < 2)
    return r;
  int64_t H = o.hidden, L = o.layers;
  BlockForward forward(mc, o, 31);
  fsdp_event pending = nullptr; // the reduce-scatter in flight
  auto poke = [&] {
    int done = 0;
    if (pending)
      fsdp_event_query(pending, &done);
  };
  auto block = [&] { forward.run(poke); };
  int64_t shardCount = (12 * H * H + 13 * H + world - 1) / world;
  r.bytes = shardCount * world * 4;
  r.collectives = 3 * L;
  std::vector<float> shard(shardCount, 1.0f), all(shardCount * world),
      grad(shardCount * world, 1.0f), gshard(shardCount);
  auto gather = [&] {
    fsdp_event h = nullptr;
    check(fsdp_all_gather_start(gworld, shard.data(), all.data(), shardCount,
                                FSDP_F32, &h));
    check(fsdp_wait(h));
  };
  auto reduceStart = [&] {
    check(fsdp_reduce_scatter_start(gworld, grad.data(), gshard.data(),
                                    shardCount, FSDP_F32, FSDP_REDUCE_AVG,
                                    &pending));
  };
  auto reduceWait = [&] {
    if (pending)
      check(fsdp_wait(pending));
    pending = nullptr;
  };
  // One step: mode 0 compute only, 1 with the collectives, 2 collectives only.
  auto step = [&](int mode) {
    bool comp = mode != 2, comm = mode != 0;
    for (int64_t b = 0; b < L; ++b) {
      if (comm)
        gather();
      if (comp)
        block();
    }
    for (int64_t b = 0; b < L; ++b) {
      if (comm)
        gather();
      if (comp) {
        block();
        block();
      }
      if (comm) {
        reduceWait();
        reduceStart();
      }
    }
    reduceWait();
  };
  double ts = secondsPerCall(mc, [&] { step(0); }, 0.05).mean;
  r.iterations = std::max<int64_t>(3, std::llround(budget / 6 / ts));
  auto loop = [&](int mode) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = fsdp_now();
    for (int64_t it = 0; it < r.iterations; ++it)
      step(mode);
    return maxOverRanks((fsdp_now() - t0) / static_cast<double>(r.iterations));
  };
  std::vector<double> with, without, coll;
  for (int trial = 0; trial < 3; ++trial) {
    without.push_back(loop(0));
    with.push_back(loop(1));
    coll.push_back(loop(2));
  }
  r.withCollectives = median(with);
  r.computeOnly = median(without);
  r.collectivesOnly = median(coll);
  r.sync =
      std::max(0.0, (r.withCollectives - r.computeOnly - r.collectivesOnly) /
                        static_cast<double>(r.collectives));
  return r;
}

} // namespace fsdp::calibrate
