//===- ShapeRules.h - helpers the nn ops' shape rules share -----*- C++ -*-===//
//
// Used by the two files of op shape rules (NNOps.cpp, NNTransformerOps.cpp)
// and by the VJPs (NNAutodiff.cpp). Private to the dialect library: its
// interface is fsdp/Dialect/NN/NN.h.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECTS_NN_SHAPERULES_H
#define FSDP_DIALECTS_NN_SHAPERULES_H

#include "fsdp/Dialect/NN/NN.h"

#include "mlir/Interfaces/InferTypeOpInterface.h"

namespace mlir::nn::detail {

inline RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Where a shape rule reports the precondition its operands violate.
using EmitErrorFn = llvm::function_ref<InFlightDiagnostic()>;

/// The diagnostics of op `opName`'s shape rule (inferReturnTypes): at the
/// location it is given, worded as the op's verifier words them ("'nn.linear'
/// op expects ..."); none when it is given no location.
inline auto opErrorAt(std::optional<Location> loc, StringRef opName) {
  return [loc, opName]() -> InFlightDiagnostic {
    if (!loc)
      return InFlightDiagnostic();
    return emitError(*loc) << "'" << opName << "' op ";
  };
}

/// Fails unless `a` and `b` (named `an`, `bn`) have one element type.
LogicalResult sameElementType(EmitErrorFn emitError, Value a, Value b,
                              StringRef an, StringRef bn);

/// Every nn tensor must be statically shaped and of a size the planner can
/// hold (checkedTensorBytes): the planner sizes every buffer.
LogicalResult requireStatic(Operation *op);

/// Runs the shape rule of `op` (InferTypeOpInterface) on its current operands
/// and attributes, diagnosing at the op's location.
LogicalResult inferResultTypes(Operation *op, SmallVectorImpl<Type> &types);

/// Compares the declared result types of `op` with `inferred`.
LogicalResult verifyResultTypes(Operation *op, TypeRange inferred);

/// The verifier of an op with a shape rule: requireStatic, then the rule,
/// then verifyResultTypes.
LogicalResult verifyByInference(Operation *op);

} // namespace mlir::nn::detail

#endif // FSDP_DIALECTS_NN_SHAPERULES_H
