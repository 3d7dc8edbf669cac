//===- Measure.cpp - Timing primitives of fsdp-calibrate ------------------===//
#include "fsdp/calibrate/Measure.h"

#include <mpi.h>

#include <algorithm>

namespace fsdp::calibrate {

void check(int rc) {
  if (rc != FSDP_OK)
    fsdp_abort(fsdp_last_error(), 1);
}

Stat overRanks(const Machine &mc, double x) {
  double s = 0, lo = 0, hi = 0;
  MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&x, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&x, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {s / mc.world, lo, hi};
}

double maxOverRanks(double x) {
  double mx = 0;
  MPI_Allreduce(&x, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return mx;
}

double sumOverRanks(double x) {
  double sum = 0;
  MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Stat secondsPerCall(const Machine &mc, const std::function<void()> &fn,
                    double seconds) {
  MPI_Barrier(MPI_COMM_WORLD);
  fn();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = fsdp_now(), t = t0;
  int64_t calls = 0;
  do {
    fn();
    ++calls;
    t = fsdp_now();
  } while (t - t0 < seconds);
  return overRanks(mc, (t - t0) / static_cast<double>(calls));
}

} // namespace fsdp::calibrate
