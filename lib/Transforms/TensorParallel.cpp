//===- TensorParallel.cpp - fsdp-tensor-parallel: Megatron-LM's layout ----===//
//
// Shoeybi et al., "Megatron-LM" (2019), Sec. 3: in a transformer block the
// first linears of the attention (q, k, v) and of the MLP (up, gate) are split
// by output features (column-parallel) and the last (o, down) by input
// features (row-parallel), so that the ops between them (attention per head,
// rope, activations, the gate's product) run on each rank's slice with no
// communication; the block's input enters through f (nn.tp_copy: identity
// forward, all-reduce backward) and the row-parallel linear's partial sums
// leave through g (nn.tp_all_reduce: all-reduce forward, identity backward).
// Both are ordinary differentiable ops, so fsdp-autodiff derives the
// backward, its all-reduces included.
//
// The region is found on the graph, not by name: a linear whose input is
// computed from other linears through region ops only (and whose values are
// used nowhere else) is row-parallel, those linears column-parallel. Why not
// the upstream `shard` dialect: docs/tensor-parallel.md.
//
//===----------------------------------------------------------------------===//
#include "SequenceParallel.h"
#include "VocabParallel.h"
#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPTENSORPARALLEL
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The ops that run on each rank's slice of a tensor-parallel region
/// (nn.dropout too: its mask is drawn by each element's global index,
/// `tensor_split` below).
bool isRegionOp(Operation *op) {
  return isa<nn::AttentionOp, nn::RopeOp, nn::SplitOp, nn::GeluOp, nn::SiluOp,
             nn::ReluOp, nn::MulOp, nn::DropoutOp>(op);
}

/// The activations an op of a region reads (dropout's optimizer step is
/// not one).
OperandRange regionOperands(Operation *op) {
  if (auto drop = dyn_cast<nn::DropoutOp>(op))
    return drop->getOperands().take_front(1);
  return op->getOperands();
}

/// Records on `op` (an nn.dropout whose input has its new, sliced type and
/// whose result still has the old one) the dimension fsdp-tensor-parallel
/// split across the group, so that the runtime draws each element's mask at
/// its index in the global tensor; fails when the slice is not T pieces of
/// one dimension (the blocks of a fused q/k/v output).
LogicalResult markTensorSplit(nn::DropoutOp op, int64_t tp) {
  auto in = cast<RankedTensorType>(op.getInput().getType());
  auto old = cast<RankedTensorType>(op.getResult().getType());
  int64_t dim = -1;
  for (int64_t i = 0; i < in.getRank(); ++i) {
    if (in.getDimSize(i) == old.getDimSize(i))
      continue;
    if (dim >= 0 || i == 0 || in.getDimSize(i) * tp != old.getDimSize(i))
      return op.emitOpError()
             << "tp=" << tp << ": dropout of " << in
             << " is not 1/tp of one non-batch dimension of " << old;
    dim = i;
  }
  op.setTensorSplit(dim);
  return success();
}

/// One Megatron region: the row-parallel linear that ends it, the
/// column-parallel linears that start it and the ops in between.
struct Region {
  nn::LinearOp row;
  SmallVector<nn::LinearOp> columns;
  llvm::SetVector<Operation *> ops;
};

/// The region that `row` ends, if its input is such a region.
std::optional<Region> matchRegion(nn::LinearOp row) {
  Operation *def = row.getInput().getDefiningOp();
  if (!def || !isRegionOp(def))
    return std::nullopt;
  Region r;
  r.row = row;
  SmallVector<Operation *> work{def};
  llvm::SetVector<Operation *> columns;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (auto lin = dyn_cast<nn::LinearOp>(op)) {
      if (!isa<BlockArgument>(lin.getWeight()))
        return std::nullopt;
      columns.insert(op);
      continue;
    }
    if (!isRegionOp(op))
      return std::nullopt;
    if (!r.ops.insert(op))
      continue;
    for (Value v : regionOperands(op)) {
      Operation *d = v.getDefiningOp();
      if (!d)
        return std::nullopt;
      work.push_back(d);
    }
  }
  // No value of the region may escape it (it exists only as slices).
  auto inside = [&](Operation *user) {
    return user == row.getOperation() || r.ops.contains(user);
  };
  for (Operation *op : llvm::concat<Operation *const>(r.ops, columns))
    for (Value v : op->getResults())
      if (!llvm::all_of(v.getUsers(), inside))
        return std::nullopt;
  for (Operation *op : columns)
    r.columns.push_back(cast<nn::LinearOp>(op));
  return r;
}

struct FSDPTensorParallelPass
    : mlir::fsdp::impl::FSDPTensorParallelBase<FSDPTensorParallelPass> {
  using Base::Base;

  /// Slices parameter `arg` along `dim` ([dim, blocks, global shape...]).
  LogicalResult sliceParam(func::FuncOp fn, Value v, int64_t dim,
                           int64_t blocks, Operation *user) {
    auto arg = dyn_cast<BlockArgument>(v);
    auto fqn = arg ? fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     nn::kParamAttr)
                   : StringAttr();
    if (!fqn)
      return user->emitOpError()
             << "tp=" << static_cast<int64_t>(tp)
             << ": a tensor-parallel linear's weight and bias must be "
                "parameters (function arguments with nn.param)";
    if (!v.hasOneUse())
      return user->emitOpError()
             << "tp=" << static_cast<int64_t>(tp) << ": parameter '"
             << fqn.getValue()
             << "' is split across the tensor-parallel group but also used "
                "elsewhere (a tied split parameter is not supported)";
    auto t = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(t.getShape());
    if (shape[dim] % (blocks * tp) != 0)
      return user->emitOpError()
             << "tp=" << static_cast<int64_t>(tp) << ": dimension " << dim
             << " of parameter '" << fqn.getValue() << "' (" << shape[dim]
             << ") is not divisible by " << blocks * tp
             << (blocks > 1 ? " (its blocks x tp)" : " (tp)");
    SmallVector<int64_t> rec{dim, blocks};
    rec.append(shape.begin(), shape.end());
    slices[fqn] = DenseI64ArrayAttr::get(&getContext(), rec);
    shape[dim] /= tp;
    arg.setType(RankedTensorType::get(shape, t.getElementType()));
    return success();
  }

  /// Heads and key/value heads must divide by T (Megatron-core splits whole
  /// heads and asserts the same: `divide(num_query_groups, world_size)` in
  /// its Attention; vLLM replicates kv-heads when T exceeds them, which is
  /// not done here).
  LogicalResult checkHeads(nn::AttentionOp attn) {
    int64_t hq = static_cast<int64_t>(attn.getNumHeads());
    int64_t hkv = static_cast<int64_t>(attn.getNumKvHeads());
    if (hq % tp == 0 && hkv % tp == 0)
      return success();
    return attn.emitOpError()
           << "tp=" << static_cast<int64_t>(tp)
           << " must divide the attention heads (" << hq
           << ") and the key/value heads (" << hkv
           << "): Megatron-LM splits whole heads across the tensor-parallel "
              "group";
  }

  LogicalResult rewrite(func::FuncOp fn, Region &r) {
    OpBuilder b(&getContext());
    // Column-parallel: output features (Conv1D [in, out]: dimension 1).
    llvm::MapVector<Value, Value> entered; // region input -> its tp_copy
    for (nn::LinearOp col : r.columns) {
      int64_t blocks = 1;
      for (Operation *user : col.getResult().getUsers()) {
        if (auto split = dyn_cast<nn::SplitOp>(user))
          blocks = static_cast<int64_t>(split.getSizes().size());
        // Before a split its slice would be `blocks` pieces, not one piece
        // of the global tensor: the mask index cannot be derived from it.
        if (isa<nn::DropoutOp>(user) &&
            llvm::any_of(user->getUsers(), llvm::IsaPred<nn::SplitOp>))
          return user->emitOpError()
                 << "tp=" << static_cast<int64_t>(tp)
                 << ": dropout of a column-parallel linear's output is "
                    "supported after its split (per q, k, v), not before";
      }
      int64_t wdim = col.getTransposeWeight() ? 1 : 0;
      if (failed(sliceParam(fn, col.getWeight(), wdim, blocks, col)) ||
          (col.getBias() &&
           failed(sliceParam(fn, col.getBias(), 0, blocks, col))))
        return failure();
      Value x = col.getInput();
      auto *it = entered.find(x);
      if (it == entered.end()) {
        b.setInsertionPointAfterValue(x);
        Value f = nn::TpCopyOp::create(b, col.getLoc(), x);
        it = entered.insert({x, f}).first;
      }
      col.getInputMutable().assign(it->second);
    }
    for (Operation *op : r.ops) {
      if (auto attn = dyn_cast<nn::AttentionOp>(op)) {
        attn.setNumHeads(attn.getNumHeads() / static_cast<uint64_t>(tp));
        attn.setNumKvHeads(attn.getNumKvHeads() / static_cast<uint64_t>(tp));
      } else if (auto split = dyn_cast<nn::SplitOp>(op)) {
        int64_t rank =
            cast<RankedTensorType>(split.getInput().getType()).getRank();
        int64_t axis = static_cast<int64_t>(split.getAxis());
        if (axis != rank - 1 && axis != -1)
          return split.emitOpError()
                 << "tp=" << static_cast<int64_t>(tp)
                 << ": only a split of the feature (last) axis can be "
                    "tensor-parallel";
        SmallVector<int64_t> sizes(split.getSizes());
        int64_t first = sizes.front();
        for (int64_t &s : sizes) {
          if (s != first)
            return split.emitOpError()
                   << "tp=" << static_cast<int64_t>(tp)
                   << ": a tensor-parallel split needs equal pieces";
          s /= tp;
        }
        split.setSizes(sizes);
      }
    }
    // Row-parallel: input features (Conv1D [in, out]: dimension 0); the
    // partial sums are all-reduced before the (replicated) bias is added.
    nn::LinearOp row = r.row;
    int64_t wdim = row.getTransposeWeight() ? 0 : 1;
    if (failed(sliceParam(fn, row.getWeight(), wdim, 1, row)))
      return failure();
    b.setInsertionPointAfter(row);
    auto partial = nn::LinearOp::create(b, row.getLoc(), row.getType(),
                                        row.getInput(), row.getWeight(),
                                        Value(), row.getTransposeWeight());
    Value y = nn::TpAllReduceOp::create(b, row.getLoc(), partial.getResult());
    if (Value bias = row.getBias()) {
      int64_t rank = cast<RankedTensorType>(y.getType()).getRank();
      SmallVector<int64_t> axes;
      for (int64_t i = 0; i + 1 < rank; ++i)
        axes.push_back(i);
      Value bb = nn::BroadcastOp::create(b, row.getLoc(), y.getType(), bias, y,
                                         b.getDenseI64ArrayAttr(axes));
      y = nn::AddOp::create(b, row.getLoc(), y, bb);
    }
    row.getResult().replaceAllUsesWith(y);
    row.erase();
    return success();
  }

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tp < 1) {
      module.emitError() << "fsdp-tensor-parallel: tp must be >= 1, got "
                         << static_cast<int64_t>(tp);
      return signalPassFailure();
    }
    if (tp == 1)
      return;
    FailureOr<func::FuncOp> maybeFn = getStepFunction(module);
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    // In program order; a linear ends or starts one region at most (in a
    // chain of linears through activations, every other one is split).
    SmallVector<Region> regions;
    llvm::DenseSet<Operation *> claimed;
    fn.walk([&](nn::LinearOp lin) {
      std::optional<Region> r = matchRegion(lin);
      if (!r || claimed.contains(lin) ||
          llvm::any_of(r->columns,
                       [&](nn::LinearOp c) { return claimed.contains(c); }))
        return;
      claimed.insert(lin);
      for (nn::LinearOp c : r->columns)
        claimed.insert(c);
      regions.push_back(std::move(*r));
    });
    // A graph without a block (a pipeline chunk of only the embedding, or
    // only the head and loss: pp-split-embedding, pp-split-loss) is split
    // by the vocab-parallel layout alone; one with neither is a mistake.
    auto noRegion = [&] {
      fn.emitError() << "tp=" << static_cast<int64_t>(tp)
                     << ": no tensor-parallel region in this graph (a linear "
                        "whose input comes from other linears through "
                        "attention, rope, split, activations or products"
                     << (vocabParallel ? ", or a vocab-parallel embedding "
                                         "or LM head)"
                                       : ")");
      signalPassFailure();
    };
    if (regions.empty() && !vocabParallel)
      return noRegion();
    // Whole heads first: a head count T does not divide is the usual
    // mistake, and is named before any parameter's shape.
    for (Region &r : regions)
      for (Operation *op : r.ops)
        if (auto attn = dyn_cast<nn::AttentionOp>(op);
            attn && failed(checkHeads(attn)))
          return signalPassFailure();
    for (Region &r : regions)
      if (failed(rewrite(fn, r)))
        return signalPassFailure();
    // Megatron-LM's vocab-parallel embedding, head and loss first: their
    // f and g become the sequence split's boundaries below.
    if (vocabParallel && failed(applyVocabParallel(fn, tp, slices)))
      return signalPassFailure();
    if (regions.empty() && slices.empty())
      return noRegion();
    // Korthikanti et al. 2022: the activations between the regions on
    // sequence chunks (SequenceParallel.cpp).
    if (sequenceParallel && failed(applySequenceParallel(fn, tp)))
      return signalPassFailure();
    // Without it, a stage's boundary activations cross as chunks all the
    // same (Narayanan et al., SC'21, Sec. 4.1).
    if (!sequenceParallel && ppScatterGather)
      applyPipelineScatterGather(fn, tp);
    fn.setFunctionType(FunctionType::get(
        &getContext(), fn.getBody().front().getArgumentTypes(),
        fn.getResultTypes()));
    for (Operation &op : fn.getBody().front().without_terminator()) {
      if (auto drop = dyn_cast<nn::DropoutOp>(op);
          drop && failed(markTensorSplit(drop, static_cast<int64_t>(tp))))
        return signalPassFailure();
      if (failed(nn::reinferResultTypes(&op))) {
        op.emitError() << "tp=" << static_cast<int64_t>(tp)
                       << ": cannot re-infer this op's shapes on the "
                          "tensor-parallel slices";
        return signalPassFailure();
      }
    }
    // A pipeline stage's sent activations are sequence chunks now.
    fn.setFunctionType(FunctionType::get(
        &getContext(), fn.getArgumentTypes(),
        fn.getBody().front().getTerminator()->getOperandTypes()));
    OpBuilder b(module);
    module->setAttr(kTensorParallelAttr, b.getI64IntegerAttr(tp));
    SmallVector<NamedAttribute> entries;
    for (auto &[fqn, rec] : slices)
      entries.push_back(b.getNamedAttr(fqn, rec));
    module->setAttr(kTensorSlicesAttr, b.getDictionaryAttr(entries));
  }

  TensorSlices slices;
};

} // namespace
