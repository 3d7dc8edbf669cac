//===- Shard.cpp - fsdp-shard: flat parameters, shards and the batch split ===//
//
// Turns the replicated step into the per-rank SPMD step of ZeRO-3
// (Rajbhandari et al., SC20, Sec. 5.3): every unit is one flat buffer
// right-padded to a multiple of the world size (fsdp/Sharding.h), each rank
// holds one contiguous shard of the parameters and of the optimizer state,
// and each rank processes 1/N of the global batch.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sharding.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/BitVector.h"

#include "llvm/ADT/StringMap.h"
#include <functional>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSHARD
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
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

  /// Divides the batch dimension of data arguments by the world size and
  /// re-infers every shape downstream.
  LogicalResult splitBatch(func::FuncOp fn) {
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
               << i << ") is not divisible by world size "
               << static_cast<int64_t>(worldSize);
      SmallVector<int64_t> shape(t.getShape());
      fn.setArgAttr(i, kGlobalShapeAttr, b.getDenseI64ArrayAttr(shape));
      shape[0] = batch / worldSize;
      arg.setType(RankedTensorType::get(shape, t.getElementType()));
    }
    fn.setFunctionType(FunctionType::get(
        fn.getContext(), fn.getBody().front().getArgumentTypes(),
        fn.getResultTypes()));
    for (Operation &op : fn.getBody().front().without_terminator())
      if (failed(nn::reinferResultTypes(&op)))
        return op.emitError()
               << "cannot split the batch over "
               << static_cast<int64_t>(worldSize) << " ranks here";
    return success();
  }

  /// Moves compute from the model's float type to pdt: float constants are
  /// rebuilt in pdt and every nn op's result types are re-inferred from its
  /// (now pdt) operands. Casts keep their target type and the optimizer
  /// updates keep the master's type.
  LogicalResult retypeCompute(func::FuncOp fn, Type modelType, Type pdt) {
    for (Operation &op : llvm::make_early_inc_range(fn.getBody().front())) {
      auto c = dyn_cast<arith::ConstantOp>(op);
      if (!c)
        continue;
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      auto t = dyn_cast<RankedTensorType>(c.getType());
      if (!dense || !t || t.getElementType() != modelType || !dense.isSplat())
        continue;
      // Constants that feed only optimizer updates stay in the master type.
      if (llvm::all_of(c->getUsers(), [](Operation *u) {
            return isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(u);
          }))
        continue;
      OpBuilder b(c);
      auto nt = RankedTensorType::get(t.getShape(), pdt);
      double v = dense.getSplatValue<APFloat>().convertToDouble();
      auto nc = arith::ConstantOp::create(
          b, c.getLoc(), DenseElementsAttr::get(nt, FloatAttr::get(pdt, v)));
      c.replaceAllUsesWith(nc.getResult());
      c.erase();
    }
    for (Operation &op : fn.getBody().front().without_terminator()) {
      if (failed(nn::reinferResultTypes(&op)))
        return op.emitError()
               << "cannot compute in the requested param-dtype here";
    }
    return success();
  }

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
    // The grid: replicas × shardGroup ranks (HSDP); one shard group otherwise.
    int64_t shardGroup = worldSize;
    if (strategy == Strategy::HybridShard) {
      shardGroup = shardSize > 0 ? static_cast<int64_t>(shardSize) : worldSize;
      if (worldSize % shardGroup != 0) {
        module.emitError()
            << "fsdp-shard: hybrid-shard needs shard-size to divide world-size "
            << static_cast<int64_t>(worldSize) << ", got " << shardGroup;
        return signalPassFailure();
      }
    } else if (shardSize > 0 && shardSize != worldSize) {
      module.emitError()
          << "fsdp-shard: shard-size is only for strategy=hybrid-shard";
      return signalPassFailure();
    }
    const bool replicatedParams =
        strategy == Strategy::NoShard || strategy == Strategy::ShardOptimizer;
    const bool replicatedState = strategy == Strategy::NoShard;

    // Mixed precision (FSDP MixedPrecision / MixedPrecisionPolicy).
    Type pdtOption = floatType(paramDtype), rdtOption = floatType(reduceDtype);
    OpBuilder b(module);
    MLIRContext *ctx = &getContext();
    module->setAttr(kWorldSizeAttr, b.getI64IntegerAttr(worldSize));
    module->setAttr(kStrategyAttr, StrategyAttr::get(ctx, strategy));
    module->setAttr(kReplicasAttr, b.getI64IntegerAttr(worldSize / shardGroup));
    module->setAttr(kShardSizeAttr, b.getI64IntegerAttr(shardGroup));
    if (failed(splitBatch(fn)))
      return signalPassFailure();

    // Flat layout of each unit.
    for (UnitOp unit : unitOps) {
      SmallVector<int64_t> offsets;
      int64_t numel = 0;
      for (unsigned i = 0; i < unit.getParams().size(); ++i) {
        offsets.push_back(numel);
        numel += unit.getParamNumel(i);
      }
      unit.setOffsets(offsets);
      unit.setNumel(numel);
      unit.setPaddedNumel(::fsdp::paddedNumel(numel, shardGroup));
      unit.setShardNumel(::fsdp::shardNumel(numel, shardGroup));
    }

    // Index the arguments.
    llvm::StringMap<unsigned> paramArg, expAvgArg, expAvgSqArg;
    Value step;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      if (auto fqn = fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr))
        paramArg[fqn.getValue()] = i;
      if (auto kind = fn.getArgAttrOfType<StringAttr>(i, nn::kOptStateAttr)) {
        StringRef of =
            fn.getArgAttrOfType<StringAttr>(i, nn::kParamOfAttr).getValue();
        (kind.getValue() == "exp_avg" ? expAvgArg : expAvgSqArg)[of] = i;
      }
      if (fn.getArgAttr(i, nn::kStepAttr))
        step = fn.getArgument(i);
    }

    Block &block = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    Type modelType = unitOps.front().getElementType();
    for (UnitOp unit : unitOps)
      if (unit.getElementType() != modelType) {
        unit.emitOpError() << "has element type " << unit.getElementType()
                           << " but unit @" << unitOps.front().getSymName()
                           << " has " << modelType
                           << ": one model, one parameter dtype";
        return signalPassFailure();
      }
    // pdt: the dtype of gathered parameters and compute; rdt: of gradient
    // reduction. Master parameters and optimizer state keep modelType.
    Type pdt = pdtOption ? pdtOption : modelType;
    Type rdt = rdtOption ? rdtOption : pdt;
    const bool mixed = pdt != modelType;
    const bool separate = masterWeights == MasterWeights::Separate;
    if (separate && !mixed) {
      module.emitError()
          << "fsdp-shard: master-weights=separate needs a param-dtype narrower "
             "than the parameters' "
          << modelType;
      return signalPassFailure();
    }
    // With separate masters the param-dtype copy is replicated unless the
    // strategy shards parameters (ZeRO-1/2 keep fp16 parameters whole); the
    // f32 master is sharded unless nothing is (DDP).
    const bool lowFull = strategy == Strategy::NoShard ||
                         strategy == Strategy::ShardOptimizer ||
                         strategy == Strategy::ShardGradOp;
    const bool masterFull = separate ? replicatedState : replicatedParams;
    if (mixed) {
      // Float data enters compute in pdt.
      OpBuilder top(&block, block.begin());
      for (BlockArgument arg : fn.getArguments()) {
        auto t = dyn_cast<RankedTensorType>(arg.getType());
        if (!fn.getArgAttr(arg.getArgNumber(), nn::kDataAttr) || !t ||
            !isa<FloatType>(t.getElementType()))
          continue;
        auto c = nn::CastOp::create(
            top, arg.getLoc(), RankedTensorType::get(t.getShape(), pdt), arg);
        arg.replaceAllUsesExcept(c, c);
      }
    }
    llvm::BitVector eraseArgs(fn.getNumArguments());
    SmallVector<Value> results;
    SmallVector<Attribute> resultAttrs;
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (fn.getResultAttr(i, nn::kLossAttr)) {
        results.push_back(ret.getOperand(i));
        resultAttrs.push_back(fn.getResultAttrDict(i));
      }
    if (results.size() != 1) {
      fn.emitError() << "expects exactly one result marked 'nn.loss'";
      return signalPassFailure();
    }

    auto roleAttrs = [&](UnitOp unit, StringRef role, bool full) {
      SmallVector<NamedAttribute> attrs{
          b.getNamedAttr(kUnitAttr, FlatSymbolRefAttr::get(unit)),
          b.getNamedAttr(kRoleAttr, RoleAttr::get(ctx, *symbolizeRole(role)))};
      if (full)
        attrs.push_back(
            b.getNamedAttr(kLayoutAttr, LayoutAttr::get(ctx, Layout::Full)));
      return b.getDictionaryAttr(attrs);
    };
    // A unit-role argument: this rank's shard, or the whole padded flat buffer.
    auto addUnitArg = [&](UnitOp unit, StringRef role, bool full,
                          Type elt = Type()) -> Value {
      int64_t n = full ? static_cast<int64_t>(*unit.getPaddedNumel())
                       : static_cast<int64_t>(*unit.getShardNumel());
      auto t = RankedTensorType::get({n}, elt ? elt : unit.getElementType());
      (void)fn.insertArgument(fn.getNumArguments(), t,
                              roleAttrs(unit, role, full), unit.getLoc());
      eraseArgs.resize(fn.getNumArguments());
      return fn.getArguments().back();
    };

    for (UnitOp unit : unitOps) {
      int64_t shard = *unit.getShardNumel(), padded = *unit.getPaddedNumel();
      Type elt = unit.getElementType();
      auto flatType = RankedTensorType::get({padded}, elt);
      auto lowFlatType = RankedTensorType::get({padded}, pdt);
      auto unitRef = FlatSymbolRefAttr::get(unit);
      auto shardGroupAttr = GroupAttr::get(ctx, Group::Shard);
      // The master (or only) parameter copy, and with separate masters the
      // persistent param-dtype copy.
      Value pArg = addUnitArg(unit, separate ? "master" : "param", masterFull);
      Value lowArg =
          separate ? addUnitArg(unit, "param", lowFull, pdt) : Value();

      // Sharded parameters are gathered once at the top (fsdp-collectives
      // places the real gathers); replicated ones are viewed directly.
      // cast-on-gather casts the shard to pdt before gathering (FSDP2).
      b.setInsertionPointToStart(&block);
      Location uloc = unit.getLoc();
      auto castTo = [&](Value v, Type t) -> Value {
        auto vt = cast<RankedTensorType>(v.getType());
        if (vt.getElementType() == t)
          return v;
        return nn::CastOp::create(b, uloc,
                                  RankedTensorType::get(vt.getShape(), t), v);
      };
      Value full;
      if (separate)
        full = lowFull
                   ? lowArg
                   : AllGatherOp::create(b, uloc, lowFlatType, unitRef, lowArg,
                                         shardGroupAttr,
                                         /*async=*/nullptr, /*bucket=*/nullptr)
                         .getResult();
      else if (replicatedParams)
        full = castTo(pArg, pdt);
      else
        full = AllGatherOp::create(b, uloc, lowFlatType, unitRef,
                                   castTo(pArg, pdt), shardGroupAttr,
                                   /*async=*/nullptr, /*bucket=*/nullptr);
      SmallVector<Value> grads;
      SmallVector<int64_t> gradOffsets;
      SmallVector<Operation *> updates;
      for (auto [i, fqnAttr] : llvm::enumerate(unit.getParams())) {
        StringRef fqn = cast<StringAttr>(fqnAttr).getValue();
        unsigned argIdx = paramArg.lookup(fqn);
        BlockArgument arg = fn.getArgument(argIdx);
        eraseArgs.set(argIdx);
        auto viewType = RankedTensorType::get(
            cast<RankedTensorType>(arg.getType()).getShape(), pdt);
        Value view = ParamViewOp::create(
            b, arg.getLoc(), viewType, full, b.getStringAttr(fqn),
            b.getI64IntegerAttr((*unit.getOffsets())[i]));
        // The update ops of this parameter, before their operand is replaced.
        for (Operation *user : arg.getUsers())
          if (isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(user) &&
              user->getOperand(0) == arg)
            updates.push_back(user);
        arg.replaceAllUsesWith(view);
        if (unit.getTrainable()[i] && updates.size() != grads.size() + 1) {
          emitError(arg.getLoc())
              << "expects exactly one optimizer update of trainable parameter '"
              << fqn << "' (run fsdp-autodiff and fsdp-optimizer first)";
          return signalPassFailure();
        }
        if (unit.getTrainable()[i]) {
          grads.push_back(updates.back()->getOperand(1));
          gradOffsets.push_back((*unit.getOffsets())[i]);
        }
        for (StringRef kind : {"exp_avg", "exp_avg_sq"}) {
          auto &map = kind == StringRef("exp_avg") ? expAvgArg : expAvgSqArg;
          if (map.count(fqn))
            eraseArgs.set(map.lookup(fqn));
        }
      }
      if (updates.empty())
        continue; // frozen unit: its shard never changes and is not returned

      // The gradient: packed, then averaged over all ranks — reduce-scattered
      // in the shard group (and, for HSDP, all-reduced across replicas), or
      // all-reduced whole for DDP.
      b.setInsertionPoint(ret);
      Location loc = updates.front()->getLoc();
      // Gradients are computed in pdt, reduced in rdt and applied in the
      // master's dtype.
      uloc = loc;
      auto shardType = RankedTensorType::get({shard}, elt);
      auto reduceShardType = RankedTensorType::get({shard}, rdt);
      auto avg = ReductionAttr::get(ctx, Reduction::Avg);
      auto reduceGrads = [&](ValueRange unitGrads) -> Value {
        Value flat = FlattenOp::create(b, loc, lowFlatType, unitRef, unitGrads,
                                       b.getDenseI64ArrayAttr(gradOffsets));
        Value toReduce = castTo(flat, rdt);
        Value reduced;
        if (replicatedState) {
          reduced =
              AllReduceOp::create(b, loc, toReduce.getType(), unitRef, toReduce,
                                  avg, GroupAttr::get(ctx, Group::World));
        } else {
          reduced = ReduceScatterOp::create(b, loc, reduceShardType, unitRef,
                                            toReduce, avg, shardGroupAttr,
                                            /*async=*/nullptr,
                                            /*bucket=*/nullptr);
          if (strategy == Strategy::HybridShard && worldSize / shardGroup > 1)
            reduced =
                AllReduceOp::create(b, loc, reduceShardType, unitRef, reduced,
                                    avg, GroupAttr::get(ctx, Group::Replicate));
        }
        return castTo(reduced, elt);
      };
      // With micro-batches (fsdp-micro-batch) and accumulate=sharded, each
      // micro-batch's gradients are reduced and the reduced shards summed;
      // otherwise (one micro-batch, or no_sync) the accumulated gradient is
      // reduced once.
      SmallVector<SmallVector<Value>> perMicroBatch;
      if (accumulate == Accumulate::Sharded) {
        for (Value g : grads) {
          SmallVector<Value> leaves;
          std::function<void(Value)> collect = [&](Value v) {
            Operation *def = v.getDefiningOp();
            if (def && isa<nn::AddOp>(def) &&
                def->hasAttr(nn::kAccumulateAttr)) {
              collect(def->getOperand(0));
              collect(def->getOperand(1));
            } else {
              leaves.push_back(v);
            }
          };
          collect(g);
          if (perMicroBatch.empty())
            perMicroBatch.resize(leaves.size());
          if (leaves.size() != perMicroBatch.size()) {
            perMicroBatch.clear();
            break;
          }
          for (auto [j, leaf] : llvm::enumerate(leaves))
            perMicroBatch[j].push_back(leaf);
        }
      }
      Value gShard;
      if (perMicroBatch.size() > 1) {
        for (auto &mbGrads : perMicroBatch) {
          Value r = reduceGrads(mbGrads);
          gShard =
              gShard ? nn::AddOp::create(b, loc, gShard, r).getResult() : r;
        }
      } else {
        gShard = reduceGrads(grads);
      }
      // ZeRO-1 updates this rank's slice of the replicated parameters.
      Value pUpdate = pArg;
      if (strategy == Strategy::ShardOptimizer && masterFull)
        pUpdate = LocalShardOp::create(b, loc, shardType, unitRef, pArg,
                                       shardGroupAttr);
      Operation *first = updates.front();
      for (Operation *u : updates)
        if (u->getName() != first->getName() ||
            u->getAttrDictionary() != first->getAttrDictionary()) {
          u->emitOpError()
              << "differs from the other updates of unit '" << unit.getSymName()
              << "': one flat shard takes one optimizer configuration";
          return signalPassFailure();
        }
      // The updated parameters: the master (ZeRO-1: its slice all-gathered
      // back when replicated) and, with separate masters, the new param-dtype
      // copy (all-gathered when that copy is replicated but the master is not).
      auto newParam = [&](Value updated) -> Value {
        if (strategy != Strategy::ShardOptimizer || !masterFull)
          return updated;
        return AllGatherOp::create(b, loc, flatType, unitRef, updated,
                                   shardGroupAttr, nullptr, nullptr);
      };
      auto addLowCopy = [&](Value updated) {
        if (!separate)
          return;
        Value low = castTo(updated, pdt);
        if (lowFull && !masterFull)
          low = AllGatherOp::create(b, loc, lowFlatType, unitRef, low,
                                    shardGroupAttr, nullptr, nullptr);
        results.push_back(low);
        resultAttrs.push_back(roleAttrs(unit, "param", lowFull));
      };
      StringRef masterRole = separate ? "master" : "param";
      if (auto adam = dyn_cast<nn::AdamWUpdateOp>(first)) {
        Value m = addUnitArg(unit, "exp_avg", replicatedState);
        Value v = addUnitArg(unit, "exp_avg_sq", replicatedState);
        auto op = nn::AdamWUpdateOp::create(
            b, loc, pUpdate, gShard, m, v, step, adam.getLrAttr(),
            adam.getBeta1Attr(), adam.getBeta2Attr(), adam.getEpsAttr(),
            adam.getWeightDecayAttr());
        results.append({newParam(op.getNewParam()), op.getNewExpAvg(),
                        op.getNewExpAvgSq()});
        resultAttrs.push_back(roleAttrs(unit, masterRole, masterFull));
        resultAttrs.push_back(roleAttrs(unit, "exp_avg", replicatedState));
        resultAttrs.push_back(roleAttrs(unit, "exp_avg_sq", replicatedState));
        addLowCopy(op.getNewParam());
      } else {
        auto sgd = cast<nn::SgdUpdateOp>(first);
        Value updated =
            nn::SgdUpdateOp::create(b, loc, pUpdate.getType(), pUpdate, gShard,
                                    sgd.getLrAttr(), sgd.getWeightDecayAttr());
        results.push_back(newParam(updated));
        resultAttrs.push_back(roleAttrs(unit, masterRole, masterFull));
        addLowCopy(updated);
      }
      // The per-parameter updates and their results die with the old return.
      for (Operation *u : updates)
        for (Value r : u->getResults())
          for (OpOperand &use : llvm::make_early_inc_range(r.getUses()))
            if (use.getOwner() != ret) {
              use.getOwner()->emitOpError()
                  << "uses an updated parameter inside the step";
              return signalPassFailure();
            }
      ret->setOperands(
          results); // drop uses of the old updates before erasing them
      for (Operation *u : updates)
        u->erase();
    }

    ret->setOperands(results);
    if (mixed && failed(retypeCompute(fn, modelType, pdt)))
      return signalPassFailure();
    fn.setFunctionType(FunctionType::get(&getContext(), fn.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    fn.setAllResultAttrs(resultAttrs);
    if (failed(fn.eraseArguments(eraseArgs))) {
      fn.emitError() << "could not remove the replicated parameter arguments";
      return signalPassFailure();
    }
  }
};
} // namespace
