//===- OpOrder.h - moves within a block that keep its op order ------------===//
//
// Operation::moveBefore / moveAfter splice the op within its block, and MLIR
// invalidates the whole block's op order on every splice
// (ilist_traits<Operation>::transferNodesFromList), so the next
// isBeforeInBlock renumbers the block: a scheduling loop that moves an op and
// then compares positions costs O(ops) per move, O(ops^2) per pass (72% of
// a Llama-3.1-8B plan at 8 micro-batches, perf). Removing the op and
// inserting it keeps the block's order valid: only the moved op is
// renumbered, between its neighbours (Operation::updateOrderIfNecessary).
// The resulting IR is the same.
//
// That is not enough when a loop moves several ops into one gap and then
// compares them: MLIR numbers a block's ops 5 apart (Operation::kOrderStride)
// and renumbers the whole block once a gap is used up or a neighbour of the
// compared op was moved too, so three ops moved before one anchor and then
// compared renumber the block each time (fsdp-collectives' reduction chains
// and fsdp-schedule's reduction waits: 75% of a Llama-3.1-405B plan at four
// micro-batches, perf). BlockOrder keeps its own positions, 2^32 apart, for
// such loops: comparisons are O(1) and a renumbering is needed only after
// ~32 ops land in one gap.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TRANSFORMS_OPORDER_H
#define FSDP_TRANSFORMS_OPORDER_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <cstdint>

#include <iterator>

namespace mlir::fsdp {

/// As op->moveBefore(anchor), for an op and anchor of the same block.
inline void moveOpBefore(Operation *op, Operation *anchor) {
  if (op == anchor)
    return;
  Block *block = anchor->getBlock();
  op->remove();
  block->getOperations().insert(anchor->getIterator(), op);
}

/// As op->moveAfter(anchor), for an op and anchor of the same block.
inline void moveOpAfter(Operation *op, Operation *anchor) {
  if (op == anchor)
    return;
  Block *block = anchor->getBlock();
  op->remove();
  block->getOperations().insert(std::next(anchor->getIterator()), op);
}

/// The positions of a block's ops for a loop that moves ops and compares
/// positions (see above). Every move in the block while it is in use must
/// go through it, and every op created in the block be `place`d, else
/// isBefore can answer wrongly; an op it has not seen renumbers the block.
class BlockOrder {
public:
  explicit BlockOrder(Block &block) : block(block) { renumber(); }

  /// As a->isBeforeInBlock(b), for two ops of the block.
  bool isBefore(Operation *a, Operation *b) { return pos(a) < pos(b); }

  /// As moveOpBefore / moveOpAfter, keeping the positions.
  void moveBefore(Operation *op, Operation *anchor) {
    if (op == anchor)
      return;
    moveOpBefore(op, anchor);
    place(op);
  }
  void moveAfter(Operation *op, Operation *anchor) {
    if (op == anchor)
      return;
    moveOpAfter(op, anchor);
    place(op);
  }

  /// Gives `op` (just inserted or moved in the block) a position between
  /// its neighbours': half the gap, at most 2^20 past the previous one (so
  /// that a run of ops appended before one anchor leaves room for more);
  /// the block is renumbered when no position is free.
  void place(Operation *op) {
    Operation *prev = op->getPrevNode(), *next = op->getNextNode();
    positions.erase(op);
    int64_t lo = prev ? pos(prev) : 0;
    int64_t hi = next ? pos(next) : lo + 2 * kStride;
    if (hi - lo < 2) {
      renumber();
      return;
    }
    positions[op] = lo + std::min<int64_t>((hi - lo) / 2, int64_t(1) << 20);
  }

private:
  static constexpr int64_t kStride = int64_t(1) << 32;

  void renumber() {
    positions.clear();
    int64_t p = 0;
    for (Operation &op : block)
      positions[&op] = p += kStride;
  }
  int64_t pos(Operation *op) {
    auto it = positions.find(op);
    if (it != positions.end())
      return it->second;
    renumber();
    return positions.lookup(op);
  }

  Block &block;
  llvm::DenseMap<Operation *, int64_t> positions;
};

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_OPORDER_H
