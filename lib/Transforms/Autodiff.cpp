//===- Autodiff.cpp - fsdp-autodiff: reverse-mode differentiation ---------===//
//
// Classic reverse-mode AD on SSA (Griewank & Walther, "Evaluating
// Derivatives", 2nd ed., ch. 3): one forward sweep marks the values that
// depend on a trainable parameter, one reverse sweep calls each op's VJP and
// sums the cotangents of values with several uses.
//
//===----------------------------------------------------------------------===//
#include "GlobOptions.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPAUTODIFF
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

static bool isTrainableParam(func::FuncOp fn, unsigned i) {
  if (!fn.getArgAttr(i, nn::kParamAttr))
    return false;
  auto t = fn.getArgAttrOfType<BoolAttr>(i, nn::kTrainableAttr);
  return !t || t.getValue();
}

static Value constantLike(OpBuilder &b, Location loc, Type type, double value) {
  auto t = cast<RankedTensorType>(type);
  auto elt = cast<FloatType>(t.getElementType());
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(t, FloatAttr::get(elt, value)));
}

/// The received activations (fsdp.pp_input) of a pipeline stage that carry
/// a gradient back: the float ones.
static SmallVector<unsigned> differentiableStageInputs(func::FuncOp fn) {
  SmallVector<unsigned> inputs;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttr(i, kPPInputAttr) &&
        isa<FloatType>(getElementTypeOrSelf(fn.getArgument(i).getType())))
      inputs.push_back(i);
  return inputs;
}

/// Appends the gradient of each received activation (zero where it does not
/// reach a seed), marked fsdp.pp_input_grad with its boundary index: the
/// stage sends it back to the previous one.
static void appendStageInputGrads(func::FuncOp fn, OpBuilder &b,
                                  const llvm::DenseMap<Value, Value> &grads,
                                  ArrayRef<unsigned> inputs,
                                  SmallVector<Value> &results,
                                  SmallVector<Attribute> &attrs) {
  for (unsigned i : inputs) {
    Value arg = fn.getArgument(i);
    Value g = grads.lookup(arg);
    if (!g)
      g = constantLike(b, arg.getLoc(), arg.getType(), 0.0);
    results.push_back(g);
    attrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kPPInputGradAttr, fn.getArgAttr(i, kPPInputAttr))));
  }
}

namespace {
/// The forward sweep of a step function: its trainable parameters and
/// received activations, and every value that depends on them.
struct ForwardSweep {
  llvm::DenseSet<Value> requiresGrad;
  SmallVector<unsigned> params;      ///< trainable parameters' arguments
  SmallVector<unsigned> stageInputs; ///< differentiableStageInputs
  SmallVector<Operation *> ops;      ///< the forward ops, in order
};
} // namespace

static ForwardSweep forwardSweep(func::FuncOp fn, Block &block) {
  ForwardSweep f;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (isTrainableParam(fn, i)) {
      f.requiresGrad.insert(fn.getArgument(i));
      f.params.push_back(i);
    }
  f.stageInputs = differentiableStageInputs(fn);
  for (unsigned i : f.stageInputs)
    f.requiresGrad.insert(fn.getArgument(i));
  for (Operation &op : block.without_terminator()) {
    f.ops.push_back(&op);
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return f.requiresGrad.contains(v); }))
      for (Value r : op.getResults())
        f.requiresGrad.insert(r);
  }
  return f;
}

/// The reverse sweep from the seeds in `grads`: each op's VJP (inserted
/// before `ret`) adds into its operands' gradients. `seeds` names what the
/// seeds are, for the error at an op without a VJP.
static LogicalResult reverseSweep(const ForwardSweep &f, OpBuilder &b,
                                  func::ReturnOp ret,
                                  llvm::DenseMap<Value, Value> &grads,
                                  StringRef seeds) {
  for (Operation *op : llvm::reverse(f.ops)) {
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(grads.lookup(r));
      any |= (bool)resultGrads.back();
    }
    if (!any)
      continue;
    auto iface = dyn_cast<nn::AutodiffOpInterface>(op);
    if (!iface)
      return op->emitOpError() << "is not differentiable, but " << seeds
                               << " depends on it through a trainable "
                                  "parameter";
    SmallVector<bool> needed;
    for (Value v : op->getOperands())
      needed.push_back(f.requiresGrad.contains(v));
    SmallVector<Value> operandGrads;
    b.setInsertionPoint(ret);
    if (failed(iface.buildVJP(b, resultGrads, needed, operandGrads)))
      return failure();
    for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!g || !f.requiresGrad.contains(v))
        continue;
      Value &acc = grads[v];
      acc = acc ? nn::AddOp::create(b, op->getLoc(), acc, g).getResult() : g;
    }
  }
  return success();
}

/// Replaces `ret` by a return of `results`, then one gradient per trainable
/// parameter (zero where it does not reach a seed), then the received
/// activations' gradients (appendStageInputGrads); the function's type and
/// result attributes follow.
static void returnGradients(func::FuncOp fn, OpBuilder &b, func::ReturnOp ret,
                            const ForwardSweep &f,
                            const llvm::DenseMap<Value, Value> &grads,
                            SmallVector<Value> results,
                            SmallVector<Attribute> resultAttrs) {
  b.setInsertionPoint(ret);
  for (unsigned i : f.params) {
    Value arg = fn.getArgument(i);
    Value g = grads.lookup(arg);
    if (!g)
      g = constantLike(b, arg.getLoc(), arg.getType(), 0.0);
    results.push_back(g);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(nn::kGradOfAttr, fn.getArgAttr(i, nn::kParamAttr))));
  }
  appendStageInputGrads(fn, b, grads, f.stageInputs, results, resultAttrs);
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  fn.setFunctionType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  fn.setAllResultAttrs(resultAttrs);
}

namespace {
struct FSDPAutodiffPass : mlir::fsdp::impl::FSDPAutodiffBase<FSDPAutodiffPass> {
  using Base::Base;

  /// Sequence parallelism: the backward reads the all-gathered input of the
  /// column-parallel linears (their weight gradients) from a second
  /// all-gather of the sequence chunk (marked nn.sp_regather), so that
  /// between forward and backward only the chunk (1/T) is kept, as
  /// Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication does
  /// under sequence_parallel (Korthikanti et al. 2022, Sec. 4.2.2 and
  /// Table 2, whose 34·sbh/t per layer assumes it). It is issued where the
  /// first of those linears' backward starts, before its grad-input GEMM,
  /// which the gather overlaps as Megatron-LM's async all-gather does (the
  /// runtime waits at the weight gradient, the first reader). `grads` maps
  /// each forward value to its gradient.
  static void regatherInBackward(ArrayRef<Operation *> forwardOps,
                                 const llvm::DenseMap<Value, Value> &grads) {
    llvm::DenseSet<Operation *> forward(forwardOps.begin(), forwardOps.end());
    for (Operation *op : forwardOps) {
      auto gather = dyn_cast<nn::SpAllGatherOp>(op);
      if (!gather || gather.getReplicatedGrad())
        continue;
      SmallVector<OpOperand *> backward;
      Operation *first = nullptr;
      auto earliest = [&](Operation *user) {
        if (!forward.contains(user) && (!first || user->isBeforeInBlock(first)))
          first = user;
      };
      for (OpOperand &u : gather.getResult().getUses()) {
        if (forward.contains(u.getOwner()))
          continue;
        backward.push_back(&u);
        earliest(u.getOwner());
      }
      if (backward.empty())
        continue;
      // The backward of a forward reader starts where its result's
      // gradient is first read (the grad-input GEMM).
      for (Operation *reader : gather.getResult().getUsers())
        if (forward.contains(reader))
          for (Value r : reader->getResults())
            if (Value g = grads.lookup(r))
              llvm::for_each(g.getUsers(), earliest);
      OpBuilder b(first);
      Operation *again = b.clone(*op);
      again->setAttr(nn::kSpRegatherAttr, b.getUnitAttr());
      for (OpOperand *u : backward)
        u->set(again->getResult(0));
    }
  }

protected:
  void runOnOperation() override {
    FailureOr<func::FuncOp> maybeFn = getStepFunction(getOperation());
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    markAttentionImpl(fn, stringifyAttentionImpl(attention));
    SmallVector<unsigned> paramArgs;
    SmallVector<StringRef> fqns;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto fqn = fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr)) {
        paramArgs.push_back(i);
        fqns.push_back(fqn.getValue());
      }
    if (failed(matchGlobs(getOperation(), "fsdp-autodiff: frozen", frozen, fqns,
                          "parameter", [&](size_t k) {
                            fn.setArgAttr(paramArgs[k], nn::kTrainableAttr,
                                          BoolAttr::get(&getContext(), false));
                          })))
      return signalPassFailure();
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError() << "expects a single-block forward function";
      return signalPassFailure();
    }
    Block &block = fn.getBody().front();
    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    // A pipeline stage (fsdp-pipeline-split) other than the last returns the
    // activations it sends on, seeded by their gradients (received back);
    // fsdp-pipeline-micro-batch makes its loss.
    bool stageOutputs =
        fn.getNumResults() > 0 && fn.getResultAttr(0, kPPOutputAttr) != nullptr;
    if (stageOutputs) {
      if (failed(differentiateStage(fn, block, ret)))
        return signalPassFailure();
      return;
    }
    if (!ret || ret.getNumOperands() != 1) {
      fn.emitError()
          << "expects the forward function to return exactly one value, the "
             "scalar loss; it returns "
          << (ret ? ret.getNumOperands() : 0);
      return signalPassFailure();
    }
    Value loss = ret.getOperand(0);
    auto lossType = dyn_cast<RankedTensorType>(loss.getType());
    if (!lossType || lossType.getRank() != 0 ||
        !isa<FloatType>(lossType.getElementType())) {
      ret.emitError() << "expects the loss to be a scalar float tensor, got "
                      << loss.getType();
      return signalPassFailure();
    }

    // Forward sweep: which values depend on a trainable parameter.
    ForwardSweep f = forwardSweep(fn, block);
    if (f.params.empty()) {
      fn.emitError() << "has no trainable parameter (an argument with "
                        "'nn.param' that is not "
                        "frozen): nothing to train";
      return signalPassFailure();
    }
    if (!f.requiresGrad.contains(loss)) {
      ret.emitError() << "the loss does not depend on any trainable parameter";
      return signalPassFailure();
    }

    // Reverse sweep.
    OpBuilder b(ret);
    llvm::DenseMap<Value, Value> grads;
    grads[loss] = constantLike(b, loss.getLoc(), loss.getType(), 1.0);
    // The seed dloss/dloss = 1; fsdp-micro-batch scales it by 1/k.
    grads[loss].getDefiningOp()->setAttr(nn::kLossSeedAttr, b.getUnitAttr());
    if (lossScaling) {
      // torch.amp.GradScaler.scale(loss).backward(): the seed times the
      // scale, a step input (fsdp-run's dynamic scale).
      grads[loss] = nn::ScaleOp::create(b, loss.getLoc(), grads[loss],
                                        addLossScaleArgument(fn, b));
    }
    if (failed(reverseSweep(f, b, ret, grads, "the loss")))
      return signalPassFailure();

    regatherInBackward(f.ops, grads);

    // Return the loss, then one gradient per trainable parameter.
    returnGradients(
        fn, b, ret, f, grads, {loss},
        {b.getDictionaryAttr(b.getNamedAttr(nn::kLossAttr, b.getUnitAttr()))});
  }

  /// The loss scale, an f64 step input (nn.loss_scale).
  static Value addLossScaleArgument(func::FuncOp fn, OpBuilder &b) {
    (void)fn.insertArgument(fn.getNumArguments(),
                            RankedTensorType::get({}, b.getF64Type()),
                            b.getDictionaryAttr(b.getNamedAttr(
                                nn::kLossScaleAttr, b.getUnitAttr())),
                            fn.getLoc());
    return fn.getArguments().back();
  }

  /// A pipeline stage that is not the last: the seeds are the gradients of
  /// its outputs (arguments fsdp.pp_output_grad with the output's boundary
  /// index); it returns its outputs, its parameters' gradients and its
  /// received activations' gradients.
  LogicalResult differentiateStage(func::FuncOp fn, Block &block,
                                   func::ReturnOp ret) {
    ForwardSweep f = forwardSweep(fn, block);
    OpBuilder b(ret);
    if (lossScaling)
      // The gradients received back carry the last stage's loss scale; the
      // stage needs its value too, to unscale its gradients and their norm
      // (nn.grad_norm), and every stage skips a non-finite step alike.
      addLossScaleArgument(fn, b);
    llvm::DenseMap<Value, Value> grads;
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      auto k = fn.getResultAttrOfType<IntegerAttr>(i, kPPOutputAttr);
      if (!k)
        return fn.emitError() << "result #" << i
                              << " of a pipeline stage is "
                                 "not an activation it sends (fsdp.pp_output)";
      Value out = ret.getOperand(i);
      if (!f.requiresGrad.contains(out))
        continue;
      for (unsigned a = 0; a < fn.getNumArguments(); ++a)
        if (fn.getArgAttr(a, kPPOutputGradAttr) == k) {
          Value &acc = grads[out];
          Value g = fn.getArgument(a);
          acc = acc ? Value(nn::AddOp::create(b, out.getLoc(), acc, g)) : g;
        }
    }
    if (failed(reverseSweep(f, b, ret, grads, "a sent activation")))
      return failure();
    regatherInBackward(f.ops, grads);
    returnGradients(fn, b, ret, f, grads, SmallVector<Value>(ret.getOperands()),
                    SmallVector<Attribute>(fn.getAllResultAttrs().begin(),
                                           fn.getAllResultAttrs().end()));
    return success();
  }
};
} // namespace
