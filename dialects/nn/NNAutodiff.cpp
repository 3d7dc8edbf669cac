//===- NNAutodiff.cpp - vector-Jacobian products of the nn ops ------------===//
//
// Each differentiable op builds its VJP out of nn ops, so that the backward
// pass is ordinary IR that the FSDP passes schedule like the forward.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

using namespace mlir;
using namespace mlir::nn;
using namespace mlir::nn::detail;

static SmallVector<int64_t> leadingAxes(int64_t rank) {
  SmallVector<int64_t> axes;
  for (int64_t i = 0; i + 1 < rank; ++i)
    axes.push_back(i);
  return axes;
}

/// Builds nn.matmul with an inferred result type; fails (with a diagnostic on
/// `anchor`) if the VJP's gradient would not have the shape of `like`.
static FailureOr<Value> buildMatmul(OpBuilder &b, Operation *anchor, Value lhs,
                                    Value rhs, bool ta, bool tb, Value like) {
  auto op =
      MatmulOp::create(b, anchor->getLoc(), like.getType(), lhs, rhs, ta, tb);
  SmallVector<Type> types;
  if (failed(inferResultTypes(op, types)) || types[0] != like.getType()) {
    op.erase();
    return anchor->emitOpError()
           << "cannot differentiate: the gradient of an operand of shape "
           << formatShape(tensorOf(like).getShape())
           << " is not a plain matrix product of the operands (reshape first)";
  }
  return op.getResult();
}

LogicalResult LinearOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  Value dy = resultGrads[0];
  grads.assign(getNumOperands(), Value());
  if (!dy)
    return success();
  Location loc = getLoc();
  // y = x·Wᵀ + b  ⇒  dx = dy·W, dW = dyᵀ·x, db = Σ_rows dy; with W stored
  // [in, out] (y = x·W): dx = dy·Wᵀ, dW = xᵀ·dy.
  bool t = getTransposeWeight();
  if (needed[0])
    grads[0] = MatmulOp::create(b, loc, getInput().getType(), dy, getWeight(),
                                false, t);
  if (needed[1])
    grads[1] = t ? MatmulOp::create(b, loc, getWeight().getType(), getInput(),
                                    dy, true, false)
                 : MatmulOp::create(b, loc, getWeight().getType(), dy,
                                    getInput(), true, false);
  if (getBias() && needed[2])
    grads[2] = ReduceSumOp::create(
        b, loc, getBias().getType(), dy,
        b.getDenseI64ArrayAttr(leadingAxes(tensorOf(dy).getRank())));
  return success();
}

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  Value dc = resultGrads[0];
  grads.assign(2, Value());
  if (!dc)
    return success();
  Value a = getLhs(), bm = getRhs();
  bool ta = getTransposeA(), tb = getTransposeB();
  FailureOr<Value> da = Value(), db = Value();
  // c = op(a)·op(b); the four cases of (Giles, "An extended collection of
  // matrix derivative results", 2008, Sec. 2.2.2) with transposes folded in.
  if (!ta && !tb) {
    if (needed[0])
      da = buildMatmul(b, *this, dc, bm, false, true, a);
    if (needed[1])
      db = buildMatmul(b, *this, a, dc, true, false, bm);
  } else if (!ta && tb) {
    if (needed[0])
      da = buildMatmul(b, *this, dc, bm, false, false, a);
    if (needed[1])
      db = buildMatmul(b, *this, dc, a, true, false, bm);
  } else if (ta && !tb) {
    if (needed[0])
      da = buildMatmul(b, *this, bm, dc, false, true, a);
    if (needed[1])
      db = buildMatmul(b, *this, a, dc, false, false, bm);
  } else {
    if (needed[0])
      da = buildMatmul(b, *this, bm, dc, true, true, a);
    if (needed[1])
      db = buildMatmul(b, *this, dc, a, true, true, bm);
  }
  if (failed(da) || failed(db))
    return failure();
  grads[0] = *da;
  grads[1] = *db;
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &, ArrayRef<Value> resultGrads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value());
  if (needed[0])
    grads[0] = resultGrads[0];
  if (needed[1])
    grads[1] = resultGrads[0];
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value());
  Value dy = resultGrads[0];
  if (!dy)
    return success();
  if (needed[0])
    grads[0] = MulOp::create(b, getLoc(), dy, getRhs());
  if (needed[1])
    grads[1] = MulOp::create(b, getLoc(), dy, getLhs());
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = ReluGradOp::create(b, getLoc(), getInput(), resultGrads[0]);
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = GeluGradOp::create(b, getLoc(), getInput().getType(), getInput(),
                                  resultGrads[0], getApproximateAttr());
  return success();
}

LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = BroadcastOp::create(b, getLoc(), getInput().getType(),
                                   resultGrads[0], getInput(), getAxesAttr());
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value()); // `like` only supplies a shape: no gradient.
  if (resultGrads[0] && needed[0])
    grads[0] = ReduceSumOp::create(b, getLoc(), getInput().getType(),
                                   resultGrads[0], getAxesAttr());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b,
                                       ArrayRef<Value> resultGrads,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value()); // integer labels have no gradient
  if (resultGrads[0] && needed[0])
    grads[0] =
        CrossEntropyGradOp::create(b, getLoc(), getLogits().getType(),
                                   getLogits(), getLabels(), resultGrads[0]);
  return success();
}

LogicalResult
VocabParallelCrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &grads) {
  // Labels have no gradient; the statistics none either: the loss's
  // dependence on the logits through them is the whole gradient below
  // (d lse / d logit = softmax), so nothing flows back into the stats op or
  // its all-reduce.
  grads.assign(3, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = VocabParallelCrossEntropyGradOp::create(
        b, getLoc(), getLogits().getType(), getLogits(), getLabels(),
        getStats(), resultGrads[0]);
  return success();
}

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value()); // integer indices have no gradient
  if (resultGrads[0] && needed[1])
    grads[1] = EmbeddingGradOp::create(
        b, getLoc(), getTable().getType(), getIndices(), resultGrads[0],
        tensorOf(getTable()).getShape()[0], getVocabParallel());
  return success();
}

LogicalResult PositionEmbeddingOp::buildVJP(OpBuilder &b,
                                            ArrayRef<Value> resultGrads,
                                            ArrayRef<bool> needed,
                                            SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value());
  if (!resultGrads[0])
    return success();
  if (needed[0])
    grads[0] = resultGrads[0];
  if (needed[1])
    grads[1] = PositionEmbeddingGradOp::create(
        b, getLoc(), getTable().getType(), resultGrads[0],
        tensorOf(getTable()).getShape()[0]);
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign(3, Value());
  if (!resultGrads[0])
    return success();
  auto g = LayerNormGradOp::create(b, getLoc(), getInput().getType(),
                                   getWeight().getType(), getBias().getType(),
                                   getInput(), getWeight(), resultGrads[0],
                                   getEpsAttr());
  grads[0] = needed[0] ? g.getGradInput() : Value();
  grads[1] = needed[1] ? g.getGradWeight() : Value();
  grads[2] = needed[2] ? g.getGradBias() : Value();
  return success();
}

LogicalResult RMSNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value());
  if (!resultGrads[0])
    return success();
  auto g = RMSNormGradOp::create(b, getLoc(), getInput().getType(),
                                 getWeight().getType(), getInput(), getWeight(),
                                 resultGrads[0], getEpsAttr());
  grads[0] = needed[0] ? g.getGradInput() : Value();
  grads[1] = needed[1] ? g.getGradWeight() : Value();
  return success();
}

LogicalResult RopeOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  // A rotation is orthogonal: its VJP is the inverse rotation.
  if (resultGrads[0] && needed[0]) {
    // The same op (every frequency-transform attribute, no discardable
    // ones) on the gradient, rotating the other way.
    auto vjp = cast<RopeOp>(b.clone(*getOperation()));
    vjp->setDiscardableAttrs(ArrayRef<NamedAttribute>{});
    vjp->setOperand(0, resultGrads[0]);
    vjp.setInverse(!getInverse());
    grads[0] = vjp.getResult();
  }
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  grads.assign(3, Value());
  if (!resultGrads[0])
    return success();
  // The backward reads the forward's output and statistics (kept, or
  // recomputed with it under activation checkpointing) rather than
  // recomputing the softmax's row max and sum. The statistics themselves have
  // no gradient: resultGrads[1] is never set by a consumer that differentiates.
  auto g = AttentionGradOp::create(
      b, getLoc(), getQuery().getType(), getKey().getType(),
      getValue().getType(), getQuery(), getKey(), getValue(), getResult(),
      getLogsumexp(), resultGrads[0], getNumHeadsAttr(), getNumKvHeadsAttr());
  // The plan's attention implementation (attention=unfused; the attribute
  // is fsdp::kAttentionImplAttr, fsdp/Analysis/UnfusedAttention.h) prices
  // the backward too.
  if (Attribute impl = (*this)->getAttr("nn.attention_impl"))
    g->setAttr("nn.attention_impl", impl);
  grads[0] = needed[0] ? g.getGradQuery() : Value();
  grads[1] = needed[1] ? g.getGradKey() : Value();
  grads[2] = needed[2] ? g.getGradValue() : Value();
  return success();
}

LogicalResult SiluOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = SiluGradOp::create(b, getLoc(), getInput(), resultGrads[0]);
  return success();
}

/// The same mask (same seed, step and rows), applied to the gradient.
LogicalResult DropoutOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  grads.assign(2, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = DropoutOp::create(
        b, getLoc(), resultGrads[0], getStep(), getRateAttr(), getSeedAttr(),
        getBatchSplitAttr(), getMicroBatchAttr(), getTensorSplitAttr());
  return success();
}

LogicalResult SplitOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (!needed[0])
    return success();
  SmallVector<Value> pieces;
  for (auto [r, g] : llvm::zip(getResults(), resultGrads))
    pieces.push_back(
        g ? g : ZerosLikeOp::create(b, getLoc(), r.getType(), r).getResult());
  grads[0] = ConcatOp::create(b, getLoc(), getInput().getType(), pieces,
                              getAxisAttr());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  grads.assign(getNumOperands(), Value());
  if (!resultGrads[0])
    return success();
  int64_t axis =
      static_cast<int64_t>(getAxis()); // I64Attr getters return uint64_t
  if (axis < 0)
    axis += tensorOf(getResult()).getRank();
  SmallVector<int64_t> sizes;
  SmallVector<Type> types;
  for (Value v : getInputs()) {
    sizes.push_back(tensorOf(v).getShape()[axis]);
    types.push_back(v.getType());
  }
  auto split =
      SplitOp::create(b, getLoc(), types, resultGrads[0],
                      b.getI64IntegerAttr(axis), b.getDenseI64ArrayAttr(sizes));
  for (unsigned i = 0; i < getNumOperands(); ++i)
    grads[i] = needed[i] ? split.getResult(i) : Value();
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                               ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] =
        CastOp::create(b, getLoc(), getInput().getType(), resultGrads[0]);
  return success();
}

// Megatron's conjugate pair (Shoeybi et al. 2019, Sec. 3): f's VJP is g and
// g's is f.
LogicalResult TpCopyOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = TpAllReduceOp::create(b, getLoc(), resultGrads[0]);
  return success();
}

LogicalResult TpAllReduceOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = TpCopyOp::create(b, getLoc(), resultGrads[0]);
  return success();
}

// Sequence parallelism's conjugate pairs (Korthikanti et al. 2022, Sec.
// 4.2.2): all-gather <-> reduce-scatter before / after a tensor-parallel
// region, and the entry's local split <-> the exit's all-gather into a
// replicated consumer (whose gradient is whole on every rank).
LogicalResult SpAllGatherOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (!resultGrads[0] || !needed[0])
    return success();
  if (getReplicatedGrad())
    grads[0] =
        SpSplitOp::create(b, getLoc(), resultGrads[0], getDim(), getTp());
  else
    grads[0] = SpReduceScatterOp::create(b, getLoc(), resultGrads[0], getDim(),
                                         getTp());
  return success();
}

LogicalResult SpReduceScatterOp::buildVJP(OpBuilder &b,
                                          ArrayRef<Value> resultGrads,
                                          ArrayRef<bool> needed,
                                          SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = SpAllGatherOp::create(b, getLoc(), resultGrads[0], getDim(),
                                     getTp(), /*replicated_grad=*/false);
  return success();
}

LogicalResult SpSplitOp::buildVJP(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  grads.assign(1, Value());
  if (resultGrads[0] && needed[0])
    grads[0] = SpAllGatherOp::create(b, getLoc(), resultGrads[0], getDim(),
                                     getTp(), /*replicated_grad=*/true);
  return success();
}
