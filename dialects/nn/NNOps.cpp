//===- NNOps.cpp - nn op shape rules and verifiers ------------------------===//
//
// Each op's shape rule lives in inferResultTypes (ShapeInferenceOpInterface);
// the verifier runs the rule and compares with the declared result types, so
// that a rule and its check cannot drift apart. This file has the common ops
// (linear algebra, elementwise, reductions, loss, optimizer updates, casts and
// micro-batches); NNTransformerOps.cpp the transformer ops.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::nn;
using namespace mlir::nn::detail;

#define GET_OP_CLASSES
#include "fsdp/Dialect/NN/NNOps.cpp.inc"

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

LogicalResult mlir::nn::detail::verifyByInference(Operation *op) {
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

LogicalResult mlir::nn::detail::sameElementType(Operation *op, Value a, Value b,
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
// zeros_like, cast, micro_batch
//===----------------------------------------------------------------------===//

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
