//===- Import.cpp - Hugging Face config.json → nn-dialect forward graph ---===//
#include "fsdp/Import/Import.h"
#include "Architectures.h"

#include "fsdp/Dialect/NN/NN.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace fsdp_import {

OwningOpRef<ModuleOp> importConfig(MLIRContext *ctx, StringRef path,
                                   const Overrides &ov, std::string &error) {
  ctx->loadDialect<nn::NNDialect, func::FuncDialect>();
  ConfigReader cfg(path.str());
  OwningOpRef<ModuleOp> module;
  if (cfg.load()) {
    auto type = cfg.requireString("model_type");
    if (type) {
      if (*type == "gpt2")
        module = buildGPT2(ctx, cfg, ov);
      else if (*type == "llama" || *type == "mistral" || *type == "qwen2")
        module = buildLlama(ctx, cfg, ov, *type);
      else
        cfg.fail("key 'model_type': unsupported value \"" + *type +
                 "\" (supported: gpt2, llama, mistral, qwen2)");
    }
  }
  if (cfg.failed()) {
    error = cfg.getError();
    return nullptr;
  }
  return module;
}

LogicalResult checkSizes(ModuleOp module, std::string &error) {
  std::string overflow;
  int64_t total = 0;
  module->walk([&](Operation *op) {
    auto check = [&](Type t) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!rt || !overflow.empty())
        return;
      int64_t n = 1;
      for (int64_t d : rt.getShape())
        if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements) {
          std::string s;
          llvm::raw_string_ostream os(s);
          os << "a tensor of type " << rt
             << " has more than 2^56 elements; shrink the overrides";
          overflow = s;
          return;
        }
    };
    for (Type t : op->getResultTypes())
      check(t);
    if (auto fn = dyn_cast<func::FuncOp>(op))
      for (auto [i, t] : llvm::enumerate(fn.getArgumentTypes())) {
        check(t);
        if (fn.getArgAttr(i, nn::kParamAttr) && overflow.empty() &&
            (__builtin_add_overflow(
                 total, cast<RankedTensorType>(t).getNumElements(), &total) ||
             total > kMaxElements))
          overflow =
              "the parameters add up to more than 2^56; shrink the overrides";
      }
  });
  if (overflow.empty())
    return success();
  error = overflow;
  return failure();
}

int64_t countParams(ModuleOp module) {
  int64_t total = 0;
  module.walk([&](func::FuncOp fn) {
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
      if (fn.getArgAttr(i, nn::kParamAttr))
        total +=
            cast<RankedTensorType>(fn.getArgumentTypes()[i]).getNumElements();
  });
  return total;
}

} // namespace fsdp_import
