//===- Report.cpp - What fsdp-run reports at the end of a run -------------===//
#include "fsdp/tooling/Report.h"
#include "fsdp/BlasRecord.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sys/resource.h>

using fsdp::Error;
using fsdp::rt::AllocMode;
using fsdp::rt::Executor;
using fsdp::schedule::IoDesc;
using fsdp::schedule::Program;

namespace fsdp::tooling {

namespace {

void appendNumber(std::string &s, double v, bool isF32) {
  if (!std::isfinite(v)) {
    s += "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, isF32 ? "%.9g" : "%.17g", v);
  s += buf;
}

/// Per unit, the whole padded buffer of input role `role` of each
/// tensor-parallel rank t < T on rank 0 (empty elsewhere; units without
/// such an input are absent). Layout "full": the copy of world rank t.
/// Layout "shard": the shards of the first replica's shard group of
/// tensor-parallel rank t (world ranks d·T + t, d < S) side by side.
/// `maxDiff` is raised to the largest |difference| between those and the
/// copies the other ranks (replicas) hold, and between the tensor-parallel
/// ranks' copies of a parameter replicated in the group. Collective over
/// `comm` (MPI_COMM_WORLD, or this pipeline stage's ranks; `rank` is the
/// rank in it).
std::map<std::string, std::vector<std::vector<double>>>
gatherRole(const Executor &ex, const std::string &role, int rank,
           double &maxDiff, MPI_Comm comm) {
  const Program &p = ex.program();
  std::map<std::string, std::vector<std::vector<double>>> result;
  int64_t n = p.worldSize(), s = p.shardSize(), T = p.tensorParallel();
  for (const fsdp::schedule::UnitDesc &u : p.units()) {
    const IoDesc *io = p.findUnitInput(role, u.name);
    if (!io)
      continue;
    std::vector<double> local;
    ex.read(io->buffer, local);
    int64_t cnt = static_cast<int64_t>(local.size());
    std::vector<double> all(rank == 0 ? cnt * n : 0);
    if (MPI_Gather(local.data(), static_cast<int>(cnt), MPI_DOUBLE, all.data(),
                   static_cast<int>(cnt), MPI_DOUBLE, 0, comm) != MPI_SUCCESS)
      throw Error("MPI_Gather of unit '" + u.name + "' failed");
    if (rank != 0)
      continue;
    // Copies: every data-parallel rank for "full"; the replicas k·S.. for
    // "shard".
    bool full = io->layout == "full";
    int64_t copy = full ? cnt : cnt * s, copies = full ? n / T : n / T / s;
    std::vector<std::vector<double>> perTp(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t k = 0; k < copies; ++k) {
        std::vector<double> c(static_cast<size_t>(copy));
        for (int64_t j = 0; j < copy / cnt; ++j) {
          int64_t d = k * (copy / cnt) + j;
          std::copy_n(all.begin() + (d * T + t) * cnt, cnt,
                      c.begin() + j * cnt);
        }
        if (k == 0)
          perTp[static_cast<size_t>(t)] = std::move(c);
        else
          for (int64_t i = 0; i < copy; ++i)
            maxDiff = std::max(
                maxDiff, std::fabs(c[i] - perTp[static_cast<size_t>(t)][i]));
      }
    }
    // A parameter replicated in the tensor-parallel group: its copies
    // (same flat offsets on every tensor-parallel rank) agree.
    for (const fsdp::schedule::ParamDesc &pd : u.params)
      if (pd.tpDim < 0)
        for (int64_t t = 1; t < T; ++t)
          for (int64_t i = pd.offset; i < pd.offset + pd.numel; ++i)
            maxDiff =
                std::max(maxDiff, std::fabs(perTp[static_cast<size_t>(t)][i] -
                                            perTp[0][i]));
    result[u.name] = std::move(perTp);
  }
  return result;
}

/// Writes {"fqn": {"shape": [...], "data": [...]}, ...} of the gathered
/// units (padding stripped) into `out`.
/// Under tensor parallelism each parameter is assembled from the
/// tensor-parallel ranks' slices (ParamDesc::globalIndex) into its global
/// shape.
void appendRole(
    const Program &p,
    const std::map<std::string, std::vector<std::vector<double>>> &units,
    std::string &out) {
  int64_t T = p.tensorParallel();
  out += "{";
  bool firstParam = true;
  for (const fsdp::schedule::UnitDesc &u : p.units()) {
    auto it = units.find(u.name);
    if (it == units.end())
      continue;
    const std::vector<std::vector<double>> &perTp = it->second;
    bool f32 =
        u.dtype != fsdp::schedule::DType::F64; // 9 digits for f32/bf16/f16
    for (const fsdp::schedule::ParamDesc &pd : u.params) {
      out += firstParam ? "\n  " : ",\n  ";
      firstParam = false;
      out += nlohmann::json(pd.fqn).dump() + ": {\"shape\": [";
      for (size_t i = 0; i < pd.globalShape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(pd.globalShape[i]);
      out += "], \"data\": [";
      std::vector<double> global(
          static_cast<size_t>(pd.tpDim < 0 ? pd.numel : pd.numel * T));
      for (int64_t t = 0; t < (pd.tpDim < 0 ? 1 : T); ++t)
        for (int64_t i = 0; i < pd.numel; ++i)
          global[static_cast<size_t>(pd.globalIndex(i, t, T))] =
              perTp[static_cast<size_t>(t)][pd.offset + i];
      for (size_t i = 0; i < global.size(); ++i) {
        if (i)
          out += ",";
        appendNumber(out, global[i], f32);
      }
      out += "]}";
    }
  }
  out += "}";
}

double mean(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double stdev(const std::vector<double> &v) {
  if (v.size() < 2)
    return 0;
  double m = mean(v), s = 0;
  for (double x : v)
    s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace

/// This process's peak resident set (getrusage ru_maxrss, KiB on Linux), in
/// bytes.
int64_t peakRssBytes() {
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

nlohmann::json gatherProfile(bool enabled, const StepLog &log,
                             int64_t worldSize) {
  // Per-op seconds and calls per step, mean over the job's ranks. The ranks
  // need not run the same instructions (a pipeline's stages do not), so each
  // rank's table travels as JSON text and is merged by op name; an op a rank
  // never ran counts zero there.
  nlohmann::json profile = nlohmann::json::object();
  if (!enabled)
    return profile;
  double timedSteps = static_cast<double>(log.stepTimes.size());
  double inSteps = 0;
  nlohmann::json local = nlohmann::json::object();
  for (int i = 0, count = fsdp_profile_count(); i < count; ++i) {
    local[fsdp_profile_op(i)] = {fsdp_profile_seconds(i) / timedSteps,
                                 static_cast<double>(fsdp_profile_calls(i)) /
                                     timedSteps};
    inSteps += fsdp_profile_seconds(i);
  }
  // Not in any instruction: the data upload, binding the inputs, the
  // carried state's copies, the final waits' bookkeeping, the loss read.
  local["(step set-up)"] = {(log.profiledSeconds - inSteps) / timedSteps, 1.0};
  std::string text = local.dump();
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(ranks), offsets(ranks);
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT,
                MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < ranks; ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(),
                 offsets.data(), MPI_CHAR, MPI_COMM_WORLD);
  std::map<std::string, std::pair<double, double>> sum;
  for (int r = 0; r < ranks; ++r) {
    // Named: a temporary's items() would dangle in the range-for.
    nlohmann::json table = nlohmann::json::parse(all.substr(
        static_cast<size_t>(offsets[r]), static_cast<size_t>(lengths[r])));
    for (auto &[op, v] : table.items()) {
      sum[op].first += v[0].get<double>();
      sum[op].second += v[1].get<double>();
    }
  }
  auto n = static_cast<double>(worldSize);
  for (auto &[op, v] : sum)
    profile[op] = {{"seconds", v.first / n}, {"calls", v.second / n}};
  return profile;
}

/// Pipeline parallelism: the stage leaders' documents (rank 0 of each
/// stage's ranks) merged on rank 0, their units side by side.
static std::string mergeStages(const std::string &mine, bool leader, int rank) {
  int len = leader ? static_cast<int>(mine.size()) : 0, n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> lens(static_cast<size_t>(n)), at(static_cast<size_t>(n));
  if (MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0,
                 MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error("MPI_Gather of the stages' --dump-params sizes failed");
  int total = 0;
  for (int r = 0; r < n; ++r) {
    at[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(rank == 0 ? static_cast<size_t>(total) : 0, '\0');
  if (MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                  at.data(), MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error("MPI_Gatherv of the stages' --dump-params failed");
  if (rank != 0)
    return {};
  nlohmann::json merged = {{"params", nlohmann::json::object()},
                           {"exp_avg", nlohmann::json::object()},
                           {"exp_avg_sq", nlohmann::json::object()},
                           {"replica_max_abs_diff", 0.0}};
  for (int r = 0; r < n; ++r) {
    if (!lens[static_cast<size_t>(r)])
      continue;
    nlohmann::json d = nlohmann::json::parse(
        all.substr(static_cast<size_t>(at[static_cast<size_t>(r)]),
                   static_cast<size_t>(lens[static_cast<size_t>(r)])));
    double tiedDiff = 0;
    for (const char *role : {"params", "exp_avg", "exp_avg_sq"}) {
      // A tied parameter's copies on two stages should agree exactly; their
      // distance counts as a replica's.
      for (auto &[fqn, t] : d[role].items())
        if (merged[role].contains(fqn)) {
          const auto &a = merged[role][fqn]["data"], &b = t["data"];
          if (a.size() != b.size())
            tiedDiff = INFINITY;
          for (size_t i = 0; i < a.size() && i < b.size(); ++i)
            tiedDiff = std::max(
                tiedDiff, std::abs(a[i].get<double>() - b[i].get<double>()));
        }
      merged[role].update(d[role]);
    }
    merged["replica_max_abs_diff"] =
        std::max(merged["replica_max_abs_diff"].get<double>(), tiedDiff);
    if (d["replica_max_abs_diff"].is_number())
      merged["replica_max_abs_diff"] =
          std::max(merged["replica_max_abs_diff"].get<double>(),
                   d["replica_max_abs_diff"].get<double>());
  }
  return merged.dump() + "\n";
}

void dumpParams(const std::string &path, const Executor &ex, int rank) {
  const Program &p = ex.program();
  // Each pipeline stage gathers its own units over its ranks.
  MPI_Comm comm = MPI_COMM_WORLD;
  int worldRank = rank;
  if (p.pipelineStages() > 1) {
    if (MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(p.pipelineStage()),
                       rank, &comm) != MPI_SUCCESS)
      throw Error("MPI_Comm_split of the pipeline stages failed");
    MPI_Comm_rank(comm, &rank);
  }
  double maxDiff = 0;
  std::string text = "{\"params\": ";
  // A unit with an f32 master reports it; other units their (widened)
  // param buffer.
  auto params = gatherRole(ex, "master", rank, maxDiff, comm);
  for (auto &[name, values] : gatherRole(ex, "param", rank, maxDiff, comm))
    params.emplace(name, std::move(values)); // keeps a master if present
  appendRole(p, params, text);
  text += ",\n\"exp_avg\": ";
  appendRole(p, gatherRole(ex, "exp_avg", rank, maxDiff, comm), text);
  text += ",\n\"exp_avg_sq\": ";
  appendRole(p, gatherRole(ex, "exp_avg_sq", rank, maxDiff, comm), text);
  // Replicated copies (full layouts, other replicas) should agree exactly.
  text += ",\n\"replica_max_abs_diff\": ";
  appendNumber(text, maxDiff, false);
  text += "}\n";
  if (p.pipelineStages() > 1) {
    MPI_Comm_free(&comm);
    text = mergeStages(text, rank == 0, worldRank);
    rank = worldRank;
  }
  if (rank == 0 && maxDiff != 0)
    std::fprintf(stderr,
                 "fsdp-run: warning: replicated parameter or optimizer "
                 "state copies differ by up to %g\n",
                 maxDiff);
  if (rank == 0) {
    std::ofstream f(path);
    if (!f || !(f << text) || !f.flush())
      throw Error("cannot write --dump-params file '" + path + "'");
  }
}

nlohmann::json summaryJson(const Options &opt, const Program &prog,
                           const Executor &ex, fsdp_device device,
                           const StepLog &log, const RunTotals &t) {
  int64_t n = prog.worldSize() * prog.pipelineStages();
  double st = median(log.stepTimes);
  // A figure the schedule does not give is null.
  auto planned = [](int64_t v) {
    return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
  };
  auto perStep = [&](fsdp_collective k) {
    return t.stats.comm_bytes[k] / opt.steps;
  };
  nlohmann::json summary = {
      {"world_size", n},
      {"steps", opt.steps},
      {"first_step", t.startStep + 1},
      {"losses", log.losses},
      {"final_loss", log.losses.back()},
      {"device", fsdp_device_name(device)},
      {"collectives", fsdp_device_collectives(device)},
      {"blas", fsdp::rt::blasRecord(device)},
      {"alloc", opt.alloc == AllocMode::Arena && ex.usesArena() ? "arena"
                                                                : "per-buffer"},
      {"step", ex.isCompiled() ? "compiled" : "interpreted"},
      {"peak_bytes", static_cast<int64_t>(t.most[0])},
      {"planned_peak_bytes", planned(prog.plannedPeakBytes())},
      {"planned_peak_bytes_with_scratch",
       planned(prog.plannedPeakBytesWithScratch())},
      {"device_peak_bytes", static_cast<int64_t>(t.most[2])},
      {"device_step_peak_bytes", static_cast<int64_t>(t.most[5])},
      {"device_workspace_bytes", static_cast<int64_t>(t.most[3])},
      {"device_comm_buffer_bytes", static_cast<int64_t>(t.most[4])},
      {"arena_bytes", static_cast<int64_t>(t.most[1])},
      {"init_peak_rss_bytes", static_cast<int64_t>(t.maxRss[0])},
      {"peak_rss_bytes", static_cast<int64_t>(t.maxRss[1])},
      {"state_outputs_in_place", ex.inPlaceOutputs()},
      {"state_outputs_copied", ex.copiedOutputs()},
      {"comm_bytes", perStep(FSDP_COLL_ALL_GATHER) +
                         perStep(FSDP_COLL_REDUCE_SCATTER) +
                         perStep(FSDP_COLL_ALL_REDUCE)},
      {"comm_bytes_by_collective",
       {{"all_gather", perStep(FSDP_COLL_ALL_GATHER)},
        {"reduce_scatter", perStep(FSDP_COLL_REDUCE_SCATTER)},
        {"all_reduce", perStep(FSDP_COLL_ALL_REDUCE)}}},
      {"comm_bytes_by_group",
       [&] {
         nlohmann::json g = nlohmann::json::object();
         for (const auto &[group, bytes] : t.channelBytes)
           g[group] = bytes / opt.steps;
         return g;
       }()},
      {"comm_bytes_by_rank",
       [&] {
         nlohmann::json ranks = nlohmann::json::array();
         for (const auto &channels : t.channelBytesByRank) {
           nlohmann::json g = nlohmann::json::object();
           for (const auto &[group, bytes] : channels)
             g[group] = bytes / opt.steps;
           ranks.push_back(std::move(g));
         }
         return ranks;
       }()},
      {"pipeline",
       {{"stages", prog.pipelineStages()},
        {"schedule", prog.pipelineSchedule()}}},
      {"sharding",
       {{"strategy", prog.strategy()},
        {"replicas", prog.replicas()},
        {"shard_size", prog.shardSize()}}},
      {"step_time_s", st},
      {"samples_per_s", st > 0 ? t.globalBatch / st : 0.0},
      {"step_time_mean_s", mean(log.stepTimes)},
      {"step_time_stdev_s", stdev(log.stepTimes)},
      {"timed_steps", static_cast<int64_t>(log.stepTimes.size())},
      {"progress", fsdp_progress_name(fsdp_get_progress())},
      {"compute_time_s", median(log.computeTimes)},
      {"comm_wait_time_s", median(log.commTimes)}};
  if (!log.lrs.empty())
    summary["lrs"] = log.lrs;
  if (!log.gradNorms.empty())
    summary["grad_norms"] = log.gradNorms;
  if (!log.lossScales.empty())
    summary["loss_scales"] = log.lossScales;
  if (!log.lossScales.empty() || !log.skippedSteps.empty())
    summary["skipped_steps"] = log.skippedSteps;
  // Per pipeline stage (docs/pipeline-parallel.md, "Memory"): the figures
  // above, max over the stage's ranks.
  if (!t.byStage.empty()) {
    nlohmann::json stages = nlohmann::json::array();
    const size_t k = RunTotals::kStageFigures;
    for (size_t s = 0; s * k < t.byStage.size(); ++s) {
      const long long *f = &t.byStage[s * k];
      stages.push_back({{"stage", s},
                        {"peak_bytes", f[0]},
                        {"device_peak_bytes", f[1]},
                        {"device_step_peak_bytes", f[2]},
                        {"planned_peak_bytes", planned(f[3])},
                        {"planned_peak_bytes_with_scratch", planned(f[4])}});
    }
    summary["pipeline"]["by_stage"] = std::move(stages);
  }
  if (opt.profile)
    summary["profile"] = t.profile;
  if (!t.rankIdle.empty()) {
    // The measured bubble: per world rank, the median idle seconds per step
    // and the part waited on transfers between stages.
    summary["pipeline"]["rank_idle_s"] = t.rankIdle;
    summary["pipeline"]["rank_pipeline_wait_s"] = t.rankPipelineWait;
  }
  if (t.globalTokens > 0)
    summary["tokens_per_s"] = st > 0 ? t.globalTokens / st : 0.0;
  return summary;
}

} // namespace fsdp::tooling
