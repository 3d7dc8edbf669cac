//===- fsdp-calibrate.cpp - Measures this machine as a cluster spec -------===//
//
//   mpirun -np N fsdp-calibrate [-o SPEC.json] [--seconds S] [--rows M]
//          [--hidden H] [--seq T] [--heads A] [--vocab V] [--layers L]
//          [--name NAME]
//
// Writes a cluster spec in the format of bench/clusters/*.json (read by
// ClusterSpec::load, lib/Analysis/Simulator.cpp) for THIS machine running N
// ranks at once: every measurement runs on all N ranks concurrently, so an
// oversubscribed machine (more ranks than cores) is measured as it trains.
// One node: devices_per_node = N, inter_node = intra_node.
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
//   counted as dialects/nn/NNCost.cpp counts them (2·M·K·N (+ M·N bias) per
//   GEMM, causal attention 2·B·H·T²·D and its gradient 5·B·H·T²·D, the
//   per-element constants; bytes = every operand and result once), so that
//   the simulator's roofline max(FLOPs / (peak · eff), bytes / (bw ·
//   eff.memory)) (Williams, Waterman & Patterson, CACM 2009) reproduces the
//   measured times of these kernels.
// * peak_flops.f32 / .f64: the best rate per rank of the GEMM kernels (f32:
//   linear and the backward matmuls; f64: linear) over the step's shapes and
//   a 512³ linear. bf16 and f16 are set to
//   the f32 peak: the cpu backend widens 2-byte floats and computes in f32.
// * memory_bandwidth: memcpy (read + write bytes, as STREAM's copy counts
//   them; McCalpin 1995) of the step's largest activation (M × 4H floats):
//   the bandwidth the step's streaming kernels see (cache-resident on most
//   CPUs); 32 MiB (beyond the caches) is recorded in "measured" only.
// * efficiency.memory: the data-movement kernels with no FLOPs in NNCost that
//   the step runs (embedding, position_embedding, split, concat, flatten):
//   Σ bytes / Σ time over memory_bandwidth (capped at 1).
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
// * Collectives: all-gather and reduce-scatter through the runtime's C API
//   (fsdp_*_start + fsdp_wait, world group, f32) of S = 8 KiB ... 4 MiB
//   gathered bytes (powers of 2), back to back in batches of 8 after a
//   barrier: the time of one = batch time / 8, max over ranks, median over
//   the batches. Fit of the ring model t = (G−1)·α + (G−1)/G · S/B (Thakur,
//   Rabenseifner & Gropp, IJHPCA 2005; nccl-tests doc/PERFORMANCE.md) by
//   least squares on the relative error, Σ ((c + x·β − t) / t)² with c =
//   (G−1)·α, β = 1/B, x = (G−1)/G · S. With N = 1 there is no collective:
//   α = 0, B = memory_bandwidth.
// * op_efficiency: per op kind (nn.linear, nn.gelu, nn.adamw_update,
//   fsdp.flatten, ...) the efficiency at which the roofline reproduces that
//   op's kernels above alone (the same bisection; data movement: bytes per
//   second over memory_bandwidth). The simulator prefers it to the class's.
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
// * One node: devices_per_node = N, inter_node = intra_node; memory_bytes =
//   physical memory / N. "sources" records N, the cores, whether the run was
//   oversubscribed and the date.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Interpreter.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using json = nlohmann::ordered_json;

namespace {

struct Options {
  std::string out = "-";
  double seconds = 0.3;
  int64_t rows = 256, hidden = 128, seq = 64, heads = 4, vocab = 256;
  int64_t layers = 4;
  std::string name;
};

const char *kUsage =
    "usage: mpirun -np N fsdp-calibrate [-o SPEC.json] [--seconds S]\n"
    "                [--rows M] [--hidden H] [--seq T] [--heads A]\n"
    "                [--vocab V] [--layers L] [--name NAME]\n"
    "  -o SPEC.json   where to write the cluster spec ('-': stdout, default)\n"
    "  --seconds S    time per measured kernel (default 0.3)\n"
    "  --rows M       token rows per rank (default 256 = 4 x 64)\n"
    "  --hidden H     hidden size (default 128; MLP 4H)\n"
    "  --seq T        sequence length (default 64)\n"
    "  --heads A      attention heads (default 4)\n"
    "  --vocab V      vocabulary (default 256)\n"
    "  --layers L     blocks per step: weights the once-per-step ops (output\n"
    "                 projection, cross-entropy) by 1/L (default 4)\n"
    "  --name NAME    the spec's name\n";

[[noreturn]] void usageError(const std::string &msg) {
  const char *r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!r || std::string(r) == "0")
    std::fprintf(stderr, "fsdp-calibrate: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usageError("missing value after " + a);
      return argv[++i];
    };
    auto positive = [&](int64_t &out) {
      std::string v = value();
      char *end = nullptr;
      errno = 0;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (errno || *end || x < 1 || x > (1 << 20))
        usageError(a + " needs a positive integer");
      out = x;
    };
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (a == "-o") {
      o.out = value();
    } else if (a == "--seconds") {
      std::string v = value();
      char *end = nullptr;
      o.seconds = std::strtod(v.c_str(), &end);
      if (*end || !(o.seconds > 0) || o.seconds > 60)
        usageError("--seconds needs a number in (0, 60]");
    } else if (a == "--rows") {
      positive(o.rows);
    } else if (a == "--hidden") {
      positive(o.hidden);
    } else if (a == "--seq") {
      positive(o.seq);
    } else if (a == "--heads") {
      positive(o.heads);
    } else if (a == "--vocab") {
      positive(o.vocab);
    } else if (a == "--layers") {
      positive(o.layers);
    } else if (a == "--name") {
      o.name = value();
    } else {
      usageError("unknown argument " + a);
    }
  }
  if (o.rows % o.seq)
    usageError("--rows (" + std::to_string(o.rows) +
               ") must be a multiple of --seq (" + std::to_string(o.seq) + ")");
  if (o.hidden % o.heads)
    usageError("--hidden (" + std::to_string(o.hidden) +
               ") must be a multiple of --heads (" + std::to_string(o.heads) +
               ")");
  // The output must be writable before a minute of measuring: a directory
  // that exists and is writable, and not a directory itself.
  if (o.out != "-") {
    struct stat st;
    std::string dir = o.out.find('/') == std::string::npos
                          ? std::string(".")
                          : o.out.substr(0, o.out.rfind('/') + 1);
    if (stat(o.out.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      usageError("-o " + o.out + " is a directory");
    if (access(dir.c_str(), W_OK) != 0)
      usageError("cannot write '" + o.out + "': directory '" + dir + "' " +
                 (access(dir.c_str(), F_OK) != 0 ? "does not exist"
                                                 : "is not writable"));
  }
  return o;
}

int rank = 0, world = 1;
// The cpu device every kernel runs on (its compute stream) and its world
// channel: the entry points the interpreter calls (fsdp/kernels.h).
fsdp_device dev = nullptr;
fsdp_stream gs = nullptr;
fsdp_channel gworld = nullptr;

/// Aborts every rank with the runtime's message unless rc is FSDP_OK.
void check(int rc) {
  if (rc != FSDP_OK)
    fsdp_abort(fsdp_last_error(), 1);
}

template <typename T> constexpr fsdp_dtype dtypeOf() {
  return sizeof(T) == 8 ? FSDP_F64 : FSDP_F32;
}

/// Mean, min and max over ranks.
struct Stat {
  double mean, min, max;
};
Stat overRanks(double x) {
  double s = 0, lo = 0, hi = 0;
  MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&x, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&x, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {s / world, lo, hi};
}

/// The largest `x` over ranks.
double maxOverRanks(double x) {
  double mx = 0;
  MPI_Allreduce(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mx;
}

/// The median (the upper one of an even count) of a non-empty list.
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Seconds per call of `fn` on every rank at once: a barrier, one untimed
/// call, then calls until `seconds` have passed; mean / min / max over ranks.
Stat secondsPerCall(const std::function<void()> &fn, double seconds) {
  MPI_Barrier(MPI_COMM_WORLD);
  fn();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = fsdp_now(), t = t0;
  int64_t calls = 0;
  do {
    fn();
    ++calls;
    t = fsdp_now();
  } while (t - t0 < seconds);
  return overRanks((t - t0) / static_cast<double>(calls));
}

template <typename T> std::vector<T> randomVec(int64_t n, uint32_t seed) {
  std::mt19937 g(seed + 977u * static_cast<uint32_t>(rank));
  std::normal_distribution<double> d(0, 1);
  std::vector<T> v(static_cast<size_t>(n));
  for (T &x : v)
    x = static_cast<T>(d(g));
  return v;
}

/// One measured kernel: its class, NNCost FLOPs and bytes, seconds per call.
struct Case {
  std::string cls, name;
  double flops, bytes;
  Stat seconds;
  double weight = 1; ///< occurrences per transformer block (efficiency fit)
};

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

/// The efficiency e in (0, 1] at which Σ w·max(F/(peak·e), B/(bw·em))
/// over the cases equals their measured Σ w·t (1 if even e = 1 is too slow).
double solveEfficiency(const std::vector<Case> &cases, double peak, double bw,
                       double effMem) {
  double measured = 0;
  for (const Case &c : cases)
    measured += c.weight * c.seconds.mean;
  auto predicted = [&](double e) {
    double s = 0;
    for (const Case &c : cases)
      s += c.weight * std::max(c.flops / (peak * e), c.bytes / (bw * effMem));
    return s;
  };
  if (predicted(1.0) >= measured)
    return 1.0;
  double lo = 1e-9, hi = 1.0; // predicted(lo) > measured > predicted(hi)
  for (int i = 0; i < 200; ++i) {
    double mid = std::sqrt(lo * hi);
    (predicted(mid) > measured ? lo : hi) = mid;
  }
  return hi;
}

double sumSeconds(const std::vector<Case> &cases) {
  double s = 0;
  for (const Case &c : cases)
    s += c.weight * c.seconds.mean;
  return s;
}

//===--- GEMMs
//---------------------------------------------------------------===//

/// linear y[M,N] = x[M,K]·w[K,N] + b (GPT-2's Conv1D layout, as the main job)
/// and the backward matmuls dx[M,K] = dy[M,N]·w[K,N]ᵀ, dw[K,N] = x[M,K]ᵀ·dy.
template <typename T>
std::vector<Case> gemmCases(int64_t m, int64_t k, int64_t n, double seconds,
                            bool backward) {
  std::vector<T> x = randomVec<T>(m * k, 1), w = randomVec<T>(k * n, 2),
                 b = randomVec<T>(n, 3), dy = randomVec<T>(m * n, 4);
  std::vector<T> y(m * n), dx(m * k), dw(k * n);
  double es = sizeof(T);
  std::string shape =
      std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  std::vector<Case> cs;
  cs.push_back({"matmul", "linear " + shape, 2.0 * m * k * n + double(m) * n,
                es * (m * k + k * n + n + m * n),
                secondsPerCall(
                    [&] {
                      check(fsdp_linear(gs, dtypeOf<T>(), x.data(), w.data(),
                                        b.data(), y.data(), m, k, n,
                                        /*transpose_weight=*/1));
                    },
                    seconds)});
  if (!backward)
    return cs;
  cs.push_back({"matmul", "matmul dx " + shape, 2.0 * m * k * n,
                es * (m * n + k * n + m * k),
                secondsPerCall(
                    [&] {
                      check(fsdp_matmul(gs, dtypeOf<T>(), dy.data(), w.data(),
                                        dx.data(), m, n, k, n, 0, 1));
                    },
                    seconds)});
  cs.push_back({"matmul", "matmul dw " + shape, 2.0 * m * k * n,
                es * (m * k + m * n + k * n),
                secondsPerCall(
                    [&] {
                      check(fsdp_matmul(gs, dtypeOf<T>(), x.data(), dy.data(),
                                        dw.data(), m, k, m, n, 1, 0));
                    },
                    seconds)});
  return cs;
}

/// The (K, N) of one block's linears: c_attn H→3H, c_proj H→H, c_fc H→4H,
/// mlp c_proj 4H→H; and last the tied output projection H→V.
std::vector<std::pair<int64_t, int64_t>> blockLinears(const Options &o) {
  return {{o.hidden, 3 * o.hidden},
          {o.hidden, o.hidden},
          {o.hidden, 4 * o.hidden},
          {4 * o.hidden, o.hidden},
          {o.hidden, o.vocab}};
}

//===--- Collectives
//-----------------------------------------------------------===//

struct CollPoint {
  std::string kind;
  double bytes, seconds;
};

std::vector<CollPoint> measureCollectives(double budget) {
  constexpr int kBatch = 8;
  std::vector<CollPoint> pts;
  for (int64_t full = 8 << 10; full <= (4 << 20); full *= 2) {
    int64_t shardCount = full / 4 / world;
    std::vector<float> shard(shardCount, 1.0f), all(shardCount * world, 1.0f);
    for (int ag = 1; ag >= 0; --ag) {
      std::vector<double> times;
      double spent = 0;
      for (int rep = 0; rep < 100 && (rep < 3 || spent < budget); ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = fsdp_now();
        for (int i = 0; i < kBatch; ++i) {
          fsdp_event h = nullptr;
          check(ag ? fsdp_all_gather_start(gworld, shard.data(), all.data(),
                                           shardCount, FSDP_F32, &h)
                   : fsdp_reduce_scatter_start(gworld, all.data(), shard.data(),
                                               shardCount, FSDP_F32,
                                               FSDP_REDUCE_SUM, &h));
          check(fsdp_wait(h));
        }
        double mx = maxOverRanks((fsdp_now() - t0) / kBatch);
        times.push_back(mx);
        spent += mx * kBatch;
      }
      pts.push_back({ag ? "all_gather" : "reduce_scatter",
                     static_cast<double>(shardCount * world * 4),
                     median(times)});
    }
  }
  return pts;
}

/// Weighted least squares of t = c + β·x, weights 1/t² (relative error).
void fitRing(const std::vector<CollPoint> &pts, int g, double &alpha,
             double &bandwidth, double &maxRelErr) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  double frac = double(g - 1) / g;
  for (const CollPoint &p : pts) {
    double w = 1 / (p.seconds * p.seconds), x = frac * p.bytes;
    sw += w;
    sx += w * x;
    sy += w * p.seconds;
    sxx += w * x * x;
    sxy += w * x * p.seconds;
  }
  double det = sw * sxx - sx * sx;
  double beta = (sw * sxy - sx * sy) / det, c = (sy - beta * sx) / sw;
  if (c < 0) { // no latency term: fit through the origin
    c = 0;
    beta = sxy / sxx;
  }
  alpha = c / (g - 1);
  bandwidth = 1 / beta;
  maxRelErr = 0;
  for (const CollPoint &p : pts)
    maxRelErr =
        std::max(maxRelErr,
                 std::fabs(c + beta * frac * p.bytes - p.seconds) / p.seconds);
}

std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : "unknown";
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

/// Every kernel measurement of one pass (see the header), S seconds each.
struct Kernels {
  std::vector<Case> mm32, mm64, big, mem, info, att, ew;
  Stat copy, copyBig;
  double bw = 0, bwBig = 0;
};

//===--- Host work and overlap
//-------------------------------------------------===//

/// A schedule (runtime/docs/schedule-format.md) of `count` nn.relu on f32
/// [n] buffers in a chain, each freeing its operand, planned into a 2-slot
/// arena as fsdp-opt plans one: what the interpreter does per instruction
/// with no kernel time to speak of (n small), or what the step's input and
/// output conversion costs (n large, count 1).
std::string reluChain(int64_t count, int64_t n) {
  int64_t bytes = 4 * n, slot = (bytes + 63) / 64 * 64;
  std::string bufs, insts;
  for (int64_t i = 0; i <= count; ++i) {
    bufs += (i ? ", " : "") + std::string(R"({"id": )") + std::to_string(i) +
            R"(, "dtype": "f32", "shape": [)" + std::to_string(n) +
            R"(], "arena_offset": )" + std::to_string((i % 2) * slot) + "}";
    if (i < count)
      insts +=
          (i ? ", " : "") + std::string(R"({"op": "nn.relu", "operands": [)") +
          std::to_string(i) + R"(], "results": [)" + std::to_string(i + 1) +
          R"(], "frees": [)" + std::to_string(i) + "]}";
  }
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": )" +
         std::to_string(world) + R"(, "memory_plan": {"peak_bytes": )" +
         std::to_string(2 * bytes) + R"(, "arena_bytes": )" +
         std::to_string(2 * slot) + R"(, "arena_alignment": 64}, "units": [],
    "buffers": [)" +
         bufs + R"(],
    "inputs": [{"buffer": 0, "role": "features", "global_shape": [)" +
         std::to_string(n) + R"(]}],
    "outputs": [{"buffer": )" +
         std::to_string(count) + R"(, "role": "output"}], "instructions": [)" +
         insts + "]}";
}

/// Seconds per step of `schedule` on every rank at once, as fsdp-run drives
/// an Executor: the input written, the step, the output read.
Stat runSeconds(const std::string &schedule, int64_t n, double seconds) {
  try {
    fsdp::rt::Program prog =
        fsdp::rt::Program::fromString(schedule, true, "<calibration chain>");
    fsdp::rt::Executor ex(prog, dev);
    std::vector<double> in(n, 0.5), out;
    int64_t last = prog.outputs().at(0).buffer;
    return secondsPerCall(
        [&] {
          ex.write(0, in);
          ex.step();
          ex.read(last, out);
        },
        seconds);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-calibrate: ") + e.what()).c_str(), 1);
  }
}

struct Host {
  Stat chain, single, io, relu;
  int64_t chainLength = 2000, ioCount = 1 << 18;
  double dispatch = 0, ioBandwidth = 0;
};

/// The interpreter's cost per instruction (a chain of 2000 relu of 16
/// floats, minus their kernels) and the rate at which a step's inputs and
/// outputs enter and leave it (one relu of 1 MiB in and out, minus one
/// instruction and the relu kernel), through fsdp::rt::Program as fsdp-run
/// drives it.
Host measureHost(double S) {
  Host h;
  std::vector<float> x(h.ioCount, 0.5f), y(h.ioCount), xs(16, 0.5f), ys(16);
  Stat reluSmall = secondsPerCall(
      [&] { check(fsdp_relu(gs, FSDP_F32, xs.data(), ys.data(), 16)); }, S);
  h.relu = secondsPerCall(
      [&] { check(fsdp_relu(gs, FSDP_F32, x.data(), y.data(), h.ioCount)); },
      S);
  h.chain = runSeconds(reluChain(h.chainLength, 16), 16, S);
  h.single = runSeconds(reluChain(1, 16), 16, S);
  h.io = runSeconds(reluChain(1, h.ioCount), h.ioCount, S);
  h.dispatch = std::max(0.0, (h.chain.mean - h.single.mean) /
                                     static_cast<double>(h.chainLength - 1) -
                                 reluSmall.mean);
  double ioSeconds = h.io.mean - h.single.mean - h.relu.mean;
  h.ioBandwidth = ioSeconds > 0 ? 2.0 * 4 * h.ioCount / ioSeconds : 0;
  return h;
}

struct Overlap {
  double compute = 0, comm = 0, both = 0, overlap = 1;
  int64_t gemms = 0, bytes = 0;
};

/// How much of a collective hides behind compute, as the runtime overlaps
/// them (FSDP_PROGRESS_TEST: fsdp_event_query after every kernel): an
/// all-gather of 1 MiB alone (t_m), k GEMMs of the step (linear M×H→4H, k
/// chosen so that t_c ≈ t_m) alone (t_c), and the gather started before the
/// GEMMs and waited after them (t_both), on every rank at once, interleaved,
/// medians of max over ranks. overlap = (t_c + t_m − t_both) / min(t_c, t_m),
/// clamped to [0, 1]: 1 when the transfer costs the compute nothing.
Overlap measureOverlap(const Options &o, double budget) {
  Overlap r;
  if (world < 2)
    return r;
  int64_t M = o.rows, K = o.hidden, N = 4 * o.hidden;
  std::vector<float> x = randomVec<float>(M * K, 21),
                     w = randomVec<float>(K * N, 22),
                     b = randomVec<float>(N, 23), y(M * N);
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
  double tg = secondsPerCall(gemm, budget / 10).mean;
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

struct Sync {
  double withCollectives = 0, computeOnly = 0, collectivesOnly = 0, sync = 0;
  int64_t bytes = 0, collectives = 0, iterations = 0;
};

/// What a collective costs beyond its own time when the ranks arrive from
/// compute rather than in lockstep (skew from time-slicing and OS noise:
/// Petrini, Kerbyson & Pakin, SC 2003; Hoefler, Schneider & Lumsdaine, SC
/// 2010), in FSDP's pattern without the interpreter: for L blocks (--layers)
/// a forward of [all-gather of one block's parameters, 4·(12H² + 13H) bytes,
/// started and waited; the block's forward kernels (layer norms, the four
/// linears, attention, GELU, residual adds)], then a backward of [the
/// gather; the block's kernels twice (a backward's work) with fsdp_event_query
/// on the previous reduce-scatter after every kernel, as the runtime's default
/// progress does; that reduce-scatter waited; this block's reduce-scatter
/// started], the last one waited. Run I times with no barrier between, the
/// same without collectives, and the collectives alone back to back:
/// sync = (T_with − T_compute − T_collectives) / (I · 3L), each T the max
/// over ranks, median of 3 trials.
Sync measureSync(const Options &o, double budget) {
  Sync r;
  if (world < 2)
    return r;
  int64_t M = o.rows, H = o.hidden, Bt = o.rows / o.seq, A = o.heads,
          L = o.layers;
  std::vector<float> x = randomVec<float>(M * H, 31), ln(M * H), qkv(M * 3 * H),
                     att(M * H), proj(M * H), res(M * H), fc(M * 4 * H),
                     act(M * 4 * H), out(M * H);
  std::vector<float> g = randomVec<float>(H, 32), bb = randomVec<float>(H, 33),
                     wQkv = randomVec<float>(H * 3 * H, 34),
                     bQkv = randomVec<float>(3 * H, 35),
                     wProj = randomVec<float>(H * H, 36),
                     bProj = randomVec<float>(H, 37),
                     wFc = randomVec<float>(H * 4 * H, 38),
                     bFc = randomVec<float>(4 * H, 39),
                     wOut = randomVec<float>(4 * H * H, 40),
                     bOut = randomVec<float>(H, 41);
  fsdp_event pending = nullptr; // the reduce-scatter in flight
  auto poke = [&] {
    int done = 0;
    if (pending)
      fsdp_event_query(pending, &done);
  };
  auto block = [&] {
    check(fsdp_layer_norm(gs, FSDP_F32, x.data(), g.data(), bb.data(),
                          ln.data(), M, H, 1e-5));
    poke();
    check(fsdp_linear(gs, FSDP_F32, ln.data(), wQkv.data(), bQkv.data(),
                      qkv.data(), M, H, 3 * H, 1));
    poke();
    check(fsdp_attention(gs, FSDP_F32, qkv.data(), qkv.data() + M * H,
                         qkv.data() + 2 * M * H, att.data(), Bt, o.seq, A, A,
                         H / A));
    poke();
    check(fsdp_linear(gs, FSDP_F32, att.data(), wProj.data(), bProj.data(),
                      proj.data(), M, H, H, 1));
    poke();
    check(fsdp_add(gs, FSDP_F32, x.data(), proj.data(), res.data(), M * H));
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
  double ts = secondsPerCall([&] { step(0); }, 0.05).mean;
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

Kernels measureKernels(const Options &o, double S) {
  int64_t M = o.rows, H = o.hidden, T = o.seq, Bt = o.rows / o.seq;
  int64_t A = o.heads, D = o.hidden / o.heads, V = o.vocab;
  // GEMMs, f32 and f64: the step's shapes (forward and backward) and 512^3.
  std::vector<Case> mm32, mm64, big;
  auto linears = blockLinears(o);
  for (size_t i = 0; i < linears.size(); ++i) {
    auto [k, n] = linears[i];
    for (Case &c : gemmCases<float>(M, k, n, S, true)) {
      if (i + 1 == linears.size()) // the output projection: once per step
        c.weight = 1.0 / static_cast<double>(o.layers);
      mm32.push_back(c);
    }
    for (Case &c : gemmCases<double>(M, k, n, S, false))
      mm64.push_back(c);
  }
  for (Case &c : gemmCases<float>(512, 512, 512, S, false))
    big.push_back(c);
  for (Case &c : gemmCases<double>(512, 512, 512, S, false))
    big.push_back(c);
  // Streaming bandwidth (memcpy, read + write counted) at the step's
  // working set (the largest activation of a block, M x 4H floats) and at
  // 32 MiB (beyond the caches: recorded, not used).
  auto copyRate = [&](int64_t count, Stat &st) {
    std::vector<float> src = randomVec<float>(count, 5), dst(count);
    st = secondsPerCall(
        [&] { std::memcpy(dst.data(), src.data(), count * sizeof(float)); }, S);
    return 2.0 * count * sizeof(float) / st.mean;
  };
  Stat copy, copyBig;
  double bw = copyRate(M * 4 * H, copy);
  double bwBig = copyRate((32 << 20) / 4, copyBig);

  // Data movement at the step's sizes (no FLOPs in NNCost).
  std::vector<Case> mem;
  {
    std::vector<int32_t> idx(M);
    for (int64_t i = 0; i < M; ++i)
      idx[i] = static_cast<int32_t>((i * 37) % V);
    std::vector<float> table = randomVec<float>(V * H, 6), y(M * H);
    mem.push_back({"memory", "embedding", 0, 4.0 * (M + V * H + M * H),
                   secondsPerCall(
                       [&] {
                         check(fsdp_embedding(gs, FSDP_F32, idx.data(),
                                              FSDP_I32, table.data(), y.data(),
                                              M, V, H));
                       },
                       S)});
    std::vector<float> qkv = randomVec<float>(M * 3 * H, 7), q(M * H), k(M * H),
                       v(M * H);
    std::vector<void *> outs = {q.data(), k.data(), v.data()};
    std::vector<int64_t> sizes = {H, H, H};
    mem.push_back({"memory", "split", 0, 4.0 * 2 * M * 3 * H,
                   secondsPerCall(
                       [&] {
                         check(fsdp_split(gs, FSDP_F32, qkv.data(), outs.data(),
                                          sizes.data(), 3, M, 1));
                       },
                       S)});
    std::vector<const void *> ins = {q.data(), k.data(), v.data()};
    mem.push_back({"memory", "concat", 0, 4.0 * 2 * M * 3 * H,
                   secondsPerCall(
                       [&] {
                         check(fsdp_concat(gs, FSDP_F32, ins.data(), qkv.data(),
                                           sizes.data(), 3, M, 1));
                       },
                       S)});
    std::vector<float> pos = randomVec<float>(T * H, 8), yp(M * H);
    mem.push_back({"memory", "position_embedding", 0, 4.0 * (2 * M * H + T * H),
                   secondsPerCall(
                       [&] {
                         check(fsdp_position_embedding(gs, FSDP_F32, q.data(),
                                                       pos.data(), yp.data(),
                                                       Bt, T, H));
                       },
                       S)});
    // fsdp.flatten of a block's gradients into its flat buffer.
    std::vector<float> flat(12 * H * H + 13 * H);
    std::vector<const void *> parts = {qkv.data(), y.data(), k.data()};
    std::vector<int64_t> partN = {M * 3 * H, M * H, M * H},
                         offs = {0, M * 3 * H, M * 4 * H};
    int64_t flatN =
        std::max<int64_t>(static_cast<int64_t>(flat.size()), M * 5 * H);
    flat.resize(flatN);
    mem.push_back({"memory", "flatten", 0, 4.0 * (5 * M * H + flatN),
                   secondsPerCall(
                       [&] {
                         check(fsdp_flatten(gs, FSDP_F32, parts.data(),
                                            partN.data(), offs.data(), 3,
                                            flat.data(), flatN));
                       },
                       S)});
  }
  // Not in the fit (the main job has no nn.broadcast): the generic
  // broadcast kernel, recorded.
  std::vector<Case> info;
  {
    std::vector<float> bias = randomVec<float>(4 * H, 8), yb(M * 4 * H);
    info.push_back({"info", "broadcast", 0, 4.0 * (4 * H + M * 4 * H),
                    secondsPerCall(
                        [&] {
                          const int64_t shape[2] = {M, 4 * H}, axes[1] = {0};
                          check(fsdp_broadcast(gs, FSDP_F32, bias.data(), shape,
                                               2, axes, 1, yb.data()));
                        },
                        S)});
  }

  // Attention (forward + backward) at [Bt, T, A·D].
  std::vector<Case> att;
  {
    std::vector<float> q = randomVec<float>(M * H, 9),
                       k = randomVec<float>(M * H, 10),
                       v = randomVec<float>(M * H, 11),
                       dout = randomVec<float>(M * H, 12);
    std::vector<float> out(M * H), dq(M * H), dk(M * H), dv(M * H);
    double dense = 4.0 * Bt * T * T * H; // 4·B·Hq·T²·D
    att.push_back({"attention", "attention", dense / 2, 4.0 * 4 * M * H,
                   secondsPerCall(
                       [&] {
                         check(fsdp_attention(gs, FSDP_F32, q.data(), k.data(),
                                              v.data(), out.data(), Bt, T, A, A,
                                              D));
                       },
                       S)});
    att.push_back(
        {"attention", "attention_grad", dense / 4 * 5, 4.0 * 7 * M * H,
         secondsPerCall(
             [&] {
               check(fsdp_attention_grad(gs, FSDP_F32, q.data(), k.data(),
                                         v.data(), dout.data(), dq.data(),
                                         dk.data(), dv.data(), Bt, T, A, A, D));
             },
             S)});
  }

  // The other ops of a block at their sizes (NNCost per-element FLOPs).
  std::vector<Case> ew;
  {
    int64_t n = M * H, n4 = M * 4 * H;
    std::vector<float> x = randomVec<float>(n4, 13),
                       dy = randomVec<float>(n4, 14), y(n4),
                       w = randomVec<float>(H, 15), b = randomVec<float>(H, 16),
                       dw(H), db(H);
    ew.push_back({"elementwise", "layer_norm", 8.0 * n, 4.0 * (2 * n + 2 * H),
                  secondsPerCall(
                      [&] {
                        check(fsdp_layer_norm(gs, FSDP_F32, x.data(), w.data(),
                                              b.data(), y.data(), M, H, 1e-5));
                      },
                      S)});
    ew.push_back(
        {"elementwise", "layer_norm_grad", 16.0 * n, 4.0 * (3 * n + 3 * H),
         secondsPerCall(
             [&] {
               check(fsdp_layer_norm_grad(gs, FSDP_F32, x.data(), w.data(),
                                          dy.data(), y.data(), dw.data(),
                                          db.data(), M, H, 1e-5));
             },
             S)});
    ew.push_back(
        {"elementwise", "gelu", 8.0 * n4, 4.0 * 2 * n4,
         secondsPerCall(
             [&] { check(fsdp_gelu(gs, FSDP_F32, x.data(), y.data(), n4, 1)); },
             S)});
    ew.push_back({"elementwise", "gelu_grad", 14.0 * n4, 4.0 * 3 * n4,
                  secondsPerCall(
                      [&] {
                        check(fsdp_gelu_grad(gs, FSDP_F32, x.data(), dy.data(),
                                             y.data(), n4, 1));
                      },
                      S)});
    ew.push_back(
        {"elementwise", "add", 1.0 * n, 4.0 * 3 * n,
         secondsPerCall(
             [&] {
               check(fsdp_add(gs, FSDP_F32, x.data(), dy.data(), y.data(), n));
             },
             S)});
    std::vector<float> red(4 * H);
    ew.push_back({"elementwise", "reduce_sum", 1.0 * n4, 4.0 * (n4 + 4 * H),
                  secondsPerCall(
                      [&] {
                        const int64_t shape[2] = {M, 4 * H}, axes[1] = {0};
                        check(fsdp_reduce_sum(gs, FSDP_F32, dy.data(), shape, 2,
                                              axes, 1, red.data()));
                      },
                      S)});
    // AdamW over one block's shard: 12·H² + 13·H parameters / N ranks.
    int64_t p = (12 * H * H + 13 * H + world - 1) / world;
    std::vector<float> pp = randomVec<float>(p, 17),
                       g = randomVec<float>(p, 18),
                       m1 = randomVec<float>(p, 19), v1(p, 0.5f), po(p), mo(p),
                       vo(p);
    ew.push_back({"elementwise", "adamw_update", 16.0 * p, 4.0 * 7 * p + 8,
                  secondsPerCall(
                      [&] {
                        const int64_t step = 3;
                        check(fsdp_adamw_update(
                            gs, FSDP_F32, pp.data(), g.data(), m1.data(),
                            v1.data(), &step, FSDP_I64, po.data(), mo.data(),
                            vo.data(), p, 1e-3, 0.9, 0.999, 1e-8, 0.1));
                      },
                      S)});
    std::vector<float> logits = randomVec<float>(M * V, 20), dl(M * V);
    std::vector<int32_t> labels(M);
    for (int64_t i = 0; i < M; ++i)
      labels[i] = static_cast<int32_t>((i * 13) % V);
    ew.push_back(
        {"elementwise", "cross_entropy", 4.0 * M * V, 4.0 * (M * V + M + 1),
         secondsPerCall(
             [&] {
               float l = 0;
               check(fsdp_cross_entropy(gs, FSDP_F32, logits.data(),
                                        labels.data(), FSDP_I32, M, V, &l));
             },
             S)});
    ew.push_back({"elementwise", "cross_entropy_grad", 5.0 * M * V,
                  4.0 * (2 * M * V + M + 1),
                  secondsPerCall(
                      [&] {
                        const float one = 1.0f;
                        check(fsdp_cross_entropy_grad(
                            gs, FSDP_F32, logits.data(), labels.data(),
                            FSDP_I32, &one, dl.data(), M, V));
                      },
                      S)});
  }

  return Kernels{mm32, mm64, big, mem, info, att, ew, copy, copyBig, bw, bwBig};
}

/// Per case, the pass with the median seconds (the passes run one after
/// another, so a burst of other work on the machine spoils at most one).
Kernels medianOfPasses(std::vector<Kernels> passes) {
  Kernels k = passes[0];
  auto pick = [&](std::vector<Case> Kernels::*set) {
    for (size_t i = 0; i < (k.*set).size(); ++i) {
      std::vector<Case> cs;
      for (Kernels &p : passes)
        cs.push_back((p.*set)[i]);
      std::sort(cs.begin(), cs.end(), [](const Case &x, const Case &y) {
        return x.seconds.mean < y.seconds.mean;
      });
      (k.*set)[i] = cs[cs.size() / 2];
    }
  };
  for (auto set : {&Kernels::mm32, &Kernels::mm64, &Kernels::big, &Kernels::mem,
                   &Kernels::info, &Kernels::att, &Kernels::ew})
    pick(set);
  std::vector<double> bws, big;
  for (Kernels &p : passes) {
    bws.push_back(p.bw);
    big.push_back(p.bwBig);
  }
  std::sort(bws.begin(), bws.end());
  std::sort(big.begin(), big.end());
  k.bw = bws[bws.size() / 2];
  k.bwBig = big[big.size() / 2];
  return k;
}

int runMain(const Options &o) {
  rank = fsdp_rank();
  world = fsdp_world_size();
  fsdp::rt::Device cpuDevice("cpu");
  dev = cpuDevice.get();
  gs = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  check(fsdp_channel_create(dev, &gworld));
  struct ChannelGuard {
    ~ChannelGuard() { fsdp_channel_destroy(gworld); }
  } channelGuard;
  std::string loadBefore = loadAverage();
  double S = o.seconds;
  int64_t M = o.rows, H = o.hidden, T = o.seq, A = o.heads, V = o.vocab;
  if (rank == 0)
    std::fprintf(stderr,
                 "fsdp-calibrate: %d ranks, %lld rows x hidden %lld, %g s per "
                 "kernel...\n",
                 world, (long long)M, (long long)H, S);

  std::vector<Kernels> passes;
  for (int pass = 0; pass < 3; ++pass)
    passes.push_back(measureKernels(o, S / 3));
  Kernels K = medianOfPasses(passes);
  auto &mm32 = K.mm32, &mm64 = K.mm64, &big = K.big, &mem = K.mem,
       &info = K.info, &att = K.att, &ew = K.ew;
  double bw = K.bw, bwBig = K.bwBig;
  Stat copyBig = K.copyBig;
  double peak32 = 0, peak64 = 0;
  for (const Case &c : mm32)
    peak32 = std::max(peak32, c.flops / c.seconds.mean);
  for (const Case &c : mm64)
    peak64 = std::max(peak64, c.flops / c.seconds.mean);
  peak32 = std::max(peak32, big[0].flops / big[0].seconds.mean);
  peak64 = std::max(peak64, big[1].flops / big[1].seconds.mean);

  double memBytes = 0, effMem = 0;
  // Weights: occurrences per block of the main job's step (GPT-2: 2
  // layer norms, 1 GELU, the residual adds and their gradient sums, the
  // bias gradients as 9H/4H reductions of the 4H one, one AdamW over the
  // block's shard; once-per-step ops count 1/L).
  double perStep = 1.0 / static_cast<double>(o.layers);
  for (Case &c : ew) {
    if (c.name == "layer_norm" || c.name == "layer_norm_grad")
      c.weight = 2;
    else if (c.name == "add")
      c.weight = 4;
    else if (c.name == "reduce_sum")
      c.weight = 2.25;
    else if (c.name == "cross_entropy" || c.name == "cross_entropy_grad")
      c.weight = perStep;
  }
  for (Case &c : mem)
    if (c.name == "embedding" || c.name == "position_embedding")
      c.weight = perStep;
  memBytes = 0;
  for (const Case &c : mem)
    memBytes += c.weight * c.bytes;
  effMem = std::min(1.0, memBytes / sumSeconds(mem) / bw);
  double effMatmul = solveEfficiency(mm32, peak32, bw, effMem);
  double effAtt = solveEfficiency(att, peak32, bw, effMem);
  double effEw = solveEfficiency(ew, peak32, bw, effMem);

  // Collectives.
  std::vector<CollPoint> coll;
  double alpha = 0, busBw = bw, fitErr = 0;
  if (world > 1) {
    coll = measureCollectives(std::max(0.05, S / 2));
    fitRing(coll, world, alpha, busBw, fitErr);
  }
  Host hostWork = measureHost(std::max(0.05, S / 3));
  Overlap ov = measureOverlap(o, std::max(0.3, S));
  Sync sync = measureSync(o, std::max(0.6, 2 * S));

  // Per op kind: the efficiency at which the roofline reproduces that op's
  // measured kernels alone (ops with FLOPs: the FLOP term's, as the class
  // fit; data movement: bytes per second over memory_bandwidth).
  std::map<std::string, std::vector<Case>> byOp;
  auto opName = [](const Case &c) -> std::string {
    if (c.name.rfind("linear ", 0) == 0)
      return "nn.linear";
    if (c.name.rfind("matmul ", 0) == 0)
      return "nn.matmul";
    if (c.name == "flatten")
      return "fsdp.flatten";
    return "nn." + c.name;
  };
  for (auto *set : {&mm32, &att, &ew, &mem, &info})
    for (const Case &c : *set)
      byOp[opName(c)].push_back(c);
  json opEff = json::object();
  for (auto &[op, cases] : byOp) {
    bool movement = true;
    for (const Case &c : cases)
      movement = movement && c.flops == 0;
    double bytes = 0;
    for (const Case &c : cases)
      bytes += c.weight * c.bytes;
    opEff[op] = movement ? std::min(1.0, bytes / sumSeconds(cases) / bw)
                         : solveEfficiency(cases, peak32, bw, effMem);
  }

  if (rank != 0)
    return 0;
  std::string loadAfter = loadAverage();
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double ram = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  std::string name = !o.name.empty()
                         ? o.name
                         : "this machine: " + std::to_string(world) +
                               " ranks on " + std::string(host) + " (" +
                               cpuModel() + ", " + std::to_string(cores) +
                               " cores), measured by fsdp-calibrate";
  std::string link = "MPI over shared memory (the runtime's collectives: "
                     "MPI_Iallgather / MPI_Ireduce_scatter_block), measured";
  json spec;
  spec["name"] = name;
  spec["peak_flops"] = {
      {"f64", peak64}, {"f32", peak32}, {"bf16", peak32}, {"f16", peak32}};
  spec["memory_bytes"] = ram / world;
  spec["memory_bandwidth"] = bw;
  spec["devices_per_node"] = world;
  spec["intra_node"] = {
      {"bus_bandwidth", busBw}, {"latency_s", alpha}, {"link", link}};
  spec["inter_node"] = {{"bus_bandwidth", busBw},
                        {"latency_s", alpha},
                        {"link", "one node: the intra-node values"}};
  spec["efficiency"] = {{"matmul", effMatmul},
                        {"attention", effAtt},
                        {"elementwise", effEw},
                        {"memory", effMem}};
  spec["op_efficiency"] = opEff;
  spec["dispatch_overhead_s"] = hostWork.dispatch;
  if (hostWork.ioBandwidth > 0)
    spec["step_io_bandwidth"] = hostWork.ioBandwidth;
  spec["comm_overlap"] = ov.overlap;
  spec["collective_sync_s"] = sync.sync;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "measured %s by fsdp-calibrate with %d ranks at once on %ld "
                "cores (%s): rows %lld, hidden %lld, seq %lld, heads %lld, "
                "vocab %lld, %g s per kernel",
                today().c_str(), world, cores,
                world > cores ? "oversubscribed" : "not oversubscribed",
                (long long)M, (long long)H, (long long)T, (long long)A,
                (long long)V, S);
  spec["sources"] = json::array(
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
       "collectives: fsdp_all_gather_start / fsdp_reduce_scatter_start + "
       "fsdp_wait, 8 KiB..4 MiB, back to back in batches of 8, median over "
       "batches of the max over ranks; alpha, B fitted "
       "to t = (G-1)*alpha + (G-1)/G*S/B by least squares on relative error "
       "(Thakur, Rabenseifner & Gropp 2005; nccl-tests PERFORMANCE.md)",
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
       "median of 3 (skew at a collective: Petrini et al. SC 2003)"});
  json measured;
  measured["ranks"] = world;
  measured["load_average_before"] = loadBefore;
  measured["load_average_after"] = loadAfter;
  measured["cores"] = cores;
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
  measured["overlap"] = {{"all_gather_bytes", ov.bytes},
                         {"gemms", ov.gemms},
                         {"compute_seconds", ov.compute},
                         {"comm_seconds", ov.comm},
                         {"both_seconds", ov.both}};
  spec["measured"] = measured;

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
               peak32, peak64, bw, effMatmul, effAtt, effEw, effMem, alpha,
               busBw, 100 * fitErr, hostWork.dispatch, hostWork.ioBandwidth,
               ov.overlap, sync.sync);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  if (fsdp_init(&argc, &argv) != FSDP_OK) {
    std::fprintf(stderr, "fsdp-calibrate: %s\n", fsdp_last_error());
    return 1;
  }
  try {
    runMain(o);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-calibrate: error: ") + e.what()).c_str(), 1);
  }
  fsdp_finalize();
  return 0;
}
