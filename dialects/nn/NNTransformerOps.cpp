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

static LogicalResult expectShape(EmitErrorFn emitError, StringRef what, Value v,
                                 ArrayRef<int64_t> expected) {
  if (tensorOf(v).getShape() != expected)
    return emitError() << "expects " << what << " of shape "
                       << formatShape(expected) << ", got "
                       << formatShape(tensorOf(v).getShape());
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto table = tensorOf(adaptor.getTable());
  if (table.getRank() != 2)
    return emitError() << "expects a table of shape [num_embeddings, dim], got "
                       << formatShape(table.getShape());
  SmallVector<int64_t> shape(tensorOf(adaptor.getIndices()).getShape());
  shape.push_back(table.getShape()[1]);
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}
LogicalResult EmbeddingOp::verify() { return verifyByInference(*this); }

LogicalResult EmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto g = tensorOf(adaptor.getGrad());
  SmallVector<int64_t> expected(tensorOf(adaptor.getIndices()).getShape());
  if (g.getRank() != (int64_t)expected.size() + 1 ||
      g.getShape().drop_back() != ArrayRef<int64_t>(expected))
    return emitError() << "expects grad of shape " << formatShape(expected)
                       << " + [dim], got " << formatShape(g.getShape());
  int64_t v = static_cast<int64_t>(adaptor.getNumEmbeddings());
  if (v < 1)
    return emitError() << "expects num_embeddings >= 1, got " << v;
  inferred.push_back(
      RankedTensorType::get({v, g.getShape().back()}, g.getElementType()));
  return success();
}
LogicalResult EmbeddingGradOp::verify() { return verifyByInference(*this); }

LogicalResult PositionEmbeddingOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput()), table = tensorOf(adaptor.getTable());
  if (x.getRank() != 3)
    return emitError() << "expects an input of shape [batch, seq, dim], got "
                       << formatShape(x.getShape());
  if (table.getRank() != 2 || table.getShape()[1] != x.getShape()[2] ||
      table.getShape()[0] < x.getShape()[1])
    return emitError() << "expects a table of shape [positions >= "
                       << x.getShape()[1] << ", dim=" << x.getShape()[2]
                       << "], got " << formatShape(table.getShape());
  if (failed(sameElementType(emitError, adaptor.getInput(), adaptor.getTable(),
                             "input", "table")))
    return failure();
  inferred.push_back(x);
  return success();
}
LogicalResult PositionEmbeddingOp::verify() { return verifyByInference(*this); }

LogicalResult PositionEmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto g = tensorOf(adaptor.getGrad());
  int64_t p = static_cast<int64_t>(adaptor.getNumPositions());
  if (g.getRank() != 3 || p < g.getShape()[1])
    return emitError() << "expects grad of shape [batch, seq <= num_positions="
                       << p << ", dim], got " << formatShape(g.getShape());
  inferred.push_back(
      RankedTensorType::get({p, g.getShape()[2]}, g.getElementType()));
  return success();
}
LogicalResult PositionEmbeddingGradOp::verify() {
  return verifyByInference(*this);
}

/// Checks a [..., C] input and [C] affine parameters of a normalisation.
static LogicalResult checkNorm(EmitErrorFn emitError, Value x,
                               ValueRange params, double eps) {
  auto t = tensorOf(x);
  if (t.getRank() < 1)
    return emitError() << "expects an input of rank >= 1";
  if (!(eps > 0))
    return emitError() << "expects eps > 0";
  for (Value p : params) {
    if (failed(expectShape(emitError, "weight and bias", p,
                           {t.getShape().back()})))
      return failure();
    if (failed(sameElementType(emitError, x, p, "input", "weight")))
      return failure();
  }
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkNorm(emitError, adaptor.getInput(),
                       {adaptor.getWeight(), adaptor.getBias()},
                       adaptor.getEps().convertToDouble())))
    return failure();
  inferred.push_back(adaptor.getInput().getType());
  return success();
}
LogicalResult LayerNormOp::verify() { return verifyByInference(*this); }

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkNorm(emitError, adaptor.getInput(), {adaptor.getWeight()},
                       adaptor.getEps().convertToDouble())) ||
      failed(expectShape(emitError, "grad", adaptor.getGrad(),
                         tensorOf(adaptor.getInput()).getShape())))
    return failure();
  inferred.append({adaptor.getInput().getType(), adaptor.getWeight().getType(),
                   adaptor.getWeight().getType()});
  return success();
}
LogicalResult LayerNormGradOp::verify() { return verifyByInference(*this); }

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkNorm(emitError, adaptor.getInput(), {adaptor.getWeight()},
                       adaptor.getEps().convertToDouble())))
    return failure();
  inferred.push_back(adaptor.getInput().getType());
  return success();
}
LogicalResult RMSNormOp::verify() { return verifyByInference(*this); }

LogicalResult RMSNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkNorm(emitError, adaptor.getInput(), {adaptor.getWeight()},
                       adaptor.getEps().convertToDouble())) ||
      failed(expectShape(emitError, "grad", adaptor.getGrad(),
                         tensorOf(adaptor.getInput()).getShape())))
    return failure();
  inferred.append(
      {adaptor.getInput().getType(), adaptor.getWeight().getType()});
  return success();
}
LogicalResult RMSNormGradOp::verify() { return verifyByInference(*this); }

LogicalResult RopeOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> location,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput());
  int64_t d = adaptor.getHeadDim();
  if (x.getRank() != 3)
    return emitError()
           << "expects an input of shape [batch, seq, heads * head_dim], got "
           << formatShape(x.getShape());
  if (d < 2 || d % 2 || x.getShape()[2] % d)
    return emitError()
           << "expects an even head_dim that divides the last dimension "
           << x.getShape()[2] << ", got " << d;
  if (!(adaptor.getTheta().convertToDouble() > 0))
    return emitError() << "expects theta > 0";
  inferred.push_back(x);
  return success();
}

/// The frequency transform's attributes: a known rope_type, positive
/// factors, and no parameter of another transform changed from its default
/// (a misspelt or misplaced parameter is not silently ignored).
LogicalResult RopeOp::verify() {
  if (failed(verifyByInference(*this)))
    return failure();
  namespace fs = ::fsdp::schedule;
  StringRef type = getRopeType();
  if (llvm::none_of(fs::kRopeTypes,
                    [&](const char *t) { return type == StringRef(t); }))
    return emitOpError() << "unknown rope_type \"" << type
                         << "\" (supported: default, linear, llama3, yarn)";
  if (!(getFactor().convertToDouble() > 0) ||
      !(getAttentionFactor().convertToDouble() > 0))
    return emitOpError() << "expects factor > 0 and attention_factor > 0";
  bool llama3 = type == "llama3", yarn = type == "yarn";
  double low = getLowFreqFactor().convertToDouble(),
         high = getHighFreqFactor().convertToDouble();
  if (llama3 && (!(low > 0) || !(high > low)))
    return emitOpError()
           << "expects 0 < low_freq_factor < high_freq_factor, got " << low
           << " and " << high;
  if ((llama3 || yarn) && getOriginalMaxPositionEmbeddings() <= 0)
    return emitOpError() << "expects original_max_position_embeddings > 0";
  if (yarn && (!(getBetaFast().convertToDouble() > 0) ||
               !(getBetaSlow().convertToDouble() > 0)))
    return emitOpError() << "expects beta_fast > 0 and beta_slow > 0";
  auto changed = [&](StringRef name, bool isDefault) -> LogicalResult {
    if (isDefault)
      return success();
    return emitOpError() << "'" << name
                         << "' is not a parameter of rope_type \"" << type
                         << "\"";
  };
  bool scaled = type != "default";
  if (failed(changed("factor", scaled || getFactor().convertToDouble() ==
                                             fs::kDefaultRopeFactor)) ||
      failed(changed("low_freq_factor",
                     llama3 || low == fs::kDefaultRopeLowFreqFactor)) ||
      failed(changed("high_freq_factor",
                     llama3 || high == fs::kDefaultRopeHighFreqFactor)) ||
      failed(changed("original_max_position_embeddings",
                     llama3 || yarn ||
                         getOriginalMaxPositionEmbeddings() ==
                             fs::kDefaultRopeOriginalMaxPositions)) ||
      failed(changed("beta_fast", yarn || getBetaFast().convertToDouble() ==
                                              fs::kDefaultRopeBetaFast)) ||
      failed(changed("beta_slow", yarn || getBetaSlow().convertToDouble() ==
                                              fs::kDefaultRopeBetaSlow)) ||
      failed(changed("truncate",
                     yarn || getTruncate() == fs::kDefaultRopeTruncate)) ||
      failed(changed("attention_factor",
                     yarn || getAttentionFactor().convertToDouble() ==
                                 fs::kDefaultRopeAttentionFactor)))
    return failure();
  return success();
}

/// Checks q [B, T, Hq·D], k and v [B, T, Hkv·D] with Hq a multiple of Hkv.
static LogicalResult checkAttention(EmitErrorFn emitError, Value q, Value k,
                                    Value v, int64_t hq, int64_t hkv) {
  auto qt = tensorOf(q);
  if (qt.getRank() != 3)
    return emitError()
           << "expects a query of shape [batch, seq, heads * head_dim], got "
           << formatShape(qt.getShape());
  if (hq < 1 || hkv < 1 || hq % hkv)
    return emitError() << "expects num_heads (" << hq
                       << ") to be a positive multiple of num_kv_heads (" << hkv
                       << ")";
  if (qt.getShape()[2] % hq)
    return emitError() << "expects the query width " << qt.getShape()[2]
                       << " to divide by num_heads " << hq;
  int64_t d = qt.getShape()[2] / hq;
  SmallVector<int64_t> kvShape{qt.getShape()[0], qt.getShape()[1], hkv * d};
  if (failed(expectShape(emitError, "key", k, kvShape)) ||
      failed(expectShape(emitError, "value", v, kvShape)))
    return failure();
  if (failed(sameElementType(emitError, q, k, "query", "key")) ||
      failed(sameElementType(emitError, q, v, "query", "value")))
    return failure();
  return success();
}

/// The type of attention's statistics: [B, Hq, T] in f32, f64 for an f64
/// query (the kernels' compute type).
static RankedTensorType statsType(Value query, int64_t hq) {
  auto qt = tensorOf(query);
  Type f = qt.getElementType().isF64()
               ? Type(Float64Type::get(qt.getContext()))
               : Type(Float32Type::get(qt.getContext()));
  return RankedTensorType::get({qt.getShape()[0], hq, qt.getShape()[1]}, f);
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkAttention(emitError, adaptor.getQuery(), adaptor.getKey(),
                            adaptor.getValue(), adaptor.getNumHeads(),
                            adaptor.getNumKvHeads())))
    return failure();
  inferred.push_back(adaptor.getQuery().getType());
  inferred.push_back(statsType(adaptor.getQuery(), adaptor.getNumHeads()));
  return success();
}
LogicalResult AttentionOp::verify() { return verifyByInference(*this); }

LogicalResult AttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (failed(checkAttention(emitError, adaptor.getQuery(), adaptor.getKey(),
                            adaptor.getValue(), adaptor.getNumHeads(),
                            adaptor.getNumKvHeads())))
    return failure();
  auto qShape = tensorOf(adaptor.getQuery()).getShape();
  RankedTensorType stats = statsType(adaptor.getQuery(), adaptor.getNumHeads());
  if (failed(expectShape(emitError, "out", adaptor.getOut(), qShape)) ||
      failed(sameElementType(emitError, adaptor.getQuery(), adaptor.getOut(),
                             "query", "out")) ||
      failed(expectShape(emitError, "grad", adaptor.getGrad(), qShape)))
    return failure();
  if (tensorOf(adaptor.getLogsumexp()) != stats)
    return emitError() << "expects logsumexp of type " << stats << ", got "
                       << adaptor.getLogsumexp().getType();
  inferred.append({adaptor.getQuery().getType(), adaptor.getKey().getType(),
                   adaptor.getValue().getType()});
  return success();
}
LogicalResult AttentionGradOp::verify() { return verifyByInference(*this); }

// silu, silu_grad: shape rules generated from SameOperandsAndResultType.
LogicalResult SiluOp::verify() { return verifyByInference(*this); }
LogicalResult SiluGradOp::verify() { return verifyByInference(*this); }
LogicalResult TpCopyOp::verify() { return verifyByInference(*this); }
LogicalResult TpAllReduceOp::verify() { return verifyByInference(*this); }

// Sequence parallelism: dimension `dim` of the input is T chunks (the
// scatters: the input is whole, the result one chunk) or one chunk (the
// all-gather).
static LogicalResult inferSequenceChunk(EmitErrorFn emitError, Value input,
                                        int64_t dim, int64_t tp, bool gather,
                                        SmallVectorImpl<Type> &inferred) {
  auto x = tensorOf(input);
  if (dim >= x.getRank())
    return emitError() << "expects dim " << dim << " below the input's rank "
                       << x.getRank();
  SmallVector<int64_t> shape(x.getShape());
  if (gather) {
    shape[dim] *= tp;
  } else {
    if (shape[dim] % tp != 0)
      return emitError() << "expects dimension " << dim << " (" << shape[dim]
                         << ") divisible by tp (" << tp << ")";
    shape[dim] /= tp;
  }
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult SpAllGatherOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> location,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferSequenceChunk(opErrorAt(location, getOperationName()),
                            adaptor.getInput(), adaptor.getDim(),
                            adaptor.getTp(), /*gather=*/true, inferred);
}
LogicalResult SpAllGatherOp::verify() { return verifyByInference(*this); }

LogicalResult SpReduceScatterOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> location, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  return inferSequenceChunk(opErrorAt(location, getOperationName()),
                            adaptor.getInput(), adaptor.getDim(),
                            adaptor.getTp(), /*gather=*/false, inferred);
}
LogicalResult SpReduceScatterOp::verify() { return verifyByInference(*this); }

LogicalResult SpSplitOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> location,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  return inferSequenceChunk(opErrorAt(location, getOperationName()),
                            adaptor.getInput(), adaptor.getDim(),
                            adaptor.getTp(), /*gather=*/false, inferred);
}
LogicalResult SpSplitOp::verify() { return verifyByInference(*this); }

static LogicalResult normalizeAxis(EmitErrorFn emitError, int64_t &axis,
                                   int64_t rank) {
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return emitError() << "expects axis in [-" << rank << ", " << rank << ")";
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  auto x = tensorOf(adaptor.getInput());
  int64_t axis = adaptor.getAxis();
  if (failed(normalizeAxis(emitError, axis, x.getRank())))
    return failure();
  int64_t total = 0;
  for (int64_t s : adaptor.getSizes())
    total += s;
  if (total != x.getShape()[axis] ||
      llvm::any_of(adaptor.getSizes(), [](int64_t s) { return s < 1; }))
    return emitError() << "expects positive sizes "
                       << formatShape(adaptor.getSizes())
                       << " that add up to dimension " << axis << " ("
                       << x.getShape()[axis] << ")";
  for (int64_t s : adaptor.getSizes()) {
    SmallVector<int64_t> shape(x.getShape());
    shape[axis] = s;
    inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  }
  return success();
}
LogicalResult SplitOp::verify() {
  SmallVector<Type> types;
  if (failed(requireStatic(*this)) || failed(inferResultTypes(*this, types)))
    return failure();
  if (getSizes().size() != getNumResults())
    return emitOpError() << "expects one result per size (" << getSizes().size()
                         << "), got " << getNumResults();
  return verifyResultTypes(*this, types);
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  auto emitError = opErrorAt(location, getOperationName());
  if (adaptor.getInputs().empty())
    return emitError() << "expects at least one input";
  auto first = tensorOf(adaptor.getInputs()[0]);
  int64_t axis = adaptor.getAxis();
  if (failed(normalizeAxis(emitError, axis, first.getRank())))
    return failure();
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value v : adaptor.getInputs()) {
    auto t = tensorOf(v);
    SmallVector<int64_t> s(t.getShape());
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitError() << "expects inputs of one rank and element type";
    shape[axis] += s[axis];
    s[axis] = first.getShape()[axis];
    if (ArrayRef<int64_t>(s) != first.getShape())
      return emitError() << "expects inputs that differ only in dimension "
                         << axis;
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}
LogicalResult ConcatOp::verify() { return verifyByInference(*this); }
