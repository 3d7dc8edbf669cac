//===- KernelUtil.h - helpers shared by the CPU kernel sources ------------===//
#ifndef FSDP_RUNTIME_CPU_KERNELUTIL_H
#define FSDP_RUNTIME_CPU_KERNELUTIL_H

#include "HeapMeter.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

/// Element loops compiled for AVX-512, AVX2 and baseline x86-64, the one
/// to run picked once at load time (GCC function multiversioning, an ifunc):
/// one binary that runs anywhere and uses the vector width the CPU has.
/// The clones compute the same bits: these files build with
/// -ffp-contract=off, and the vectorizer does not reassociate.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&         \
    !defined(__CUDACC__)
#define FSDP_CPU_MULTIVERSION                                                  \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FSDP_CPU_MULTIVERSION
#endif

namespace fsdp::rt::cpu::detail {

/// idx[i] as an index into [0, n); throws std::out_of_range naming `what`
/// ("label", "index"), its value and position otherwise (bad data must not
/// read out of bounds).
template <typename I>
int64_t checkedIndex(const I *idx, int64_t i, int64_t n, const char *what) {
  int64_t v = static_cast<int64_t>(idx[i]);
  if (v < 0 || v >= n)
    throw std::out_of_range(std::string(what) + " " + std::to_string(v) +
                            " at position " + std::to_string(i) +
                            " is outside [0, " + std::to_string(n) + ")");
  return v;
}

/// Σ_{i<n} f(i) in double with 8 interleaved partial sums, added pairwise
/// at the end: a fixed order (deterministic, the same on every rank and
/// every clone of FSDP_CPU_MULTIVERSION) whose 8 independent chains keep a
/// row reduction from being bound by the latency of one add chain, and
/// which the SLP vectorizer packs into vector adds.
template <typename F> inline double sum8(int64_t n, F f) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k)
      acc[k] += f(i + k);
  for (int k = 0; i < n; ++i, ++k)
    acc[k] += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Mean and 1/sqrt(biased variance + eps) of one row of `dim` values,
/// accumulated in double (LayerNorm, Ba et al. 2016; sum8's order).
template <typename T>
inline void rowMeanRstd(const T *x, int64_t dim, double eps, double &mean,
                        double &rstd) {
  mean = sum8(dim, [&](int64_t c) { return static_cast<double>(x[c]); }) /
         static_cast<double>(dim);
  const double m = mean;
  double var = sum8(dim,
                    [&](int64_t c) {
                      double d = x[c] - m;
                      return d * d;
                    }) /
               static_cast<double>(dim);
  rstd = 1.0 / std::sqrt(var + eps);
}

} // namespace fsdp::rt::cpu::detail

#endif // FSDP_RUNTIME_CPU_KERNELUTIL_H
