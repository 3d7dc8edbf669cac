//===- Collectives.cpp - fsdp-collectives: place gathers, frees, reduces --===//
//
// FULL_SHARD (ZeRO-3) placement as in PyTorch FSDP (Zhao et al., VLDB 2023,
// Sec. 3.3 and Fig. 4): all-gather a unit right before its first forward
// use, free it after its last forward use (reshard after forward), gather it
// again for backward, and reduce-scatter its gradient as soon as the
// gradient is complete.
//
//===----------------------------------------------------------------------===//
#include "GlobOptions.h"
#include "OpOrder.h"
#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <map>
#include <optional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCOLLECTIVES
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// Moves the sums of whole gradients that `flatten` packs (the chains of
/// nn.add marked nn.accumulate: accumulate=unsharded, a pipeline stage's
/// units gathered once per step) right after the later of each sum's
/// operands, as fsdp-schedule's placeAccumulations would later, so that
/// the flatten and its reduction follow the unit's last micro-batch
/// gradient, not the step's last op. Under interleaving a chunk's
/// gradients are complete after its last backward, (v-1)·P backward parts
/// before the step ends; Megatron-LM's
/// forward_backward_pipelining_with_interleaving launches each chunk's
/// gradient reduction there (grad_sync_func at
/// is_last_microbatch_for_model_chunk), and torch.distributed.pipelining
/// (_add_reduce_grad) after each stage's last backward.
void hoistAccumulations(FlattenOp flatten, BlockOrder &order) {
  SmallVector<Operation *> sums;
  SmallVector<Value> work(flatten.getInputs().begin(),
                          flatten.getInputs().end());
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !isa<nn::AddOp>(def) || !def->hasAttr(nn::kAccumulateAttr) ||
        !seen.insert(def).second)
      continue;
    sums.push_back(def);
    llvm::append_range(work, def->getOperands());
  }
  // Through the caller's BlockOrder: a move it does not see would leave its
  // positions stale (OpOrder.h).
  llvm::sort(sums,
             [&](Operation *a, Operation *b) { return order.isBefore(a, b); });
  for (Operation *sum : sums) {
    Operation *last = nullptr;
    for (Value v : sum->getOperands())
      if (Operation *def = v.getDefiningOp();
          def && def->getBlock() == sum->getBlock() &&
          (!last || order.isBefore(last, def)))
        last = def;
    if (last && order.isBefore(last, sum))
      order.moveAfter(sum, last);
  }
}

/// Whether `flatten`'s packed gradient is reduce-scattered (FSDP), directly
/// or after its cast to reduce-dtype. Only those follow their last gradient
/// (hoistAccumulations): a DDP all-reduce stays after the backward, as
/// Megatron-LM (2021) reduced its gradients after the whole backward
/// (train_step's allreduce_gradients), which the SC'21 rows ran.
bool reduceScattered(FlattenOp flatten) {
  return llvm::any_of(flatten->getUsers(), [](Operation *u) {
    return isa<ReduceScatterOp>(u) ||
           (isa<nn::CastOp>(u) && llvm::any_of(u->getUsers(), [](Operation *v) {
              return isa<ReduceScatterOp>(v);
            }));
  });
}

/// The micro-batch whose gradients `flatten` packs (fsdp-micro-batch's
/// nn.micro_batch on every input's producer), or -1 when they are not one
/// micro-batch's (no micro-batches, or accumulate=unsharded's sum of whole
/// gradients).
int64_t microBatchOf(FlattenOp flatten) {
  std::optional<int64_t> j;
  for (Value g : flatten.getInputs()) {
    Operation *def = g.getDefiningOp();
    auto a = def ? def->getAttrOfType<IntegerAttr>(nn::kMicroBatchAttr)
                 : IntegerAttr();
    if (!a || (j && *j != a.getInt()))
      return -1;
    j = a.getInt();
  }
  return j.value_or(-1);
}

struct FSDPCollectivesPass
    : mlir::fsdp::impl::FSDPCollectivesBase<FSDPCollectivesPass> {
  using Base::Base;

  /// Re-materialises the gather of `gather` for the uses in `uses`: a new
  /// all-gather before the first user, new views, and a free after the last.
  void placeGather(AllGatherOp gather, ArrayRef<OpOperand *> uses) {
    if (uses.empty())
      return;
    Operation *first = uses.front()->getOwner(), *last = first;
    for (OpOperand *u : uses) {
      if (u->getOwner()->isBeforeInBlock(first))
        first = u->getOwner();
      if (last->isBeforeInBlock(u->getOwner()))
        last = u->getOwner();
    }
    OpBuilder b(first);
    auto newGather = cast<AllGatherOp>(b.clone(*gather));
    // cast-on-gather: the shard's cast to param-dtype moves with its gather,
    // so that the low-precision shard lives only as long as the gather.
    if (auto c = gather.getShard().getDefiningOp<nn::CastOp>()) {
      b.setInsertionPoint(newGather);
      newGather.getShardMutable().assign(b.clone(*c)->getResult(0));
      b.setInsertionPoint(first);
    }
    llvm::DenseMap<Operation *, Value> views;
    for (OpOperand *u : uses) {
      auto view = cast<ParamViewOp>(u->get().getDefiningOp());
      Value &nv = views[view];
      if (!nv) {
        auto clone = cast<ParamViewOp>(b.clone(*view));
        clone.getFlatMutable().assign(newGather);
        nv = clone;
      }
      u->set(nv);
    }
    b.setInsertionPointAfter(last);
    FreeOp::create(b, last->getLoc(), newGather.getResult());
  }

  /// The root unit of each micro-batch, as (gather, micro-batch): the unit
  /// whose forward ends the micro-batch's forward and whose backward begins
  /// its backward, no other unit's parameters used in between. Resharding
  /// it after forward would free it only to gather it again at once, and
  /// a prefetch would make both copies coexist; FSDP2 leaves its root
  /// module gathered (`reshard_after_forward=False`) and torchtitan its
  /// last unit (norm + output) for this reason.
  static llvm::DenseSet<std::pair<Operation *, int64_t>>
  rootUnits(ArrayRef<AllGatherOp> gathers, const StepPhases &phases) {
    struct Extent {
      Operation *lastForward = nullptr, *firstBackward = nullptr;
    };
    // Per micro-batch, per gather: its last forward and first backward use.
    std::map<int64_t, llvm::MapVector<Operation *, Extent>> extents;
    for (AllGatherOp gather : gathers)
      for (Operation *view : gather->getUsers())
        for (Operation *user : view->getUsers()) {
          auto [mb, backward] = phases.phaseOf(user);
          Extent &e = extents[mb][gather];
          Operation *&slot = backward ? e.firstBackward : e.lastForward;
          if (!slot || (backward ? user->isBeforeInBlock(slot)
                                 : slot->isBeforeInBlock(user)))
            slot = user;
        }
    llvm::DenseSet<std::pair<Operation *, int64_t>> roots;
    for (auto &[mb, units] : extents) {
      Operation *root = nullptr;
      for (auto &[gather, e] : units)
        if (e.lastForward &&
            (!root || units[root].lastForward->isBeforeInBlock(e.lastForward)))
          root = gather;
      if (!root || !units[root].firstBackward)
        continue;
      Extent r = units[root];
      // Nothing of another unit between the root's forward and backward.
      bool atOnce = llvm::all_of(units, [&](auto &entry) {
        const Extent &e = entry.second;
        return entry.first == root || !e.firstBackward ||
               r.firstBackward->isBeforeInBlock(e.firstBackward);
      });
      if (atOnce)
        roots.insert({root, mb});
    }
    return roots;
  }

  /// Every keep-gathered name is a unit of the module; on a pipeline stage a
  /// unit may be another stage's: recorded, and fsdp-pipeline fails on a
  /// name no stage has (GlobOptions.h).
  LogicalResult checkKeepGathered() {
    ModuleOp stage = pipelineStageModule(getOperation());
    SmallVector<std::string> unknown;
    for (const std::string &name : keepGathered)
      if (!SymbolTable::lookupSymbolIn(getOperation(), name)) {
        if (!stage)
          return getOperation().emitError()
                 << "fsdp-collectives: keep-gathered names unknown unit '"
                 << name << "'";
        unknown.push_back(name);
      }
    if (stage && !keepGathered.empty())
      recordUnmatched(stage, "fsdp-collectives: keep-gathered", unknown);
    return success();
  }

protected:
  void runOnOperation() override {
    FailureOr<func::FuncOp> maybeFn = getStepFunction(getOperation());
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    Block &block = fn.getBody().front();
    Operation *lossOp = lossDefiningOp(fn);
    if (!lossOp) {
      fn.emitError()
          << "expects a result marked 'nn.loss' computed in the function";
      return signalPassFailure();
    }

    // The loss op of each micro-batch (fsdp-micro-batch) bounds its forward.
    StepPhases stepPhases(fn);

    // SHARD_GRAD_OP keeps gathered parameters from forward to backward.
    bool reshard = reshardAfterForward;
    reshard &= strategyOf(getOperation()) != Strategy::ShardGradOp;

    if (failed(checkKeepGathered()))
      return signalPassFailure();
    SmallVector<AllGatherOp> paramGathers;
    for (AllGatherOp gather : block.getOps<AllGatherOp>())
      // Only the gathers that feed parameter views are placed here; ZeRO-1's
      // gather of updated slices stays where fsdp-shard put it.
      if (llvm::any_of(gather->getUsers(),
                       [](Operation *u) { return isa<ParamViewOp>(u); }))
        paramGathers.push_back(gather);
    llvm::DenseSet<std::pair<Operation *, int64_t>> rootOf;
    if (!reshardRoot)
      rootOf = rootUnits(paramGathers, stepPhases);

    for (AllGatherOp gather : paramGathers) {
      // Per-unit reshard_after_forward (FSDP2): listed units stay gathered.
      bool reshardUnit =
          reshard && !llvm::is_contained(keepGathered, gather.getUnit().str());
      // Uses grouped by phase: (micro-batch, forward or backward). With
      // reshard-after-forward each phase gathers its own copy; without, one
      // copy serves a micro-batch's forward and backward.
      std::map<std::pair<int64_t, bool>, SmallVector<OpOperand *>> phases;
      SmallVector<Operation *> views;
      for (Operation *user : gather->getUsers()) {
        auto view = dyn_cast<ParamViewOp>(user);
        if (!view) {
          user->emitOpError()
              << "uses a gathered buffer directly; expected fsdp.param_view";
          return signalPassFailure();
        }
        views.push_back(view);
        for (OpOperand &use : view->getUses()) {
          auto [mb, backward] = stepPhases.phaseOf(use.getOwner());
          bool regather =
              reshardUnit && backward && !rootOf.contains({gather, mb});
          // Gathered once per step: every use is one phase's.
          std::pair<int64_t, bool> phase{mb, regather};
          if (gatherOncePerStep)
            phase = {-1, false};
          phases[phase].push_back(&use);
        }
      }
      // Gathers in program order of their first use.
      SmallVector<SmallVector<OpOperand *>> groups;
      for (auto &[key, uses] : phases)
        groups.push_back(uses);
      llvm::sort(groups, [](const auto &a, const auto &b) {
        auto first = [](const SmallVector<OpOperand *> &g) {
          Operation *f = g.front()->getOwner();
          for (OpOperand *u : g)
            if (u->getOwner()->isBeforeInBlock(f))
              f = u->getOwner();
          return f;
        };
        return first(a)->isBeforeInBlock(first(b));
      });
      for (auto &uses : groups)
        placeGather(gather, uses);
      for (Operation *v : views)
        v->erase();
      Operation *castOp = gather.getShard().getDefiningOp<nn::CastOp>();
      gather.erase();
      if (castOp && castOp->use_empty())
        castOp->erase();
    }

    // Reduce as soon as the unit's gradient is complete — except for ZeRO-1,
    // whose gradients stay whole (replicated) until backward ends, as
    // DeepSpeed's stage 1 reduces them at the end of the step. With
    // micro-batches (accumulate=sharded) that holds for the last one only:
    // an earlier micro-batch's gradient is reduced as soon as it is complete
    // and joins the unit's running sum of shards, so that one whole
    // gradient, not one per micro-batch, is live when backward ends.
    bool keepWholeGradients =
        strategyOf(getOperation()) == Strategy::ShardOptimizer;
    int64_t lastMicroBatch = -1;
    for (Operation &op : block)
      if (auto j = op.getAttrOfType<IntegerAttr>(nn::kMicroBatchAttr))
        lastMicroBatch = std::max(lastMicroBatch, j.getInt());
    // Positions kept across the moves below (OpOrder.h): comparing the moved
    // chain with MLIR's own order renumbered the block once per flatten.
    BlockOrder order(block);
    for (FlattenOp flatten : llvm::to_vector(block.getOps<FlattenOp>())) {
      int64_t j = microBatchOf(flatten);
      if (keepWholeGradients && (j < 0 || j == lastMicroBatch)) {
        Operation *user = *flatten->getUsers().begin();
        OpBuilder b(user->getBlock(), std::next(user->getIterator()));
        order.place(FreeOp::create(b, flatten.getLoc(), flatten.getResult()));
        continue;
      }
      if (reduceScattered(flatten))
        hoistAccumulations(flatten, order);
      Operation *lastDef = nullptr;
      for (Value g : flatten.getInputs())
        if (Operation *def = g.getDefiningOp())
          if (!lastDef || order.isBefore(lastDef, def))
            lastDef = def;
      if (lastDef)
        order.moveAfter(flatten, lastDef);
      // The reduction chain follows: reduce-scatter or all-reduce, then
      // (HSDP) the all-reduce of the reduce-scattered shard.
      Operation *anchor = flatten;
      Operation *firstReduce = nullptr;
      SmallVector<Operation *> chain(flatten->getUsers().begin(),
                                     flatten->getUsers().end());
      while (!chain.empty()) {
        Operation *op = chain.pop_back_val();
        if (!isa<ReduceScatterOp, AllReduceOp, nn::CastOp>(op))
          continue;
        order.moveAfter(op, anchor);
        anchor = op;
        if (!firstReduce && isa<ReduceScatterOp, AllReduceOp>(op))
          firstReduce = op;
        chain.append(op->getUsers().begin(), op->getUsers().end());
      }
      // The packed gradient dies after its direct consumer (the reduction,
      // or the cast to reduce-dtype).
      Operation *consumer = firstReduce ? firstReduce : anchor;
      for (Operation *u : flatten->getUsers())
        if (order.isBefore(u, consumer) || !firstReduce)
          consumer = u;
      OpBuilder b(flatten->getBlock(), std::next(consumer->getIterator()));
      order.place(FreeOp::create(b, flatten.getLoc(), flatten.getResult()));
    }
  }
};
} // namespace
