//===- FSDPEnums.td - fsdp dialect enums and enum attributes --------------===//
//
// The one list of each closed set the planner and the schedule format use:
// sharding strategies, process groups, reductions, buffer layouts and the
// roles of the step's carried state. Each case's string is its spelling in
// pass options, in the schedule JSON (runtime/docs/schedule-format.md) and in
// the IR (`#fsdp.strategy<"full-shard">`).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ENUMS
#define FSDP_ENUMS

include "fsdp/Dialect/FSDP/FSDPDialect.td"
include "mlir/IR/EnumAttr.td"

/// Zhao et al., PyTorch FSDP, VLDB 2023, Sec. 3.2.2; Rajbhandari et al.,
/// ZeRO, SC20, Sec. 5.
def FSDP_Strategy : I32EnumAttr<"Strategy", "sharding strategy", [
    I32EnumAttrCase<"FullShard", 0, "full-shard">,
    I32EnumAttrCase<"ShardGradOp", 1, "shard-grad-op">,
    I32EnumAttrCase<"ShardOptimizer", 2, "shard-optimizer">,
    I32EnumAttrCase<"NoShard", 3, "no-shard">,
    I32EnumAttrCase<"HybridShard", 4, "hybrid-shard">]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_StrategyAttr : EnumAttr<FSDP_Dialect, FSDP_Strategy, "strategy"> {
  // `#fsdp.strategy<"full-shard">`: the spelling has dashes, so it is
  // printed as a string (the default printer would emit a bare word that
  // does not parse back).
  let assemblyFormat = ?;
  let hasCustomAssemblyFormat = 1;
}

/// The process group a collective runs over: every rank, the ranks that
/// shard a unit together, or the replicas of one shard (HSDP).
def FSDP_Group : I32EnumAttr<"Group", "process group", [
    I32EnumAttrCase<"World", 0, "world">,
    I32EnumAttrCase<"Shard", 1, "shard">,
    I32EnumAttrCase<"Replicate", 2, "replicate">,
    I32EnumAttrCase<"Tensor", 3, "tensor">,
    I32EnumAttrCase<"Pipeline", 4, "pipeline">]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_GroupAttr : EnumAttr<FSDP_Dialect, FSDP_Group, "group"> {
  let assemblyFormat = "`<` $value `>`";
}

def FSDP_Reduction : I32EnumAttr<"Reduction", "reduction over ranks", [
    I32EnumAttrCase<"Avg", 0, "avg">,
    I32EnumAttrCase<"Sum", 1, "sum">]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_ReductionAttr : EnumAttr<FSDP_Dialect, FSDP_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

/// How a carried buffer of the step is held on each rank.
def FSDP_Layout : I32EnumAttr<"Layout", "buffer layout", [
    I32EnumAttrCase<"Shard", 0, "shard">,
    I32EnumAttrCase<"Full", 1, "full">]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_LayoutAttr : EnumAttr<FSDP_Dialect, FSDP_Layout, "layout"> {
  let assemblyFormat = "`<` $value `>`";
}

/// The role of a unit's carried state: the parameters, their f32 master
/// copy, and AdamW's moments (torch.optim.AdamW's state names).
def FSDP_Role : I32EnumAttr<"Role", "role of carried state", [
    I32EnumAttrCase<"Param", 0, "param">,
    I32EnumAttrCase<"Master", 1, "master">,
    I32EnumAttrCase<"ExpAvg", 2, "exp_avg">,
    I32EnumAttrCase<"ExpAvgSq", 3, "exp_avg_sq">]> {
  let cppNamespace = "::mlir::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_RoleAttr : EnumAttr<FSDP_Dialect, FSDP_Role, "role"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // FSDP_ENUMS
