//===- Calibrate.cpp - Measures this machine as a cluster spec ------------===//
//
// Writes a cluster spec in the format of bench/clusters/*.json (read by
// ClusterSpec::load, lib/Analysis/ClusterSpec.cpp) for THIS machine running N
// ranks at once: every measurement runs on all N ranks concurrently, so an
// oversubscribed machine (more ranks than cores) is measured as it trains.
// One node: inter_node = intra_node.
//
// Methodology (each rate: every rank runs the kernel in a loop for S/3
// seconds (S default 0.3) after a barrier and one untimed call; seconds per
// call = elapsed / calls, mean over ranks ("measured" keeps min and max too);
// all kernels are measured in three passes one after another and each takes
// its median pass, so a burst of other work spoils at most one; "measured"
// also records the load average before and after):
//
// * Kernels are the runtime's own, called through their entry points
//   (fsdp/kernels.h) on a "cpu" device as the interpreter calls them (the cpu
//   driver: OpenBLAS GEMM for linear/matmul, C++ loops for the rest) at the
//   shapes of one rank's share of a GPT-2 block (defaults: the main job,
//   tools/scripts/run-main.sh, at 4 ranks: M = 4·64 = 256 rows, hidden H =
//   128, 4 heads, sequence 64, MLP 4H, vocabulary 256). FLOPs and bytes are
//   dialects/nn/NNCost.cpp's, from the formulas it uses (fsdp/CostFormulas.h:
//   2·M·K·N (+ M·N bias) per GEMM, causal attention 2·B·H·T²·D and its gradient
//   5·B·H·T²·D, the per-element constants; bytes = every operand and result
//   once), so that the simulator's roofline max(FLOPs / (peak · eff), bytes /
//   (bw · eff.memory)) (Williams, Waterman & Patterson, CACM 2009) reproduces
//   the measured times of these kernels.
// * peak_flops.f32 / .f64: the best rate per rank of the GEMM kernels (f32:
//   linear and the backward matmuls; f64: linear) over the step's shapes and
//   a 512³ linear. bf16 and f16 are set to
//   the f32 peak: the cpu backend widens 2-byte floats and computes in f32.
// * memory_bandwidth: memcpy (read + write bytes, as STREAM's copy counts
//   them; McCalpin 1995) of the step's largest activation (M × 4H floats):
//   the bandwidth the step's streaming kernels see (cache-resident on most
//   CPUs); 32 MiB (beyond the caches) is recorded in "measured" only.
// * efficiency.memory: the data-movement kernels the step runs (embedding,
//   position_embedding, split, concat, flatten; no FLOPs in NNCost but
//   position_embedding's one add per element): Σ bytes / Σ time over
//   memory_bandwidth (capped at 1).
// * efficiency.matmul, .attention, .elementwise: for each class the value e
//   at which the roofline reproduces the class's measured time,
//   Σ w·max(F / (peak · e), B / (bw · eff.memory)) = Σ w·t (bisection;
//   capped at 1), the kernels weighted w by how often one block of the main
//   job runs them: matmul, each linear of a block with its two backward
//   matmuls (the output projection 1/L, L = --layers); attention, forward
//   and backward; elementwise, 2 layer_norm and 2 layer_norm_grad, gelu and
//   gelu_grad, 4 add, 2.25 reduce_sum of a 4H bias gradient, adamw_update
//   over a block's shard (12H² + 13H)/N, and 1/L cross_entropy(_grad). One
//   efficiency per class cannot fit kernels whose FLOP rates differ (GELU's
//   tanh and cross-entropy's exp cost far more than NNCost's per-element
//   constants): the class values serve ops not measured here, op_efficiency
//   the rest; "measured" lists each kernel's rate.
// * Collectives: all-gather, reduce-scatter and all-reduce over the world
//   and one message from rank 0 to rank 1 (send_recv) through the runtime's
//   C API (fsdp_*_start + fsdp_wait, f32) of S = 64 B ... 4 MiB (the full
//   buffer; powers of 2, as nccl-tests sweeps sizes), back to back in
//   batches of 8 after a barrier: the time of one = batch time / 8, max
//   over ranks, median over the batches. The points are the spec's curves
//   (intra_node.collectives; the simulator's model: CollectiveCurves,
//   docs/collective-model.md). For the α-β fallback (latency_s,
//   bus_bandwidth) the all-gather and reduce-scatter points of 8 KiB and
//   more are fitted to the ring model t = (G−1)·α + (G−1)/G · S/B (Thakur,
//   Rabenseifner & Gropp, IJHPCA 2005; nccl-tests doc/PERFORMANCE.md) by
//   least squares on the relative error, Σ ((c + x·β − t) / t)² with c =
//   (G−1)·α, β = 1/B, x = (G−1)/G · S. With N = 1 there is no collective:
//   α = 0, B = memory_bandwidth, no curves.
// * cores_per_node: the online cores. With N > cores every rate was
//   measured time-sliced; the spec gets one rank's with a core to itself
//   (rates × N / cores, times ÷), as the simulator scales it back
//   (ClusterSpec::coresPerNode). devices_per_node: --devices-per-node, or
//   max(N, cores).
// * op_efficiency: per op kind (nn.linear, nn.gelu, nn.adamw_update,
//   fsdp.flatten, ...) the efficiency at which the roofline reproduces that
//   op's kernels above alone (the same bisection; data movement: bytes per
//   second over memory_bandwidth). The simulator prefers it to the class's.
// * op_call_s: the kernels above measured again at a quarter of the rows
//   (at least one sequence), 3 passes, medians: per op kind the seconds of
//   a call whatever its size, c = (ρ·t_small − t_big) / (ρ − 1) for work
//   ratio ρ (fitCallCosts), and op_efficiency fitted to the rest.
// * progress_yield_s, waiting_rank_share: two ranks pinned to one core
//   (measureHandover, Handover.cpp).
// * dispatch_overhead_s: fsdp::rt::Executor::step (as fsdp-run drives it) of a
//   chain of 2000 nn.relu on 16 floats in a planned arena, per instruction,
//   minus one run of a single relu and the kernel itself: the interpreter's
//   binding, dispatch and frees. step_io_bandwidth: one nn.relu of 1 MiB in
//   and out, bytes in + out per second of a step beyond one instruction and
//   the kernel: writing the step's host data in and reading its output.
// * comm_overlap: a 1 MiB all-gather (t_m) and k step GEMMs (linear M x H ->
//   4H, k ≈ t_m / one GEMM) with fsdp_event_query after each, as the runtime's
//   default progress mode does (t_c), alone and with the gather started
//   before the GEMMs and waited after them (t_both), interleaved, medians of
//   the max over ranks: (t_c + t_m − t_both) / min(t_c, t_m), clamped to
//   [0, 1]. On a machine with no core to spare the copies run on the ranks'
//   own cores and t_both ≥ t_c + t_m: 0.
// * collective_sync_s: FSDP's step pattern replayed with the runtime's
//   kernels and collectives but without the interpreter (L blocks: forward
//   [gather, block kernels], backward [gather, twice the block kernels with
//   fsdp_event_query on the reduce-scatter in flight, its wait, the next
//   reduce-scatter]), I steps with no barrier, with and without the
//   collectives and the collectives alone: (T_with − T_compute −
//   T_collectives) / (I · 3L), max over ranks, median of 3 (the skew of
//   ranks arriving from compute at a collective; Petrini, Kerbyson &
//   Pakin, SC 2003).
// * One node: inter_node = intra_node; memory_bytes =
//   physical memory / N. "sources" records N, the cores, whether the run was
//   oversubscribed and the date.
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Calibrate.h"
#include "fsdp/BlasRecord.h"
#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/calibrate/Spec.h"

#include <algorithm>
#include <cstdio>

namespace fsdp::calibrate {

namespace {

/// "OpenBLAS 0.3.21, core Cooperlake (cpuid; CPU avx512)".
std::string blasSummary(const nlohmann::ordered_json &b) {
  if (!b.is_object())
    return "unknown";
  return b["library"].get<std::string>() + " " +
         b["version"].get<std::string>() + ", core " +
         b["core"].get<std::string>() + " (chosen by " +
         b["chosen_by"].get<std::string>() + "; CPU " +
         b["cpu_isa"].get<std::string>() + ")";
}

} // namespace

void runCalibration(const Options &o) {
  Machine mc;
  mc.rank = fsdp_rank();
  mc.world = fsdp_world_size();
  fsdp::rt::Device cpuDevice("cpu");
  mc.device = cpuDevice.get();
  mc.stream = fsdp_device_stream(mc.device, FSDP_STREAM_COMPUTE);
  check(fsdp_channel_create(mc.device, &mc.channel));
  struct ChannelGuard {
    fsdp_channel channel;
    ~ChannelGuard() { fsdp_channel_destroy(channel); }
  } channelGuard{mc.channel};
  Calibration cal;
  cal.loadBefore = loadAverage();
  double S = o.seconds;
  cal.blas = fsdp::rt::blasRecord(mc.device);
  if (mc.rank == 0) {
    std::fprintf(stderr,
                 "fsdp-calibrate: %d ranks, %lld rows x hidden %lld, %g s per "
                 "kernel...\n",
                 mc.world, (long long)o.rows, (long long)o.hidden, S);
    // The GEMM rates below are those of this library and core.
    std::fprintf(stderr, "fsdp-calibrate: BLAS %s\n",
                 blasSummary(cal.blas).c_str());
    if (cal.blas.is_object() && cal.blas["note"].is_string())
      std::fprintf(stderr, "fsdp-calibrate: note: %s\n",
                   cal.blas["note"].get<std::string>().c_str());
    if (cal.blas.is_object() && cal.blas["warning"].is_string())
      std::fprintf(stderr, "fsdp-calibrate: warning: %s\n",
                   cal.blas["warning"].get<std::string>().c_str());
  }

  std::vector<Kernels> passes;
  for (int pass = 0; pass < 3; ++pass)
    passes.push_back(measureKernels(mc, o, S / 3));
  cal.kernels = medianOfPasses(passes);
  weighKernels(cal.kernels, o.layers);
  // The same kernels at a quarter of the rows (at least one sequence: a
  // pipeline micro-batch's shapes), for each call's cost whatever its size.
  Options fewer = o;
  fewer.rows = std::max(o.seq, o.rows / 4 / o.seq * o.seq);
  cal.smallRows = fewer.rows;
  if (fewer.rows < o.rows) {
    passes.clear();
    for (int pass = 0; pass < 3; ++pass)
      passes.push_back(measureKernels(mc, fewer, S / 3));
    Kernels small = medianOfPasses(passes);
    weighKernels(small, o.layers);
    cal.callCost = fitCallCosts(cal.kernels, small);
  }
  cal.fit = fitKernels(cal.kernels, cal.kernels.bw, cal.callCost);

  // Collectives (none with one rank: alpha 0, B the memory bandwidth).
  cal.ring.bandwidth = cal.kernels.bw;
  if (mc.world > 1) {
    cal.collectives = measureCollectives(mc, std::max(0.05, S / 2));
    // The α-β fallback keeps its old fit: all-gather and reduce-scatter
    // of 8 KiB..4 MiB (the curves carry the rest).
    std::vector<CollPoint> ring;
    for (const CollPoint &p : cal.collectives)
      if ((p.kind == "all_gather" || p.kind == "reduce_scatter") &&
          p.bytes >= 8 << 10)
        ring.push_back(p);
    cal.ring = fitRing(ring, mc.world);
  }
  cal.host = measureHost(mc, std::max(0.05, S / 3));
  cal.overlap = measureOverlap(mc, o, std::max(0.3, S));
  cal.sync = measureSync(mc, o, std::max(0.6, 2 * S));
  cal.share = measureShare(mc, o, std::max(0.6, 2 * S));
  cal.handover = measureHandover(mc, o, std::max(1.2, 4 * S));

  if (mc.rank != 0)
    return;
  cal.loadAfter = loadAverage();
  writeSpec(o, buildSpec(o, mc, cal), cal);
}

} // namespace fsdp::calibrate
