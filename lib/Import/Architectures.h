//===- Architectures.h - the model families fsdp-import knows -------------===//
//
// Each builder reads its keys from the config (overrides first), validates
// them, declares the parameters in Hugging Face state_dict order and emits
// the forward graph. On a bad config it records the error in `cfg` and
// returns a null module.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_ARCHITECTURES_H
#define FSDP_IMPORT_ARCHITECTURES_H

#include "fsdp/Import/Config.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace fsdp_import {

/// model_type "gpt2" (GPT2LMHeadModel).
mlir::OwningOpRef<mlir::ModuleOp>
buildGPT2(mlir::MLIRContext *ctx, ConfigReader &cfg, const Overrides &ov);

/// model_type "llama", "mistral" or "qwen2" (LlamaForCausalLM and its
/// relatives).
mlir::OwningOpRef<mlir::ModuleOp> buildLlama(mlir::MLIRContext *ctx,
                                             ConfigReader &cfg,
                                             const Overrides &ov,
                                             llvm::StringRef modelType);

/// Batch and sequence length: --batch (default 1) and --seq (default
/// min(1024, maxPositions)); --seq must not exceed maxPositions, which
/// `maxKey` names in the error.
bool resolveBatchSeq(ConfigReader &cfg, const Overrides &ov,
                     int64_t maxPositions, const std::string &maxKey,
                     int64_t &batch, int64_t &seq);

} // namespace fsdp_import

#endif // FSDP_IMPORT_ARCHITECTURES_H
