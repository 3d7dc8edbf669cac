//===- NNInterfaces.td - the nn dialect's op interfaces -------------------===//
//
// The vector-Jacobian product (used by fsdp-autodiff) and the cost model
// (used by the cluster simulator). Shape rules are upstream's
// InferTypeOpInterface (NNOps.td).
//
//===----------------------------------------------------------------------===//
#ifndef NN_INTERFACES
#define NN_INTERFACES

include "mlir/IR/OpBase.td"

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

def NN_CostOpInterface : OpInterface<"CostOpInterface"> {
  let description = [{
    The cost model of an op, from its current (per-rank) shapes: floating-
    point operations and bytes moved to and from memory (every operand plus
    every result, once). Used by the cluster simulator (lib/Analysis/
    Simulator.cpp) for a roofline time max(FLOPs / (peak · efficiency),
    bytes / memory bandwidth). The formulas and their sources are in
    include/fsdp/CostFormulas.h (shared with fsdp-calibrate; NNCost.cpp
    reads the shapes): a multiply-add counts as 2 FLOPs (Kaplan et al.
    2020, "6N" per token for training; Narayanan et al., SC21, Sec. 5.1 for
    the transformer matmuls), causal attention counts half of the dense
    4·B·Hq·T²·D and its backward 2.5× the forward (Dao et al., FlashAttention,
    2022), other ops a small documented constant per element.
  }];
  let cppNamespace = "::mlir::nn";
  let methods = [
    InterfaceMethod<"Floating-point operations this op performs.",
      "int64_t", "getFlops", (ins)>,
    InterfaceMethod<"Bytes read and written: all operands plus all results.",
      "int64_t", "getBytesAccessed", (ins)>
  ];
}

#endif // NN_INTERFACES
