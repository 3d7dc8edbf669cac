//===- FSDPOps.td - fsdp dialect operations -------------------------------===//
#ifndef FSDP_OPS
#define FSDP_OPS

include "fsdp/Dialect/FSDP/FSDPDialect.td"
include "fsdp/Dialect/FSDP/FSDPEnums.td"
include "fsdp/Dialect/FSDP/FSDPTypes.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

/// Data moved between ranks. Effects on it keep collectives ordered and
/// un-merged.
def FSDP_CommResource : Resource<"::mlir::fsdp::CommunicationResource">;

def FSDP_FlatTensor : 1DTensorOf<[F32, F64, BF16, F16]>;
/// A collective's result: the flat buffer, or (`async`) its future.
def FSDP_FlatTensorOrFuture : AnyTypeOf<[FSDP_FlatTensor, FSDP_FutureType]>;

/// Collectives and unit views name their unit by symbol; the reference (and
/// the sizes that depend on the unit) are checked in verifySymbolUses.
def FSDP_UnitUser : DeclareOpInterfaceMethods<SymbolUserOpInterface>;
/// Accessors of the three collectives (an `async` one returns !fsdp.future).
defvar FSDP_CollectiveDecls = [{
    /// The flat buffer this collective produces: the result's type, or the
    /// value type of its future when it is `async`.
    ::mlir::RankedTensorType getBufferType() {
      ::mlir::Type t = getResult().getType();
      if (auto f = ::llvm::dyn_cast<::mlir::fsdp::FutureType>(t))
        return f.getValueType();
      return ::llvm::cast<::mlir::RankedTensorType>(t);
    }
}];

def FSDP_UnitOp : FSDP_Op<"unit", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let summary = "an FSDP unit: parameters flattened into one padded buffer";
  let description = [{
    Declares a unit and its parameters in flat order. `shapes`, `inits`
    and `trainable` describe each parameter (from the `nn.*` argument
    attributes). After fsdp-shard, `offsets` gives each parameter's start in
    the flat buffer (elements), `numel` the unpadded size, `padded_numel` the
    size right-padded to a multiple of the world size and `shard_numel` =
    padded_numel / world size (PyTorch FSDP, Zhao et al., VLDB 2023, 3.2.1).

    ```mlir
    fsdp.unit @fc1 params ["fc1.weight", "fc1.bias"] {shapes = [[64, 13], [64]], ...}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$params,
                       ArrayAttr:$shapes, StrArrayAttr:$inits,
                       DenseBoolArrayAttr:$trainable, TypeAttr:$element_type,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       OptionalAttr<I64Attr>:$numel,
                       OptionalAttr<I64Attr>:$padded_numel,
                       OptionalAttr<I64Attr>:$shard_numel);
  let assemblyFormat = "$sym_name `params` $params attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Shape of parameter `i`.
    ::llvm::SmallVector<int64_t> getParamShape(unsigned i);
    /// Numel of parameter `i`.
    int64_t getParamNumel(unsigned i);
  }];
}

def FSDP_AllGatherOp : FSDP_Op<"all_gather", [FSDP_UnitUser,
    MemoryEffects<[MemRead<FSDP_CommResource>, MemWrite<FSDP_CommResource>]>]> {
  let summary = "gather every rank's shard of a unit into the full flat buffer";
  let description = [{
    `shard` [S] → `result` [S·N]; rank r's shard lands at [r·S, (r+1)·S).
    Ring volume sent per rank: (N−1)·S elements.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, FSDP_FlatTensor:$shard,
                       DefaultValuedAttr<FSDP_GroupAttr, "::mlir::fsdp::Group::Shard">:$group,
                       UnitAttr:$async,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$bucket);
  let results = (outs FSDP_FlatTensorOrFuture:$result);
  let assemblyFormat = "$unit $shard (`async` $async^)? attr-dict `:` type($shard) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = FSDP_CollectiveDecls;
}

def FSDP_ReduceScatterOp : FSDP_Op<"reduce_scatter", [FSDP_UnitUser,
    MemoryEffects<[MemRead<FSDP_CommResource>, MemWrite<FSDP_CommResource>]>]> {
  let summary = "reduce a unit's full flat gradient and keep this rank's shard";
  let description = [{
    `input` [S·N] → `result` [S]: element-wise sum (or mean, `op = #fsdp.reduction<avg>`, the default)
    over ranks of rank r's slice [r·S, (r+1)·S).
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, FSDP_FlatTensor:$input,
                       DefaultValuedAttr<FSDP_ReductionAttr, "::mlir::fsdp::Reduction::Avg">:$op,
                       DefaultValuedAttr<FSDP_GroupAttr, "::mlir::fsdp::Group::Shard">:$group,
                       UnitAttr:$async,
                       OptionalAttr<FlatSymbolRefArrayAttr>:$bucket);
  let results = (outs FSDP_FlatTensorOrFuture:$result);
  let assemblyFormat = "$unit $input (`async` $async^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = FSDP_CollectiveDecls;
}

def FSDP_AllReduceOp : FSDP_Op<"all_reduce", [FSDP_UnitUser,
    MemoryEffects<[MemRead<FSDP_CommResource>, MemWrite<FSDP_CommResource>]>]> {
  let summary = "element-wise sum (or mean) of a unit's gradient over a process group";
  let description = [{
    `input` [n] → `result` [n] (DDP's gradient all-reduce; HSDP's all-reduce
    of gradient shards across replicas, `group = #fsdp.group<replicate>`). Ring volume
    sent per rank: 2·(G−1)/G·n elements.
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, FSDP_FlatTensor:$input,
                       DefaultValuedAttr<FSDP_ReductionAttr, "::mlir::fsdp::Reduction::Avg">:$op,
                       DefaultValuedAttr<FSDP_GroupAttr, "::mlir::fsdp::Group::World">:$group,
                       UnitAttr:$async);
  let results = (outs FSDP_FlatTensorOrFuture:$result);
  let assemblyFormat = "$unit $input (`async` $async^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = FSDP_CollectiveDecls;
}

def FSDP_WaitOp : FSDP_Op<"wait", [
    TypesMatchWith<"token is a future of the result type", "result", "token",
                   "::mlir::fsdp::FutureType::get($_self.getContext(), "
                   "::llvm::cast<::mlir::RankedTensorType>($_self))">,
    MemoryEffects<[MemRead<FSDP_CommResource>, MemWrite<FSDP_CommResource>]>]> {
  let summary = "complete an asynchronous collective and read its result";
  let description = [{
    An `async` collective is the *start* of a transfer on the communication
    stream; its result is an `!fsdp.future` of the in-flight buffer that
    only `fsdp.wait` accepts. The wait blocks the compute stream until the
    transfer is complete and returns the buffer itself (no copy: the result
    aliases the collective's buffer). It is the only synchronisation between
    the two streams (as XLA's all-gather-start / all-gather-done pair).

    ```mlir
    %g = fsdp.all_gather @fc1 %s async : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
    ... compute that overlaps the transfer ...
    %w = fsdp.wait %g : tensor<16xf32>
    ```
  }];
  let arguments = (ins FSDP_FutureType:$token);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$token attr-dict `:` type($result)";
  let hasVerifier = 1;
}

/// Pipeline parallelism (docs/pipeline-parallel.md): point-to-point transfers
/// between adjacent stages over the pipeline group (the ranks of the other
/// stages with this rank's data-parallel index).
def FSDP_SendOp : FSDP_Op<"send", [
    MemoryEffects<[MemRead<FSDP_CommResource>, MemWrite<FSDP_CommResource>]>]> {
  let summary = "send a tensor to another pipeline stage";
  let description = [{
    Sends `input` to stage `peer` (an absolute stage index) of the pipeline
    group with message tag `tag` (MPI_Isend; the receiving `fsdp.recv` has
    the same tag). Without a result (as fsdp-pipeline-micro-batch writes it)
    it is a placeholder whose operand may still change shape; with `async`
    it returns a future of a one-element completion buffer that one
    `fsdp.wait` consumes: `input` stays live (is not overwritten) until that
    wait (fsdp-pipeline-p2p writes this form).
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$peer, I64Attr:$tag,
                       UnitAttr:$async);
  let results = (outs Optional<FSDP_FutureType>:$token);
  let assemblyFormat = "$input `to` $peer `tag` $tag (`async` $async^)? attr-dict `:` type($input) (`->` type($token)^)?";
  let hasVerifier = 1;
}

def FSDP_RecvOp : FSDP_Op<"recv", [
    MemoryEffects<[MemRead<FSDP_CommResource>, MemWrite<FSDP_CommResource>]>]> {
  let summary = "receive a tensor from another pipeline stage";
  let description = [{
    Starts the receive of a tensor of the future's value type from stage
    `peer` of the pipeline group with tag `tag` (MPI_Irecv); `fsdp.wait`
    returns the received tensor.

    ```mlir
    %f = fsdp.recv from 0 tag 3 async : <tensor<2x16x32xf64>>
    %x = fsdp.wait %f : tensor<2x16x32xf64>
    ```
  }];
  let arguments = (ins I64Attr:$peer, I64Attr:$tag, UnitAttr:$async);
  let results = (outs FSDP_FutureType:$token);
  let assemblyFormat = "`from` $peer `tag` $tag (`async` $async^)? attr-dict `:` type($token)";
  let hasVerifier = 1;
}

def FSDP_PackOp : FSDP_Op<"pack", [Pure]> {
  let summary = "copy several units' flat buffers into one bucket buffer";
  let description = [{
    Inputs xᵢ [B·Sᵢ] (B = `blocks` rank blocks of Sᵢ elements each) →
    `result` [B·ΣS]: block b of the result is x₀'s block b, then x₁'s, …
    (FSDP2's all-gather copy-in). With B = 1 it concatenates shards for a
    bucketed all-gather; with B = the group size it interleaves full
    gradients by destination rank for a bucketed reduce-scatter.
  }];
  let arguments = (ins Variadic<FSDP_FlatTensor>:$inputs, I64Attr:$blocks);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "`(` $inputs `)` attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

def FSDP_UnpackOp : FSDP_Op<"unpack", [Pure]> {
  let summary = "copy a bucket buffer back into its units' flat buffers";
  let description = [{
    The inverse of fsdp.pack: `input` [B·ΣS] → results yᵢ [B·Sᵢ] (FSDP2's
    all-gather copy-out). After a bucketed all-gather B is the group size;
    after a bucketed reduce-scatter B = 1.
  }];
  let arguments = (ins FSDP_FlatTensor:$input, I64Attr:$blocks);
  let results = (outs Variadic<FSDP_FlatTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` functional-type($input, $results)";
  let hasVerifier = 1;
}

def FSDP_LocalShardOp : FSDP_Op<"local_shard", [Pure, FSDP_UnitUser]> {
  let summary = "this rank's slice of a replicated flat buffer (a copy)";
  let description = [{
    `input` [P] → `result` [P/G]: elements [i·P/G, (i+1)·P/G) with i this
    rank's index in `group` (ZeRO-1: each rank updates its slice of the
    replicated parameters).
  }];
  let arguments = (ins FlatSymbolRefAttr:$unit, FSDP_FlatTensor:$input,
                       DefaultValuedAttr<FSDP_GroupAttr, "::mlir::fsdp::Group::Shard">:$group);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "$unit $input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_FreeOp : FSDP_Op<"free", [MemoryEffects<[MemFree]>]> {
  let summary = "end the life of a gathered buffer (reshard)";
  let arguments = (ins AnyRankedTensor:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
}

def FSDP_ParamViewOp : FSDP_Op<"param_view", [Pure]> {
  let summary = "a parameter's view into a unit's gathered flat buffer (no copy)";
  let arguments = (ins FSDP_FlatTensor:$flat, StrAttr:$fqn, I64Attr:$offset);
  let results = (outs RankedTensorOf<[F32, F64, BF16, F16]>:$result);
  let assemblyFormat = "$flat $fqn `at` $offset attr-dict `:` type($flat) `->` type($result)";
  let hasVerifier = 1;
}

def FSDP_FlattenOp : FSDP_Op<"flatten", [Pure, FSDP_UnitUser]> {
  let summary = "pack a unit's parameter gradients into one zero-padded flat buffer";
  let arguments = (ins FlatSymbolRefAttr:$unit, Variadic<RankedTensorOf<[F32, F64, BF16, F16]>>:$inputs,
                       DenseI64ArrayAttr:$offsets);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = "$unit `(` $inputs `)` attr-dict `:` functional-type($inputs, $result)";
  let hasVerifier = 1;
}

#endif // FSDP_OPS
