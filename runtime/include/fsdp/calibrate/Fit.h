//===- Fit.h - The fits of fsdp-calibrate -----------------------*- C++ -*-===//
//
// Turns measured kernel and collective times into the parameters the
// simulator (lib/Analysis/Simulator.cpp) reads: the roofline's peaks and
// efficiencies, max(FLOPs / (peak · eff), bytes / (bw · eff.memory))
// (Williams, Waterman & Patterson, CACM 2009), and the ring model of a
// collective (Thakur, Rabenseifner & Gropp, IJHPCA 2005).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CALIBRATE_FIT_H
#define FSDP_CALIBRATE_FIT_H

#include "fsdp/calibrate/Benchmarks.h"

#include <map>
#include <string>
#include <vector>

namespace fsdp::calibrate {

/// Σ weight · seconds over the cases (seconds).
double sumSeconds(const std::vector<Case> &cases);

/// The efficiency e in (0, 1] at which Σ w·max(F/(peak·e), B/(bw·effMem))
/// over the cases equals their measured Σ w·t (1 if even e = 1 is too slow):
/// bisection in log space. peak in FLOP/s, bw in bytes/s.
double solveEfficiency(const std::vector<Case> &cases, double peak, double bw,
                       double effMem);

/// The ring model t = (G−1)·α + (G−1)/G · S/B of a collective of S gathered
/// bytes over G ranks (Thakur, Rabenseifner & Gropp 2005; nccl-tests
/// doc/PERFORMANCE.md).
struct RingFit {
  double alpha = 0;     ///< latency per step, seconds
  double bandwidth = 0; ///< bus bandwidth B, bytes/s
  double maxRelErr = 0; ///< largest |fit − measured| / measured
};

/// Fits RingFit to the points by least squares on the relative error,
/// Σ ((c + x·β − t) / t)² with c = (G−1)·α, β = 1/B, x = (G−1)/G · S; a
/// negative c is refitted through the origin (α = 0).
RingFit fitRing(const std::vector<CollPoint> &pts, int g);

/// Sets each kernel's weight: its occurrences per block of the main job's
/// step (GPT-2: 2 layer norms, 1 GELU, the residual adds and their gradient
/// sums, the bias gradients as 9H/4H reductions of the 4H one, one AdamW
/// over the block's shard; once-per-step ops count 1/layers).
void weighKernels(Kernels &k, int64_t layers);

/// The roofline's parameters fitted to one machine's kernels.
struct KernelFit {
  /// The best rate per rank of the GEMM kernels over the step's shapes and
  /// 512³ (FLOP/s); bf16 and f16 are given the f32 peak (the cpu backend
  /// widens 2-byte floats and computes in f32).
  double peak32 = 0, peak64 = 0;
  /// efficiency.memory: Σ bytes / Σ time of the data-movement kernels over
  /// memory_bandwidth, capped at 1.
  double effMemory = 0;
  /// efficiency.matmul, .attention, .elementwise: solveEfficiency of each
  /// class at the f32 peak.
  double effMatmul = 0, effAttention = 0, effElementwise = 0;
  /// op_efficiency: per op kind (nn.linear, fsdp.flatten, ...) the same fit
  /// over that op's kernels alone (data movement: bytes per second over
  /// memory_bandwidth).
  std::map<std::string, double> opEfficiency;
};

/// The op name a case measures the kernel of (nn.linear, fsdp.flatten, ...).
std::string opName(const Case &c);

/// A kernel's work must grow this many times between the two row counts
/// for its call cost to be fitted; and its work keeps at least this share
/// of a call.
inline constexpr double kMinWorkRatio = 1.5, kMinWorkShare = 0.1;

/// op_call_s: per op kind, the seconds of a call whatever its size, from
/// each kernel measured at the step's rows (`k`) and fewer (`small`, the
/// same kernels in the same order): a call's time t = c + w·x at work x
/// (the cost model's FLOPs, bytes without FLOPs) gives, from x and ρx,
/// c = (ρ·t_small − t_big) / (ρ − 1) (the fixed and proportional costs of
/// the LogP/α-β family's reading of a call: Culler et al., PPoPP 1993),
/// weighted as weighKernels weighs the kernels, clamped to [0, 0.9 × the
/// smallest call]. Kernels whose work does not follow the rows (ratio
/// under kMinWorkRatio: the optimizer's, flatten) are left out.
std::map<std::string, double> fitCallCosts(const Kernels &k,
                                           const Kernels &small);

/// Fits the kernels (weighted by weighKernels), memory_bandwidth `bw`
/// bytes/s; op_efficiency of an op in `callCost` is fitted to its kernels'
/// times less that cost per call (the simulator adds it back).
KernelFit fitKernels(const Kernels &k, double bw,
                     const std::map<std::string, double> &callCost = {});

} // namespace fsdp::calibrate

#endif // FSDP_CALIBRATE_FIT_H
