//===- PipelineBalance.cpp - the default pipeline split -------------------===//
//
// The split fsdp-pipeline gives every stage when `pp-split` is omitted: the
// contiguous partition of the layers into P (P·v under interleaving) stages
// that minimises the largest stage's cost among the partitions whose every
// stage's estimated peak fits the memory budget, by dynamic programming over
// contiguous partitions (the linear partition problem; Skiena, The Algorithm
// Design Manual, Sec. 10.7) with the infeasible stages left out.
//
// The cost of a layer (the ops of its segment, PipelineLayers; the
// embeddings before layer 0 go with layer 0, the final norm, head and loss
// with the last layer):
// * with a cluster spec, the seconds the simulator gives its ops
//   (Simulator::opTime, the roofline the step simulation uses): each forward
//   op, the ops of its VJP (built by the op's AutodiffOpInterface, as
//   fsdp-autodiff would, on a scratch copy) and, under activation
//   checkpointing, the forward ops of a layer's block that
//   fsdp-activation-checkpoint's save list (checkpointSaves) does not keep,
//   but an op whose result a later layer reads, which is kept;
// * without, its forward FLOPs (NN_CostOpInterface::getFlops), as
//   fsdp-pipeline-split alone balances.
// The ops are priced at the forward's shapes (the global batch, before
// fsdp-shard splits it), which scale every layer alike; the reported
// seconds are divided by the data-parallel and tensor-parallel degrees.
//
// The memory estimate of a stage, bytes per rank (what must fit whichever
// way pp-gather decides: its units gathered per micro-batch):
//   state      = W · (1/g for the parameters unless shard-grad-op or
//                no-shard) + W · (1 + k) / g (gradients, k optimizer
//                states per element: AdamW 2, SGD 0),
//   gathered   = 3 · the largest layer's W_p when sharded (the unit in use,
//                the one prefetched, and its whole gradient before the
//                reduce-scatter), else W_p when param-dtype is narrower
//                (the persistent param-dtype copy),
//   activation = (in-flight · A + 2 · the largest activation + under AC
//                one block's recomputed activations) / (m · dp)
//                + the data it reads / dp,
// all ÷ tp (sequence parallelism splits what column parallelism does not),
// W the stage's parameter bytes as the IR holds them (the f32 masters), W_p
// in param-dtype, g the shard group, A the bytes of the activations its
// forward keeps for the backward on the global batch: the values the VJPs
// (built by each op's AutodiffOpInterface, as fsdp-autodiff would) and the
// recomputed ops read, less those the recompute makes again, in param-dtype
// (fsdp-shard computes the forward in it), which is what the stages'
// memory plans keep; in-flight the micro-batches whose activations stage s
// holds: m under GPipe, min(P − s, m) under 1F1B (Narayanan et al., SC'21,
// Sec. 2.2; Korthikanti et al. 2022, Sec. 4.3), and under interleaved 1F1B
// rank r's chunk forwards in flight, min((P − r − 1)·2 + (v − 1)·P + 1, m·v)
// (Megatron-LM's warm-up), shared by its v chunks, each held to budget / v.
// An estimate before the stage is planned: the stage's memory plan
// (stage_peak_bytes) is what fsdp-memory-plan checks afterwards.
//
//===----------------------------------------------------------------------===//
#include "ActivationCheckpoint.h"
#include "PipelineSplit.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::fsdp;

static int64_t tensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}

static bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

namespace {
/// Per layer (segment), on the global batch.
struct LayerCosts {
  SmallVector<double> flops, seconds; // forward FLOPs; fwd + bwd + recompute
  /// Parameter bytes as the IR holds them (the f32 masters under mixed
  /// precision) and in param-dtype (what is gathered and computed with).
  SmallVector<double> params, lowParams;
  /// Bytes of the activations the backward reads that the forward keeps
  /// (in param-dtype), counted in the layer of the op that made them.
  SmallVector<double> acts;
  /// Bytes of the step's data a layer's ops read (the whole batch is
  /// resident), of the activations it receives from earlier layers, and of
  /// its largest activation (the gradient in flight in the backward).
  SmallVector<double> data, received, largest;
  /// Bytes of the results of a layer's recomputed ops: what a checkpointed
  /// block holds again while its recomputed forward is used.
  SmallVector<double> recomputed;
};
} // namespace

/// The ops the backward recomputes: a block's ops (up to blockEnd, the
/// layer's last parameter use) that activation checkpointing does not save
/// and whose results no op outside the layer reads (ActivationCheckpoint.cpp
/// keeps those).
static SmallVector<bool>
recomputedOps(const PipelineLayers &seg, ArrayRef<int64_t> blockEnd,
              const llvm::DenseMap<Operation *, int64_t> &indexOf,
              ActivationCheckpoint mode) {
  bool unfusedAttention = llvm::any_of(seg.ops, [](Operation *op) {
    return isa<nn::AttentionOp>(op) &&
           op->hasAttr(mlir::fsdp::kAttentionImplAttr);
  });
  // Each layer's block, in order: one use of its unit.
  SmallVector<SmallVector<Operation *>> blocks(blockEnd.size());
  for (auto [i, op] : llvm::enumerate(seg.ops))
    if (int64_t s = seg.segment[i];
        s >= 0 && static_cast<int64_t>(i) <= blockEnd[s])
      blocks[s].push_back(op);
  SmallVector<bool> recomputed(seg.ops.size(), false);
  for (ArrayRef<Operation *> block : blocks) {
    llvm::DenseSet<Operation *> saves =
        checkpointSaves(block, mode, unfusedAttention);
    for (Operation *op : block) {
      int64_t i = indexOf.lookup(op);
      bool readOutside = llvm::any_of(op->getUsers(), [&](Operation *u) {
        auto it = indexOf.find(u);
        return it == indexOf.end() || seg.segment[it->second] != seg.segment[i];
      });
      recomputed[i] = !saves.contains(op) && !readOutside;
    }
  }
  return recomputed;
}

/// Builds the op's VJP before `ret` (a scratch function's terminator), a
/// zero constant standing for each differentiated result's gradient: the
/// VJP is only priced and its operands read, never run. Adds the operands
/// of the VJP's ops to readBack; returns their seconds by the simulator
/// (0 without one). Fails as buildVJP or Simulator::opTime does.
static FailureOr<double> buildVJP(nn::AutodiffOpInterface iface, Operation *ret,
                                  const llvm::DenseSet<Value> &requiresGrad,
                                  llvm::DenseSet<Value> &readBack,
                                  const Simulator *sim) {
  Operation *op = iface.getOperation();
  OpBuilder b(ret);
  SmallVector<Value> resultGrads;
  for (Value r : op->getResults())
    resultGrads.push_back(
        requiresGrad.contains(r) && isFloatTensor(r)
            ? arith::ConstantOp::create(
                  b, op->getLoc(), cast<TypedAttr>(b.getZeroAttr(r.getType())))
                  .getResult()
            : Value());
  SmallVector<bool> needed;
  for (Value v : op->getOperands())
    needed.push_back(requiresGrad.contains(v));
  Operation *before = ret->getPrevNode();
  SmallVector<Value> operandGrads;
  if (failed(iface.buildVJP(b, resultGrads, needed, operandGrads)))
    return failure();
  double t = 0;
  for (Operation *v = before->getNextNode(); v != ret; v = v->getNextNode()) {
    readBack.insert(v->operand_begin(), v->operand_end());
    if (!sim)
      continue;
    FailureOr<double> bwd = sim->opTime(v);
    if (failed(bwd))
      return failure();
    t += *bwd;
  }
  return t;
}

/// Prices every layer's ops; fails as Simulator::opTime does.
static FailureOr<LayerCosts> layerCosts(func::FuncOp fn,
                                        const PipelineSplitConfig &cfg) {
  // A scratch copy: the VJPs are built into it to be priced and to find
  // what the backward reads, never run.
  auto scratch = cast<func::FuncOp>(fn->clone());
  llvm::scope_exit cleanup([&] { scratch->erase(); });
  FailureOr<PipelineLayers> seg =
      segmentPipelineLayers(scratch, cfg.pp, cfg.chunks, cfg.ends);
  if (failed(seg))
    return failure();
  int64_t n = seg->layers;
  LayerCosts c;
  for (auto *v : {&c.flops, &c.seconds, &c.params, &c.lowParams, &c.acts,
                  &c.data, &c.received, &c.largest, &c.recomputed})
    v->assign(n, 0);
  auto layerOf = [&](size_t i) {
    return std::max<int64_t>(0, seg->segment[i]);
  };
  // Float tensors in param-dtype: fsdp-shard casts the data and the
  // parameters to it, so the forward's activations and their gradients
  // are in it.
  auto lowBytes = [&](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t width = (t.getElementTypeBitWidth() + 7) / 8;
    if (cfg.paramDtypeBytes > 0)
      width = std::min(width, cfg.paramDtypeBytes);
    return static_cast<double>(t.getNumElements() * width);
  };
  auto isParam = [&](Value v) {
    auto a = dyn_cast<BlockArgument>(v);
    return a && scratch.getArgAttr(a.getArgNumber(), nn::kParamAttr);
  };
  // The forward sweep (fsdp-autodiff's requiresGrad), the layers'
  // parameters, and each layer's last parameter use (its block's end).
  llvm::DenseSet<Value> requiresGrad;
  SmallVector<int64_t> blockEnd(n, -1);
  llvm::DenseSet<Value> counted;
  for (BlockArgument a : scratch.getArguments())
    if (isParam(a))
      requiresGrad.insert(a);
  for (auto [i, op] : llvm::enumerate(seg->ops)) {
    for (Value v : op->getOperands()) {
      if (!isParam(v))
        continue;
      if (counted.insert(v).second) {
        c.params[layerOf(i)] += static_cast<double>(tensorBytes(v.getType()));
        c.lowParams[layerOf(i)] += lowBytes(v);
      }
      if (int64_t l = seg->paramLayer.lookup(v); l >= 0)
        blockEnd[seg->segmentOfLayer(l)] = static_cast<int64_t>(i);
    }
    if (llvm::any_of(op->getOperands(),
                     [&](Value v) { return requiresGrad.contains(v); }))
      for (Value r : op->getResults())
        requiresGrad.insert(r);
  }
  llvm::DenseMap<Operation *, int64_t> indexOf;
  for (auto [i, op] : llvm::enumerate(seg->ops))
    indexOf[op] = static_cast<int64_t>(i);
  llvm::DenseSet<std::pair<Value, int64_t>> seen;
  for (auto [i, op] : llvm::enumerate(seg->ops)) {
    int64_t l = layerOf(i);
    for (Value v : op->getOperands()) {
      if (!isFloatTensor(v) || !seen.insert({v, l}).second)
        continue;
      if (auto a = dyn_cast<BlockArgument>(v)) {
        if (scratch.getArgAttr(a.getArgNumber(), nn::kDataAttr))
          c.data[l] += static_cast<double>(tensorBytes(v.getType()));
      } else if (layerOf(indexOf.lookup(v.getDefiningOp())) < l) {
        c.received[l] += lowBytes(v);
      }
    }
    for (Value r : op->getResults())
      if (isFloatTensor(r))
        c.largest[l] = std::max(c.largest[l], lowBytes(r));
  }
  SmallVector<bool> recomputedOp =
      recomputedOps(*seg, blockEnd, indexOf, cfg.mode);
  std::optional<Simulator> sim;
  if (cfg.spec)
    sim.emplace(*cfg.spec);
  Operation *ret = scratch.getBody().front().getTerminator();
  // The forward values the backward reads: the VJPs' operands, and the
  // recomputed ops' operands.
  llvm::DenseSet<Value> readBack;
  for (auto [i, op] : llvm::enumerate(seg->ops)) {
    int64_t l = layerOf(i);
    bool differentiated = llvm::any_of(
        op->getResults(), [&](Value r) { return requiresGrad.contains(r); });
    if (auto cost = dyn_cast<nn::CostOpInterface>(op))
      c.flops[l] += static_cast<double>(cost.getFlops());
    if (recomputedOp[i]) {
      readBack.insert(op->operand_begin(), op->operand_end());
      if (differentiated)
        for (Value r : op->getResults())
          if (isFloatTensor(r))
            c.recomputed[l] += lowBytes(r);
    }
    double t = 0;
    if (sim) {
      FailureOr<double> fwd = sim->opTime(op);
      if (failed(fwd))
        return failure();
      t = recomputedOp[i] ? 2 * *fwd : *fwd;
    }
    auto iface = dyn_cast<nn::AutodiffOpInterface>(op);
    if (iface && differentiated) {
      FailureOr<double> bwd =
          buildVJP(iface, ret, requiresGrad, readBack, sim ? &*sim : nullptr);
      if (failed(bwd))
        return failure();
      t += *bwd;
    }
    c.seconds[l] += t;
  }
  // What the forward keeps: the values read back that no recompute makes
  // again (the parameters and data are counted apart).
  for (Value v : readBack) {
    Operation *def = v.getDefiningOp();
    auto it = def ? indexOf.find(def) : indexOf.end();
    if (it == indexOf.end() || recomputedOp[it->second] || !isFloatTensor(v))
      continue;
    c.acts[layerOf(it->second)] += lowBytes(v);
  }
  // attention=unfused: the scores kept with the statistics.
  for (auto [i, op] : llvm::enumerate(seg->ops))
    if (!recomputedOp[i])
      if (std::optional<UnfusedAttention> ua = unfusedAttentionOf(op))
        c.acts[layerOf(i)] += static_cast<double>(ua->savedBytes());
  return c;
}

std::optional<SmallVector<int64_t>> mlir::fsdp::constrainedSplit(
    int64_t n, int64_t parts,
    llvm::function_ref<double(int64_t, int64_t, int64_t)> cost,
    llvm::function_ref<bool(int64_t, int64_t, int64_t)> fits) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest largest cost of segments [0, i) in k stages.
  std::vector<std::vector<double>> best(parts + 1,
                                        std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> from(parts + 1,
                                         std::vector<int64_t>(n + 1, -1));
  best[0][0] = 0;
  for (int64_t k = 1; k <= parts; ++k)
    for (int64_t i = k; i <= n; ++i)
      for (int64_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == inf || !fits(k - 1, j, i))
          continue;
        double v = std::max(best[k - 1][j], cost(k - 1, j, i));
        if (v < best[k][i]) {
          best[k][i] = v;
          from[k][i] = j;
        }
      }
  if (from[parts][n] < 0)
    return std::nullopt;
  SmallVector<int64_t> split(parts - 1);
  for (int64_t k = parts, i = n; k > 1; --k) {
    i = from[k][i];
    split[k - 2] = i;
  }
  return split;
}

FailureOr<PipelineSplitPlan>
mlir::fsdp::planPipelineSplit(func::FuncOp fn, const PipelineSplitConfig &cfg,
                              ArrayRef<int64_t> given) {
  FailureOr<LayerCosts> costs = layerCosts(fn, cfg);
  if (failed(costs))
    return failure();
  const LayerCosts &c = *costs;
  const int64_t n = static_cast<int64_t>(c.flops.size());
  const int64_t parts = cfg.pp * cfg.chunks, p = cfg.pp, v = cfg.chunks;
  const int64_t m = std::max<int64_t>(1, cfg.microBatches);
  if (!given.empty() &&
      failed(checkPipelineSplit(fn, given, n, cfg.pp, cfg.chunks, cfg.ends)))
    return failure();
  auto sum = [](ArrayRef<double> x, int64_t a, int64_t b) {
    double s = 0;
    for (int64_t i = a; i < b; ++i)
      s += x[i];
    return s;
  };
  const double ranks = static_cast<double>(cfg.dataParallel * cfg.tp);
  auto seconds = [&](int64_t, int64_t a, int64_t b) {
    return sum(c.seconds, a, b) / ranks;
  };
  auto flops = [&](int64_t, int64_t a, int64_t b) {
    return sum(c.flops, a, b) / ranks;
  };
  // Micro-batches (chunk forwards per chunk, interleaved) whose
  // activations virtual stage k holds at its peak.
  auto inFlight = [&](int64_t k) -> double {
    if (cfg.schedule == "gpipe")
      return static_cast<double>(m);
    int64_t r = k % p;
    if (v > 1)
      return static_cast<double>(
                 std::min((p - r - 1) * 2 + (v - 1) * p + 1, m * v)) /
             static_cast<double>(v);
    return static_cast<double>(std::min(p - r, m));
  };
  auto peak = [&](int64_t k, int64_t a, int64_t b) {
    double w = sum(c.params, a, b), low = sum(c.lowParams, a, b), unit = 0;
    for (int64_t i = a; i < b; ++i)
      unit = std::max(unit, c.lowParams[i]);
    double g = static_cast<double>(std::max<int64_t>(1, cfg.shardGroup)),
           tp = static_cast<double>(cfg.tp);
    double state = (cfg.shardParams ? w / g : w) +
                   w * (1 + static_cast<double>(cfg.optimizerStates)) / g;
    // Sharded: the units gathered in param-dtype; whole parameters in a
    // narrower param-dtype: their persistent param-dtype copy.
    double gathered = cfg.shardParams && g > 1 ? 3 * unit : low < w ? low : 0;
    // Under activation checkpointing one block's recomputed forward is
    // live again during its backward.
    double most = 0, again = 0;
    for (int64_t i = a; i < b; ++i) {
      most = std::max(most, c.largest[i]);
      if (cfg.mode != ActivationCheckpoint::None)
        again = std::max(again, c.recomputed[i]);
    }
    double perMicroBatch = sum(c.acts, a, b) + (a > 0 ? c.received[a] : 0.0);
    // Tensor parallelism splits the activations too: the column-parallel
    // outputs by their width, the rest by the sequence under sequence
    // parallelism (the default; without it this is an underestimate).
    double acts = (inFlight(k) * perMicroBatch + 2 * most + again) /
                      static_cast<double>(m * cfg.dataParallel) +
                  sum(c.data, a, b) / static_cast<double>(cfg.dataParallel);
    return (state + gathered + acts) / tp;
  };
  const double budget =
      cfg.budget ? static_cast<double>(*cfg.budget) / static_cast<double>(v)
                 : std::numeric_limits<double>::infinity();
  auto fits = [&](int64_t k, int64_t a, int64_t b) {
    return peak(k, a, b) <= budget;
  };
  PipelineSplitPlan plan;
  plan.objective = !given.empty() ? "given" : cfg.spec ? "time" : "flops";
  // A given split is only evaluated (the stages' memory plans check it).
  plan.constraint = cfg.budget && given.empty() ? "memory-budget" : "none";
  plan.budget = cfg.budget;
  plan.ends = cfg.ends.name();
  auto objective = [&](int64_t k, int64_t a, int64_t b) {
    return cfg.spec ? seconds(k, a, b) : flops(k, a, b);
  };
  if (!given.empty()) {
    plan.boundaries.assign(given.begin(), given.end());
  } else {
    std::optional<SmallVector<int64_t>> split =
        constrainedSplit(n, parts, objective, fits);
    if (!split && !cfg.budgetGiven) {
      // The device memory, not a given budget: plan the layout anyway and
      // let the stages' memory plans say it does not fit.
      split = constrainedSplit(n, parts, objective,
                               [](int64_t, int64_t, int64_t) { return true; });
      plan.constraint = "none fits the device memory";
    }
    if (!split) {
      // The split with the smallest largest peak says by how much.
      SmallVector<int64_t> least = *constrainedSplit(
          n, parts, peak, [](int64_t, int64_t, int64_t) { return true; });
      double most = 0;
      int64_t at = 0;
      for (int64_t k = 0, a = 0; k < parts; ++k) {
        int64_t e = k + 1 < parts ? least[k] : n;
        if (double q = peak(k, a, e); q > most) {
          most = q;
          at = k;
        }
        a = e;
      }
      return emitError(fn.getLoc())
             << "fsdp-pipeline: no split of the " << n << " layers into "
             << pipelinePartsName(cfg.pp, cfg.chunks)
             << " stages fits the memory budget of " << *cfg.budget
             << " bytes per rank"
             << (v > 1 ? " (" + std::to_string(*cfg.budget / v) +
                             " per virtual stage)"
                       : std::string())
             << ": the split with the least memory, pp-split="
             << llvm::join(
                    llvm::map_range(
                        least, [](int64_t x) { return std::to_string(x); }),
                    ",")
             << ", needs an estimated " << static_cast<int64_t>(most)
             << " bytes per rank on stage " << at
             << " (more ranks per stage, activation checkpointing, more "
                "stages or a larger budget)";
    }
    plan.boundaries = std::move(*split);
  }
  for (int64_t k = 0, a = 0; k < parts; ++k) {
    int64_t e = k + 1 < parts ? plan.boundaries[k] : n;
    plan.layers.push_back(e - a);
    plan.flops.push_back(flops(k, a, e));
    if (cfg.spec)
      plan.seconds.push_back(seconds(k, a, e));
    plan.peakBytes.push_back(static_cast<int64_t>(std::ceil(peak(k, a, e))));
    a = e;
  }
  return plan;
}

DictionaryAttr PipelineSplitPlan::toAttr(MLIRContext *ctx) const {
  Builder b(ctx);
  SmallVector<NamedAttribute> attrs = {
      b.getNamedAttr("boundaries", b.getDenseI64ArrayAttr(boundaries)),
      b.getNamedAttr("objective", b.getStringAttr(objective)),
      b.getNamedAttr("constraint", b.getStringAttr(constraint)),
      b.getNamedAttr("ends", b.getStringAttr(ends)),
      b.getNamedAttr("stage_layers", b.getDenseI64ArrayAttr(layers)),
      b.getNamedAttr("stage_flops", b.getDenseF64ArrayAttr(flops)),
      b.getNamedAttr("stage_estimated_peak_bytes",
                     b.getDenseI64ArrayAttr(peakBytes))};
  if (budget)
    attrs.push_back(
        b.getNamedAttr("budget_bytes", b.getI64IntegerAttr(*budget)));
  if (!seconds.empty())
    attrs.push_back(
        b.getNamedAttr("stage_predicted_s", b.getDenseF64ArrayAttr(seconds)));
  return b.getDictionaryAttr(attrs);
}
