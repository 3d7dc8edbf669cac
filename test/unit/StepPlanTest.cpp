//===- StepPlanTest.cpp - the step plan both back ends run ----------------===//
//
// fsdp::schedule::StepPlan of every committed schedule, in arena and
// per-buffer mode, checked against what it must be independently of the
// code that made it: every call's arguments are of the classes its C
// prototype takes (the runtime's entry points, generated from kernels.h and
// runtime.h); every collective is started once and waited on exactly once,
// no later than the end of the step; slots are bound before they are used
// and released once; and the plan's live-byte peak equals the compiler's
// memory plan (memory_plan.peak_bytes, lib/Analysis/MemoryPlan.cpp), a
// separate computation of the same liveness. A schedule that cannot be
// planned ends in a Fail at the instruction that meets the error.
//
//===----------------------------------------------------------------------===//
#include "fsdp/schedule/StepPlan.h"
#include "EntryPoints.h"
#include "fsdp/schedule/Program.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

using namespace fsdp::schedule;

namespace {

const std::string kDir = FSDP_TEST_SCHEDULE_DIR;
const char *kSchedules[] = {"gpt2_tiny_np1",      "gpt2_tiny_np2",
                            "llama_tiny_np2",     "linear_f32_np1",
                            "linear_f32_np4",     "linear_f64_np3",
                            "linear_sgd_f32_np2", "linear_sgd_f64_np1"};

void checkPlan(const Program &p, const StepPlan &plan, const std::string &ctx) {
  ASSERT_EQ(plan.error, "") << ctx;
  for (const Call &c : plan.calls) {
    fsdp::rt::EntryPoint e;
    const std::string &name = plan.entries[static_cast<size_t>(c.entry)];
    ASSERT_TRUE(fsdp::rt::lookupEntryPoint(name, e)) << ctx << ": " << name;
    std::string got;
    for (uint32_t i = 0; i < c.numArgs; ++i)
      got += fsdp::rt::argClass(plan.argsOf(c)[i].kind);
    EXPECT_EQ(got, e.params) << ctx << ": " << name;
  }
  std::map<int64_t, int> started, waited;
  for (const Call &c : plan.calls)
    for (uint32_t i = 0; i < c.numArgs; ++i)
      if (plan.argsOf(c)[i].kind == ArgKind::Event)
        ++started[plan.argsOf(c)[i].value];
  std::set<int32_t> live;
  for (const Slot &s : plan.slots)
    if (s.state)
      live.insert(static_cast<int32_t>(&s - plan.slots.data()));
  for (const Action &a : plan.actions) {
    switch (a.kind) {
    case ActionKind::Wait:
      EXPECT_EQ(++waited[a.index], 1) << ctx << ": event " << a.index;
      break;
    case ActionKind::Bind:
    case ActionKind::Alias:
      EXPECT_TRUE(live.insert(a.slot).second) << ctx << ": slot " << a.slot;
      break;
    case ActionKind::Zero:
    case ActionKind::CopyIn:
      EXPECT_TRUE(live.count(a.slot)) << ctx << ": slot " << a.slot;
      break;
    case ActionKind::Release:
      EXPECT_EQ(live.erase(a.slot), 1u) << ctx << ": slot " << a.slot;
      break;
    default:
      break;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(started.size()), plan.numEvents) << ctx;
  for (const auto &[event, n] : started) {
    EXPECT_EQ(n, 1) << ctx << ": event " << event;
    EXPECT_EQ(waited[event], 1) << ctx << ": event " << event;
  }
  EXPECT_EQ(plan.outputs.size(), p.outputs().size()) << ctx;
}

TEST(StepPlan, EveryCommittedScheduleIsPlannedConsistently) {
  for (const char *name : kSchedules) {
    Program p = Program::fromFile(kDir + "/" + name + ".json");
    for (bool arena : {true, false}) {
      if (arena && !p.usesArena())
        continue;
      StepPlan::Options o;
      o.arena = arena;
      StepPlan plan = StepPlan::build(p, o);
      std::string ctx = std::string(name) + (arena ? " (arena)" : "");
      checkPlan(p, plan, ctx);
      if (p.plannedPeakBytes() >= 0) {
        EXPECT_EQ(plan.peakBytes, p.plannedPeakBytes()) << ctx;
      }
    }
  }
}

TEST(StepPlan, AnErrorEndsThePlanAtItsInstruction) {
  // Buffer 1 is freed by #0 and read by #1.
  Program p = Program::fromString(
      R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
          "units": [], "buffers": [
            {"id": 0, "dtype": "f32", "shape": [4]},
            {"id": 1, "dtype": "f32", "shape": [4]},
            {"id": 2, "dtype": "f32", "shape": [4]}],
          "inputs": [{"buffer": 0, "role": "features"}],
          "outputs": [{"buffer": 2, "role": "output"}],
          "instructions": [
            {"op": "nn.relu", "operands": [0], "results": [1], "frees": [1],
             "loc": "e.mlir:1:1"},
            {"op": "nn.relu", "operands": [1], "results": [2],
             "loc": "e.mlir:2:1"}]})",
      0, "e.json");
  StepPlan plan = StepPlan::build(p, StepPlan::Options());
  EXPECT_EQ(plan.errorInstruction, 1);
  EXPECT_EQ(plan.error, "e.json: instruction #1 'nn.relu' (e.mlir:2:1): buffer "
                        "1 is used but not live (never defined, or already "
                        "freed)");
  ASSERT_FALSE(plan.actions.empty());
  EXPECT_EQ(plan.actions.back().kind, ActionKind::Fail);
}

// Bug shapes a hand-edited schedule can have, found by trying (the parse
// or the plan names them; none may run with made-up memory or defaults).
std::string loadError(const std::string &text) {
  try {
    Program p = Program::fromString(text, 0, "e.json");
    StepPlan plan = StepPlan::build(p, StepPlan::Options());
    return plan.error;
  } catch (const fsdp::Error &e) {
    return e.what();
  }
}

std::string relu(const std::string &attrs, const std::string &frees,
                 const std::string &extra = "") {
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
      "global_batch": 2, "units": [], "buffers": [
        {"id": 0, "dtype": "f32", "shape": [2, 2]},
        {"id": 1, "dtype": "f32", "shape": [4]},
        {"id": 2, "dtype": "f32", "shape": [2, 2], "view_of": 1},
        {"id": 3, "dtype": "f32", "shape": [2, 2]})" +
         extra + R"(],
      "inputs": [{"buffer": 0, "role": "features", "global_shape": [2, 2]}],
      "outputs": [{"buffer": 3, "role": "output"}],
      "instructions": [
        {"op": "nn.relu", "operands": [0], "results": [2], "frees": )" +
         frees + R"(, "loc": "e.mlir:1:1"},
        {"op": "nn.gelu", "operands": [2], "results": [3], "attrs": )" +
         attrs + R"(, "loc": "e.mlir:2:1"}]})";
}

TEST(StepPlan, BugShapesAreErrors) {
  EXPECT_EQ(loadError(relu("{}", "[]")), "");
  // A misspelt attribute would run with the default.
  EXPECT_NE(loadError(relu(R"({"aproximate": "tanh"})", "[]"))
                .find("instruction #1 (e.mlir:2:1) 'nn.gelu': unknown "
                      "attribute 'aproximate' (it reads: approximate)"),
            std::string::npos);
  // A view of a freed buffer: read, or bound again (not a new buffer of
  // zeros).
  EXPECT_EQ(loadError(relu("{}", "[1]")),
            "e.json: instruction #1 'nn.gelu' (e.mlir:2:1): buffer 2 (a view "
            "of buffer 1) is used but not live (never defined, or already "
            "freed)");
  std::string again = relu("{}", "[1]", R"(, {"id": 5, "dtype": "f32",
      "shape": [2, 2], "view_of": 1})");
  const std::string use = R"("operands": [2], "results": [3])";
  again.replace(again.find(use), use.size(),
                R"("operands": [0], "results": [5])");
  EXPECT_EQ(loadError(again), "e.json: instruction #1 'nn.gelu' (e.mlir:2:1): "
                              "buffer 1 is defined again after its free");
  // A negative arena offset is not "no plan".
  EXPECT_NE(loadError(relu("{}", "[]",
                           R"(, {"id": 4, "dtype": "f32", "shape": [1],
                                 "arena_offset": -64})"))
                .find("buffer 4: arena_offset must be >= 0, got -64"),
            std::string::npos);
  // The batch the ops place rows in is the inputs'.
  std::string text = relu("{}", "[]");
  const std::string batch = R"("global_batch": 2)";
  text.replace(text.find(batch), batch.size(), R"("global_batch": 4)");
  EXPECT_NE(loadError(text).find("global_shape [2, 2] does not have "
                                 "global_batch 4 rows"),
            std::string::npos);
}

} // namespace
