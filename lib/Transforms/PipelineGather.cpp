//===- PipelineGather.cpp - a bound on gathering a stage once per step ----===//
//
// PipelineGather.h says what is counted and why it is live.
//
//===----------------------------------------------------------------------===//
#include "PipelineGather.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

int64_t mlir::fsdp::oncePerStepLowerBound(func::FuncOp fn,
                                          const OncePerStepBoundOptions &o) {
  Block &body = fn.getBody().front();
  StepPhases phases(fn);
  // The micro-batch whose backward `op` belongs to, else -1; a stage's
  // sends and receives (after a micro-batch's last forward op) are not
  // backward work.
  auto backwardOf = [&](Operation *op) -> int64_t {
    if (isa_and_nonnull<FSDPDialect>(op->getDialect()))
      return -1;
    auto [mb, backward] = phases.phaseOf(op);
    return backward ? mb : -1;
  };
  // Dead ops (canonicalize erases them later) keep nothing alive.
  llvm::DenseSet<Operation *> live;
  for (Operation &op : llvm::reverse(body))
    if (!wouldOpBeTriviallyDead(&op) ||
        llvm::any_of(op.getUsers(),
                     [&](Operation *u) { return live.contains(u); }))
      live.insert(&op);
  int64_t last = -1;
  Operation *start = nullptr; // T: the last micro-batch's first backward op
  bool earlier = false;       // another micro-batch's backward before T
  for (Operation &op : body) {
    int64_t mb = backwardOf(&op);
    if (mb < 0 || mb == last)
      continue;
    earlier |= last >= 0;
    last = mb;
    start = &op;
  }
  if (!start)
    return 0;
  for (Operation *op = start; op; op = op->getNextNode())
    if (int64_t mb = backwardOf(op); mb >= 0 && mb != last)
      return 0;
  auto readAfterT = [&](Value v) {
    return llvm::any_of(v.getUsers(), [&](Operation *u) {
      return backwardOf(u) == last && live.contains(u);
    });
  };
  auto bytes = [&](Type type) -> double {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || !t.getElementType().isIntOrFloat())
      return 0;
    int64_t width = t.getElementType().getIntOrFloatBitWidth() / 8;
    if (isa<FloatType>(t.getElementType()) && o.paramBytes > 0)
      width = std::min(width, o.paramBytes);
    return static_cast<double>(width) * static_cast<double>(t.getNumElements());
  };
  double total = 0;
  auto isParam = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && fn.getArgAttr(arg.getArgNumber(), nn::kParamAttr);
  };
  for (BlockArgument arg : fn.getArguments()) {
    if (!isParam(arg))
      continue;
    auto trainable =
        fn.getArgAttrOfType<BoolAttr>(arg.getArgNumber(), nn::kTrainableAttr);
    if (o.unshardedAccumulation && earlier &&
        (!trainable || trainable.getValue()))
      total += bytes(arg.getType()); // its whole gradient
    if (readAfterT(arg))
      total += bytes(arg.getType()); // its gathered unit
  }
  // Before fsdp-shard an activation holds the micro-batch of every
  // data-parallel rank (fsdp-shard splits its batch; tensor parallelism has
  // split it already).
  auto dataParallel = static_cast<double>(std::max<int64_t>(1, o.dataParallel));
  for (Operation *op = &body.front(); op != start; op = op->getNextNode())
    if (phases.phaseOf(op).first == last && !op->hasAttr(nn::kRecomputeAttr) &&
        !llvm::all_of(op->getOperands(), isParam))
      for (Value v : op->getResults())
        if (readAfterT(v))
          total += bytes(v.getType()) / dataParallel;
  return static_cast<int64_t>(total);
}
