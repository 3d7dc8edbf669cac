//===- NNDialect.cpp - nn dialect registration and attribute checks -------===//
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/InitSpec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::nn;

#include "fsdp/Dialect/NN/NNInterfaces.cpp.inc"
#include "fsdp/Dialect/NN/NNOpsDialect.cpp.inc"

#include "fsdp/Dialect/NN/NNEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/NN/NNAttrs.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/NN/NNOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/NN/NNAttrs.cpp.inc"
      >();
}

std::string mlir::nn::formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

std::optional<int64_t> mlir::nn::checkedTensorBytes(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.hasStaticShape() || !t.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bytes = (t.getElementTypeBitWidth() + 7) / 8;
  for (int64_t d : t.getShape())
    if (llvm::MulOverflow(bytes, d, bytes) || bytes > kMaxTensorBytes)
      return std::nullopt;
  return bytes;
}

StringRef mlir::nn::dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isBF16())
    return "bf16";
  if (t.isF16())
    return "f16";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  return "";
}

int64_t mlir::nn::tensorBytes(Type type) {
  std::optional<int64_t> bytes = checkedTensorBytes(type);
  assert(bytes && "tensor size not checked by a verifier");
  return *bytes;
}

static LogicalResult verifyNNAttr(Operation *op, NamedAttribute attr, Type type,
                                  bool isResult, Location loc) {
  StringRef name = attr.getName().getValue();
  auto err = [&]() {
    return op->emitError() << "'" << name << "' on "
                           << (isResult ? "result" : "argument") << " of type "
                           << type << " ";
  };
  // A parameter, data or state tensor too large to size is an error at the
  // tensor (the argument's location), before any pass sizes it.
  if (auto t = dyn_cast<RankedTensorType>(type);
      t && t.hasStaticShape() && t.getElementType().isIntOrFloat() &&
      !checkedTensorBytes(t))
    return emitError(loc) << "'" << name << "' on " << type
                          << ": the tensor's size exceeds 2^59 bytes";
  if (name == kParamAttr || name == kGradOfAttr || name == kParamOfAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || s.getValue().empty())
      return err()
             << "must be a non-empty string (a fully qualified parameter name)";
    if (name == kParamAttr) {
      auto t = dyn_cast<RankedTensorType>(type);
      if (!t || !t.hasStaticShape() || !isa<FloatType>(t.getElementType()))
        return err() << "expects a statically shaped float tensor parameter";
    }
    return success();
  }
  if (name == kTiedAttr) {
    auto arr = dyn_cast<ArrayAttr>(attr.getValue());
    if (!arr || llvm::any_of(arr, [](Attribute a) {
          auto s = dyn_cast<StringAttr>(a);
          return !s || s.getValue().empty();
        }))
      return err() << "must be an array of FQNs (the names tied to this "
                      "parameter, e.g. "
                      "[\"lm_head.weight\"])";
    return success();
  }
  if (name == kTrainableAttr) {
    if (!isa<BoolAttr>(attr.getValue()))
      return err() << "must be a bool";
    return success();
  }
  if (name == kInitAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || !::fsdp::init::isValid(s.getValue()))
      return err() << "must be one of \"zeros\", \"ones\", \"uniform(a)\", "
                      "\"normal(std)\" with "
                      "a non-negative number, got "
                   << attr.getValue()
                   << "; \"constant(v)\" takes any finite number";
    return success();
  }
  if (name == kDataAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    bool ok = s && llvm::StringSwitch<bool>(s.getValue())
                       .Cases({"features", "labels", "tokens", "targets"}, true)
                       .Default(false);
    if (!ok)
      return err() << "must be \"features\", \"labels\", \"tokens\" or "
                      "\"targets\", got "
                   << attr.getValue();
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || !t.hasStaticShape() || t.getRank() < 1)
      return err() << "expects a statically shaped tensor whose first "
                      "dimension is the batch";
    return success();
  }
  if (name == kStepAttr || name == kTotalStepsAttr) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || t.getRank() != 0 || !t.getElementType().isInteger(64))
      return err() << "expects tensor<i64>";
    return success();
  }
  if (name == kLossScaleAttr) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (isResult || !t || t.getRank() != 0 || !t.getElementType().isF64())
      return err() << "expects a tensor<f64> argument";
    return success();
  }
  if (name == kLossAttr)
    return success();
  if (name == kLrAttr || name == kGradNormAttr) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (!isResult || !t || t.getRank() != 0 || !t.getElementType().isF64())
      return err() << "expects a tensor<f64> result";
    return success();
  }
  if (name == kOptStateAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || (s.getValue() != "exp_avg" && s.getValue() != "exp_avg_sq"))
      return err() << "must be \"exp_avg\" or \"exp_avg_sq\"";
    return success();
  }
  return op->emitError() << "unknown nn attribute '" << name << "'";
}

LogicalResult NNDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                  unsigned argIndex,
                                                  NamedAttribute attr) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return op->emitError()
           << "nn argument attributes are only allowed on functions";
  return verifyNNAttr(op, attr, fn.getArgumentTypes()[argIndex], false,
                      fn.getArgument(argIndex).getLoc());
}

LogicalResult NNDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                     unsigned resultIndex,
                                                     NamedAttribute attr) {
  auto fn = dyn_cast<FunctionOpInterface>(op);
  if (!fn)
    return op->emitError()
           << "nn result attributes are only allowed on functions";
  return verifyNNAttr(op, attr, fn.getResultTypes()[resultIndex], true,
                      op->getLoc());
}
