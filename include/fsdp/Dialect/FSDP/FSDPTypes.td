//===- FSDPTypes.td - fsdp dialect types -----------------------------------===//
#ifndef FSDP_TYPES
#define FSDP_TYPES

include "fsdp/Dialect/FSDP/FSDPDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypeInterfaces.td"

def FSDP_FutureType : TypeDef<FSDP_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "the buffer of an in-flight collective";
  let description = [{
    What an `async` collective returns: its buffer while the transfer runs
    on the communication stream. Only `fsdp.wait` accepts a future (it
    returns the `valueType` tensor once the transfer is complete), so no
    compute op can read an in-flight buffer; the collective's verifier
    checks that exactly one wait consumes it (XLA's all-gather-start /
    all-gather-done pair).

    ```mlir
    %f = fsdp.all_gather @fc1 %s async : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
    %g = fsdp.wait %f : tensor<16xf32>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

#endif // FSDP_TYPES
