//===- Optimizer.cpp - fsdp-optimizer: append the parameter update --------===//
#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/StringMap.h"

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
    if (!(lr > 0) || !(eps > 0) || !(beta1 >= 0 && beta1 < 1) ||
        !(beta2 >= 0 && beta2 < 1) || !(weightDecay >= 0)) {
      getOperation().emitError()
          << "fsdp-optimizer: expects lr > 0, eps > 0, betas in [0, 1) "
             "and weight-decay >= 0";
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
    if (adamw) {
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
      auto stepType = RankedTensorType::get({}, b.getI64Type());
      (void)fn.insertArgument(
          fn.getNumArguments(), stepType,
          b.getDictionaryAttr(named(nn::kStepAttr, b.getUnitAttr())),
          fn.getLoc());
      step = fn.getArguments().back();
    }

    SmallVector<Value> newParams, newExpAvg, newExpAvgSq;
    for (auto [i, update] : llvm::enumerate(updates)) {
      auto [g, argIdx] = update;
      Value p = fn.getArgument(argIdx);
      if (adamw) {
        auto op = nn::AdamWUpdateOp::create(
            b, loc, p, g, expAvg[i], expAvgSq[i], step, b.getF64FloatAttr(lr),
            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
            b.getF64FloatAttr(eps), b.getF64FloatAttr(weightDecay));
        newParams.push_back(op.getNewParam());
        newExpAvg.push_back(op.getNewExpAvg());
        newExpAvgSq.push_back(op.getNewExpAvgSq());
      } else {
        newParams.push_back(nn::SgdUpdateOp::create(
            b, loc, p.getType(), p, g, b.getF64FloatAttr(lr),
            b.getF64FloatAttr(weightDecay)));
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
    func::ReturnOp::create(b, loc, results);
    ret.erase();
    fn.setFunctionType(FunctionType::get(ctx, fn.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    fn.setAllResultAttrs(attrs);
  }
};
} // namespace
