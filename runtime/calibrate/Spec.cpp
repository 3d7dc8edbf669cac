//===- Spec.cpp - The cluster spec fsdp-calibrate writes ------------------===//
#include "fsdp/calibrate/Spec.h"
#include "fsdp/ClusterSpec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <unistd.h>

namespace fsdp::calibrate {

using json = nlohmann::ordered_json;

namespace {

json caseJson(const Case &c) {
  return json{{"class", c.cls},
              {"kernel", c.name},
              {"flops", c.flops},
              {"bytes", c.bytes},
              {"seconds", c.seconds.mean},
              {"seconds_min_rank", c.seconds.min},
              {"seconds_max_rank", c.seconds.max},
              {"flop_per_s", c.flops / c.seconds.mean},
              {"byte_per_s", c.bytes / c.seconds.mean},
              {"weight", c.weight}};
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  return "unknown CPU";
}

/// Rank 0's host: its name, online cores and physical memory (bytes).
struct ThisHost {
  std::string name = "localhost";
  long cores = 0;
  double ram = 0;
};

ThisHost thisHost() {
  ThisHost h;
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  h.name = host;
  h.cores = sysconf(_SC_NPROCESSORS_ONLN);
  h.ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  return h;
}

/// "sources": how the run was made and how each value was measured.
json sourcesJson(const Options &o, int world, long cores,
                 const Calibration &cal) {
  double S = o.seconds;
  int64_t M = o.rows, H = o.hidden, T = o.seq, A = o.heads, V = o.vocab;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "measured %s by fsdp-calibrate with %d ranks at once on %ld "
                "cores (%s): rows %lld, hidden %lld, seq %lld, heads %lld, "
                "vocab %lld, %g s per kernel",
                today().c_str(), world, cores,
                world > cores ? "oversubscribed" : "not oversubscribed",
                (long long)M, (long long)H, (long long)T, (long long)A,
                (long long)V, S);
  return json::array(
      {std::string(buf),
       "peak_flops: the best rate per rank of the runtime's GEMM kernels "
       "(linear/matmul: OpenBLAS sgemm/dgemm, one thread) over the step's "
       "shapes and 512^3; bf16/f16 = f32 (the cpu backend computes 2-byte "
       "floats in f32)",
       "memory_bandwidth: memcpy of the step's largest activation (rows x "
       "4*hidden floats) per rank, read + write bytes (McCalpin, STREAM "
       "copy); 32 MiB recorded in measured",
       "efficiency.memory: embedding/position_embedding/split/concat/flatten "
       "at the step's sizes, NNCost bytes per second over memory_bandwidth "
       "(capped at 1)",
       "efficiency.matmul/attention/elementwise: the value at which the "
       "simulator's roofline sum over the class's measured kernels, weighted "
       "by one GPT-2 block's op counts, equals their measured time (FLOPs "
       "and bytes as dialects/nn/NNCost.cpp); kernels measured in 3 passes, "
       "median pass each",
       "collectives: fsdp_all_gather_start / fsdp_reduce_scatter_start / "
       "fsdp_all_reduce_start over the world, and fsdp_send_start / "
       "fsdp_recv_start from rank 0 to rank 1, + fsdp_wait, 64 B..4 MiB "
       "(powers of 2), back to back in batches of 8, median over batches of "
       "the max over ranks: intra_node.collectives, the simulator's curves "
       "(docs/collective-model.md); latency_s and bus_bandwidth (alpha, B) "
       "fitted to the all-gather and reduce-scatter points of 8 KiB..4 MiB, "
       "t = (G-1)*alpha + (G-1)/G*S/B, by least squares on relative error "
       "(Thakur, Rabenseifner & Gropp 2005; nccl-tests PERFORMANCE.md)",
       "cores_per_node: the online cores (sysconf); with more ranks than "
       "cores every rate above was measured time-sliced and is written "
       "multiplied by ranks / cores (times divided), the rate of a rank with "
       "a core to itself, as the simulator's oversubscription model reads "
       "it (ClusterSpec::coresPerNode); collective_sync_s measured "
       "oversubscribed is mostly busy-polling MPI ranks taking cores from "
       "computing ones and does not scale this way: calibrate with ranks <= "
       "cores",
       "inter_node = intra_node: one node",
       "op_efficiency: per op kind, the efficiency at which the roofline "
       "reproduces that op's kernels measured above (data movement: bytes "
       "per second over memory_bandwidth)",
       "dispatch_overhead_s: fsdp::rt::Executor::step of a chain of 2000 "
       "nn.relu on 16 floats in a planned arena, per instruction, minus the "
       "kernel; step_io_bandwidth: one nn.relu of 1 MiB in and out, bytes "
       "in + out per second of a step beyond one instruction and the kernel",
       "comm_overlap: (t_c + t_m - t_both) / min(t_c, t_m) for a 1 MiB "
       "all-gather (t_m) and k step GEMMs with fsdp_event_query after each "
       "(t_c), "
       "alone and together (t_both), interleaved, medians of the max over "
       "ranks",
       "collective_sync_s: FSDP's step pattern (L blocks: forward gather + "
       "block kernels, backward gather + 2x block kernels with the previous "
       "reduce-scatter in flight and tested after each kernel) with the "
       "runtime's kernels and collectives, I steps without barriers: "
       "(T_with - T_compute - T_collectives) / (I * 3L), max over ranks, "
       "median of 3 (skew at a collective: Petrini et al. SC 2003)",
       "waiting_rank_share (with more ranks than cores C): C ranks run a "
       "GPT-2 block's forward kernels with fsdp_event_query after each while "
       "the others wait in fsdp_wait on a receive, or sleep, 5 trials each: "
       "C * (t_waiting / t_sleeping - 1) / waiting ranks, median "
       "(processor sharing; Open MPI yields in its progress loop when "
       "oversubscribed, opal_progress.c); recorded in measured.share only: "
       "the spec's key is measureHandover's (below), measured beside the "
       "hand-over it comes with",
       "op_call_s: every kernel above measured again at " +
           std::to_string(cal.smallRows) +
           " rows: per op, the seconds of a call whatever its size, c = "
           "(rho * t_small - t_big) / (rho - 1) for the kernels whose work "
           "grew rho >= 1.5 times (fitCallCosts), weighted as the "
           "efficiencies; op_efficiency fitted to the times less c",
       "progress_yield_s and waiting_rank_share (measureHandover, "
       "runtime/calibrate/Handover.cpp): ranks 0 and 1 pinned to one CPU run "
       "GPT-2 block forwards with fsdp_event_query on a receive in flight "
       "after each kernel, followed by sched_yield() (Open MPI's progress "
       "when oversubscribed, opal_progress.c) or not, and rank 0 alone runs "
       "them while rank 1 polls a receive yielding or sleeps, 3 trials each, "
       "SCHED_RR where permitted (a yield goes to the other rank alone): with "
       "t the pair's CPU seconds, (t_yielding - t_sliced) / (2 * blocks * "
       "tests per block) and t_waiting / t_asleep - 1, medians"});
}

/// "measured": every raw measurement behind the spec's values.
json measuredJson(const Options &o, int world, long cores,
                  const Calibration &cal) {
  const Kernels &K = cal.kernels;
  auto &mm32 = K.mm32, &mm64 = K.mm64, &big = K.big, &mem = K.mem,
       &info = K.info, &att = K.att, &ew = K.ew;
  double bw = K.bw, bwBig = K.bwBig;
  Stat copyBig = K.copyBig;
  double alpha = cal.ring.alpha, busBw = cal.ring.bandwidth,
         fitErr = cal.ring.maxRelErr;
  const std::vector<CollPoint> &coll = cal.collectives;
  const Host &hostWork = cal.host;
  const Overlap &ov = cal.overlap;
  const Sync &sync = cal.sync;
  int64_t M = o.rows, H = o.hidden;
  json measured;
  measured["ranks"] = world;
  measured["load_average_before"] = cal.loadBefore;
  measured["load_average_after"] = cal.loadAfter;
  measured["cores"] = cores;
  measured["blas"] = cal.blas;
  measured["memcpy_working_set_bytes"] = 4.0 * M * 4 * H;
  measured["memcpy_working_set_byte_per_s"] = bw;
  measured["memcpy_32MiB_byte_per_s"] = bwBig;
  measured["memcpy_32MiB_seconds"] = {{"mean", copyBig.mean},
                                      {"min_rank", copyBig.min},
                                      {"max_rank", copyBig.max}};
  json kernels = json::array();
  for (auto *set : {&mm32, &mm64, &big, &mem, &att, &ew, &info})
    for (const Case &c : *set) {
      json j = caseJson(c);
      if (set == &mm64 || (set == &big && &c == &big[1]))
        j["dtype"] = "f64";
      kernels.push_back(j);
    }
  measured["kernels"] = kernels;
  json cj = json::array();
  for (const CollPoint &p : coll) {
    double pred =
        (world - 1) * alpha + double(world - 1) / world * p.bytes / busBw;
    cj.push_back({{"kind", p.kind},
                  {"bytes", p.bytes},
                  {"seconds", p.seconds},
                  {"fit_seconds", pred}});
  }
  measured["collectives"] = cj;
  measured["collective_fit_max_relative_error"] = fitErr;
  measured["host"] = {{"chain_instructions", hostWork.chainLength},
                      {"chain_run_seconds", hostWork.chain.mean},
                      {"single_run_seconds", hostWork.single.mean},
                      {"io_floats", hostWork.ioCount},
                      {"io_run_seconds", hostWork.io.mean},
                      {"io_relu_seconds", hostWork.relu.mean}};
  measured["sync"] = {{"all_gather_bytes", sync.bytes},
                      {"collectives_per_step", sync.collectives},
                      {"iterations", sync.iterations},
                      {"with_collectives_seconds", sync.withCollectives},
                      {"compute_only_seconds", sync.computeOnly},
                      {"collectives_only_seconds", sync.collectivesOnly}};
  if (cal.share.working > 0)
    measured["share"] = {{"waiting_rank_share", cal.share.share},
                         {"cores", cal.share.cores},
                         {"working_ranks", cal.share.working},
                         {"waiting_ranks", cal.share.waiting},
                         {"blocks_per_trial", cal.share.iterations},
                         {"waiting_seconds", cal.share.waitingSeconds},
                         {"sleeping_seconds", cal.share.sleepingSeconds}};
  if (cal.handover.measured)
    measured["handover"] = {{"progress_yield_s", cal.handover.seconds},
                            {"waiting_rank_share", cal.handover.share},
                            {"blocks_per_trial", cal.handover.iterations},
                            {"tests_per_block", cal.handover.testsPerBlock},
                            {"round_robin_real_time", cal.handover.realtime},
                            {"yielding_seconds", cal.handover.yieldingSeconds},
                            {"sliced_seconds", cal.handover.slicedSeconds},
                            {"waiting_seconds", cal.handover.waitingSeconds},
                            {"asleep_seconds", cal.handover.asleepSeconds}};
  measured["overlap"] = {{"all_gather_bytes", ov.bytes},
                         {"gemms", ov.gemms},
                         {"compute_seconds", ov.compute},
                         {"comm_seconds", ov.comm},
                         {"both_seconds", ov.both}};
  return measured;
}

} // namespace

std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : "unknown";
}

json buildSpec(const Options &o, const Machine &mc, const Calibration &cal) {
  int world = mc.world;
  const KernelFit &fit = cal.fit;
  double alpha = cal.ring.alpha, busBw = cal.ring.bandwidth;
  json opEff = json::object();
  for (const auto &[op, e] : fit.opEfficiency)
    opEff[op] = e;

  ThisHost host = thisHost();
  std::string name = !o.name.empty()
                         ? o.name
                         : "this machine: " + std::to_string(world) +
                               " ranks on " + host.name + " (" + cpuModel() +
                               ", " + std::to_string(host.cores) +
                               " cores), measured by fsdp-calibrate";
  std::string link = "MPI over shared memory (the runtime's collectives: "
                     "MPI_Iallgather / MPI_Ireduce_scatter_block), measured";
  // The keys are the simulator's (fsdp/ClusterSpec.h, ClusterSpec::load).
  namespace key = fsdp::cluster_spec;
  // Measured time-sliced (more ranks than cores): one rank's rates with a
  // core to itself are `over` times the measured ones (ClusterSpec::
  // coresPerNode).
  double over = host.cores > 0 && world > host.cores
                    ? double(world) / double(host.cores)
                    : 1.0;
  json curves = {{"ranks", world}};
  for (const CollPoint &p : cal.collectives) {
    if (!curves.contains(p.kind))
      curves[p.kind] = json::array();
    curves[p.kind].push_back({p.bytes, p.seconds / over});
  }
  curves["source"] = "fsdp-calibrate: the runtime's collectives over " +
                     std::to_string(world) + " ranks, seconds by full bytes";
  auto linkJson = [&](const std::string &what) {
    json l = {{key::kBusBandwidth, busBw * over},
              {key::kLatency, alpha / over},
              {key::kLink, what}};
    if (world > 1)
      l[key::kCollectives] = curves;
    return l;
  };
  json spec;
  spec[key::kName] = name;
  spec[key::kPeakFlops] = {{"f64", fit.peak64 * over},
                           {"f32", fit.peak32 * over},
                           {"bf16", fit.peak32 * over},
                           {"f16", fit.peak32 * over}};
  spec[key::kMemoryBytes] = host.ram / world;
  spec[key::kMemoryBandwidth] = cal.kernels.bw * over;
  spec[key::kDevicesPerNode] = o.devicesPerNode > 0
                                   ? o.devicesPerNode
                                   : std::max<int64_t>(world, host.cores);
  if (host.cores > 0)
    spec[key::kCoresPerNode] = host.cores;
  spec[key::kIntraNode] = linkJson(link);
  spec[key::kInterNode] = linkJson("one node: the intra-node values");
  spec[key::kEfficiency] = {{key::kEffMatmul, fit.effMatmul},
                            {key::kEffAttention, fit.effAttention},
                            {key::kEffElementwise, fit.effElementwise},
                            {key::kEffMemory, fit.effMemory}};
  spec[key::kOpEfficiency] = opEff;
  if (!cal.callCost.empty()) {
    json calls = json::object();
    for (const auto &[op, c] : cal.callCost)
      calls[op] = c / over;
    spec[key::kOpCallSeconds] = calls;
  }
  spec[key::kDispatchOverhead] = cal.host.dispatch / over;
  // Written even when not positive, so that implausibleValues refuses it
  // (left out, the simulator would read "not charged").
  spec[key::kStepIoBandwidth] = cal.host.ioBandwidth * over;
  spec[key::kCommOverlap] = cal.overlap.overlap;
  spec[key::kCollectiveSync] = cal.sync.sync / over;
  // Measured on one core shared by two ranks: a core's seconds, as is.
  if (cal.handover.measured) {
    spec[key::kProgressYield] = cal.handover.seconds;
    spec[key::kWaitingRankShare] = cal.handover.share;
  }
  spec[key::kSources] = sourcesJson(o, world, host.cores, cal);
  spec[key::kMeasured] = measuredJson(o, world, host.cores, cal);
  return spec;
}

std::vector<std::string> implausibleValues(const json &spec,
                                           const Calibration &cal) {
  namespace key = fsdp::cluster_spec;
  std::vector<std::string> bad;
  char buf[512];
  // Each check: the key, its value, and the measurements it came from.
  auto rate = [&](const std::string &name, const json &v, const char *why) {
    double x = v.is_number() ? v.get<double>() : std::nan("");
    if (std::isfinite(x) && x > 0)
      return;
    std::snprintf(buf, sizeof buf, "%s = %g is not a positive rate: %s",
                  name.c_str(), x, why);
    bad.emplace_back(buf);
  };
  auto inRange = [&](const std::string &name, const json &v, double lo,
                     bool loOpen, const char *why) {
    double x = v.is_number() ? v.get<double>() : std::nan("");
    if (std::isfinite(x) && (loOpen ? x > lo : x >= lo) && x <= 1)
      return;
    std::snprintf(buf, sizeof buf, "%s = %g is outside %s%g, 1]: %s",
                  name.c_str(), x, loOpen ? "(" : "[", lo, why);
    bad.emplace_back(buf);
  };
  for (auto &[dtype, v] : spec[key::kPeakFlops].items())
    rate(std::string(key::kPeakFlops) + "." + dtype, v,
         "the best GEMM rate (FLOPs over a measured time)");
  rate(key::kMemoryBandwidth, spec[key::kMemoryBandwidth],
       "memcpy bytes over a measured time");
  for (const char *link : {key::kIntraNode, key::kInterNode}) {
    const json &l = spec[link];
    std::string why =
        "the alpha-beta fit's slope 1/B to the all-gather and reduce-scatter "
        "times of 8 KiB..4 MiB is not positive: the times do not grow with "
        "the bytes (max fit error " +
        std::to_string(static_cast<int>(100 * cal.ring.maxRelErr)) + "%)";
    rate(std::string(link) + "." + key::kBusBandwidth, l[key::kBusBandwidth],
         why.c_str());
    double a = l[key::kLatency].is_number() ? l[key::kLatency].get<double>()
                                            : std::nan("");
    if (!std::isfinite(a) || a < 0)
      bad.push_back(std::string(link) + "." + key::kLatency + " = " +
                    std::to_string(a) + " is not a latency >= 0");
  }
  for (const CollPoint &p : cal.collectives)
    if (!std::isfinite(p.seconds) || p.seconds <= 0) {
      std::snprintf(buf, sizeof buf,
                    "collectives: %s of %g bytes measured %g s, not a "
                    "positive time",
                    p.kind.c_str(), p.bytes, p.seconds);
      bad.emplace_back(buf);
    }
  for (auto &[cls, v] : spec[key::kEfficiency].items())
    inRange(std::string(key::kEfficiency) + "." + cls, v, 0, true,
            "the roofline fit to the class's measured kernels");
  for (auto &[op, v] : spec[key::kOpEfficiency].items())
    inRange(std::string(key::kOpEfficiency) + "." + op, v, 0, true,
            "the roofline fit to the op's measured kernels");
  const Host &h = cal.host;
  char ioWhy[256];
  std::snprintf(ioWhy, sizeof ioWhy,
                "one step with %lld floats in and out (%.3g s) minus a step "
                "of one instruction (%.3g s) and the relu kernel (%.3g s) is "
                "not positive: a difference of noisy timings",
                (long long)h.ioCount, h.io.mean, h.single.mean, h.relu.mean);
  rate(key::kStepIoBandwidth, spec[key::kStepIoBandwidth], ioWhy);
  auto time = [&](const std::string &name, const json &v) {
    double x = v.is_number() ? v.get<double>() : std::nan("");
    if (!std::isfinite(x) || x < 0)
      bad.push_back(name + " = " + std::to_string(x) + " is not a time >= 0");
  };
  for (const char *k : {key::kDispatchOverhead, key::kCollectiveSync})
    time(k, spec[k]);
  inRange(key::kCommOverlap, spec[key::kCommOverlap], 0, false,
          "a fraction of the shorter of compute and communication");
  // The oversubscription terms (Handover.cpp, Fit.cpp's fitCallCosts):
  // differences of timings too.
  if (spec.contains(key::kOpCallSeconds))
    for (auto &[op, v] : spec[key::kOpCallSeconds].items())
      time(std::string(key::kOpCallSeconds) + "." + op, v);
  if (spec.contains(key::kProgressYield))
    time(key::kProgressYield, spec[key::kProgressYield]);
  if (spec.contains(key::kWaitingRankShare))
    inRange(key::kWaitingRankShare, spec[key::kWaitingRankShare], 0, true,
            "a yielding waiter's share of a core beside a working rank");
  return bad;
}

void writeSpec(const Options &o, const json &spec, const Calibration &cal) {
  // A spec with a rate of 0 or below (a difference of two timings taken
  // under load) would make the simulator divide by it or charge nothing:
  // refused, naming each value, before anything is written.
  std::vector<std::string> bad = implausibleValues(spec, cal);
  if (!bad.empty()) {
    std::string msg = "fsdp-calibrate: refusing to write the spec: " +
                      std::to_string(bad.size()) +
                      " measured value(s) out of range (load average " +
                      cal.loadBefore + " before, " + cal.loadAfter +
                      " after; rerun on a quieter machine or with a larger "
                      "--seconds):";
    for (const std::string &b : bad)
      msg += "\n  " + b;
    fsdp_abort(msg.c_str(), 1);
  }
  const KernelFit &fit = cal.fit;
  std::string text = spec.dump(2) + "\n";
  if (o.out == "-") {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream f(o.out);
    if (!f || !(f << text) || !f.flush())
      fsdp_abort(("fsdp-calibrate: cannot write '" + o.out + "'").c_str(), 1);
    std::fprintf(stderr, "fsdp-calibrate: wrote %s\n", o.out.c_str());
  }
  std::fprintf(stderr,
               "  peak f32 %.3g FLOP/s, f64 %.3g, memory %.3g B/s per rank; "
               "efficiency matmul %.3f attention %.3f elementwise %.3f memory "
               "%.3f; collectives alpha %.3g s, B %.3g B/s (max fit error "
               "%.0f%%); dispatch %.3g s per instruction, step I/O %.3g B/s, "
               "comm overlap %.2f, collective sync %.3g s\n",
               fit.peak32, fit.peak64, cal.kernels.bw, fit.effMatmul,
               fit.effAttention, fit.effElementwise, fit.effMemory,
               cal.ring.alpha, cal.ring.bandwidth, 100 * cal.ring.maxRelErr,
               cal.host.dispatch, cal.host.ioBandwidth, cal.overlap.overlap,
               cal.sync.sync);
  // Host.cpp clamps a negative per-instruction difference to 0: said, as
  // the simulator then charges no dispatch.
  if (cal.host.dispatch == 0)
    std::fprintf(stderr,
                 "fsdp-calibrate: note: dispatch_overhead_s is written as 0: "
                 "the chain's time per instruction (%.3g s) did not exceed "
                 "the kernel's\n",
                 (cal.host.chain.mean - cal.host.single.mean) /
                     static_cast<double>(cal.host.chainLength - 1));
  if (cal.handover.measured)
    std::fprintf(stderr,
                 "  oversubscribed (two ranks on one core): %.3g s per "
                 "hand-over of the core at a progress test, waiting rank "
                 "share %.3f\n",
                 cal.handover.seconds, cal.handover.share);
  if (cal.share.working > 0)
    std::fprintf(stderr,
                 "  waiting rank share %.3f (%d ranks working on %d cores "
                 "beside %d waiting; in measured.share, not applied: "
                 "docs/pipeline-parallel.md)\n",
                 cal.share.share, cal.share.working, cal.share.cores,
                 cal.share.waiting);
}

} // namespace fsdp::calibrate
