//===- Measure.h - Timing primitives of fsdp-calibrate ----------*- C++ -*-===//
//
// How every measurement of fsdp-calibrate runs: on every rank at once (so an
// oversubscribed machine is measured as it trains), after a barrier and one
// untimed call, reduced over the ranks. Times are seconds (fsdp_now).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CALIBRATE_MEASURE_H
#define FSDP_CALIBRATE_MEASURE_H

#include "fsdp/runtime.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace fsdp::calibrate {

/// The ranks, the cpu device every kernel runs on (its compute stream) and
/// its world channel: the entry points the interpreter calls (fsdp/kernels.h).
struct Machine {
  int rank = 0, world = 1;
  fsdp_device device = nullptr;
  fsdp_stream stream = nullptr;
  fsdp_channel channel = nullptr;
};

/// Aborts every rank with the runtime's message unless rc is FSDP_OK.
void check(int rc);

template <typename T> constexpr fsdp_dtype dtypeOf() {
  return sizeof(T) == 8 ? FSDP_F64 : FSDP_F32;
}

/// Mean, min and max over ranks (of seconds, where it is a time).
struct Stat {
  double mean, min, max;
};
/// Mean, min and max of `x` over the ranks. Collective.
Stat overRanks(const Machine &mc, double x);

/// The largest `x` over ranks. Collective.
double maxOverRanks(double x);
/// `x` summed over the ranks (MPI_Allreduce, MPI_SUM).
double sumOverRanks(double x);

/// The median (the upper one of an even count) of a non-empty list.
double median(std::vector<double> v);

/// Seconds per call of `fn` on every rank at once: a barrier, one untimed
/// call, then calls until `seconds` have passed; mean / min / max over ranks.
/// Collective.
Stat secondsPerCall(const Machine &mc, const std::function<void()> &fn,
                    double seconds);

/// `n` standard normal values, different on every rank (seeded by `seed`
/// and the rank).
template <typename T>
std::vector<T> randomVec(const Machine &mc, int64_t n, uint32_t seed) {
  std::mt19937 g(seed + 977u * static_cast<uint32_t>(mc.rank));
  std::normal_distribution<double> d(0, 1);
  std::vector<T> v(static_cast<size_t>(n));
  for (T &x : v)
    x = static_cast<T>(d(g));
  return v;
}

/// One measured kernel: its class ("matmul", "attention", "elementwise",
/// "memory", "info"), its name, FLOPs and bytes accessed as
/// dialects/nn/NNCost.cpp counts them (fsdp/CostFormulas.h), and seconds
/// per call.
struct Case {
  std::string cls, name;
  double flops, bytes; ///< FLOP, bytes per call
  Stat seconds;        ///< seconds per call
  double weight = 1;   ///< occurrences per transformer block (efficiency fit)
};

} // namespace fsdp::calibrate

#endif // FSDP_CALIBRATE_MEASURE_H
