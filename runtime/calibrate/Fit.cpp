//===- Fit.cpp - fsdp-calibrate's fits ------------------------------------===//
//
// peak_flops.f32 / .f64: the best rate per rank of the GEMM kernels (f32:
// linear and the backward matmuls; f64: linear) over the step's shapes and
// a 512³ linear. efficiency.memory: the data-movement kernels the step runs
// (embedding, position_embedding, split, concat, flatten): Σ bytes / Σ time
// over memory_bandwidth (capped at 1). efficiency.matmul, .attention,
// .elementwise: for each class the value e at which the roofline reproduces
// the class's measured time, Σ w·max(F / (peak · e), B / (bw · eff.memory))
// = Σ w·t (bisection; capped at 1), the kernels weighted w by how often one
// block of the main job runs them (weighKernels). One efficiency per class
// cannot fit kernels whose FLOP rates differ (GELU's tanh and
// cross-entropy's exp cost far more than NNCost's per-element constants):
// the class values serve ops not measured here, op_efficiency the rest.
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Fit.h"

#include <algorithm>
#include <cmath>

namespace fsdp::calibrate {

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

RingFit fitRing(const std::vector<CollPoint> &pts, int g) {
  RingFit r;
  double &alpha = r.alpha, &bandwidth = r.bandwidth, &maxRelErr = r.maxRelErr;
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
  return r;
}

void weighKernels(Kernels &k, int64_t layers) {
  double perStep = 1.0 / static_cast<double>(layers);
  for (Case &c : k.ew) {
    if (c.name == "layer_norm" || c.name == "layer_norm_grad")
      c.weight = 2;
    else if (c.name == "add")
      c.weight = 4;
    else if (c.name == "reduce_sum")
      c.weight = 2.25;
    else if (c.name == "cross_entropy" || c.name == "cross_entropy_grad")
      c.weight = perStep;
  }
  for (Case &c : k.mem)
    if (c.name == "embedding" || c.name == "position_embedding")
      c.weight = perStep;
}

std::string opName(const Case &c) {
  if (c.name.rfind("linear ", 0) == 0)
    return "nn.linear";
  if (c.name.rfind("matmul ", 0) == 0)
    return "nn.matmul";
  if (c.name == "flatten")
    return "fsdp.flatten";
  return "nn." + c.name;
}

std::map<std::string, double> fitCallCosts(const Kernels &k,
                                           const Kernels &small) {
  std::map<std::string, std::pair<double, double>> sums; // Σ w·c, Σ w
  std::map<std::string, double> cap; // the smallest call measured
  for (auto set : {&Kernels::mm32, &Kernels::att, &Kernels::ew, &Kernels::mem,
                   &Kernels::info}) {
    const std::vector<Case> &big = k.*set, &less = small.*set;
    for (size_t i = 0; i < std::min(big.size(), less.size()); ++i) {
      const Case &b = big[i], &s = less[i];
      std::string op = opName(b);
      // The work ratio, by the cost model's FLOPs (bytes for data movement).
      double rho = b.flops > 0 && s.flops > 0 ? b.flops / s.flops
                   : s.bytes > 0              ? b.bytes / s.bytes
                                              : 1;
      if (op != opName(s) || rho < kMinWorkRatio)
        continue; // not a kernel whose work follows the rows
      // t = c + w·x at work x and ρx: c = (ρ·t_small − t_big) / (ρ − 1).
      double c = (rho * s.seconds.mean - b.seconds.mean) / (rho - 1);
      sums[op].first += b.weight * c;
      sums[op].second += b.weight;
      cap[op] =
          cap.count(op) ? std::min(cap[op], s.seconds.mean) : s.seconds.mean;
    }
  }
  std::map<std::string, double> out;
  for (auto &[op, sw] : sums)
    if (sw.second > 0)
      out[op] =
          std::clamp(sw.first / sw.second, 0.0, (1 - kMinWorkShare) * cap[op]);
  return out;
}

KernelFit fitKernels(const Kernels &k, double bw,
                     const std::map<std::string, double> &callCost) {
  KernelFit f;
  double &peak32 = f.peak32, &peak64 = f.peak64;
  for (const Case &c : k.mm32)
    peak32 = std::max(peak32, c.flops / c.seconds.mean);
  for (const Case &c : k.mm64)
    peak64 = std::max(peak64, c.flops / c.seconds.mean);
  peak32 = std::max(peak32, k.big[0].flops / k.big[0].seconds.mean);
  peak64 = std::max(peak64, k.big[1].flops / k.big[1].seconds.mean);

  double memBytes = 0;
  for (const Case &c : k.mem)
    memBytes += c.weight * c.bytes;
  double effMem = f.effMemory =
      std::min(1.0, memBytes / sumSeconds(k.mem) / bw);
  f.effMatmul = solveEfficiency(k.mm32, peak32, bw, effMem);
  f.effAttention = solveEfficiency(k.att, peak32, bw, effMem);
  f.effElementwise = solveEfficiency(k.ew, peak32, bw, effMem);

  // Per op kind: the efficiency at which the roofline reproduces that op's
  // measured kernels alone (ops with FLOPs: the FLOP term's, as the class
  // fit; data movement: bytes per second over memory_bandwidth), less each
  // call's cost where it was measured (fitCallCosts: the simulator adds it).
  std::map<std::string, std::vector<Case>> byOp;
  for (auto *set : {&k.mm32, &k.att, &k.ew, &k.mem, &k.info})
    for (Case c : *set) {
      if (auto it = callCost.find(opName(c)); it != callCost.end())
        c.seconds.mean = std::max(c.seconds.mean - it->second,
                                  kMinWorkShare * c.seconds.mean);
      byOp[opName(c)].push_back(c);
    }
  for (auto &[op, cases] : byOp) {
    bool movement = true;
    for (const Case &c : cases)
      movement = movement && c.flops == 0;
    double bytes = 0;
    for (const Case &c : cases)
      bytes += c.weight * c.bytes;
    f.opEfficiency[op] = movement
                             ? std::min(1.0, bytes / sumSeconds(cases) / bw)
                             : solveEfficiency(cases, peak32, bw, effMem);
  }
  return f;
}

} // namespace fsdp::calibrate
