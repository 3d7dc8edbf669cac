//===- StepFunction.cpp - find the training step function of a module -----===//
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/NN/NN.h"

using namespace mlir;

int mlir::fsdp::lossResultIndex(func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, nn::kLossAttr))
      return i;
  return -1;
}

Operation *mlir::fsdp::lossDefiningOp(func::FuncOp fn) {
  int i = lossResultIndex(fn);
  if (i < 0 || fn.getBody().empty())
    return nullptr;
  return fn.getBody().front().getTerminator()->getOperand(i).getDefiningOp();
}

FailureOr<func::FuncOp> mlir::fsdp::getStepFunction(ModuleOp module) {
  SmallVector<func::FuncOp> candidates, withLoss;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    candidates.push_back(fn);
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (fn.getResultAttr(i, nn::kLossAttr))
        withLoss.push_back(fn);
  }
  if (withLoss.size() == 1)
    return withLoss.front();
  if (withLoss.empty() && candidates.size() == 1)
    return candidates.front();
  if (candidates.empty())
    return module.emitError()
           << "expects a func.func with a body (the model's forward "
              "function), found none";
  return module.emitError()
         << "expects exactly one function whose result is marked "
            "'nn.loss' (or a single function), found "
         << candidates.size() << " functions";
}

mlir::fsdp::StepPhases::StepPhases(func::FuncOp fn)
    : lossOp(lossDefiningOp(fn)) {
  for (Operation &op : fn.getBody().front())
    if (op.hasAttr(nn::kMicroBatchLossAttr))
      if (auto a = op.getAttrOfType<IntegerAttr>(nn::kMicroBatchAttr))
        lossOf[a.getInt()] = &op;
}

std::pair<int64_t, bool> mlir::fsdp::StepPhases::phaseOf(Operation *op) const {
  int64_t mb = -1;
  if (auto a = op->getAttrOfType<IntegerAttr>(nn::kMicroBatchAttr))
    mb = a.getInt();
  Operation *boundary =
      mb >= 0 && lossOf.count(mb) ? lossOf.lookup(mb) : lossOp;
  return {mb, boundary && boundary->isBeforeInBlock(op)};
}
