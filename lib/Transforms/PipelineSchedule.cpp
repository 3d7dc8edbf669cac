//===- PipelineSchedule.cpp - a pipeline stage's micro-batches and p2p ----===//
//
// fsdp-pipeline-micro-batch orders one stage's micro-batch forwards and
// backwards as the pipeline schedule says; fsdp-pipeline-p2p, after the
// batch split, makes the transfers between stages asynchronous
// point-to-point ops (docs/pipeline-parallel.md).
//
// Schedules, stage s of P, m micro-batches (F_j / B_j: micro-batch j's
// forward / backward on this stage):
//   gpipe (Huang et al., GPipe, 2019, Fig. 2): F_0 .. F_{m-1}, B_0 .. B_{m-1}.
//   1f1b (Narayanan et al., SC'21, Sec. 2.2, PipeDream-Flush; Megatron-LM's
//   forward_backward_pipelining_without_interleaving): w = min(P-s-1, m)
//   warm-up forwards, then F_{w+i} B_i for i < m - w, then the remaining
//   backwards; at most P - s micro-batches' activations are live.
//   interleaved-1f1b (Narayanan et al., SC'21, Sec. 2.2.2; Megatron-LM's
//   forward_backward_pipelining_with_interleaving): rank s holds v chunks,
//   chunk i being virtual stage s + i·P of P·v. Its m·v forwards and m·v
//   backwards are numbered k = 0..m·v-1; the k-th runs chunk
//   (k mod P·v) / P (the backward: v - 1 minus that) on micro-batch
//   (k / (P·v))·P + k mod P. Warm-up w = min((P-s-1)·2 + (v-1)·P, m·v)
//   forwards (all of them when m = P), then F_{w+k} B_k, then the remaining
//   backwards. m must be a multiple of P.
//
//===----------------------------------------------------------------------===//
#include "MicroBatchClone.h"
#include "fsdp/Transforms/Passes.h"
#include "fsdp/schedule/PipelineTags.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <limits>
#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPIPELINEMICROBATCH
#define GEN_PASS_DEF_FSDPPIPELINEP2P
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
/// The MPI tag of a boundary transfer (the schedule format's scheme,
/// fsdp/schedule/PipelineTags.h; kPPBoundaryTagBase in FSDP.h): the
/// `index`-th value crossing its boundary (boundaryIndex), micro-batch j of
/// m, forward (the activation) or backward (its gradient), between virtual
/// stages c and c + 1 of a pipeline with v chunks per rank, `chunk` = c / P
/// (the sending rank's chunk for an activation; 0 without interleaving).
/// Between two ranks the (index, j, backward, chunk) of every transfer
/// differ, so tags are unique per pair of ranks (MPI matches on the source
/// and the tag); sender and receiver compute it alike. It grows with m and
/// v only, not with the pipeline's boundaries.
int64_t tagOf(int64_t index, int64_t j, int64_t m, bool backward, int64_t v = 1,
              int64_t chunk = 0) {
  return ::fsdp::schedule::pipelineBoundaryTag(index, j, m, backward, v, chunk);
}

/// The direction and chunk of a boundary transfer's tag (tagOf inverted).
bool tagIsBackward(int64_t tag, int64_t v) {
  return ::fsdp::schedule::pipelineTagIsBackward(tag, v);
}
int64_t tagChunk(int64_t tag, int64_t v) {
  return ::fsdp::schedule::pipelineTagChunk(tag, v);
}

/// The index of boundary value `k` among the values of chunk `chunk` that
/// carry attribute `attr` on `fn`'s arguments (`results`: its results),
/// with a floating-point type only if `floatOnly`, by k: the values
/// crossing one boundary of virtual stages in the same order on both sides
/// (fsdp-pipeline-split numbers them over the whole model). The sender of
/// an activation counts its fsdp.pp_output results, its receiver its
/// fsdp.pp_input arguments (the same values); the gradients go back for the
/// floating-point ones only (fsdp.pp_output_grad), so the sender of a
/// gradient counts its floating-point fsdp.pp_input arguments.
int64_t boundaryIndex(func::FuncOp fn, StringRef attr, int64_t k, int64_t chunk,
                      bool results, bool floatOnly) {
  int64_t index = 0;
  unsigned n = results ? fn.getNumResults() : fn.getNumArguments();
  for (unsigned i = 0; i < n; ++i) {
    auto a = results ? fn.getResultAttrOfType<IntegerAttr>(i, attr)
                     : fn.getArgAttrOfType<IntegerAttr>(i, attr);
    auto c = results ? fn.getResultAttrOfType<IntegerAttr>(i, kPPChunkAttr)
                     : fn.getArgAttrOfType<IntegerAttr>(i, kPPChunkAttr);
    Type t = results ? fn.getResultTypes()[i] : fn.getArgumentTypes()[i];
    if (a && a.getInt() < k && (c ? c.getInt() : 0) == chunk &&
        (!floatOnly || isa<FloatType>(getElementTypeOrSelf(t))))
      ++index;
  }
  return index;
}

std::optional<int64_t> moduleInt(ModuleOp m, StringRef name) {
  if (auto a = m->getAttrOfType<IntegerAttr>(name))
    return a.getInt();
  return std::nullopt;
}

/// The chunk (fsdp.pp_chunk; 0 without interleaving) of an op.
int64_t chunkOf(Operation *op) {
  if (auto a = op->getAttrOfType<IntegerAttr>(kPPChunkAttr))
    return a.getInt();
  return 0;
}

/// One part of a stage's step: chunk `chunk`'s forward or backward of
/// micro-batch `mb`.
struct Part {
  int64_t chunk, mb;
  bool backward;
};

/// The parts of stage s in schedule order (v chunks per rank).
SmallVector<Part> scheduleOrder(StringRef schedule, int64_t P, int64_t s,
                                int64_t m, int64_t v) {
  SmallVector<Part> order;
  if (schedule == "gpipe") {
    for (int64_t j = 0; j < m; ++j)
      order.push_back({0, j, false});
    for (int64_t j = 0; j < m; ++j)
      order.push_back({0, j, true});
    return order;
  }
  if (schedule == "interleaved-1f1b") {
    int64_t total = m * v;
    int64_t warm =
        m == P ? total : std::min((P - s - 1) * 2 + (v - 1) * P, total);
    auto part = [&](int64_t k, bool backward) {
      int64_t chunk = (k % (P * v)) / P;
      return Part{backward ? v - 1 - chunk : chunk, (k / (P * v)) * P + k % P,
                  backward};
    };
    for (int64_t k = 0; k < warm; ++k)
      order.push_back(part(k, false));
    for (int64_t k = 0; k < total - warm; ++k) {
      order.push_back(part(warm + k, false));
      order.push_back(part(k, true));
    }
    for (int64_t k = total - warm; k < total; ++k)
      order.push_back(part(k, true));
    return order;
  }
  int64_t warm = std::min(P - s - 1, m);
  for (int64_t j = 0; j < warm; ++j)
    order.push_back({0, j, false});
  for (int64_t i = 0; i < m - warm; ++i) {
    order.push_back({0, warm + i, false});
    order.push_back({0, i, true});
  }
  for (int64_t i = m - warm; i < m; ++i)
    order.push_back({0, i, true});
  return order;
}

/// The parameters this stage shares with another (fsdp.pp_tied_peer, by
/// FQN): the peer stage and the exchange's MPI tag (kPPTiedTagBase + the
/// index among the two stages' shared FQNs in order, alike on both).
llvm::StringMap<std::pair<int64_t, int64_t>> tiedParameters(func::FuncOp fn) {
  std::map<std::pair<int64_t, std::string>, int64_t> byPeer;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto peer = fn.getArgAttrOfType<IntegerAttr>(i, kPPTiedPeerAttr))
      byPeer[{peer.getInt(),
              fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr).str()}] = 0;
  llvm::StringMap<std::pair<int64_t, int64_t>> tied;
  int64_t index = 0, lastPeer = -1;
  for (auto &[key, unused] : byPeer) {
    index = key.first == lastPeer ? index + 1 : 0;
    lastPeer = key.first;
    tied[key.second] = {key.first, kPPTiedTagBase + index};
  }
  return tied;
}

/// Megatron-LM's _allreduce_word_embedding_grads between two stages: this
/// stage's gradient of a tied parameter (summed over its micro-batches) is
/// sent to the peer stage and the peer's received; both add the two
/// (floating-point addition commutes, so both copies get the same sum and
/// the same update; dp-parallel ranks exchange with the same data-parallel
/// rank of the peer stage, before the reduction). The send completes at the end
/// of the step (fsdp-pipeline-p2p); the receive is waited right here.
/// Under interleaving `chunk` (the parameter's chunk on this rank) marks
/// both ops with fsdp.pp_chunk; the peer is a rank.
Value exchangeTiedGradient(OpBuilder &b, Location loc, Value grad,
                           std::pair<int64_t, int64_t> peerAndTag,
                           IntegerAttr chunk) {
  auto [peer, tag] = peerAndTag;
  auto send =
      SendOp::create(b, loc, TypeRange{}, grad, b.getI64IntegerAttr(peer),
                     b.getI64IntegerAttr(tag), nullptr);
  send->setAttr(kPPTiedPeerAttr, b.getI64IntegerAttr(peer));
  auto t = cast<RankedTensorType>(grad.getType());
  auto recv = RecvOp::create(b, loc, FutureType::get(b.getContext(), t),
                             b.getI64IntegerAttr(peer),
                             b.getI64IntegerAttr(tag), b.getUnitAttr());
  recv->setAttr(kPPTiedPeerAttr, b.getI64IntegerAttr(peer));
  if (chunk)
    for (Operation *op : {send.getOperation(), recv.getOperation()})
      op->setAttr(kPPChunkAttr, chunk);
  auto wait = WaitOp::create(b, loc, t, recv.getToken());
  // Not a micro-batch accumulation (nn.accumulate): fsdp-shard then
  // reduces the exchanged sum once, so that both stages reduce the same
  // bits (reducing each stage's micro-batches apart would add the two
  // stages' parts in another order on each, and the copies would drift).
  return nn::AddOp::create(b, loc, grad, wait.getResult());
}

/// Each result's tag index (boundaryIndex; 0 for a result that is not
/// sent), checking that the tied exchange's and the boundary transfers' tags
/// stay apart and that the largest fits an int.
FailureOr<SmallVector<int64_t>> tagIndices(func::FuncOp fn, int64_t m,
                                           int64_t v) {
  // The tied exchange's tags stay below the boundary transfers'.
  for (const auto &tied : tiedParameters(fn))
    if (tied.second.second >= kPPBoundaryTagBase) {
      fn.emitError() << "fsdp-pipeline-micro-batch: more than "
                     << kPPBoundaryTagBase - kPPTiedTagBase
                     << " tied parameters between two stages (their MPI "
                        "tags would reach the boundary transfers')";
      return failure();
    }
  // Each result's tag index (boundaryIndex): an activation's among the
  // values sent to the next virtual stage, a gradient's among the
  // floating-point values received from the previous one. The largest
  // tag must be an MPI tag (an int); fsdp-run checks it against
  // MPI_TAG_UB.
  SmallVector<int64_t> tagIndex(fn.getNumResults(), 0);
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    int64_t c = 0;
    if (auto a = fn.getResultAttrOfType<IntegerAttr>(i, kPPChunkAttr))
      c = a.getInt();
    if (auto k = fn.getResultAttrOfType<IntegerAttr>(i, kPPOutputAttr))
      tagIndex[i] = boundaryIndex(fn, kPPOutputAttr, k.getInt(), c,
                                  /*results=*/true, /*floatOnly=*/false);
    else if (auto g = fn.getResultAttrOfType<IntegerAttr>(i, kPPInputGradAttr))
      tagIndex[i] = boundaryIndex(fn, kPPInputAttr, g.getInt(), c,
                                  /*results=*/false, /*floatOnly=*/true);
    else
      continue;
    if (int64_t top = tagOf(tagIndex[i], m - 1, m, true, v, v - 1);
        top > std::numeric_limits<int32_t>::max()) {
      fn.emitError() << "fsdp-pipeline-micro-batch: boundary value #"
                     << tagIndex[i] << " of its boundary with " << m
                     << " micro-batches and " << v << " chunks needs MPI tag "
                     << top << ", past the largest int (fewer micro-batches)";
      return failure();
    }
  }
  return tagIndex;
}

struct FSDPPipelineMicroBatchPass
    : mlir::fsdp::impl::FSDPPipelineMicroBatchBase<FSDPPipelineMicroBatchPass> {
  using Base::Base;

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<int64_t> P = moduleInt(module, kPipelineStagesAttr);
    std::optional<int64_t> stage = moduleInt(module, kPipelineStageAttr);
    if (!P || !stage) {
      module.emitError() << "fsdp-pipeline-micro-batch expects a stage of "
                            "fsdp-pipeline-split (fsdp.pipeline_stages and "
                            "fsdp.pipeline_stage on the module)";
      return signalPassFailure();
    }
    int64_t m = microBatches, s = *stage, v = ppChunks;
    if (failed(checkSchedule(module, *P)))
      return signalPassFailure();
    FailureOr<func::FuncOp> maybeFn = getStepFunction(module);
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    Block &block = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    bool last = s == *P - 1;
    FailureOr<SmallVector<int64_t>> tagIndex = tagIndices(fn, m, v);
    if (failed(tagIndex))
      return signalPassFailure();
    int lossIdx = lossResultIndex(fn);
    if (last != (lossIdx >= 0)) {
      fn.emitError() << "fsdp-pipeline-micro-batch expects the output of "
                        "fsdp-autodiff on a stage (the last stage returns the "
                        "loss, the others their activations)";
      return signalPassFailure();
    }

    // Per chunk (one without interleaving).
    SmallVector<SmallVector<Operation *>> forward(v), backward(v);
    if (failed(splitParts(fn, forward, backward)))
      return signalPassFailure();
    auto argChunk = [&](unsigned i) -> int64_t {
      if (auto a = fn.getArgAttrOfType<IntegerAttr>(i, kPPChunkAttr))
        return a.getInt();
      return 0;
    };
    auto resultChunk = [&](unsigned i) -> int64_t {
      if (auto a = fn.getResultAttrOfType<IntegerAttr>(i, kPPChunkAttr))
        return a.getInt();
      return 0;
    };
    Operation *lossOp =
        last ? ret.getOperand(lossIdx).getDefiningOp() : nullptr;

    OpBuilder b(ret);
    Location loc = ret.getLoc();
    SmallVector<IRMapping> maps(m);
    SmallVector<Value> losses;
    llvm::DenseMap<unsigned, SmallVector<Value>> resultParts;
    auto sliceData = [&](int64_t c, int64_t j,
                         bool backwardPart) -> LogicalResult {
      for (BlockArgument arg : fn.getArguments()) {
        unsigned i = arg.getArgNumber();
        if (!fn.getArgAttr(i, nn::kDataAttr) || argChunk(i) != c ||
            (fn.getArgAttr(i, kPPOutputGradAttr) != nullptr) != backwardPart)
          continue;
        auto t = cast<RankedTensorType>(arg.getType());
        SmallVector<int64_t> shape(t.getShape());
        if (shape.empty() || shape[0] % m)
          return emitError(arg.getLoc())
                 << "the batch of data argument #" << i
                 << " does not divide into " << m << " micro-batches";
        shape[0] /= m;
        auto mb = nn::MicroBatchOp::create(
            b, arg.getLoc(), RankedTensorType::get(shape, t.getElementType()),
            arg, b.getI64IntegerAttr(j), b.getI64IntegerAttr(m));
        mb->setAttr(nn::kMicroBatchAttr, b.getI64IntegerAttr(j));
        maps[j].map(arg, mb.getResult());
      }
      return success();
    };
    // Chunk c's sends of micro-batch j: the activations to the next rank
    // (virtual stage s + c·P + 1, wrapping from the last rank to the first)
    // or the gradients to the previous one.
    auto send = [&](int64_t c, int64_t j, bool bwd) {
      StringRef attr = bwd ? kPPInputGradAttr : kPPOutputAttr;
      int64_t peer = bwd ? (s + *P - 1) % *P : (s + 1) % *P;
      int64_t low = bwd ? (s + c * *P - 1) / *P : c; // (c' of c' -> c' + 1)
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (auto k = fn.getResultAttrOfType<IntegerAttr>(i, attr);
            k && resultChunk(i) == c) {
          auto op = SendOp::create(
              b, loc, TypeRange{}, maps[j].lookupOrDefault(ret.getOperand(i)),
              b.getI64IntegerAttr(peer),
              b.getI64IntegerAttr(tagOf((*tagIndex)[i], j, m, bwd, v, low)),
              nullptr);
          op->setAttr(nn::kMicroBatchAttr, b.getI64IntegerAttr(j));
          if (v > 1)
            op->setAttr(kPPChunkAttr, b.getI64IntegerAttr(c));
        }
    };
    for (auto [c, j, bwd] : scheduleOrder(ppSchedule, *P, s, m, v)) {
      // The last virtual stage computes the loss; the first sends nothing
      // back.
      bool lastPart = s + c * *P == *P * v - 1, firstPart = s + c * *P == 0;
      if (failed(sliceData(c, j, bwd)))
        return signalPassFailure();
      Operation *lastClone = nullptr;
      for (Operation *op : bwd ? backward[c] : forward[c]) {
        Operation *clone = cloneForMicroBatch(b, *op, maps[j], j, m);
        if (!clone)
          return signalPassFailure();
        lastClone = clone;
        if (op == lossOp)
          clone->setAttr(nn::kMicroBatchLossAttr, b.getUnitAttr());
      }
      if (!bwd) {
        // The end of this micro-batch's forward (its loss op on the last
        // stage) for StepPhases: with chunks, the last chunk's forward of
        // micro-batch j on this rank precedes every backward of j.
        if (!lastPart && lastClone)
          lastClone->setAttr(nn::kMicroBatchLossAttr, b.getUnitAttr());
        if (lastPart)
          losses.push_back(maps[j].lookup(ret.getOperand(lossIdx)));
        else
          send(c, j, false);
        continue;
      }
      if (!firstPart)
        send(c, j, true);
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (fn.getResultAttr(i, nn::kGradOfAttr) && resultChunk(i) == c)
          resultParts[i].push_back(maps[j].lookupOrDefault(ret.getOperand(i)));
    }

    finishStep(fn, b, ret, losses, resultParts);
    for (auto *part : {&backward, &forward})
      for (auto &ops : llvm::reverse(*part))
        for (Operation *op : llvm::reverse(ops))
          op->erase();
    module->setAttr(kPipelineScheduleAttr, b.getStringAttr(ppSchedule));
    module->setAttr(kPipelineMicroBatchesAttr, b.getI64IntegerAttr(m));
    if (v > 1)
      module->setAttr(kPipelineChunksAttr, b.getI64IntegerAttr(v));
  }

  /// The schedule options against the stage's P (and its fsdp.pipeline_chunks).
  LogicalResult checkSchedule(ModuleOp module, int64_t P) {
    int64_t m = microBatches, v = ppChunks;
    bool interleaved = ppSchedule == "interleaved-1f1b";
    if (ppSchedule != "gpipe" && ppSchedule != "1f1b" && !interleaved) {
      module.emitError() << "fsdp-pipeline-micro-batch: pp-schedule='"
                         << ppSchedule
                         << "' is not gpipe, 1f1b or interleaved-1f1b";
      return failure();
    }
    if (m < P) {
      module.emitError() << "fsdp-pipeline-micro-batch: micro-batches=" << m
                         << " must be >= pp=" << P;
      return failure();
    }
    if (v < 1 || interleaved != (v > 1) ||
        moduleInt(module, kPipelineChunksAttr).value_or(1) != v) {
      module.emitError()
          << "fsdp-pipeline-micro-batch: pp-chunks=" << v
          << " must be > 1 exactly with pp-schedule=interleaved-1f1b and "
             "equal the stage's fsdp.pipeline_chunks (fsdp-pipeline-split's "
             "pp-chunks)";
      return failure();
    }
    if (interleaved && m % P) {
      module.emitError() << "fsdp-pipeline-micro-batch: micro-batches=" << m
                         << " must be a multiple of pp=" << P
                         << " with pp-schedule=interleaved-1f1b";
      return failure();
    }
    return success();
  }

  /// Each chunk's forward and backward ops of `fn` (`forward` and
  /// `backward` sized to the chunks; an op's chunk is its fsdp.pp_chunk).
  static LogicalResult
  splitParts(func::FuncOp fn, SmallVector<SmallVector<Operation *>> &forward,
             SmallVector<SmallVector<Operation *>> &backward) {
    Block &block = fn.getBody().front();
    // The backward: every op that depends on a seed (the loss seed on the
    // last stage; the received output gradients on the others), and
    // sequence parallelism's re-gather of a forward chunk (it reads none:
    // left in the forward, every micro-batch in flight would keep the
    // gathered input it exists to free).
    llvm::DenseSet<Value> seeded;
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), kPPOutputGradAttr))
        seeded.insert(a);
    for (Operation &op : block.without_terminator()) {
      bool bwd = op.hasAttr(nn::kLossSeedAttr) ||
                 op.hasAttr(nn::kSpRegatherAttr) ||
                 llvm::any_of(op.getOperands(),
                              [&](Value x) { return seeded.contains(x); });
      if (bwd)
        for (Value r : op.getResults())
          seeded.insert(r);
      int64_t c = chunkOf(&op);
      if (c < 0 || c >= static_cast<int64_t>(forward.size())) {
        op.emitOpError() << "has fsdp.pp_chunk = " << c << " outside 0.."
                         << forward.size() - 1;
        return failure();
      }
      (bwd ? backward : forward)[c].push_back(&op);
    }
    return success();
  }

  /// The step's results: the loss (the mean over micro-batches on the last
  /// stage, zero on the others: fsdp-run reports the last stage's on every
  /// rank) and each parameter's gradient summed over micro-batches.
  void finishStep(func::FuncOp fn, OpBuilder &b, func::ReturnOp ret,
                  ArrayRef<Value> losses,
                  llvm::DenseMap<unsigned, SmallVector<Value>> &resultParts) {
    Location loc = ret.getLoc();
    llvm::StringMap<std::pair<int64_t, int64_t>> tied = tiedParameters(fn);
    bool last = !losses.empty();
    int64_t m = microBatches;
    Type lossElt = b.getF32Type();
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), nn::kParamAttr)) {
        lossElt = getElementTypeOrSelf(a.getType());
        break;
      }
    auto scalarType = last ? cast<RankedTensorType>(losses[0].getType())
                           : RankedTensorType::get({}, lossElt);
    auto scalar = [&](double v) {
      return arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              scalarType, FloatAttr::get(scalarType.getElementType(), v)));
    };
    Value loss;
    if (last) {
      loss = losses[0];
      for (size_t j = 1; j < losses.size(); ++j)
        loss = nn::AddOp::create(b, loc, loss, losses[j]);
      loss = nn::MulOp::create(b, loc, loss, scalar(1.0 / m));
    } else {
      loss = scalar(0.0);
    }
    SmallVector<Value> results{loss};
    SmallVector<Attribute> attrs{
        b.getDictionaryAttr(b.getNamedAttr(nn::kLossAttr, b.getUnitAttr()))};
    for (unsigned i = 0; i < fn.getNumResults(); ++i) {
      if (!fn.getResultAttr(i, nn::kGradOfAttr))
        continue;
      Value sum;
      for (Value v : resultParts[i]) {
        if (!sum) {
          sum = v;
          continue;
        }
        auto add = nn::AddOp::create(b, loc, sum, v);
        add->setAttr(nn::kAccumulateAttr, b.getUnitAttr());
        sum = add;
      }
      if (auto fqn = fn.getResultAttrOfType<StringAttr>(i, nn::kGradOfAttr))
        if (auto it = tied.find(fqn.getValue()); it != tied.end())
          sum = exchangeTiedGradient(
              b, loc, sum, it->second,
              fn.getResultAttrOfType<IntegerAttr>(i, kPPChunkAttr));
      results.push_back(sum);
      attrs.push_back(fn.getResultAttrDict(i));
    }
    func::ReturnOp::create(b, loc, results);
    ret.erase();
    fn.setFunctionType(FunctionType::get(&getContext(), fn.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
    fn.setAllResultAttrs(attrs);
  }
};

struct FSDPPipelineP2PPass
    : mlir::fsdp::impl::FSDPPipelineP2PBase<FSDPPipelineP2PPass> {
  using Base::Base;

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<int64_t> stage = moduleInt(module, kPipelineStageAttr);
    std::optional<int64_t> m = moduleInt(module, kPipelineMicroBatchesAttr);
    if (!stage || !m)
      return; // not a pipeline stage
    FailureOr<func::FuncOp> maybeFn = getStepFunction(module);
    if (failed(maybeFn))
      return signalPassFailure();
    func::FuncOp fn = *maybeFn;
    Block &block = fn.getBody().front();
    int64_t s = *stage;
    int64_t P = moduleInt(module, kPipelineStagesAttr).value_or(1);
    int64_t v = moduleInt(module, kPipelineChunksAttr).value_or(1);
    // Receives: each micro-batch slice of a received argument.
    // (chunk, micro-batch) → the first wait for its gradient / activation
    llvm::DenseMap<std::pair<int64_t, int64_t>, WaitOp> gradWaitOf, actWaitOf;
    llvm::BitVector erase(fn.getNumArguments());
    for (BlockArgument arg : fn.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto in = fn.getArgAttrOfType<IntegerAttr>(i, kPPInputAttr);
      auto grad = fn.getArgAttrOfType<IntegerAttr>(i, kPPOutputGradAttr);
      if (!in && !grad)
        continue;
      erase.set(i);
      int64_t c = 0; // the rank's chunk: virtual stage s + c·P
      if (auto a = fn.getArgAttrOfType<IntegerAttr>(i, kPPChunkAttr))
        c = a.getInt();
      // An activation comes from virtual stage s + c·P - 1 (the previous
      // rank, wrapping), a gradient from s + c·P + 1 (the next rank); the
      // tag's chunk is that of the lower of the two virtual stages.
      int64_t peer = grad ? (s + 1) % P : (s + P - 1) % P;
      int64_t low = grad ? c : (s + c * P - 1) / P;
      // The value's index among those crossing its boundary (boundaryIndex;
      // every fsdp.pp_output_grad is of a floating-point value).
      int64_t index = boundaryIndex(fn, grad ? kPPOutputGradAttr : kPPInputAttr,
                                    (grad ? grad : in).getInt(), c,
                                    /*results=*/false, /*floatOnly=*/false);
      for (Operation *user : llvm::make_early_inc_range(arg.getUsers())) {
        auto mb = dyn_cast<nn::MicroBatchOp>(user);
        if (!mb) {
          user->emitOpError() << "uses a received activation outside of a "
                                 "micro-batch slice (fsdp-pipeline-p2p runs "
                                 "after fsdp-pipeline-micro-batch)";
          return signalPassFailure();
        }
        int64_t j = mb.getIndex();
        OpBuilder b(mb);
        auto t = cast<RankedTensorType>(mb.getType());
        auto recv = RecvOp::create(
            b, mb.getLoc(), FutureType::get(&getContext(), t),
            b.getI64IntegerAttr(peer),
            b.getI64IntegerAttr(tagOf(index, j, *m, grad != nullptr, v, low)),
            b.getUnitAttr());
        auto wait = WaitOp::create(b, mb.getLoc(), t, recv.getToken());
        for (Operation *op : {recv.getOperation(), wait.getOperation()})
          op->setAttr(nn::kMicroBatchAttr, b.getI64IntegerAttr(j));
        std::pair<int64_t, int64_t> key{c, j};
        auto &first = grad ? gradWaitOf : actWaitOf;
        if (!first.count(key) ||
            wait->isBeforeInBlock(first[key].getOperation()))
          first[key] = wait;
        mb.replaceAllUsesWith(wait.getResult());
        mb.erase();
      }
    }
    if (failed(fn.eraseArguments(erase)))
      return signalPassFailure();
    // Sends: started where the placeholder was; a forward send completes
    // before this stage waits for the micro-batch's gradient (which the next
    // stage sends only after receiving it), a backward one before the first
    // activation the previous stage sends after receiving it
    // (backwardSendWait), else at the end.
    Operation *ret = block.getTerminator();
    for (SendOp send : llvm::make_early_inc_range(block.getOps<SendOp>())) {
      if (send.getAsync())
        continue;
      OpBuilder b(send);
      auto done = RankedTensorType::get({1}, b.getF32Type());
      auto start =
          SendOp::create(b, send.getLoc(), FutureType::get(&getContext(), done),
                         send.getInput(), send.getPeerAttr(), send.getTagAttr(),
                         b.getUnitAttr());
      start->setAttrs(send->getAttrs());
      start.setAsync(true);
      // A tied gradient's exchange (no micro-batch) completes at the end.
      auto mb = send->getAttrOfType<IntegerAttr>(nn::kMicroBatchAttr);
      int64_t j = mb ? mb.getInt() : -1;
      // The tag says forward or backward and the sender's chunk (tagOf).
      auto tag = static_cast<int64_t>(send.getTag());
      bool forward = mb && !tagIsBackward(tag, v);
      std::pair<int64_t, int64_t> key{tagChunk(tag, v), j};
      Operation *before = ret;
      if (forward && gradWaitOf.count(key))
        before = gradWaitOf[key];
      else if (mb && !forward)
        before = backwardSendWait(module, send, actWaitOf).value_or(ret);
      b.setInsertionPoint(before);
      auto wait = WaitOp::create(b, send.getLoc(), done, start.getToken());
      if (mb)
        wait->setAttr(nn::kMicroBatchAttr, mb);
      send.erase();
    }
  }

  /// Where this rank waits for its backward send `send` (the gradient of
  /// its chunk c's input for micro-batch j, to the previous rank): right
  /// before its first wait (after the send) for an
  /// activation that the previous rank sends after the part that receives
  /// this gradient (its B of virtual stage s + c·P - 1, micro-batch j, in
  /// that rank's schedule order). The peer starts that receive before it
  /// sends the activation, so the send has completed or completes without
  /// this rank's waiting on anything the peer has not done: no new
  /// deadlock. Waited at the step's end a sent gradient stayed live for
  /// the rest of the step: under interleaving (v-1)·m of them on the first
  /// rank, which made its planned peak not fall with v; under 1F1B (v = 1)
  /// every gradient a later stage sent in its steady state
  /// (docs/pipeline-parallel.md, "Interleaved 1F1B", Memory, and "Where
  /// each transfer is waited"). None when no such activation follows (the
  /// end of the step; under GPipe every activation precedes every
  /// backward).
  static std::optional<Operation *> backwardSendWait(
      ModuleOp module, SendOp send,
      const llvm::DenseMap<std::pair<int64_t, int64_t>, WaitOp> &actWaitOf) {
    auto name = module->getAttrOfType<StringAttr>(kPipelineScheduleAttr);
    std::optional<int64_t> P = moduleInt(module, kPipelineStagesAttr),
                           s = moduleInt(module, kPipelineStageAttr),
                           m = moduleInt(module, kPipelineMicroBatchesAttr);
    // No fsdp.pipeline_chunks: 1F1B or GPipe, one chunk per rank.
    int64_t v = moduleInt(module, kPipelineChunksAttr).value_or(1);
    auto j = send->getAttrOfType<IntegerAttr>(nn::kMicroBatchAttr);
    if (!name || !P || !s || !m || !j)
      return std::nullopt;
    int64_t vs = *s + chunkOf(send) * *P, peer = (*s + *P - 1) % *P;
    SmallVector<Part> order = scheduleOrder(name.getValue(), *P, peer, *m, v);
    const auto *consumer = llvm::find_if(order, [&](const Part &p) {
      return p.backward && p.chunk == (vs - 1) / *P && p.mb == j.getInt();
    });
    std::optional<Operation *> best;
    for (const auto *p = consumer; p != order.end(); ++p) {
      int64_t sender = peer + p->chunk * *P; // its virtual stage
      if (p->backward || sender == *P * v - 1)
        continue; // sends nothing to this rank
      auto it = actWaitOf.find({(sender + 1) / *P, p->mb});
      if (it == actWaitOf.end())
        continue;
      Operation *wait = WaitOp(it->second).getOperation();
      if (send->isBeforeInBlock(wait) &&
          (!best || wait->isBeforeInBlock(*best)))
        best = wait;
    }
    return best;
  }
};
} // namespace
