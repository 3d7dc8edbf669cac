//===- StepSharder.h - fsdp-shard's rewrite of the step function ---------===//
//
// What each strategy shards (ShardLayout), and the rewrite of the step
// function for one rank, unit by unit (StepSharder.cpp). Private to
// lib/Transforms: fsdp-shard (Shard.cpp) is its one user.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_STEPSHARDER_H
#define FSDP_LIB_TRANSFORMS_STEPSHARDER_H

#include "fsdp/Transforms/Passes.h"

namespace mlir::fsdp {

/// What a strategy shards (Rajbhandari et al., ZeRO, SC20, Sec. 5; Zhao et
/// al., PyTorch FSDP, VLDB 2023, Sec. 3.2.2), with mixed precision: pdt is
/// the dtype of gathered parameters and compute, rdt that of gradient
/// reduction; master parameters and optimizer state keep modelType.
struct ShardLayout {
  Strategy strategy;
  int64_t worldSize, shardGroup;
  Type modelType, pdt, rdt;
  /// master-weights=separate: a persistent pdt copy beside the master.
  bool separate;

  int64_t replicas() const { return worldSize / shardGroup; }
  bool mixed() const { return pdt != modelType; }
  /// DDP and ZeRO-1 keep whole parameters on every rank.
  bool replicatedParams() const {
    return strategy == Strategy::NoShard ||
           strategy == Strategy::ShardOptimizer;
  }
  /// Only DDP keeps whole optimizer state (and all-reduces whole gradients).
  bool replicatedState() const { return strategy == Strategy::NoShard; }
  /// With separate masters the pdt copy is replicated unless the strategy
  /// shards parameters (ZeRO-1/2 keep fp16 parameters whole).
  bool lowFull() const {
    return strategy == Strategy::NoShard ||
           strategy == Strategy::ShardOptimizer ||
           strategy == Strategy::ShardGradOp;
  }
  /// The master (or only) copy is whole where parameters are replicated, or
  /// with separate masters, where the state is (DDP).
  bool masterFull() const {
    return separate ? replicatedState() : replicatedParams();
  }
  /// ZeRO-1 updates this rank's slice of replicated parameters and gathers
  /// the updated slices back.
  bool updatesSlice() const {
    return strategy == Strategy::ShardOptimizer && masterFull();
  }
  /// HSDP all-reduces the reduced gradient shards across the replicas.
  bool allReducesReplicas() const {
    return strategy == Strategy::HybridShard && replicas() > 1;
  }
};

/// Global gradient-norm clipping (fsdp-shard's max-grad-norm and
/// report-grad-norm): `maxNorm` > 0 clips, `report` returns the norm.
struct GradNormOptions {
  double maxNorm = 0;
  bool report = false;
};

/// Rewrites `fn` (batch split, units laid out flat) for one rank of
/// `layout`: each unit's parameter and optimizer-state arguments become flat
/// buffers (shards, or whole where the strategy replicates them) with
/// gathers, parameter views, the gradient reduction and one update of the
/// flat shard; with a narrower param-dtype, compute moves to it.
LogicalResult shardStep(func::FuncOp fn, ArrayRef<UnitOp> units,
                        const ShardLayout &layout, Accumulate accumulate,
                        const GradNormOptions &gradNorm = {});

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_STEPSHARDER_H
