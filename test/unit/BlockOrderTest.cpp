//===- BlockOrderTest.cpp - BlockOrder agrees with MLIR's op order --------===//
//
// lib/Transforms/OpOrder.h's BlockOrder keeps its own positions across moves
// so that fsdp-collectives and fsdp-schedule compare ops without MLIR
// renumbering the block. Its answers must be Operation::isBeforeInBlock's:
// after every move and insertion of a random sequence (many into one gap, as
// those passes do), every pair compared is checked against MLIR's order.
//
//===----------------------------------------------------------------------===//
#include "OpOrder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

using namespace mlir;

namespace {
/// A function of `n` unregistered ops without operands (any order is valid).
OwningOpRef<ModuleOp> makeBlock(MLIRContext &ctx, int n) {
  std::string ir = "func.func @f() {\n";
  for (int i = 0; i < n; ++i)
    ir += "  \"test.op\"() {i = " + std::to_string(i) + " : i64} : () -> ()\n";
  ir += "  return\n}\n";
  return parseSourceString<ModuleOp>(ir, &ctx);
}

void expectSameOrder(fsdp::BlockOrder &order, Block &block, std::mt19937 &rng) {
  std::vector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  // Every neighbouring pair both ways, and random pairs.
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    ASSERT_TRUE(order.isBefore(ops[i], ops[i + 1])) << "at " << i;
    ASSERT_FALSE(order.isBefore(ops[i + 1], ops[i])) << "at " << i;
  }
  std::uniform_int_distribution<size_t> pick(0, ops.size() - 1);
  for (int k = 0; k < 200; ++k) {
    Operation *a = ops[pick(rng)], *b = ops[pick(rng)];
    ASSERT_EQ(order.isBefore(a, b), a->isBeforeInBlock(b));
  }
}
} // namespace

TEST(BlockOrder, AgreesWithIsBeforeInBlockAcrossMoves) {
  MLIRContext ctx;
  ctx.allowUnregisteredDialects();
  ctx.loadDialect<func::FuncDialect>();
  OwningOpRef<ModuleOp> m = makeBlock(ctx, 300);
  ASSERT_TRUE(m);
  Block &block = (*m->getOps<func::FuncOp>().begin()).getBody().front();
  fsdp::BlockOrder order(block);
  std::mt19937 rng(7);
  std::vector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  std::uniform_int_distribution<size_t> pick(0, ops.size() - 1);
  Operation *ret = block.getTerminator();
  for (int round = 0; round < 40; ++round) {
    // A run appended before one anchor (the terminator, then one op), and
    // ops moved right after one anchor: the patterns that use up a gap.
    Operation *anchor = round % 2 ? ops[pick(rng)] : ret;
    for (int k = 0; k < 50; ++k) {
      Operation *op = ops[pick(rng)];
      if (op != anchor)
        order.moveBefore(op, anchor);
    }
    Operation *after = ops[pick(rng)];
    for (int k = 0; k < 50; ++k) {
      Operation *op = ops[pick(rng)];
      if (op != after)
        order.moveAfter(op, after);
    }
    // An op created in the block and placed.
    OpBuilder b(ops[pick(rng)]);
    OperationState st(b.getUnknownLoc(), "test.new");
    Operation *created = b.create(st);
    order.place(created);
    ops.push_back(created);
    pick = std::uniform_int_distribution<size_t>(0, ops.size() - 1);
    expectSameOrder(order, block, rng);
  }
}
