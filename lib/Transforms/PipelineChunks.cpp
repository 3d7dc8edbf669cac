//===- PipelineChunks.cpp - a rank's interleaved chunks as one step -------===//
//
// One program per rank (the schedule format's unit, which Program::fromFile
// selects by rank) holding its v chunks: each chunk's parameters stay their
// own FSDP units (the wrap policy sees their FQNs as before), and
// fsdp-pipeline-micro-batch interleaves the chunks' parts in one block, so
// the planner's passes after it see an ordinary single-step module.
//
//===----------------------------------------------------------------------===//
#include "PipelineChunks.h"

#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::fsdp;

namespace {
DictionaryAttr withChunk(MLIRContext *ctx, DictionaryAttr attrs,
                         int64_t chunk) {
  NamedAttrList list(attrs);
  list.set(kPPChunkAttr, IntegerAttr::get(IntegerType::get(ctx, 64), chunk));
  return list.getDictionary(ctx);
}

/// A step input that the runtime fills once per kind, so that the chunks
/// share it: a data argument that is no pipeline boundary, the loss scale
/// (fsdp-autodiff's nn.loss_scale under loss-scaling: each chunk unscales
/// by the one scale fsdp-run passes), or the step counter (nn.step: each
/// chunk's dropout draws its masks from the one step fsdp-run writes).
bool isSharedData(DictionaryAttr attrs) {
  return attrs && ((attrs.get(nn::kDataAttr) && !attrs.get(kPPInputAttr) &&
                    !attrs.get(kPPOutputGradAttr)) ||
                   attrs.get(nn::kLossScaleAttr) || attrs.get(nn::kStepAttr));
}
} // namespace

LogicalResult mlir::fsdp::mergePipelineChunks(ModuleOp stage,
                                              ArrayRef<ModuleOp> chunks) {
  MLIRContext *ctx = stage.getContext();
  SmallVector<func::FuncOp> fns;
  for (ModuleOp chunk : chunks) {
    FailureOr<func::FuncOp> fn = getStepFunction(chunk);
    if (failed(fn))
      return failure();
    for (Operation &op : chunk.getBody()->getOperations())
      if (&op != fn->getOperation())
        return op.emitOpError()
               << "beside the step function of a pipeline chunk: "
                  "fsdp-pipeline cannot merge it into the rank's program";
    fns.push_back(*fn);
  }
  // The chunks' module attributes: equal on every chunk, except
  // dictionaries keyed by FQN (fsdp-tensor-parallel's fsdp.tensor_slices),
  // which each chunk has for its own parameters and are united.
  for (ModuleOp chunk : chunks)
    for (NamedAttribute a : chunk->getDiscardableAttrs()) {
      if (a.getName() == kPPChunkAttr)
        continue;
      Attribute had = stage->getDiscardableAttr(a.getName());
      if (!had || had == a.getValue()) {
        stage->setAttr(a.getName(), a.getValue());
        continue;
      }
      auto hadDict = dyn_cast<DictionaryAttr>(had);
      auto dict = dyn_cast<DictionaryAttr>(a.getValue());
      if (!hadDict || !dict)
        return chunk.emitError()
               << "fsdp-pipeline: the chunks of a rank disagree on "
               << a.getName() << " (" << had << " vs " << a.getValue() << ")";
      NamedAttrList united(hadDict);
      for (NamedAttribute e : dict) {
        if (Attribute same = united.get(e.getName());
            same && same != e.getValue())
          return chunk.emitError()
                 << "fsdp-pipeline: the chunks of a rank disagree on "
                 << a.getName() << " of '" << e.getName() << "'";
        united.set(e.getName(), e.getValue());
      }
      stage->setAttr(a.getName(), united.getDictionary(ctx));
    }
  stage->setAttr(kPipelineChunksAttr,
                 IntegerAttr::get(IntegerType::get(ctx, 64),
                                  static_cast<int64_t>(chunks.size())));
  func::FuncOp fn = fns.front();
  fn->moveBefore(stage.getBody(), stage.getBody()->end());

  Block &block = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // The data arguments a later chunk may share, by type and attributes.
  SmallVector<std::pair<BlockArgument, DictionaryAttr>> data;
  for (BlockArgument a : fn.getArguments()) {
    DictionaryAttr attrs = fn.getArgAttrDict(a.getArgNumber());
    if (isSharedData(attrs))
      data.push_back({a, attrs});
    fn.setArgAttrs(a.getArgNumber(), withChunk(ctx, attrs, 0));
  }
  for (Operation &op : block.without_terminator())
    op.setAttr(kPPChunkAttr, IntegerAttr::get(IntegerType::get(ctx, 64), 0));
  SmallVector<Value> results(ret.getOperands());
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    resultAttrs.push_back(withChunk(ctx, fn.getResultAttrDict(i), 0));

  OpBuilder b(ret);
  for (size_t c = 1; c < fns.size(); ++c) {
    func::FuncOp other = fns[c];
    auto chunk = static_cast<int64_t>(c);
    IRMapping map;
    for (BlockArgument a : other.getArguments()) {
      DictionaryAttr attrs = other.getArgAttrDict(a.getArgNumber());
      if (isSharedData(attrs)) {
        auto *same = llvm::find_if(data, [&](auto &d) {
          return d.first.getType() == a.getType() && d.second == attrs;
        });
        if (same != data.end()) {
          map.map(a, same->first);
          continue;
        }
      }
      unsigned idx = fn.getNumArguments();
      if (failed(fn.insertArgument(idx, a.getType(),
                                   withChunk(ctx, attrs, chunk), a.getLoc())))
        return failure();
      map.map(a, fn.getArgument(idx));
      if (isSharedData(attrs))
        data.push_back({fn.getArgument(idx), attrs});
    }
    Block &otherBlock = other.getBody().front();
    for (Operation &op : otherBlock.without_terminator())
      b.clone(op, map)->setAttr(
          kPPChunkAttr, IntegerAttr::get(IntegerType::get(ctx, 64), chunk));
    for (auto [i, v] :
         llvm::enumerate(otherBlock.getTerminator()->getOperands())) {
      results.push_back(map.lookupOrDefault(v));
      resultAttrs.push_back(withChunk(
          ctx, other.getResultAttrDict(static_cast<unsigned>(i)), chunk));
    }
  }
  func::ReturnOp::create(b, ret.getLoc(), results);
  ret.erase();
  fn.setFunctionType(FunctionType::get(ctx, fn.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  fn.setAllResultAttrs(ArrayRef<DictionaryAttr>(resultAttrs));
  for (ModuleOp chunk : chunks)
    chunk.erase();
  return success();
}
