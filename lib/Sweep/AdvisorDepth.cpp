//===- AdvisorDepth.cpp - a layout's plan extrapolated over the depth -----===//
//
// fsdp/Sweep/AdvisorDepth.h describes why the extrapolation is exact for
// the affine quantities and what it leaves out.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sweep/AdvisorDepth.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Import/Config.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir::fsdp;
using namespace mlir::fsdp::sweep;
using json = nlohmann::ordered_json;

std::optional<int64_t>
mlir::fsdp::sweep::configLayers(const std::string &configPath,
                                const fsdp_import::Overrides &ov,
                                std::string &error) {
  if (ov.layers)
    return *ov.layers;
  fsdp_import::ConfigReader r(configPath);
  if (!r.load()) {
    error = r.getError();
    return std::nullopt;
  }
  std::optional<int64_t> n = r.requireInt(
      r.has("num_hidden_layers") || !r.has("n_layer") ? "num_hidden_layers"
                                                      : "n_layer");
  if (!n)
    error = r.getError();
  return n;
}

std::optional<std::pair<int64_t, int64_t>>
mlir::fsdp::sweep::extrapolationDepths(int64_t layers, int64_t pp, int64_t d1,
                                       int64_t d2) {
  if (pp < 1 || d1 < 1 || d1 >= d2)
    return std::nullopt;
  int64_t r = layers % pp;
  int64_t l1 = r + pp * d1, l2 = r + pp * d2;
  if (l2 >= layers)
    return std::nullopt;
  return std::make_pair(l1, l2);
}

std::optional<ReducedDepths> mlir::fsdp::sweep::reducedDepthsOfSplit(
    int64_t layers, const std::vector<int64_t> &stageLayers, int64_t d1,
    int64_t d2, std::string &why) {
  why = "the model is too shallow for the reduced depths";
  if (stageLayers.empty() || d1 < 1 || d1 >= d2)
    return std::nullopt;
  const int64_t smallest = *llvm::min_element(stageLayers);
  const auto stages = static_cast<int64_t>(stageLayers.size());
  ReducedDepths r;
  const int64_t left[3] = {d1, d2, 2 * d2 - d1}; // on the smallest stage
  for (int j = 0; j < 3; ++j) {
    const int64_t c = smallest - left[j]; // blocks each stage loses
    if (c < 1)
      return std::nullopt;
    r.layers[j] = layers - stages * c;
    int64_t boundary = 0;
    for (int64_t s = 0; s + 1 < stages; ++s) {
      boundary += stageLayers[s] - c;
      r.split[j] += (s ? "," : "") + std::to_string(boundary);
    }
  }
  return r;
}

/// a + (b − a)·t for every number present in both; null when nothing of
/// the value can be extrapolated.
static json affine(const json &a, const json &b, double t) {
  if (a.is_number() && b.is_number()) {
    double v = a.get<double>() + (b.get<double>() - a.get<double>()) * t;
    if (a.is_number_integer() && b.is_number_integer())
      return static_cast<int64_t>(std::llround(v));
    return v;
  }
  if (a.is_object() && b.is_object()) {
    json out = json::object();
    for (auto it = b.begin(); it != b.end(); ++it)
      if (a.contains(it.key())) {
        json v = affine(a[it.key()], it.value(), t);
        if (!v.is_null())
          out[it.key()] = std::move(v);
      }
    return out;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    json out = json::array();
    for (size_t i = 0; i < a.size(); ++i)
      out.push_back(affine(a[i], b[i], t));
    return out;
  }
  if ((a.is_string() || a.is_boolean()) && a == b)
    return a;
  return nullptr;
}

/// A peak is the largest of its phases' (MemoryPlanRecord::phasePeaks),
/// and each phase grows on its own line: extrapolated alone, the step's peak
/// stays on the line of the phase that was highest at the reduced depths,
/// below a phase that grows faster. Raises `perRank`'s peak_bytes to its
/// largest extrapolated phase, and the allocator's reserved bytes with it:
/// the stream pools (addAllocatorToReport: the most gathered and gather-send
/// bytes less those live at the peak) are taken at that phase's peak, from
/// its own gathered and gather-send bytes. Returns the new peak.
static int64_t raiseToPhasePeaks(json &perRank) {
  int64_t peak = perRank.value("peak_bytes", int64_t(0));
  if (!perRank.contains("peak_bytes_by_phase"))
    return peak;
  const json *top = nullptr;
  auto bytesOf = [](const json &phase) {
    return phase[kPhaseBytes].get<int64_t>();
  };
  for (const json &phase : perRank["peak_bytes_by_phase"])
    if (phase.is_array() && phase.size() == kNumPhasePeakFields &&
        bytesOf(phase) > (top ? bytesOf(*top) : peak))
      top = &phase;
  if (!top)
    return peak;
  const int64_t highest = bytesOf(*top);
  if (perRank.contains("allocator") &&
      perRank["allocator"].contains("stream_pool_bytes") &&
      perRank.contains("peak_bytes_by_class") &&
      perRank.contains("send_buffer_bytes")) {
    // The pools change by what is live at the old peak less at the new.
    json &allocator = perRank["allocator"];
    const int64_t oldAtPeak =
        perRank["peak_bytes_by_class"].value("gathered_param", int64_t(0)) +
        perRank["send_buffer_bytes"].value("gather_at_peak", int64_t(0));
    const int64_t newAtPeak = (*top)[kPhaseGatheredBytes].get<int64_t>() +
                              (*top)[kPhaseGatherSendBytes].get<int64_t>();
    int64_t pools = allocator["stream_pool_bytes"].get<int64_t>();
    if (pools > 0) // no per-stream pools on this cluster: none to move
      pools = std::max<int64_t>(0, pools + oldAtPeak - newAtPeak);
    const int64_t workspace = allocator.value("workspace_bytes", int64_t(0));
    allocator["stream_pool_bytes"] = pools;
    allocator["overhead_bytes"] = pools + workspace;
    allocator["reserved_bytes"] = highest + pools + workspace;
  }
  perRank["peak_bytes"] = highest;
  perRank.erase("peak_bytes_by_class"); // a snapshot of the other phase
  return highest;
}

json mlir::fsdp::sweep::extrapolateReport(const json &a, int64_t la,
                                          const json &b, int64_t lb,
                                          int64_t layers) {
  const double t = double(layers - la) / double(lb - la);
  json r = affine(a, b, t);
  if (r.contains("per_rank")) {
    r["per_rank"].erase("peak_instruction"); // an op index, not a quantity
    raiseToPhasePeaks(r["per_rank"]);
  }
  if (r.contains("stages") && r["stages"].is_array()) {
    json &stages = r["stages"];
    for (size_t s = 0; s < stages.size(); ++s) {
      if (!stages[s].contains("per_rank"))
        continue;
      int64_t peak = raiseToPhasePeaks(stages[s]["per_rank"]);
      if (r.contains("stage_peak_bytes") && s < r["stage_peak_bytes"].size())
        r["stage_peak_bytes"][s] = peak;
    }
  }
  const char *stepKey = "predicted_step_time_s";
  if (!r.contains(stepKey) || !a.contains(stepKey) || !b.contains(stepKey))
    return r;
  const double stepA = a[stepKey].get<double>(),
               stepB = b[stepKey].get<double>();
  const double step = r[stepKey].get<double>();
  if (step <= 0)
    return r;
  // A ratio over the step: its numerator (ratio × step) is the affine one.
  auto overStep = [&](json &out, const json &x, const json &y,
                      const char *key) {
    if (out.contains(key) && x.contains(key) && y.contains(key))
      out[key] =
          (x[key].get<double>() * stepA +
           (y[key].get<double>() * stepB - x[key].get<double>() * stepA) * t) /
          step;
  };
  overStep(r, a, b, "mfu");
  overStep(r, a, b, "bubble_fraction");
  if (r.contains("pipeline") && a.contains("pipeline") &&
      b.contains("pipeline"))
    overStep(r["pipeline"], a["pipeline"], b["pipeline"], "bubble_fraction");
  if (r.contains("tokens_per_step"))
    r["predicted_tokens_per_s"] = r["tokens_per_step"].get<double>() / step;
  if (r.contains("lower_bound_s") && r["lower_bound_s"].get<double>() > 0)
    r["step_over_lower_bound"] = step / r["lower_bound_s"].get<double>();
  r["layers"] = layers;
  r["extrapolated_from_layers"] = {la, lb};
  return r;
}

bool mlir::fsdp::sweep::pipelineSplitIsAffine(const json &a, const json &mid,
                                              const json &b, const json &full) {
  auto split = [](const json &r) -> const json * {
    if (!r.contains("pipeline") || !r["pipeline"].contains("split"))
      return nullptr;
    return &r["pipeline"]["split"];
  };
  const json *sa = split(a), *sm = split(mid), *sb = split(b),
             *sf = split(full);
  if (!sa && !sm && !sb)
    return true;
  if (!sa || !sm || !sb || !sf || !sf->contains("stage_layers") ||
      !sf->contains("stage_estimated_peak_bytes"))
    return false;
  const json &la = (*sa)["stage_layers"], &lm = (*sm)["stage_layers"],
             &lb = (*sb)["stage_layers"];
  if (la.size() != lm.size() || la.size() != lb.size())
    return false;
  // Every stage gains the same blocks from depth to depth, the depths'
  // P·(d2 − d1): a stage the balancer pins (a large LM head keeps the last
  // stage at one block over shallow depths) is not on the model's split.
  const int64_t gain = lm[0].get<int64_t>() - la[0].get<int64_t>();
  if (gain <= 0)
    return false;
  for (size_t i = 0; i < la.size(); ++i)
    if (lm[i].get<int64_t>() - la[i].get<int64_t>() != gain ||
        lb[i].get<int64_t>() - lm[i].get<int64_t>() != gain)
      return false;
  if ((*sf)["constraint"] != "memory-budget" || !sf->contains("budget_bytes") ||
      (*sf)["budget_bytes"].is_null())
    return true;
  double budget = (*sf)["budget_bytes"].get<double>();
  for (const json &peak : (*sf)["stage_estimated_peak_bytes"])
    if (peak.get<double>() > budget)
      return false;
  return true;
}

/// A pipeline report's stages, each with per-rank numbers; null without
/// pipeline parallelism or when a stage has none.
static const json *stagesOf(const json &r) {
  if (!r.contains("stages") || !r["stages"].is_array())
    return nullptr;
  for (const json &stage : r["stages"])
    if (!stage.contains("per_rank"))
      return nullptr;
  return &r["stages"];
}

static bool near(double x, double y) {
  return std::fabs(x - y) <= 1e-3 * std::fabs(y);
}

bool mlir::fsdp::sweep::stagesAreAffine(const json &line, const json &mid) {
  if (!line.contains("stages") && !mid.contains("stages"))
    return near(double(deviceBytes(line)), double(deviceBytes(mid)));
  const json *sl = stagesOf(line), *sm = stagesOf(mid);
  if (!sl || !sm || sl->size() != sm->size())
    return false;
  for (size_t s = 0; s < sl->size(); ++s)
    if (!near(double(deviceBytes((*sl)[s])), double(deviceBytes((*sm)[s]))))
      return false;
  return true;
}

bool mlir::fsdp::sweep::adoptFattestStage(json &full) {
  if (!full.contains("stages"))
    return true;
  const json *stages = stagesOf(full);
  if (!stages || stages->empty() || !full.contains("pipeline"))
    return false;
  const size_t fattest = fattestStage(*stages); // PipelineSim's choice
  full["per_rank"] = (*stages)[fattest]["per_rank"];
  full["pipeline"]["peak_stage"] = static_cast<int64_t>(fattest);
  return true;
}

GatherAtFullDepth
mlir::fsdp::sweep::gatherAtFullDepth(const json &a, const json &mid,
                                     const json &b, const json &full,
                                     bool gatherAuto, int64_t deviceBytes) {
  const char *key = "stage_gather";
  if (!a.contains(key) && !mid.contains(key) && !b.contains(key))
    return GatherAtFullDepth::Same;
  if (!a.contains(key) || a[key] != mid[key] || a[key] != b[key] ||
      !full.contains("stage_peak_bytes") ||
      full["stage_peak_bytes"].size() != a[key].size())
    return GatherAtFullDepth::Unknown;
  const json *split =
      full.contains("pipeline") && full["pipeline"].contains("split")
          ? &full["pipeline"]["split"]
          : nullptr;
  if (!split || !split->contains("budget_bytes") ||
      (*split)["budget_bytes"].is_null())
    return GatherAtFullDepth::Same; // no budget: once per step, always
  const double budget = (*split)["budget_bytes"].get<double>();
  const json &gather = a[key], &peaks = full["stage_peak_bytes"];
  bool stayOnce = false, switches = false;
  for (size_t s = 0; s < gather.size(); ++s) {
    double peak = peaks[s].get<double>();
    if (std::fabs(peak - budget) <= 1e-3 * budget)
      return GatherAtFullDepth::Unknown;
    bool once = gather[s] == "once-per-step";
    if (gatherAuto && once && peak > budget) {
      switches = true; // per micro-batch at full depth, or the smaller
      continue;
    }
    if (peak > budget && budget < double(deviceBytes))
      return GatherAtFullDepth::Unknown;
    stayOnce |= once;
  }
  if (!switches)
    return GatherAtFullDepth::Same;
  return stayOnce ? GatherAtFullDepth::Unknown
                  : GatherAtFullDepth::PerMicroBatch;
}

namespace {
enum class Verdict { Affine, NotAffine, SplitNotAffine, PerMicroBatch };
} // namespace

/// Whether the reports `a`, `mid`, `b` at depths l1 < l2 < l3 extrapolate
/// to `layers` (planOverDepths); `full` is that extrapolation, `why` the
/// check that failed.
static Verdict judgeDepths(const json &a, const json &mid, const json &b,
                           int64_t l1, int64_t l2, int64_t l3,
                           const DepthOptions &o, bool gatherAuto, json &full,
                           std::string &why) {
  json line = extrapolateReport(a, l1, b, l3, l2);
  if (!near(line["predicted_step_time_s"].get<double>(),
            mid["predicted_step_time_s"].get<double>())) {
    why = "the middle depth's step is off the line";
    return Verdict::NotAffine;
  }
  if (!stagesAreAffine(line, mid)) {
    why = "the middle depth's device bytes are off the line";
    return Verdict::NotAffine;
  }
  full = extrapolateReport(a, l1, b, l3, o.layers);
  if (!pipelineSplitIsAffine(a, mid, b, full)) {
    why = "the stage split is not affine";
    return Verdict::SplitNotAffine;
  }
  if (!adoptFattestStage(full)) {
    why = "a stage has no per-rank numbers";
    return Verdict::NotAffine;
  }
  switch (gatherAtFullDepth(a, mid, b, full, gatherAuto, o.deviceBytes)) {
  case GatherAtFullDepth::Same:
    return Verdict::Affine;
  case GatherAtFullDepth::PerMicroBatch:
    return Verdict::PerMicroBatch;
  case GatherAtFullDepth::Unknown:
    break;
  }
  why = "the stages' pp-gather at full depth is unknown";
  return Verdict::NotAffine;
}

/// The reduced depths are too deep to save time (or reach the model).
static bool tooDeep(const ReducedDepths &d, int64_t layers) {
  return d.layers[2] >= layers ||
         d.layers[0] + d.layers[1] + d.layers[2] > layers / 2;
}

Plan mlir::fsdp::sweep::planOverDepths(const PlanAtDepth &planAt,
                                       const DepthOptions &o) {
  std::optional<std::pair<int64_t, int64_t>> l12 =
      extrapolationDepths(o.layers, o.pp, o.d1, o.d2);
  if (!l12)
    return planAt(0, "", "", "the model is too shallow for the reduced depths");
  ReducedDepths depths;
  depths.layers[0] = l12->first;
  depths.layers[1] = l12->second;
  depths.layers[2] = 2 * l12->second - l12->first;
  // A plan's time grows with its depth: three reduced plans that add up to
  // more than half the model's depth save too little (pp 8 and 16 of
  // Llama-3.1-405B's 126 layers), so the layout is planned whole.
  if (tooDeep(depths, o.layers))
    return planAt(0, "", "",
                  "the reduced depths add up to over half the model's");
  double seconds = 0;
  std::string gather; // as given, then per micro-batch (gatherAtFullDepth)
  std::string why;
  bool cutAsModel = false; // the depths cut by the model's split
  for (;;) {
    auto at = [&](int j) {
      return planAt(depths.layers[j], gather, depths.split[j], "");
    };
    Plan a = at(0);
    seconds += a.planSeconds;
    if (!a.error.empty()) {
      a.planSeconds = seconds;
      return a;
    }
    Plan mid = at(1);
    Plan b = at(2);
    seconds += mid.planSeconds + b.planSeconds;
    if (!mid.error.empty() || !b.error.empty()) {
      Plan &failedPlan = mid.error.empty() ? b : mid;
      failedPlan.planSeconds = seconds;
      return std::move(failedPlan);
    }
    json full;
    const auto [l1, l2, l3] = depths.layers;
    Verdict v = judgeDepths(a.report, mid.report, b.report, l1, l2, l3, o,
                            o.gatherAuto && gather.empty(), full, why);
    if (v == Verdict::Affine) {
      if (!gather.empty()) // the depths planned again (GatherAtFullDepth)
        full["extrapolated_pp_gather"] = gather;
      if (cutAsModel) // pp-split given at the depths: the model's split
        full["extrapolated_pp_split"] = "the model's";
      b.report = std::move(full);
      b.planSeconds = seconds;
      return b;
    }
    if (v == Verdict::SplitNotAffine && !cutAsModel && o.modelSplit) {
      // The balancer's split at the reduced depths is not the model's:
      // the depths again, cut by the model's split.
      cutAsModel = true;
      double splitSeconds = 0;
      std::vector<int64_t> stageLayers = o.modelSplit(splitSeconds);
      seconds += splitSeconds;
      std::string shallow;
      std::optional<ReducedDepths> cut =
          reducedDepthsOfSplit(o.layers, stageLayers, o.d1, o.d2, shallow);
      if (!cut || tooDeep(*cut, o.layers)) {
        why += stageLayers.empty()
                   ? ", and the model's split is not known"
                   : ", and cut as the model is the depths add up to over "
                     "half of it";
        cutAsModel = false;
        break;
      }
      depths = *cut;
      continue;
    }
    if (v != Verdict::PerMicroBatch || !gather.empty())
      break;
    gather = "per-micro-batch";
  }
  if (!gather.empty())
    why += ", after the depths were planned again per micro-batch";
  if (cutAsModel)
    why += " (the depths cut as the model is)";
  Plan whole = planAt(0, "", "", why);
  whole.planSeconds += seconds;
  return whole;
}
