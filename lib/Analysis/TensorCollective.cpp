//===- TensorCollective.cpp - the tensor-parallel collective ops' table ---===//
//
// tensorCollectiveOf (Simulator.h): which nn ops are tensor-parallel
// collectives, their kind and bytes, priced by the simulator, the plan
// report and the sweep alike.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Sharding.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// The tensor-parallel collective ops by name (TensorCollective): one entry
/// per op; S is read from the operand (all-reduce, reduce-scatter) or the
/// result (all-gather).
struct TensorCollectiveOp {
  const char *name;
  TensorCollective::Kind kind;
};
constexpr TensorCollectiveOp kTensorCollectiveOps[] = {
    {"nn.tp_all_reduce", TensorCollective::AllReduce},
    {"nn.sp_all_gather", TensorCollective::AllGather},
    {"nn.sp_reduce_scatter", TensorCollective::ReduceScatter},
};
} // namespace

std::optional<TensorCollective> mlir::fsdp::tensorCollectiveOf(Operation *op) {
  StringRef name = op->getName().getStringRef();
  for (const TensorCollectiveOp &e : kTensorCollectiveOps) {
    if (name != e.name || op->getNumOperands() < 1 || op->getNumResults() < 1)
      continue;
    TensorCollective c;
    c.kind = e.kind;
    c.bytes =
        bufferBytes(c.kind == TensorCollective::AllGather ? op->getResult(0)
                                                          : op->getOperand(0));
    c.groupSize = groupSize(op, Group::Tensor).value_or(1);
    // Sequence parallelism's collectives run once per row before `dim` (the
    // runtime's lowerSp: chunks are contiguous only within a row).
    if (auto dim = op->getAttrOfType<IntegerAttr>("dim")) {
      auto whole = cast<RankedTensorType>((c.kind == TensorCollective::AllGather
                                               ? op->getResult(0)
                                               : op->getOperand(0))
                                              .getType());
      for (int64_t d = 0; d < dim.getInt() && d < whole.getRank(); ++d)
        c.calls *= whole.getDimSize(d);
    }
    return c;
  }
  return std::nullopt;
}

int64_t TensorCollective::bytesPerRank() const {
  return kind == AllReduce
             ? ::fsdp::ringAllReduceBytesPerRank(bytes, groupSize)
             : ::fsdp::ringCollectiveBytesPerRank(bytes, groupSize);
}
