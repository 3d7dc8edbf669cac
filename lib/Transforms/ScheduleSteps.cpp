//===- ScheduleSteps.cpp - the steps fsdp-schedule composes ---------------===//
//
// See Schedule.cpp for what the steps achieve together and why.
//
//===----------------------------------------------------------------------===//
#include "ScheduleSteps.h"
#include "OpOrder.h"
#include "fsdp/Analysis/MemoryPlan.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <limits>
#include <map>

#define DEBUG_TYPE "fsdp-schedule"

using namespace mlir;
using namespace mlir::fsdp;

/// The wait of an async collective.
static WaitOp waitOf(Operation *collective) {
  return cast<WaitOp>(*collective->getResult(0).getUsers().begin());
}

/// "forward", or "micro-batch 1 backward" (fsdp-micro-batch), for
/// -debug-only=fsdp-schedule.
[[maybe_unused]] static std::string phaseName(std::pair<int64_t, bool> phase) {
  std::string name = phase.second ? "backward" : "forward";
  if (phase.first < 0)
    return name;
  return "micro-batch " + std::to_string(phase.first) + " " + name;
}

/// "'nn.linear' (#12)": an op and its place in the block.
[[maybe_unused]] static std::string placeName(Operation *op) {
  int64_t index = 0;
  for (Operation *p = op->getPrevNode(); p; p = p->getPrevNode())
    ++index;
  return "'" + op->getName().getStringRef().str() + "' (#" +
         std::to_string(index) + ")";
}

/// The units a collective (or a bucket of collectives) serves.
static SmallVector<StringRef> unitNames(Operation *collective) {
  if (auto bucket = collective->getAttrOfType<ArrayAttr>("bucket"))
    return llvm::map_to_vector(bucket, [](Attribute a) {
      return cast<FlatSymbolRefAttr>(a).getValue();
    });
  return {collective->getAttrOfType<FlatSymbolRefAttr>("unit").getValue()};
}

/// "@fc1", or "@fc1+@fc2" for a bucket.
[[maybe_unused]] static std::string unitsOf(Operation *collective) {
  std::string s;
  for (StringRef unit : unitNames(collective))
    s += (s.empty() ? "@" : "+@") + unit.str();
  return s;
}

/// Step 1: every collective whose result is used becomes async (its result
/// an !fsdp.future), with an fsdp.wait right after it that all its uses read.
void mlir::fsdp::makeAsync(Block &block) {
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
/// reduction of the same kind and group, or to the first other use; with
/// `toFirstUse` (a pipeline stage's units gathered once per step), the
/// reduce-scatter of a unit reduced once to the first use alone.
void mlir::fsdp::placeReductionWaits(Block &block, bool toFirstUse) {
  SmallVector<Operation *> reductions;
  for (Operation &op : block)
    if (isa<ReduceScatterOp>(&op) && op.hasAttr("async"))
      reductions.push_back(&op);
  for (Operation &op : block)
    if (isa<AllReduceOp>(&op) && op.hasAttr("async"))
      reductions.push_back(&op);
  // Positions kept across the moves below (OpOrder.h): comparing a moved
  // wait with MLIR's own order renumbered the block once per reduction.
  BlockOrder order(block);
  // A unit reduced once (its gradients accumulated whole) may keep its
  // reduction in flight until the optimizer; one reduced per micro-batch
  // (accumulate=sharded) waits each before the next, as FSDP2's next
  // post-backward waits the previous reduce-scatter: kept in flight, every
  // micro-batch's reduce-scatter input would stay live to the step's end.
  llvm::StringMap<int64_t> reductionsOfUnit;
  if (toFirstUse)
    for (Operation *r : reductions)
      if (isa<ReduceScatterOp>(r))
        for (StringRef unit : unitNames(r))
          ++reductionsOfUnit[unit];
  auto reducedOnce = [&](Operation *r) {
    return llvm::all_of(unitNames(r), [&](StringRef unit) {
      return reductionsOfUnit.lookup(unit) == 1;
    });
  };
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
    llvm::sort(chain.begin() + 1, chain.end(), [&](Operation *a, Operation *b) {
      return order.isBefore(a, b);
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
          if (!inChain.contains(u) && order.isBefore(u, target))
            target = u;
    }
    [[maybe_unused]] const char *why = "the first use of its result";
    if (target == block.getTerminator())
      why = "the end of the step (no other use)";
    bool inFlight = toFirstUse && isa<ReduceScatterOp>(r) && reducedOnce(r);
    for (Operation *n = r->getNextNode(); !inFlight && n && n != target;
         n = n->getNextNode())
      if (isCollective(n) && sameKind(n, r)) {
        target = n;
        why = "the next reduction of its kind and group";
        break;
      }
    LLVM_DEBUG(llvm::dbgs() << "  " << r->getName() << " " << unitsOf(r)
                            << ": wait sunk to before " << placeName(target)
                            << ", " << why << "\n");
    // A chained all-reduce's own wait may sit before the target: keep it
    // after its start (it is placed when that all-reduce is processed).
    for (Operation *c : chain)
      order.moveBefore(c, target);
    // The send buffer is freed after the transfer completes.
    for (Operation *u : llvm::make_early_inc_range(r->getOperand(0).getUsers()))
      if (isa<FreeOp>(u) && order.isBefore(u, wait))
        order.moveAfter(u, wait);
  }
  // A chained all-reduce moved after its wait's old place: put each wait
  // back after its start if needed.
  for (Operation &op : block)
    if (auto w = dyn_cast<WaitOp>(&op))
      if (Operation *start = w.getToken().getDefiningOp();
          order.isBefore(w, start))
        order.moveAfter(w, start);
}

/// Step 2b: each gradient accumulation (nn.add marked nn.accumulate: the
/// running sum of reduced shards fsdp-shard builds for accumulate=sharded,
/// or fsdp-micro-batch's sum of whole gradients) moves right after the later
/// of its operands, so that a micro-batch's gradient joins the running sum
/// as soon as its reduction is waited on, and both die there: the memory
/// plan then writes the sum over the running one (MemoryPlan.h), and one
/// buffer per unit accumulates whatever the micro-batch count. Sums are in
/// program order, so the running sum is always placed first.
void mlir::fsdp::placeAccumulations(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (!isa<nn::AddOp>(op) || !op.hasAttr(nn::kAccumulateAttr))
      continue;
    Operation *last = nullptr;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp())
        if (!last || last->isBeforeInBlock(def))
          last = def;
    if (last)
      moveOpAfter(&op, last);
  }
}

/// The gathered unit buffers a gather's wait provides: its result, or a
/// bucket's unpacked buffers.
static SmallVector<Value> gatheredBuffers(WaitOp w) {
  if (w->hasOneUse())
    if (auto u = dyn_cast<UnpackOp>(*w->getUsers().begin()))
      return SmallVector<Value>(u.getResults().begin(), u.getResults().end());
  return {w.getResult()};
}

/// The shard's cast to param-dtype if nothing else reads it (it moves with
/// its gather).
static Operation *soleCast(Value shard) {
  Operation *c = shard.getDefiningOp<nn::CastOp>();
  return c && c->hasOneUse() ? c : nullptr;
}

SmallVector<Gather> mlir::fsdp::unitGathers(func::FuncOp fn) {
  Block &block = fn.getBody().front();
  StepPhases phases(fn);
  SmallVector<Gather> gathers;
  llvm::StringMap<SmallVector<Operation *>> lastCopyFrees;
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
    SmallVector<Operation *> frees, previousFrees;
    for (Value buffer : gatheredBuffers(w))
      for (Operation *u : buffer.getUsers())
        if (isa<FreeOp>(u))
          frees.push_back(u);
    for (StringRef unit : unitNames(g)) {
      llvm::append_range(previousFrees, lastCopyFrees.lookup(unit));
      lastCopyFrees[unit] = frees;
    }
    gathers.push_back({g, prelude, w, phases.phaseOf(firstUse), previousFrees});
  }
  return gathers;
}

static RankedTensorType flatType(int64_t numel, Type elt) {
  return RankedTensorType::get({numel}, elt);
}

/// Moves every op that reads `values` (transitively) and lies before
/// `after` to right after it, in block order, so that a bucket's results
/// are read only once it is unpacked (ZeRO-1 updates and re-gathers each
/// unit right after its reduction; HSDP all-reduces each reduced shard over
/// the replicas right away). A free of a moved op's operand that now comes
/// before a reader of it follows its last reader.
static void sinkReadersAfter(ValueRange values, Operation *after) {
  Block *block = after->getBlock();
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> work(values.begin(), values.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *u : v.getUsers())
      if (u->getBlock() == block && u->isBeforeInBlock(after) &&
          slice.insert(u))
        llvm::append_range(work, u->getResults());
  }
  SmallVector<Operation *> ops = slice.takeVector();
  llvm::sort(ops,
             [](Operation *a, Operation *c) { return a->isBeforeInBlock(c); });
  Operation *at = after;
  for (Operation *op : ops) {
    moveOpAfter(op, at);
    at = op;
  }
  for (Operation *op : ops)
    for (Value v : op->getOperands()) {
      Operation *last = nullptr;
      for (Operation *u : v.getUsers())
        if (!isa<FreeOp>(u) && (!last || last->isBeforeInBlock(u)))
          last = u;
      for (Operation *u : llvm::make_early_inc_range(v.getUsers()))
        if (isa<FreeOp>(u) && last && u->isBeforeInBlock(last))
          moveOpAfter(u, last);
    }
}

/// ZeRO-1 and HSDP read each unit's reduced gradient right after its
/// reduction (the update; the all-reduce over the replicas): their buckets
/// move those readers after the bucket instead of closing at them.
static bool readsReductionsEarly(func::FuncOp fn) {
  auto module = fn->getParentOfType<ModuleOp>();
  auto s = module ? module->getAttrOfType<StrategyAttr>(kStrategyAttr)
                  : StrategyAttr();
  return s && (s.getValue() == Strategy::ShardOptimizer ||
               s.getValue() == Strategy::HybridShard);
}

/// One all-gather for `members` (each an all-gather and its wait, all over
/// one group and of one dtype): their shards packed, gathered and waited
/// right before `at`, and unpacked into each member's full buffer, which
/// takes over the member's uses; the members are erased. `blocks` is the
/// shard group's size (the packed gather's rank blocks).
static UnpackOp gatherAsOne(ArrayRef<std::pair<AllGatherOp, WaitOp>> members,
                            Operation *at, int64_t blocks) {
  OpBuilder b(at);
  Location loc = at->getLoc();
  SmallVector<Value> shards;
  SmallVector<Type> fullTypes;
  SmallVector<Attribute> units;
  int64_t shardNumel = 0, fullNumel = 0;
  for (const auto &m : members) {
    AllGatherOp g = m.first;
    shards.push_back(g.getShard());
    fullTypes.push_back(g.getBufferType());
    units.push_back(g.getUnitAttr());
    shardNumel += g.getShard().getType().getNumElements();
    fullNumel += g.getBufferType().getNumElements();
  }
  AllGatherOp first = members.front().first;
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
    auto [g, w] = m;
    w.getResult().replaceAllUsesWith(unpack.getResult(i));
    w->erase();
    g->erase();
  }
  return unpack;
}

/// Bucketing (DeepSpeed's prefetch and reduce buckets; FSDP's paper, Zhao
/// et al. VLDB 2023 Sec. 3.3 / Fig. 7: all-gathers of few elements lose
/// bus bandwidth to per-collective latency): consecutive unit gathers of
/// one phase whose gathered bytes sum to at most `bucketBytes` become one
/// all-gather of a packed buffer (fsdp.pack of the shards, block-interleaved
/// result unpacked into the units' full buffers), issued where the first
/// member was.
void mlir::fsdp::bucketGathers(func::FuncOp fn, int64_t bucketBytes) {
  SmallVector<Gather> gathers = unitGathers(fn);
  int64_t blocks = groupSize(fn, Group::Shard).value_or(1);
  auto flush = [&](MutableArrayRef<Gather> members, StringRef closedBy) {
    if (members.size() < 2)
      return;
    LLVM_DEBUG({
      llvm::dbgs() << "  bucket: the all-gathers of";
      int64_t total = 0;
      for (Gather &m : members) {
        llvm::dbgs() << " " << unitsOf(m.start);
        total += bufferBytes(m.start.getResult());
      }
      llvm::dbgs() << " (" << phaseName(members.front().phase)
                   << ") become one of " << total << " bytes <= bucket-bytes "
                   << bucketBytes << "; closed by " << closedBy << "\n";
    });
    AllGatherOp first = members.front().start;
    for (Gather &m : members.drop_front())
      for (Operation *op : m.prelude)
        moveOpBefore(op, first);
    SmallVector<std::pair<AllGatherOp, WaitOp>> pairs;
    for (Gather &m : members)
      pairs.push_back({m.start, m.wait});
    gatherAsOne(pairs, first, blocks);
  };
  SmallVector<Gather> current;
  int64_t bytes = 0;
  for (Gather &g : gathers) {
    int64_t gb = bufferBytes(g.start.getResult());
    bool samePhase = !current.empty() && current.front().phase == g.phase;
    bool sameKind = !current.empty() &&
                    current.front().start.getGroup() == g.start.getGroup() &&
                    current.front().start.getBufferType().getElementType() ==
                        g.start.getBufferType().getElementType();
    bool joins = samePhase && sameKind && bytes + gb <= bucketBytes;
    if (!joins) {
      flush(current, !samePhase  ? "the next phase"
                     : !sameKind ? "another group or dtype"
                                 : "the size limit");
      current.clear();
      bytes = 0;
    }
    if (gb <= bucketBytes) {
      current.push_back(g);
      bytes += gb;
    }
  }
  flush(current, "the end of the step");
}

/// Consecutive reduce-scatters over the shard group with the same dtype and
/// reduction, whose full gradients sum to at most `bucketBytes`, become one
/// reduce-scatter of a packed buffer issued where the last member was (when
/// every member's gradient is complete); its result is unpacked into the
/// units' gradient shards.
void mlir::fsdp::bucketReductions(func::FuncOp fn, int64_t bucketBytes) {
  Block &block = fn.getBody().front();
  int64_t blocks = groupSize(fn, Group::Shard).value_or(1);
  bool early = readsReductionsEarly(fn);
  SmallVector<ReduceScatterOp> all;
  for (Operation &op : block)
    if (auto r = dyn_cast<ReduceScatterOp>(&op);
        r && r.getAsync() && !r.getBucket())
      all.push_back(r);
  auto flush = [&](MutableArrayRef<ReduceScatterOp> members) {
    if (members.size() < 2)
      return;
    LLVM_DEBUG({
      llvm::dbgs() << "  bucket: the reduce-scatters of";
      int64_t total = 0;
      for (ReduceScatterOp m : members) {
        llvm::dbgs() << " " << unitsOf(m);
        total += bufferBytes(m.getInput());
      }
      llvm::dbgs() << " become one of " << total << " bytes <= bucket-bytes "
                   << bucketBytes << ", issued where the last one was\n";
    });
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
          moveOpAfter(u, pack);
      WaitOp w = waitOf(m);
      w.getResult().replaceAllUsesWith(unpack.getResult(i));
      w->erase();
      m->erase();
    }
    // Readers of a member's reduced gradient now follow the unpack.
    sinkReadersAfter(unpack.getResults(), unpack);
  };
  SmallVector<ReduceScatterOp> current;
  int64_t bytes = 0;
  for (ReduceScatterOp r : all) {
    int64_t rb = bufferBytes(r.getInput());
    bool chained = r.getInput().getDefiningOp<WaitOp>() != nullptr;
    // The bucket starts where its last member was: every earlier member's
    // reduced gradient must be read only after that, or (ZeRO-1, HSDP) its
    // readers move there.
    bool readLater =
        early || llvm::all_of(current, [&](ReduceScatterOp m) {
          return llvm::all_of(waitOf(m)->getUsers(), [&](Operation *u) {
            return r->isBeforeInBlock(u);
          });
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

/// ZeRO-1's all-gathers of the updated shards (no parameter view reads
/// them: they become the replicated parameters) as bucketReductions
/// buckets: consecutive ones of one group and dtype whose gathered bytes sum
/// to at most `bucketBytes` become one all-gather of the packed shards,
/// issued where the last member was, unpacked by rank block.
void mlir::fsdp::bucketUpdateGathers(func::FuncOp fn, int64_t bucketBytes) {
  Block &block = fn.getBody().front();
  int64_t blocks = groupSize(fn, Group::Shard).value_or(1);
  SmallVector<AllGatherOp> all;
  for (Operation &op : block)
    if (auto g = dyn_cast<AllGatherOp>(&op);
        g && g.getAsync() && !g.getBucket() &&
        gatheredBuffers(waitOf(g)).size() == 1) {
      bool viewed = llvm::any_of(waitOf(g)->getUsers(), [](Operation *u) {
        return isa<ParamViewOp>(u);
      });
      if (!viewed)
        all.push_back(g);
    }
  auto flush = [&](MutableArrayRef<AllGatherOp> members) {
    if (members.size() < 2)
      return;
    LLVM_DEBUG({
      llvm::dbgs() << "  bucket: the all-gathers of the updated shards of";
      for (AllGatherOp m : members)
        llvm::dbgs() << " " << unitsOf(m);
      llvm::dbgs() << " become one, issued where the last one was\n";
    });
    SmallVector<std::pair<AllGatherOp, WaitOp>> pairs;
    for (AllGatherOp m : members)
      pairs.push_back({m, waitOf(m)});
    UnpackOp unpack = gatherAsOne(pairs, members.back(), blocks);
    sinkReadersAfter(unpack.getResults(), unpack);
  };
  SmallVector<AllGatherOp> current;
  int64_t bytes = 0;
  for (AllGatherOp g : all) {
    int64_t gb = bufferBytes(g.getResult());
    bool joins = !current.empty() &&
                 current.front().getGroup() == g.getGroup() &&
                 current.front().getBufferType().getElementType() ==
                     g.getBufferType().getElementType() &&
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

/// Moves a gather's start (and its prelude: casts, pack) right before `anchor`.
static void issueBefore(Gather &g, Operation *anchor) {
  for (Operation *op : g.prelude)
    moveOpBefore(op, anchor);
  moveOpBefore(g.start, anchor);
}

/// fsdp1 / fsdp2: within each phase, the next unit's gather is issued right
/// after the current unit's wait (when the current unit starts computing).
void mlir::fsdp::prefetchOneAhead(SmallVector<Gather> &gathers,
                                  bool backwardOnly) {
  for (size_t k = 0; k + 1 < gathers.size(); ++k) {
    for (size_t j = k + 1; j < gathers.size(); ++j) {
      if (gathers[j].phase != gathers[k].phase)
        continue;
      if (backwardOnly && !gathers[k].phase.second)
        break;
      Operation *anchor = gathers[k].wait->getNextNode();
      if (gathers[j].start->isBeforeInBlock(anchor))
        break;
      // Not while the unit's previous copy is still gathered.
      if (llvm::any_of(gathers[j].previousFrees, [&](Operation *free) {
            return !free->isBeforeInBlock(anchor);
          }))
        break;
      LLVM_DEBUG(llvm::dbgs()
                 << "  prefetch: the all-gather of "
                 << unitsOf(gathers[j].start) << " ("
                 << phaseName(gathers[j].phase) << ") issued when "
                 << unitsOf(gathers[k].start) << " starts computing, before "
                 << placeName(anchor) << "\n");
      issueBefore(gathers[j], anchor);
      break;
    }
  }
}

/// auto's list scheduler: each gather, in order, as early as the in-flight
/// limit and the memory budget allow (live bytes from the memory plan of the
/// unprefetched schedule, updated as gathers are hoisted).
LogicalResult mlir::fsdp::listSchedule(func::FuncOp fn,
                                       SmallVector<Gather> &gathers,
                                       int64_t maxInFlight, int64_t budget) {
  // The live bytes of the schedule being built, not a final plan: the
  // analysis itself (fsdp-memory-plan records the final one).
  FailureOr<MemoryPlan> plan = MemoryPlan::compute(fn);
  if (failed(plan))
    return failure();
  // A step that does not fit even unprefetched is not made to fit by
  // holding prefetches back: the budget then does not constrain them.
  if (plan->peakBytes > budget) {
    LLVM_DEBUG(llvm::dbgs()
               << "  list: the unprefetched peak, " << plan->peakBytes
               << " bytes, is over the budget of " << budget
               << ": gathers are placed for time alone\n");
    budget = std::numeric_limits<int64_t>::max();
  }
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
    // A unit is never gathered while its previous copy is still gathered
    // (both copies would coexist for nothing).
    int64_t afterCopy = 0;
    for (Operation *free : g.previousFrees)
      afterCopy = std::max(afterCopy, pos.lookup(free) + 1);
    earliest = std::max(earliest, afterCopy);
    int64_t p = w;
    // In flight from its start through its wait (inclusive); the
    // unprefetched place (right before the wait) is always allowed.
    while (p - 1 >= earliest && inFlight[p - 1] + 1 <= maxInFlight &&
           live[p - 1] + extra <= budget)
      --p;
    LLVM_DEBUG({
      llvm::dbgs() << "  list: the all-gather of " << unitsOf(g.start) << " ("
                   << phaseName(g.phase) << ") ";
      if (p == w)
        llvm::dbgs() << "stays right before its wait";
      else
        llvm::dbgs() << "starts " << w - p
                     << (w - p == 1 ? " instruction" : " instructions")
                     << " before its wait, "
                     << "before " << placeName(elems[p]);
      llvm::dbgs() << ": ";
      if (p - 1 < 0)
        llvm::dbgs() << "the start of the step";
      else if (p - 1 < lo)
        llvm::dbgs()
            << "gathers start in order (the previous one starts there)";
      else if (p - 1 < afterCopy)
        llvm::dbgs() << "the unit's previous copy is freed there";
      else if (p - 1 < earliest)
        llvm::dbgs() << "its inputs (cast or pack operands) are computed there";
      else if (inFlight[p - 1] + 1 > maxInFlight)
        llvm::dbgs() << "earlier, more than max-in-flight " << maxInFlight
                     << " gathers would be in flight";
      else
        llvm::dbgs() << "earlier, " << live[p - 1] << " + " << extra
                     << " live bytes would exceed the budget of " << budget;
      llvm::dbgs() << "\n";
    });
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

bool mlir::fsdp::gathersOncePerStage(func::FuncOp fn) {
  auto module = fn->getParentOfType<ModuleOp>();
  auto gather =
      module ? module->getAttrOfType<StringAttr>(kPipelineGatherAttr) : nullptr;
  return gather && gather.getValue() == "once-per-step";
}

/// Under pipeline parallelism, a stage whose units are gathered once per step
/// (pp-gather) issues each chunk's gathers ahead of the chunk, as the
/// pipeline schedule syncs parameters (Megatron-LM's
/// forward_backward_pipelining_with_interleaving: param_sync_func for model
/// chunks 0 and 1 before the first micro-batch, for chunk c + 1 at chunk c's
/// first micro-batch; torch.distributed.pipelining's _add_unshard_reshard
/// likewise unshards the next stages before their first compute): chunks 0
/// and 1 at the step start, chunk c >= 2 before chunk c - 1's first op.
/// Else a chunk's first gather starts after the wait on the activation it
/// receives, and each stage adds its gather to every hop of the ramp. Only
/// moves starts earlier; a gather that reads a value computed in the step
/// stays.
void mlir::fsdp::pipelineParamSync(func::FuncOp fn,
                                   SmallVector<Gather> &gathers) {
  if (!gathersOncePerStage(fn))
    return;
  Block &block = fn.getBody().front();
  // The first op of each chunk (fsdp.pp_chunk), in block order.
  // (Taken before any start moves, so that the moved ones keep their order.)
  Operation *stepStart = &block.front();
  std::map<int64_t, Operation *> chunkStart;
  for (Operation &op : block)
    if (auto c = op.getAttrOfType<IntegerAttr>(kPPChunkAttr))
      chunkStart.try_emplace(c.getInt(), &op);
  for (Gather &g : gathers) {
    // The gather's chunk: that of its first use.
    Operation *firstUse = nullptr;
    for (Value buffer : gatheredBuffers(g.wait))
      for (Operation *view : buffer.getUsers())
        if (isa<ParamViewOp>(view))
          for (Operation *u : view->getUsers())
            if (!firstUse || u->isBeforeInBlock(firstUse))
              firstUse = u;
    auto chunk = firstUse ? firstUse->getAttrOfType<IntegerAttr>(kPPChunkAttr)
                          : IntegerAttr();
    if (!chunk)
      continue;
    int64_t c = chunk.getInt();
    Operation *anchor = c <= 1 ? stepStart : chunkStart[c - 1];
    if (!anchor || !anchor->isBeforeInBlock(g.start))
      continue;
    bool ready = true;
    SmallVector<Operation *> moved(g.prelude);
    moved.push_back(g.start);
    for (Operation *op : moved)
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && !llvm::is_contained(moved, def) &&
            !def->isBeforeInBlock(anchor))
          ready = false;
    if (!ready)
      continue;
    LLVM_DEBUG(llvm::dbgs() << "  pipeline: the all-gather of "
                            << unitsOf(g.start) << " (chunk " << c
                            << ") issued before " << placeName(anchor) << "\n");
    issueBefore(g, anchor);
  }
}
