//===- Optimizer.cpp - fsdp-optimizer: append the parameter update --------===//
#include "GlobOptions.h"
#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPOPTIMIZER
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// A trainable parameter's update: its gradient (a result of fsdp-autodiff)
/// and the argument it updates.
struct ParamUpdate {
  Value grad;
  unsigned arg;
};

/// The step function's optimizer state and rate, as arguments and ops
/// appended by appendState.
struct OptimizerState {
  SmallVector<Value> expAvg, expAvgSq; // AdamW: one per update
  Value step, totalSteps;              // nn.step, nn.total_steps (or null)
  Value lr;                            // the nn.lr_schedule (or null)
};

/// The updated values the step returns after its loss.
struct UpdatedState {
  SmallVector<Value> params, expAvg, expAvgSq;
};

/// Appends the update of every trainable parameter. Before (fsdp-autodiff):
///   func.func @f(..., %w {nn.param = "fc.weight"}) -> (loss, grad_of
///   fc.weight)
///     return %loss, %dw
/// after (AdamW):
///   func.func @f(..., %w, %m {exp_avg}, %v {exp_avg_sq}, %step {nn.step})
///     %w2, %m2, %v2 = nn.adamw_update %w, %dw, %m, %v, %step
///     return %loss, %w2, %m2, %v2
/// (with a schedule, an nn.lr_schedule of %step that every update reads and
/// the step returns last).
struct FSDPOptimizerPass
    : mlir::fsdp::impl::FSDPOptimizerBase<FSDPOptimizerPass> {
  using Base::Base;

protected:
  void runOnOperation() override {
    if (failed(checkOptions()))
      return signalPassFailure();
    FailureOr<func::FuncOp> maybeFn = getStepFunction(getOperation());
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    llvm::StringMap<unsigned> paramArg;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto fqn = fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr))
        paramArg[fqn.getValue()] = i;
    llvm::StringSet<> noDecayFqns;
    Value loss;
    SmallVector<ParamUpdate> updates;
    if (failed(matchNoDecay(fn, paramArg, noDecayFqns)) ||
        failed(collectUpdates(fn, paramArg, loss, updates)))
      return signalPassFailure();

    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    OpBuilder b(ret);
    OptimizerState state = appendState(b, fn, updates);
    UpdatedState updated = createUpdates(b, fn, updates, state, noDecayFqns);
    replaceReturn(b, fn, loss, updates, state, updated);
  }

  /// The options' ranges and combinations.
  LogicalResult checkOptions() {
    ModuleOp module = getOperation();
    // Finite too: an inf rate or decay would pass the comparisons and turn
    // every parameter into inf or nan at the first step.
    if (!(lr > 0) || !(eps > 0) || !(beta1 >= 0) || !(beta1 < 1) ||
        !(beta2 >= 0) || !(beta2 < 1) || !(weightDecay >= 0) ||
        !std::isfinite(lr) || !std::isfinite(eps) ||
        !std::isfinite(weightDecay))
      return module.emitError()
             << "fsdp-optimizer: expects finite lr > 0, eps > 0, betas in "
                "[0, 1) and weight-decay >= 0";
    // SGD has no moments: a beta or eps for it is a mistake, not a no-op.
    // (By value: a pass built from an options struct, as fsdp-pipeline
    // builds it, has every option "given"; the pipeline refuses a default
    // value given explicitly.)
    if (optimizer == OptimizerKind::SGD)
      for (auto [o, def] : {std::pair{&beta1, ::fsdp::schedule::kDefaultBeta1},
                            std::pair{&beta2, ::fsdp::schedule::kDefaultBeta2},
                            std::pair{&eps, ::fsdp::schedule::kDefaultEps}})
        if (*o != def)
          return module.emitError()
                 << "fsdp-optimizer: " << o->getArgStr()
                 << " is an AdamW option; optimizer=sgd has no moments";
    if (warmupSteps < 0)
      return module.emitError()
             << "fsdp-optimizer: warmup-steps must be >= 0, got "
             << static_cast<int64_t>(warmupSteps);
    // decay-steps 0 of a decaying schedule: the run's total optimizer steps,
    // which only fsdp-run knows (--steps, --total-steps), arrive as a step
    // input.
    if (decaySteps < 0)
      return module.emitError()
             << "fsdp-optimizer: decay-steps must be >= 0 (0: the run's total "
                "optimizer steps), got "
             << static_cast<int64_t>(decaySteps);
    if (!(minLr >= 0) || !(minLr <= lr))
      return module.emitError()
             << "fsdp-optimizer: min-lr must be in [0, lr], got " << minLr;
    // A warm-up that ends after the decay leaves nothing to decay.
    if (lrSchedule != LrSchedule::Constant && decaySteps > 0 &&
        warmupSteps >= decaySteps)
      return module.emitError() << "fsdp-optimizer: warmup-steps ("
                                << static_cast<int64_t>(warmupSteps)
                                << ") must be less than decay-steps ("
                                << static_cast<int64_t>(decaySteps) << ")";
    // Options of a schedule that is not asked for are a typo, not a no-op.
    if (lrSchedule == LrSchedule::Constant && decaySteps != 0)
      return module.emitError() << "fsdp-optimizer: decay-steps needs "
                                   "lr-schedule=linear or cosine";
    // The warm-up starts at 0, so only a decay reaches the floor.
    if (lrSchedule == LrSchedule::Constant && minLr != 0)
      return module.emitError()
             << "fsdp-optimizer: min-lr needs a decaying schedule "
                "(lr-schedule=linear or cosine)";
    return success();
  }

  /// Weight-decay groups: the trainable parameters a no-decay glob matches
  /// (a frozen one has no update to take a decay).
  LogicalResult matchNoDecay(func::FuncOp fn,
                             const llvm::StringMap<unsigned> &paramArg,
                             llvm::StringSet<> &noDecayFqns) {
    SmallVector<StringRef> fqns;
    for (auto &entry : paramArg) {
      auto trainable =
          fn.getArgAttrOfType<BoolAttr>(entry.getValue(), nn::kTrainableAttr);
      if (!trainable || trainable.getValue())
        fqns.push_back(entry.getKey());
    }
    return matchGlobs(getOperation(), "fsdp-optimizer: no-decay", noDecay, fqns,
                      "trainable parameter",
                      [&](size_t k) { noDecayFqns.insert(fqns[k]); });
  }

  /// The loss and the (gradient, parameter argument) pairs of fsdp-autodiff's
  /// results.
  static LogicalResult collectUpdates(func::FuncOp fn,
                                      const llvm::StringMap<unsigned> &paramArg,
                                      Value &loss,
                                      SmallVector<ParamUpdate> &updates) {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (fn.getResultAttr(i, nn::kLossAttr)) {
        loss = ret.getOperand(i);
      } else if (auto fqn =
                     fn.getResultAttrOfType<StringAttr>(i, nn::kGradOfAttr)) {
        auto it = paramArg.find(fqn.getValue());
        if (it == paramArg.end())
          return fn.emitError() << "returns the gradient of unknown parameter '"
                                << fqn.getValue() << "'";
        updates.push_back({ret.getOperand(i), it->second});
      }
    }
    if (!loss || updates.empty())
      return fn.emitError() << "expects a loss and gradients marked "
                               "'nn.grad_of' (run fsdp-autodiff first)";
    return success();
  }

  /// The AdamW state arguments (exp_avg for every parameter, then
  /// exp_avg_sq), the scalar i64 inputs (the step, for AdamW's bias
  /// correction or a schedule's rate; for a decaying schedule without
  /// decay-steps, the run's total optimizer steps), appended after the
  /// existing arguments, and the schedule's rate.
  OptimizerState appendState(OpBuilder &b, func::FuncOp fn,
                             ArrayRef<ParamUpdate> updates) {
    OptimizerState state;
    auto named = [&](StringRef n, Attribute a) { return b.getNamedAttr(n, a); };
    if (optimizer == OptimizerKind::AdamW)
      for (StringRef kind : {"exp_avg", "exp_avg_sq"})
        for (const ParamUpdate &u : updates) {
          Type t = fn.getArgument(u.arg).getType();
          auto attrs = b.getDictionaryAttr(
              {named(nn::kOptStateAttr, b.getStringAttr(kind)),
               named(nn::kParamOfAttr, fn.getArgAttr(u.arg, nn::kParamAttr))});
          (void)fn.insertArgument(fn.getNumArguments(), t, attrs, fn.getLoc());
          (kind == StringRef("exp_avg") ? state.expAvg : state.expAvgSq)
              .push_back(fn.getArguments().back());
        }
    auto appendScalar = [&](StringRef attr) {
      (void)fn.insertArgument(
          fn.getNumArguments(), RankedTensorType::get({}, b.getI64Type()),
          b.getDictionaryAttr(named(attr, b.getUnitAttr())), fn.getLoc());
      return fn.getArguments().back();
    };
    // A schedule (anything but a constant rate without warm-up) reads the
    // step, which SGD then takes too.
    bool scheduled = lrSchedule != LrSchedule::Constant || warmupSteps > 0;
    // A forward that reads the step (nn.dropout) has it already: one step
    // input per step function.
    for (BlockArgument arg : fn.getArguments())
      if (fn.getArgAttr(arg.getArgNumber(), nn::kStepAttr))
        state.step = arg;
    if ((optimizer == OptimizerKind::AdamW || scheduled) && !state.step)
      state.step = appendScalar(nn::kStepAttr);
    if (lrSchedule != LrSchedule::Constant && decaySteps == 0)
      state.totalSteps = appendScalar(nn::kTotalStepsAttr);
    if (scheduled)
      state.lr = nn::LrScheduleOp::create(
          b, fn.getBody().front().getTerminator()->getLoc(), state.step,
          state.totalSteps, b.getStringAttr(stringifyLrSchedule(lrSchedule)),
          b.getF64FloatAttr(lr), b.getI64IntegerAttr(warmupSteps),
          b.getI64IntegerAttr(decaySteps), b.getF64FloatAttr(minLr));
    return state;
  }

  /// One nn.adamw_update or nn.sgd_update per parameter, in `updates` order.
  UpdatedState createUpdates(OpBuilder &b, func::FuncOp fn,
                             ArrayRef<ParamUpdate> updates,
                             const OptimizerState &state,
                             const llvm::StringSet<> &noDecayFqns) {
    UpdatedState out;
    Location loc = fn.getBody().front().getTerminator()->getLoc();
    for (auto [i, u] : llvm::enumerate(updates)) {
      Value p = fn.getArgument(u.arg);
      StringRef fqn =
          fn.getArgAttrOfType<StringAttr>(u.arg, nn::kParamAttr).getValue();
      FloatAttr wd =
          b.getF64FloatAttr(noDecayFqns.contains(fqn) ? 0.0 : weightDecay);
      if (optimizer == OptimizerKind::AdamW) {
        auto op = nn::AdamWUpdateOp::create(
            b, loc, p, u.grad, state.expAvg[i], state.expAvgSq[i], state.step,
            state.lr, /*skip_if_nonfinite=*/Value(), b.getF64FloatAttr(lr),
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
            b.getF64FloatAttr(eps), wd,
            /*no_decay=*/nullptr, /*sharded=*/nullptr);
        out.params.push_back(op.getNewParam());
        out.expAvg.push_back(op.getNewExpAvg());
        out.expAvgSq.push_back(op.getNewExpAvgSq());
      } else {
        out.params.push_back(nn::SgdUpdateOp::create(
            b, loc, p.getType(), p, u.grad, state.lr,
            /*skip_if_nonfinite=*/Value(), b.getF64FloatAttr(lr), wd,
            /*no_decay=*/nullptr, /*sharded=*/nullptr));
      }
    }
    return out;
  }

  /// The step returns the loss, the updated parameters (nn.param), the
  /// updated moments (nn.opt_state, nn.param_of) and the rate (nn.lr).
  static void replaceReturn(OpBuilder &b, func::FuncOp fn, Value loss,
                            ArrayRef<ParamUpdate> updates,
                            const OptimizerState &state,
                            const UpdatedState &updated) {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    auto named = [&](StringRef n, Attribute a) { return b.getNamedAttr(n, a); };
    SmallVector<Value> results{loss};
    SmallVector<Attribute> attrs{
        b.getDictionaryAttr(named(nn::kLossAttr, b.getUnitAttr()))};
    for (auto [i, u] : llvm::enumerate(updates)) {
      results.push_back(updated.params[i]);
      attrs.push_back(b.getDictionaryAttr(
          named(nn::kParamAttr, fn.getArgAttr(u.arg, nn::kParamAttr))));
    }
    for (auto [kind, values] :
         {std::pair<StringRef, const SmallVector<Value> *>{"exp_avg",
                                                           &updated.expAvg},
          {"exp_avg_sq", &updated.expAvgSq}})
      for (auto [i, v] : llvm::enumerate(*values)) {
        results.push_back(v);
        attrs.push_back(b.getDictionaryAttr(
            {named(nn::kOptStateAttr, b.getStringAttr(kind)),
             named(nn::kParamOfAttr,
                   fn.getArgAttr(updates[i].arg, nn::kParamAttr))}));
      }
    if (state.lr) {
      results.push_back(state.lr);
      attrs.push_back(b.getDictionaryAttr(named(nn::kLrAttr, b.getUnitAttr())));
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    fn.setFunctionType(FunctionType::get(b.getContext(), fn.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    fn.setAllResultAttrs(attrs);
  }
};
} // namespace
