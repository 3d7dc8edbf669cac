//===- ArenaTest.cpp - Tests of the planned arena ------------------------===//
//
// The runtime's use of the compiler's memory plan (runtime/docs/
// schedule-format.md, "Runtime decisions"): binding of buffers to
// arena + arena_offset (slot reuse, zero fill, the plan's peak bytes, one
// arena reused across steps), the fallback to per-buffer allocation for a
// partial plan, the load-time checks of offsets, the error that reports two
// live buffers with overlapping offsets; and the resident training state:
// outputs written in place into the state they replace ("aliases") or
// copied into it, the checks of unsafe aliases and freed state; a sum
// written over its running sum ("in_place_of") and its load-time checks.
//
//===----------------------------------------------------------------------===//
#include "TestDevice.h"
#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ctime>
#include <string>

using namespace fsdp;
using namespace fsdp::rt;
using namespace fsdp::schedule;

namespace {

#define EXPECT_HAS(haystack, needle)                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

// x [2, 3] -> relu -> y -> relu -> z, x freed after #0 and y after #1, so x
// and z may share a slot. Offsets of x, y, z and arena_bytes as given;
// offZ < 0 leaves z without an arena_offset.
std::string chain(int64_t offX, int64_t offY, int64_t offZ,
                  int64_t arenaBytes = 128) {
  auto buf = [](int id, int64_t off) {
    std::string s = R"({"id": )" + std::to_string(id) +
                    R"(, "dtype": "f32", "shape": [2, 3])";
    if (off >= 0)
      s += R"(, "arena_offset": )" + std::to_string(off);
    return s + "}";
  };
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "memory_plan": {"peak_bytes": 48, "arena_bytes": )" +
         std::to_string(arenaBytes) + R"(, "arena_alignment": 64},
    "units": [], "buffers": [)" +
         buf(0, offX) + ", " + buf(1, offY) + ", " + buf(2, offZ) + R"(],
    "inputs": [{"buffer": 0, "role": "features", "global_shape": [2, 3]}],
    "outputs": [{"buffer": 2, "role": "output"}],
    "instructions": [
      {"op": "nn.relu", "operands": [0], "results": [1], "frees": [0],
       "loc": "chain.mlir:3:5"},
      {"op": "nn.relu", "operands": [1], "results": [2], "frees": [1],
       "loc": "chain.mlir:4:5"}]})";
}

std::string runError(Program &p, const HostValues &in) {
  try {
    runStep(p, in);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

const HostValues kX = {{0, {-1, 2, -3, 4, 0, 0.5}}};

TEST(Arena, BindsBuffersAndReusesSlots) {
  // z reuses x's slot: x is freed after #0, z is defined at #1.
  Program p =
      Program::fromString(chain(0, 64, 0), fsdp_world_size(), "chain.json");
  ASSERT_TRUE(p.usesArena());
  EXPECT_EQ(p.plannedArenaBytes(), 128);
  Executor ex(p, fsdp::test::cpuDevice());
  EXPECT_TRUE(ex.usesArena());
  EXPECT_EQ(ex.arenaBytes(), 128);
  ex.write(0, kX.at(0));
  ex.step();
  std::vector<double> z;
  ex.read(2, z);
  EXPECT_EQ(z, (std::vector<double>{0, 2, 0, 4, 0, 0.5}));
  // The plan's bookkeeping: at most two of the 24-byte buffers are live.
  EXPECT_EQ(ex.lastPeakBytes(), 48);
  // A second step reuses the arena.
  ex.write(0, {3, -3, 3, -3, 3, -3});
  ex.step();
  ex.read(2, z);
  EXPECT_EQ(z, (std::vector<double>{3, 0, 3, 0, 3, 0}));
  // Per buffer: the same results and the same bookkeeping.
  Executor pb(p, fsdp::test::cpuDevice(), AllocMode::PerBuffer);
  EXPECT_FALSE(pb.usesArena());
  pb.write(0, kX.at(0));
  pb.step();
  pb.read(2, z);
  EXPECT_EQ(z, (std::vector<double>{0, 2, 0, 4, 0, 0.5}));
  EXPECT_EQ(pb.lastPeakBytes(), 48);
}

TEST(Arena, ZeroFillsReusedSlot) {
  // y is a view of the 2-row buffer 3 (two [2, 3] halves) bound by #1: the
  // other half must read zero although x's values were in that slot.
  std::string s = R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "memory_plan": {"arena_bytes": 128, "arena_alignment": 64}, "units": [],
    "buffers": [{"id": 0, "dtype": "f32", "shape": [2, 3], "arena_offset": 0},
                {"id": 1, "dtype": "f32", "shape": [2, 3], "arena_offset": 64},
                {"id": 3, "dtype": "f32", "shape": [12], "arena_offset": 0},
                {"id": 2, "dtype": "f32", "shape": [2, 3], "view_of": 3,
                 "offset": 6}],
    "inputs": [{"buffer": 0, "role": "features"}],
    "outputs": [{"buffer": 3, "role": "output"}],
    "instructions": [
      {"op": "nn.relu", "operands": [0], "results": [1], "frees": [0]},
      {"op": "nn.relu", "operands": [1], "results": [2], "frees": [1]}]})";
  Program p = Program::fromString(s);
  ASSERT_TRUE(p.usesArena());
  HostValues out = runStep(p, {{0, {5, 6, 7, 8, 9, 10}}});
  EXPECT_EQ(out.at(3),
            (std::vector<double>{0, 0, 0, 0, 0, 0, 5, 6, 7, 8, 9, 10}));
}

TEST(Arena, GatherOverSmallerRunTimeGroupZeroFillsTail) {
  // A 2-rank schedule run on one rank (loaded without the world-size
  // check): the all-gather writes only this rank's shard, into the slot
  // where input x's values 8, 9, 10 were; the rest must read zero. Results
  // of other ops, which write every element, are not zero-filled first.
  std::string s = R"({"format": "fsdp-schedule", "version": 2, "world_size": 2,
    "memory_plan": {"arena_bytes": 128, "arena_alignment": 64}, "units": [],
    "buffers": [{"id": 0, "dtype": "f32", "shape": [6], "arena_offset": 0},
                {"id": 1, "dtype": "f32", "shape": [6], "arena_offset": 64},
                {"id": 3, "dtype": "f32", "shape": [3], "view_of": 1,
                 "offset": 0},
                {"id": 2, "dtype": "f32", "shape": [6], "arena_offset": 0}],
    "inputs": [{"buffer": 0, "role": "features"}],
    "outputs": [{"buffer": 2, "role": "output"}],
    "instructions": [
      {"op": "nn.relu", "operands": [0], "results": [1], "frees": [0]},
      {"op": "fsdp.all_gather", "operands": [3], "results": [2],
       "attrs": {"group": "world"}, "frees": [1]}]})";
  Program p = Program::fromString(s, /*expectedWorldSize=*/0);
  ASSERT_TRUE(p.usesArena());
  ASSERT_EQ(fsdp_world_size(), 1) << "the unit tests run on one rank";
  HostValues out = runStep(p, {{0, {5, 6, 7, 8, 9, 10}}});
  EXPECT_EQ(out.at(2), (std::vector<double>{5, 6, 7, 0, 0, 0}));
}

TEST(Arena, OverlapWithInputIsAnError) {
  // y is bound to x's bytes while x (an input) is still live.
  Program p =
      Program::fromString(chain(0, 0, 64), fsdp_world_size(), "chain.json");
  std::string m = runError(p, kX);
  EXPECT_HAS(m, "chain.json: instruction #0 'nn.relu' (chain.mlir:3:5)");
  EXPECT_HAS(m, "memory plan error: buffer 1 at arena bytes [0, 24) overlaps "
                "live buffer 0 at arena bytes [0, 24), live since the step "
                "start (an input)");
  EXPECT_EQ(fsdp::test::allocationsLeft([&] {
              EXPECT_HAS(fsdp::test::stepOnTestDevice(p, kX, AllocMode::Arena),
                         "overlaps");
            }),
            0); // released on the error path
}

TEST(Arena, OverlapBetweenIntermediatesIsAnError) {
  // Two results of one nn.split with overlapping offsets [64, 88) and
  // [64, 88): the second is bound while the first is live.
  std::string s = R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "memory_plan": {"arena_bytes": 192, "arena_alignment": 64}, "units": [],
    "buffers": [{"id": 0, "dtype": "f32", "shape": [4, 3], "arena_offset": 0},
                {"id": 1, "dtype": "f32", "shape": [2, 3], "arena_offset": 64},
                {"id": 2, "dtype": "f32", "shape": [2, 3], "arena_offset": 64},
                {"id": 3, "dtype": "f32", "shape": [2, 3], "arena_offset": 128}],
    "inputs": [{"buffer": 0, "role": "features"}],
    "outputs": [{"buffer": 3, "role": "output"}],
    "instructions": [
      {"op": "nn.split", "operands": [0], "results": [1, 2], "frees": [0],
       "attrs": {"axis": 0, "sizes": [2, 2]}, "loc": "s.mlir:2:3"},
      {"op": "nn.add", "operands": [1, 2], "results": [3], "frees": [1, 2],
       "loc": "s.mlir:3:3"}]})";
  Program p = Program::fromString(s, fsdp_world_size(), "split.json");
  std::string m = runError(p, {{0, std::vector<double>(12, 1.0)}});
  EXPECT_HAS(m, "split.json: instruction #0 'nn.split' (s.mlir:2:3): memory "
                "plan error: buffer 2 at arena bytes [64, 88) overlaps live "
                "buffer 1 at arena bytes [64, 88), live since instruction #0 "
                "'nn.split' (s.mlir:2:3)");
  // With disjoint offsets the same schedule runs: 1 + 1 = 2 (buffer 3
  // reuses buffer 0's bytes, freed after #0).
  std::string ok = s;
  std::string from =
      R"("id": 2, "dtype": "f32", "shape": [2, 3], "arena_offset": 64)";
  ok.replace(
      ok.find(from), from.size(),
      R"("id": 2, "dtype": "f32", "shape": [2, 3], "arena_offset": 128)");
  from = R"("id": 3, "dtype": "f32", "shape": [2, 3], "arena_offset": 128)";
  ok.replace(ok.find(from), from.size(),
             R"("id": 3, "dtype": "f32", "shape": [2, 3], "arena_offset": 0)");
  Program okp = Program::fromString(ok);
  EXPECT_EQ(runStep(okp, {{0, std::vector<double>(12, 1.0)}}).at(3),
            std::vector<double>(6, 2.0));
}

TEST(Arena, PartialPlanAllocatesPerBuffer) {
  Program p = Program::fromString(chain(0, 0, -1)); // z has no offset
  EXPECT_FALSE(p.usesArena());
  EXPECT_EQ(p.plannedArenaBytes(), 0);
  int64_t peak = 0;
  HostValues out = runStep(p, kX, &peak); // the overlapping offsets are ignored
  EXPECT_EQ(out.at(2), (std::vector<double>{0, 2, 0, 4, 0, 0.5}));
  EXPECT_EQ(peak, 48);
  Executor ex(p, fsdp::test::cpuDevice());
  EXPECT_FALSE(ex.usesArena());
  EXPECT_EQ(ex.arenaBytes(), 0);
}

TEST(Arena, LoadTimeOffsetChecks) {
  auto err = [](const std::string &text) {
    try {
      Program::fromString(text, fsdp_world_size(), "bad.json");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_HAS(err(chain(0, 64, 120)),
             "bad.json: buffer 2: arena bytes [120, 144) end past the arena "
             "of 128 bytes");
  EXPECT_HAS(err(chain(0, 64, 100)),
             "bad.json: buffer 2: arena bytes [100, 124) start at an offset "
             "that is not 64-byte aligned");
  EXPECT_HAS(err(chain(0, 64, 128)), "arena bytes [128, 152)");
}

TEST(Arena, CompilerSchedulesCarryAPlan) {
  Program p = Program::fromFile(std::string(FSDP_TEST_SCHEDULE_DIR) +
                                "/gpt2_tiny_np1.json");
  EXPECT_TRUE(p.usesArena());
  EXPECT_GT(p.plannedArenaBytes(), 0);
}

// One SGD step p' = p - 0.5·g on a state input p [4] with g = the features
// x [4]: the output p' replaces p at the next step. `aliases` writes p' over
// p (the update reads each element before it writes it); `extra` adds
// instructions after the update. Offsets: p at 0, x at 64, p' at `outOff`.
std::string sgdState(bool alias, int64_t outOff = 0,
                     const std::string &extra = "",
                     const std::string &pFrees = "[1]") {
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "optimizer": {"kind": "sgd", "lr": 0.5},
    "memory_plan": {"peak_bytes": 48, "arena_bytes": 256},
    "units": [{"name": "u", "dtype": "f32", "numel": 4, "padded_numel": 4,
               "shard_numel": 4, "params": [{"fqn": "w", "shape": [4],
               "offset": 0, "numel": 4}]}],
    "buffers": [{"id": 0, "dtype": "f32", "shape": [4], "arena_offset": 0},
                {"id": 1, "dtype": "f32", "shape": [4], "arena_offset": 64},
                {"id": 2, "dtype": "f32", "shape": [4], "arena_offset": )" +
         std::to_string(outOff) + R"(},
                {"id": 3, "dtype": "f32", "shape": [4], "arena_offset": 128}],
    "inputs": [{"buffer": 0, "role": "param", "unit": "u"},
               {"buffer": 1, "role": "features"}],
    "outputs": [{"buffer": 2, "role": "param", "unit": "u")" +
         (alias ? R"(, "aliases": 0)" : "") + R"(}],
    "instructions": [
      {"op": "nn.sgd_update", "operands": [0, 1], "results": [2],
       "frees": )" +
         pFrees + R"(, "loc": "s.mlir:2:3"})" + extra + R"(]})";
}

std::vector<double> trainState(const Program &p, AllocMode mode) {
  Executor ex(p, fsdp::test::cpuDevice(), mode);
  ex.write(0, {1, 2, 3, 4});
  for (int s = 0; s < 3; ++s) {
    ex.write(1, {2, -2, 4, 0});
    ex.step();
  }
  std::vector<double> v;
  ex.read(0, v);
  return v;
}

TEST(State, ResidentAndWrittenInPlace) {
  // Three steps of p -= 0.5·x: p = {1, 2, 3, 4} - 1.5·{2, -2, 4, 0}.
  const std::vector<double> want = {-2, 5, -3, 4};
  Program inPlace =
      Program::fromString(sgdState(true), fsdp_world_size(), "sgd.json");
  Program copied =
      Program::fromString(sgdState(false, 192), fsdp_world_size(), "sgd.json");
  for (AllocMode m : {AllocMode::Arena, AllocMode::PerBuffer}) {
    EXPECT_EQ(trainState(inPlace, m), want);
    EXPECT_EQ(trainState(copied, m), want);
  }
  Executor a(inPlace, fsdp::test::cpuDevice()),
      b(copied, fsdp::test::cpuDevice());
  EXPECT_EQ(a.inPlaceOutputs(), 1);
  EXPECT_EQ(a.copiedOutputs(), 0);
  EXPECT_EQ(b.inPlaceOutputs(), 0);
  EXPECT_EQ(b.copiedOutputs(), 1);
}

TEST(State, UnsafeAliasesAndFreedStateAreErrors) {
  auto err = [](const std::string &text) {
    try {
      Program p = Program::fromString(text, fsdp_world_size(), "sgd.json");
      Executor ex(p, fsdp::test::cpuDevice());
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // A read of the old state after the update wrote the new one.
  EXPECT_HAS(err(sgdState(true, 0, R"(,
      {"op": "nn.add", "operands": [0, 1], "results": [3], "frees": [3],
       "loc": "s.mlir:3:3"})")),
             "sgd.json: output buffer 2 (role 'param', unit 'u') aliases "
             "input buffer 0, but instruction #1 'nn.add' (s.mlir:3:3) reads "
             "the input after instruction #0 'nn.sgd_update' (s.mlir:2:3) "
             "writes the output");
  // An alias in the arena must share the input's slot.
  EXPECT_HAS(err(sgdState(true, 192)),
             "aliases input buffer 0, but its arena_offset 192 differs from "
             "the input's 0");
  // Planned into the state's slot, the output must be written in place.
  EXPECT_HAS(err(sgdState(false, 0)),
             "sgd.json: output buffer 2 (role 'param', unit 'u') has the "
             "arena_offset of the state input buffer 0 it replaces but no "
             "\"aliases\": 0");
  // The resident state is never freed by a step.
  EXPECT_HAS(err(sgdState(true, 0, "", "[0, 1]")),
             "sgd.json: instruction #0 'nn.sgd_update' (s.mlir:2:3): frees "
             "state input buffer 0, but the training state is resident");
}

TEST(State, InputsPlannedOverEachOtherAreAnError) {
  // The features planned over the resident parameter: the first step
  // stops before any kernel, instead of training on clobbered state.
  std::string text = sgdState(true);
  std::string from =
      R"({"id": 1, "dtype": "f32", "shape": [4], "arena_offset": 64})";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(),
               R"({"id": 1, "dtype": "f32", "shape": [4], "arena_offset": 0})");
  Program p = Program::fromString(text, fsdp_world_size(), "sgd.json");
  Executor ex(p, fsdp::test::cpuDevice());
  ex.write(0, {1, 2, 3, 4});
  ex.write(1, {2, -2, 4, 0});
  try {
    ex.step();
    FAIL();
  } catch (const Error &e) {
    EXPECT_HAS(e.what(), "input buffer 1 (role 'features'): memory plan "
                         "error: buffer 1 at arena bytes [0, 16) overlaps live "
                         "buffer 0 at arena bytes [0, 16), live since the step "
                         "start");
  }
}

// x [4] -> y = relu(x) -> z = y + x written over y (in_place_of: a gradient
// accumulation's sum over its running sum), z the output. `extra` adds
// instructions; offZ is z's arena offset (y's is 64; -1: no plan at all).
std::string inPlace(int64_t offZ, const std::string &zAttrs = "",
                    const std::string &extra = "") {
  bool plan = offZ >= 0;
  auto off = [&](int64_t o) {
    return plan ? R"(, "arena_offset": )" + std::to_string(o) : std::string();
  };
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "memory_plan": {"peak_bytes": 32)" +
         std::string(plan ? R"(, "arena_bytes": 128, "arena_alignment": 64)"
                          : "") +
         R"(}, "units": [],
    "buffers": [{"id": 0, "dtype": "f32", "shape": [4])" +
         off(0) + R"(},
                {"id": 1, "dtype": "f32", "shape": [4])" +
         off(64) + R"(},
                {"id": 2, "dtype": "f32", "shape": [4])" +
         off(offZ) + (zAttrs.empty() ? R"(, "in_place_of": 1)" : zAttrs) +
         R"(},
                {"id": 3, "dtype": "f32", "shape": [4])" +
         off(0) + R"(}],
    "inputs": [{"buffer": 0, "role": "features"}],
    "outputs": [{"buffer": 2, "role": "output"}],
    "instructions": [
      {"op": "nn.relu", "operands": [0], "results": [1], "loc": "a.mlir:2:3"},
      {"op": "nn.add", "operands": [1, 0], "results": [2], "frees": [1, 0],
       "loc": "a.mlir:3:3"})" +
         extra + "]}";
}

TEST(Arena, SumWrittenOverItsRunningSum) {
  // Arena and per buffer: the sum takes the running sum's memory, so the
  // step's peak is x and y alone (32 bytes), not 48.
  for (int64_t offZ : {64, -1}) {
    Program p = Program::fromString(inPlace(offZ));
    EXPECT_EQ(p.usesArena(), offZ >= 0);
    int64_t peak = 0;
    HostValues out = runStep(p, {{0, {-1, 2, -3, 4}}}, &peak);
    EXPECT_EQ(out.at(2), (std::vector<double>{-1, 4, -3, 8}));
    EXPECT_EQ(peak, 32);
  }
}

TEST(Arena, BadInPlaceIsALoadError) {
  auto err = [](const std::string &text) {
    try {
      Program::fromString(text, fsdp_world_size(), "acc.json");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_HAS(err(inPlace(0)), "acc.json: buffer 2 is in_place_of buffer 1, "
                              "but its arena_offset 0 differs from that "
                              "one's 64");
  EXPECT_HAS(err(inPlace(64, R"(, "in_place_of": 7)")),
             "acc.json: buffer 2 is in_place_of buffer 7, which does not "
             "exist");
  EXPECT_HAS(err(inPlace(64, R"(, "in_place_of": 0)")),
             "buffer 2 is in_place_of buffer 0, which is an input (role "
             "'features')");
  EXPECT_HAS(err(inPlace(64, R"(, "in_place_of": -2)")),
             "in_place_of must be a buffer id, got -2");
  // The running sum read after the sum is written over it.
  std::string later = inPlace(64, "", R"(,
      {"op": "nn.relu", "operands": [1], "results": [3], "loc": "a.mlir:4:3"})");
  EXPECT_HAS(err(later), "acc.json: buffer 2 is in_place_of buffer 1, but "
                         "instruction #2 'nn.relu' (a.mlir:4:3) reads that "
                         "buffer after instruction #1 'nn.add' (a.mlir:3:3) "
                         "writes over it");
  // Only an nn.add reading the running sum first writes over it.
  std::string swapped = inPlace(64);
  std::string from = R"("operands": [1, 0], "results": [2])";
  swapped.replace(swapped.find(from), from.size(),
                  R"("operands": [0, 1], "results": [2])");
  EXPECT_HAS(err(swapped), "but it is not the result of an nn.add whose "
                           "first operand is all of that buffer");
}

// The load-time check of in_place_of is linear in the program: a gradient
// accumulation of many units and micro-batches has an in-place sum per unit
// per micro-batch, and the check scanned the whole program for each (an
// interleaved pipeline's 24 MB schedule, pipeline-tag-bound.test's, took
// fsdp-run over two minutes of CPU to load). K sums over K running sums,
// 2K instructions: the quadratic check took ~10 s of CPU here at K = 10^4,
// the linear one milliseconds; the bound (2 s) leaves room for a loaded
// machine either way. The verdict on a late read is the same, naming the
// first reader.
std::string manySums(int k, bool lateRead) {
  std::string buffers = R"({"id": 0, "dtype": "f32", "shape": [4]})";
  std::string instructions;
  for (int i = 0; i < k; ++i) {
    std::string y = std::to_string(1 + 2 * i), z = std::to_string(2 + 2 * i);
    buffers += R"(, {"id": )" + y + R"(, "dtype": "f32", "shape": [4]})" +
               R"(, {"id": )" + z +
               R"(, "dtype": "f32", "shape": [4], "in_place_of": )" + y + "}";
    instructions += std::string(i ? ", " : "") + R"({"op": "nn.relu", )" +
                    R"("operands": [0], "results": [)" + y +
                    R"(]}, {"op": "nn.add", "operands": [)" + y +
                    R"(, 0], "results": [)" + z + "]}";
  }
  if (lateRead) // reads the first running sum after its sum is written
    instructions += R"(, {"op": "nn.relu", "operands": [1], "results": [)" +
                    std::to_string(2 * k + 1) + "]}";
  if (lateRead)
    buffers += R"(, {"id": )" + std::to_string(2 * k + 1) +
               R"(, "dtype": "f32", "shape": [4]})";
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "memory_plan": {"peak_bytes": 32}, "units": [], "buffers": [)" +
         buffers + R"(], "inputs": [{"buffer": 0, "role": "features"}],
    "outputs": [{"buffer": 2, "role": "output"}], "instructions": [)" +
         instructions + "]}";
}

TEST(Arena, InPlaceCheckIsLinearInTheProgram) {
  const int k = 10000;
  std::string text = manySums(k, false);
  std::clock_t start = std::clock();
  Program p = Program::fromString(text, 1, "many.json");
  double cpu = double(std::clock() - start) / CLOCKS_PER_SEC;
  EXPECT_EQ(p.instructions().size(), size_t(2 * k));
  EXPECT_LT(cpu, 2.0) << "loading " << 2 * k << " instructions with " << k
                      << " in_place_of sums";
  try {
    Program::fromString(manySums(k, true), 1, "many.json");
    ADD_FAILURE() << "a late read of a running sum was accepted";
  } catch (const Error &e) {
    EXPECT_HAS(std::string(e.what()),
               "many.json: buffer 2 is in_place_of buffer 1, but "
               "instruction #20000 'nn.relu' reads that buffer after "
               "instruction #1 'nn.add' writes over it");
  }
}

} // namespace
