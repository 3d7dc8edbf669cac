//===- AdvisorDepth.cpp - a layout's plan extrapolated over the depth -----===//
//
// fsdp/Sweep/AdvisorDepth.h describes why the extrapolation is exact for
// the affine quantities and what it leaves out.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sweep/AdvisorDepth.h"
#include "fsdp/Import/Config.h"

#include <cmath>

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
  // Pipeline layouts are planned whole: since stages gathered once per step
  // sync ahead and keep their reduce-scatters in flight (ScheduleSteps.cpp,
  // pipelineParamSync), a pp 2 layout's reduced-depth plans screened a
  // micro-batch count as not fitting that its full plan fits
  // (advisor-extrapolate.test); not yet diagnosed.
  if (pp != 1 || d1 < 1 || d1 >= d2)
    return std::nullopt;
  int64_t r = layers % pp;
  int64_t l1 = r + pp * d1, l2 = r + pp * d2;
  if (l2 >= layers)
    return std::nullopt;
  return std::make_pair(l1, l2);
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

json mlir::fsdp::sweep::extrapolateReport(const json &a, int64_t la,
                                          const json &b, int64_t lb,
                                          int64_t layers) {
  const double t = double(layers - la) / double(lb - la);
  json r = affine(a, b, t);
  if (r.contains("per_rank"))
    r["per_rank"].erase("peak_instruction"); // an op index, not a quantity
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
  for (size_t i = 0; i < la.size(); ++i)
    if (lm[i].get<int64_t>() - la[i].get<int64_t>() !=
        lb[i].get<int64_t>() - lm[i].get<int64_t>())
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
