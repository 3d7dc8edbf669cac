//===- Schedule.cpp - fsdp-schedule: async collectives and their placement ===//
//
// Turns every collective into a start (`async`) and an fsdp.wait, then
// places them:
//
// * Reductions (reduce-scatter, all-reduce) start where fsdp-collectives put
//   them, as soon as a unit's gradient is complete. Their wait (with the
//   ops that read the reduced gradient: its cast to the master dtype, HSDP's
//   replicate all-reduce) is sunk to the next reduction of the same kind and
//   group, or the first other use, whichever comes first: one reduction of
//   each kind in flight, and the packed gradient (freed after the wait) lives
//   only that long — as FSDP2, whose post-backward waits for the previous
//   reduce-scatter before freeing its buffers (Zhao et al., PyTorch FSDP,
//   VLDB 2023, Sec. 3.3; torch.distributed.fsdp FSDP2 `reduce_scatter_state`).
// * All-gather waits stay right before their first use; starts are hoisted
//   by the prefetch mode:
//   - none:  start right before the wait (no overlap of gathers);
//   - fsdp1: PyTorch FSDP1 BACKWARD_PRE: in backward, the next unit's gather
//            is issued when the current unit starts computing; forward is
//            not prefetched (forward_prefetch=False, the default);
//   - fsdp2: FSDP2's implicit prefetch: in every phase (a micro-batch's
//            forward or backward) the next unit's gather is issued when the
//            current unit starts computing;
//   - auto:  a list scheduler (after XLA's latency-hiding scheduler): each
//            gather, in order, starts as early as possible while at most
//            `max-in-flight` gathers are started and not yet waited (FSDP1's
//            rate limiter uses 2) and the planned live bytes stay under the
//            memory budget; with `cluster=`, the cost model (the simulator)
//            then picks, among this schedule, the same with one gather in
//            flight, fsdp2, fsdp1 and none, the fastest one that fits the
//            budget (so the default is never predicted slower than the
//            anchors that fit; of equally fast ones, the smallest peak,
//            then the fewest early gathers). The budget is `memory-budget`,
//            else the cluster's device memory, else unlimited; a step whose
//            unprefetched peak is already over it is scheduled for time
//            alone (the report shows the overage).
//
// The order of collectives is program order, the same on every rank (SPMD):
// every rank runs the same schedule, and the runtime checks that (see
// runtime/docs/schedule-format.md).
//
//===----------------------------------------------------------------------===//
#include "ClusterSpecCache.h"
#include "fsdp/Analysis/MemoryPlan.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Threading.h"

#include <cmath>
#include <limits>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSCHEDULE
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The wait of an async collective.
WaitOp waitOf(Operation *collective) {
  return cast<WaitOp>(*collective->getResult(0).getUsers().begin());
}

/// Step 1: every collective whose result is used becomes async (its result
/// an !fsdp.future), with an fsdp.wait right after it that all its uses read.
void makeAsync(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (!isCollective(&op) || op.getResult(0).use_empty() ||
        op.hasAttr("async"))
      continue;
    OpBuilder b(op.getContext());
    b.setInsertionPointAfter(&op);
    Value result = op.getResult(0);
    auto tensor = cast<RankedTensorType>(result.getType());
    result.setType(FutureType::get(op.getContext(), tensor));
    auto wait = WaitOp::create(b, op.getLoc(), tensor, result);
    result.replaceAllUsesExcept(wait.getResult(), wait);
    op.setAttr("async", b.getUnitAttr());
  }
}

/// Step 2: sink each reduction's wait (and the ops reading the reduced
/// gradient right away: casts, a chained all-reduce start) to the next
/// reduction of the same kind and group, or to the first other use.
void placeReductionWaits(Block &block) {
  SmallVector<Operation *> reductions;
  for (Operation &op : block)
    if (isa<ReduceScatterOp>(&op) && op.hasAttr("async"))
      reductions.push_back(&op);
  for (Operation &op : block)
    if (isa<AllReduceOp>(&op) && op.hasAttr("async"))
      reductions.push_back(&op);
  auto sameKind = [](Operation *a, Operation *b) {
    return a->getName() == b->getName() &&
           collectiveGroup(a) == collectiveGroup(b);
  };
  for (Operation *r : reductions) {
    WaitOp wait = waitOf(r);
    // The chain moves with the wait: the wait, a bucket's unpack, and direct
    // users that only reformat or forward the reduced gradient.
    SmallVector<Operation *> chain{wait};
    ValueRange reduced = wait->getResults();
    if (wait->hasOneUse())
      if (auto unpack = dyn_cast<UnpackOp>(*wait->getUsers().begin())) {
        chain.push_back(unpack);
        reduced = unpack.getResults();
      }
    for (Value v : reduced)
      for (Operation *u : v.getUsers())
        if (isa<nn::CastOp, AllReduceOp>(u) && !llvm::is_contained(chain, u))
          chain.push_back(u);
    llvm::sort(chain.begin() + 1, chain.end(), [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    llvm::SmallPtrSet<Operation *, 4> inChain(chain.begin(), chain.end());
    Operation *target = block.getTerminator();
    for (Operation *c : chain) {
      // A chained all-reduce's own wait is placed when it is processed, but
      // no later than the first use of its result.
      ValueRange results = c->getResults();
      if (isCollective(c))
        results = waitOf(c)->getResults();
      for (Value v : results)
        for (Operation *u : v.getUsers())
          if (!inChain.contains(u) && u->isBeforeInBlock(target))
            target = u;
    }
    for (Operation *n = r->getNextNode(); n && n != target;
         n = n->getNextNode())
      if (isCollective(n) && sameKind(n, r)) {
        target = n;
        break;
      }
    // A chained all-reduce's own wait may sit before the target: keep it
    // after its start (it is placed when that all-reduce is processed).
    for (Operation *c : chain)
      c->moveBefore(target);
    // The send buffer is freed after the transfer completes.
    for (Operation *u : llvm::make_early_inc_range(r->getOperand(0).getUsers()))
      if (isa<FreeOp>(u) && u->isBeforeInBlock(wait))
        u->moveAfter(wait);
  }
  // A chained all-reduce moved after its wait's old place: put each wait
  // back after its start if needed.
  for (Operation &op : block)
    if (auto w = dyn_cast<WaitOp>(&op))
      if (Operation *start = w.getToken().getDefiningOp();
          w->isBeforeInBlock(start))
        w->moveAfter(start);
}

/// A unit all-gather (feeds parameter views) with its shard cast and phase.
struct Gather {
  AllGatherOp start;
  /// Ops that move with the start, in order: the shards' casts to
  /// param-dtype and, for a bucket, the pack.
  SmallVector<Operation *> prelude;
  WaitOp wait;
  std::pair<int64_t, bool> phase; // (micro-batch, backward)
};

/// The gathered unit buffers a gather's wait provides: its result, or a
/// bucket's unpacked buffers.
SmallVector<Value> gatheredBuffers(WaitOp w) {
  if (w->hasOneUse())
    if (auto u = dyn_cast<UnpackOp>(*w->getUsers().begin()))
      return SmallVector<Value>(u.getResults().begin(), u.getResults().end());
  return {w.getResult()};
}

/// The shard's cast to param-dtype if nothing else reads it (it moves with
/// its gather).
Operation *soleCast(Value shard) {
  Operation *c = shard.getDefiningOp<nn::CastOp>();
  return c && c->hasOneUse() ? c : nullptr;
}

SmallVector<Gather> unitGathers(func::FuncOp fn) {
  Block &block = fn.getBody().front();
  StepPhases phases(fn);
  SmallVector<Gather> gathers;
  for (Operation &op : block) {
    auto g = dyn_cast<AllGatherOp>(&op);
    if (!g || !g.getAsync())
      continue;
    WaitOp w = waitOf(g);
    Operation *firstUse = nullptr;
    for (Value buffer : gatheredBuffers(w))
      for (Operation *view : buffer.getUsers()) {
        if (!isa<ParamViewOp>(view))
          continue;
        for (Operation *u : view->getUsers())
          if (!firstUse || u->isBeforeInBlock(firstUse))
            firstUse = u;
      }
    if (!firstUse)
      continue; // not a parameter gather (ZeRO-1's gather of updated slices)
    SmallVector<Operation *> prelude;
    if (auto pack = g.getShard().getDefiningOp<PackOp>()) {
      for (Value in : pack.getInputs())
        if (Operation *c = soleCast(in))
          prelude.push_back(c);
      prelude.push_back(pack);
    } else if (Operation *c = soleCast(g.getShard())) {
      prelude.push_back(c);
    }
    gathers.push_back({g, prelude, w, phases.phaseOf(firstUse)});
  }
  return gathers;
}

static RankedTensorType flatType(int64_t numel, Type elt) {
  return RankedTensorType::get({numel}, elt);
}

/// Bucketing (DeepSpeed's prefetch and reduce buckets; FSDP's paper, Zhao
/// et al. VLDB 2023 Sec. 3.3 / Fig. 7: all-gathers of few elements lose
/// bus bandwidth to per-collective latency): consecutive unit gathers of
/// one phase whose gathered bytes sum to at most `bucketBytes` become one
/// all-gather of a packed buffer (fsdp.pack of the shards, block-interleaved
/// result unpacked into the units' full buffers), issued where the first
/// member was.
void bucketGathers(func::FuncOp fn, int64_t bucketBytes) {
  SmallVector<Gather> gathers = unitGathers(fn);
  int64_t blocks = groupSize(fn, Group::Shard).value_or(1);
  auto flush = [&](MutableArrayRef<Gather> members) {
    if (members.size() < 2)
      return;
    AllGatherOp first = members.front().start;
    for (Gather &m : members.drop_front())
      for (Operation *op : m.prelude)
        op->moveBefore(first);
    OpBuilder b(first);
    Location loc = first.getLoc();
    SmallVector<Value> shards;
    SmallVector<Type> fullTypes;
    SmallVector<Attribute> units;
    int64_t shardNumel = 0, fullNumel = 0;
    for (Gather &m : members) {
      shards.push_back(m.start.getShard());
      fullTypes.push_back(m.start.getBufferType());
      units.push_back(m.start.getUnitAttr());
      shardNumel += m.start.getShard().getType().getNumElements();
      fullNumel += m.start.getBufferType().getNumElements();
    }
    Type elt = first.getBufferType().getElementType();
    auto pack = PackOp::create(b, loc, flatType(shardNumel, elt), shards,
                               b.getI64IntegerAttr(1));
    auto start = AllGatherOp::create(
        b, loc, FutureType::get(b.getContext(), flatType(fullNumel, elt)),
        first.getUnitAttr(), pack, first.getGroupAttr(), b.getUnitAttr(),
        b.getArrayAttr(units));
    auto wait = WaitOp::create(b, loc, start.getBufferType(), start);
    auto unpack =
        UnpackOp::create(b, loc, fullTypes, wait, b.getI64IntegerAttr(blocks));
    for (auto [i, m] : llvm::enumerate(members)) {
      m.wait.getResult().replaceAllUsesWith(unpack.getResult(i));
      m.wait->erase();
      m.start->erase();
    }
  };
  SmallVector<Gather> current;
  int64_t bytes = 0;
  for (Gather &g : gathers) {
    int64_t gb = bufferBytes(g.start.getResult());
    bool joins = !current.empty() && current.front().phase == g.phase &&
                 current.front().start.getGroup() == g.start.getGroup() &&
                 current.front().start.getBufferType().getElementType() ==
                     g.start.getBufferType().getElementType() &&
                 bytes + gb <= bucketBytes;
    if (!joins) {
      flush(current);
      current.clear();
      bytes = 0;
    }
    if (gb <= bucketBytes) {
      current.push_back(g);
      bytes += gb;
    }
  }
  flush(current);
}

/// Consecutive reduce-scatters over the shard group with the same dtype and
/// reduction, whose full gradients sum to at most `bucketBytes`, become one
/// reduce-scatter of a packed buffer issued where the last member was (when
/// every member's gradient is complete); its result is unpacked into the
/// units' gradient shards.
void bucketReductions(func::FuncOp fn, int64_t bucketBytes) {
  Block &block = fn.getBody().front();
  int64_t blocks = groupSize(fn, Group::Shard).value_or(1);
  SmallVector<ReduceScatterOp> all;
  for (Operation &op : block)
    if (auto r = dyn_cast<ReduceScatterOp>(&op);
        r && r.getAsync() && !r.getBucket())
      all.push_back(r);
  auto flush = [&](MutableArrayRef<ReduceScatterOp> members) {
    if (members.size() < 2)
      return;
    ReduceScatterOp last = members.back();
    OpBuilder b(last);
    Location loc = last.getLoc();
    SmallVector<Value> inputs;
    SmallVector<Type> shardTypes;
    SmallVector<Attribute> units;
    int64_t shardNumel = 0, fullNumel = 0;
    for (ReduceScatterOp m : members) {
      inputs.push_back(m.getInput());
      shardTypes.push_back(m.getBufferType());
      units.push_back(m.getUnitAttr());
      shardNumel += m.getBufferType().getNumElements();
      fullNumel += m.getInput().getType().getNumElements();
    }
    Type elt = last.getBufferType().getElementType();
    auto pack = PackOp::create(b, loc, flatType(fullNumel, elt), inputs,
                               b.getI64IntegerAttr(blocks));
    auto start = ReduceScatterOp::create(
        b, loc, FutureType::get(b.getContext(), flatType(shardNumel, elt)),
        members.front().getUnitAttr(), pack, last.getOpAttr(),
        last.getGroupAttr(), b.getUnitAttr(), b.getArrayAttr(units));
    auto wait = WaitOp::create(b, loc, start.getBufferType(), start);
    auto unpack =
        UnpackOp::create(b, loc, shardTypes, wait, b.getI64IntegerAttr(1));
    for (auto [i, m] : llvm::enumerate(members)) {
      // The packed gradient may be freed once copied into the bucket.
      for (Operation *u : llvm::make_early_inc_range(m.getInput().getUsers()))
        if (isa<FreeOp>(u))
          u->moveAfter(pack);
      WaitOp w = waitOf(m);
      SmallVector<Operation *> readers(w->getUsers().begin(),
                                       w->getUsers().end());
      w.getResult().replaceAllUsesWith(unpack.getResult(i));
      // Readers of a member's reduced gradient now follow the unpack.
      llvm::sort(readers, [](Operation *a, Operation *c) {
        return a->isBeforeInBlock(c);
      });
      Operation *after = unpack;
      for (Operation *u : readers)
        if (u->isBeforeInBlock(unpack)) {
          u->moveAfter(after);
          after = u;
        }
      w->erase();
      m->erase();
    }
  };
  SmallVector<ReduceScatterOp> current;
  int64_t bytes = 0;
  for (ReduceScatterOp r : all) {
    int64_t rb = bufferBytes(r.getInput());
    bool chained = r.getInput().getDefiningOp<WaitOp>() != nullptr;
    // The bucket starts where its last member was: every earlier member's
    // reduced gradient must be read only after that (ZeRO-1 updates and
    // re-gathers each unit right after its reduction: no bucket there).
    bool readLater = llvm::all_of(current, [&](ReduceScatterOp m) {
      return llvm::all_of(waitOf(m)->getUsers(),
                          [&](Operation *u) { return r->isBeforeInBlock(u); });
    });
    bool joins = !current.empty() && !chained && readLater &&
                 current.front().getGroup() == r.getGroup() &&
                 current.front().getOp() == r.getOp() &&
                 current.front().getBufferType().getElementType() ==
                     r.getBufferType().getElementType() &&
                 bytes + rb <= bucketBytes;
    if (!joins) {
      flush(current);
      current.clear();
      bytes = 0;
    }
    if (rb <= bucketBytes && !chained && r.getGroup() == Group::Shard) {
      current.push_back(r);
      bytes += rb;
    }
  }
  flush(current);
}

/// Moves a gather's start (and its prelude: casts, pack) right before `anchor`.
void issueBefore(Gather &g, Operation *anchor) {
  for (Operation *op : g.prelude)
    op->moveBefore(anchor);
  g.start->moveBefore(anchor);
}

/// fsdp1 / fsdp2: within each phase, the next unit's gather is issued right
/// after the current unit's wait (when the current unit starts computing).
void prefetchOneAhead(SmallVector<Gather> &gathers, bool backwardOnly) {
  for (size_t k = 0; k + 1 < gathers.size(); ++k) {
    for (size_t j = k + 1; j < gathers.size(); ++j) {
      if (gathers[j].phase != gathers[k].phase)
        continue;
      if (backwardOnly && !gathers[k].phase.second)
        break;
      Operation *anchor = gathers[k].wait->getNextNode();
      if (gathers[j].start->isBeforeInBlock(anchor))
        break;
      issueBefore(gathers[j], anchor);
      break;
    }
  }
}

/// auto's list scheduler: each gather, in order, as early as the in-flight
/// limit and the memory budget allow (live bytes from the memory plan of the
/// unprefetched schedule, updated as gathers are hoisted).
LogicalResult listSchedule(func::FuncOp fn, SmallVector<Gather> &gathers,
                           int64_t maxInFlight, int64_t budget) {
  FailureOr<MemoryPlan> plan = MemoryPlan::compute(fn);
  if (failed(plan))
    return failure();
  // A step that does not fit even unprefetched is not made to fit by
  // holding prefetches back: the budget then does not constrain them.
  if (plan->peakBytes > budget)
    budget = std::numeric_limits<int64_t>::max();
  llvm::DenseSet<Operation *> movable;
  for (Gather &g : gathers) {
    movable.insert(g.start);
    movable.insert(g.prelude.begin(), g.prelude.end());
  }
  // The fixed ops, with the live bytes while each runs.
  SmallVector<Operation *> elems;
  SmallVector<int64_t> live;
  llvm::DenseMap<Operation *, int64_t> pos;
  for (auto [i, op] : llvm::enumerate(plan->instructions)) {
    if (movable.contains(op))
      continue;
    pos[op] = elems.size();
    elems.push_back(op);
    live.push_back(plan->liveBytes[i]);
  }
  SmallVector<int64_t> inFlight(elems.size(), 0);
  SmallVector<int64_t> placedAt;
  int64_t lo = 0;
  for (Gather &g : gathers) {
    int64_t w = pos.lookup(g.wait);
    // Hoisting makes the gathered buffer and the send buffers (casts, pack)
    // live from the new start to the wait.
    int64_t extra = bufferBytes(g.start.getResult());
    int64_t earliest = lo;
    SmallVector<Operation *> moved(g.prelude);
    moved.push_back(g.start);
    for (Operation *op : moved) {
      if (op != g.start)
        extra += bufferBytes(op->getResult(0));
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp(); def && !movable.contains(def))
          earliest = std::max(earliest, pos.lookup(def) + 1);
    }
    int64_t p = w;
    // In flight from its start through its wait (inclusive); the
    // unprefetched place (right before the wait) is always allowed.
    while (p - 1 >= earliest && inFlight[p - 1] + 1 <= maxInFlight &&
           live[p - 1] + extra <= budget)
      --p;
    for (int64_t q = p; q <= w; ++q)
      ++inFlight[q];
    for (int64_t q = p; q < w; ++q)
      live[q] += extra;
    placedAt.push_back(p);
    lo = p;
  }
  for (auto [g, p] : llvm::zip(gathers, placedAt))
    issueBefore(g, elems[p]);
  return success();
}

struct FSDPSchedulePass : mlir::fsdp::impl::FSDPScheduleBase<FSDPSchedulePass> {
  using Base::Base;
  FSDPSchedulePass(FSDPScheduleOptions options,
                   std::shared_ptr<ClusterSpecCache> specs)
      : Base(std::move(options)), clusterSpecs(std::move(specs)) {}

  /// The spec is read here, once; a bad one is reported where it is needed.
  LogicalResult initialize(MLIRContext *ctx) override {
    if (!cluster.empty())
      clusterSpecs->load(cluster, ctx);
    return success();
  }

  /// Applies mode `mode` ("none", "fsdp1", "fsdp2" or "list") to `module`.
  static LogicalResult apply(ModuleOp module, StringRef mode,
                             int64_t maxInFlight, int64_t budget,
                             int64_t bucketBytes) {
    FailureOr<func::FuncOp> fn = getStepFunction(module);
    if (failed(fn))
      return failure();
    Block &block = fn->getBody().front();
    makeAsync(block);
    if (bucketBytes > 0) {
      bucketGathers(*fn, bucketBytes);
      bucketReductions(*fn, bucketBytes);
    }
    placeReductionWaits(block);
    SmallVector<Gather> gathers = unitGathers(*fn);
    if (mode == "fsdp1" || mode == "fsdp2")
      prefetchOneAhead(gathers, mode == "fsdp1");
    else if (mode == "list")
      return listSchedule(*fn, gathers, maxInFlight, budget);
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefetch != "auto" && prefetch != "none" && prefetch != "fsdp1" &&
        prefetch != "fsdp2") {
      module.emitError()
          << "fsdp-schedule: prefetch must be auto, none, fsdp1 or fsdp2, got '"
          << prefetch << "'";
      return signalPassFailure();
    }
    if (bucketBytes < 0) {
      module.emitError() << "fsdp-schedule: bucket-bytes must be >= 0, got "
                         << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    if (maxInFlight < 1) {
      module.emitError() << "fsdp-schedule: max-in-flight must be >= 1, got "
                         << static_cast<int64_t>(maxInFlight);
      return signalPassFailure();
    }
    const ClusterSpec *spec = nullptr;
    if (clusterSpecs->hasCluster(cluster)) {
      spec = clusterSpecs->get();
      if (!spec) {
        module.emitError() << "fsdp-schedule: " << clusterSpecs->getError();
        return signalPassFailure();
      }
    }
    int64_t budget = std::numeric_limits<int64_t>::max();
    if (!memoryBudget.empty()) {
      std::optional<int64_t> b = parseByteSize(memoryBudget);
      if (!b) {
        module.emitError()
            << "fsdp-schedule: memory-budget must be a byte count such as "
               "80GiB, got '"
            << memoryBudget << "'";
        return signalPassFailure();
      }
      budget = *b;
    } else if (spec) {
      budget = (int64_t)spec->memoryBytes;
    }

    std::string chosen =
        prefetch == "auto" ? std::string("list") : std::string(prefetch);
    int64_t limit = maxInFlight;
    if (prefetch == "auto" && spec) {
      // The cost model picks the fastest candidate that fits the budget (if
      // none fits, the fastest: the report then shows the overage). The
      // candidates are planned on clones, in parallel, and the winner's
      // body replaces the module's.
      struct Candidate {
        std::string mode;
        int64_t limit;
        OwningOpRef<ModuleOp> module;
        double time = 0;
        int64_t peak = 0;
        bool fits = false;
      };
      SmallVector<Candidate> candidates;
      candidates.push_back({"list", maxInFlight, nullptr});
      if (maxInFlight > 1)
        candidates.push_back({"list", 1, nullptr});
      for (const char *mode : {"fsdp2", "fsdp1", "none"})
        candidates.push_back({mode, 0, nullptr});
      for (Candidate &c : candidates)
        c.module = module.clone();
      Simulator sim(*spec);
      if (failed(failableParallelForEach(
              &getContext(), candidates, [&](Candidate &c) {
                if (failed(
                        apply(*c.module, c.mode, c.limit, budget, bucketBytes)))
                  return failure();
                FailureOr<func::FuncOp> fn = getStepFunction(*c.module);
                FailureOr<MemoryPlan> plan = MemoryPlan::compute(*fn);
                FailureOr<SimResult> r = sim.run(*c.module);
                if (failed(plan) || failed(r))
                  return failure();
                c.time = r->stepTime;
                c.peak = plan->peakBytes;
                c.fits = plan->peakBytes <= budget;
                return success();
              })))
        return signalPassFailure();
      // Equal predicted times (within rounding: where no transfer can overlap
      // compute, comm_overlap = 0, every placement costs the same) go to the
      // smaller planned peak, then to the later candidate (fewer gathers
      // started early: none is last).
      auto faster = [](const Candidate &a, const Candidate &b) {
        double tol = 1e-9 * std::max(a.time, b.time);
        if (std::fabs(a.time - b.time) > tol)
          return a.time < b.time;
        return a.peak <= b.peak;
      };
      Candidate *best = &candidates.front();
      for (Candidate &c : candidates)
        if (c.fits ? (!best->fits || faster(c, *best))
                   : (!best->fits && faster(c, *best)))
          best = &c;
      chosen = best->mode;
      limit = best->limit;
      Block *body = module.getBody();
      body->clear();
      body->getOperations().splice(body->end(),
                                   best->module->getBody()->getOperations());
    } else if (failed(apply(module, chosen, limit, budget, bucketBytes))) {
      return signalPassFailure();
    }
    std::string label =
        chosen == "list" ? "list(max-in-flight=" + std::to_string(limit) + ")"
                         : chosen;
    module->setAttr(
        kScheduleAttr,
        StringAttr::get(module.getContext(),
                        (prefetch == "auto" ? "auto: " : "") + label));
  }

  std::shared_ptr<ClusterSpecCache> clusterSpecs =
      std::make_shared<ClusterSpecCache>();
};
} // namespace

std::unique_ptr<Pass>
mlir::fsdp::createFSDPSchedule(FSDPScheduleOptions options,
                               std::shared_ptr<ClusterSpecCache> specs) {
  return std::make_unique<FSDPSchedulePass>(std::move(options),
                                            std::move(specs));
}
