//===- ActivationCheckpoint.h - AC's save lists -------------*- C++ -*-===//
//
// Private to the transforms library: fsdp-activation-checkpoint's save
// lists, shared with the pipeline split's memory estimate
// (PipelineBalance.cpp), so that the estimate keeps what the pass keeps.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_ACTIVATIONCHECKPOINT_H
#define FSDP_LIB_TRANSFORMS_ACTIVATIONCHECKPOINT_H

#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::fsdp {

/// The ops of one use of a checkpointed unit (`ops`: its forward ops in
/// order) whose outputs activation checkpointing under `mode` keeps for the
/// backward instead of recomputing them: none, every op; full, none;
/// selective, the matmul, linear and attention outputs (torchtitan's
/// _save_list) and the tensor-parallel sums, or with `unfusedAttention`
/// every output but the core attention's (Korthikanti et al. 2022, Sec. 5);
/// selective-op, the attention outputs and every second torch mm's from
/// the use's first (torchtitan's op-level policy). Never fails.
llvm::DenseSet<Operation *> checkpointSaves(ArrayRef<Operation *> ops,
                                            ActivationCheckpoint mode,
                                            bool unfusedAttention);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_ACTIVATIONCHECKPOINT_H
