//===- VocabParallel.cpp - vocab-parallel embedding, LM head and loss -----===//
//
// Shoeybi et al., "Megatron-LM" (2019), Sec. 3 (the output embedding and
// the cross-entropy fused so that no rank gathers the logits; Megatron-LM's
// VocabParallelEmbedding and vocab_parallel_cross_entropy): on rank t of a
// tensor-parallel group of T the embedding table and the LM head keep the
// vocabulary rows [t·V/T, (t+1)·V/T) (a tied table the same rows for both).
//
//   embedding: y_t = lookup in the slice, 0 outside;  y = Σ_t y_t      (g)
//   head:      logits_t = f(h) · W_tᵀ        [rows, V/T] per rank      (f)
//   loss:      stats_t = (max, Σ exp(· − max), label logit or 0) per row,
//              all-reduced (each rank's in its own slot: an all-gather),
//              merged as log-sum-exp; dlogits_t = softmax_t − onehot_t
//              with no communication.
//
// The two boundaries where the replicated activations meet the split ones
// are vocabEmbeddingOutput and vocabHeadInput (sequence parallelism swaps
// them for a reduce-scatter and an all-gather along the sequence).
//
//===----------------------------------------------------------------------===//
#include "VocabParallel.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::fsdp;

Value mlir::fsdp::vocabEmbeddingOutput(OpBuilder &b, Location loc,
                                       Value partial) {
  return nn::TpAllReduceOp::create(b, loc, partial);
}

Value mlir::fsdp::vocabHeadInput(OpBuilder &b, Location loc, Value input) {
  return nn::TpCopyOp::create(b, loc, input);
}

namespace {

/// A parameter's FQN, or null if `v` is not a parameter argument.
StringAttr paramName(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                               nn::kParamAttr)
             : StringAttr();
}

/// The LM head: the nn.linear of a parameter weight whose logits only
/// `ce` reads.
nn::LinearOp matchHead(func::FuncOp fn, nn::CrossEntropyOp ce) {
  auto head = ce.getLogits().getDefiningOp<nn::LinearOp>();
  if (!head || !head.getResult().hasOneUse() ||
      !paramName(fn, head.getWeight()) ||
      (head.getBias() && !paramName(fn, head.getBias())))
    return nullptr;
  return head;
}

class VocabRewriter {
public:
  VocabRewriter(func::FuncOp fn, int64_t tp, TensorSlices &slices)
      : fn(fn), tp(tp), slices(slices), b(fn.getContext()) {}

  LogicalResult run() {
    SmallVector<std::pair<nn::CrossEntropyOp, nn::LinearOp>> heads;
    SmallVector<nn::EmbeddingOp> embeddings;
    fn.walk([&](Operation *op) {
      if (auto ce = dyn_cast<nn::CrossEntropyOp>(op)) {
        if (nn::LinearOp head = matchHead(fn, ce)) {
          heads.push_back({ce, head});
          users.insert(head);
        }
      } else if (auto emb = dyn_cast<nn::EmbeddingOp>(op);
                 emb && paramName(fn, emb.getTable())) {
        embeddings.push_back(emb);
        users.insert(emb);
      }
    });
    for (nn::EmbeddingOp emb : embeddings)
      if (failed(slice(emb.getTable(), 0, emb)))
        return failure();
    for (auto [ce, head] : heads) {
      // The weight's output features: [V, in], or [in, V] (Conv1D).
      int64_t dim = head.getTransposeWeight() ? 1 : 0;
      if (failed(slice(head.getWeight(), dim, head)) ||
          (head.getBias() && failed(slice(head.getBias(), 0, head))))
        return failure();
    }
    for (nn::EmbeddingOp emb : embeddings)
      rewriteEmbedding(emb);
    for (auto [ce, head] : heads)
      rewriteHead(ce, head);
    return success();
  }

private:
  /// Keeps rows [t·V/T, (t+1)·V/T) of parameter `v` along `dim` (the
  /// vocabulary); a parameter already split (a tied table) must be split
  /// along the same dimension.
  LogicalResult slice(Value v, int64_t dim, Operation *user) {
    StringAttr fqn = paramName(fn, v);
    auto t = cast<RankedTensorType>(v.getType());
    auto *done = slices.find(fqn);
    if (done != slices.end()) {
      if (done->second[0] == dim)
        return success();
      return user->emitOpError()
             << "tp=" << tp << ": parameter '" << fqn.getValue()
             << "' is tied between the embedding and an LM head that stores "
                "it [in, out]; the vocab-parallel layout needs the same "
                "vocabulary rows for both";
    }
    for (Operation *u : v.getUsers())
      if (!users.contains(u))
        return u->emitOpError()
               << "tp=" << tp << ": uses parameter '" << fqn.getValue()
               << "', which the vocab-parallel embedding or LM head splits "
                  "by vocabulary rows (pass vocab-parallel=false to keep it "
                  "replicated)";
    SmallVector<int64_t> shape(t.getShape());
    if (shape[dim] % tp != 0)
      return user->emitOpError()
             << "tp=" << tp << ": the vocabulary of parameter '"
             << fqn.getValue() << "' (" << shape[dim] << ", dimension " << dim
             << ") is not divisible by tp; pad the vocabulary to a multiple "
                "of tp (Megatron-LM's make-vocab-size-divisible-by) or pass "
                "vocab-parallel=false to keep the embedding and LM head "
                "replicated";
    SmallVector<int64_t> rec{dim, 1};
    rec.append(shape.begin(), shape.end());
    slices[fqn] = DenseI64ArrayAttr::get(fn.getContext(), rec);
    shape[dim] /= tp;
    cast<BlockArgument>(v).setType(
        RankedTensorType::get(shape, t.getElementType()));
    return success();
  }

  void rewriteEmbedding(nn::EmbeddingOp emb) {
    emb.setVocabParallel(true);
    b.setInsertionPointAfter(emb);
    Value sum = vocabEmbeddingOutput(b, emb.getLoc(), emb.getResult());
    emb.getResult().replaceAllUsesExcept(sum, sum.getDefiningOp());
  }

  void rewriteHead(nn::CrossEntropyOp ce, nn::LinearOp head) {
    b.setInsertionPoint(head);
    head.getInputMutable().assign(
        vocabHeadInput(b, head.getLoc(), head.getInput()));
    // The logits' type is re-inferred on the slices later; the statistics'
    // and the loss's do not depend on the vocabulary.
    b.setInsertionPoint(ce);
    Value stats = nn::VocabParallelCeStatsOp::create(
        b, ce.getLoc(), ce.getLogits(), ce.getLabels(), tp);
    Value all = nn::TpAllReduceOp::create(b, ce.getLoc(), stats);
    Value loss = nn::VocabParallelCrossEntropyOp::create(
        b, ce.getLoc(), ce.getLogits(), ce.getLabels(), all);
    ce.getResult().replaceAllUsesWith(loss);
    ce.erase();
  }

  func::FuncOp fn;
  int64_t tp;
  TensorSlices &slices;
  OpBuilder b;
  llvm::SmallPtrSet<Operation *, 8> users;
};

} // namespace

LogicalResult mlir::fsdp::applyVocabParallel(func::FuncOp fn, int64_t tp,
                                             TensorSlices &slices) {
  return VocabRewriter(fn, tp, slices).run();
}
