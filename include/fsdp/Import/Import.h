//===- Import.h - Hugging Face config.json → nn-dialect forward graph -----===//
//
// The library behind fsdp-import (and fsdp-sweep, which imports a model once
// per world size): reads a Hugging Face config (model_type gpt2, llama,
// mistral, qwen2), applies the overrides and builds
//   func.func @forward(%tokens: tensor<BxTxi32> {nn.data = "tokens"},
//                      %targets: tensor<BxTxi32> {nn.data = "targets"},
//                      <parameters> {nn.param = FQN, nn.init = ...})
//       -> (tensor<f32> {nn.loss})
// Only the graph is built (no weights), so even a 405B-parameter config
// imports in well under a second.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_IMPORT_H
#define FSDP_IMPORT_IMPORT_H

#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Import/Config.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace fsdp_import {

/// Largest value an override (--layers, --batch, --seq, ...) may take:
/// 2^31 − 1, as for a config's dimensions (keeps every numel in int64).
inline constexpr int64_t kMaxOverride = (int64_t(1) << 31) - 1;

/// Largest element count of one tensor, and of all parameters together, that
/// checkSizes accepts: 2^56, so that a tensor of any dtype (at most 8 bytes
/// an element) fits the nn verifiers' size limit (nn::kMaxTensorBytes).
inline constexpr int64_t kMaxElements = mlir::nn::kMaxTensorBytes / 8;

/// Builds the forward graph of the config at `path` with `ov` applied (loads
/// the nn and func dialects into `ctx`). On a bad config returns null and
/// sets `error` to "<path>: <message naming the key>".
mlir::OwningOpRef<mlir::ModuleOp> importConfig(mlir::MLIRContext *ctx,
                                               llvm::StringRef path,
                                               const Overrides &ov,
                                               std::string &error);

/// Fails, with `error` saying which, if a tensor of `module` or the sum of its
/// parameters has more than kMaxElements elements.
mlir::LogicalResult checkSizes(mlir::ModuleOp module, std::string &error);

/// Sum of the element counts of the `nn.param` arguments of every function in
/// `module` (parameters, each tied parameter once).
int64_t countParams(mlir::ModuleOp module);

} // namespace fsdp_import

#endif // FSDP_IMPORT_IMPORT_H
