//===- CollectiveCurve.cpp - measured collective time by message size -----===//
//
// CollectiveCurves (CollectiveCurve.h): reading a link's measured curves and
// pricing a collective from them.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/CollectiveCurve.h"

#include <cmath>

using namespace mlir::fsdp;
using json = nlohmann::json;

const char *mlir::fsdp::collectiveKindKey(CollectiveKind k) {
  switch (k) {
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::SendRecv:
    return "send_recv";
  }
  return "";
}

double
mlir::fsdp::interpolateCurve(const std::vector<std::pair<double, double>> &pts,
                             double x) {
  if (x <= pts.front().first)
    return pts.front().second;
  size_t n = pts.size();
  if (x >= pts.back().first) {
    // The last band's marginal seconds per byte (0 when the measurement
    // fell there: noise, not a faster link).
    auto [x0, y0] = pts[n - 2];
    auto [x1, y1] = pts[n - 1];
    return y1 + std::max(0.0, (y1 - y0) / (x1 - x0)) * (x - x1);
  }
  size_t i = 1;
  while (pts[i].first < x)
    ++i;
  auto [x0, y0] = pts[i - 1];
  auto [x1, y1] = pts[i];
  double f = std::log(x / x0) / std::log(x1 / x0);
  return std::exp(std::log(y0) + f * (std::log(y1) - std::log(y0)));
}

double CollectiveCurves::time(CollectiveKind k, double bytes,
                              int64_t groupSize) const {
  const auto &pts = points[static_cast<int>(k)];
  if (k == CollectiveKind::SendRecv)
    return interpolateCurve(pts, bytes);
  if (groupSize <= 1)
    return 0;
  // t_n(n·S/G) is n − 1 ring steps (2(n − 1) for all-reduce) of the chunk
  // S / G that G ranks move per step; G − 1 (2(G − 1)) of them.
  double n = double(ranks), g = double(groupSize);
  return (g - 1) / (n - 1) * interpolateCurve(pts, bytes * n / g);
}

std::optional<CollectiveCurves> CollectiveCurves::parse(const json &j,
                                                        const std::string &name,
                                                        std::string &error) {
  auto fail = [&](const std::string &what) {
    error = what;
    return std::nullopt;
  };
  if (!j.is_object())
    return fail("'" + name + "' must be an object");
  CollectiveCurves c;
  bool any = false;
  for (auto &[k, v] : j.items()) {
    if (k == "ranks" || k == "source")
      continue;
    int kind = 0;
    while (kind < kNumCollectiveKinds &&
           k != collectiveKindKey(static_cast<CollectiveKind>(kind)))
      ++kind;
    if (kind == kNumCollectiveKinds)
      return fail("'" + name + "." + k +
                  "' is not a collective kind (all_gather, reduce_scatter, "
                  "all_reduce, send_recv, ranks, source)");
    std::string field = name + "." + k;
    if (!v.is_array() || v.size() < 2)
      return fail("'" + field +
                  "' must be an array of at least two [bytes, seconds] pairs");
    auto &pts = c.points[kind];
    for (size_t i = 0; i < v.size(); ++i) {
      const json &p = v[i];
      std::string at = field + "[" + std::to_string(i) + "]";
      if (!p.is_array() || p.size() != 2 || !p[0].is_number() ||
          !p[1].is_number())
        return fail("'" + at + "' must be a [bytes, seconds] pair of numbers");
      double s = p[0].get<double>(), t = p[1].get<double>();
      if (!(s > 0) || !std::isfinite(s) ||
          (!pts.empty() && !(s > pts.back().first)))
        return fail("'" + at +
                    "': bytes must be positive and strictly increasing");
      if (!(t > 0) || !std::isfinite(t))
        return fail("'" + at + "': seconds must be positive and finite");
      pts.push_back({s, t});
    }
    any = any || kind != static_cast<int>(CollectiveKind::SendRecv);
  }
  if (j.contains("source") && !j["source"].is_string())
    return fail("'" + name + ".source' must be a string");
  if (any || j.contains("ranks")) {
    const json *r = j.contains("ranks") ? &j["ranks"] : nullptr;
    if (!r || !r->is_number() ||
        r->get<double>() != std::floor(r->get<double>()) ||
        r->get<double>() < 2 || r->get<double>() > double(int64_t(1) << 30))
      return fail("'" + name +
                  ".ranks' must be an integer in [2, 2^30] (the ranks the "
                  "curves were measured over)");
    c.ranks = static_cast<int64_t>(r->get<double>());
  }
  return c;
}
