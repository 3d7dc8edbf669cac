//===- SweepOutput.cpp - fsdp-sweep's table and JSON ----------------------===//
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Sweep/Sweep.h"

#include <algorithm>
#include <cstdio>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::sweep;
using json = nlohmann::ordered_json;

namespace {

std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

std::string format(const char *fmt, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

/// Prints the rows as a table with every column padded to its widest cell.
void printTable(llvm::raw_ostream &os, const std::vector<Plan> &plans,
                const ClusterSpec &spec, bool bucketLimits, bool ac, bool tp,
                bool pp) {
  std::vector<std::string> header = {
      "strategy",   "world",           "shard",         "policy",
      "units",      "bucket max/mean", "peak GiB/rank", "fits",
      "step s",     "tokens/s",        "MFU",           "exposed comm s",
      "step/bound", "bound",           "schedule"};
  std::vector<bool> rightAligned = {false, true, true,  false, true,
                                    true,  true, false, true,  true,
                                    true,  true, true,  false, false};
  if (bucketLimits) {
    header.insert(header.begin() + 4, "bucket limit");
    rightAligned.insert(rightAligned.begin() + 4, true);
  }
  if (ac) {
    header.insert(header.begin() + 4, "AC");
    rightAligned.insert(rightAligned.begin() + 4, false);
  }
  if (pp) { // the bubble before the bound; the degree and schedule after tp
    size_t bound = header.size() - 2;
    header.insert(header.begin() + bound, "bubble");
    rightAligned.insert(rightAligned.begin() + bound, true);
    header.insert(header.begin() + 2, "pp");
    rightAligned.insert(rightAligned.begin() + 2, false);
  }
  if (tp) { // after the world size: the tensor-parallel degree T
    header.insert(header.begin() + 2, "tp");
    rightAligned.insert(rightAligned.begin() + 2, true);
  }
  // A failed plan's reason runs from this column to the end of the line.
  const size_t reasonColumn = 4 + tp + pp + bucketLimits + ac;
  std::vector<std::vector<std::string>> rows;
  for (const Plan &p : plans) {
    std::string shard = p.shardSize ? std::to_string(p.shardSize)
                        : p.worldSize % (p.tp * p.pp)
                            ? std::string("-")
                            : std::to_string(p.worldSize / (p.tp * p.pp));
    std::vector<std::string> row = {p.strategy, std::to_string(p.worldSize),
                                    shard, p.policy()};
    if (pp)
      row.insert(row.begin() + 2,
                 p.pp > 1 ? std::to_string(p.pp) + " " + p.ppSchedule : "1");
    if (tp)
      row.insert(row.begin() + 2, std::to_string(p.tp));
    if (ac)
      row.push_back(p.activationCheckpoint);
    if (bucketLimits)
      row.push_back(p.bucketBytes > 0 ? humanBytes(p.bucketBytes)
                                      : std::string("off"));
    if (!p.error.empty()) {
      row.push_back("failed: " + p.error);
      rows.push_back(std::move(row));
      continue;
    }
    const json &r = p.report;
    int64_t peak = r["per_rank"]["peak_bytes"];
    row[2 + tp + pp] = std::to_string(r["grid"]["shard_size"].get<int64_t>());
    row.push_back(std::to_string(p.units));
    row.push_back(humanBytes(p.bucketMaxBytes) + " / " +
                  humanBytes(p.bucketMeanBytes));
    double gib = peak / double(int64_t(1) << 30);
    row.push_back(format(gib >= 0.01 ? "%.2f" : "%.2g", gib));
    row.push_back(deviceBytes(r) > spec.memoryBytes ? "NO"
                  : p.fitsOnlyWithAC                ? "yes (AC only)"
                                                    : "yes");
    row.push_back(format("%.4g", r["predicted_step_time_s"].get<double>()));
    row.push_back(format("%.0f", r.value("predicted_tokens_per_s", 0.0)));
    row.push_back(format("%.3f", r["mfu"].get<double>()));
    row.push_back(format("%.4g", r["exposed_comm_s"].get<double>()));
    row.push_back(format("%.3f", r.value("step_over_lower_bound", 0.0)));
    if (pp)
      row.push_back(r.contains("bubble_fraction")
                        ? format("%.3f", r["bubble_fraction"].get<double>())
                        : std::string("-"));
    row.push_back(stepBound(r, spec.memoryBytes));
    row.push_back(r.value("schedule", std::string("-")));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c)
    width[c] = header[c].size();
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size() && c < header.size(); ++c)
      if (row.size() != reasonColumn + 1 || c != reasonColumn)
        width[c] = std::max(width[c], row[c].size());
  auto print = [&](const std::vector<std::string> &row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c)
        line += "  ";
      bool last = c + 1 == row.size();
      size_t pad = width[c] > row[c].size() ? width[c] - row[c].size() : 0;
      if (rightAligned[c] &&
          (row.size() != reasonColumn + 1 || c != reasonColumn))
        line += std::string(pad, ' ') + row[c];
      else
        line += last ? row[c] : row[c] + std::string(pad, ' ');
    }
    os << line << "\n";
  };
  print(header);
  for (const auto &row : rows)
    print(row);
}

} // namespace

std::string sweep::stepBound(const json &r, double memoryBytes) {
  if (deviceBytes(r) > memoryBytes) // as "fits": reserved where modelled
    return "memory";
  double compute =
             r["compute_s"].get<double>() + r.value("host_overhead_s", 0.0),
         tp = r.value("tp_comm_s", 0.0),
         tpExposed = r.value("tp_exposed_s", 0.0),
         comm = r["comm_s"].get<double>(),
         exposed = r["exposed_comm_s"].get<double>(),
         bubble = r.value("bubble_s", 0.0);
  // The busiest stage's idle time, waiting on the other stages and the
  // transfers between them, beyond anything its own streams do.
  if (bubble > std::max({compute, comm, tpExposed, exposed}))
    return "bubble";
  if (comm > compute + tp)
    return "FSDP comm";
  if (tpExposed > compute && tpExposed >= exposed)
    return "TP comm";
  return exposed > compute ? "FSDP comm" : "compute";
}

void sweep::printSweep(llvm::raw_ostream &os, const SweepOptions &o,
                       const ClusterSpec &spec, const SweepResult &r) {
  const std::vector<Plan> &plans = r.plans;
  os << "fsdp-sweep: " << o.configPath << ": " << r.params
     << " parameters, seq " << r.seq << ", " << o.microBatch
     << (o.microBatch == 1 ? " sequence" : " sequences")
     << (o.tensorParallelGiven ? " per data-parallel rank" : " per rank")
     << ", param-dtype " << o.paramDtype;
  if (o.attentionImpl() != "flash")
    os << ", attention " << o.attentionImpl();
  if (!o.pipeline.empty())
    os << ", pipeline options \"" << o.pipeline << "\"";
  os << "\n";
  os << "cluster: " << spec.name << ": " << humanBytes(spec.memoryBytes) << " ("
     << format("%.0f", spec.memoryBytes) << " bytes) per device, "
     << spec.devicesPerNode << " devices per node\n\n";
  printTable(os, plans, spec, o.bucketLimitsGiven,
             !o.activationCheckpoints.empty(), o.tensorParallelGiven,
             o.pipelineParallelGiven);
  os << "\n";
  if (r.skippedHybrid)
    os << "hybrid-shard (shard groups of " << spec.devicesPerNode
       << " ranks, one node) left out at world sizes <= " << spec.devicesPerNode
       << "\n";
  double planSum = 0;
  for (const Plan &p : plans)
    planSum += p.planSeconds;
  os << format("%.2f", r.wallSeconds) << " s wall for " << plans.size()
     << (plans.size() == 1 ? " plan (" : " plans (") << r.jobs
     << (r.jobs == 1 ? " job" : " jobs") << "; " << format("%.2f", planSum)
     << " s planning and simulating in all)\n";
}

json sweep::sweepJson(const SweepOptions &o, const ClusterSpec &spec,
                      const SweepResult &result) {
  json rows = json::array();
  for (const Plan &p : result.plans) {
    json row{{"strategy", p.strategy},
             {"world_size", p.worldSize},
             {"tp", p.tp},
             {"pp", p.pp},
             {"pp_schedule", p.ppSchedule},
             {"policy", p.minUnitNumel ? "size" : "block"},
             {"min_unit_numel",
              p.minUnitNumel ? json(p.minUnitNumel) : json(nullptr)},
             {"bucket_bytes",
              p.bucketBytes >= 0 ? json(p.bucketBytes) : json(nullptr)},
             {"pipeline", p.optionString}};
    if (!p.activationCheckpoint.empty())
      row["activation_checkpoint"] = p.activationCheckpoint;
    if (!p.error.empty()) {
      row["error"] = p.error;
    } else {
      const json &r = p.report;
      int64_t peak = r["per_rank"]["peak_bytes"];
      row["shard_size"] = r["grid"]["shard_size"];
      row["units"] = p.units;
      row["bucket_max_bytes"] = p.bucketMaxBytes;
      row["bucket_mean_bytes"] = p.bucketMeanBytes;
      row["peak_bytes"] = peak;
      row["fits"] = deviceBytes(r) <= spec.memoryBytes;
      if (!p.activationCheckpoint.empty())
        row["fits_only_with_ac"] = p.fitsOnlyWithAC;
      row["predicted_step_time_s"] = r["predicted_step_time_s"];
      row["tokens_per_step"] = r.value("tokens_per_step", int64_t(0));
      row["predicted_tokens_per_s"] = r.value("predicted_tokens_per_s", 0.0);
      row["mfu"] = r["mfu"];
      row["exposed_comm_s"] = r["exposed_comm_s"];
      row["tp_bytes"] = r.value("tp_bytes", int64_t(0));
      row["tp_exposed_s"] = r.value("tp_exposed_s", 0.0);
      row["bubble_fraction"] = r.value("bubble_fraction", 0.0);
      row["p2p_bytes"] = r.value("p2p_bytes", int64_t(0));
      row["p2p_exposed_s"] = r.value("p2p_exposed_s", 0.0);
      row["bound"] = stepBound(r, spec.memoryBytes);
      row["lower_bound_s"] = r["lower_bound_s"];
      row["step_over_lower_bound"] = r.value("step_over_lower_bound", 0.0);
      row["schedule"] = r.value("schedule", std::string());
      row["plan_s"] = p.planSeconds;
      row["report"] = r;
    }
    rows.push_back(std::move(row));
  }
  return json{{"model", o.configPath},
              {"params", result.params},
              {"cluster", spec.name},
              {"memory_bytes", spec.memoryBytes},
              {"devices_per_node", spec.devicesPerNode},
              {"seq", result.seq},
              {"micro_batch", o.microBatch},
              {"param_dtype", o.paramDtype},
              {"attention", o.attentionImpl()},
              {"pipeline", o.pipeline},
              {"jobs", result.jobs},
              {"wall_time_s", result.wallSeconds},
              {"rows", std::move(rows)}};
}
