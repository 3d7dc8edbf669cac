//===- PipelineSplit.cpp - fsdp-pipeline-split: one stage's forward -------===//
//
// Pipeline parallelism's partition (Huang et al., GPipe, 2019, Sec. 2;
// Narayanan et al., SC'21, Sec. 2): the layers are cut into P contiguous
// stages and stage s keeps the forward ops of its layers. A layer is the
// `.h.<i>.` (GPT-2) or `.layers.<i>.` (Llama) index in its parameters' FQNs;
// in the forward's op order, the ops from the first use of layer l's
// parameters up to the first use of layer l + 1's belong to layer l (the
// last layer also gets the final norm, the head and the loss; the first
// stage the embeddings before layer 0).
//
// Run alone, the default split minimises the largest stage's forward FLOPs
// (the nn cost model, NN_CostOpInterface::getFlops; the backward of a linear
// op is twice its forward, so the forward is proportional to the stage's
// compute) by dynamic programming over contiguous partitions (the linear
// partition problem; Skiena, The Algorithm Design Manual, Sec. 10.7).
// fsdp-pipeline instead passes the split planPipelineSplit chose by the
// cluster's predicted time and the memory budget (PipelineBalance.cpp).
//
//===----------------------------------------------------------------------===//
#include "PipelineSplit.h"
#include "fsdp/Analysis/StepFunction.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPIPELINESPLIT
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

int64_t mlir::fsdp::pipelineLayerOf(StringRef fqn) {
  // The first ".h.<i>." or ".layers.<i>.", scanned by hand: a regex match
  // per FQN was 4% of a 405B pipeline plan (perf).
  for (size_t dot = fqn.find('.'); dot != StringRef::npos;
       dot = fqn.find('.', dot + 1)) {
    StringRef rest = fqn.drop_front(dot + 1);
    if (!rest.consume_front("h.") && !rest.consume_front("layers."))
      continue;
    StringRef digits = rest.take_while(llvm::isDigit);
    if (digits.empty() || !rest.drop_front(digits.size()).starts_with("."))
      continue;
    int64_t l = -1;
    return digits.getAsInteger(10, l) ? -1 : l; // the first match decides
  }
  return -1;
}

std::string mlir::fsdp::pipelinePartsName(int64_t pp, int64_t chunks) {
  return chunks > 1 ? "pp x pp-chunks=" + std::to_string(pp * chunks) +
                          " virtual stages"
                    : "pp=" + std::to_string(pp);
}

/// The split's layers in the diagnostics: "model", or "split (the model's
/// L and its embedding, loss)" when ends are counted.
static std::string splitLayersName(int64_t modelLayers, PipelineEnds ends) {
  if (!ends.embedding && !ends.loss)
    return "model";
  return "split (the model's " + std::to_string(modelLayers) + " and its " +
         ends.name() + ")";
}

static LogicalResult splitError(Location loc, const Twine &message) {
  return emitError(loc) << "fsdp-pipeline-split: " << message;
}

FailureOr<PipelineLayers> mlir::fsdp::segmentPipelineLayers(func::FuncOp fn,
                                                            int64_t pp,
                                                            int64_t chunks,
                                                            PipelineEnds ends) {
  const int64_t parts = pp * chunks;
  if (!fn.getBody().hasOneBlock() || lossResultIndex(fn) < 0 ||
      fn.getNumResults() != 1)
    return splitError(fn.getLoc(), "expects the forward function (one block, "
                                   "one result: the loss)");
  PipelineLayers r;
  llvm::DenseSet<int64_t> named;
  StringAttr deepest;
  for (BlockArgument a : fn.getArguments())
    if (auto fqn =
            fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), nn::kParamAttr)) {
      int64_t l = pipelineLayerOf(fqn.getValue());
      r.paramLayer[a] = l;
      if (l >= 0)
        named.insert(l);
      if (l + 1 > r.layers) {
        r.layers = l + 1;
        deepest = fqn;
      }
    }
  if (r.layers == 0)
    return splitError(fn.getLoc(), "finds no layers (no parameter FQN with "
                                   "'.h.<i>.' or '.layers.<i>.'): nothing to "
                                   "cut into pipeline stages");
  // The layers are counted from the largest index: a gap (a layer with no
  // parameter) would be an empty layer, and an index such as 10^8 a split
  // over 10^8 layers (it once exhausted memory).
  if (static_cast<int64_t>(named.size()) != r.layers) {
    int64_t missing = 0;
    while (named.contains(missing))
      ++missing;
    return splitError(fn.getLoc(),
                      "finds layer indices up to " + Twine(r.layers - 1) +
                          " ('" + deepest.getValue() +
                          "') but no parameter of layer " + Twine(missing) +
                          ": the '.h.<i>.' / '.layers.<i>.' indices must "
                          "count the layers from 0");
  }
  const int64_t modelLayers = r.layers;
  r.layers += static_cast<int64_t>(ends.embedding) + ends.loss;
  if (parts > r.layers)
    return splitError(fn.getLoc(),
                      pipelinePartsName(pp, chunks) + " exceeds the " +
                          std::to_string(r.layers) + " layers of the " +
                          splitLayersName(modelLayers, ends) +
                          " (each stage needs at least one "
                          "layer)");
  for (Operation &op : fn.getBody().front().without_terminator())
    r.ops.push_back(&op);
  r.segment.assign(r.ops.size(), -1);
  int64_t cur = -1, lastLayerEnd = -1;
  for (auto [i, op] : llvm::enumerate(r.ops)) {
    for (Value v : op->getOperands())
      if (auto it = r.paramLayer.find(v); it != r.paramLayer.end()) {
        cur = std::max(cur, it->second);
        if (it->second == modelLayers - 1)
          lastLayerEnd = static_cast<int64_t>(i);
      }
    r.segment[i] = cur;
  }
  // A layer whose parameters are first used out of order would make the
  // stages overlap.
  for (size_t i = 1; i < r.ops.size(); ++i)
    if (r.segment[i] < r.segment[i - 1])
      return splitError(r.ops[i]->getLoc(), "layers are not in order");
  if (ends.embedding) {
    // The embedding's stage needs a parameter of its own (each stage is an
    // FSDP step with an optimizer): a model whose first ops have none has
    // no embedding to cut off.
    auto readsParam = [&](Operation *op) {
      return llvm::any_of(op->getOperands(),
                          [&](Value v) { return r.paramLayer.count(v) != 0; });
    };
    // The ops before layer 0's are a prefix (segment -1).
    auto prefix = ArrayRef<Operation *>(r.ops).take_front(
        llvm::count(r.segment, static_cast<int64_t>(-1)));
    if (!llvm::any_of(prefix, readsParam))
      return splitError(fn.getLoc(),
                        "pp-split-embedding: no op before layer 0's uses a "
                        "parameter (no embedding to count as a layer)");
    r.firstLayer = 1;
    for (int64_t &s : r.segment)
      ++s;
  }
  if (ends.loss) {
    // The head starts at the final norm (or the head's matmul): the first
    // op after the last layer's block that reads a non-layer parameter.
    // The ops between (the block's last residual add) stay in the layer.
    auto readsNonLayerParam = [&](Operation *op) {
      return llvm::any_of(op->getOperands(), [&](Value v) {
        auto it = r.paramLayer.find(v);
        return it != r.paramLayer.end() && it->second < 0;
      });
    };
    auto *begin = r.ops.begin() + lastLayerEnd + 1;
    auto *head = std::find_if(begin, r.ops.end(), readsNonLayerParam);
    if (head == r.ops.end())
      return splitError(fn.getLoc(),
                        "pp-split-loss: no parameter outside the layers is "
                        "used after the last layer's (no final norm or head "
                        "to count as a layer)");
    std::fill(r.segment.begin() + (head - r.ops.begin()), r.segment.end(),
              r.layers - 1);
  }
  return r;
}

LogicalResult mlir::fsdp::checkPipelineSplit(func::FuncOp fn,
                                             ArrayRef<int64_t> split,
                                             int64_t layers, int64_t pp,
                                             int64_t chunks,
                                             PipelineEnds ends) {
  if (static_cast<int64_t>(split.size()) != pp * chunks - 1)
    return splitError(
        fn.getLoc(), "pp-split has " + std::to_string(split.size()) +
                         " layer boundaries; " + pipelinePartsName(pp, chunks) +
                         " needs " + std::to_string(pp * chunks - 1));
  const std::string range =
      "the boundaries must increase within 1.." + std::to_string(layers - 1) +
      (ends.embedding || ends.loss
           ? " (the split has " + std::to_string(layers) +
                 " layers: the model's " +
                 std::to_string(layers - ends.embedding - ends.loss) +
                 " and its " + ends.name() + ")"
           : " (the model has " + std::to_string(layers) + " layers)");
  for (auto [k, b] : llvm::enumerate(split)) {
    if (b < 1 || b >= layers)
      return splitError(fn.getLoc(), "pp-split boundary " + std::to_string(b) +
                                         " is outside the model: " + range);
    // Inside the model but not after the previous one (it said "outside
    // the model" for pp-split=3,2,1 of 4 layers).
    if (k > 0 && b <= split[k - 1])
      return splitError(fn.getLoc(), "pp-split boundary " + std::to_string(b) +
                                         " does not increase (it follows " +
                                         std::to_string(split[k - 1]) +
                                         "): " + range);
  }
  return success();
}

/// The contiguous partition of `cost` (segments 0..L-1, `pre` added to the
/// first stage) into `parts` non-empty stages that minimises the largest
/// stage's cost; returns the first segment of stages 1..parts-1.
static SmallVector<int64_t> balancedSplit(ArrayRef<double> cost, double pre,
                                          int64_t parts) {
  int64_t n = static_cast<int64_t>(cost.size());
  SmallVector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cost[i];
  return *constrainedSplit(
      n, parts,
      [&](int64_t, int64_t a, int64_t b) {
        return prefix[b] - prefix[a] + (a == 0 ? pre : 0);
      },
      [](int64_t, int64_t, int64_t) { return true; });
}

namespace {
struct FSDPPipelineSplitPass
    : mlir::fsdp::impl::FSDPPipelineSplitBase<FSDPPipelineSplitPass> {
  using Base::Base;

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (ppSplit.hasValue() && ppSplit.empty()) // "pp-split=": malformed
      return fail(module.getLoc(),
                  "pp-split is empty: give P-1 increasing layer indices, or "
                  "leave the option out for the default split");
    if (pp < 1)
      return fail(module.getLoc(),
                  "pp=" + std::to_string(pp) + " must be >= 1");
    if (ppChunks < 1)
      return fail(module.getLoc(),
                  "pp-chunks=" + std::to_string(ppChunks) + " must be >= 1");
    if (pp == 1) {
      if (!ppSplit.empty())
        return fail(module.getLoc(), "pp-split needs pp > 1");
      if (ppChunks > 1)
        return fail(module.getLoc(), "pp-chunks needs pp > 1");
      if (ppSplitEmbedding || ppSplitLoss)
        return fail(module.getLoc(),
                    "pp-split-embedding and pp-split-loss need pp > 1");
      return;
    }
    // With v = pp-chunks > 1 the model is cut into P·v virtual stages and
    // this pass keeps virtual stage `ppStage` (Narayanan et al., SC'21,
    // Sec. 2.2.2): the same cut as pp = P·v, on rank ppStage mod P.
    const int64_t parts = pp * ppChunks;
    if (ppStage < 0 || ppStage >= parts)
      return fail(module.getLoc(), "pp-stage=" + std::to_string(ppStage) +
                                       " must be a stage of 0.." +
                                       std::to_string(parts - 1));
    FailureOr<func::FuncOp> maybeFn = getStepFunction(module);
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    const PipelineEnds ends{ppSplitEmbedding, ppSplitLoss};
    FailureOr<PipelineLayers> seg =
        segmentPipelineLayers(fn, pp, ppChunks, ends);
    if (failed(seg))
      return signalPassFailure();
    ArrayRef<Operation *> ops = seg->ops;
    ArrayRef<int64_t> segment = seg->segment;

    // The split: given (checked), or balanced by forward FLOPs.
    SmallVector<int64_t> split(ppSplit.begin(), ppSplit.end());
    if (split.empty()) {
      SmallVector<double> cost(seg->layers, 0);
      double pre = 0;
      for (auto [i, op] : llvm::enumerate(ops))
        if (auto c = dyn_cast<nn::CostOpInterface>(op))
          (segment[i] < 0 ? pre : cost[segment[i]]) +=
              static_cast<double>(c.getFlops());
      split = balancedSplit(cost, pre, parts);
    } else if (failed(checkPipelineSplit(fn, split, seg->layers, pp, ppChunks,
                                         ends))) {
      return signalPassFailure();
    }
    auto stageOfSegment = [&](int64_t seg) {
      int64_t s = 0;
      for (int64_t b : split)
        s += seg >= b;
      return s;
    };
    llvm::DenseMap<Operation *, int64_t> stageOf;
    for (auto [i, op] : llvm::enumerate(ops))
      stageOf[op] = stageOfSegment(segment[i]);
    int64_t s = ppStage;

    if (failed(markTiedWeights(fn, stageOf, s)))
      return signalPassFailure();

    if (failed(buildStage(fn, ops, stageOf)))
      return signalPassFailure();
    OpBuilder b(&getContext());
    module->setAttr(kPipelineStagesAttr, b.getI64IntegerAttr(pp));
    module->setAttr(kPipelineStageAttr, b.getI64IntegerAttr(s % pp));
    if (ppChunks > 1) {
      module->setAttr(kPipelineChunksAttr, b.getI64IntegerAttr(ppChunks));
      module->setAttr(kPPChunkAttr, b.getI64IntegerAttr(s / pp));
    }
  }

  /// A parameter used on two stages (tied weights): each keeps a copy,
  /// marked with the other stage, whose gradients fsdp-pipeline-micro-batch
  /// sums between the two (Megatron-LM keeps the word embedding on the first
  /// and the last stage alike). Under interleaving the stages are virtual
  /// and the mark is the peer's rank. Fails with a diagnostic on a parameter
  /// of three stages or of two virtual stages of one rank.
  LogicalResult
  markTiedWeights(func::FuncOp fn,
                  const llvm::DenseMap<Operation *, int64_t> &stageOf,
                  int64_t s) {
    for (BlockArgument a : fn.getArguments()) {
      auto fqn =
          fn.getArgAttrOfType<StringAttr>(a.getArgNumber(), nn::kParamAttr);
      if (!fqn)
        continue;
      std::set<int64_t> stages;
      for (Operation *u : a.getUsers())
        stages.insert(stageOf.lookup(u));
      if (stages.size() > 2)
        return failAt(a.getLoc(),
                      "parameter '" + fqn.getValue().str() + "' is used by " +
                          std::to_string(stages.size()) +
                          " stages: tied weights are shared by two stages at "
                          "most");
      // The exchange pairs ranks: under interleaving (s the virtual stage)
      // the peer is the rank holding the other copy's virtual stage (GPT-2's
      // embedding: rank 0's chunk 0 and rank P-1's chunk v-1). Two chunks
      // of one rank would hold two copies in one program: refused.
      if (stages.size() == 2 && *stages.begin() % pp == *stages.rbegin() % pp)
        return failAt(a.getLoc(),
                      "parameter '" + fqn.getValue().str() +
                          "' is tied across virtual stages " +
                          std::to_string(*stages.begin()) + " and " +
                          std::to_string(*stages.rbegin()) +
                          " of the same rank: tied weights must sit on two "
                          "ranks");
      if (stages.size() == 2 && stages.count(s))
        fn.setArgAttr(
            a.getArgNumber(), kPPTiedPeerAttr,
            OpBuilder(&getContext())
                .getI64IntegerAttr((*stages.begin() == s ? *stages.rbegin()
                                                         : *stages.begin()) %
                                   pp));
    }
    return success();
  }

  /// Keeps stage `ppStage`'s ops of `fn` (`stageOf` each op's stage): the
  /// values crossing into it become arguments, those crossing into the next
  /// stage results (with arguments for their gradients); the other stages'
  /// ops and the parameters and data it does not use go.
  LogicalResult
  buildStage(func::FuncOp fn, ArrayRef<Operation *> ops,
             const llvm::DenseMap<Operation *, int64_t> &stageOf) {
    Block &block = fn.getBody().front();
    int64_t s = ppStage, last = pp * ppChunks - 1;
    // The boundary values (indexed in definition order): results of a
    // non-constant op of stage t used by an op of a later stage.
    auto isConstant = [](Operation *op) {
      return isa_and_nonnull<arith::ConstantOp>(op);
    };
    llvm::MapVector<Value, int64_t> boundary; // value → index
    llvm::DenseMap<Value, int64_t> lastUseStage;
    for (Operation *op : ops)
      for (Value r : op->getResults()) {
        int64_t latest = -1;
        for (Operation *u : r.getUsers())
          if (u != block.getTerminator())
            latest = std::max(latest, stageOf.lookup(u));
        if (latest > stageOf.lookup(op) && !isConstant(op)) {
          boundary.insert({r, static_cast<int64_t>(boundary.size())});
          lastUseStage[r] = latest;
        }
      }
    auto crosses = [&](Value v, int64_t into) { // defined before `into`,
      Operation *d = v.getDefiningOp();         // used there or later
      return boundary.count(v) && stageOf.lookup(d) < into &&
             lastUseStage.lookup(v) >= into;
    };

    OpBuilder b(&getContext());
    b.setInsertionPointToStart(&block);
    // Inputs: an argument per value crossing into stage s; a constant of an
    // earlier stage is cloned here.
    llvm::DenseMap<Value, Value> replacement;
    auto dataLike = [&](int64_t k, StringRef attr) {
      return b.getDictionaryAttr(
          {b.getNamedAttr(attr, b.getI64IntegerAttr(k)),
           b.getNamedAttr(nn::kDataAttr, b.getStringAttr("features"))});
    };
    for (auto [v, k] : boundary)
      if (crosses(v, s)) {
        unsigned idx = fn.getNumArguments();
        if (failed(fn.insertArgument(idx, v.getType(),
                                     dataLike(k, kPPInputAttr), v.getLoc())))
          return failure();
        replacement[v] = fn.getArgument(idx);
      }
    for (Operation *op : ops) {
      if (stageOf.lookup(op) != s)
        continue;
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (auto it = replacement.find(v); it != replacement.end()) {
          use.set(it->second);
          continue;
        }
        Operation *d = v.getDefiningOp();
        if (d && stageOf.lookup(d) < s && isConstant(d)) {
          OpBuilder top(&block, block.begin());
          Value c = top.clone(*d)->getResult(0);
          replacement[v] = c;
          use.set(c);
        }
      }
    }
    // Outputs: the values crossing into stage s + 1 (an argument when they
    // only pass through), each with an argument for its gradient.
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    if (s != last) {
      SmallVector<Value> outs;
      SmallVector<Attribute> attrs;
      for (auto [v, k] : boundary)
        if (crosses(v, s + 1)) {
          outs.push_back(replacement.lookup(v) ? replacement.lookup(v) : v);
          attrs.push_back(b.getDictionaryAttr(
              b.getNamedAttr(kPPOutputAttr, b.getI64IntegerAttr(k))));
          if (isa<FloatType>(getElementTypeOrSelf(v.getType())))
            if (failed(fn.insertArgument(fn.getNumArguments(), v.getType(),
                                         dataLike(k, kPPOutputGradAttr),
                                         v.getLoc())))
              return failure();
        }
      OpBuilder rb(ret);
      func::ReturnOp::create(rb, ret.getLoc(), outs);
      ret.erase();
      fn.setFunctionType(FunctionType::get(&getContext(), fn.getArgumentTypes(),
                                           ValueRange(outs).getTypes()));
      fn.setAllResultAttrs(attrs);
    }
    // Everything of the other stages goes (users first).
    for (Operation *op : llvm::reverse(ops))
      if (stageOf.lookup(op) != s) {
        op->dropAllUses();
        op->erase();
      }
    // Parameters and data this stage does not use.
    llvm::BitVector erase(fn.getNumArguments());
    for (BlockArgument a : fn.getArguments())
      if (a.use_empty() &&
          !fn.getArgAttr(a.getArgNumber(), kPPOutputGradAttr) &&
          (fn.getArgAttr(a.getArgNumber(), nn::kParamAttr) ||
           (fn.getArgAttr(a.getArgNumber(), nn::kDataAttr) &&
            !fn.getArgAttr(a.getArgNumber(), kPPInputAttr))))
        erase.set(a.getArgNumber());
    if (failed(fn.eraseArguments(erase)))
      return failure();
    return success();
  }

  void fail(Location loc, const std::string &message) {
    (void)failAt(loc, message);
    signalPassFailure();
  }
  static LogicalResult failAt(Location loc, const std::string &message) {
    return emitError(loc) << "fsdp-pipeline-split: " << message;
  }
};
} // namespace
