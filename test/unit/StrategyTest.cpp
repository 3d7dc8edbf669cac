//===- StrategyTest.cpp - Sharding strategies in the interpreter ----------===//
//
// In-process (one rank, no MPI) tests of runtime/docs/schedule-format.md,
// "Sharding strategies": `strategy`/`grid` defaults and load-time errors
// (R·S ≠ N, units padded for another S), the `group` attribute (defaults,
// unknown group, sizes checked against the group size), `layout` of unit
// inputs/outputs, fsdp.local_shard and fsdp.all_reduce semantics on one rank,
// the C API's groups and per-collective byte counters, and the shared
// all-reduce byte formula. Multi-rank behaviour is covered end to end by
// fsdp_run_strategies_e2e.py.
//
//===----------------------------------------------------------------------===//
#include "TestDevice.h"
#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/Sharding.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <string>

using namespace fsdp;
using namespace fsdp::rt;
using namespace fsdp::schedule;

namespace {

#define EXPECT_HAS(haystack, needle)                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

std::string errorOf(const std::string &text, bool checkWorld = false) {
  try {
    Program::fromString(text, checkWorld ? fsdp_world_size() : 0, "s.json");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

// A schedule with one unit "u" of 6 f64 elements padded to `padded`, a param
// input of `inNumel` elements (layout `layout`), one instruction `op` from the
// param (buffer 0) to buffer 1 of `outNumel` elements, and output 1.
std::string sched(int world, const std::string &header, const std::string &op,
                  const std::string &attrs, int64_t inNumel, int64_t outNumel,
                  int64_t padded, int64_t shard,
                  const std::string &layout = "shard") {
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": )" +
         std::to_string(world) + header + R"(,
    "units": [{"name": "u", "dtype": "f64", "numel": 6, "padded_numel": )" +
         std::to_string(padded) + R"(, "shard_numel": )" +
         std::to_string(shard) + R"(,
               "params": [{"fqn": "w", "shape": [6], "offset": 0, "numel": 6}]}],
    "buffers": [{"id": 0, "dtype": "f64", "shape": [)" +
         std::to_string(inNumel) + R"(]},
                {"id": 1, "dtype": "f64", "shape": [)" +
         std::to_string(outNumel) + R"(]}],
    "inputs": [{"buffer": 0, "role": "param", "unit": "u", "layout": ")" +
         layout + R"("}],
    "outputs": [{"buffer": 1, "role": "output"}],
    "instructions": [{"op": ")" +
         op + R"(", "operands": [0], "results": [1],
                      "attrs": )" +
         attrs + R"(, "loc": "s.mlir:1:1"}]})";
}

TEST(Strategy, DefaultsAreFullShardOverTheWorld) {
  Program p = Program::fromString(
      sched(2, "", "fsdp.all_gather", "{}", 3, 6, 6, 3), false);
  EXPECT_EQ(p.strategy(), "full-shard");
  EXPECT_EQ(p.replicas(), 1);
  EXPECT_EQ(p.shardSize(), 2);
  EXPECT_EQ(p.groupSize(Group::Shard), 2);
  EXPECT_EQ(p.groupSize(Group::Replicate), 1);
  EXPECT_EQ(p.instructions()[0].group(), Group::Shard);
  Program q = Program::fromString(
      sched(4, "", "fsdp.all_reduce", R"({"op": "sum"})", 2, 2, 8, 2), false);
  EXPECT_EQ(q.instructions()[0].group(), Group::World); // all_reduce default
  EXPECT_FALSE(q.instructions()[0].average());
}

TEST(Strategy, HybridGridSizesGroups) {
  std::string h = R"(, "strategy": "hybrid-shard",
                     "grid": {"replicas": 2, "shard_size": 3})";
  Program p = Program::fromString(
      sched(6, h, "fsdp.all_gather", R"({"group": "shard"})", 2, 6, 6, 2),
      false);
  EXPECT_EQ(p.strategy(), "hybrid-shard");
  EXPECT_EQ(p.groupSize(Group::World), 6);
  EXPECT_EQ(p.groupSize(Group::Shard), 3);
  EXPECT_EQ(p.groupSize(Group::Replicate), 2);
  // all_reduce over replicate of the 2-element shard.
  Program q = Program::fromString(
      sched(6, h, "fsdp.all_reduce", R"({"group": "replicate", "op": "avg"})",
            2, 2, 6, 2),
      false);
  EXPECT_EQ(q.instructions()[0].group(), Group::Replicate);
}

TEST(Strategy, GridErrors) {
  std::string e =
      errorOf(sched(4, R"(, "grid": {"replicas": 3, "shard_size": 2})",
                    "fsdp.all_gather", "{}", 3, 6, 6, 3));
  EXPECT_HAS(e, "grid: replicas 3 x shard_size 2 = 6 does not equal "
                "world_size 4");
  e = errorOf(sched(2, R"(, "grid": {"replicas": 2, "shard_size": 0})",
                    "fsdp.all_gather", "{}", 3, 6, 6, 3));
  EXPECT_HAS(e, "must be >= 1");
  e = errorOf(sched(2, R"(, "strategy": "zero-9")", "fsdp.all_gather", "{}", 3,
                    6, 6, 3));
  EXPECT_HAS(e, "unknown strategy 'zero-9'");
  // Units must be padded for S = 2, not S = 4.
  e = errorOf(sched(4, R"(, "grid": {"replicas": 2, "shard_size": 2})",
                    "fsdp.all_gather", "{}", 2, 8, 8, 2));
  EXPECT_HAS(e, "padded_numel 8 / shard_numel 2 do not match numel 6 over "
                "shard_size 2");
}

TEST(Strategy, GroupErrors) {
  std::string e = errorOf(
      sched(2, "", "fsdp.all_gather", R"({"group": "pod"})", 3, 6, 6, 3));
  EXPECT_HAS(e, "instruction #0 (s.mlir:1:1) 'fsdp.all_gather': unknown "
                "group 'pod' (supported: world, shard, replicate, tensor)");
  std::string h = R"(, "grid": {"replicas": 2, "shard_size": 2})";
  // Over the replicate group (size 2) of a world of 4 the full size is 2·3.
  e = errorOf(sched(4, h, "fsdp.reduce_scatter", R"({"group": "world"})", 6, 3,
                    6, 3, "full"));
  EXPECT_HAS(e, "expected shard 3 x world group size 4");
  e = errorOf(sched(4, h, "fsdp.local_shard", R"({"group": "shard"})", 6, 2, 6,
                    3, "full"));
  EXPECT_HAS(e, "expected the result's 2 x shard group size 2");
  e = errorOf(sched(4, h, "fsdp.all_reduce", "{}", 3, 2, 6, 3));
  EXPECT_HAS(e, "differ in size");
}

TEST(Strategy, LayoutErrors) {
  std::string e =
      errorOf(sched(2, "", "fsdp.all_gather", "{}", 3, 6, 6, 3, "full"));
  EXPECT_HAS(e, "does not hold unit 'u' full padded buffer of 6 f64");
  e = errorOf(sched(2, "", "fsdp.all_gather", "{}", 3, 6, 6, 3, "rows"));
  EXPECT_HAS(e, "unknown layout 'rows' (supported: shard, full)");
}

TEST(Strategy, LocalShardAndAllReduceOnOneRank) {
  // World 1: the rank's slice is everything, the all-reduce is a copy
  // (avg divides by G = 1) and no bytes are sent.
  Program ls =
      Program::fromString(sched(1, R"(, "strategy": "shard-optimizer")",
                                "fsdp.local_shard", "{}", 6, 6, 6, 6, "full"));
  HostValues out = runStep(ls, {{0, {1, 2, 3, 4, 5, 6}}});
  EXPECT_EQ(out.at(1), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  Program ar = Program::fromString(
      sched(1, R"(, "strategy": "no-shard")", "fsdp.all_reduce",
            R"({"op": "avg", "group": "world"})", 6, 6, 6, 6, "full"));
  out = runStep(ar, {{0, {1, -2, 3, 4, 5, 6}}});
  EXPECT_EQ(out.at(1), (std::vector<double>{1, -2, 3, 4, 5, 6}));
  // On an explicit device: no bytes sent.
  fsdp_device d = fsdp::test::cpuDevice();
  fsdp_device_reset_stats(d);
  Executor ex(ar, d);
  ex.write(0, {1, -2, 3, 4, 5, 6});
  ex.step();
  fsdp_device_stats st{};
  fsdp_device_get_stats(d, &st);
  EXPECT_EQ(st.comm_bytes[FSDP_COLL_ALL_REDUCE], 0);
}

TEST(Strategy, CApiChannelsWithoutMpi) {
  // The grid's groups are channels split from the world one.
  fsdp_channel w = fsdp::test::worldChannel(), shard = nullptr, repl = nullptr;
  ASSERT_EQ(fsdp_channel_split(w, 0, 0, &shard), FSDP_OK);
  ASSERT_EQ(fsdp_channel_split(w, 0, 0, &repl), FSDP_OK);
  for (fsdp_channel c : {w, shard, repl}) {
    EXPECT_EQ(fsdp_channel_size(c), 1);
    EXPECT_EQ(fsdp_channel_rank(c), 0);
  }
  EXPECT_NE(fsdp_channel_split(w, -1, 0, &shard), FSDP_OK);
  double in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
  fsdp_event h = nullptr;
  ASSERT_EQ(
      fsdp_all_reduce_start(repl, in, out, 3, FSDP_F64, FSDP_REDUCE_AVG, &h),
      FSDP_OK);
  ASSERT_EQ(fsdp_wait(h), FSDP_OK);
  EXPECT_EQ(out[2], 3.0);
  EXPECT_NE(
      fsdp_all_reduce_start(nullptr, in, out, 3, FSDP_F64, FSDP_REDUCE_SUM, &h),
      FSDP_OK);
  EXPECT_HAS(fsdp_last_error(), "invalid argument");
  int32_t iv[2] = {1, 2}, io[2];
  EXPECT_NE(fsdp_all_reduce_start(w, iv, io, 2, FSDP_I32, FSDP_REDUCE_AVG, &h),
            FSDP_OK);
  EXPECT_HAS(fsdp_last_error(), "avg needs a float dtype");
  fsdp_channel_destroy(shard);
  fsdp_channel_destroy(repl);
}

TEST(Strategy, RingAllReduceBytes) {
  // 2(G−1)/G·B: 288 bytes over 4 ranks -> 432; over 2 -> 288; 1 rank -> 0.
  EXPECT_EQ(fsdp::ringAllReduceBytesPerRank(288, 4), 432);
  EXPECT_EQ(fsdp::ringAllReduceBytesPerRank(288, 2), 288);
  EXPECT_EQ(fsdp::ringAllReduceBytesPerRank(288, 1), 0);
  EXPECT_EQ(fsdp::ringAllReduceBytesPerRank(10, 3), 13); // rounded down
  EXPECT_EQ(fsdp::ringCollectiveBytesPerRank(280, 2), 140);
}

} // namespace
