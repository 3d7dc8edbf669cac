//===- NNOps.cpp - nn op shape rules and verifiers ------------------------===//
//
// Each op's shape rule lives in inferResultTypes (ShapeInferenceOpInterface);
// the verifier runs the rule and compares with the declared result types, so
// that a rule and its check cannot drift apart.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::nn;

#define GET_OP_CLASSES
#include "fsdp/Dialect/NN/NNOps.cpp.inc"

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Every nn tensor must be statically shaped and of a size the planner can
/// hold (checkedTensorBytes): the planner sizes every buffer.
static LogicalResult requireStatic(Operation *op) {
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (!tensorOf(v).hasStaticShape())
      return op->emitOpError()
             << "expects statically shaped operands, operand #" << i
             << " has type " << v.getType();
  for (auto [i, t] : llvm::enumerate(op->getResultTypes()))
    if (cast<RankedTensorType>(t).hasStaticShape() && !checkedTensorBytes(t))
      return op->emitOpError() << "result #" << i << " of type " << t
                               << ": the tensor's size exceeds 2^59 bytes";
  return success();
}

/// Runs the op's shape rule and compares with its declared result types.
static LogicalResult verifyByInference(Operation *op) {
  if (failed(requireStatic(op)))
    return failure();
  SmallVector<Type> types;
  if (failed(cast<ShapeInferenceOpInterface>(op).inferResultTypes(types)))
    return failure();
  for (auto [i, expected, actual] :
       llvm::enumerate(types, op->getResultTypes())) {
    if (expected == actual)
      continue;
    auto e = cast<RankedTensorType>(expected),
         a = cast<RankedTensorType>(actual);
    if (e.getElementType() != a.getElementType())
      return op->emitOpError()
             << "expects result #" << i << " of element type "
             << e.getElementType() << ", got " << a.getElementType();
    return op->emitOpError() << "expects result #" << i << " of shape "
                             << formatShape(e.getShape()) << ", got "
                             << formatShape(a.getShape());
  }
  return success();
}

LogicalResult mlir::nn::reinferResultTypes(Operation *op) {
  auto iface = dyn_cast<ShapeInferenceOpInterface>(op);
  if (!iface)
    return success();
  SmallVector<Type> types;
  if (failed(iface.inferResultTypes(types)))
    return failure();
  for (auto [r, t] : llvm::zip(op->getResults(), types))
    r.setType(t);
  return success();
}

/// Matrix view [rows, cols] of a tensor: rows = product of all but the last
/// dim.
static std::pair<int64_t, int64_t> matrixView(RankedTensorType t) {
  if (t.getRank() == 0)
    return {1, 1};
  int64_t rows = 1;
  for (int64_t d : t.getShape().drop_back())
    rows *= d;
  return {rows, t.getShape().back()};
}

static LogicalResult sameElementType(Operation *op, Value a, Value b,
                                     StringRef an, StringRef bn) {
  if (tensorOf(a).getElementType() != tensorOf(b).getElementType())
    return op->emitOpError()
           << "expects " << an << " and " << bn
           << " of the same element type, got " << tensorOf(a).getElementType()
           << " and " << tensorOf(b).getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// linear, matmul
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput()), w = tensorOf(getWeight());
  if (x.getRank() < 1)
    return emitOpError() << "expects an input of rank >= 1, got a scalar";
  int64_t in = x.getShape().back();
  bool t = getTransposeWeight();
  int64_t outHint = tensorOf(getResult()).getRank()
                        ? tensorOf(getResult()).getShape().back()
                        : w.getShape().front();
  if (w.getRank() != 2 || w.getShape()[t ? 0 : 1] != in) {
    if (t)
      return emitOpError() << "expects weight of shape [in=" << in
                           << ", out=" << outHint
                           << "] (transpose_weight), got "
                           << formatShape(w.getShape());
    return emitOpError() << "expects weight of shape [out=" << outHint
                         << ", in=" << in << "], got "
                         << formatShape(w.getShape());
  }
  if (failed(
          sameElementType(*this, getInput(), getWeight(), "input", "weight")))
    return failure();
  int64_t out = w.getShape()[t ? 1 : 0];
  if (Value b = getBias()) {
    if (tensorOf(b).getShape() != ArrayRef<int64_t>{out})
      return emitOpError() << "expects bias of shape [out=" << out << "], got "
                           << formatShape(tensorOf(b).getShape());
    if (failed(sameElementType(*this, getInput(), b, "input", "bias")))
      return failure();
  }
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(out);
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}
LogicalResult LinearOp::verify() { return verifyByInference(*this); }

LogicalResult MatmulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto a = tensorOf(getLhs()), b = tensorOf(getRhs());
  if (a.getRank() < 1 || b.getRank() < 1)
    return emitOpError() << "expects operands of rank >= 1";
  if (failed(sameElementType(*this, getLhs(), getRhs(), "lhs", "rhs")))
    return failure();
  auto [ar, ac] = matrixView(a);
  auto [br, bc] = matrixView(b);
  if (getTransposeA())
    std::swap(ar, ac);
  if (getTransposeB())
    std::swap(br, bc);
  if (ac != br)
    return emitOpError()
           << "expects contracting dimensions to match, got op(lhs) of shape ["
           << ar << ", " << ac << "] and op(rhs) of shape [" << br << ", " << bc
           << "]";
  SmallVector<int64_t> shape;
  if (getTransposeA())
    shape = {ar, bc};
  else {
    shape.assign(a.getShape().drop_back().begin(),
                 a.getShape().drop_back().end());
    shape.push_back(bc);
  }
  types.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}
LogicalResult MatmulOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// elementwise
//===----------------------------------------------------------------------===//

#define NN_SAME_AS_OPERAND(OP, OPERAND)                                        \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    types.push_back(OPERAND.getType());                                        \
    return success();                                                          \
  }
NN_SAME_AS_OPERAND(AddOp, getLhs())
NN_SAME_AS_OPERAND(MulOp, getLhs())
NN_SAME_AS_OPERAND(ReluOp, getInput())
NN_SAME_AS_OPERAND(GeluOp, getInput())
NN_SAME_AS_OPERAND(ReluGradOp, getInput())
NN_SAME_AS_OPERAND(GeluGradOp, getInput())
#undef NN_SAME_AS_OPERAND

LogicalResult AddOp::verify() { return verifyByInference(*this); }
LogicalResult MulOp::verify() { return verifyByInference(*this); }
LogicalResult ReluOp::verify() { return verifyByInference(*this); }
LogicalResult ReluGradOp::verify() { return verifyByInference(*this); }

static LogicalResult verifyApproximate(Operation *op, StringRef approximate) {
  if (approximate != "none" && approximate != "tanh")
    return op->emitOpError()
           << "expects approximate = \"none\" or \"tanh\", got \""
           << approximate << "\"";
  return success();
}
LogicalResult GeluOp::verify() {
  if (failed(verifyApproximate(*this, getApproximate())))
    return failure();
  return verifyByInference(*this);
}
LogicalResult GeluGradOp::verify() {
  if (failed(verifyApproximate(*this, getApproximate())))
    return failure();
  return verifyByInference(*this);
}

//===----------------------------------------------------------------------===//
// reduce_sum, broadcast
//===----------------------------------------------------------------------===//

/// Checks that `axes` are strictly increasing and within [0, rank).
static LogicalResult verifyAxes(Operation *op, ArrayRef<int64_t> axes,
                                int64_t rank) {
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank)
      return op->emitOpError()
             << "expects axes in [0, " << rank << "), got " << a;
    if (i > 0 && axes[i - 1] >= a)
      return op->emitOpError()
             << "expects strictly increasing axes, got " << formatShape(axes);
  }
  return success();
}

static SmallVector<int64_t> dropAxes(ArrayRef<int64_t> shape,
                                     ArrayRef<int64_t> axes) {
  SmallVector<int64_t> out;
  for (auto [i, d] : llvm::enumerate(shape))
    if (!llvm::is_contained(axes, (int64_t)i))
      out.push_back(d);
  return out;
}

LogicalResult ReduceSumOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput());
  if (failed(verifyAxes(*this, getAxes(), x.getRank())))
    return failure();
  types.push_back(RankedTensorType::get(dropAxes(x.getShape(), getAxes()),
                                        x.getElementType()));
  return success();
}
LogicalResult ReduceSumOp::verify() { return verifyByInference(*this); }

LogicalResult BroadcastOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput()), like = tensorOf(getLike());
  if (failed(verifyAxes(*this, getAxes(), like.getRank())))
    return failure();
  SmallVector<int64_t> expected = dropAxes(like.getShape(), getAxes());
  if (ArrayRef<int64_t>(expected) != x.getShape())
    return emitOpError() << "expects input of shape " << formatShape(expected)
                         << " (the shape of 'like' without axes "
                         << formatShape(getAxes()) << "), got "
                         << formatShape(x.getShape());
  types.push_back(RankedTensorType::get(like.getShape(), x.getElementType()));
  return success();
}
LogicalResult BroadcastOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// cross-entropy
//===----------------------------------------------------------------------===//

static LogicalResult checkLogitsLabels(Operation *op, Value logits,
                                       Value labels) {
  auto l = tensorOf(logits), y = tensorOf(labels);
  if (l.getRank() < 1)
    return op->emitOpError()
           << "expects logits of rank >= 1 ([..., classes]), got a scalar";
  if (y.getShape() != l.getShape().drop_back())
    return op->emitOpError() << "expects labels of shape "
                             << formatShape(l.getShape().drop_back())
                             << " (logits without the class dimension), got "
                             << formatShape(y.getShape());
  return success();
}

LogicalResult CrossEntropyOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkLogitsLabels(*this, getLogits(), getLabels())))
    return failure();
  types.push_back(
      RankedTensorType::get({}, tensorOf(getLogits()).getElementType()));
  return success();
}
LogicalResult CrossEntropyOp::verify() { return verifyByInference(*this); }

LogicalResult
CrossEntropyGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (failed(checkLogitsLabels(*this, getLogits(), getLabels())))
    return failure();
  auto g = tensorOf(getGrad());
  if (g.getRank() != 0 ||
      g.getElementType() != tensorOf(getLogits()).getElementType())
    return emitOpError()
           << "expects a scalar gradient of the logits' element type, got "
           << g;
  types.push_back(getLogits().getType());
  return success();
}
LogicalResult CrossEntropyGradOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// optimizer updates
//===----------------------------------------------------------------------===//

LogicalResult SgdUpdateOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getParam().getType());
  return success();
}
LogicalResult SgdUpdateOp::verify() {
  if (!(getLr().convertToDouble() > 0))
    return emitOpError() << "expects lr > 0";
  return verifyByInference(*this);
}

LogicalResult AdamWUpdateOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.append(3, getParam().getType());
  return success();
}
LogicalResult AdamWUpdateOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(getLr().convertToDouble() > 0))
    return emitOpError() << "expects lr > 0";
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return emitOpError() << "expects betas in [0, 1), got (" << b1 << ", " << b2
                         << ")";
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "expects eps > 0";
  return verifyByInference(*this);
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

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

LogicalResult ZerosLikeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getLike().getType());
  return success();
}
LogicalResult ZerosLikeOp::verify() { return verifyByInference(*this); }

LogicalResult CastOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  // The target element type is the op's own choice: keep it, follow the shape.
  types.push_back(RankedTensorType::get(
      tensorOf(getInput()).getShape(), tensorOf(getResult()).getElementType()));
  return success();
}
LogicalResult CastOp::verify() { return verifyByInference(*this); }

LogicalResult MicroBatchOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto x = tensorOf(getInput());
  int64_t count = static_cast<int64_t>(getCount()),
          index = static_cast<int64_t>(getIndex());
  if (x.getRank() < 1)
    return emitOpError() << "expects an input with a batch dimension";
  if (count < 1 || index < 0 || index >= count)
    return emitOpError() << "expects 0 <= index < count, got index " << index
                         << " and count " << count;
  if (x.getShape()[0] % count)
    return emitOpError() << "expects the batch " << x.getShape()[0]
                         << " to divide into " << count << " micro-batches";
  SmallVector<int64_t> shape(x.getShape());
  shape[0] /= count;
  types.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}
LogicalResult MicroBatchOp::verify() { return verifyByInference(*this); }
