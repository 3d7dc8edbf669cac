//===- FSDP.h - the fsdp dialect: units, shards, collectives --------------===//
#ifndef FSDP_DIALECT_FSDP_FSDP_H
#define FSDP_DIALECT_FSDP_FSDP_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/ScheduleFormat.h" // ODS default attribute values

namespace mlir::fsdp {
/// The resource that collectives read and write: data moved between ranks.
struct CommunicationResource
    : public SideEffects::Resource::Base<CommunicationResource> {
  llvm::StringRef getName() final { return "<Communication>"; }
};

/// Attribute names. On the module: fsdp.world_size (i64). On function
/// arguments and results of the sharded step: fsdp.unit (symbol ref) with
/// fsdp.role (param | exp_avg | exp_avg_sq); on data arguments
/// fsdp.global_shape (the shape before the batch was split).
inline constexpr llvm::StringLiteral kWorldSizeAttr = "fsdp.world_size";
inline constexpr llvm::StringLiteral kUnitAttr = "fsdp.unit";
inline constexpr llvm::StringLiteral kRoleAttr = "fsdp.role";
inline constexpr llvm::StringLiteral kGlobalShapeAttr = "fsdp.global_shape";
/// On the module: the sharding strategy and the 2-D grid replicas × shard_size
/// (replicas = 1 and shard_size = world size unless hybrid-shard).
inline constexpr llvm::StringLiteral kStrategyAttr = "fsdp.strategy";
inline constexpr llvm::StringLiteral kReplicasAttr = "fsdp.replicas";
inline constexpr llvm::StringLiteral kShardSizeAttr = "fsdp.shard_size";
/// On arguments and results of unit roles: "shard" (default) or "full"
/// (the whole padded flat buffer, replicated on every rank).
inline constexpr llvm::StringLiteral kLayoutAttr = "fsdp.layout";
/// On the module after fsdp-schedule: the collective schedule applied
/// ("none", "fsdp1", "fsdp2", "list(max-in-flight=N)"; "auto: " + the
/// cost model's pick).
inline constexpr llvm::StringLiteral kScheduleAttr = "fsdp.schedule";

/// Size of process group `group` ("world", "shard" or "replicate") for the
/// module that contains `op`; nullopt if the module has no world size yet or
/// the group name is unknown.
std::optional<int64_t> groupSize(Operation *op, llvm::StringRef group);
} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/FSDPOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/FSDPOps.h.inc"

namespace mlir::fsdp {
/// `v`, or for the result of an fsdp.wait the async collective's result it
/// completes (the same buffer).
inline Value skipWait(Value v) {
  if (auto w = v.getDefiningOp<WaitOp>())
    return w.getToken();
  return v;
}
/// True for the three collectives (all-gather, reduce-scatter, all-reduce).
inline bool isCollective(Operation *op) {
  return isa<AllGatherOp, ReduceScatterOp, AllReduceOp>(op);
}
} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_FSDP_H
