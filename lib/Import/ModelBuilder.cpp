//===- ModelBuilder.cpp - builds an nn-dialect forward function ----------===//
#include "ModelBuilder.h"

#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Import/Import.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/ErrorHandling.h"

#include <cstdio>

using namespace mlir;

namespace fsdp_import {

std::string normalInit(double stddev) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "normal(%.9g)", stddev);
  return buf;
}

ModelBuilder::ModelBuilder(MLIRContext *ctx, StringRef configPath,
                           int64_t batch, int64_t seq, bool f64)
    : ctx(ctx), b(ctx), fileLoc(FileLineColLoc::get(ctx, configPath, 1, 1)),
      batch(batch), seq(seq), f64(f64) {}

void ModelBuilder::addParam(StringRef fqn, ArrayRef<int64_t> shape,
                            StringRef init) {
  assert(!module && "parameters must be declared before begin()");
  bool inserted = argIndex.try_emplace(fqn, 2 + decls.size()).second;
  assert(inserted && "duplicate parameter FQN");
  (void)inserted;
  decls.push_back({fqn.str(), init.str(), SmallVector<int64_t>(shape)});
}

void ModelBuilder::begin() {
  module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(module->getBody());
  Type f32 = f64 ? Type(b.getF64Type()) : Type(b.getF32Type());
  auto ids = RankedTensorType::get({batch, seq}, b.getI32Type());
  SmallVector<Type> argTypes{ids, ids};
  for (const ParamDecl &d : decls)
    argTypes.push_back(RankedTensorType::get(d.shape, f32));
  auto type = b.getFunctionType(argTypes, {RankedTensorType::get({}, f32)});
  func = func::FuncOp::create(b, fileLoc, "forward", type);
  func.setArgAttr(0, nn::kDataAttr, b.getStringAttr("tokens"));
  func.setArgAttr(1, nn::kDataAttr, b.getStringAttr("targets"));
  for (auto [i, d] : llvm::enumerate(decls)) {
    func.setArgAttr(2 + i, nn::kParamAttr, b.getStringAttr(d.fqn));
    func.setArgAttr(2 + i, nn::kInitAttr, b.getStringAttr(d.init));
  }
  func.setResultAttr(0, nn::kLossAttr, b.getUnitAttr());
  Block *body = func.addEntryBlock();
  tokensArg = body->getArgument(0);
  targetsArg = body->getArgument(1);
  tokensArg.setLoc(loc("tokens"));
  targetsArg.setLoc(loc("targets"));
  for (auto [i, d] : llvm::enumerate(decls))
    body->getArgument(2 + i).setLoc(loc(d.fqn));
  b.setInsertionPointToStart(body);
}

void ModelBuilder::tie(StringRef fqn, StringRef alias) {
  auto arg = cast<BlockArgument>(param(fqn));
  SmallVector<Attribute> names;
  if (auto old =
          func.getArgAttrOfType<ArrayAttr>(arg.getArgNumber(), nn::kTiedAttr))
    names.append(old.begin(), old.end());
  names.push_back(b.getStringAttr(alias));
  func.setArgAttr(arg.getArgNumber(), nn::kTiedAttr, b.getArrayAttr(names));
}

OwningOpRef<ModuleOp> ModelBuilder::finish(Value loss) {
  func::ReturnOp::create(b, loc("loss"), loss);
  // Sizes past the planner's limits are the user's overrides, reported by
  // checkSizes with their own message; anything else failing to verify is a
  // bug in the builder.
  std::string sizeError;
  if (succeeded(fsdp_import::checkSizes(*module, sizeError)) &&
      failed(verify(*module)))
    llvm::report_fatal_error(
        "fsdp-import: internal error: the built module does not verify");
  return std::move(module);
}

Value ModelBuilder::param(StringRef fqn) const {
  auto it = argIndex.find(fqn);
  assert(it != argIndex.end() && "undeclared parameter");
  return func::FuncOp(func).getArgument(it->second);
}

Location ModelBuilder::loc(StringRef m) const {
  return NameLoc::get(StringAttr::get(ctx, m), fileLoc);
}

static RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `like`'s type with its last dimension replaced by `last`.
static RankedTensorType withLastDim(Value like, int64_t last) {
  auto t = tensorOf(like);
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = last;
  return RankedTensorType::get(shape, t.getElementType());
}

Value ModelBuilder::embedding(StringRef m, Value ids, Value table) {
  auto ti = tensorOf(ids), tt = tensorOf(table);
  SmallVector<int64_t> shape(ti.getShape());
  shape.push_back(tt.getShape()[1]);
  auto type = RankedTensorType::get(shape, tt.getElementType());
  return nn::EmbeddingOp::create(b, loc(m), type, ids, table);
}

Value ModelBuilder::positionEmbedding(StringRef m, Value x, Value table) {
  return nn::PositionEmbeddingOp::create(b, loc(m), x.getType(), x, table);
}

Value ModelBuilder::linear(StringRef m, Value x, Value w, Value bias,
                           bool transposeWeight) {
  auto ws = tensorOf(w).getShape();
  auto type = withLastDim(x, transposeWeight ? ws[1] : ws[0]);
  return nn::LinearOp::create(b, loc(m), type, x, w, bias, transposeWeight);
}

Value ModelBuilder::layerNorm(StringRef m, Value x, Value w, Value bias,
                              double eps) {
  return nn::LayerNormOp::create(b, loc(m), x.getType(), x, w, bias,
                                 b.getF64FloatAttr(eps));
}

Value ModelBuilder::rmsNorm(StringRef m, Value x, Value w, double eps) {
  return nn::RMSNormOp::create(b, loc(m), x.getType(), x, w,
                               b.getF64FloatAttr(eps));
}

Value ModelBuilder::rope(StringRef m, Value x, int64_t headDim, double theta,
                         const RopeScaling &s) {
  // A parameter the type does not read holds its default (RopeScaling's are
  // nn.rope's), which the printed op leaves out.
  return nn::RopeOp::create(
      b, loc(m), x.getType(), x, headDim, llvm::APFloat(theta),
      /*inverse=*/false, s.type, llvm::APFloat(s.factor),
      llvm::APFloat(s.lowFreqFactor), llvm::APFloat(s.highFreqFactor),
      s.originalMaxPositions, llvm::APFloat(s.betaFast),
      llvm::APFloat(s.betaSlow), s.truncate, llvm::APFloat(s.attentionFactor));
}

Value ModelBuilder::attention(StringRef m, Value q, Value k, Value v,
                              int64_t heads, int64_t kvHeads) {
  // The result types (the output and its statistics) are inferred.
  return nn::AttentionOp::create(b, loc(m), q, k, v, b.getI64IntegerAttr(heads),
                                 b.getI64IntegerAttr(kvHeads))
      .getResult();
}

SmallVector<Value> ModelBuilder::split(StringRef m, Value x, int64_t axis,
                                       ArrayRef<int64_t> sizes) {
  auto t = tensorOf(x);
  SmallVector<Type> types;
  for (int64_t s : sizes) {
    SmallVector<int64_t> shape(t.getShape());
    shape[axis] = s;
    types.push_back(RankedTensorType::get(shape, t.getElementType()));
  }
  auto op = nn::SplitOp::create(b, loc(m), types, x, b.getI64IntegerAttr(axis),
                                b.getDenseI64ArrayAttr(sizes));
  return SmallVector<Value>(op.getResults());
}

Value ModelBuilder::gelu(StringRef m, Value x,
                         nn::GeluApproximation approximate) {
  return nn::GeluOp::create(b, loc(m), x.getType(), x,
                            nn::GeluApproximationAttr::get(ctx, approximate));
}

Value ModelBuilder::silu(StringRef m, Value x) {
  return nn::SiluOp::create(b, loc(m), x.getType(), x);
}

Value ModelBuilder::add(StringRef m, Value x, Value y) {
  return nn::AddOp::create(b, loc(m), x.getType(), x, y);
}

Value ModelBuilder::mul(StringRef m, Value x, Value y) {
  return nn::MulOp::create(b, loc(m), x.getType(), x, y);
}

Value ModelBuilder::crossEntropy(StringRef m, Value logits, Value labels,
                                 bool upcastF32) {
  if (upcastF32) {
    // In the f32 model the cast is f32 -> f32; it keeps its f32 target when
    // fsdp-shard moves compute to a 16-bit param-dtype (and is removed when
    // compute stays f32, where torch's .float() returns the tensor itself).
    auto t = tensorOf(logits);
    logits = nn::CastOp::create(
        b, loc(m), RankedTensorType::get(t.getShape(), b.getF32Type()), logits);
  }
  auto type = RankedTensorType::get(
      {}, nn::lossElementType(tensorOf(logits).getElementType()));
  return nn::CrossEntropyOp::create(b, loc(m), type, logits, labels);
}

} // namespace fsdp_import
