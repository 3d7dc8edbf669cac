//===- NNInterfaces.td - interfaces every nn op implements ----------------===//
//
// Shape inference (used by verifiers and by fsdp-shard when it splits the
// batch) and the vector-Jacobian product (used by fsdp-autodiff).
//
//===----------------------------------------------------------------------===//
#ifndef NN_INTERFACES
#define NN_INTERFACES

include "mlir/IR/OpBase.td"

def NN_ShapeInferenceOpInterface : OpInterface<"ShapeInferenceOpInterface"> {
  let description = [{
    Recomputes the result types of an op from its current operand types and
    attributes. Verifiers compare the result with the declared result types;
    fsdp-shard calls it after shrinking the batch dimension of the inputs.
    Emits a diagnostic on the op and fails when the operands are inconsistent.
  }];
  let cppNamespace = "::mlir::nn";
  let methods = [
    InterfaceMethod<"Infers the result types from the operands.",
      "::llvm::LogicalResult", "inferResultTypes",
      (ins "::llvm::SmallVectorImpl<::mlir::Type> &":$types)>
  ];
}

def NN_AutodiffOpInterface : OpInterface<"AutodiffOpInterface"> {
  let description = [{
    Reverse-mode differentiation: given the gradients of the loss with
    respect to each result (null where a result does not reach the loss),
    builds the vector-Jacobian product at the builder's insertion point and
    returns one gradient per operand (null where `needed[i]` is false or the
    operand is not differentiable, e.g. integer labels).
  }];
  let cppNamespace = "::mlir::nn";
  let methods = [
    InterfaceMethod<"Builds the VJP of this op.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::ArrayRef<bool>":$needed,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

#endif // NN_INTERFACES
