//===- AdvisorOutput.cpp - the advisor's table, JSON, CSV and plan log ----===//
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Sweep/Advisor.h"

#include "llvm/Support/Format.h"

#include <cstdio>
#include <mutex>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::sweep;
using json = nlohmann::ordered_json;

namespace {

std::string fmt(const char *f, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string bucketName(int64_t bytes) {
  if (bytes < 0)
    return "-";
  if (bytes == 0)
    return "off";
  return fmt("%.0f MiB", bytes / double(1 << 20));
}

/// "full-shard", "hybrid-shard/16" (its shard group size).
std::string layoutName(const AdvisedLayout &l) {
  if (l.strategy == "hybrid-shard")
    return l.strategy + "/" + std::to_string(l.shardSize);
  return l.strategy;
}

/// "tp 8 pp 16 1f1b", "tp 8", "-" (the degrees above 1).
std::string degreesName(const AdvisedLayout &l) {
  std::string s;
  if (l.tp > 1)
    s += "tp " + std::to_string(l.tp);
  if (l.pp > 1)
    s += (s.empty() ? "" : " ") + std::string("pp ") + std::to_string(l.pp) +
         " " + l.ppSchedule;
  return s.empty() ? "-" : s;
}

} // namespace

void sweep::printAdvisor(llvm::raw_ostream &os, const AdvisorOptions &o,
                         const ClusterSpec &spec, const AdvisorResult &r) {
  os << "fsdp-sweep advisor: " << o.sweep.configPath << ": " << r.params
     << " parameters, seq " << r.seq << ", global batch " << o.globalBatchTokens
     << " tokens (" << r.globalBatch << " sequences), param-dtype "
     << o.sweep.paramDtype
     << (o.sweep.attentionImpl() == "flash"
             ? ""
             : ", attention " + o.sweep.attentionImpl())
     << "\n";
  os << "cluster: " << spec.name << ": " << fmt("%.0f", spec.memoryBytes)
     << " bytes per device, " << spec.devicesPerNode << " devices per node\n";
  for (int64_t n : o.gpus) {
    std::vector<const AdvisedLayout *> ranked;
    int64_t planned = 0, noFit = 0, slower = 0, refused = 0;
    std::string infeasible, refusal;
    for (const AdvisedLayout &l : r.layouts) {
      if (l.gpus != n)
        continue;
      if (l.strategy.empty())
        infeasible = l.why;
      else if (l.fits)
        ranked.push_back(&l);
      else if (l.pruned == AdvisedLayout::PrunedByStep)
        ++slower;
      else if (!l.refused)
        ++noFit;
      else if (!refused++)
        refusal = l.why; // the first, in enumeration order
      planned += !l.strategy.empty();
    }
    llvm::sort(ranked, [](const AdvisedLayout *a, const AdvisedLayout *b) {
      return a->rank < b->rank;
    });
    os << "\n" << n << " GPUs: ";
    if (!infeasible.empty() && !planned) {
      os << "no layout: " << infeasible << "\n";
      continue;
    }
    os << ranked.size() << " of " << planned << " layouts fit (" << noFit
       << " do not";
    if (slower)
      os << ", " << slower << " not planned: by their step bound slower than "
         << o.top + 1 << " planned";
    if (refused) // a reason, not memory: counted apart from those that do not
      os << ", " << refused << " " << refusal
         << (refused > 1 ? " (the first; each one's in --json and --csv)" : "");
    os << ")\n";
    if (ranked.empty())
      continue;
    os << llvm::format("  %-4s %-18s %-17s %-9s %-8s %-9s %12s %10s %8s %6s "
                       "%9s %-9s %s\n",
                       "rank", "strategy/shard", "tp/pp", "AC", "m x k",
                       "bucket", "tokens/s", "tok/s/GPU", "step s", "MFU",
                       "rsvd GiB", "bound", "runner-up");
    for (size_t i = 0; i < ranked.size() && i < o.top; ++i) {
      const AdvisedLayout &l = *ranked[i];
      const json &rep = l.plan.report;
      double tps = rep.value("predicted_tokens_per_s", 0.0);
      std::string mk = std::to_string(l.microBatchSize) + " x " +
                       std::to_string(l.microBatches);
      std::string bound = l.bound + (l.memoryLimited ? " +memory" : "");
      os << llvm::format(
          "  %-4d %-18s %-17s %-9s %-8s %-9s %12.0f %10.1f %8.4g %6.3f %9.2f "
          "%-9s %s\n",
          l.rank, layoutName(l).c_str(), degreesName(l).c_str(),
          l.activationCheckpoint.c_str(), mk.c_str(),
          bucketName(l.bucketBytes).c_str(), tps, tps / n,
          rep["predicted_step_time_s"].get<double>(), rep["mfu"].get<double>(),
          deviceBytes(rep) / double(int64_t(1) << 30), bound.c_str(),
          l.runnerUpRatio > 0 ? fmt("x%.3f", l.runnerUpRatio).c_str() : "-");
    }
  }
  os << "\n" << r.plansRun << " plans (screens included";
  if (r.fullPlans)
    os << "; each layout planned at " << o.extrapolateDepths[0] << " and "
       << o.extrapolateDepths[1] << " blocks per stage and extrapolated to "
       << r.layers << " layers, " << r.fullPlans
       << " of them planned again at full depth: the rows above and their "
          "runner-up";
  os << ") in " << fmt("%.2f", r.wallSeconds) << " s wall, " << r.jobs
     << (r.jobs == 1 ? " job; " : " jobs; ") << fmt("%.2f", r.planSeconds)
     << " s planning and simulating in all";
  if (r.prunedByMemory || r.prunedByStep)
    os << "; not planned by the bounds: " << r.prunedByMemory
       << " layouts that cannot fit, " << r.prunedByStep << " slower ones";
  os << "\n";
}

json sweep::advisorJson(const AdvisorOptions &o, const ClusterSpec &spec,
                        const AdvisorResult &r) {
  json layouts = json::array();
  for (const AdvisedLayout &l : r.layouts) {
    json j{{"gpus", l.gpus},
           {"tp", l.tp},
           {"pp", l.pp},
           {"pp_schedule", l.ppSchedule},
           {"data_parallel", l.dataParallel},
           {"strategy", l.strategy},
           {"shard_size", l.shardSize},
           {"activation_checkpoint", l.activationCheckpoint},
           {"bucket_bytes",
            l.bucketBytes >= 0 ? json(l.bucketBytes) : json(nullptr)},
           {"sequences_per_rank", l.sequencesPerRank},
           {"fits", l.fits},
           {"refused", l.refused},
           {"device_bytes_lower_bound", l.bytesLowerBound},
           {"step_lower_bound_s", l.stepLowerBound},
           {"pruned", l.pruned == AdvisedLayout::PrunedByMemory ? json("memory")
                      : l.pruned == AdvisedLayout::PrunedByStep
                          ? json("step")
                          : json(nullptr)}};
    if (l.fits) {
      const json &rep = l.plan.report;
      j["rank"] = l.rank;
      j["micro_batch_size"] = l.microBatchSize;
      j["micro_batches"] = l.microBatches;
      j["bound"] = l.bound;
      j["memory_limited"] = l.memoryLimited;
      j["runner_up_ratio"] =
          l.runnerUpRatio > 0 ? json(l.runnerUpRatio) : json(nullptr);
      j["predicted_tokens_per_s"] = rep.value("predicted_tokens_per_s", 0.0);
      j["predicted_step_time_s"] = rep["predicted_step_time_s"];
      j["mfu"] = rep["mfu"];
      j["peak_bytes"] = rep["per_rank"]["peak_bytes"];
      j["device_bytes"] = deviceBytes(rep);
      j["pipeline"] = l.plan.optionString;
      // Extrapolated (AdvisorDepth.h): this report; planned again at full
      // depth: the extrapolation's numbers beside the full plan's report.
      j["extrapolated"] = l.extrapolated ? json(true) : l.extrapolation;
      j["report"] = rep;
    } else {
      j["why"] = l.why;
    }
    json screens = json::array();
    for (const Plan &p : l.screens) {
      json s{{"global_batch", p.globalBatch},
             {"micro_batches", p.microBatches},
             {"plan_s", p.planSeconds}};
      if (p.error.empty()) {
        s["device_bytes"] = deviceBytes(p.report);
        s["fits"] = deviceBytes(p.report) <= spec.memoryBytes;
        // A screened stage (pp-plan=fattest) has no step.
        s["predicted_step_time_s"] =
            p.report.value("predicted_step_time_s", json(nullptr));
        if (p.report.contains("pipeline_screen_stage"))
          s["screened_stage"] = p.report["pipeline_screen_stage"];
      } else {
        s["error"] = p.error;
      }
      screens.push_back(std::move(s));
    }
    j["screens"] = std::move(screens);
    layouts.push_back(std::move(j));
  }
  return json{{"model", o.sweep.configPath},
              {"params", r.params},
              {"cluster", spec.name},
              {"memory_bytes", spec.memoryBytes},
              {"devices_per_node", spec.devicesPerNode},
              {"seq", r.seq},
              {"global_batch_tokens", o.globalBatchTokens},
              {"global_batch", r.globalBatch},
              {"gpus", o.gpus},
              {"param_dtype", o.sweep.paramDtype},
              {"attention", o.sweep.attentionImpl()},
              {"pipeline", o.sweep.pipeline},
              {"jobs", r.jobs},
              {"plans", r.plansRun},
              {"full_depth_plans", r.fullPlans},
              {"layers", r.layers},
              {"extrapolate_depths", o.extrapolateDepths},
              {"pruned_by_memory", r.prunedByMemory},
              {"pruned_by_step", r.prunedByStep},
              {"bound_compute_s_per_sequence", r.boundSecondsPerSequence},
              {"wall_time_s", r.wallSeconds},
              {"layouts", std::move(layouts)}};
}

void sweep::writeAdvisorCsv(llvm::raw_ostream &os, const AdvisorResult &r) {
  os << "gpus,tp,pp,pp_schedule,data_parallel,strategy,shard_size,"
        "activation_checkpoint,"
        "bucket_bytes,sequences_per_rank,micro_batch_size,micro_batches,fits,"
        "rank,bound,memory_limited,tokens_per_s,tokens_per_s_per_gpu,step_s,"
        "mfu,peak_bytes,device_bytes,runner_up_ratio,why\n";
  for (const AdvisedLayout &l : r.layouts) {
    os << l.gpus << "," << l.tp << "," << l.pp << "," << l.ppSchedule << ","
       << l.dataParallel << "," << l.strategy << "," << l.shardSize << ","
       << l.activationCheckpoint << ","
       << (l.bucketBytes >= 0 ? std::to_string(l.bucketBytes) : "") << ","
       << l.sequencesPerRank << ",";
    if (l.fits) {
      const json &rep = l.plan.report;
      double tps = rep.value("predicted_tokens_per_s", 0.0);
      os << l.microBatchSize << "," << l.microBatches << ",true," << l.rank
         << "," << l.bound << "," << (l.memoryLimited ? "true" : "false") << ","
         << fmt("%.6g", tps) << "," << fmt("%.6g", tps / l.gpus) << ","
         << fmt("%.6g", rep["predicted_step_time_s"].get<double>()) << ","
         << fmt("%.4f", rep["mfu"].get<double>()) << ","
         << rep["per_rank"]["peak_bytes"].get<int64_t>() << ","
         << deviceBytes(rep) << ","
         << (l.runnerUpRatio > 0 ? fmt("%.6g", l.runnerUpRatio) : "") << ",\n";
    } else {
      std::string why = l.why;
      for (char &c : why)
        if (c == '"')
          c = '\'';
      os << ",,false,,,,,,,,,,,\"" << why << "\"\n";
    }
  }
}

void sweep::logPlan(llvm::raw_ostream &os, const Plan &p, int64_t depth,
                    llvm::StringRef ppGather, llvm::StringRef whyWhole,
                    double cpuSeconds, bool fits) {
  static std::mutex mu;
  std::string line;
  llvm::raw_string_ostream ls(line);
  int64_t dp = p.worldSize / std::max<int64_t>(1, p.tp * p.pp);
  ls << "plan: " << p.worldSize << " GPUs tp " << p.tp << " pp " << p.pp
     << (p.pp > 1 ? " " + p.ppSchedule : "") << " " << p.strategy
     << (p.shardSize ? "/" + std::to_string(p.shardSize) : "") << " AC "
     << p.activationCheckpoint
     << " m=" << p.globalBatch / std::max<int64_t>(1, p.microBatches * dp)
     << " k=" << p.microBatches
     << " layers=" << (depth ? std::to_string(depth) : std::string("all"))
     << (ppGather.empty() ? "" : " pp-gather=" + ppGather.str())
     << (whyWhole.empty() ? "" : " (" + whyWhole.str() + ")") << ": "
     << fmt("%.2f s wall, ", p.planSeconds) << fmt("%.2f s CPU", cpuSeconds);
  if (!p.error.empty())
    ls << ", error";
  else
    ls << fmt(", %.2f GiB, ",
              double(deviceBytes(p.report)) / double(int64_t(1) << 30))
       << (fits ? "fits" : "does not fit");
  ls << "\n";
  std::lock_guard<std::mutex> lock(mu);
  os << line;
  os.flush();
}
