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
struct FSDPOptimizerPass
    : mlir::fsdp::impl::FSDPOptimizerBase<FSDPOptimizerPass> {
  using Base::Base;

  void runOnOperation() override {
    if (optimizer != "adamw" && optimizer != "sgd") {
      getOperation().emitError()
          << "fsdp-optimizer: optimizer must be 'sgd' or 'adamw', got '"
          << optimizer << "'";
      return signalPassFailure();
    }
    // Finite too: an inf rate or decay would pass the comparisons and turn
    // every parameter into inf or nan at the first step.
    if (!(lr > 0) || !(eps > 0) || !(beta1 >= 0 && beta1 < 1) ||
        !(beta2 >= 0 && beta2 < 1) || !(weightDecay >= 0) ||
        !std::isfinite(lr) || !std::isfinite(eps) ||
        !std::isfinite(weightDecay)) {
      getOperation().emitError()
          << "fsdp-optimizer: expects finite lr > 0, eps > 0, betas in [0, 1) "
             "and weight-decay >= 0";
      return signalPassFailure();
    }
    if (lrSchedule != "constant" && lrSchedule != "linear" &&
        lrSchedule != "cosine") {
      getOperation().emitError()
          << "fsdp-optimizer: lr-schedule must be 'constant', 'linear' or "
             "'cosine', got '"
          << lrSchedule << "'";
      return signalPassFailure();
    }
    if (warmupSteps < 0) {
      getOperation().emitError()
          << "fsdp-optimizer: warmup-steps must be >= 0, got "
          << static_cast<int64_t>(warmupSteps);
      return signalPassFailure();
    }
    // decay-steps 0 of a decaying schedule: the run's total optimizer steps,
    // which only fsdp-run knows (--steps, --total-steps), arrive as a step
    // input.
    if (decaySteps < 0) {
      getOperation().emitError()
          << "fsdp-optimizer: decay-steps must be >= 0 (0: the run's total "
             "optimizer steps), got "
          << static_cast<int64_t>(decaySteps);
      return signalPassFailure();
    }
    if (!(minLr >= 0 && minLr <= lr)) {
      getOperation().emitError()
          << "fsdp-optimizer: min-lr must be in [0, lr], got " << minLr;
      return signalPassFailure();
    }
    // A warm-up that ends after the decay leaves nothing to decay.
    if (lrSchedule != "constant" && decaySteps > 0 &&
        warmupSteps >= decaySteps) {
      getOperation().emitError() << "fsdp-optimizer: warmup-steps ("
                                 << static_cast<int64_t>(warmupSteps)
                                 << ") must be less than decay-steps ("
                                 << static_cast<int64_t>(decaySteps) << ")";
      return signalPassFailure();
    }
    // Options of a schedule that is not asked for are a typo, not a no-op.
    if (lrSchedule == "constant" && decaySteps != 0) {
      getOperation().emitError() << "fsdp-optimizer: decay-steps needs "
                                    "lr-schedule=linear or cosine";
      return signalPassFailure();
    }
    if (lrSchedule == "constant" && warmupSteps == 0 && minLr != 0) {
      getOperation().emitError()
          << "fsdp-optimizer: min-lr needs a schedule (lr-schedule=linear or "
             "cosine, or warmup-steps)";
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> maybeFn = getStepFunction(getOperation());
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());

    llvm::StringMap<unsigned> paramArg;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto fqn = fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr))
        paramArg[fqn.getValue()] = i;
    // Weight-decay groups: trainable parameters matched by a no-decay glob
    // (a frozen one has no update to take a decay).
    llvm::StringSet<> noDecayFqns;
    SmallVector<StringRef> fqns;
    for (auto &entry : paramArg) {
      auto trainable =
          fn.getArgAttrOfType<BoolAttr>(entry.getValue(), nn::kTrainableAttr);
      if (!trainable || trainable.getValue())
        fqns.push_back(entry.getKey());
    }
    if (failed(matchGlobs(getOperation(), "fsdp-optimizer: no-decay", noDecay,
                          fqns, "trainable parameter",
                          [&](size_t k) { noDecayFqns.insert(fqns[k]); })))
      return signalPassFailure();

    // (gradient, parameter argument) pairs from fsdp-autodiff's results.
    SmallVector<std::pair<Value, unsigned>> updates;
    Value loss;
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (fn.getResultAttr(i, nn::kLossAttr)) {
        loss = ret.getOperand(i);
      } else if (auto fqn =
                     fn.getResultAttrOfType<StringAttr>(i, nn::kGradOfAttr)) {
        auto it = paramArg.find(fqn.getValue());
        if (it == paramArg.end()) {
          fn.emitError() << "returns the gradient of unknown parameter '"
                         << fqn.getValue() << "'";
          return signalPassFailure();
        }
        updates.push_back({ret.getOperand(i), it->second});
      }
    }
    if (!loss || updates.empty()) {
      fn.emitError() << "expects a loss and gradients marked 'nn.grad_of' (run "
                        "fsdp-autodiff "
                        "first)";
      return signalPassFailure();
    }

    OpBuilder b(ret);
    MLIRContext *ctx = &getContext();
    Location loc = ret.getLoc();
    bool adamw = optimizer == "adamw";
    auto named = [&](StringRef n, Attribute a) { return b.getNamedAttr(n, a); };

    // AdamW state arguments: exp_avg for every parameter, then exp_avg_sq,
    // then the step, appended after the existing arguments.
    SmallVector<Value> expAvg, expAvgSq;
    Value step;
    // A schedule (anything but a constant rate without warm-up) reads the
    // step, which SGD then takes too.
    bool scheduled = lrSchedule != "constant" || warmupSteps > 0;
    if (adamw)
      for (StringRef kind : {"exp_avg", "exp_avg_sq"})
        for (auto [g, argIdx] : updates) {
          Type t = fn.getArgument(argIdx).getType();
          auto attrs = b.getDictionaryAttr(
              {named(nn::kOptStateAttr, b.getStringAttr(kind)),
               named(nn::kParamOfAttr, fn.getArgAttr(argIdx, nn::kParamAttr))});
          (void)fn.insertArgument(fn.getNumArguments(), t, attrs, fn.getLoc());
          (kind == StringRef("exp_avg") ? expAvg : expAvgSq)
              .push_back(fn.getArguments().back());
        }
    // Scalar i64 inputs: the step (AdamW's bias correction, a schedule's
    // rate) and, for a decaying schedule without decay-steps, the run's
    // total optimizer steps.
    auto appendScalar = [&](StringRef attr) {
      (void)fn.insertArgument(
          fn.getNumArguments(), RankedTensorType::get({}, b.getI64Type()),
          b.getDictionaryAttr(named(attr, b.getUnitAttr())), fn.getLoc());
      return fn.getArguments().back();
    };
    // A forward that reads the step (nn.dropout) has it already: one step
    // input per step function.
    for (BlockArgument arg : fn.getArguments())
      if (fn.getArgAttr(arg.getArgNumber(), nn::kStepAttr))
        step = arg;
    if ((adamw || scheduled) && !step)
      step = appendScalar(nn::kStepAttr);
    Value totalSteps;
    if (lrSchedule != "constant" && decaySteps == 0)
      totalSteps = appendScalar(nn::kTotalStepsAttr);
    Value lrValue;
    if (scheduled)
      lrValue = nn::LrScheduleOp::create(
          b, loc, step, totalSteps, b.getStringAttr(lrSchedule),
          b.getF64FloatAttr(lr), b.getI64IntegerAttr(warmupSteps),
          b.getI64IntegerAttr(decaySteps), b.getF64FloatAttr(minLr));

    SmallVector<Value> newParams, newExpAvg, newExpAvgSq;
    for (auto [i, update] : llvm::enumerate(updates)) {
      auto [g, argIdx] = update;
      Value p = fn.getArgument(argIdx);
      StringRef fqn =
          fn.getArgAttrOfType<StringAttr>(argIdx, nn::kParamAttr).getValue();
      FloatAttr wd =
          b.getF64FloatAttr(noDecayFqns.contains(fqn) ? 0.0 : weightDecay);
      if (adamw) {
        auto op = nn::AdamWUpdateOp::create(
            b, loc, p, g, expAvg[i], expAvgSq[i], step, lrValue,
            b.getF64FloatAttr(lr), b.getF64FloatAttr(beta1),
            b.getF64FloatAttr(beta2), b.getF64FloatAttr(eps), wd,
            /*no_decay=*/nullptr, /*sharded=*/nullptr);
        newParams.push_back(op.getNewParam());
        newExpAvg.push_back(op.getNewExpAvg());
        newExpAvgSq.push_back(op.getNewExpAvgSq());
      } else {
        newParams.push_back(nn::SgdUpdateOp::create(
            b, loc, p.getType(), p, g, lrValue, b.getF64FloatAttr(lr), wd,
            /*no_decay=*/nullptr, /*sharded=*/nullptr));
      }
    }

    SmallVector<Value> results{loss};
    SmallVector<Attribute> attrs{
        b.getDictionaryAttr(named(nn::kLossAttr, b.getUnitAttr()))};
    for (auto [i, update] : llvm::enumerate(updates)) {
      results.push_back(newParams[i]);
      attrs.push_back(b.getDictionaryAttr(
          named(nn::kParamAttr, fn.getArgAttr(update.second, nn::kParamAttr))));
    }
    for (auto [kind, values] :
         {std::pair<StringRef, SmallVector<Value> *>{"exp_avg", &newExpAvg},
          {"exp_avg_sq", &newExpAvgSq}})
      for (auto [i, v] : llvm::enumerate(*values)) {
        results.push_back(v);
        attrs.push_back(b.getDictionaryAttr(
            {named(nn::kOptStateAttr, b.getStringAttr(kind)),
             named(nn::kParamOfAttr,
                   fn.getArgAttr(updates[i].second, nn::kParamAttr))}));
      }
    if (lrValue) {
      results.push_back(lrValue);
      attrs.push_back(b.getDictionaryAttr(named(nn::kLrAttr, b.getUnitAttr())));
    }
    func::ReturnOp::create(b, loc, results);
    ret.erase();
    fn.setFunctionType(FunctionType::get(ctx, fn.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    fn.setAllResultAttrs(attrs);
  }
};
} // namespace
