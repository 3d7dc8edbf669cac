//===- ComputeModelTest.cpp - the simulator's compute model, unit by unit -===//
//
// ClusterSpec's compute terms (include/fsdp/Analysis/Simulator.h): a GEMM's
// efficiency as a function of its reduction length K
// (ClusterSpec::matmulEfficiency, efficiency.matmul · K / (K +
// matmul_half_k)), and the spec's efficiency.elementwise_traffic (PyTorch
// eager's unfused elementwise kernels), read by ClusterSpec::load with a
// diagnostic that names the field when it is wrong.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Simulator.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

using mlir::fsdp::ClusterSpec;

namespace {
/// Writes a minimal valid spec whose "efficiency" object is `efficiency`
/// (JSON text) and loads it; `error` gets ClusterSpec::load's message.
std::optional<ClusterSpec> loadWithEfficiency(const std::string &efficiency,
                                              std::string &error) {
  // One file per test process: ctest runs the tests of this binary in
  // parallel processes, which shared one name and removed each other's file.
  std::string path =
      ::testing::TempDir() + "compute-model-spec-" +
      ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
      std::to_string(::getpid()) + ".json";
  std::ofstream(path)
      << R"({"name": "t", "peak_flops": {"f32": 1e12, "bf16": 1e15},
 "memory_bytes": 8e10, "memory_bandwidth": 3e12, "devices_per_node": 8,
 "intra_node": {"bus_bandwidth": 3e11, "latency_s": 3e-6},
 "inter_node": {"bus_bandwidth": 4.5e10, "latency_s": 8e-6},
 "efficiency": )"
      << efficiency << "}";
  auto spec = ClusterSpec::load(path, error);
  std::remove(path.c_str());
  return spec;
}
} // namespace

// matmul · K / (K + half_k): half of the asymptote at K = half_k, rising
// with K towards it (XLA's H100 table, the specs' source: 4096 x 4096 x K).
TEST(ComputeModel, MatmulEfficiencyGrowsWithReductionLength) {
  ClusterSpec s;
  s.effMatmul = 0.614;
  s.matmulHalfK = 293;
  EXPECT_DOUBLE_EQ(s.matmulEfficiency(293), 0.307);
  EXPECT_DOUBLE_EQ(s.matmulEfficiency(4096), 0.614 * 4096 / (4096 + 293));
  double last = 0;
  for (int64_t k : {1, 64, 256, 1024, 4096, 16384, 1 << 20}) {
    double e = s.matmulEfficiency(k);
    EXPECT_GT(e, last) << "K = " << k;
    EXPECT_LT(e, s.effMatmul) << "K = " << k;
    last = e;
  }
  // K below 1 (an empty contraction) is taken as 1, never 0 or negative.
  EXPECT_DOUBLE_EQ(s.matmulEfficiency(0), s.matmulEfficiency(1));
  EXPECT_GT(s.matmulEfficiency(-5), 0);
  // Without matmul_half_k the efficiency does not depend on K.
  s.matmulHalfK = 0;
  EXPECT_DOUBLE_EQ(s.matmulEfficiency(8), 0.614);
  EXPECT_DOUBLE_EQ(s.matmulEfficiency(8192), 0.614);
}

TEST(ComputeModel, ElementwiseTrafficIsRead) {
  std::string error;
  auto spec = loadWithEfficiency(
      R"({"matmul": 0.6, "matmul_half_k": 293, "elementwise_traffic": 2.5})",
      error);
  ASSERT_TRUE(spec) << error;
  EXPECT_DOUBLE_EQ(spec->elementwiseTraffic, 2.5);
  EXPECT_DOUBLE_EQ(spec->matmulHalfK, 293);
  // Absent: one pass (a compiled stack, or a spec without the term).
  spec = loadWithEfficiency(R"({"matmul": 0.6})", error);
  ASSERT_TRUE(spec) << error;
  EXPECT_DOUBLE_EQ(spec->elementwiseTraffic, 1);
}

TEST(ComputeModel, BadElementwiseTrafficIsNamed) {
  for (const char *bad : {"0.5", "0", "-2", "\"2.5\"", "null"}) {
    std::string error;
    auto spec = loadWithEfficiency(
        std::string(R"({"matmul": 0.6, "elementwise_traffic": )") + bad + "}",
        error);
    EXPECT_FALSE(spec) << bad;
    EXPECT_NE(error.find("'efficiency.elementwise_traffic'"), std::string::npos)
        << bad << ": " << error;
    EXPECT_NE(error.find("compute-model-spec-"), std::string::npos) << error;
  }
}

TEST(ComputeModel, BadMatmulHalfKIsNamed) {
  std::string error;
  EXPECT_FALSE(
      loadWithEfficiency(R"({"matmul": 0.6, "matmul_half_k": -1})", error));
  EXPECT_NE(error.find("'efficiency.matmul_half_k' must be non-negative"),
            std::string::npos)
      << error;
}
