//===- NNOps.cpp - nn op shape rules and verifiers ------------------------===//
//
// Each op's shape rule is its inferReturnTypes (InferTypeOpInterface); the
// verifier runs the rule and compares with the declared result types, so that
// a rule and its check cannot drift apart. This file has the common ops
// (linear algebra, elementwise, reductions, loss, optimizer updates, zeros,
// casts and micro-batches); NNTransformerOps.cpp the transformer ops.
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

LogicalResult mlir::nn::detail::requireStatic(Operation *op) {
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

LogicalResult mlir::nn::detail::inferResultTypes(Operation *op,
                                                 SmallVectorImpl<Type> &types) {
  return cast<InferTypeOpInterface>(op).inferReturnTypes(
      op->getContext(), op->getLoc(), op->getOperands(),
      op->getRawDictionaryAttrs(), op->getPropertiesStorage(), op->getRegions(),
      types);
}

LogicalResult mlir::nn::detail::verifyResultTypes(Operation *op,
                                                  TypeRange inferred) {
  if (inferred.size() != op->getNumResults())
    return op->emitOpError() << "expects " << inferred.size()
                             << " results, got " << op->getNumResults();
  for (auto [i, expected, actual] :
       llvm::enumerate(inferred, op->getResultTypes())) {
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

LogicalResult mlir::nn::detail::verifyByInference(Operation *op) {
  SmallVector<Type> types;
  if (failed(requireStatic(op)) || failed(inferResultTypes(op, types)))
    return failure();
  return verifyResultTypes(op, types);
}

bool mlir::nn::rowsChanged(Operation *op) {
  if (op->getNumOperands() == 0 || op->getNumResults() == 0)
    return false;
  auto in = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return in && out && in.getRank() > 0 && out.getRank() > 0 &&
         in.getShape()[0] != out.getShape()[0];
}

LogicalResult mlir::nn::reinferResultTypes(Operation *op) {
  SmallVector<Type> types;
  if (auto c = dyn_cast<CastOp>(op))
    types.push_back(c.inferResultType());
  else if (!isa<InferTypeOpInterface>(op))
    return success();
  else if (failed(inferResultTypes(op, types)))
    return failure();
  for (auto [r, t] : llvm::zip_equal(op->getResults(), types))
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

LogicalResult mlir::nn::detail::sameElementType(EmitErrorFn emitError, Value a,
                                                Value b, StringRef an,
                                                StringRef bn) {
  if (tensorOf(a).getElementType() != tensorOf(b).getElementType())
    return emitError() << "expects " << an << " and " << bn
                       << " of the same element type, got "
                       << tensorOf(a).getElementType() << " and "
                       << tensorOf(b).getElementType();
  return success();
}

//===----------------------------------------------------------------------===//
// linear, matmul
//===----------------------------------------------------------------------===//

/// Checks a linear's input [..., in] and weight [out, in] ([in, out] with
/// transpose_weight). The message names the weight shape it expected, with
/// `out` from `outHint` (the declared result's, when there is one).
static LogicalResult checkLinearWeight(EmitErrorFn emitError,
                                       RankedTensorType x, RankedTensorType w,
                                       bool t, int64_t outHint) {
  if (x.getRank() < 1)
    return emitError() << "expects an input of rank >= 1, got a scalar";
  int64_t in = x.getShape().back();
  if (w.getRank() == 2 && w.getShape()[t ? 0 : 1] == in)
    return success();
  if (t)
    return emitError() << "expects weight of shape [in=" << in
                       << ", out=" << outHint << "] (transpose_weight), got "
                       << formatShape(w.getShape());
  return emitError() << "expects weight of shape [out=" << outHint
                     << ", in=" << in << "], got " << formatShape(w.getShape());
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput()), w = tensorOf(adaptor.getWeight());
  bool t = adaptor.getTransposeWeight();
  if (failed(checkLinearWeight(emitError, x, w, t,
                               w.getRank() ? w.getShape().front() : 0)) ||
      failed(sameElementType(emitError, adaptor.getInput(), adaptor.getWeight(),
                             "input", "weight")))
    return failure();
  int64_t out = w.getShape()[t ? 1 : 0];
  if (Value b = adaptor.getBias()) {
    if (tensorOf(b).getShape() != ArrayRef<int64_t>{out})
      return emitError() << "expects bias of shape [out=" << out << "], got "
                         << formatShape(tensorOf(b).getShape());
    if (failed(
            sameElementType(emitError, adaptor.getInput(), b, "input", "bias")))
      return failure();
  }
  SmallVector<int64_t> shape(x.getShape().drop_back());
  shape.push_back(out);
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}
LogicalResult LinearOp::verify() {
  // The weight check first, to name the `out` the declared result has.
  auto x = tensorOf(getInput()), w = tensorOf(getWeight()),
       y = tensorOf(getResult());
  int64_t outHint = y.getRank()   ? y.getShape().back()
                    : w.getRank() ? w.getShape().front()
                                  : 0;
  if (failed(requireStatic(*this)) ||
      failed(checkLinearWeight(opErrorAt(getLoc(), getOperationName()), x, w,
                               getTransposeWeight(), outHint)))
    return failure();
  return verifyByInference(*this);
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto a = tensorOf(adaptor.getLhs()), b = tensorOf(adaptor.getRhs());
  if (a.getRank() < 1 || b.getRank() < 1)
    return emitError() << "expects operands of rank >= 1";
  if (failed(sameElementType(emitError, adaptor.getLhs(), adaptor.getRhs(),
                             "lhs", "rhs")))
    return failure();
  auto [ar, ac] = matrixView(a);
  auto [br, bc] = matrixView(b);
  if (adaptor.getTransposeA())
    std::swap(ar, ac);
  if (adaptor.getTransposeB())
    std::swap(br, bc);
  if (ac != br)
    return emitError()
           << "expects contracting dimensions to match, got op(lhs) of shape ["
           << ar << ", " << ac << "] and op(rhs) of shape [" << br << ", " << bc
           << "]";
  SmallVector<int64_t> shape;
  if (adaptor.getTransposeA())
    shape = {ar, bc};
  else {
    shape.assign(a.getShape().drop_back().begin(),
                 a.getShape().drop_back().end());
    shape.push_back(bc);
  }
  inferred.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}
LogicalResult MatmulOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// elementwise (shape rules generated from SameOperandsAndResultType)
//===----------------------------------------------------------------------===//

LogicalResult AddOp::verify() { return verifyByInference(*this); }
LogicalResult MulOp::verify() { return verifyByInference(*this); }
LogicalResult ReluOp::verify() { return verifyByInference(*this); }
LogicalResult ReluGradOp::verify() { return verifyByInference(*this); }
LogicalResult GeluOp::verify() { return verifyByInference(*this); }
LogicalResult GeluGradOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// reduce_sum, broadcast
//===----------------------------------------------------------------------===//

/// Checks that `axes` are strictly increasing and within [0, rank).
static LogicalResult verifyAxes(EmitErrorFn emitError, ArrayRef<int64_t> axes,
                                int64_t rank) {
  for (auto [i, a] : llvm::enumerate(axes)) {
    if (a < 0 || a >= rank)
      return emitError() << "expects axes in [0, " << rank << "), got " << a;
    if (i > 0 && axes[i - 1] >= a)
      return emitError() << "expects strictly increasing axes, got "
                         << formatShape(axes);
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

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput());
  if (failed(verifyAxes(emitError, adaptor.getAxes(), x.getRank())))
    return failure();
  inferred.push_back(RankedTensorType::get(
      dropAxes(x.getShape(), adaptor.getAxes()), x.getElementType()));
  return success();
}
LogicalResult ReduceSumOp::verify() { return verifyByInference(*this); }

LogicalResult BroadcastOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput()), like = tensorOf(adaptor.getLike());
  if (failed(verifyAxes(emitError, adaptor.getAxes(), like.getRank())))
    return failure();
  SmallVector<int64_t> expected = dropAxes(like.getShape(), adaptor.getAxes());
  if (ArrayRef<int64_t>(expected) != x.getShape())
    return emitError() << "expects input of shape " << formatShape(expected)
                       << " (the shape of 'like' without axes "
                       << formatShape(adaptor.getAxes()) << "), got "
                       << formatShape(x.getShape());
  inferred.push_back(
      RankedTensorType::get(like.getShape(), x.getElementType()));
  return success();
}
LogicalResult BroadcastOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// cross-entropy
//===----------------------------------------------------------------------===//

static LogicalResult checkLogitsLabels(EmitErrorFn emitError, Value logits,
                                       Value labels) {
  auto l = tensorOf(logits), y = tensorOf(labels);
  if (l.getRank() < 1)
    return emitError()
           << "expects logits of rank >= 1 ([..., classes]), got a scalar";
  if (y.getShape() != l.getShape().drop_back())
    return emitError() << "expects labels of shape "
                       << formatShape(l.getShape().drop_back())
                       << " (logits without the class dimension), got "
                       << formatShape(y.getShape());
  return success();
}

Type mlir::nn::lossElementType(Type logits) {
  if (logits.isBF16() || logits.isF16())
    return Float32Type::get(logits.getContext());
  return logits;
}

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkLogitsLabels(emitError, adaptor.getLogits(),
                               adaptor.getLabels())))
    return failure();
  inferred.push_back(RankedTensorType::get(
      {}, lossElementType(tensorOf(adaptor.getLogits()).getElementType())));
  return success();
}
LogicalResult CrossEntropyOp::verify() { return verifyByInference(*this); }

LogicalResult CrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkLogitsLabels(emitError, adaptor.getLogits(),
                               adaptor.getLabels())))
    return failure();
  auto g = tensorOf(adaptor.getGrad());
  Type want = lossElementType(tensorOf(adaptor.getLogits()).getElementType());
  if (g.getRank() != 0 || g.getElementType() != want)
    return emitError() << "expects a scalar gradient of the loss's element "
                          "type (the logits', f32 for bf16/f16 logits) "
                       << want << ", got " << g;
  inferred.push_back(adaptor.getLogits().getType());
  return success();
}
LogicalResult CrossEntropyGradOp::verify() { return verifyByInference(*this); }

/// The shape [tp, ...labels, 3] of a vocab-parallel cross-entropy's
/// statistics (nn.vocab_parallel_ce_stats).
static RankedTensorType vocabStatsType(Value logits, Value labels, int64_t tp) {
  SmallVector<int64_t> shape{tp};
  llvm::append_range(shape, tensorOf(labels).getShape());
  shape.push_back(3);
  return RankedTensorType::get(
      shape, lossElementType(tensorOf(logits).getElementType()));
}

/// `logits` and `labels` as nn.cross_entropy's (checkLogitsLabels), and
/// `stats` [tp, ...labels, 3] of the loss element type for some tp >= 2.
static LogicalResult checkVocabStats(EmitErrorFn emitError, Value logits,
                                     Value labels, Value stats) {
  if (failed(checkLogitsLabels(emitError, logits, labels)))
    return failure();
  auto s = tensorOf(stats);
  int64_t tp = s.getRank() > 0 ? s.getShape()[0] : 0;
  auto want = vocabStatsType(logits, labels, tp < 2 ? 2 : tp);
  if (s != want)
    return emitError() << "expects statistics of shape [tp >= 2, "
                       << formatShape(tensorOf(labels).getShape()) << "..., 3] "
                       << "and element type " << want.getElementType()
                       << ", got " << s;
  return success();
}

LogicalResult VocabParallelCeStatsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkLogitsLabels(emitError, adaptor.getLogits(),
                               adaptor.getLabels())))
    return failure();
  inferred.push_back(vocabStatsType(adaptor.getLogits(), adaptor.getLabels(),
                                    static_cast<int64_t>(adaptor.getTp())));
  return success();
}
LogicalResult VocabParallelCeStatsOp::verify() {
  return verifyByInference(*this);
}

LogicalResult VocabParallelCrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkVocabStats(emitError, adaptor.getLogits(),
                             adaptor.getLabels(), adaptor.getStats())))
    return failure();
  inferred.push_back(RankedTensorType::get(
      {}, lossElementType(tensorOf(adaptor.getLogits()).getElementType())));
  return success();
}
LogicalResult VocabParallelCrossEntropyOp::verify() {
  return verifyByInference(*this);
}

LogicalResult VocabParallelCrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkVocabStats(emitError, adaptor.getLogits(),
                             adaptor.getLabels(), adaptor.getStats())))
    return failure();
  auto g = tensorOf(adaptor.getGrad());
  Type want = lossElementType(tensorOf(adaptor.getLogits()).getElementType());
  if (g.getRank() != 0 || g.getElementType() != want)
    return emitError() << "expects a scalar gradient of the loss's element "
                          "type (the logits', f32 for bf16/f16 logits) "
                       << want << ", got " << g;
  inferred.push_back(adaptor.getLogits().getType());
  return success();
}
LogicalResult VocabParallelCrossEntropyGradOp::verify() {
  return verifyByInference(*this);
}

//===----------------------------------------------------------------------===//
// optimizer updates (shape rules generated from AllTypesMatch)
//===----------------------------------------------------------------------===//

/// `no_decay`: ascending, non-overlapping [begin, end) pairs of elements.
static LogicalResult verifyNoDecay(Operation *op,
                                   std::optional<ArrayRef<int64_t>> ranges) {
  if (!ranges)
    return success();
  ArrayRef<int64_t> r = *ranges;
  if (r.size() % 2 != 0)
    return op->emitOpError() << "expects no_decay as [begin, end) pairs, got "
                             << r.size() << " values";
  int64_t last = 0;
  for (size_t i = 0; i < r.size(); i += 2) {
    if (r[i] < last || r[i + 1] <= r[i])
      return op->emitOpError()
             << "expects no_decay ranges ascending, non-empty and disjoint, "
                "got ["
             << r[i] << ", " << r[i + 1] << ")";
    last = r[i + 1];
  }
  return success();
}

LogicalResult SgdUpdateOp::verify() {
  if (!(getLr().convertToDouble() > 0))
    return emitOpError() << "expects lr > 0";
  if (failed(verifyNoDecay(*this, getNoDecay())))
    return failure();
  return verifyByInference(*this);
}

LogicalResult AdamWUpdateOp::verify() {
  double b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  if (!(getLr().convertToDouble() > 0))
    return emitOpError() << "expects lr > 0";
  if (!(b1 >= 0) || !(b1 < 1) || !(b2 >= 0) || !(b2 < 1))
    return emitOpError() << "expects betas in [0, 1), got (" << b1 << ", " << b2
                         << ")";
  if (!(getEps().convertToDouble() > 0))
    return emitOpError() << "expects eps > 0";
  if (failed(verifyNoDecay(*this, getNoDecay())))
    return failure();
  return verifyByInference(*this);
}

//===----------------------------------------------------------------------===//
// learning-rate schedule, gradient norm and clipping
//===----------------------------------------------------------------------===//

LogicalResult LrScheduleOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location>, Adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({}, Float64Type::get(context)));
  return success();
}
LogicalResult LrScheduleOp::verify() {
  StringRef k = getKind();
  // The schedule format's kinds (fsdp/schedule/Format.h).
  if (llvm::none_of(::fsdp::schedule::kLrSchedules,
                    [&](const auto &s) { return k == s.name; }))
    return emitOpError() << "expects kind constant, linear or cosine, got '"
                         << k << "'";
  double lr = getLr().convertToDouble(), minLr = getMinLr().convertToDouble();
  if (!(lr > 0))
    return emitOpError() << "expects lr > 0";
  if (!(minLr >= 0) || !(minLr <= lr))
    return emitOpError() << "expects min_lr in [0, lr], got " << minLr;
  // I64Attr's getter is unsigned: the signed values.
  int64_t warmup = getWarmupStepsAttr().getInt(),
          decay = getDecayStepsAttr().getInt();
  if (warmup < 0)
    return emitOpError() << "expects warmup_steps >= 0, got " << warmup;
  if (getTotalSteps()) {
    // The run's total replaces decay_steps: one length, never two.
    if (k == "constant" || decay != 0)
      return emitOpError() << "expects a total_steps operand only for kind "
                              "linear or cosine with decay_steps 0, got kind '"
                           << k << "' and decay_steps " << decay;
  } else if (k != "constant" && decay < 1) {
    return emitOpError() << "expects decay_steps >= 1 for kind '" << k
                         << "' (or a total_steps operand), got " << decay;
  }
  return verifyByInference(*this);
}

LogicalResult SumSquaresOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location>, Adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  inferred.push_back(RankedTensorType::get({1}, Float64Type::get(context)));
  return success();
}
LogicalResult SumSquaresOp::verify() { return verifyByInference(*this); }

LogicalResult GradNormOp::inferReturnTypes(MLIRContext *context,
                                           std::optional<Location>, Adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  auto t = RankedTensorType::get({}, Float64Type::get(context));
  inferred.append({t, t});
  return success();
}
LogicalResult GradNormOp::verify() {
  if (auto m = getMaxNorm(); m && !(m->convertToDouble() > 0))
    return emitOpError() << "expects max_norm > 0, got "
                         << m->convertToDouble();
  return verifyByInference(*this);
}

LogicalResult ScaleOp::verify() { return verifyByInference(*this); }

//===----------------------------------------------------------------------===//
// zeros_like, cast, micro_batch
//===----------------------------------------------------------------------===//

LogicalResult ZerosLikeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  inferred.push_back(adaptor.getLike().getType());
  return success();
}
LogicalResult ZerosLikeOp::verify() { return verifyByInference(*this); }

RankedTensorType CastOp::inferResultType() {
  return RankedTensorType::get(tensorOf(getInput()).getShape(),
                               tensorOf(getResult()).getElementType());
}
LogicalResult CastOp::verify() {
  if (failed(requireStatic(*this)))
    return failure();
  return verifyResultTypes(*this, {inferResultType()});
}

LogicalResult MicroBatchOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> location,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput());
  int64_t count = static_cast<int64_t>(adaptor.getCount()),
          index = static_cast<int64_t>(adaptor.getIndex());
  if (x.getRank() < 1)
    return emitError() << "expects an input with a batch dimension";
  if (count < 1 || index < 0 || index >= count)
    return emitError() << "expects 0 <= index < count, got index " << index
                       << " and count " << count;
  if (x.getShape()[0] % count)
    return emitError() << "expects the batch " << x.getShape()[0]
                       << " to divide into " << count << " micro-batches";
  SmallVector<int64_t> shape(x.getShape());
  shape[0] /= count;
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}
LogicalResult MicroBatchOp::verify() { return verifyByInference(*this); }
