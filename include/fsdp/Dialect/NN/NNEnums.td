//===- NNEnums.td - nn dialect enums and enum attributes ------------------===//
//
// The GELU variants of nn.gelu and nn.gelu_grad. Each case's string is its
// spelling in the IR (`#nn.approximation<tanh>`) and in the schedule JSON
// ("approximate": "tanh", runtime/docs/schedule-format.md).
//
//===----------------------------------------------------------------------===//
#ifndef NN_ENUMS
#define NN_ENUMS

include "fsdp/Dialect/NN/NNDialect.td"
include "mlir/IR/EnumAttr.td"

/// torch.nn.functional.gelu's `approximate`: the exact erf form or the tanh
/// approximation (Hendrycks & Gimpel 2016, Sec. 2).
def NN_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU approximation", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::mlir::nn";
  let genSpecializedAttr = 0;
}
def NN_GeluApproximationAttr
    : EnumAttr<NN_Dialect, NN_GeluApproximation, "approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // NN_ENUMS
