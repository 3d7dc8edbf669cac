//===- PipelineChunks.h - a rank's interleaved chunks as one step ---------===//
//
// Interleaved 1F1B (Narayanan et al., SC'21, Sec. 2.2.2): rank s of P holds
// v chunks, virtual stages s, s + P, ..., s + (v-1)·P of the model cut into
// P·v. fsdp-pipeline plans each chunk through fsdp-autodiff as a stage of a
// P·v-stage pipeline, then merges them into the rank's one step function,
// which fsdp-pipeline-micro-batch orders (docs/pipeline-parallel.md).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_PIPELINECHUNKS_H
#define FSDP_LIB_TRANSFORMS_PIPELINECHUNKS_H

#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {

/// Moves the step functions of `chunks` (modules nested in `stage`, chunk i
/// being virtual stage s + i·P, each after fsdp-pipeline-split and
/// fsdp-autodiff) into one step function of `stage`, and erases `chunks`.
/// The function's arguments are chunk 0's, then chunk 1's, ...; its results
/// likewise; its ops each chunk's in chunk order. Every argument, op and
/// result gets fsdp.pp_chunk = i; a data argument (nn.data, not a pipeline
/// boundary) or the loss scale (nn.loss_scale) of the same type and
/// attributes in two chunks is one argument (the runtime fills one slot per
/// kind). `stage` gets the chunks'
/// module attributes (dictionaries keyed by FQN, as fsdp.tensor_slices,
/// united) and fsdp.pipeline_chunks = v. Errors (emitted): a chunk
/// without a step function, or with other ops beside it; chunks whose
/// module attributes disagree (a dictionary entry included).
LogicalResult mergePipelineChunks(ModuleOp stage, ArrayRef<ModuleOp> chunks);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_PIPELINECHUNKS_H
