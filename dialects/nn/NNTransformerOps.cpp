//===- NNTransformerOps.cpp - shape rules of the transformer ops ----------===//
//
// embedding, position_embedding, layer_norm, rms_norm, rope, attention (and
// their gradients), silu, split and concat: the ops fsdp-import builds GPT-2,
// Llama, Mistral and Qwen2 blocks from. The common ops are in NNOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

using namespace mlir;
using namespace mlir::nn;
using namespace mlir::nn::detail;

static LogicalResult expectShape(Operation *op, StringRef what, Value v,
                                 ArrayRef<int64_t> expected) {
  if (tensorOf(v).getShape() != expected)
    return op->emitOpError()
           << "expects " << what << " of shape " << formatShape(expected)
           << ", got " << formatShape(tensorOf(v).getShape());
  return success();
}

LogicalResult EmbeddingOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto table = tensorOf(getTable());
  if (table.getRank() != 2)
    return emitOpError()
           << "expects a table of shape [num_embeddings, dim], got "
           << formatShape(table.getShape());
  SmallVector<int64_t> shape(tensorOf(getIndices()).getShape());
  shape.push_back(table.getShape()[1]);
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}
LogicalResult EmbeddingOp::verify() { return verifyByInference(*this); }

LogicalResult EmbeddingGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto g = tensorOf(getGrad());
  SmallVector<int64_t> expected(tensorOf(getIndices()).getShape());
  if (g.getRank() != (int64_t)expected.size() + 1 ||
      g.getShape().drop_back() != ArrayRef<int64_t>(expected))
    return emitOpError() << "expects grad of shape " << formatShape(expected)
                         << " + [dim], got " << formatShape(g.getShape());
  int64_t v = static_cast<int64_t>(getNumEmbeddings());
  if (v < 1)
    return emitOpError() << "expects num_embeddings >= 1, got " << v;
  types.push_back(
      RankedTensorType::get({v, g.getShape().back()}, g.getElementType()));
  return success();
}
LogicalResult EmbeddingGradOp::verify() { return verifyByInference(*this); }

LogicalResult
PositionEmbeddingOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput()), table = tensorOf(getTable());
  if (x.getRank() != 3)
    return emitOpError() << "expects an input of shape [batch, seq, dim], got "
                         << formatShape(x.getShape());
  if (table.getRank() != 2 || table.getShape()[1] != x.getShape()[2] ||
      table.getShape()[0] < x.getShape()[1])
    return emitOpError() << "expects a table of shape [positions >= "
                         << x.getShape()[1] << ", dim=" << x.getShape()[2]
                         << "], got " << formatShape(table.getShape());
  if (failed(sameElementType(*this, getInput(), getTable(), "input", "table")))
    return failure();
  types.push_back(x);
  return success();
}
LogicalResult PositionEmbeddingOp::verify() { return verifyByInference(*this); }

LogicalResult
PositionEmbeddingGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto g = tensorOf(getGrad());
  int64_t p = static_cast<int64_t>(getNumPositions());
  if (g.getRank() != 3 || p < g.getShape()[1])
    return emitOpError()
           << "expects grad of shape [batch, seq <= num_positions=" << p
           << ", dim], got " << formatShape(g.getShape());
  types.push_back(
      RankedTensorType::get({p, g.getShape()[2]}, g.getElementType()));
  return success();
}
LogicalResult PositionEmbeddingGradOp::verify() {
  return verifyByInference(*this);
}

/// Checks a [..., C] input and [C] affine parameters of a normalisation.
static LogicalResult checkNorm(Operation *op, Value x, ValueRange params,
                               double eps) {
  auto t = tensorOf(x);
  if (t.getRank() < 1)
    return op->emitOpError() << "expects an input of rank >= 1";
  if (!(eps > 0))
    return op->emitOpError() << "expects eps > 0";
  for (Value p : params) {
    if (failed(expectShape(op, "weight and bias", p, {t.getShape().back()})))
      return failure();
    if (failed(sameElementType(op, x, p, "input", "weight")))
      return failure();
  }
  return success();
}

LogicalResult LayerNormOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkNorm(*this, getInput(), {getWeight(), getBias()},
                       getEps().convertToDouble())))
    return failure();
  types.push_back(getInput().getType());
  return success();
}
LogicalResult LayerNormOp::verify() { return verifyByInference(*this); }

LogicalResult LayerNormGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkNorm(*this, getInput(), {getWeight()},
                       getEps().convertToDouble())) ||
      failed(expectShape(*this, "grad", getGrad(),
                         tensorOf(getInput()).getShape())))
    return failure();
  types.append(
      {getInput().getType(), getWeight().getType(), getWeight().getType()});
  return success();
}
LogicalResult LayerNormGradOp::verify() { return verifyByInference(*this); }

LogicalResult RMSNormOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkNorm(*this, getInput(), {getWeight()},
                       getEps().convertToDouble())))
    return failure();
  types.push_back(getInput().getType());
  return success();
}
LogicalResult RMSNormOp::verify() { return verifyByInference(*this); }

LogicalResult RMSNormGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkNorm(*this, getInput(), {getWeight()},
                       getEps().convertToDouble())) ||
      failed(expectShape(*this, "grad", getGrad(),
                         tensorOf(getInput()).getShape())))
    return failure();
  types.append({getInput().getType(), getWeight().getType()});
  return success();
}
LogicalResult RMSNormGradOp::verify() { return verifyByInference(*this); }

LogicalResult RopeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput());
  int64_t d = getHeadDim();
  if (x.getRank() != 3)
    return emitOpError()
           << "expects an input of shape [batch, seq, heads * head_dim], got "
           << formatShape(x.getShape());
  if (d < 2 || d % 2 || x.getShape()[2] % d)
    return emitOpError()
           << "expects an even head_dim that divides the last dimension "
           << x.getShape()[2] << ", got " << d;
  if (!(getTheta().convertToDouble() > 0))
    return emitOpError() << "expects theta > 0";
  types.push_back(x);
  return success();
}
LogicalResult RopeOp::verify() { return verifyByInference(*this); }

/// Checks q [B, T, Hq·D], k and v [B, T, Hkv·D] with Hq a multiple of Hkv.
static LogicalResult checkAttention(Operation *op, Value q, Value k, Value v,
                                    int64_t hq, int64_t hkv) {
  auto qt = tensorOf(q), kt = tensorOf(k);
  if (qt.getRank() != 3)
    return op->emitOpError()
           << "expects a query of shape [batch, seq, heads * head_dim], got "
           << formatShape(qt.getShape());
  if (hq < 1 || hkv < 1 || hq % hkv)
    return op->emitOpError()
           << "expects num_heads (" << hq
           << ") to be a positive multiple of num_kv_heads (" << hkv << ")";
  if (qt.getShape()[2] % hq)
    return op->emitOpError() << "expects the query width " << qt.getShape()[2]
                             << " to divide by num_heads " << hq;
  int64_t d = qt.getShape()[2] / hq;
  SmallVector<int64_t> kvShape{qt.getShape()[0], qt.getShape()[1], hkv * d};
  if (failed(expectShape(op, "key", k, kvShape)) ||
      failed(expectShape(op, "value", v, kvShape)))
    return failure();
  if (failed(sameElementType(op, q, k, "query", "key")) ||
      failed(sameElementType(op, q, v, "query", "value")))
    return failure();
  (void)kt;
  return success();
}

LogicalResult AttentionOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(*this, getQuery(), getKey(), getValue(),
                            getNumHeads(), getNumKvHeads())))
    return failure();
  types.push_back(getQuery().getType());
  return success();
}
LogicalResult AttentionOp::verify() { return verifyByInference(*this); }

LogicalResult AttentionGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkAttention(*this, getQuery(), getKey(), getValue(),
                            getNumHeads(), getNumKvHeads())) ||
      failed(expectShape(*this, "grad", getGrad(),
                         tensorOf(getQuery()).getShape())))
    return failure();
  types.append(
      {getQuery().getType(), getKey().getType(), getValue().getType()});
  return success();
}
LogicalResult AttentionGradOp::verify() { return verifyByInference(*this); }

LogicalResult SiluOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  return success();
}
LogicalResult SiluOp::verify() { return verifyByInference(*this); }
LogicalResult SiluGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  return success();
}
LogicalResult SiluGradOp::verify() { return verifyByInference(*this); }

static LogicalResult normalizeAxis(Operation *op, int64_t &axis, int64_t rank) {
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return op->emitOpError()
           << "expects axis in [-" << rank << ", " << rank << ")";
  return success();
}

LogicalResult SplitOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput());
  int64_t axis = getAxis();
  if (failed(normalizeAxis(*this, axis, x.getRank())))
    return failure();
  int64_t total = 0;
  for (int64_t s : getSizes())
    total += s;
  if (total != x.getShape()[axis] ||
      llvm::any_of(getSizes(), [](int64_t s) { return s < 1; }))
    return emitOpError() << "expects positive sizes " << formatShape(getSizes())
                         << " that add up to dimension " << axis << " ("
                         << x.getShape()[axis] << ")";
  if (getSizes().size() != getNumResults())
    return emitOpError() << "expects one result per size (" << getSizes().size()
                         << "), got " << getNumResults();
  for (int64_t s : getSizes()) {
    SmallVector<int64_t> shape(x.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, x.getElementType()));
  }
  return success();
}
LogicalResult SplitOp::verify() { return verifyByInference(*this); }

LogicalResult ConcatOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (getInputs().empty())
    return emitOpError() << "expects at least one input";
  auto first = tensorOf(getInputs()[0]);
  int64_t axis = getAxis();
  if (failed(normalizeAxis(*this, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : getInputs()) {
    auto t = tensorOf(v);
    SmallVector<int64_t> s(t.getShape());
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOpError() << "expects inputs of one rank and element type";
    shape[axis] += s[axis];
    s[axis] = first.getShape()[axis];
    if (ArrayRef<int64_t>(s) != first.getShape())
      return emitOpError() << "expects inputs that differ only in dimension "
                           << axis;
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}
LogicalResult ConcatOp::verify() { return verifyByInference(*this); }
