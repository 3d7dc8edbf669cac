//===- SequenceParallel.cpp - Megatron sequence parallelism ---------------===//
//
// Korthikanti et al. 2022, Sec. 4.2.2: under tensor parallelism the ops
// between the regions (norms, residual adds) run replicated on the whole
// sequence, so their activations are not divided by T (Table 2: 10·sbh of
// a layer's 34·sbh). Splitting them along the sequence over the group
// divides every activation by T; the region boundaries become an
// all-gather before a column-parallel linear and a reduce-scatter after a
// row-parallel one, which move the bytes of f's and g's all-reduces.
// What this file decides: which values hold sequence chunks (the values
// connected to the regions through per-token ops), where the split starts
// and ends, and which replicated operands need their gradient summed.
//
//===----------------------------------------------------------------------===//
#include "SequenceParallel.h"

#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// This tensor-parallel rank's chunk of `t` along the sequence:
/// [..., s, ...] -> [..., s/tp, ...] (dimension kSequenceDim).
RankedTensorType sequenceChunkType(RankedTensorType t, int64_t tp) {
  SmallVector<int64_t> shape(t.getShape());
  shape[kSequenceDim] /= tp;
  return RankedTensorType::get(shape, t.getElementType());
}

/// Ops that act on each token alone, so that they run on a sequence chunk
/// as they do on the whole: the same result rows, no communication
/// (nn.dropout draws each element's mask at its global sequence position:
/// its `tensor_split`).
bool isPerToken(Operation *op) {
  return isa<nn::LayerNormOp, nn::RMSNormOp, nn::AddOp, nn::MulOp, nn::GeluOp,
             nn::SiluOp, nn::ReluOp, nn::CastOp, nn::BroadcastOp,
             nn::DropoutOp>(op);
}

/// Sequence parallelism on one function: the values that hold chunks and
/// the rewrite.
class SequenceSplit {
public:
  SequenceSplit(func::FuncOp fn, int64_t tp) : fn(fn), tp(tp) {}

  LogicalResult run() {
    SmallVector<nn::TpCopyOp> enters;
    SmallVector<nn::TpAllReduceOp> leaves;
    fn.walk([&](nn::TpCopyOp op) { enters.push_back(op); });
    // A sum no per-token op reads stays an all-reduce: the vocab-parallel
    // loss's statistics, and a vocab-parallel embedding whose output GPT-2's
    // nn.position_embedding reads whole (a reduce-scatter would have to be
    // all-gathered again; the split follows the position embedding).
    // A sum sent to the next pipeline stage as it is (a chunk of only the
    // embedding: pp-split-embedding) crosses as a chunk too, so it is
    // reduce-scattered as Megatron-LM's embedding under sequence
    // parallelism.
    fn.walk([&](nn::TpAllReduceOp op) {
      if (llvm::any_of(op->getUsers(), isPerToken) ||
          llvm::any_of(op->getUses(), [&](OpOperand &u) { return isSent(u); }))
        leaves.push_back(op);
    });
    for (nn::TpCopyOp f : enters)
      if (failed(seed(f.getInput(), f)))
        return failure();
    for (nn::TpAllReduceOp g : leaves)
      if (failed(seed(g.getResult(), g)))
        return failure();
    seedPipelineBoundary();
    propagate();
    if (failed(checkDivisible()))
      return failure();
    // Decided before the rewrite replaces the sent values (a chunk of only
    // the embedding sends its reduce-scatter, GPT-2's its split).
    SmallVector<unsigned> sent = sentChunks();
    wrapReplicatedOperands();
    OpBuilder b(fn.getContext());
    splitEntries(b);
    gatherExits(b);
    for (nn::TpCopyOp f : enters) {
      b.setInsertionPoint(f);
      f.replaceAllUsesWith(nn::SpAllGatherOp::create(
                               b, f.getLoc(), f.getInput(), kSequenceDim, tp,
                               /*replicated_grad=*/false)
                               .getResult());
      f.erase();
    }
    for (nn::TpAllReduceOp g : leaves) {
      b.setInsertionPoint(g);
      g.replaceAllUsesWith(nn::SpReduceScatterOp::create(
                               b, g.getLoc(), g.getInput(), kSequenceDim, tp)
                               .getResult());
      g.erase();
    }
    retypePipelineBoundary(sent);
    return success();
  }

private:
  /// Pipeline parallelism (a stage of fsdp-pipeline-split): every boundary
  /// activation of the regions' [batch, seq] crosses between the stages as
  /// this rank's sequence chunk, as Megatron-LM sends 1/T of it under
  /// sequence parallelism (megatron/core/pipeline_parallel/schedules.py,
  /// get_tensor_shapes: seq_length // tp_size). So a received one is a
  /// chunk that no op makes (not an entry: no split), and a sent one a
  /// chunk whose return is not an exit (no gather). Both sides decide by
  /// the value's shape alone, so that the sender's and the receiver's
  /// buffers agree; a boundary value no per-token op touches on this stage
  /// is split right after it is made, or gathered at its first reader.
  void seedPipelineBoundary() {
    // A stage without a region (a chunk of only the embedding or only the
    // head: pp-split-embedding, pp-split-loss) takes the [batch, seq] of
    // the activations it sends or receives, which its neighbour's regions
    // have.
    if (batchSeq.empty()) {
      auto adopt = [&](Value v) {
        auto t = dyn_cast<RankedTensorType>(v.getType());
        if (batchSeq.empty() && t && t.getRank() > kSequenceDim + 1 &&
            isa<FloatType>(t.getElementType()))
          batchSeq.assign(t.getShape().begin(),
                          t.getShape().begin() + kSequenceDim + 1);
      };
      for (BlockArgument a : fn.getArguments())
        if (fn.getArgAttr(a.getArgNumber(), kPPInputAttr))
          adopt(a);
      for (OpOperand &u : fn.getBody().front().getTerminator()->getOpOperands())
        if (isSent(u))
          adopt(u.get());
    }
    if (batchSeq.empty())
      return;
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), kPPInputAttr) && sequenceShaped(a)) {
        received.insert(a);
        add(a);
      }
    Operation *ret = fn.getBody().front().getTerminator();
    for (OpOperand &u : ret->getOpOperands())
      if (isSent(u) && sequenceShaped(u.get()))
        add(u.get());
  }

  /// A return of a value sent to the next stage (fsdp.pp_output).
  bool isSent(OpOperand &u) const {
    func::FuncOp f = fn; // getResultAttr is not const
    return isa<func::ReturnOp>(u.getOwner()) &&
           f.getResultAttr(u.getOperandNumber(), kPPOutputAttr) != nullptr;
  }

  /// The result numbers of the sent values that hold chunks.
  SmallVector<unsigned> sentChunks() {
    SmallVector<unsigned> out;
    for (OpOperand &u : fn.getBody().front().getTerminator()->getOpOperands())
      if (isSent(u) && chunks.contains(u.get()))
        out.push_back(u.getOperandNumber());
    return out;
  }

  /// The received chunks' arguments, and the gradients of the `sent`
  /// chunks (sentChunks; received back), take the chunk's type; the caller
  /// re-infers the rest.
  void retypePipelineBoundary(ArrayRef<unsigned> sent) {
    auto chunkType = [&](Type t) {
      return sequenceChunkType(cast<RankedTensorType>(t), tp);
    };
    for (BlockArgument a : received)
      a.setType(chunkType(a.getType()));
    for (unsigned i : sent) {
      Attribute k = fn.getResultAttr(i, kPPOutputAttr);
      for (BlockArgument a : fn.getArguments())
        if (fn.getArgAttr(a.getArgNumber(), kPPOutputGradAttr) == k)
          a.setType(chunkType(a.getType()));
    }
  }

  /// A region's input or output: [batch, seq, ...], every region's alike.
  LogicalResult seed(Value v, Operation *at) {
    auto t = cast<RankedTensorType>(v.getType());
    // At the region's first linear (f's and g's location).
    if (t.getRank() <= kSequenceDim + 1)
      return emitError(at->getLoc())
             << "tp=" << tp
             << " with sequence-parallel: the tensor-parallel region's "
                "input and output must be [batch, seq, hidden] activations "
                "to split along the sequence, got "
             << t << " (pass sequence-parallel=false)";
    ArrayRef<int64_t> bs = t.getShape().take_front(kSequenceDim + 1);
    if (batchSeq.empty())
      batchSeq.assign(bs.begin(), bs.end());
    else if (bs != ArrayRef<int64_t>(batchSeq))
      return emitError(at->getLoc())
             << "tp=" << tp
             << " with sequence-parallel: this region's activations " << t
             << " do not have the [batch, seq] of the others";
    add(v);
    return success();
  }

  void add(Value v) {
    if (chunks.insert(v))
      work.push_back(v);
  }

  /// A [batch, seq, ...] value of the regions' batch and sequence.
  bool sequenceShaped(Value v) const {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() > kSequenceDim + 1 &&
           t.getShape().take_front(kSequenceDim + 1) ==
               ArrayRef<int64_t>(batchSeq);
  }

  /// The operands and results of per-token `op` that are sequence-shaped
  /// activations (a broadcast's input is the replicated tensor it spreads
  /// over the tokens, not one).
  SmallVector<Value> activations(Operation *op) const {
    SmallVector<Value> out;
    auto keep = [&](Value v) {
      if (sequenceShaped(v))
        out.push_back(v);
    };
    if (auto bc = dyn_cast<nn::BroadcastOp>(op))
      keep(bc.getLike());
    else
      llvm::for_each(op->getOperands(), keep);
    llvm::for_each(op->getResults(), keep);
    return out;
  }

  bool isActivationOf(Value v, Operation *op) const {
    return isPerToken(op) && llvm::is_contained(activations(op), v);
  }

  /// Every activation connected to the seeds through per-token ops.
  void propagate() {
    while (!work.empty()) {
      Value v = work.pop_back_val();
      SmallVector<Operation *> ops(v.getUsers().begin(), v.getUsers().end());
      if (Operation *def = v.getDefiningOp())
        ops.push_back(def);
      for (Operation *op : ops) {
        if (!isActivationOf(v, op))
          continue;
        perTokenOps.insert(op);
        for (Value a : activations(op))
          add(a);
      }
    }
  }

  LogicalResult checkDivisible() {
    if (batchSeq[kSequenceDim] % tp == 0)
      return success();
    // Named at the op whose result enters the split (the embedding), the
    // model file's line when it was imported.
    // The vocab-parallel embedding's lookups enter through their sum.
    Operation *at = nullptr;
    for (Value c : chunks) {
      Operation *def = c.getDefiningOp();
      if (auto g = dyn_cast_or_null<nn::TpAllReduceOp>(def))
        def = g.getInput().getDefiningOp();
      else if (!isEntry(c))
        continue;
      if (def && (!at || def->isBeforeInBlock(at)))
        at = def;
    }
    Value v = at ? at->getResult(0) : chunks.front();
    InFlightDiagnostic d = at ? at->emitOpError() : fn.emitError();
    d << "tp=" << tp << " with sequence-parallel: the sequence length "
      << batchSeq[kSequenceDim] << " (dimension " << kSequenceDim << " of "
      << v.getType()
      << ") is not divisible by tp (each rank of the tensor-parallel group "
         "holds 1/tp of it; or pass sequence-parallel=false)";
    return failure();
  }

  /// A chunked value that no per-token op and no region makes: the
  /// embedding's output (or a function argument).
  bool isEntry(Value v) const {
    Operation *def = v.getDefiningOp();
    if (!def)
      return !received.contains(cast<BlockArgument>(v));
    return !perTokenOps.contains(def) && !isa<nn::TpAllReduceOp>(def);
  }

  /// A use of chunked `u.get()` by an op that needs the whole sequence.
  bool isExit(OpOperand &u) const {
    Operation *op = u.getOwner();
    return !isa<nn::TpCopyOp>(op) && !isActivationOf(u.get(), op) && !isSent(u);
  }

  /// The replicated operands of the ops on chunks (norm weights, row
  /// biases) read through f: each rank's gradient of them sums its own
  /// tokens only, f's backward all-reduce sums the group's.
  void wrapReplicatedOperands() {
    OpBuilder b(fn.getContext());
    for (Operation *op : perTokenOps)
      for (OpOperand &u : op->getOpOperands()) {
        Value v = u.get();
        if (chunks.contains(v) || !isa<FloatType>(getElementTypeOrSelf(v)))
          continue;
        b.setInsertionPoint(op);
        u.set(nn::TpCopyOp::create(b, op->getLoc(), v));
      }
  }

  void splitEntries(OpBuilder &b) {
    for (Value v : chunks) {
      if (!isEntry(v))
        continue;
      Operation *def = v.getDefiningOp();
      b.setInsertionPointAfterValue(v);
      Value chunk =
          enterSequenceSplit(b, def ? def->getLoc() : fn.getLoc(), v, tp);
      // Ops that need the whole sequence keep reading it.
      v.replaceUsesWithIf(chunk, [&](OpOperand &u) {
        return u.getOwner() != chunk.getDefiningOp() && !isExit(u);
      });
    }
  }

  void gatherExits(OpBuilder &b) {
    for (Value v : chunks) {
      if (isEntry(v))
        continue;
      SmallVector<OpOperand *> exits;
      for (OpOperand &u : v.getUses())
        if (isExit(u))
          exits.push_back(&u);
      if (exits.empty())
        continue;
      // Gathered right before its first reader: the whole tensor lives
      // from there.
      Operation *first = exits.front()->getOwner();
      for (OpOperand *u : exits)
        if (u->getOwner()->isBeforeInBlock(first))
          first = u->getOwner();
      b.setInsertionPoint(first);
      Value whole = leaveSequenceSplit(b, first->getLoc(), v, tp);
      for (OpOperand *u : exits)
        u->set(whole);
    }
  }

  func::FuncOp fn;
  int64_t tp;
  SmallVector<int64_t> batchSeq;
  llvm::SetVector<Value> chunks;
  SmallVector<Value> work;
  llvm::SetVector<Operation *> perTokenOps;
  llvm::SetVector<BlockArgument> received; // pipeline chunks received
};

} // namespace

Value mlir::fsdp::enterSequenceSplit(OpBuilder &b, Location loc, Value whole,
                                     int64_t tp) {
  return nn::SpSplitOp::create(b, loc, whole, kSequenceDim, tp);
}

Value mlir::fsdp::leaveSequenceSplit(OpBuilder &b, Location loc, Value chunk,
                                     int64_t tp) {
  return nn::SpAllGatherOp::create(b, loc, chunk, kSequenceDim, tp,
                                   /*replicated_grad=*/true);
}

LogicalResult mlir::fsdp::applySequenceParallel(func::FuncOp fn, int64_t tp) {
  return SequenceSplit(fn, tp).run();
}

void mlir::fsdp::applyPipelineScatterGather(func::FuncOp fn, int64_t tp) {
  auto chunkType = [&](Type t) -> RankedTensorType {
    auto r = dyn_cast<RankedTensorType>(t);
    if (!r || !r.hasStaticShape() || !isa<FloatType>(r.getElementType()) ||
        r.getRank() <= kSequenceDim + 1 || r.getDimSize(kSequenceDim) % tp)
      return {};
    return sequenceChunkType(r, tp);
  };
  Block &body = fn.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&body);
  for (BlockArgument a : fn.getArguments()) {
    RankedTensorType chunk = chunkType(a.getType());
    if (!chunk || !fn.getArgAttr(a.getArgNumber(), kPPInputAttr))
      continue;
    Type wholeType = a.getType();
    a.setType(chunk);
    auto whole = nn::SpAllGatherOp::create(b, fn.getLoc(), a, kSequenceDim, tp,
                                           /*replicated_grad=*/true);
    assert(whole.getType() == wholeType && "the gather restores the type");
    (void)wholeType;
    a.replaceAllUsesExcept(whole.getResult(), whole);
  }
  Operation *ret = body.getTerminator();
  b.setInsertionPoint(ret);
  for (OpOperand &u : ret->getOpOperands()) {
    auto key = fn.getResultAttr(u.getOperandNumber(), kPPOutputAttr);
    RankedTensorType chunk = chunkType(u.get().getType());
    if (!key || !chunk)
      continue;
    u.set(nn::SpSplitOp::create(b, ret->getLoc(), u.get(), kSequenceDim, tp));
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), kPPOutputGradAttr) == key)
        a.setType(chunk);
  }
}
