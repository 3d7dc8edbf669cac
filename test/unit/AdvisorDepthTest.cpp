//===- AdvisorDepthTest.cpp - a pipeline report extrapolated stage by stage
//===//
//
// fsdp/Sweep/AdvisorDepth.h: a pipeline report's per-rank numbers are its
// fattest stage's, a maximum of lines. These check that each stage is
// judged on its own line and that the fattest at the model's depth gives
// the extrapolated report's numbers, where the outer depths' fattest
// stages differ.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sweep/AdvisorDepth.h"
#include "fsdp/Analysis/PlanReport.h"

#include <gtest/gtest.h>

using namespace mlir::fsdp::sweep;
using json = nlohmann::ordered_json;

namespace {

/// A stage report whose device bytes (per_rank.peak_bytes, no allocator)
/// are `bytes`.
json stage(int64_t bytes) {
  return {
      {"per_rank", {{"peak_bytes", bytes}, {"model_state_bytes", bytes / 2}}}};
}

/// A pipeline report at one depth: the stages' device bytes, the report's
/// per_rank the fattest's as PipelineSim makes it.
json pipelineReport(const std::vector<int64_t> &stageBytes, double step) {
  json r;
  r["predicted_step_time_s"] = step;
  r["stages"] = json::array();
  size_t fattest = 0;
  for (size_t s = 0; s < stageBytes.size(); ++s) {
    r["stages"].push_back(stage(stageBytes[s]));
    if (stageBytes[s] > stageBytes[fattest])
      fattest = s;
  }
  r["per_rank"] = r["stages"][fattest]["per_rank"];
  r["pipeline"] = {{"stages", stageBytes.size()},
                   {"peak_stage", static_cast<int64_t>(fattest)}};
  return r;
}

} // namespace

// Stage 0 grows 10 bytes per layer from 1000, stage 1 100 per layer from
// 100: stage 0 is the fattest at 4, 6 and 8 layers (1040 > 500, 1080 >
// 900), stage 1 at 126 (12700 > 2260). Extrapolated from 4 and 8 layers,
// the report's per-rank numbers must be stage 1's.
TEST(AdvisorDepth, FattestStageAtFullDepthGivesTheReport) {
  auto at = [](int64_t layers) {
    return pipelineReport({1000 + 10 * layers, 100 + 100 * layers},
                          double(layers));
  };
  json a = at(4), mid = at(6), b = at(8);
  EXPECT_EQ(a["pipeline"]["peak_stage"], 0);
  EXPECT_EQ(b["pipeline"]["peak_stage"], 0);
  EXPECT_TRUE(stagesAreAffine(extrapolateReport(a, 4, b, 8, 6), mid));
  json full = extrapolateReport(a, 4, b, 8, 126);
  EXPECT_EQ(full["per_rank"]["peak_bytes"], 1000 + 10 * 126); // stage 0's
  ASSERT_TRUE(adoptFattestStage(full));
  json planned = at(126);
  EXPECT_EQ(full["pipeline"]["peak_stage"], planned["pipeline"]["peak_stage"]);
  EXPECT_EQ(full["per_rank"], planned["per_rank"]);
  EXPECT_EQ(full["stages"], planned["stages"]);
}

// The fattest stage changing between the outer depths: the report's own
// per_rank is then not a line, each stage still is.
TEST(AdvisorDepth, FattestChangingBetweenDepthsIsJudgedPerStage) {
  auto at = [](int64_t layers) {
    return pipelineReport({2000 + 10 * layers, 100 + 300 * layers}, 1.0);
  };
  json a = at(3), mid = at(5), b = at(7); // stage 0, then 1, then 1
  EXPECT_EQ(a["pipeline"]["peak_stage"], 0);
  EXPECT_EQ(b["pipeline"]["peak_stage"], 1);
  json line = extrapolateReport(a, 3, b, 7, 5);
  EXPECT_NE(line["per_rank"]["peak_bytes"], mid["per_rank"]["peak_bytes"]);
  EXPECT_TRUE(stagesAreAffine(line, mid));
  json full = extrapolateReport(a, 3, b, 7, 48);
  ASSERT_TRUE(adoptFattestStage(full));
  EXPECT_EQ(full["pipeline"]["peak_stage"], 1);
  EXPECT_EQ(full["per_rank"]["peak_bytes"], 100 + 300 * 48);
}

// A stage off its line at the middle depth (its peak moved) is refused.
TEST(AdvisorDepth, StageOffItsLineIsRefused) {
  json a = pipelineReport({1000, 500}, 1.0);
  json b = pipelineReport({1200, 700}, 1.0);
  json mid = pipelineReport({1100, 650}, 1.0); // stage 1: 600 on the line
  EXPECT_FALSE(stagesAreAffine(extrapolateReport(a, 4, b, 8, 6), mid));
  json onLine = pipelineReport({1100, 600}, 1.0);
  EXPECT_TRUE(stagesAreAffine(extrapolateReport(a, 4, b, 8, 6), onLine));
}

// PipelineSim's tie rule: the first stage of the largest device bytes.
TEST(AdvisorDepth, TiesGoToTheFirstStage) {
  json r = pipelineReport({700, 900, 900}, 1.0);
  r["pipeline"]["peak_stage"] = 0;
  ASSERT_TRUE(adoptFattestStage(r));
  EXPECT_EQ(r["pipeline"]["peak_stage"], 1);
}

// Without pipeline parallelism both are no-ops.
TEST(AdvisorDepth, NoPipelineIsLeftAlone) {
  json r = {{"per_rank", {{"peak_bytes", 5}}}};
  json before = r;
  EXPECT_TRUE(stagesAreAffine(r, r));
  EXPECT_TRUE(adoptFattestStage(r));
  EXPECT_EQ(r, before);
  json noPerRank = pipelineReport({1, 2}, 1.0);
  noPerRank["stages"][1].erase("per_rank");
  EXPECT_FALSE(adoptFattestStage(noPerRank));
}

// The split must grow by the same blocks on every stage: a stage pinned
// at one block over the shallow depths (a large LM head on the last stage)
// is not on the model's split, though each stage's own steps are equal.
TEST(AdvisorDepth, PinnedStageSplitIsNotAffine) {
  auto split = [](std::vector<int64_t> layers) {
    json r;
    r["pipeline"]["split"] = {{"stage_layers", layers},
                              {"constraint", "time"},
                              {"stage_estimated_peak_bytes", {1, 1}}};
    return r;
  };
  json full = split({30, 20});
  EXPECT_FALSE(
      pipelineSplitIsAffine(split({5, 1}), split({7, 1}), split({9, 1}), full));
  EXPECT_TRUE(
      pipelineSplitIsAffine(split({3, 3}), split({4, 4}), split({5, 5}), full));
  EXPECT_FALSE(
      pipelineSplitIsAffine(split({3, 3}), split({4, 4}), split({6, 4}), full));
}

// The reduced depths of a pipeline cut as the model is: each stage loses
// the same blocks, the smallest keeping d1, d2 and 2·d2 − d1.
TEST(AdvisorDepth, ReducedDepthsFollowTheModelsSplit) {
  std::string why;
  // Llama-3.1-405B at tp 8 × pp 2, AC none: the balancer's [62, 64].
  std::optional<ReducedDepths> r =
      reducedDepthsOfSplit(126, {62, 64}, 3, 4, why);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->layers[0], 8);
  EXPECT_EQ(r->layers[1], 10);
  EXPECT_EQ(r->layers[2], 12);
  EXPECT_EQ(r->split[0], "3");
  EXPECT_EQ(r->split[1], "4");
  EXPECT_EQ(r->split[2], "5");
  // Four stages, the last one short (its LM head).
  r = reducedDepthsOfSplit(126, {32, 32, 32, 30}, 3, 4, why);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->layers[0], 126 - 4 * 27);
  EXPECT_EQ(r->split[0], "5,10,15");
  EXPECT_EQ(r->split[2], "7,14,21");
  // The smallest stage cannot keep 2·d2 − d1 = 5 blocks and lose one.
  EXPECT_FALSE(reducedDepthsOfSplit(30, {25, 5}, 3, 4, why).has_value());
  EXPECT_EQ(why, "the model is too shallow for the reduced depths");
  EXPECT_TRUE(reducedDepthsOfSplit(30, {24, 6}, 3, 4, why).has_value());
  EXPECT_FALSE(reducedDepthsOfSplit(126, {}, 3, 4, why).has_value());
  EXPECT_FALSE(reducedDepthsOfSplit(126, {62, 64}, 4, 3, why).has_value());
}

// A split that is not affine at the balancer's reduced depths sends the
// layout to its depths cut as the model is (once), and those extrapolate.
TEST(AdvisorDepth, SplitNotAffineIsPlannedAgainCutAsTheModelIs) {
  std::vector<std::string> asked; // "depth/split" of every plan made
  auto planAt = [&](int64_t depth, llvm::StringRef, llvm::StringRef split,
                    llvm::StringRef) {
    asked.push_back(std::to_string(depth) + "/" + split.str());
    Plan p;
    if (depth == 0) { // whole: not expected
      p.report = pipelineReport({1, 1}, 1.0);
      return p;
    }
    // The balancer keeps the last stage at one block; given, the split.
    int64_t first = split.empty() ? depth - 1 : std::stoll(split.str());
    std::vector<int64_t> layers = {first, depth - first};
    p.report = pipelineReport({100 * layers[0], 100 * layers[1] + 7},
                              0.5 + 0.01 * double(depth));
    p.report["pipeline"]["split"] = {{"stage_layers", layers},
                                     {"constraint", "time"},
                                     {"stage_estimated_peak_bytes", {1, 1}}};
    return p;
  };
  DepthOptions o;
  o.layers = 126;
  o.pp = 2;
  o.d1 = 3;
  o.d2 = 4;
  int asks = 0;
  o.modelSplit = [&](double &seconds) {
    ++asks;
    seconds = 0;
    return std::vector<int64_t>{62, 64};
  };
  Plan p = planOverDepths(planAt, o);
  EXPECT_EQ(asks, 1);
  EXPECT_EQ(asked, (std::vector<std::string>{"6/", "8/", "10/", "8/3", "10/4",
                                             "12/5"}));
  EXPECT_EQ(p.report["extrapolated_pp_split"], "the model's");
  EXPECT_EQ(p.report["pipeline"]["split"]["stage_layers"], json({62, 64}));
  EXPECT_EQ(mlir::fsdp::deviceBytes(p.report), 100 * 64 + 7);
  EXPECT_NEAR(p.report["predicted_step_time_s"].get<double>(), 0.5 + 1.26,
              1e-12);
  // Without the model's split the layout is planned whole.
  asked.clear();
  o.modelSplit = [](double &) { return std::vector<int64_t>{}; };
  planOverDepths(planAt, o);
  EXPECT_EQ(asked.back(), "0/");
}

// A stage's peak moving to another phase past the reduced depths (Llama-3.1-
// 405B at TP 8 x PP 2 with full AC, bench/README.md): one micro-batch's
// backward peaks at 1000 + 10 per layer with 100 gathered bytes live, the
// other's at 700 + 20 per layer with none; the step's peak at 4, 6 and 8
// layers is the first's (1040 > 780, 1080 > 860), at 126 the second's (3220
// > 2260). The most gathered bytes are 150, so the stream pools are 50 at
// the first phase's peak and 150 at the second's. Extrapolated phase by
// phase, the stage's peak and the pipeline's stage_peak_bytes are the
// second phase's line and its reserved bytes that peak + 150 + the
// workspace (50); the middle depth is on that line as planned.
TEST(AdvisorDepth, PeakMovingToAnotherPhaseIsExtrapolatedPhaseByPhase) {
  auto at = [](int64_t layers) {
    int64_t first = 1000 + 10 * layers, second = 700 + 20 * layers;
    json perRank = {
        {"peak_bytes", std::max(first, second)},
        {"peak_bytes_by_class", {{"gathered_param", 100}}},
        {"send_buffer_bytes", {{"gather_at_peak", 0}}},
        {"peak_bytes_by_phase", {{0, 1, second, 0, 0}, {1, 1, first, 100, 0}}},
        {"allocator",
         {{"stream_pool_bytes", 50},
          {"workspace_bytes", 50},
          {"reserved_bytes", std::max(first, second) + 100}}}};
    json r = {{"predicted_step_time_s", double(layers)},
              {"stages", {{{"per_rank", perRank}}}},
              {"stage_peak_bytes", {std::max(first, second)}},
              {"per_rank", perRank},
              {"pipeline", {{"stages", 1}, {"peak_stage", 0}}}};
    return r;
  };
  json a = at(4), mid = at(6), b = at(8);
  EXPECT_TRUE(stagesAreAffine(extrapolateReport(a, 4, b, 8, 6), mid));
  json full = extrapolateReport(a, 4, b, 8, 126);
  const int64_t second = 700 + 20 * 126;
  EXPECT_EQ(full["per_rank"]["peak_bytes"], second);
  const json &stage = full["stages"][0]["per_rank"];
  EXPECT_EQ(stage["peak_bytes"], second);
  EXPECT_EQ(stage["allocator"]["stream_pool_bytes"], 150);
  EXPECT_EQ(stage["allocator"]["reserved_bytes"], second + 200);
  EXPECT_FALSE(stage.contains("peak_bytes_by_class"));
  EXPECT_EQ(full["stage_peak_bytes"][0], second);
  EXPECT_EQ(mlir::fsdp::deviceBytes(full["stages"][0]), second + 200);
  // Without the phases the step's own line stays below the plan.
  a["stages"][0]["per_rank"].erase("peak_bytes_by_phase");
  b["stages"][0]["per_rank"].erase("peak_bytes_by_phase");
  EXPECT_EQ(
      extrapolateReport(a, 4, b, 8, 126)["stages"][0]["per_rank"]["peak_bytes"],
      1000 + 10 * 126);
}
