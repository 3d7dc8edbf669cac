//===- FSDPDialect.td - the fsdp (distribution) dialect -------------------===//
#ifndef FSDP_DIALECT
#define FSDP_DIALECT

include "mlir/IR/OpBase.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let cppNamespace = "::mlir::fsdp";
  let summary = "FSDP units, flat-parameter shards and collectives";
  let description = [{
    Distribution of a training step over a 1-D grid of ranks: FSDP units
    (named groups of parameters flattened into one right-padded buffer, as
    PyTorch FSDP's FlatParameter), views of the gathered buffer, and the
    collectives that move shards. Collectives are not Pure: each one moves
    data, so two all-gathers of the same unit are two communications and
    CSE must not merge them (merging would keep the full weights alive).
  }];
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let hasOperationAttrVerify = 1;
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

class FSDP_Op<string mnemonic, list<Trait> traits = []> :
    Op<FSDP_Dialect, mnemonic, traits>;

#endif // FSDP_DIALECT
