//===- fsdp-run.cpp - Runs an fsdp schedule for K training steps ----------===//
//
//   mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]
//          [--data FILE.csv] [--dump-params PATH]
//
// Loads the schedule (world_size must be N), initialises every rank's shards
// deterministically (the full parameters do not depend on N), feeds synthetic
// or CSV data, runs K optimizer steps carrying parameter and optimizer-state
// outputs to the next step, prints "step s loss x" per step on rank 0 and, as
// the last line, one JSON summary. Any error on any rank aborts all ranks
// (MPI_Abort) with a message; bad arguments print the usage and exit 2.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Interpreter.h"
#include "fsdp/Sharding.h"
#include "fsdp/runtime.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using fsdp::rt::Error;
using fsdp::rt::HostValues;
using fsdp::rt::IoDesc;
using fsdp::rt::Program;

namespace {

//===--- Command line -----------------------------------------------------===//

struct Options {
  std::string schedule;
  int64_t steps = 1;
  uint64_t seed = 0;
  std::string dumpParams;
  std::string data;
};

const char *kUsage =
    "usage: mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]\n"
    "                [--data FILE.csv] [--dump-params PATH]\n"
    "  --steps K          optimizer steps to run (default 1, K >= 1)\n"
    "  --seed S           seed of parameter init and synthetic data (default 0)\n"
    "  --data FILE.csv    features/labels from FILE (lines f0,...,fF-1,label)\n"
    "                     instead of synthetic data\n"
    "  --dump-params PATH write the final unpadded parameters and AdamW\n"
    "                     moments as JSON on rank 0\n";

[[noreturn]] void usageError(const std::string &msg) {
  const char *r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!r || std::string(r) == "0")
    std::fprintf(stderr, "fsdp-run: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end)
    return false;
  out = v;
  return true;
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
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (a == "--steps") {
      if (!parseInt(value(), o.steps) || o.steps < 1)
        usageError("--steps needs an integer >= 1");
    } else if (a == "--seed") {
      int64_t s;
      if (!parseInt(value(), s) || s < 0)
        usageError("--seed needs a non-negative integer");
      o.seed = static_cast<uint64_t>(s);
    } else if (a == "--dump-params") {
      o.dumpParams = value();
    } else if (a == "--data") {
      o.data = value();
    } else if (a.size() > 1 && a[0] == '-') {
      usageError("unknown option " + a);
    } else if (o.schedule.empty()) {
      o.schedule = a;
    } else {
      usageError("more than one schedule file given ('" + o.schedule +
                 "' and '" + a + "')");
    }
  }
  if (o.schedule.empty())
    usageError("no schedule file given");
  return o;
}

//===--- Counter-based random numbers -------------------------------------===//

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): a bijective 64-bit mixer.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
/// FNV-1a 64-bit hash of a string (the parameter FQN).
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
/// Hash of a tuple of integers: h = splitmix64(h ^ v) folded left.
uint64_t hashKey(std::initializer_list<uint64_t> vals) {
  uint64_t h = 0x5eed5eed5eed5eedULL;
  for (uint64_t v : vals)
    h = splitmix64(h ^ v);
  return h;
}
/// Uniform in the open interval (0, 1) from the top 53 bits.
double uniform01(uint64_t h) {
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
/// Standard normal by Box-Muller from two hashes derived from h.
double normal01(uint64_t h) {
  double u1 = uniform01(splitmix64(h ^ 1)), u2 = uniform01(splitmix64(h ^ 2));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

enum Tag : uint64_t { kParam = 1, kFeature = 2, kTeacher = 3, kToken = 4,
                      kTokenMap = 5, kLabel = 6 };

/// Value of element `i` of parameter `fqn` for init string `init`.
double initValue(const std::string &init, uint64_t seed, const std::string &fqn,
                 int64_t i) {
  auto arg = [&](const char *prefix) -> double {
    size_t n = std::strlen(prefix);
    std::string body = init.substr(n, init.size() - n - 1);
    char *end = nullptr;
    double v = std::strtod(body.c_str(), &end);
    if (body.empty() || *end)
      throw Error("parameter '" + fqn + "': bad init '" + init + "'");
    return v;
  };
  auto is = [&](const char *prefix) {
    return init.rfind(prefix, 0) == 0 && init.back() == ')';
  };
  uint64_t h = hashKey({seed, kParam, fnv1a(fqn), static_cast<uint64_t>(i)});
  if (init == "zeros")
    return 0.0;
  if (init == "ones")
    return 1.0;
  if (is("uniform("))
    return arg("uniform(") * (2.0 * uniform01(h) - 1.0);
  if (is("normal("))
    return arg("normal(") * normal01(h);
  if (is("constant("))
    return arg("constant(");
  throw Error("parameter '" + fqn + "': unknown init '" + init +
              "' (supported: zeros, ones, uniform(a), normal(s), constant(v))");
}

//===--- Data -------------------------------------------------------------===//

struct CsvData {
  std::vector<std::vector<double>> features;
  std::vector<int64_t> labels;
};

CsvData readCsv(const std::string &path, int64_t featPerSample) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open data file '" + path + "'");
  CsvData d;
  std::string line;
  int64_t lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    std::vector<double> vals;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) {
      char *end = nullptr;
      double v = std::strtod(cell.c_str(), &end);
      while (end && (*end == ' ' || *end == '\t'))
        ++end;
      if (cell.find_first_not_of(" \t") == std::string::npos || *end)
        throw Error(path + ":" + std::to_string(lineNo) + ": '" + cell +
                    "' is not a number");
      vals.push_back(v);
    }
    if (static_cast<int64_t>(vals.size()) != featPerSample + 1)
      throw Error(path + ":" + std::to_string(lineNo) + ": expected " +
                  std::to_string(featPerSample + 1) + " values (" +
                  std::to_string(featPerSample) + " features and a label), got " +
                  std::to_string(vals.size()));
    double lab = vals.back();
    if (lab != std::floor(lab))
      throw Error(path + ":" + std::to_string(lineNo) + ": label " +
                  std::to_string(lab) + " is not an integer");
    d.labels.push_back(static_cast<int64_t>(lab));
    vals.pop_back();
    d.features.push_back(std::move(vals));
  }
  if (d.labels.empty())
    throw Error("data file '" + path + "' has no rows");
  return d;
}

/// Fills the data inputs (features, labels, tokens, targets) of one step.
class DataSource {
public:
  DataSource(const Program &p, const Options &o, int rank) : prog(p), opt(o) {
    int64_t n = p.worldSize();
    for (const IoDesc &io : p.inputs()) {
      if (io.role != "features" && io.role != "labels" && io.role != "tokens" &&
          io.role != "targets")
        continue;
      const auto &b = p.buffer(io.buffer);
      if (b.shape.empty())
        throw Error(p.name() + ": data input " + std::to_string(io.buffer) +
                    " must have a batch dimension");
      Slot s{io.buffer, io.role, b.shape[0], 0, 0};
      int64_t global = io.globalShape.empty() ? b.shape[0] * n
                                              : io.globalShape[0];
      if (global != b.shape[0] * n)
        throw Error(p.name() + ": data input " + std::to_string(io.buffer) +
                    ": global batch " + std::to_string(global) + " != local " +
                    std::to_string(b.shape[0]) + " x world_size " +
                    std::to_string(n));
      globalBatch = global;
      s.perSample = s.local ? b.numel / s.local : 0;
      s.firstRow = rank * s.local;
      slots.push_back(s);
    }
    for (const Slot &s : slots) {
      if (s.role == "features") features = &s;
      if (s.role == "tokens") tokens = &s;
    }
    classes = p.numClasses();
    if (!opt.data.empty()) {
      if (!features)
        throw Error("--data needs a schedule with a 'features' input");
      csv = readCsv(opt.data, features->perSample);
    }
  }

  void fill(int64_t step, HostValues &in) {
    std::vector<double> x;
    for (const Slot &s : slots) {
      std::vector<double> &v = in[s.buffer];
      v.assign(s.local * s.perSample, 0.0);
      for (int64_t r = 0; r < s.local; ++r)
        fillRow(step, s, s.firstRow + r, &v[r * s.perSample]);
    }
  }

  int64_t globalBatch = 0;

private:
  struct Slot {
    int64_t buffer;
    std::string role;
    int64_t local, perSample, firstRow;
  };

  // Features of global sample g at `step` (synthetic or from the CSV).
  void featureRow(int64_t step, int64_t g, double *out) const {
    if (!csv.labels.empty()) {
      const auto &row = csv.features[csvRow(step, g)];
      std::copy(row.begin(), row.end(), out);
      return;
    }
    for (int64_t j = 0; j < features->perSample; ++j)
      out[j] = normal01(hashKey({opt.seed, kFeature, (uint64_t)step,
                                 (uint64_t)g, (uint64_t)j}));
  }
  size_t csvRow(int64_t step, int64_t g) const {
    return static_cast<size_t>(((step - 1) * globalBatch + g) %
                               static_cast<int64_t>(csv.labels.size()));
  }
  int64_t needClasses() const {
    if (classes < 1)
      throw Error(prog.name() + ": cannot synthesise labels: the schedule "
                                "has no nn.cross_entropy to give the class "
                                "count");
    return classes;
  }
  int64_t token(int64_t step, int64_t g, int64_t t) const {
    return static_cast<int64_t>(
        hashKey({opt.seed, kToken, (uint64_t)step, (uint64_t)g, (uint64_t)t}) %
        static_cast<uint64_t>(needClasses()));
  }
  // The learnable next-token rule for synthetic targets: (a·tok + c) mod V.
  int64_t mapToken(int64_t tok) const {
    uint64_t v = static_cast<uint64_t>(needClasses());
    uint64_t a = 1 + hashKey({opt.seed, kTokenMap, 0}) % std::max<uint64_t>(v - 1, 1);
    uint64_t c = hashKey({opt.seed, kTokenMap, 1}) % v;
    return static_cast<int64_t>((a * static_cast<uint64_t>(tok) + c) % v);
  }

  void fillRow(int64_t step, const Slot &s, int64_t g, double *out) const {
    if (s.role == "features") {
      featureRow(step, g, out);
    } else if (s.role == "tokens") {
      for (int64_t t = 0; t < s.perSample; ++t)
        out[t] = static_cast<double>(token(step, g, t));
    } else if (s.role == "labels" && !csv.labels.empty()) {
      if (s.perSample != 1)
        throw Error("--data gives one label per sample but the labels input "
                    "has " + std::to_string(s.perSample));
      out[0] = static_cast<double>(csv.labels[csvRow(step, g)]);
    } else if (s.role == "labels" && features) {
      // Teacher labels: argmax_c sum_j T[c][j] x[p][j] per position p.
      int64_t c = needClasses(), pos = s.perSample;
      if (features->perSample % pos)
        throw Error(prog.name() + ": features per sample (" +
                    std::to_string(features->perSample) +
                    ") are not a multiple of label positions (" +
                    std::to_string(pos) + ")");
      int64_t f = features->perSample / pos;
      std::vector<double> x(features->perSample);
      featureRow(step, g, x.data());
      for (int64_t p = 0; p < pos; ++p) {
        int64_t best = 0;
        double bestVal = -INFINITY;
        for (int64_t k = 0; k < c; ++k) {
          double acc = 0;
          for (int64_t j = 0; j < f; ++j)
            acc += normal01(hashKey({opt.seed, kTeacher, (uint64_t)k,
                                     (uint64_t)j})) * x[p * f + j];
          if (acc > bestVal) {
            bestVal = acc;
            best = k;
          }
        }
        out[p] = static_cast<double>(best);
      }
    } else if ((s.role == "labels" || s.role == "targets") && tokens) {
      for (int64_t t = 0; t < s.perSample; ++t)
        out[t] = static_cast<double>(mapToken(token(step, g, t)));
    } else {
      for (int64_t t = 0; t < s.perSample; ++t)
        out[t] = static_cast<double>(
            hashKey({opt.seed, kLabel, (uint64_t)step, (uint64_t)g,
                     (uint64_t)t}) % static_cast<uint64_t>(needClasses()));
    }
  }

  const Program &prog;
  const Options &opt;
  std::vector<Slot> slots;
  const Slot *features = nullptr, *tokens = nullptr;
  int64_t classes = -1;
  CsvData csv;
};

//===--- Parameters ---------------------------------------------------------===//

/// This rank's shard of `unit`: flat element p of the unit is owned when
/// p in [rank*S, (rank+1)*S); padding and gaps between params are zero.
std::vector<double> initShard(const fsdp::rt::UnitDesc &u, uint64_t seed,
                              int rank, int64_t worldSize) {
  std::vector<double> shard(u.shardNumel, 0.0);
  fsdp::ShardRange own = fsdp::ownedRange(u.numel, worldSize, rank);
  int64_t begin = rank * u.shardNumel;
  for (const fsdp::rt::ParamDesc &p : u.params) {
    int64_t lo = std::max(own.begin, p.offset);
    int64_t hi = std::min(own.end, p.offset + p.numel);
    for (int64_t f = lo; f < hi; ++f)
      shard[f - begin] = initValue(p.init, seed, p.fqn, f - p.offset);
  }
  return shard;
}

void appendNumber(std::string &s, double v, bool isF32) {
  if (!std::isfinite(v)) {
    s += "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, isF32 ? "%.9g" : "%.17g", v);
  s += buf;
}

/// Gathers every unit's shards of `role` to rank 0 and writes, on rank 0,
/// {"fqn": {"shape": [...], "data": [...]}, ...} into `out`.
void gatherRole(const Program &p, const HostValues &state,
                const std::string &role, int rank, std::string &out) {
  out += "{";
  bool firstParam = true;
  for (const fsdp::rt::UnitDesc &u : p.units()) {
    const IoDesc *io = nullptr;
    for (const IoDesc &i : p.inputs())
      if (i.role == role && i.unit == u.name)
        io = &i;
    if (!io)
      continue;
    const std::vector<double> &shard = state.at(io->buffer);
    std::vector<double> full(rank == 0 ? u.paddedNumel : 0);
    int err = MPI_Gather(shard.data(), static_cast<int>(u.shardNumel),
                         MPI_DOUBLE, full.data(), static_cast<int>(u.shardNumel),
                         MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (err != MPI_SUCCESS)
      throw Error("MPI_Gather of unit '" + u.name + "' failed");
    if (rank != 0)
      continue;
    bool f32 = u.dtype == fsdp::rt::DType::F32;
    for (const fsdp::rt::ParamDesc &pd : u.params) {
      out += firstParam ? "\n  " : ",\n  ";
      firstParam = false;
      out += nlohmann::json(pd.fqn).dump() + ": {\"shape\": [";
      for (size_t i = 0; i < pd.shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(pd.shape[i]);
      out += "], \"data\": [";
      for (int64_t i = 0; i < pd.numel; ++i) {
        if (i)
          out += ",";
        appendNumber(out, full[pd.offset + i], f32);
      }
      out += "]}";
    }
  }
  out += "}";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int runMain(const Options &opt) {
  int rank = fsdp_rank();
  Program prog = Program::fromFile(opt.schedule);
  int64_t n = prog.worldSize();

  // Initial state: parameter shards and zero optimizer moments.
  HostValues state;
  for (const IoDesc &io : prog.inputs()) {
    if (io.role == "param")
      state[io.buffer] = initShard(*prog.findUnit(io.unit), opt.seed, rank, n);
    else if (io.role == "exp_avg" || io.role == "exp_avg_sq")
      state[io.buffer] =
          std::vector<double>(prog.findUnit(io.unit)->shardNumel, 0.0);
  }
  // Which output feeds which input at the next step.
  std::vector<std::pair<int64_t, int64_t>> carry;
  int64_t lossId = -1;
  for (const IoDesc &out : prog.outputs()) {
    if (out.role == "loss")
      lossId = out.buffer;
    if (out.role != "param" && out.role != "exp_avg" && out.role != "exp_avg_sq")
      continue;
    for (const IoDesc &in : prog.inputs())
      if (in.role == out.role && in.unit == out.unit)
        carry.push_back({out.buffer, in.buffer});
  }
  if (lossId < 0)
    throw Error(prog.name() + ": the schedule has no output with role 'loss'");
  int64_t stepId = -1;
  for (const IoDesc &io : prog.inputs())
    if (io.role == "step")
      stepId = io.buffer;

  DataSource data(prog, opt, rank);
  int64_t globalBatch = prog.globalBatch() > 0 ? prog.globalBatch()
                                               : data.globalBatch;
  fsdp_stats_reset();
  std::vector<double> losses, stepTimes;
  int64_t peak = 0;
  for (int64_t step = 1; step <= opt.steps; ++step) {
    HostValues in = state;
    data.fill(step, in);
    if (stepId >= 0)
      in[stepId] = {static_cast<double>(step)};
    double t0 = fsdp_now();
    HostValues out = prog.run(in);
    double dt = fsdp_now() - t0;
    peak = std::max(peak, prog.lastPeakBytes());
    for (auto [o, i] : carry)
      state[i] = std::move(out[o]);
    double local[1] = {out[lossId].at(0)}, sum[1];
    double maxDt = 0;
    if (MPI_Allreduce(local, sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Allreduce(&dt, &maxDt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) !=
            MPI_SUCCESS)
      throw Error("MPI_Allreduce of the loss failed");
    double loss = sum[0] / static_cast<double>(n);
    losses.push_back(loss);
    stepTimes.push_back(maxDt);
    if (rank == 0) {
      std::printf("step %lld loss %.6f\n", static_cast<long long>(step), loss);
      std::fflush(stdout);
    }
  }

  // Summary: maxima over ranks of peak bytes and per-step times.
  double perStep[2] = {fsdp_compute_seconds() / opt.steps,
                       fsdp_comm_wait_seconds() / opt.steps};
  double perStepMax[2];
  long long peakLL = peak, peakMax = 0;
  MPI_Allreduce(perStep, perStepMax, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&peakLL, &peakMax, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (!opt.dumpParams.empty()) {
    std::string text = "{\"params\": ";
    gatherRole(prog, state, "param", rank, text);
    text += ",\n\"exp_avg\": ";
    gatherRole(prog, state, "exp_avg", rank, text);
    text += ",\n\"exp_avg_sq\": ";
    gatherRole(prog, state, "exp_avg_sq", rank, text);
    text += "}\n";
    if (rank == 0) {
      std::ofstream f(opt.dumpParams);
      if (!f || !(f << text) || !f.flush())
        throw Error("cannot write --dump-params file '" + opt.dumpParams + "'");
    }
  }

  if (rank == 0) {
    double st = median(stepTimes);
    nlohmann::json summary = {
        {"world_size", n},
        {"steps", opt.steps},
        {"losses", losses},
        {"final_loss", losses.back()},
        {"peak_bytes", static_cast<int64_t>(peakMax)},
        {"comm_bytes", fsdp_comm_bytes_sent() / opt.steps},
        {"step_time_s", st},
        {"samples_per_s", st > 0 ? globalBatch / st : 0.0},
        {"compute_time_s", perStepMax[0]},
        {"comm_wait_time_s", perStepMax[1]}};
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options opt = parseArgs(argc, argv);
  if (fsdp_init(&argc, &argv) != FSDP_OK) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 1;
  }
  try {
    runMain(opt);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  }
  fsdp_finalize();
  return 0;
}
