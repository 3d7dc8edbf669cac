//===- CalibrateSpecTest.cpp - fsdp-calibrate refuses implausible specs ---===//
//
// Several of the spec's values are differences or fits of two timings
// (runtime/calibrate: step_io_bandwidth = bytes / (t_io − t_single −
// t_relu), bus_bandwidth = 1 / the slope of the α-β fit), which load can
// make zero or negative. writeSpec must refuse such a spec, naming the
// value and the measurements, with a non-zero exit, and write a plausible
// one. The calibrations below are made of timings, not of the results: the
// spec's values come out of fsdp-calibrate's own fit and buildSpec.
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Spec.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace fsdp::calibrate;

namespace {

/// Two ranks' timings as a quiet machine gives them: a ring whose time grows
/// with the bytes, a 1 MiB step I/O slower than a one-instruction step.
Calibration plausible() {
  Calibration cal;
  Stat zero{0, 0, 0};
  cal.kernels.copy = cal.kernels.copyBig = zero;
  cal.kernels.bw = cal.kernels.bwBig = 1.6e11;
  cal.fit.peak32 = 2e11;
  cal.fit.peak64 = 8.6e10;
  cal.fit.effMatmul = 0.9;
  cal.fit.effAttention = 0.2;
  cal.fit.effElementwise = 0.05;
  cal.fit.effMemory = 0.8;
  cal.fit.opEfficiency["nn.linear"] = 0.9;
  // t = α + S/(2B) with α = 5 µs, B = 4.5 GB/s.
  for (double bytes = 8 << 10; bytes <= 4 << 20; bytes *= 2)
    for (const char *kind : {"all_gather", "reduce_scatter"})
      cal.collectives.push_back({kind, bytes, 5e-6 + bytes / 2 / 4.5e9});
  cal.ring = fitRing(cal.collectives, 2);
  cal.host.chain = {1.5e-4, 1.4e-4, 1.6e-4};
  cal.host.single = {1.6e-7, 1.5e-7, 1.7e-7};
  cal.host.relu = {2.1e-5, 2.0e-5, 2.2e-5};
  cal.host.io = {1.6e-4, 1.5e-4, 1.7e-4};
  cal.host.dispatch = 1e-8;
  cal.host.ioBandwidth =
      2.0 * 4 * cal.host.ioCount /
      (cal.host.io.mean - cal.host.single.mean - cal.host.relu.mean);
  cal.overlap.overlap = 0.5;
  cal.sync.sync = 5e-5;
  cal.loadBefore = cal.loadAfter = "12.0 10.0 8.0";
  return cal;
}

struct Written {
  std::string path;
  Options o;
  Machine mc;
  Written() {
    char tmpl[] = "/tmp/calibrate-spec-XXXXXX";
    int fd = mkstemp(tmpl);
    close(fd);
    path = tmpl;
    std::remove(path.c_str());
    o.out = path;
    mc.world = 2;
  }
  ~Written() { std::remove(path.c_str()); }
  bool exists() const { return std::ifstream(path).good(); }
};

TEST(CalibrateSpec, WritesAPlausibleSpec) {
  Written w;
  Calibration cal = plausible();
  writeSpec(w.o, buildSpec(w.o, w.mc, cal), cal);
  EXPECT_TRUE(w.exists());
}

// Under load the 1 MiB step ran faster than a one-instruction step plus the
// kernel: step_io_bandwidth was left out of the spec (the simulator then
// charges no step I/O), silently.
TEST(CalibrateSpec, RefusesANegativeStepIoBandwidth) {
  Written w;
  Calibration cal = plausible();
  cal.host.io = {1.5e-5, 1.4e-5, 1.6e-5}; // < single + relu
  double ioSeconds = cal.host.io.mean - cal.host.single.mean -
                     cal.host.relu.mean; // as measureHost computes it
  cal.host.ioBandwidth = ioSeconds > 0 ? 8.0 * cal.host.ioCount / ioSeconds : 0;
  EXPECT_EXIT(writeSpec(w.o, buildSpec(w.o, w.mc, cal), cal),
              testing::ExitedWithCode(1),
              "refusing to write the spec(.|\n)*step_io_bandwidth = 0 is not "
              "a positive rate: one step with 262144 floats in and out "
              "\\(1.5e-05 s\\)");
  EXPECT_FALSE(w.exists());
}

// The large messages measured no slower than the small ones (another
// process took the cores mid-sweep): the fit's slope is negative and the
// spec's bus bandwidth with it.
TEST(CalibrateSpec, RefusesANegativeBusBandwidth) {
  Written w;
  Calibration cal = plausible();
  cal.collectives.clear();
  for (double bytes = 8 << 10; bytes <= 4 << 20; bytes *= 2)
    cal.collectives.push_back({"all_gather", bytes, 1e-3 - bytes * 1e-10});
  cal.ring = fitRing(cal.collectives, 2);
  ASSERT_LT(cal.ring.bandwidth, 0);
  EXPECT_EXIT(writeSpec(w.o, buildSpec(w.o, w.mc, cal), cal),
              testing::ExitedWithCode(1),
              "intra_node.bus_bandwidth = -[0-9.e+]+ is not a positive rate: "
              "the alpha-beta fit's slope");
  EXPECT_FALSE(w.exists());
}

// A collective timed at 0 s (below the clock's resolution) and an
// efficiency the fit could not place: each named, all in one message.
TEST(CalibrateSpec, NamesEveryImplausibleValue) {
  Calibration cal = plausible();
  cal.collectives[0].seconds = 0;
  cal.fit.opEfficiency["nn.gelu"] = 0;
  cal.host.dispatch = -1e-9;
  Written w;
  std::vector<std::string> bad =
      implausibleValues(buildSpec(w.o, w.mc, cal), cal);
  ASSERT_EQ(bad.size(), 3u);
  EXPECT_NE(bad[0].find("collectives: all_gather of 8192 bytes measured 0 s"),
            std::string::npos)
      << bad[0];
  EXPECT_NE(bad[1].find("op_efficiency.nn.gelu = 0 is outside (0, 1]"),
            std::string::npos)
      << bad[1];
  EXPECT_NE(bad[2].find("dispatch_overhead_s = "), std::string::npos) << bad[2];
  EXPECT_TRUE(implausibleValues(buildSpec(w.o, w.mc, plausible()), plausible())
                  .empty());
}

} // namespace
