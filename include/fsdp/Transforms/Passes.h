//===- Passes.h - the FSDP planning passes and fsdp-pipeline --------------===//
//
// The passes are declared in Passes.td (summary, description, options); this
// header declares what mlir-tblgen generates from it (create<Pass>() and
// <Pass>Options for every pass) and the ways into fsdp-pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TRANSFORMS_PASSES_H
#define FSDP_TRANSFORMS_PASSES_H

#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>
#include <string>

// The enums of the passes' options (PassEnums.td), and the parsers of their
// types that llvm::cl does not have.
#include "fsdp/Transforms/OptionParsers.h"
#include "fsdp/Transforms/PassEnums.h.inc"

namespace mlir::fsdp {

struct ClusterSpec;

/// fsdp-pipeline with `options` as `--fsdp-pipeline="OPTIONS"` takes them,
/// parsed by the same parser; null, with the parser's message in `error`, if
/// they do not parse. A tool that has read the cluster spec already passes it
/// as `cluster`: it then stands for cluster= (no file is read).
std::unique_ptr<Pass>
createFSDPPipeline(StringRef options, std::string &error,
                   std::shared_ptr<const ClusterSpec> cluster = nullptr);

#define GEN_PASS_DECL
#include "fsdp/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Transforms/Passes.h.inc"

/// Registers every pass of Passes.td, fsdp-pipeline included.
void registerAllFSDPPasses();

/// The transformer block a parameter's FQN lies in: the FQN up to its first
/// numeric component (`model.layers.3.mlp.up_proj.weight` ->
/// `model.layers.3`), as fsdp-wrap's policy=block names its units and
/// fsdp-activation-checkpoint's ac-regions=block its regions; "" for a
/// parameter in no block (embeddings, final norm, head).
std::string transformerBlockOf(StringRef fqn);

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_PASSES_H
