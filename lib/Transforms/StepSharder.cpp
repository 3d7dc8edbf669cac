//===- StepSharder.cpp - fsdp-shard's rewrite of the step, unit by unit --===//
//
// StepSharder holds the state of the rewrite (the argument index, the new
// results, the arguments to erase) and does it in steps: index the
// arguments, cast float data to param-dtype, keep the loss, then per unit
// its flat arguments, gather, views, gradient reduction and update, and
// last the new function type. See Shard.cpp for the IR before and after.
//
//===----------------------------------------------------------------------===//
#include "StepSharder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"

#include <functional>

#define DEBUG_TYPE "fsdp-shard"

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The ops on the loss's side of the step: the forward from each
/// nn.cross_entropy to the returned loss (the micro-batch losses' sum and
/// mean) and the backward from the seed to each nn.cross_entropy_grad's
/// dloss (through scalars: the seed times the loss scale). They compute in
/// the loss's type, f32 under 16-bit compute (nn::lossElementType).
llvm::SmallPtrSet<Operation *, 16> lossSideOps(Block &block) {
  llvm::SmallPtrSet<Operation *, 16> ops;
  SmallVector<Value> dloss;
  for (Operation &op : block.without_terminator()) {
    if (isa<nn::CrossEntropyOp, nn::VocabParallelCrossEntropyOp>(op) ||
        llvm::any_of(op.getOperands(), [&](Value v) {
          return v.getDefiningOp() && ops.contains(v.getDefiningOp());
        }))
      ops.insert(&op);
    if (auto g = dyn_cast<nn::CrossEntropyGradOp>(op))
      dloss.push_back(g.getGrad());
    if (auto g = dyn_cast<nn::VocabParallelCrossEntropyGradOp>(op))
      dloss.push_back(g.getGrad());
  }
  while (!dloss.empty()) {
    Operation *d = dloss.pop_back_val().getDefiningOp();
    if (!d || isa<arith::ConstantOp>(d) || !ops.insert(d).second)
      continue;
    for (Value v : d->getOperands())
      if (auto t = dyn_cast<RankedTensorType>(v.getType()); t && !t.getRank())
        dloss.push_back(v);
  }
  return ops;
}

/// If `op` is the VJP of the loss's upcast (fsdp-import --loss-dtype f32:
/// an nn.cast of the dlogits of an nn.cross_entropy_grad whose logits are an
/// nn.cast), the upcast's input type, which that VJP must cast back to;
/// null otherwise.
RankedTensorType lossUpcastVJPType(Operation *op) {
  auto c = dyn_cast<nn::CastOp>(op);
  if (!c)
    return {};
  auto g = c.getInput().getDefiningOp<nn::CrossEntropyGradOp>();
  auto up = g ? g.getLogits().getDefiningOp<nn::CastOp>() : nn::CastOp();
  if (!up)
    return {};
  return cast<RankedTensorType>(up.getInput().getType());
}

/// Moves compute from the model's float type to pdt: float constants are
/// rebuilt in pdt and every nn op's result types are re-inferred from its
/// (now pdt) operands. Casts keep their target type (but the VJP of the
/// loss's upcast casts back to pdt) and the optimizer updates keep the
/// master's type. The loss keeps f32 under 16-bit compute
/// (nn.cross_entropy of bf16/f16 logits is f32, as under torch.autocast):
/// the constants read on the loss's side (the seed, 1/k with micro-batches,
/// the mean's 1/k) are rebuilt in the loss's type, so that neither the
/// reported loss nor the backward's seed (times a loss scale of 2^16, past
/// f16's 65504) is rounded to 16 bits.
LogicalResult retypeCompute(func::FuncOp fn, Type modelType, Type pdt) {
  Block &block = fn.getBody().front();
  llvm::SmallPtrSet<Operation *, 16> lossSide = lossSideOps(block);
  Type lossType = nn::lossElementType(pdt);
  auto readsLoss = [&](OpOperand &use) {
    Operation *u = use.getOwner();
    // The returned loss (the first result): a pipeline stage without the
    // loss returns a constant zero, which stays in the loss's type.
    if (isa<func::ReturnOp>(u))
      return use.getOperandNumber() == 0;
    return lossSide.contains(u) ||
           (isa<nn::CrossEntropyGradOp>(u) &&
            use.get() == cast<nn::CrossEntropyGradOp>(u).getGrad()) ||
           (isa<nn::VocabParallelCrossEntropyGradOp>(u) &&
            use.get() ==
                cast<nn::VocabParallelCrossEntropyGradOp>(u).getGrad());
  };
  for (Operation &op : llvm::make_early_inc_range(block)) {
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
    double v = dense.getSplatValue<APFloat>().convertToDouble();
    llvm::SmallDenseMap<Type, Value, 2> rebuilt;
    auto in = [&](Type et) {
      Value &r = rebuilt[et];
      if (!r)
        r = arith::ConstantOp::create(
            b, c.getLoc(),
            DenseElementsAttr::get(RankedTensorType::get(t.getShape(), et),
                                   FloatAttr::get(et, v)));
      return r;
    };
    for (OpOperand &use : llvm::make_early_inc_range(c->getUses()))
      use.set(in(readsLoss(use) ? lossType : pdt));
    c.erase();
  }
  // A tied parameter's gradient from the other pipeline stage arrives in
  // the dtype that stage computes it in (fsdp-pipeline-micro-batch).
  for (RecvOp recv : block.getOps<RecvOp>()) {
    if (!recv->hasAttr(kPPTiedPeerAttr))
      continue;
    RankedTensorType t = recv.getToken().getType().getValueType();
    auto low = RankedTensorType::get(t.getShape(), pdt);
    recv.getToken().setType(FutureType::get(fn.getContext(), low));
    for (Operation *user : recv->getUsers())
      if (auto wait = dyn_cast<WaitOp>(user))
        wait.getResult().setType(low);
  }
  for (Operation &op : block.without_terminator()) {
    if (RankedTensorType back = lossUpcastVJPType(&op)) {
      // The loss's upcast keeps its f32 target; its VJP casts the f32
      // dlogits back to the upcast's input type (now pdt), as the backward
      // of torch's .float() does.
      op.getResult(0).setType(back);
      continue;
    }
    if (failed(nn::reinferResultTypes(&op)))
      return op.emitError()
             << "cannot compute in the requested param-dtype here";
  }
  return success();
}

/// Without mixed precision, removes identity casts (the loss's upcast of
/// fsdp-import --loss-dtype f32, and its VJP, in an f32 model): torch's
/// .float() of an f32 tensor returns the tensor itself, with no copy.
void eraseIdentityCasts(func::FuncOp fn) {
  fn.walk([](nn::CastOp c) {
    if (c.getInput().getType() == c.getResult().getType()) {
      c.getResult().replaceAllUsesWith(c.getInput());
      c.erase();
    }
  });
}

/// The gradients of a unit's trainable parameters, at their flat offsets.
struct UnitGradients {
  SmallVector<Value> grads;
  SmallVector<int64_t> offsets;
};

/// Rewrites the step function for one rank: the batch split, then each
/// unit's parameter and optimizer-state arguments replaced by flat buffers
/// (shards or whole) with gathers, views, the gradient reduction and one
/// update of the flat shard.
class StepSharder {
public:
  StepSharder(func::FuncOp fn, const ShardLayout &layout, Accumulate accumulate,
              const GradNormOptions &gradNorm)
      : fn(fn), block(fn.getBody().front()),
        ret(cast<func::ReturnOp>(block.getTerminator())), b(fn),
        ctx(b.getContext()), layout(layout), accumulate(accumulate),
        gradNorm(gradNorm) {}

  /// Indexes the parameter, optimizer-state and step arguments.
  void indexArguments() {
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
      if (fn.getArgAttr(i, nn::kLossScaleAttr))
        lossScale = fn.getArgument(i);
    }
    eraseArgs.resize(fn.getNumArguments());
  }

  /// Casts float data to pdt where compute is mixed precision. An
  /// activation or gradient received from another pipeline stage arrives in
  /// pdt (the sending stage computes it in pdt): retyped, not cast.
  void castData() {
    OpBuilder top(&block, block.begin());
    for (BlockArgument arg : fn.getArguments()) {
      auto t = dyn_cast<RankedTensorType>(arg.getType());
      if (!fn.getArgAttr(arg.getArgNumber(), nn::kDataAttr) || !t ||
          !isa<FloatType>(t.getElementType()))
        continue;
      // A pipeline stage's received activations and gradients travel in
      // pdt, as the stage that sends them computes them (Megatron-LM's p2p
      // tensors are in the compute dtype): retyped, not cast.
      if (fn.getArgAttr(arg.getArgNumber(), kPPInputAttr) ||
          fn.getArgAttr(arg.getArgNumber(), kPPOutputGradAttr)) {
        arg.setType(RankedTensorType::get(t.getShape(), layout.pdt));
        continue;
      }
      auto c = nn::CastOp::create(
          top, arg.getLoc(), RankedTensorType::get(t.getShape(), layout.pdt),
          arg);
      arg.replaceAllUsesExcept(c, c);
    }
    fn.setFunctionType(FunctionType::get(
        fn.getContext(), block.getArgumentTypes(), fn.getResultTypes()));
  }

  /// Keeps the loss as the first result (and the scheduled learning rate,
  /// nn.lr, returned at the end by finish()).
  LogicalResult keepLoss() {
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (fn.getResultAttr(i, nn::kLossAttr)) {
        results.push_back(ret.getOperand(i));
        resultAttrs.push_back(fn.getResultAttrDict(i));
      }
      if (fn.getResultAttr(i, nn::kLrAttr))
        extraResults.push_back({ret.getOperand(i), fn.getResultAttrDict(i)});
    }
    if (results.size() != 1)
      return fn.emitError() << "expects exactly one result marked 'nn.loss'";
    return success();
  }

  /// Replaces the unit's arguments by flat ones and its per-parameter
  /// updates by one update of the flat shard.
  LogicalResult shardUnit(UnitOp unit) {
    const bool separate = layout.separate;
    LLVM_DEBUG({
      auto whole = [](bool full) { return full ? "whole" : "sharded"; };
      llvm::dbgs() << "unit @" << unit.getSymName() << ": "
                   << (separate ? "master " : "parameters ")
                   << whole(layout.masterFull());
      if (separate)
        llvm::dbgs() << ", param-dtype copy " << whole(layout.lowFull());
      llvm::dbgs() << ", optimizer state " << whole(layout.replicatedState())
                   << "; gradients "
                   << (layout.replicatedState()
                           ? "all-reduced over the world"
                           : "reduce-scattered over the shard group");
      if (layout.allReducesReplicas())
        llvm::dbgs() << ", then all-reduced over " << layout.replicas()
                     << " replicas";
      llvm::dbgs() << "\n";
    });
    // The master (or only) parameter copy, and with separate masters the
    // persistent param-dtype copy.
    Value master = addUnitArg(unit, separate ? Role::Master : Role::Param,
                              layout.masterFull());
    Value low =
        separate ? addUnitArg(unit, Role::Param, layout.lowFull(), layout.pdt)
                 : Value();
    b.setInsertionPointToStart(&block);
    Value full = gatheredParams(unit, master, low);
    SmallVector<Operation *> updates;
    UnitGradients gradients;
    if (failed(viewParams(unit, full, updates, gradients)))
      return failure();
    if (updates.empty()) {
      LLVM_DEBUG(llvm::dbgs()
                 << "  frozen: not reduced, updated or returned\n");
      return success();
    }
    // The gradient: packed, then averaged over all ranks — reduce-scattered in
    // the shard group (and, for HSDP, all-reduced across replicas), or
    // all-reduced whole for DDP. Gradients are computed in pdt, reduced in rdt
    // and applied in the master's dtype.
    b.setInsertionPoint(ret);
    Location loc = updates.front()->getLoc();
    Value gradShard = reduceGradients(unit, gradients, loc);
    if (gradNorm.report || gradNorm.maxNorm > 0 || lossScale) {
      // The update waits for the global norm over every unit.
      pending.push_back({unit, std::move(updates), std::move(gradients), master,
                         gradShard, loc});
      return success();
    }
    return updateUnit(unit, updates, gradients, master, gradShard, loc);
  }

  /// Global gradient-norm clipping (torch.nn.utils.clip_grad_norm_,
  /// norm_type 2) over the units' reduced gradient shards, then their
  /// updates, each skipped when the norm is not finite (an inf/nan
  /// gradient: torch.amp.GradScaler.step's skip). With a loss scale (an
  /// nn.loss_scale argument, fsdp-autodiff's loss-scaling) the gradients
  /// are those of the loss times the scale: nn.grad_norm divides it out of
  /// the norm and the coefficient, and every gradient shard is multiplied by
  /// the coefficient in the master's dtype (GradScaler.unscale_, then the
  /// clip). Each rank's shard is a disjoint part of every gradient (its
  /// padding is zero: fsdp.flatten zero-fills it and the reduction keeps
  /// it), so the sum of squares is summed over the shard group alone:
  /// replicas (HSDP's replicate group) hold the same shards, and DDP's
  /// all-reduced gradients are whole on every rank.
  LogicalResult clipAndUpdate() {
    if (pending.empty())
      return success();
    b.setInsertionPoint(ret);
    Location loc = pending.front().loc;
    // Tensor parallelism: a unit is split across the tensor-parallel group
    // or replicated in it (fsdp-wrap); the split units' sums are summed over
    // the group as well, the replicated ones counted once.
    auto slices = pending.front()
                      .unit->getParentOfType<ModuleOp>()
                      ->getAttrOfType<DictionaryAttr>(kTensorSlicesAttr);
    Value total, replicated;
    for (PendingUpdate &p : pending) {
      if (isTiedCopy(p.unit))
        continue; // counted on the stage that holds the other copy
      Value ss = nn::SumSquaresOp::create(b, p.loc, p.gradShard);
      Value &sum =
          !slices || slices.get(cast<StringAttr>(p.unit.getParams()[0]))
              ? total
              : replicated;
      sum = sum ? nn::AddOp::create(b, p.loc, sum, ss).getResult() : ss;
    }
    if (!total && !replicated)
      return fn.emitError() << "the gradient norm has no unit to sum over "
                               "(every unit holds tied copies)";
    auto sumOver = [&](Value v, Group g) -> Value {
      return AllReduceOp::create(
          b, loc, v.getType(), FlatSymbolRefAttr::get(pending.back().unit), v,
          ReductionAttr::get(ctx, Reduction::Sum), GroupAttr::get(ctx, g));
    };
    bool overShard = !layout.replicatedState() && layout.shardGroup > 1;
    if (total && overShard)
      total = sumOver(total, Group::Shard);
    if (slices) {
      if (total)
        total = sumOver(total, Group::Tensor);
      if (replicated && overShard)
        replicated = sumOver(replicated, Group::Shard);
      if (replicated)
        total = total ? nn::AddOp::create(b, loc, total, replicated).getResult()
                      : replicated;
    }
    // Pipeline parallelism: each stage holds other parameters (a tied copy
    // is not held twice), so the stage's sum is summed over the pipeline
    // group, the ranks with this rank's index in every stage (Megatron-LM's
    // clip_grad_norm_ all-reduces over the model-parallel group, pipeline
    // ranks included; Narayanan et al., SC'21).
    if (groupSize(fn, Group::Pipeline).value_or(1) > 1)
      total = sumOver(total, Group::Pipeline);
    auto norm = nn::GradNormOp::create(b, loc, total, lossScale,
                                       gradNorm.maxNorm > 0
                                           ? b.getF64FloatAttr(gradNorm.maxNorm)
                                           : FloatAttr());
    extraResults.push_back(
        {norm.getNorm(), b.getDictionaryAttr(b.getNamedAttr(nn::kGradNormAttr,
                                                            b.getUnitAttr()))});
    for (PendingUpdate &p : pending) {
      Value g = p.gradShard;
      if (gradNorm.maxNorm > 0 || lossScale)
        g = nn::ScaleOp::create(b, p.loc, g, norm.getCoef());
      if (failed(updateUnit(p.unit, p.updates, p.gradients, p.master, g, p.loc,
                            norm.getNorm())))
        return failure();
    }
    return success();
  }

  /// A unit of tied parameters' copies on the later of their two pipeline
  /// stages (fsdp-wrap's `.tied_copy` units): the same gradient as the
  /// earlier stage's copy after their exchange.
  bool isTiedCopy(UnitOp unit) {
    auto stage = unit->getParentOfType<ModuleOp>()->getAttrOfType<IntegerAttr>(
        kPipelineStageAttr);
    if (!stage)
      return false;
    return llvm::all_of(unit.getParams(), [&](Attribute fqn) {
      auto it = paramArg.find(cast<StringAttr>(fqn).getValue());
      if (it == paramArg.end())
        return false;
      auto peer = fn.getArgAttrOfType<IntegerAttr>(it->second, kPPTiedPeerAttr);
      return peer && peer.getInt() < stage.getInt();
    });
  }

  /// The new function type and results; retypes compute to pdt.
  LogicalResult finish() {
    for (auto &[v, attrs] : extraResults) {
      results.push_back(v);
      resultAttrs.push_back(attrs);
    }
    ret->setOperands(results);
    if (layout.mixed() &&
        failed(retypeCompute(fn, layout.modelType, layout.pdt)))
      return failure();
    if (!layout.mixed())
      eraseIdentityCasts(fn);
    // The return's operands, not `results`: retypeCompute replaces the
    // constants it retypes (a pipeline stage's zero loss among them).
    fn.setFunctionType(
        FunctionType::get(ctx, fn.getArgumentTypes(), ret->getOperandTypes()));
    fn.setAllResultAttrs(resultAttrs);
    if (failed(fn.eraseArguments(eraseArgs)))
      return fn.emitError()
             << "could not remove the replicated parameter arguments";
    return success();
  }

private:
  DictionaryAttr roleAttrs(UnitOp unit, Role role, bool full) {
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr(kUnitAttr, FlatSymbolRefAttr::get(unit)),
        b.getNamedAttr(kRoleAttr, RoleAttr::get(ctx, role))};
    if (full)
      attrs.push_back(
          b.getNamedAttr(kLayoutAttr, LayoutAttr::get(ctx, Layout::Full)));
    return b.getDictionaryAttr(attrs);
  }

  /// A new unit-role argument: this rank's shard, or the whole padded flat
  /// buffer.
  Value addUnitArg(UnitOp unit, Role role, bool full, Type elt = Type()) {
    int64_t n = full ? static_cast<int64_t>(*unit.getPaddedNumel())
                     : static_cast<int64_t>(*unit.getShardNumel());
    auto t = RankedTensorType::get({n}, elt ? elt : unit.getElementType());
    (void)fn.insertArgument(fn.getNumArguments(), t,
                            roleAttrs(unit, role, full), unit.getLoc());
    eraseArgs.resize(fn.getNumArguments());
    return fn.getArguments().back();
  }

  Value castTo(Value v, Type t, Location loc) {
    auto vt = cast<RankedTensorType>(v.getType());
    if (vt.getElementType() == t)
      return v;
    return nn::CastOp::create(b, loc, RankedTensorType::get(vt.getShape(), t),
                              v);
  }

  /// The unit's gathered (or replicated) flat parameters in pdt.
  /// Sharded parameters are gathered once at the top (fsdp-collectives places
  /// the real gathers); replicated ones are viewed directly. cast-on-gather
  /// casts the shard to pdt before gathering (FSDP2).
  Value gatheredParams(UnitOp unit, Value master, Value low) {
    int64_t padded = *unit.getPaddedNumel();
    auto flatType = RankedTensorType::get({padded}, layout.pdt);
    auto unitRef = FlatSymbolRefAttr::get(unit);
    auto shardGroup = GroupAttr::get(ctx, Group::Shard);
    Location loc = unit.getLoc();
    if (layout.separate)
      return layout.lowFull() ? low
                              : AllGatherOp::create(b, loc, flatType, unitRef,
                                                    low, shardGroup,
                                                    /*async=*/nullptr,
                                                    /*bucket=*/nullptr)
                                    .getResult();
    if (layout.replicatedParams())
      return castTo(master, layout.pdt, loc);
    return AllGatherOp::create(b, loc, flatType, unitRef,
                               castTo(master, layout.pdt, loc), shardGroup,
                               /*async=*/nullptr, /*bucket=*/nullptr);
  }

  /// Views of each parameter into `full`, replacing the parameter's uses;
  /// collects the parameter's optimizer updates and gradients.
  LogicalResult viewParams(UnitOp unit, Value full,
                           SmallVectorImpl<Operation *> &updates,
                           UnitGradients &gradients) {
    for (auto [i, fqnAttr] : llvm::enumerate(unit.getParams())) {
      StringRef fqn = cast<StringAttr>(fqnAttr).getValue();
      int64_t offset = (*unit.getOffsets())[i];
      unsigned argIdx = paramArg.lookup(fqn);
      BlockArgument arg = fn.getArgument(argIdx);
      eraseArgs.set(argIdx);
      auto viewType = RankedTensorType::get(
          cast<RankedTensorType>(arg.getType()).getShape(), layout.pdt);
      Value view = ParamViewOp::create(b, arg.getLoc(), viewType, full,
                                       b.getStringAttr(fqn),
                                       b.getI64IntegerAttr(offset));
      // The update ops of this parameter, before their operand is replaced.
      for (Operation *user : arg.getUsers())
        if (isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(user) &&
            user->getOperand(0) == arg)
          updates.push_back(user);
      arg.replaceAllUsesWith(view);
      if (unit.getTrainable()[i]) {
        if (updates.size() != gradients.grads.size() + 1)
          return emitError(arg.getLoc())
                 << "expects exactly one optimizer update of trainable "
                    "parameter '"
                 << fqn << "' (run fsdp-autodiff and fsdp-optimizer first)";
        gradients.grads.push_back(updates.back()->getOperand(1));
        gradients.offsets.push_back(offset);
      }
      for (auto *map : {&expAvgArg, &expAvgSqArg})
        if (map->count(fqn))
          eraseArgs.set(map->lookup(fqn));
    }
    return success();
  }

  /// One reduction of `grads`: packed, reduced in rdt over the strategy's
  /// groups, cast back.
  Value reduce(UnitOp unit, ValueRange grads, ArrayRef<int64_t> offsets,
               Location loc) {
    auto unitRef = FlatSymbolRefAttr::get(unit);
    int64_t shard = *unit.getShardNumel(), padded = *unit.getPaddedNumel();
    auto avg = ReductionAttr::get(ctx, Reduction::Avg);
    Value flat =
        FlattenOp::create(b, loc, RankedTensorType::get({padded}, layout.pdt),
                          unitRef, grads, b.getDenseI64ArrayAttr(offsets));
    Value toReduce = castTo(flat, layout.rdt, loc);
    Value reduced;
    if (layout.replicatedState()) {
      // DDP: over every data-parallel rank, the world without tensor
      // parallelism (the shard group, whose size it then is).
      Group dataParallel = groupSize(unit, Group::Tensor).value_or(1) > 1
                               ? Group::Shard
                               : Group::World;
      reduced =
          AllReduceOp::create(b, loc, toReduce.getType(), unitRef, toReduce,
                              avg, GroupAttr::get(ctx, dataParallel));
    } else {
      auto shardType = RankedTensorType::get({shard}, layout.rdt);
      reduced = ReduceScatterOp::create(b, loc, shardType, unitRef, toReduce,
                                        avg, GroupAttr::get(ctx, Group::Shard),
                                        /*async=*/nullptr,
                                        /*bucket=*/nullptr);
      if (layout.allReducesReplicas())
        reduced = AllReduceOp::create(b, loc, shardType, unitRef, reduced, avg,
                                      GroupAttr::get(ctx, Group::Replicate));
    }
    return castTo(reduced, unit.getElementType(), loc);
  }

  /// This rank's reduced gradient shard, in the master's dtype.
  /// With micro-batches (fsdp-micro-batch) and accumulate=sharded, each
  /// micro-batch's gradients are reduced and the reduced shards summed;
  /// otherwise (one micro-batch, or no_sync) the accumulated gradient is
  /// reduced once.
  Value reduceGradients(UnitOp unit, const UnitGradients &gradients,
                        Location loc) {
    SmallVector<SmallVector<Value>> perMicroBatch;
    if (accumulate == Accumulate::Sharded) {
      for (Value g : gradients.grads) {
        SmallVector<Value> leaves;
        std::function<void(Value)> collect = [&](Value v) {
          Operation *def = v.getDefiningOp();
          if (isa_and_nonnull<nn::AddOp>(def) &&
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
    if (perMicroBatch.size() <= 1)
      return reduce(unit, gradients.grads, gradients.offsets, loc);
    LLVM_DEBUG(llvm::dbgs()
               << "  reduced per micro-batch (" << perMicroBatch.size()
               << "), shards accumulated\n");
    // Each sum is marked nn.accumulate: fsdp-schedule moves it right after
    // its micro-batch's reduction and the memory plan writes it over the
    // running sum, so that one shard accumulates whatever the micro-batch
    // count (the running sum first, so the bits are those of ((r0+r1)+r2)).
    Value sum;
    for (SmallVector<Value> &grads : perMicroBatch) {
      Value r = reduce(unit, grads, gradients.offsets, loc);
      if (!sum) {
        sum = r;
        continue;
      }
      auto add = nn::AddOp::create(b, loc, sum, r);
      add->setAttr(nn::kAccumulateAttr, b.getUnitAttr());
      sum = add.getResult();
    }
    return sum;
  }

  /// The weight decay of the unit's flat update and, where some parameters
  /// of the unit have weight decay 0 (fsdp-optimizer's no-decay) and others
  /// not, their [begin, end) element ranges in the flat buffer (adjacent
  /// ranges merged). Every parameter's update reads the same `no_decay`
  /// list on every rank; the runtime intersects it with the rank's shard.
  LogicalResult weightDecayGroups(ArrayRef<Operation *> updates,
                                  const UnitGradients &gradients, FloatAttr &wd,
                                  SmallVectorImpl<int64_t> &noDecay) {
    auto wdOf = [](Operation *u) {
      return u->getAttrOfType<FloatAttr>("weight_decay").getValueAsDouble();
    };
    double common = 0;
    for (Operation *u : updates) {
      double w = wdOf(u);
      if (w == 0)
        continue;
      if (common != 0 && w != common)
        return u->emitOpError()
               << "has weight decay " << w
               << " but another update of its unit has " << common
               << ": a unit takes one weight decay besides 0 (no-decay)";
      common = w;
    }
    wd = b.getF64FloatAttr(common);
    if (wd.getValueAsDouble() == 0)
      return success();
    SmallVector<std::pair<int64_t, int64_t>> ranges;
    for (auto [k, u] : llvm::enumerate(updates)) {
      int64_t numel =
          cast<RankedTensorType>(gradients.grads[k].getType()).getNumElements();
      if (wdOf(u) == 0 && numel > 0)
        ranges.push_back({gradients.offsets[k], gradients.offsets[k] + numel});
    }
    llvm::sort(ranges);
    for (auto [begin, end] : ranges) {
      if (!noDecay.empty() && noDecay.back() == begin)
        noDecay.back() = end;
      else
        noDecay.append({begin, end});
    }
    return success();
  }

  /// The flat shard's optimizer update, and the results it returns;
  /// skipped where `skipNorm` (the global gradient norm) is not finite.
  LogicalResult updateUnit(UnitOp unit, ArrayRef<Operation *> updates,
                           const UnitGradients &gradients, Value master,
                           Value gradShard, Location loc,
                           Value skipNorm = Value()) {
    auto unitRef = FlatSymbolRefAttr::get(unit);
    auto shardGroup = GroupAttr::get(ctx, Group::Shard);
    Type elt = unit.getElementType();
    int64_t shard = *unit.getShardNumel(), padded = *unit.getPaddedNumel();
    const bool masterFull = layout.masterFull(), lowFull = layout.lowFull();
    const bool stateFull = layout.replicatedState();
    Value toUpdate = master;
    if (layout.updatesSlice())
      toUpdate =
          LocalShardOp::create(b, loc, RankedTensorType::get({shard}, elt),
                               unitRef, master, shardGroup);
    Operation *first = updates.front();
    auto lrValueOf = [](Operation *u) -> Value {
      if (auto a = dyn_cast<nn::AdamWUpdateOp>(u))
        return a.getLrValue();
      return cast<nn::SgdUpdateOp>(u).getLrValue();
    };
    auto configOf = [](Operation *u) {
      NamedAttrList attrs(u->getAttrDictionary());
      attrs.erase("weight_decay");
      return attrs.getDictionary(u->getContext());
    };
    for (Operation *u : updates)
      if (u->getName() != first->getName() || configOf(u) != configOf(first) ||
          lrValueOf(u) != lrValueOf(first))
        return u->emitOpError()
               << "differs from the other updates of unit '"
               << unit.getSymName()
               << "': one flat shard takes one optimizer configuration";
    FloatAttr wd;
    SmallVector<int64_t> noDecayRanges;
    if (failed(weightDecayGroups(updates, gradients, wd, noDecayRanges)))
      return failure();
    DenseI64ArrayAttr noDecay =
        noDecayRanges.empty() ? nullptr : b.getDenseI64ArrayAttr(noDecayRanges);
    // The update's operands are this rank's shard unless the master is whole
    // and updated whole (DDP).
    UnitAttr sharded = noDecay && (!masterFull || layout.updatesSlice())
                           ? b.getUnitAttr()
                           : nullptr;
    // The updated parameters: the master (ZeRO-1: its slice all-gathered back
    // when replicated) and, with separate masters, the new param-dtype copy
    // (all-gathered when that copy is replicated but the master is not).
    auto newParam = [&](Value updated) -> Value {
      if (!layout.updatesSlice())
        return updated;
      return AllGatherOp::create(b, loc, RankedTensorType::get({padded}, elt),
                                 unitRef, updated, shardGroup, nullptr,
                                 nullptr);
    };
    auto addLowCopy = [&](Value updated) {
      if (!layout.separate)
        return;
      Value low = castTo(updated, layout.pdt, loc);
      if (lowFull && !masterFull)
        low = AllGatherOp::create(b, loc,
                                  RankedTensorType::get({padded}, layout.pdt),
                                  unitRef, low, shardGroup, nullptr, nullptr);
      results.push_back(low);
      resultAttrs.push_back(roleAttrs(unit, Role::Param, lowFull));
    };
    Role masterRole = layout.separate ? Role::Master : Role::Param;
    if (auto adam = dyn_cast<nn::AdamWUpdateOp>(first)) {
      Value m = addUnitArg(unit, Role::ExpAvg, stateFull);
      Value v = addUnitArg(unit, Role::ExpAvgSq, stateFull);
      auto op = nn::AdamWUpdateOp::create(
          b, loc, toUpdate, gradShard, m, v, step, adam.getLrValue(), skipNorm,
          adam.getLrAttr(), adam.getBeta1Attr(), adam.getBeta2Attr(),
          adam.getEpsAttr(), wd, noDecay, sharded);
      results.append(
          {newParam(op.getNewParam()), op.getNewExpAvg(), op.getNewExpAvgSq()});
      resultAttrs.push_back(roleAttrs(unit, masterRole, masterFull));
      resultAttrs.push_back(roleAttrs(unit, Role::ExpAvg, stateFull));
      resultAttrs.push_back(roleAttrs(unit, Role::ExpAvgSq, stateFull));
      addLowCopy(op.getNewParam());
    } else {
      auto sgd = cast<nn::SgdUpdateOp>(first);
      Value updated = nn::SgdUpdateOp::create(
          b, loc, toUpdate.getType(), toUpdate, gradShard, sgd.getLrValue(),
          skipNorm, sgd.getLrAttr(), wd, noDecay, sharded);
      results.push_back(newParam(updated));
      resultAttrs.push_back(roleAttrs(unit, masterRole, masterFull));
      addLowCopy(updated);
    }
    // The per-parameter updates and their results die with the old return.
    for (Operation *u : updates)
      for (Value r : u->getResults())
        for (OpOperand &use : llvm::make_early_inc_range(r.getUses()))
          if (use.getOwner() != ret)
            return use.getOwner()->emitOpError()
                   << "uses an updated parameter inside the step";
    ret->setOperands(results); // drop uses of the old updates before erasing
    for (Operation *u : updates)
      u->erase();
    return success();
  }

  func::FuncOp fn;
  Block &block;
  func::ReturnOp ret;
  OpBuilder b;
  MLIRContext *ctx;
  const ShardLayout &layout;
  Accumulate accumulate;
  const GradNormOptions &gradNorm;
  /// A unit's reduced gradient shard waiting for the global norm.
  struct PendingUpdate {
    UnitOp unit;
    SmallVector<Operation *> updates;
    UnitGradients gradients;
    Value master, gradShard;
    Location loc;
  };
  SmallVector<PendingUpdate> pending;
  /// Results after the units' (nn.lr, nn.grad_norm) with their attributes.
  SmallVector<std::pair<Value, DictionaryAttr>> extraResults;
  llvm::StringMap<unsigned> paramArg, expAvgArg, expAvgSqArg;
  Value step, lossScale;
  llvm::BitVector eraseArgs;
  SmallVector<Value> results;
  SmallVector<Attribute> resultAttrs;
};
} // namespace

LogicalResult mlir::fsdp::shardStep(func::FuncOp fn, ArrayRef<UnitOp> units,
                                    const ShardLayout &layout,
                                    Accumulate accumulate,
                                    const GradNormOptions &gradNorm) {
  StepSharder sharder(fn, layout, accumulate, gradNorm);
  sharder.indexArguments();
  if (layout.mixed())
    sharder.castData();
  if (failed(sharder.keepLoss()))
    return failure();
  for (UnitOp unit : units)
    if (failed(sharder.shardUnit(unit)))
      return failure();
  if (failed(sharder.clipAndUpdate()))
    return failure();
  return sharder.finish();
}
