//===- MicroBatch.cpp - fsdp-micro-batch: gradient accumulation -----------===//
//
// k forward/backward passes per optimizer step on contiguous micro-batches of
// this rank's batch, the gradients averaged over micro-batches (each clone's
// autodiff seed is 1/k), as torch's gradient accumulation with a loss divided
// by the number of accumulation steps.
//
//===----------------------------------------------------------------------===//
#include "MicroBatchClone.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMICROBATCH
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

/// The inherent attribute of ops that know their micro-batch.
static constexpr llvm::StringLiteral kMicroBatchIndexAttr = "micro_batch";

Operation *mlir::fsdp::cloneForMicroBatch(OpBuilder &b, Operation &op,
                                          IRMapping &map, int64_t j,
                                          int64_t k) {
  Operation *c = b.clone(op, map);
  c->setAttr(nn::kMicroBatchAttr, b.getI64IntegerAttr(j));
  // The clone's rows are micro-batch j's when its input's rows shrank with
  // the batch (its results still have the old shapes).
  if (llvm::is_contained(c->getName().getAttributeNames(),
                         kMicroBatchIndexAttr) &&
      nn::rowsChanged(c))
    c->setAttr(kMicroBatchIndexAttr, b.getI64IntegerAttr(j));
  if (failed(nn::reinferResultTypes(c)))
    return nullptr;
  if (op.hasAttr(nn::kLossSeedAttr)) {
    c->removeAttr(nn::kLossSeedAttr);
    auto t = cast<RankedTensorType>(c->getResult(0).getType());
    c->setAttr("value", DenseElementsAttr::get(
                            t, FloatAttr::get(t.getElementType(), 1.0 / k)));
  }
  return c;
}

namespace {

struct FSDPMicroBatchPass
    : mlir::fsdp::impl::FSDPMicroBatchBase<FSDPMicroBatchPass> {
  using Base::Base;

protected:
  void runOnOperation() override {
    int64_t k = microBatches;
    if (k < 1) {
      getOperation().emitError()
          << "fsdp-micro-batch: micro-batches must be >= 1, got " << k;
      return signalPassFailure();
    }
    if (k == 1)
      return;
    FailureOr<func::FuncOp> maybeFn = getStepFunction(getOperation());
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    Block &block = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    int lossIdx = lossResultIndex(fn);
    Operation *seed = nullptr;
    for (Operation &op : block)
      if (op.hasAttr(nn::kLossSeedAttr))
        seed = &op;
    if (lossIdx < 0 || !seed || fn.getNumResults() < 2) {
      fn.emitError() << "fsdp-micro-batch expects the output of fsdp-autodiff "
                        "(a loss, its "
                        "seed and gradients)";
      return signalPassFailure();
    }

    SmallVector<Operation *> body;
    for (Operation &op : block.without_terminator())
      body.push_back(&op);
    OpBuilder b(ret);
    Location loc = ret.getLoc();
    auto lossType = cast<RankedTensorType>(ret.getOperand(lossIdx).getType());
    auto scalar = [&](double v) {
      return arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(lossType,
                                 FloatAttr::get(lossType.getElementType(), v)));
    };

    SmallVector<Value> sums(ret.getNumOperands());
    for (int64_t j = 0; j < k; ++j) {
      IRMapping map;
      for (BlockArgument arg : fn.getArguments())
        if (fn.getArgAttr(arg.getArgNumber(), nn::kDataAttr)) {
          auto t = cast<RankedTensorType>(arg.getType());
          SmallVector<int64_t> shape(t.getShape());
          if (shape.empty() || shape[0] % k) {
            emitError(arg.getLoc())
                << "the batch of data argument #" << arg.getArgNumber()
                << " does not divide into " << k << " micro-batches";
            return signalPassFailure();
          }
          shape[0] /= k;
          auto mb = nn::MicroBatchOp::create(
              b, arg.getLoc(), RankedTensorType::get(shape, t.getElementType()),
              arg, b.getI64IntegerAttr(j), b.getI64IntegerAttr(k));
          map.map(arg, mb.getResult());
        }
      for (Operation *op : body) {
        Operation *c = cloneForMicroBatch(b, *op, map, j, k);
        if (!c)
          return signalPassFailure();
        if (op == ret.getOperand(lossIdx).getDefiningOp())
          c->setAttr(nn::kMicroBatchLossAttr, b.getUnitAttr());
      }
      for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
        Value mv = map.lookupOrDefault(v);
        if (!sums[i]) {
          sums[i] = mv;
          continue;
        }
        auto add = nn::AddOp::create(b, loc, sums[i], mv);
        if ((int)i != lossIdx)
          add->setAttr(nn::kAccumulateAttr, b.getUnitAttr());
        sums[i] = add;
      }
    }
    // The loss is the mean of the micro-batch losses.
    sums[lossIdx] = nn::MulOp::create(b, loc, sums[lossIdx], scalar(1.0 / k));
    ret->setOperands(sums);
    for (Operation *op : llvm::reverse(body))
      op->erase();
  }
};
} // namespace
