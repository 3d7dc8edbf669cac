//===- NNDialect.td - the nn (model graph) dialect ------------------------===//
#ifndef NN_DIALECT
#define NN_DIALECT

include "mlir/IR/OpBase.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::mlir::nn";
  let summary = "Layer-level model graph on ranked tensors";
  let description = [{
    The model graph that fsdp-opt plans: layers on statically shaped ranked
    tensors of f32 or f64 (bf16 or f16 where fsdp-shard's param-dtype
    computes in lower precision, through nn.cast), gradient ops emitted by
    fsdp-autodiff and optimizer updates emitted by fsdp-optimizer.
    Parameters are function arguments carrying `nn.param = "<FQN>"`,
    optionally `nn.trainable`, `nn.init` and `nn.tied`; data arguments carry
    `nn.data = "<role>"`.
  }];
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

class NN_Op<string mnemonic, list<Trait> traits = []> :
    Op<NN_Dialect, mnemonic, traits>;

#endif // NN_DIALECT
