//===- Shard.cpp - fsdp-shard: flat parameters, shards and the batch split ===//
//
// Turns the replicated step into the per-rank SPMD step of ZeRO-3
// (Rajbhandari et al., SC20, Sec. 5.3): every unit is one flat buffer
// right-padded to a multiple of the shard-group size (fsdp/Sharding.h), each
// rank holds one contiguous shard of the parameters and of the optimizer
// state, and each rank processes 1/N of the global batch. For one unit @fc of
// two parameters under AdamW, full-shard on N ranks:
//
//   func.func @f(%x: tensor<B x ...>, %w {nn.param = "fc.weight"},
//                %b {nn.param = "fc.bias"}, <AdamW moments>, %step)
//     ...
//     %w1, ... = nn.adamw_update %w, %gw, ...
//     %b1, ... = nn.adamw_update %b, %gb, ...
//
// becomes
//
//   func.func @f(%x: tensor<B/N x ...>, %step,
//                %p: tensor<S> {fsdp.role = #fsdp.role<param>, fsdp.unit =
//                @fc}, %m: tensor<S> {... exp_avg ...}, %v: tensor<S> {...})
//     %full = fsdp.all_gather @fc %p : tensor<S> -> tensor<N*S>
//     %w = fsdp.param_view %full "fc.weight" at 0
//     %b = fsdp.param_view %full "fc.bias" at <numel of fc.weight>
//     ...
//     %g = fsdp.flatten @fc(%gw, %gb) : ... -> tensor<N*S>
//     %gs = fsdp.reduce_scatter @fc %g : tensor<N*S> -> tensor<S>
//     %p1, %m1, %v1 = nn.adamw_update %p, %gs, %m, %v, %step
//
// ShardLayout says, per strategy, which copies are replicated and which
// sharded; StepSharder (StepSharder.cpp) rewrites the function unit by unit.
//
//===----------------------------------------------------------------------===//
#include "StepSharder.h"
#include "fsdp/Sharding.h"
#include "fsdp/Transforms/Passes.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "fsdp-shard"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSHARD
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Divides the batch dimension of data arguments by the world size and
/// re-infers every shape downstream.
LogicalResult splitBatch(func::FuncOp fn, int64_t worldSize, int64_t tp) {
  OpBuilder b(fn);
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    if (!fn.getArgAttr(i, nn::kDataAttr))
      continue;
    BlockArgument arg = fn.getArgument(i);
    auto t = cast<RankedTensorType>(arg.getType());
    int64_t batch = t.getShape()[0];
    if (batch % worldSize != 0)
      return emitError(arg.getLoc())
             << "global batch " << batch << " (dimension 0 of data argument #"
             << i << ") is not divisible by "
             << (tp > 1 ? "the data-parallel size " : "world size ")
             << worldSize;
    SmallVector<int64_t> shape(t.getShape());
    fn.setArgAttr(i, kGlobalShapeAttr, b.getDenseI64ArrayAttr(shape));
    shape[0] = batch / worldSize;
    arg.setType(RankedTensorType::get(shape, t.getElementType()));
  }
  fn.setFunctionType(FunctionType::get(fn.getContext(),
                                       fn.getBody().front().getArgumentTypes(),
                                       fn.getResultTypes()));
  for (Operation &op : fn.getBody().front().without_terminator()) {
    // An op whose semantics depend on where its rows sit in the batch
    // (nn.dropout's mask) has an inherent `batch_split` attribute: set when
    // its rows were split across the ranks (its input's rows shrank; its
    // results still have the old shapes).
    if (llvm::is_contained(op.getName().getAttributeNames(), "batch_split") &&
        nn::rowsChanged(&op))
      op.setAttr("batch_split", BoolAttr::get(fn.getContext(), true));
    if (failed(nn::reinferResultTypes(&op)))
      return op.emitError()
             << "cannot split the batch over " << worldSize << " ranks here";
  }
  return success();
}

/// The flat layout of each unit: its parameters packed in order, padded to a
/// multiple of the shard group (fsdp/Sharding.h).
void layOutUnits(ArrayRef<UnitOp> units, int64_t shardGroup) {
  for (UnitOp unit : units) {
    SmallVector<int64_t> offsets;
    int64_t numel = 0;
    for (unsigned i = 0; i < unit.getParams().size(); ++i) {
      offsets.push_back(numel);
      numel += unit.getParamNumel(i);
    }
    int64_t padded = ::fsdp::paddedNumel(numel, shardGroup);
    unit.setOffsets(offsets);
    unit.setNumel(numel);
    unit.setPaddedNumel(padded);
    unit.setShardNumel(::fsdp::shardNumel(numel, shardGroup));
    LLVM_DEBUG(llvm::dbgs()
               << "unit @" << unit.getSymName() << ": numel " << numel
               << ", padded to " << padded << " (+" << padded - numel
               << ") for a shard group of " << shardGroup << ", shard "
               << *unit.getShardNumel() << "\n");
  }
}

struct FSDPShardPass : mlir::fsdp::impl::FSDPShardBase<FSDPShardPass> {
  using Base::Base;

  /// The type of a param-dtype / reduce-dtype value; null for the default.
  Type floatType(ComputeDtype dtype) {
    switch (dtype) {
    case ComputeDtype::Default:
      return Type();
    case ComputeDtype::F32:
      return Float32Type::get(&getContext());
    case ComputeDtype::BF16:
      return BFloat16Type::get(&getContext());
    case ComputeDtype::F16:
      return Float16Type::get(&getContext());
    }
    llvm_unreachable("unknown dtype");
  }

  /// The shard-group size: the data-parallel ranks (world / tp), or for
  /// HSDP shard-size ranks.
  FailureOr<int64_t> shardGroupSize(ModuleOp module, int64_t dp) {
    // 0 is the option's "unset"; a negative size was taken for it and
    // planned as one shard group of every data-parallel rank.
    if (shardSize < 0)
      return module.emitError()
             << "fsdp-shard: shard-size must be >= 0 (0: the data-parallel "
                "size), got "
             << static_cast<int64_t>(shardSize);
    if (strategy != Strategy::HybridShard) {
      if (shardSize > 0 && shardSize != dp)
        return module.emitError()
               << "fsdp-shard: shard-size is only for strategy=hybrid-shard";
      return dp;
    }
    int64_t group = shardSize > 0 ? shardSize : dp;
    // Under fsdp-pipeline this module is one stage of N / pp ranks: name the
    // user's world-size, not the stage's.
    auto stages = module->getAttrOfType<IntegerAttr>(kPipelineStagesAttr);
    if (dp % group != 0)
      return module.emitError()
             << "fsdp-shard: hybrid-shard needs shard-size to divide "
             << (stages && stages.getInt() > 1
                     ? "a pipeline stage's data-parallel size world-size / "
                       "(pp x tp) "
                 : tp > 1 ? "the data-parallel size world-size / tp "
                          : "world-size ")
             << dp << ", got " << group;
    return group;
  }

  /// The data-parallel size world-size / tp; the tensor-parallel degree
  /// must be fsdp-tensor-parallel's and divide the world size.
  FailureOr<int64_t> dataParallelSize(ModuleOp module) {
    int64_t t = groupSize(module, Group::Tensor).value_or(1);
    if (tp < 1 || tp != t)
      return module.emitError() << "fsdp-shard: tp=" << static_cast<int64_t>(tp)
                                << " but the graph was made for tp=" << t
                                << " (fsdp-tensor-parallel)";
    if (worldSize % tp != 0)
      return module.emitError()
             << "fsdp-shard: tp=" << static_cast<int64_t>(tp)
             << " does not divide world-size "
             << static_cast<int64_t>(worldSize)
             << " (world size = tp x the data-parallel size)";
    return static_cast<int64_t>(worldSize / tp);
  }

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (worldSize < 1) {
      module.emitError() << "fsdp-shard: world-size must be >= 1, got "
                         << static_cast<int64_t>(worldSize);
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> maybeFn = getStepFunction(module);
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    auto unitOps = llvm::to_vector(module.getOps<UnitOp>());
    if (unitOps.empty()) {
      module.emitError()
          << "fsdp-shard: no fsdp.unit declared (run fsdp-wrap first)";
      return signalPassFailure();
    }
    // The grid: tp x replicas x shardGroup ranks (HSDP); one shard group
    // per tensor-parallel rank otherwise.
    FailureOr<int64_t> dp = dataParallelSize(module);
    if (failed(dp))
      return signalPassFailure();
    FailureOr<int64_t> shardGroup = shardGroupSize(module, *dp);
    if (failed(shardGroup))
      return signalPassFailure();
    LLVM_DEBUG(llvm::dbgs() << "strategy " << stringifyStrategy(strategy)
                            << ": " << worldSize / *shardGroup << " x "
                            << *shardGroup << " ranks\n");
    OpBuilder b(module);
    module->setAttr(kWorldSizeAttr, b.getI64IntegerAttr(worldSize));
    module->setAttr(kStrategyAttr, StrategyAttr::get(&getContext(), strategy));
    module->setAttr(kReplicasAttr, b.getI64IntegerAttr(*dp / *shardGroup));
    module->setAttr(kShardSizeAttr, b.getI64IntegerAttr(*shardGroup));
    if (failed(splitBatch(fn, *dp, tp)))
      return signalPassFailure();
    layOutUnits(unitOps, *shardGroup);

    // Mixed precision (FSDP MixedPrecision / MixedPrecisionPolicy).
    Type modelType = unitOps.front().getElementType();
    for (UnitOp unit : unitOps)
      if (unit.getElementType() != modelType) {
        unit.emitOpError() << "has element type " << unit.getElementType()
                           << " but unit @" << unitOps.front().getSymName()
                           << " has " << modelType
                           << ": one model, one parameter dtype";
        return signalPassFailure();
      }
    Type pdt = floatType(paramDtype);
    pdt = pdt ? pdt : modelType;
    Type rdt = floatType(reduceDtype);
    rdt = rdt ? rdt : pdt;
    ShardLayout layout{strategy,
                       *dp,
                       *shardGroup,
                       modelType,
                       pdt,
                       rdt,
                       masterWeights == MasterWeights::Separate};
    if (layout.separate && !layout.mixed()) {
      module.emitError()
          << "fsdp-shard: master-weights=separate needs a param-dtype narrower "
             "than the parameters' "
          << modelType;
      return signalPassFailure();
    }

    // accumulate chooses how micro-batches' gradients are summed; without
    // fsdp-micro-batch's accumulations it would silently do nothing.
    bool accumulates = false;
    fn.walk([&](Operation *op) {
      accumulates |= op->hasAttr(nn::kAccumulateAttr);
    });
    // (By value: fsdp-pipeline refuses an explicit accumulate=sharded.)
    if (accumulate == Accumulate::Unsharded && !accumulates) {
      module.emitError()
          << "fsdp-shard: accumulate=" << stringifyAccumulate(accumulate)
          << " needs micro-batches (fsdp-micro-batch with micro-batches > 1); "
             "this step accumulates no gradients";
      return signalPassFailure();
    }

    if (maxGradNorm.has_value() &&
        (!(*maxGradNorm > 0) || !std::isfinite(*maxGradNorm))) {
      module.emitError()
          << "fsdp-shard: max-grad-norm must be finite and > 0, got "
          << *maxGradNorm;
      return signalPassFailure();
    }
    GradNormOptions gradNorm{maxGradNorm.value_or(0.0),
                             reportGradNorm || maxGradNorm.has_value()};
    if (failed(shardStep(fn, unitOps, layout, accumulate, gradNorm)))
      return signalPassFailure();
  }
};
} // namespace
