//===- CollectiveCurveTest.cpp - measured collective curves ---------------===//
//
// CollectiveCurves (fsdp/Analysis/CollectiveCurve.h): the interpolation,
// the scaling from the measured rank count to another group size, the
// reader's diagnostics, and ClusterSpec::load with and without curves
// (every bench/clusters file must still load).
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/CollectiveCurve.h"
#include "fsdp/Analysis/Simulator.h"

#include "SpecFile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace mlir::fsdp;
using json = nlohmann::json;
using fsdp_test::writeSpec;

namespace {

std::vector<std::pair<double, double>> pts(std::vector<double> xy) {
  std::vector<std::pair<double, double>> out;
  for (size_t i = 0; i + 1 < xy.size(); i += 2)
    out.push_back({xy[i], xy[i + 1]});
  return out;
}

TEST(CollectiveCurve, InterpolatesLogLogBetweenPoints) {
  auto p = pts({1000, 1e-6, 4000, 2e-6, 16000, 8e-6});
  // At the points: the measurements.
  EXPECT_DOUBLE_EQ(interpolateCurve(p, 1000), 1e-6);
  EXPECT_DOUBLE_EQ(interpolateCurve(p, 4000), 2e-6);
  EXPECT_DOUBLE_EQ(interpolateCurve(p, 16000), 8e-6);
  // Half-way in log x: the geometric mean of the two times (a power law
  // between the points), not the arithmetic one (1.5e-6).
  EXPECT_NEAR(interpolateCurve(p, 2000), std::sqrt(2.0) * 1e-6, 1e-18);
  EXPECT_NEAR(interpolateCurve(p, 8000), 4e-6, 1e-18);
}

TEST(CollectiveCurve, ClampsBelowAndExtendsAbove) {
  auto p = pts({1000, 1e-6, 4000, 2e-6, 16000, 8e-6});
  // Below the smallest message: the latency floor.
  EXPECT_DOUBLE_EQ(interpolateCurve(p, 10), 1e-6);
  // Beyond the largest: the last band's seconds per byte, (8e-6 - 2e-6) /
  // 12000, so 32000 bytes take 8e-6 + 16000 * 5e-10.
  EXPECT_NEAR(interpolateCurve(p, 32000), 8e-6 + 16000 * 5e-10, 1e-18);
  // A last band measured faster (noise) extends flat, never downwards.
  auto q = pts({1000, 3e-6, 2000, 2e-6});
  EXPECT_DOUBLE_EQ(interpolateCurve(q, 1e6), 2e-6);
}

CollectiveCurves twoRankCurves() {
  CollectiveCurves c;
  c.ranks = 2;
  c.points[int(CollectiveKind::AllGather)] = pts({1024, 2e-6, 4096, 4e-6});
  c.points[int(CollectiveKind::AllReduce)] = pts({1024, 3e-6, 4096, 9e-6});
  c.points[int(CollectiveKind::SendRecv)] = pts({1024, 1e-6, 4096, 5e-6});
  return c;
}

TEST(CollectiveCurve, ScalesByRingStepsToOtherGroupSizes) {
  CollectiveCurves c = twoRankCurves();
  // At the measured rank count: the measurement.
  EXPECT_DOUBLE_EQ(c.time(CollectiveKind::AllGather, 4096, 2), 4e-6);
  // Over 4 ranks, S = 8192: chunks of S/4 = 2048 bytes, the 2-rank
  // all-gather of 2·2048 = 4096 bytes is one step of them (4e-6 s); three
  // steps.
  EXPECT_DOUBLE_EQ(c.time(CollectiveKind::AllGather, 8192, 4), 3 * 4e-6);
  // All-reduce: 2(G-1) steps; the 2-rank measurement is 2 of them.
  EXPECT_DOUBLE_EQ(c.time(CollectiveKind::AllReduce, 8192, 4), 3 * 9e-6);
  // One rank: nothing to do.
  EXPECT_DOUBLE_EQ(c.time(CollectiveKind::AllGather, 8192, 1), 0);
  // send_recv: the message's own time, whatever the group.
  EXPECT_DOUBLE_EQ(c.time(CollectiveKind::SendRecv, 4096, 8), 5e-6);
  EXPECT_FALSE(c.has(CollectiveKind::ReduceScatter));
}

std::string parseError(const json &j) {
  std::string error;
  std::optional<CollectiveCurves> c =
      CollectiveCurves::parse(j, "intra_node.collectives", error);
  EXPECT_FALSE(c.has_value());
  return error;
}

TEST(CollectiveCurve, ParsesAndRejectsWithTheField) {
  std::string error;
  std::optional<CollectiveCurves> c = CollectiveCurves::parse(
      json::parse(R"({"ranks": 4, "all_gather": [[64, 1e-6], [128, 2e-6]],
                      "source": "test"})"),
      "intra_node.collectives", error);
  ASSERT_TRUE(c.has_value()) << error;
  EXPECT_EQ(c->ranks, 4);
  EXPECT_TRUE(c->has(CollectiveKind::AllGather));

  EXPECT_EQ(parseError(json::parse(R"({"ranks": 2, "all_gather": [[64, 1e-6],
                                       [64, 2e-6]]})")),
            "'intra_node.collectives.all_gather[1]': bytes must be positive "
            "and strictly increasing");
  EXPECT_EQ(parseError(json::parse(
                R"({"ranks": 2, "all_reduce": [[64, 1e-6], [128, -1]]})")),
            "'intra_node.collectives.all_reduce[1]': seconds must be positive "
            "and finite");
  EXPECT_EQ(parseError(json::parse(R"({"ranks": 2, "all_gather": [[64, 1]]})")),
            "'intra_node.collectives.all_gather' must be an array of at least "
            "two [bytes, seconds] pairs");
  EXPECT_EQ(parseError(json::parse(
                R"({"ranks": 2, "all_gather": [[64, 1], [128, "x"]]})")),
            "'intra_node.collectives.all_gather[1]' must be a [bytes, "
            "seconds] pair of numbers");
  EXPECT_NE(
      parseError(json::parse(R"({"all_gather": [[64, 1e-6], [128, 2e-6]]})"))
          .find("'intra_node.collectives.ranks' must be an integer"),
      std::string::npos);
  EXPECT_NE(
      parseError(
          json::parse(R"({"ranks": 1.5, "all_gather": [[64, 1], [128, 2]]})"))
          .find("'intra_node.collectives.ranks' must be an integer"),
      std::string::npos);
  EXPECT_NE(parseError(json::parse(R"({"ranks": 2, "allgather": []})"))
                .find("'intra_node.collectives.allgather' is not a collective "
                      "kind"),
            std::string::npos);
}

TEST(CollectiveCurve, SpecLoadNamesTheFileAndField) {
  std::string path = writeSpec("bad", json::parse(R"({"intra_node":
      {"collectives": {"ranks": 2, "reduce_scatter": [[64, 1e-6], [32, 2e-6]]}}})"));
  std::string error;
  EXPECT_FALSE(ClusterSpec::load(path, error).has_value());
  EXPECT_EQ(error, "cluster spec '" + path +
                       "': 'intra_node.collectives.reduce_scatter[1]': bytes "
                       "must be positive and strictly increasing");
  path = writeSpec("cores", json::parse(R"({"cores_per_node": 0})"));
  EXPECT_FALSE(ClusterSpec::load(path, error).has_value());
  EXPECT_EQ(error,
            "cluster spec '" + path + "': 'cores_per_node' must be positive");
}

TEST(CollectiveCurve, SpecWithCurvesPricesByThem) {
  std::string path = writeSpec("good", json::parse(R"({"cores_per_node": 2,
      "inter_node": {"collectives": {"ranks": 2,
          "all_gather": [[1024, 2e-6], [4096, 4e-6]]}},
      "intra_node": {"collectives": {"ranks": 2,
          "all_gather": [[1024, 2e-6], [4096, 4e-6]]}}})"));
  std::string error;
  std::optional<ClusterSpec> s = ClusterSpec::load(path, error);
  ASSERT_TRUE(s.has_value()) << error;
  ASSERT_TRUE(s->intraCurves.has_value());
  Simulator sim(*s);
  // All-gather within the node: the curve (3 ring steps of 2048 bytes).
  EXPECT_DOUBLE_EQ(
      sim.collectiveTime(CollectiveKind::AllGather, 8192, 4, 1, false),
      3 * 4e-6);
  // Reduce-scatter has no curve: the α-β ring, 3α + 3/4·S/B.
  EXPECT_DOUBLE_EQ(
      sim.collectiveTime(CollectiveKind::ReduceScatter, 8192, 4, 1, false),
      3e-6 + 0.75 * 8192 / 1e9);
  // Oversubscription: 4 ranks on a node of 2 cores run at half speed; 2 do
  // not; a job over two nodes (8 ranks) still has 4 per node.
  EXPECT_DOUBLE_EQ(s->oversubscription(2), 1);
  EXPECT_DOUBLE_EQ(s->oversubscription(4), 2);
  EXPECT_DOUBLE_EQ(s->oversubscription(8), 2);
}

TEST(CollectiveCurve, EveryBenchClusterSpecStillLoads) {
  int n = 0;
  for (const auto &e : std::filesystem::directory_iterator(
           std::string(FSDP_SOURCE_DIR) + "/bench/clusters")) {
    if (e.path().extension() != ".json")
      continue;
    std::string error;
    EXPECT_TRUE(ClusterSpec::load(e.path().string(), error).has_value())
        << error;
    ++n;
  }
  EXPECT_GE(n, 7);
}

} // namespace
