//===- ShapeRules.h - helpers the nn ops' shape rules share -----*- C++ -*-===//
//
// Used by the two files of op shape rules (NNOps.cpp, NNTransformerOps.cpp).
// Private to the dialect library: its interface is fsdp/Dialect/NN/NN.h.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECTS_NN_SHAPERULES_H
#define FSDP_DIALECTS_NN_SHAPERULES_H

#include "fsdp/Dialect/NN/NN.h"

namespace mlir::nn::detail {

inline RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Runs the op's shape rule and compares with its declared result types.
LogicalResult verifyByInference(Operation *op);

/// Fails, with a diagnostic on `op`, unless `a` and `b` (named `an`, `bn`)
/// have the same element type.
LogicalResult sameElementType(Operation *op, Value a, Value b, StringRef an,
                              StringRef bn);

} // namespace mlir::nn::detail

#endif // FSDP_DIALECTS_NN_SHAPERULES_H
