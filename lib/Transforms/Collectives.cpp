//===- Collectives.cpp - fsdp-collectives: place gathers, frees, reduces ---===//
//
// FULL_SHARD (ZeRO-3) placement as in PyTorch FSDP (Zhao et al., VLDB 2023,
// Sec. 3.3 and Fig. 4): all-gather a unit right before its first forward
// use, free it after its last forward use (reshard after forward), gather it
// again for backward, and reduce-scatter its gradient as soon as the
// gradient is complete.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCOLLECTIVES
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FSDPCollectivesPass : mlir::fsdp::impl::FSDPCollectivesBase<FSDPCollectivesPass> {
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

  void runOnOperation() override {
    FailureOr<func::FuncOp> maybeFn = getStepFunction(getOperation());
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    Block &block = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Operation *lossOp = nullptr;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (fn.getResultAttr(i, nn::kLossAttr))
        lossOp = ret.getOperand(i).getDefiningOp();
    if (!lossOp) {
      fn.emitError() << "expects a result marked 'nn.loss' computed in the function";
      return signalPassFailure();
    }

    for (AllGatherOp gather : llvm::to_vector(block.getOps<AllGatherOp>())) {
      SmallVector<OpOperand *> forward, backward;
      SmallVector<Operation *> views;
      for (Operation *user : gather->getUsers()) {
        auto view = dyn_cast<ParamViewOp>(user);
        if (!view) {
          user->emitOpError() << "uses a gathered buffer directly; expected fsdp.param_view";
          return signalPassFailure();
        }
        views.push_back(view);
        for (OpOperand &use : view->getUses())
          (lossOp->isBeforeInBlock(use.getOwner()) ? backward : forward).push_back(&use);
      }
      if (reshardAfterForward) {
        placeGather(gather, forward);
        placeGather(gather, backward);
      } else {
        forward.append(backward);
        placeGather(gather, forward);
      }
      for (Operation *v : views)
        v->erase();
      gather.erase();
    }

    // Reduce-scatter as soon as the unit's gradient is complete.
    for (FlattenOp flatten : llvm::to_vector(block.getOps<FlattenOp>())) {
      Operation *lastDef = nullptr;
      for (Value g : flatten.getInputs())
        if (Operation *def = g.getDefiningOp())
          if (!lastDef || lastDef->isBeforeInBlock(def))
            lastDef = def;
      if (lastDef)
        flatten->moveAfter(lastDef);
      Operation *anchor = flatten;
      for (Operation *user : llvm::to_vector(flatten->getUsers()))
        if (auto rs = dyn_cast<ReduceScatterOp>(user)) {
          rs->moveAfter(anchor);
          anchor = rs;
        }
      OpBuilder b(anchor->getBlock(), std::next(anchor->getIterator()));
      FreeOp::create(b, flatten.getLoc(), flatten.getResult());
    }
  }
};
} // namespace
