//===- MicroBatchClone.h - one op of a step, cloned per micro-batch -------===//
//
// fsdp-micro-batch and fsdp-pipeline-micro-batch clone the step's ops once
// per micro-batch; what a clone of micro-batch j of k must carry is decided
// here, once.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_MICROBATCHCLONE_H
#define FSDP_LIB_TRANSFORMS_MICROBATCHCLONE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::fsdp {

/// Clones `op` through `map` at `b`'s insertion point as micro-batch `j` of
/// `k`: the clone gets nn.micro_batch = j; an op whose semantics depend on
/// where its rows sit in the batch (an inherent `micro_batch` attribute:
/// nn.dropout's mask) gets j when its input's rows shrank with the batch;
/// its result shapes are re-inferred for the smaller batch; the loss seed
/// (nn.loss_seed) becomes the constant 1/k without the marker, as torch's
/// gradient accumulation divides the loss by the accumulation steps.
/// Returns null after an error (re-inference failed; emitted at the clone).
Operation *cloneForMicroBatch(OpBuilder &b, Operation &op, IRMapping &map,
                              int64_t j, int64_t k);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_MICROBATCHCLONE_H
