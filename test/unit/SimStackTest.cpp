//===- SimStackTest.cpp - the training stack's costs ----------------------===//
//
// The spec's stack (fsdp/Analysis/SimStack.h; docs/collective-model.md,
// "Stacks"): its reader's diagnostics, the per-parameter collectives, the
// backward's re-gather after a recompute (DeepSpeed's reuse distance), the
// per-rank host loops, the persistent parameters' gather after the step and
// the buffer passes over the moved bytes, each checked against the ring
// formula or a count made here by hand.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/SimStack.h"
#include "fsdp/Analysis/Simulator.h"

#include "SpecFile.h"

#include <gtest/gtest.h>

using namespace mlir::fsdp;
using json = nlohmann::json;
using fsdp_test::writeSpec;

namespace {

// The spec's stack (docs/collective-model.md, "Stacks"): DeepSpeed ZeRO-3
// v0.3 issues one collective per parameter, so a unit of P parameters pays
// P ring latencies; parameters under the persistence threshold are not
// all-gathered; the bytes are split by the parameters' elements.
TEST(Stack, PerParameterCollectivesPayALatencyEach) {
  // 16 ranks over 4 nodes of 4, α 1e-5 s and 1e9 B/s on both links.
  std::string path = writeSpec("stack", json::parse(R"({"stack": {
      "name": "test", "per_param_collectives": true,
      "persistence_threshold": 100, "sync_at_gather_wait": true,
      "source": "test"},
      "intra_node": {"latency_s": 1e-5}, "inter_node": {"latency_s": 1e-5}})"));
  std::string error;
  std::optional<ClusterSpec> s = ClusterSpec::load(path, error);
  ASSERT_TRUE(s.has_value()) << error;
  EXPECT_TRUE(s->stack.perParamCollectives);
  EXPECT_TRUE(s->stack.syncAtGatherWait);
  EXPECT_DOUBLE_EQ(s->stack.persistenceThreshold, 100);
  Simulator sim(*s);
  const int64_t numels[] = {3000, 10, 1000}; // 4010 elements, 16040 bytes
  const int64_t bytes = 16040, g = 16;
  auto ring = [&](double b) { return 15 * 1e-5 + 15.0 / 16 * b / 1e9; };
  // All-gather: the 10-element parameter persists; two rings of 12000 and
  // 4000 bytes: 2 · 15α + 15/16 · 16000 / B.
  EXPECT_NEAR(sim.unitCollectiveTime(CollectiveKind::AllGather, bytes, numels,
                                     g, 1, false),
              ring(12000) + ring(4000), 1e-15);
  EXPECT_NEAR(sim.unitCollectiveTime(CollectiveKind::AllGather, bytes, numels,
                                     g, 1, false),
              2 * 15 * 1e-5 + 15.0 / 16 * 16000 / 1e9, 1e-15);
  // Reduce-scatter: every parameter's gradient, three rings.
  EXPECT_NEAR(sim.unitCollectiveTime(CollectiveKind::ReduceScatter, bytes,
                                     numels, g, 1, false),
              ring(12000) + ring(40) + ring(4000), 1e-15);
  // All-reduce (DDP, HSDP's replicate leg) and a unit without parameters:
  // one collective.
  EXPECT_DOUBLE_EQ(
      sim.unitCollectiveTime(CollectiveKind::AllReduce, bytes, numels, g, 1,
                             false),
      sim.collectiveTime(CollectiveKind::AllReduce, bytes, g, 1, false));
  EXPECT_DOUBLE_EQ(
      sim.unitCollectiveTime(CollectiveKind::AllGather, bytes, {}, g, 1, false),
      ring(bytes));

  // Without a stack: one collective per unit, whatever its parameters.
  std::optional<ClusterSpec> plain =
      ClusterSpec::load(writeSpec("nostack", json::object()), error);
  ASSERT_TRUE(plain.has_value()) << error;
  EXPECT_FALSE(plain->stack.perParamCollectives);
  EXPECT_FALSE(plain->stack.syncAtGatherWait);
  EXPECT_DOUBLE_EQ(
      Simulator(*plain).unitCollectiveTime(CollectiveKind::ReduceScatter, bytes,
                                           numels, 4, 1, false),
      3 * 1e-6 + 0.75 * bytes / 1e9);
}

TEST(Stack, BadStackIsNamed) {
  std::string error;
  for (auto [stack, message] :
       {std::pair<const char *, const char *>{
            R"({"per_param_collectives": 1})",
            "'stack.per_param_collectives' must be true or false"},
        {R"({"persistence_threshold": -1})",
         "'stack.persistence_threshold' must be non-negative"},
        {R"({"sync_at_gather_wiat": true})",
         "'stack.sync_at_gather_wiat' is not a stack key (name, "
         "per_param_collectives, sync_at_gather_wait, regather_for_recompute, "
         "persistent_gather, persistence_threshold, max_reuse_distance, "
         "host_call_s, host_calls_per_rank, persistent_gather_calls_per_rank, "
         "gather_serial_passes, gather_copy_passes, reduce_copy_passes, "
         "source)"},
        {R"({"regather_for_recompute": "yes"})",
         "'stack.regather_for_recompute' must be true or false"},
        {R"({"max_reuse_distance": -1})",
         "'stack.max_reuse_distance' must be non-negative"},
        {R"({"host_call_s": "2us"})",
         "missing or non-numeric 'stack.host_call_s'"},
        {R"({"host_calls_per_rank": -3})",
         "'stack.host_calls_per_rank' must be non-negative"},
        {R"({"persistent_gather": 1})",
         "'stack.persistent_gather' must be true or false"},
        {R"({"persistent_gather_calls_per_rank": [4]})",
         "missing or non-numeric 'stack.persistent_gather_calls_per_rank'"},
        {R"({"gather_serial_passes": -1})",
         "'stack.gather_serial_passes' must be non-negative"},
        {R"({"gather_copy_passes": "2"})",
         "missing or non-numeric 'stack.gather_copy_passes'"},
        {R"({"reduce_copy_passes": -0.5})",
         "'stack.reduce_copy_passes' must be non-negative"},
        {R"({"name": 3})", "'stack.name' must be a string"},
        {R"([true])", "'stack' must be an object"}}) {
    json extra = json::object();
    extra["stack"] = json::parse(stack);
    std::string path = writeSpec("badstack", extra);
    EXPECT_FALSE(ClusterSpec::load(path, error).has_value()) << stack;
    EXPECT_EQ(error, "cluster spec '" + path + "': " + message);
  }
}

/// A spec with `stack` and α = 0 on both links, so a collective's time is
/// its bandwidth term alone: (G − 1)/G · S / 1e9 B/s.
std::optional<ClusterSpec> bandwidthOnly(const std::string &name,
                                         const json &stack) {
  json extra = json::parse(R"({"intra_node": {"latency_s": 0},
      "inter_node": {"latency_s": 0}})");
  extra["stack"] = stack;
  std::string error;
  std::optional<ClusterSpec> s =
      ClusterSpec::load(writeSpec(name, extra), error);
  EXPECT_TRUE(s.has_value()) << error;
  return s;
}

// A GPT block as DeepSpeed's hooks see it: sub-modules in forward order,
// each fetched and released with its own parameters.
const llvm::StringRef kBlockFqns[] = {
    "h.0.ln_1.weight",      "h.0.ln_1.bias",          "h.0.attn.c_attn.weight",
    "h.0.attn.c_attn.bias", "h.0.attn.c_proj.weight", "h.0.mlp.c_fc.weight",
    "h.0.mlp.c_proj.weight"};
const int64_t kBlockNumels[] = {8, 8, 300, 24, 100, 400, 400};

// Which parameters the backward gathers again after the recompute: a
// sub-module is kept when 2 × the elements of the sub-modules after it in the
// block (their recompute, then their backward) are below the limit.
TEST(Stack, RecomputeReleasesBeyondTheReuseDistance) {
  StackProfile stack;
  stack.perParamCollectives = true;
  stack.persistenceThreshold = 10; // the LayerNorm's two 8-element tensors
  stack.regatherForRecompute = true;
  // Elements after each sub-module: ln_1 1224, c_attn 900, c_proj 800,
  // c_fc 400, c_proj (mlp) 0; twice that between its two uses.
  auto again = [&](double limit) {
    stack.maxReuseDistance = limit;
    std::string bits;
    for (bool b : regatheredAfterRecompute(stack, kBlockNumels, kBlockFqns))
      bits += b ? '1' : '0';
    return bits;
  };
  // 0: every parameter released after each use, but persistent ones.
  EXPECT_EQ(again(0), "0011111");
  // DeepSpeed's default 1e9: all kept (the block is small).
  EXPECT_EQ(again(1e9), "0000000");
  // 2·800 = 1600 >= 1600: c_proj released; c_fc's 800 < 1600 kept. The
  // c_attn weight and bias go together (one sub-module).
  EXPECT_EQ(again(1600), "0011100");
  // Just above: c_proj (1600) kept too; c_attn (1800) released.
  EXPECT_EQ(again(1601), "0011000");
  // The last sub-module is used twice in a row: kept at any positive limit.
  EXPECT_EQ(again(1), "0011110");
  // Off: nothing is gathered again.
  stack.regatherForRecompute = false;
  EXPECT_EQ(again(0), "0000000");
}

// A unit per sub-module under a region of the whole block (policy=module,
// ac-regions=block): the elements after a sub-module are the region's, not
// its unit's (which has nothing after it). A region that lacks one of the
// unit's parameters is not its recompute's: the unit's own order stands.
TEST(Stack, RecomputeReleasesByTheRegionsOrder) {
  StackProfile stack;
  stack.perParamCollectives = true;
  stack.persistenceThreshold = 10;
  stack.regatherForRecompute = true;
  stack.maxReuseDistance = 1600;
  RecomputeOrder block;
  block.fqns.assign(std::begin(kBlockFqns), std::end(kBlockFqns));
  block.numels.assign(std::begin(kBlockNumels), std::end(kBlockNumels));
  auto again = [&](size_t first, size_t n, const RecomputeOrder *region) {
    std::string bits;
    for (bool b : regatheredAfterRecompute(
             stack, llvm::ArrayRef(kBlockNumels).slice(first, n),
             llvm::ArrayRef(kBlockFqns).slice(first, n), region))
      bits += b ? '1' : '0';
    return bits;
  };
  // c_attn (weight, bias): 900 after it in the block, 1800 >= 1600.
  EXPECT_EQ(again(2, 2, &block), "11");
  EXPECT_EQ(again(2, 2, nullptr), "00");
  // c_proj: 800 after, 1600 >= 1600; c_fc: 400 after, kept.
  EXPECT_EQ(again(4, 1, &block), "1");
  EXPECT_EQ(again(5, 1, &block), "0");
  // The same bits as the block's own unit (RecomputeReleasesBeyondTheReuse-
  // Distance at 1600: "0011100").
  EXPECT_EQ(again(0, 7, &block), "0011100");
  RecomputeOrder other;
  other.fqns = {"h.0.mlp.c_fc.weight"};
  other.numels = {400};
  EXPECT_EQ(again(2, 2, &other), "00");
}

// With max_reuse_distance 0 the recompute's all-gather is followed by exactly
// one more all-gather of every non-persistent parameter: at α = 0 its time
// is twice the plan's per-parameter gather, its collectives twice as many; an
// all-gather that feeds no recompute, and every reduce-scatter, are as
// before.
TEST(Stack, RecomputeRegathersOneMoreAllGatherPerUnit) {
  std::optional<ClusterSpec> s =
      bandwidthOnly("regather", json::parse(R"({"per_param_collectives": true,
          "persistence_threshold": 10, "regather_for_recompute": true,
          "max_reuse_distance": 0})"));
  ASSERT_TRUE(s.has_value());
  Simulator sim(*s);
  const int64_t bytes = 2 * 1240, g = 16; // f16, 1240 elements
  double once = sim.unitCollectiveTime(CollectiveKind::AllGather, bytes,
                                       kBlockNumels, g, 1, false);
  // The five gathered parameters' shares: 2 · 1224 bytes at 15/16 of 1e9 B/s.
  EXPECT_NEAR(once, 15.0 / 16 * 2 * 1224 / 1e9, 1e-18);
  StackCollective plain =
      priceUnitCollective(sim, s->stack, CollectiveKind::AllGather, bytes,
                          kBlockNumels, kBlockFqns, g, 1, false, false);
  StackCollective recompute =
      priceUnitCollective(sim, s->stack, CollectiveKind::AllGather, bytes,
                          kBlockNumels, kBlockFqns, g, 1, false, true);
  EXPECT_DOUBLE_EQ(plain.seconds, once);
  EXPECT_EQ(plain.calls, 5);
  EXPECT_DOUBLE_EQ(recompute.seconds, 2 * once);
  EXPECT_EQ(recompute.calls, 10);
  StackCollective scatter =
      priceUnitCollective(sim, s->stack, CollectiveKind::ReduceScatter, bytes,
                          kBlockNumels, kBlockFqns, g, 1, false, true);
  EXPECT_DOUBLE_EQ(scatter.seconds,
                   sim.unitCollectiveTime(CollectiveKind::ReduceScatter, bytes,
                                          kBlockNumels, g, 1, false));
  EXPECT_EQ(scatter.calls, 7);
  // Without per-parameter collectives the re-gather is one collective of the
  // released parameters' share of the unit (all 1240 elements here).
  s->stack.perParamCollectives = false;
  StackCollective whole =
      priceUnitCollective(sim, s->stack, CollectiveKind::AllGather, bytes,
                          kBlockNumels, kBlockFqns, g, 1, false, true);
  EXPECT_EQ(whole.calls, 2);
  EXPECT_NEAR(whole.seconds, 15.0 / 16 * (bytes + 2 * 1240) / 1e9, 1e-18);
}

// The per-rank host loops: each collective the stack issues costs
// host_calls_per_rank · G · host_call_s on the host, so they double with the
// group; one rank issues none.
TEST(Stack, HostLoopsScaleWithTheGroup) {
  std::optional<ClusterSpec> s =
      bandwidthOnly("hostloops", json::parse(R"({"per_param_collectives": true,
          "persistence_threshold": 10, "host_call_s": 2e-6,
          "host_calls_per_rank": 3})"));
  ASSERT_TRUE(s.has_value());
  Simulator sim(*s);
  auto host = [&](CollectiveKind kind, int64_t g) {
    return priceUnitCollective(sim, s->stack, kind, 2480, kBlockNumels,
                               kBlockFqns, g, 1, false, false)
        .hostSeconds;
  };
  // Five all-gathers (the persistent LayerNorm left out), seven
  // reduce-scatters.
  EXPECT_NEAR(host(CollectiveKind::AllGather, 512), 5 * 3 * 512 * 2e-6, 1e-15);
  EXPECT_NEAR(host(CollectiveKind::ReduceScatter, 512), 7 * 3 * 512 * 2e-6,
              1e-15);
  EXPECT_DOUBLE_EQ(host(CollectiveKind::AllGather, 1024),
                   2 * host(CollectiveKind::AllGather, 512));
  EXPECT_DOUBLE_EQ(host(CollectiveKind::AllGather, 1), 0);
  EXPECT_DOUBLE_EQ(stackHostSeconds(s->stack, 4, 1536), 4 * 3 * 1536 * 2e-6);
  // No host loops without host_call_s (the spec's default).
  EXPECT_DOUBLE_EQ(stackHostSeconds(StackProfile(), 4, 1536), 0);
}

// The persistent parameters' gather after the step: one all-gather of their
// bytes, and G · params · persistent_gather_calls_per_rank host calls.
TEST(Stack, PersistentGatherAfterTheStep) {
  std::optional<ClusterSpec> s =
      bandwidthOnly("persistent", json::parse(R"({"per_param_collectives": true,
          "persistence_threshold": 10, "persistent_gather": true,
          "host_call_s": 2e-6, "persistent_gather_calls_per_rank": 4})"));
  ASSERT_TRUE(s.has_value());
  Simulator sim(*s);
  StackCollective c =
      persistentGatherCost(sim, s->stack, 192, 4000, 8, 1, false);
  EXPECT_EQ(c.calls, 1);
  EXPECT_DOUBLE_EQ(c.seconds, sim.collectiveTime(CollectiveKind::AllGather,
                                                 4000, 8, 1, false));
  EXPECT_NEAR(c.hostSeconds, 8 * 192 * 4 * 2e-6, 1e-15);
  EXPECT_DOUBLE_EQ(
      persistentGatherCost(sim, s->stack, 192, 4000, 16, 1, false).hostSeconds,
      2 * c.hostSeconds);
  EXPECT_EQ(persistentGatherCost(sim, s->stack, 0, 0, 8, 1, false).calls, 0);
  s->stack.persistentGather = false;
  EXPECT_EQ(persistentGatherCost(sim, s->stack, 192, 4000, 8, 1, false).calls,
            0);
}

// The buffer passes: gather_copy_passes / reduce_copy_passes over the bytes
// the collectives move add passes · bytes / memory_bandwidth to their
// seconds, gather_serial_passes the same as serial seconds; the bytes are
// the gathered parameters' (the persistent ones left out, the re-gather
// added), every parameter's for a reduce-scatter. All zero by default.
TEST(Stack, BufferPassesOverTheMovedBytes) {
  const double bw = 1e11; // writeSpec's memory_bandwidth, B/s
  std::optional<ClusterSpec> s =
      bandwidthOnly("passes", json::parse(R"({"per_param_collectives": true,
          "persistence_threshold": 10, "regather_for_recompute": true,
          "max_reuse_distance": 0, "gather_serial_passes": 1,
          "gather_copy_passes": 2, "reduce_copy_passes": 4})"));
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->stack.gatherSerialPasses, 1);
  EXPECT_DOUBLE_EQ(s->stack.gatherCopyPasses, 2);
  EXPECT_DOUBLE_EQ(s->stack.reduceCopyPasses, 4);
  ClusterSpec off = *s;
  off.stack.gatherSerialPasses = off.stack.gatherCopyPasses =
      off.stack.reduceCopyPasses = 0;
  Simulator sim(*s), plain(off);
  // f16: 2 bytes per element, 1240 elements; the two persistent LayerNorm
  // tensors (16 elements) are not all-gathered.
  const int64_t bytes = 2 * 1240, g = 16;
  const double gathered = 2.0 * 1224, all = 2.0 * 1240;
  auto price = [&](const Simulator &on, const ClusterSpec &spec,
                   CollectiveKind kind, bool recompute) {
    return priceUnitCollective(on, spec.stack, kind, bytes, kBlockNumels,
                               kBlockFqns, g, 1, false, recompute);
  };
  for (bool recompute : {false, true}) {
    // The recompute's all-gather moves the gathered bytes twice (the
    // re-gather of every non-persistent parameter at limit 0).
    double moved = recompute ? 2 * gathered : gathered;
    StackCollective on = price(sim, *s, CollectiveKind::AllGather, recompute);
    StackCollective none =
        price(plain, off, CollectiveKind::AllGather, recompute);
    EXPECT_NEAR(on.seconds - none.seconds, 2 * moved / bw, 1e-18);
    EXPECT_NEAR(on.serialSeconds, 1 * moved / bw, 1e-18);
    EXPECT_DOUBLE_EQ(none.serialSeconds, 0);
    EXPECT_EQ(on.calls, none.calls);
    StackCollective rs =
        price(sim, *s, CollectiveKind::ReduceScatter, recompute);
    StackCollective rsNone =
        price(plain, off, CollectiveKind::ReduceScatter, recompute);
    EXPECT_NEAR(rs.seconds - rsNone.seconds, 4 * all / bw, 1e-18);
    EXPECT_DOUBLE_EQ(rs.serialSeconds, 0);
  }
  // One collective per unit: the unit's bytes; an all-reduce has none.
  s->stack.perParamCollectives = off.stack.perParamCollectives = false;
  s->stack.regatherForRecompute = off.stack.regatherForRecompute = false;
  EXPECT_NEAR(price(sim, *s, CollectiveKind::AllGather, false).seconds -
                  price(plain, off, CollectiveKind::AllGather, false).seconds,
              2 * all / bw, 1e-18);
  EXPECT_DOUBLE_EQ(price(sim, *s, CollectiveKind::AllReduce, false).seconds,
                   price(plain, off, CollectiveKind::AllReduce, false).seconds);
  // The persistent gather pays the copy passes over its bytes, no serial
  // pass.
  s->stack.persistentGather = off.stack.persistentGather = true;
  StackCollective pg = persistentGatherCost(sim, s->stack, 2, 32, 8, 1, false);
  EXPECT_NEAR(
      pg.seconds -
          persistentGatherCost(plain, off.stack, 2, 32, 8, 1, false).seconds,
      2 * 32 / bw, 1e-18);
  EXPECT_DOUBLE_EQ(pg.serialSeconds, 0);
  EXPECT_DOUBLE_EQ(stackPassSeconds(3, 1e9, 2e12), 3 * 1e9 / 2e12);
  EXPECT_DOUBLE_EQ(stackPassSeconds(0, 1e9, 2e12), 0);
  EXPECT_DOUBLE_EQ(stackPassSeconds(3, 1e9, 0), 0);
}

} // namespace
