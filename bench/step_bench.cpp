//===- step_bench.cpp - interpreted vs compiled steps, step by step -------===//
//
//   mpirun -np N build/bin/fsdp-step-bench STEP.so [STEPS] [WARMUP]
//
// Runs the same step interpreted (fsdp::rt::Executor on the schedule the
// .so's descriptor carries) and compiled (a second Executor bound to the
// .so's fsdp_step) in one process, alternating them step by step in the
// order I C C I I C ... so that each pair sees the same machine load and
// neither always goes first. Both get the same deterministic state and data
// (data inputs i mod C, C the logits' classes; parameters 0.02 sin(i)). A
// step's time is the max over ranks of Executor::step plus the loss read,
// as fsdp-run measures it. Prints one JSON line: medians and minima of both
// paths over the timed steps, the ratio of the medians, the median of the
// per-pair ratios, the median seconds inside kernel entry points of each
// (the device's compute_seconds), and whether the two paths' losses were
// identical at every step. Not a test: a benchmark (bench/compiled.sh).
//
//===----------------------------------------------------------------------===//
#include "fsdp/CompiledStep.h"
#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;
using namespace fsdp::schedule;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void prepare(Executor &ex, const Program &p) {
  for (const IoDesc &io : p.inputs())
    if (io.role == "param" || io.role == "master") {
      std::vector<double> v(static_cast<size_t>(p.buffer(io.buffer).numel));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = 0.02 * std::sin(static_cast<double>(i));
      ex.write(io.buffer, v);
    }
}

void feed(Executor &ex, const Program &p, int64_t step) {
  int64_t c = std::max<int64_t>(2, p.numClasses());
  for (const IoDesc &io : p.inputs()) {
    if (isStateRole(io.role))
      continue;
    std::vector<double> v(static_cast<size_t>(p.buffer(io.buffer).numel));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = io.role == "step" ? static_cast<double>(step)
                               : static_cast<double>((i * 7 + step) % c);
    ex.write(io.buffer, v);
  }
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fsdp-step-bench STEP.so [STEPS] [WARMUP]\n");
    return 2;
  }
  int64_t steps = argc > 2 ? std::atoll(argv[2]) : 40;
  int64_t warmup = argc > 3 ? std::atoll(argv[3]) : 4;
  if (fsdp_init(&argc, &argv) != FSDP_OK)
    return 1;
  try {
    CompiledStep cs = CompiledStep::open(argv[1], fsdp_world_size());
    const Program &prog = cs.program();
    Device dev("cpu");
    Executor interp(prog, dev.get()), comp(prog, dev.get());
    comp.useCompiledStep(cs);
    prepare(interp, prog);
    prepare(comp, prog);
    int64_t loss = -1;
    for (const IoDesc &o : prog.outputs())
      if (o.role == "loss")
        loss = o.buffer;
    std::vector<double> ti, tc, ki, kc;
    bool same = true;
    for (int64_t s = 1; s <= steps; ++s) {
      double t[2], l[2], kern[2];
      // I C, C I, I C, ...: the order alternates with the step.
      for (int k = 0; k < 2; ++k) {
        bool compiled = (k == 0) == (s % 2 == 0);
        Executor &ex = compiled ? comp : interp;
        feed(ex, prog, s);
        MPI_Barrier(MPI_COMM_WORLD);
        fsdp_device_stats s0{}, s1{};
        fsdp_device_get_stats(dev.get(), &s0);
        double t0 = fsdp_now();
        ex.step();
        double lv = ex.readScalar(loss);
        double dt[2] = {fsdp_now() - t0, 0}, mx[2] = {0, 0};
        fsdp_device_get_stats(dev.get(), &s1);
        dt[1] = s1.compute_seconds - s0.compute_seconds;
        MPI_Allreduce(dt, mx, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[compiled] = mx[0];
        kern[compiled] = mx[1];
        l[compiled] = lv;
      }
      same = same && l[0] == l[1];
      if (s > warmup) {
        ti.push_back(t[0]);
        tc.push_back(t[1]);
        ki.push_back(kern[0]);
        kc.push_back(kern[1]);
      }
    }
    std::vector<double> ratios;
    for (size_t i = 0; i < ti.size(); ++i)
      ratios.push_back(ti[i] / tc[i]);
    if (fsdp_rank() == 0)
      std::printf(
          "{\"world_size\": %d, \"instructions\": %zu, \"timed_steps\": "
          "%zu, \"interpreted_median_s\": %.6g, "
          "\"interpreted_min_s\": %.6g, \"compiled_median_s\": %.6g, "
          "\"compiled_min_s\": %.6g, \"ratio_of_medians\": %.4f, "
          "\"median_pair_ratio\": %.4f, \"interpreted_kernel_median_s\": "
          "%.6g, \"compiled_kernel_median_s\": %.6g, "
          "\"losses_identical\": %s}\n",
          fsdp_world_size(), prog.instructions().size(), ti.size(), median(ti),
          *std::min_element(ti.begin(), ti.end()), median(tc),
          *std::min_element(tc.begin(), tc.end()), median(ti) / median(tc),
          median(ratios), median(ki), median(kc), same ? "true" : "false");
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-step-bench: ") + e.what()).c_str(), 1);
  }
  fsdp_finalize();
  return 0;
}
