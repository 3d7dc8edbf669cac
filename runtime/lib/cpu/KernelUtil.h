//===- KernelUtil.h - helpers shared by the CPU kernel sources ------------===//
#ifndef FSDP_RUNTIME_CPU_KERNELUTIL_H
#define FSDP_RUNTIME_CPU_KERNELUTIL_H

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace fsdp::rt::cpu::detail {

/// Samples glibc's bytes in use into the cpu driver's high-water mark
/// (CpuDevice.cpp): called by kernels right after they allocate scratch.
void sampleHeap();
/// glibc's bytes in use now, the high-water mark of the samples, and a
/// reset of that mark to the bytes in use now.
int64_t heapNow();
int64_t heapPeak();
void resetHeapPeak();

/// idx[i] as an index into [0, n); throws std::out_of_range naming `what`
/// ("label", "index"), its value and position otherwise (bad data must not
/// read out of bounds).
template <typename I>
int64_t checkedIndex(const I *idx, int64_t i, int64_t n, const char *what) {
  int64_t v = static_cast<int64_t>(idx[i]);
  if (v < 0 || v >= n)
    throw std::out_of_range(std::string(what) + " " + std::to_string(v) + " at position " +
                            std::to_string(i) + " is outside [0, " + std::to_string(n) + ")");
  return v;
}

/// Mean and 1/sqrt(biased variance + eps) of one row of `dim` values,
/// accumulated in double (LayerNorm, Ba et al. 2016).
template <typename T>
void rowMeanRstd(const T *x, int64_t dim, double eps, double &mean, double &rstd) {
  mean = 0;
  for (int64_t c = 0; c < dim; ++c)
    mean += x[c];
  mean /= static_cast<double>(dim);
  double var = 0;
  for (int64_t c = 0; c < dim; ++c) {
    double d = x[c] - mean;
    var += d * d;
  }
  var /= static_cast<double>(dim);
  rstd = 1.0 / std::sqrt(var + eps);
}

} // namespace fsdp::rt::cpu::detail

#endif // FSDP_RUNTIME_CPU_KERNELUTIL_H
