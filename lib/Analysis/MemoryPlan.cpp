//===- MemoryPlan.cpp - liveness, per-rank peak and arena offsets ---------===//
#include "fsdp/Analysis/MemoryPlan.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "fsdp/schedule/KernelScratch.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseSet.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <tuple>

using namespace mlir;
using namespace mlir::fsdp;

StringRef mlir::fsdp::memoryClassName(MemoryClass c) {
  switch (c) {
  case MemoryClass::ParamShard:
    return "param_shard";
  case MemoryClass::GatheredParam:
    return "gathered_param";
  case MemoryClass::OptState:
    return "opt_state";
  case MemoryClass::Grad:
    return "grad";
  case MemoryClass::GradShard:
    return "grad_shard";
  case MemoryClass::CommBuffer:
    return "comm_buffer";
  case MemoryClass::Activation:
    return "activation";
  case MemoryClass::Temporary:
    return "temporary";
  case MemoryClass::Data:
    return "data";
  case MemoryClass::Scalar:
    return "scalar";
  }
  return "temporary";
}

std::optional<MemoryClass> mlir::fsdp::memoryClassFromName(StringRef name) {
  for (unsigned c = 0; c < kNumMemoryClasses; ++c)
    if (memoryClassName((MemoryClass)c) == name)
      return (MemoryClass)c;
  return std::nullopt;
}

bool mlir::fsdp::isReductionInput(Value v) {
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    for (Operation *u : x.getUsers()) {
      if (isa<ReduceScatterOp, AllReduceOp>(u))
        return true;
      if (isa<nn::CastOp, PackOp>(u))
        work.push_back(u->getResult(0));
    }
  }
  return false;
}

static MemoryClass classifyArgument(func::FuncOp fn, unsigned i) {
  if (fn.getArgAttr(i, nn::kDataAttr))
    return MemoryClass::Data;
  if (fn.getArgAttr(i, nn::kStepAttr) || fn.getArgAttr(i, nn::kTotalStepsAttr))
    return MemoryClass::Scalar;
  if (auto role = fn.getArgAttrOfType<RoleAttr>(i, kRoleAttr))
    return role.getValue() == Role::Param ? MemoryClass::ParamShard
                                          : MemoryClass::OptState;
  if (fn.getArgAttr(i, nn::kOptStateAttr))
    return MemoryClass::OptState;
  return MemoryClass::ParamShard; // an unsharded parameter (autodiff-only
                                  // steps)
}

static MemoryClass classifyResult(OpResult r, bool backward) {
  Operation *op = r.getOwner();
  if (auto w = dyn_cast<WaitOp>(op)) // the awaited collective's buffer
    return classifyResult(cast<OpResult>(w.getToken()), backward);
  if (isa<AllGatherOp, ParamViewOp>(op))
    return MemoryClass::GatheredParam;
  // Buckets: the packed send buffer, and the units' buffers unpacked after
  // an all-gather (B rank blocks) or a reduce-scatter (one block).
  if (isa<PackOp>(op))
    return MemoryClass::CommBuffer;
  if (auto u = dyn_cast<UnpackOp>(op))
    return u.getBlocks() > 1 ? MemoryClass::GatheredParam
                             : MemoryClass::GradShard;
  if (isa<FlattenOp>(op)) {
    // ZeRO-1 keeps each unit's whole gradient until backward ends: gradient
    // storage, not a transient send buffer.
    return strategyOf(op) == Strategy::ShardOptimizer ? MemoryClass::Grad
                                                      : MemoryClass::CommBuffer;
  }
  if (auto c = dyn_cast<nn::CastOp>(op)) {
    // Mixed-precision casts around communication: the packed gradient in
    // reduce-dtype and a shard cast for its all-gather are send buffers; the
    // reduced gradient cast for the optimizer is gradient storage; a
    // replicated parameter cast for compute is a gathered (full) parameter.
    Operation *src = skipWait(c.getInput()).getDefiningOp();
    if (isa_and_nonnull<FlattenOp>(src) ||
        llvm::any_of(c->getUsers(),
                     [](Operation *u) { return isa<AllGatherOp, PackOp>(u); }))
      return MemoryClass::CommBuffer;
    if (src && (isa<ReduceScatterOp, AllReduceOp>(src) ||
                (isa<UnpackOp>(src) && cast<UnpackOp>(src).getBlocks() == 1)))
      return MemoryClass::GradShard;
    if (llvm::any_of(c->getUsers(),
                     [](Operation *u) { return isa<ParamViewOp>(u); }))
      return MemoryClass::GatheredParam;
  }
  if (isa<ReduceScatterOp, AllReduceOp>(op))
    return MemoryClass::GradShard;
  if (isa<LocalShardOp>(op))
    return MemoryClass::ParamShard;
  if (isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(op))
    return r.getResultNumber() == 0 ? MemoryClass::ParamShard
                                    : MemoryClass::OptState;
  if (isa<arith::ConstantOp, nn::ZerosLikeOp>(op))
    return MemoryClass::Temporary;
  // fsdp-activation-checkpoint's recomputed forward ops run in backward but
  // hold activations.
  if (op->hasAttr(nn::kRecomputeAttr))
    return MemoryClass::Activation;
  return backward ? MemoryClass::Grad : MemoryClass::Activation;
}

FailureOr<MemoryPlan> MemoryPlan::compute(func::FuncOp fn, bool arenaOffsets) {
  MemoryPlan plan;
  if (failed(plan.collectBuffers(fn)))
    return failure();
  std::vector<int64_t> lastUse = plan.lastUses();
  plan.assignAliases(fn, lastUse);
  plan.assignInPlace(fn, lastUse);
  plan.assignLifetimes(fn, lastUse);
  plan.extendInPlaceChains();
  int64_t atStart = plan.sweepLiveBytes();
  plan.addKernelScratch(atStart);
  if (arenaOffsets)
    plan.assignArenaOffsets();
  else
    plan.arenaBytes = -1;
  return plan;
}

LogicalResult MemoryPlan::collectBuffers(func::FuncOp fn) {
  Block &block = fn.getBody().front();
  for (Operation &op : block.without_terminator())
    instructions.push_back(&op);
  if (Operation *def = lossDefiningOp(fn))
    lossInstruction = llvm::find(instructions, def) - instructions.begin();

  auto addBuffer = [&](Value v, MemoryClass cls,
                       int64_t start) -> LogicalResult {
    RankedTensorType t = bufferTensorType(v.getType());
    Type elt = t ? t.getElementType() : Type();
    bool ok = t && t.hasStaticShape() && !nn::dtypeName(elt).empty();
    if (!ok)
      return emitError(v.getLoc())
             << "the memory plan supports statically shaped tensors of "
                "f32, f64, bf16, f16, i32 and i64, got "
             << v.getType();
    // Hand-written fsdp IR is not sized by the nn verifiers everywhere: the
    // plan refuses what it cannot hold rather than wrap.
    if (!nn::checkedTensorBytes(t))
      return emitError(v.getLoc())
             << "the tensor's size exceeds 2^59 bytes: " << v.getType();
    PlannedBuffer b;
    b.value = v;
    b.bytes = bufferBytes(t);
    b.cls = cls;
    b.start = start;
    indexOf[v] = buffers.size();
    buffers.push_back(b);
    return success();
  };

  for (BlockArgument arg : fn.getArguments())
    if (failed(addBuffer(arg, classifyArgument(fn, arg.getArgNumber()), -1)))
      return failure();
  // Each micro-batch's forward ends at its own loss op (a pipeline stage's
  // at its last forward op), not at the step's loss, the mean computed at
  // the end of the step.
  StepPhases phases(fn);
  for (auto [idx, op] : llvm::enumerate(instructions)) {
    bool backward = phases.phaseOf(op).second;
    for (OpResult r : op->getResults())
      if (failed(addBuffer(r, classifyResult(r, backward), idx)))
        return failure();
    // attention=unfused keeps the softmax output, the dropout mask and the
    // dropped probabilities for the backward (Korthikanti et al. 2022, Eq.
    // (1): 5·a·s²·b bytes per layer), exactly as long as the statistics
    // (read by nn.attention_grad alone, or by no one when a recompute or no
    // backward follows): its buffer holds them. fsdp-run's kernel writes
    // only the statistics' bytes of it.
    if (isa<nn::AttentionOp>(op))
      if (std::optional<UnfusedAttention> ua = unfusedAttentionOf(op))
        buffers[indexOf[op->getResult(1)]].bytes += ua->savedBytes();
    // Views alias their base: a parameter's view into a gathered buffer, and
    // the result of fsdp.wait (the completed collective's own buffer).
    Value viewResult, viewBase;
    int64_t viewOffset = 0;
    if (auto view = dyn_cast<ParamViewOp>(op)) {
      viewResult = view.getResult();
      viewBase = view.getFlat();
      viewOffset = view.getOffset();
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      viewResult = wait.getResult();
      viewBase = wait.getToken();
    }
    if (viewResult) {
      PlannedBuffer &b = buffers[indexOf[viewResult]];
      int64_t base = indexOf[viewBase];
      b.viewOffset = viewOffset;
      if (buffers[base].viewOf >= 0) { // a view of a view
        b.viewOffset += buffers[base].viewOffset;
        base = buffers[base].viewOf;
      }
      b.viewOf = base;
      b.bytes = 0;
    }
  }
  return success();
}

int64_t MemoryPlan::ownerOf(Value v) const {
  int64_t i = indexOf.lookup(v);
  return buffers[i].viewOf >= 0 ? buffers[i].viewOf : i;
}

std::vector<int64_t> MemoryPlan::lastUses() const {
  // Uses of views count for their owner.
  std::vector<int64_t> lastUse(buffers.size(), -2);
  for (auto [idx, op] : llvm::enumerate(instructions)) {
    for (Value v : op->getOperands())
      lastUse[ownerOf(v)] = idx;
    // An async collective reads its send buffer until its wait.
    if (auto wait = dyn_cast<WaitOp>(op))
      for (Value v : wait.getToken().getDefiningOp()->getOperands())
        lastUse[ownerOf(v)] = std::max<int64_t>(lastUse[ownerOf(v)], idx);
  }
  return lastUse;
}

void MemoryPlan::assignLifetimes(func::FuncOp fn,
                                 const std::vector<int64_t> &lastUse) {
  int64_t n = instructions.size();
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  // Returned values (through views: their owners) are carried to the next
  // step.
  llvm::DenseSet<Value> returned;
  for (Value v : ret.getOperands())
    returned.insert(buffers[ownerOf(v)].value);
  auto isState = [&](BlockArgument a) {
    unsigned i = a.getArgNumber();
    return !fn.getArgAttr(i, nn::kDataAttr) &&
           !fn.getArgAttr(i, nn::kStepAttr) &&
           !fn.getArgAttr(i, nn::kTotalStepsAttr);
  };
  llvm::DenseSet<Value> explicitlyFreed;
  for (Operation *op : instructions)
    if (auto f = dyn_cast<FreeOp>(op))
      explicitlyFreed.insert(f.getBuffer());

  freesAfter.assign(n, {});
  for (auto [i, b] : llvm::enumerate(buffers)) {
    if (b.viewOf >= 0)
      continue;
    auto arg = dyn_cast<BlockArgument>(b.value);
    bool persists = returned.contains(b.value) || (arg && isState(arg));
    if (persists || (lastUse[i] < 0 && b.start < 0)) {
      // Carried to the next step, resident state, or an unused argument:
      // the whole step.
      b.end = n;
    } else if (lastUse[i] >= 0) {
      b.end = lastUse[i];
      if (!explicitlyFreed.contains(b.value))
        freesAfter[b.end].push_back(i);
    } else {
      b.end = b.start; // defined, never used: freed right after its instruction
      freesAfter[b.end].push_back(i);
    }
  }
  for (auto &b : buffers)
    if (b.viewOf >= 0) {
      b.start = buffers[b.viewOf].start;
      b.end = buffers[b.viewOf].end;
    }
}

int64_t MemoryPlan::sweepLiveBytes() {
  // Live bytes at each instruction, per class: buffers with start <= i <=
  // end (index i + 1 of a class's deltas for instruction i, 0 for the step
  // start). One sweep gives the step's live bytes, its peak with the
  // snapshot of each class there, and each class's own maximum.
  int64_t n = instructions.size();
  std::vector<std::vector<int64_t>> delta(kNumMemoryClasses,
                                          std::vector<int64_t>(n + 2, 0));
  // The reductions' inputs among comm_buffer (SendBufferBytes).
  std::vector<int64_t> reduceDelta(n + 2, 0);
  for (auto &b : buffers) {
    if (b.viewOf >= 0 || b.aliases >= 0 || b.inPlaceOf >= 0)
      continue; // a view or an aliased output holds no bytes of its own
    bool reduce = b.cls == MemoryClass::CommBuffer && isReductionInput(b.value);
    for (std::vector<int64_t> *d :
         {&delta[(unsigned)b.cls], reduce ? &reduceDelta : nullptr}) {
      if (!d)
        continue;
      (*d)[b.start + 1] += b.bytes;
      if (b.end + 2 <= n + 1)
        (*d)[b.end + 2] -= b.bytes;
    }
  }
  auto comm = (unsigned)MemoryClass::CommBuffer;
  int64_t reduceLive = reduceDelta[0];
  auto sendAtPeak = [&](const std::vector<int64_t> &byClass) {
    sendBytes.reduceAtPeak = reduceLive;
    sendBytes.gatherAtPeak = byClass[comm] - reduceLive;
  };
  std::vector<int64_t> liveByClass(kNumMemoryClasses);
  int64_t live = 0;
  for (unsigned c = 0; c < kNumMemoryClasses; ++c)
    live += liveByClass[c] = delta[c][0];
  const int64_t atStart = live;
  peakBytes = atStart;
  peakBytesByClass = liveByClass;
  maxBytesByClass = liveByClass;
  sendAtPeak(liveByClass);
  sendBytes.reduceMax = sendBytes.reduceAtPeak;
  sendBytes.gatherMax = sendBytes.gatherAtPeak;
  liveBytes.assign(n, 0);
  gatheredLiveBytes.assign(n, 0);
  gatherSendLiveBytes.assign(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (unsigned c = 0; c < kNumMemoryClasses; ++c) {
      live += delta[c][i + 1];
      liveByClass[c] += delta[c][i + 1];
      maxBytesByClass[c] = std::max(maxBytesByClass[c], liveByClass[c]);
    }
    reduceLive += reduceDelta[i + 1];
    sendBytes.reduceMax = std::max(sendBytes.reduceMax, reduceLive);
    sendBytes.gatherMax =
        std::max(sendBytes.gatherMax, liveByClass[comm] - reduceLive);
    liveBytes[i] = live;
    gatheredLiveBytes[i] = liveByClass[(unsigned)MemoryClass::GatheredParam];
    gatherSendLiveBytes[i] = liveByClass[comm] - reduceLive;
    if (live > peakBytes) {
      peakBytes = live;
      peakInstruction = i;
      peakBytesByClass = liveByClass;
      sendAtPeak(liveByClass);
    }
  }
  return atStart;
}

/// The instruction index of `op` in `at` (instruction -> index), `n` (the
/// end) for one that is not an instruction (the terminator): a map, where
/// a search per collective was O(instructions) each.
static int64_t indexIn(const llvm::DenseMap<Operation *, int64_t> &at,
                       Operation *op, size_t n) {
  auto it = at.find(op);
  return it == at.end() ? static_cast<int64_t>(n) : it->second;
}

/// Adds the temporaries of the collective at instruction `i` (of kind
/// `kind`) on the cpu driver to `scratch` of every instruction it is in
/// flight at (fsdp/schedule/KernelScratch.h).
static void addCollectiveScratch(ArrayRef<Operation *> instructions,
                                 const llvm::DenseMap<Operation *, int64_t> &at,
                                 int64_t i, ::fsdp::schedule::OpKind kind,
                                 std::vector<int64_t> &scratch) {
  Operation *op = instructions[i];
  // A tensor-parallel collective (nn.tp_all_reduce, nn.sp_reduce_scatter, ...)
  // is an MPI collective on the tensor channel (runtime/schedule/ops/
  // Distributed.cpp: lowerTp, lowerSp one per row, all in flight), waited at
  // its result's first use: held until that instruction.
  if (std::optional<TensorCollective> tc = tensorCollectiveOf(op)) {
    int64_t bytes = ::fsdp::schedule::cpuCollectiveScratchBytes(
        tc->kind == TensorCollective::AllReduce
            ? ::fsdp::schedule::OpKind::AllReduce
        : tc->kind == TensorCollective::ReduceScatter
            ? ::fsdp::schedule::OpKind::ReduceScatter
            : ::fsdp::schedule::OpKind::AllGather,
        tc->bytes, tc->groupSize);
    int64_t end = instructions.size() - 1;
    for (Operation *u : op->getResult(0).getUsers())
      end = std::min<int64_t>(end, indexIn(at, u, instructions.size()));
    for (int64_t j = i; j <= end && j < (int64_t)instructions.size(); ++j)
      scratch[j] += bytes;
    return;
  }
  if (!isa<ReduceScatterOp, AllReduceOp>(op))
    return;
  // The group: a reduce-scatter's is its send over its receive size; an
  // all-reduce's the module's grid.
  auto t = [](Value v) { return bufferTensorType(v.getType()); };
  RankedTensorType send = t(op->getOperand(0)), recv = t(op->getResult(0));
  int64_t group = 1;
  if (isa<ReduceScatterOp>(op))
    group = recv.getNumElements() > 0
                ? send.getNumElements() / recv.getNumElements()
                : 1;
  else
    group = groupSize(op, cast<AllReduceOp>(op).getGroup()).value_or(1);
  int64_t bytes = ::fsdp::schedule::cpuCollectiveScratchBytes(
      kind, bufferBytes(send), group);
  // Held from the start to the wait (a blocking collective: its own
  // instruction).
  int64_t end = i;
  for (Operation *u : op->getResult(0).getUsers())
    if (isa<WaitOp>(u))
      end = indexIn(at, u, instructions.size());
  for (int64_t j = i; j <= end && j < (int64_t)instructions.size(); ++j)
    scratch[j] += bytes;
}

void MemoryPlan::addKernelScratch(int64_t atStart) {
  // The reference (cpu) driver's kernel scratch, live while its instruction
  // runs, and its MPI reductions' temporaries, live while they are in
  // flight.
  int64_t n = instructions.size();
  scratchBytes.assign(n, 0);
  peakBytesWithScratch = atStart;
  llvm::DenseMap<Operation *, int64_t> at;
  for (int64_t i = 0; i < n; ++i)
    at[instructions[i]] = i;
  auto tensorOf = [](Value v) {
    RankedTensorType t = bufferTensorType(v.getType());
    Type e = t.getElementType();
    return ::fsdp::schedule::ScratchTensor{
        v.getAsOpaquePointer(), t.getShape().vec(),
        e.getIntOrFloatBitWidth() / 8, e.isBF16() || e.isF16()};
  };
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = instructions[i];
    ::fsdp::schedule::OpKind kind;
    if (::fsdp::schedule::lookupOp(op->getName().getStringRef().str().c_str(),
                                   kind)) {
      std::vector<::fsdp::schedule::ScratchTensor> ins, outs;
      // nn.broadcast's `like` operand is not passed to the kernel.
      ValueRange operands = op->getOperands();
      if (isa<nn::BroadcastOp>(op))
        operands = operands.take_front(1);
      for (Value v : operands)
        ins.push_back(tensorOf(v));
      for (Value v : op->getResults())
        outs.push_back(tensorOf(v));
      int64_t headDim = 0;
      if (auto hd = op->getAttrOfType<IntegerAttr>("head_dim"))
        headDim = hd.getInt();
      scratchBytes[i] +=
          ::fsdp::schedule::cpuKernelScratchBytes(kind, ins, outs, headDim);
      addCollectiveScratch(instructions, at, i, kind, scratchBytes);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    peakBytesWithScratch =
        std::max(peakBytesWithScratch, liveBytes[i] + scratchBytes[i]);
}

/// First-fit by decreasing size over lifetime intervals: buffers whose
/// lifetimes overlap get disjoint byte ranges (the classic offline dynamic
/// storage allocation heuristic, cf. Sekiyama et al., "Profile-guided memory
/// optimization for deep neural networks", 2018, Sec. 3).
void MemoryPlan::assignArenaOffsets() {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < (int64_t)buffers.size(); ++i)
    if (buffers[i].viewOf < 0 && buffers[i].aliases < 0 &&
        buffers[i].inPlaceOf < 0)
      order.push_back(i);
  // Largest first, equal sizes in index order: a stable sort's order, by a
  // total order (libstdc++ 12's std::stable_sort calls the deprecated
  // std::get_temporary_buffer, which clang-tidy reports here).
  llvm::sort(order, [&](int64_t a, int64_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return a < b;
  });
  auto align = [](int64_t x) {
    return (x + kAlignment - 1) / kAlignment * kAlignment;
  };
  // First fit reads only the placed buffers live at the same time as the
  // one being placed, in ascending [offset, offset + aligned size): it takes
  // the lowest offset in no gap too small. Scanning every placed buffer was
  // O(buffers^2) (a 39.1B pipeline stage at 48 micro-batches: a quarter of
  // its plan, perf). The placed ones are found by a segment tree over the
  // candidates sorted by start, holding each placed buffer's end (the
  // largest in a node's range): the overlapping ones are those starting at
  // or before this one's end whose end is at or after its start. Equal
  // ranges are interchangeable in the scan, so the offsets are those of the
  // full scan.
  int64_t count = static_cast<int64_t>(order.size());
  std::vector<int64_t> byStart(order);
  llvm::sort(byStart, [&](int64_t a, int64_t b) {
    return std::tie(buffers[a].start, a) < std::tie(buffers[b].start, b);
  });
  std::vector<int64_t> leafOf(buffers.size(), -1), starts(count);
  for (int64_t k = 0; k < count; ++k) {
    leafOf[byStart[k]] = k;
    starts[k] = buffers[byStart[k]].start;
  }
  int64_t width = 1;
  while (width < count)
    width *= 2;
  constexpr int64_t kUnplaced = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> maxEnd(2 * width, kUnplaced);
  struct Placed {
    int64_t lo, hi; // bytes
  };
  std::vector<Placed> placedAt(count), live;
  // Buffers live over the whole step (the training state: start and end the
  // extremes of all) overlap every other: kept apart, sorted as placed,
  // instead of being collected and sorted again for every buffer (most of
  // the live set: the sort was 25-40% of a plan at several micro-batches,
  // perf). The scan below reads both in one ascending order, so the offsets
  // are the same.
  int64_t firstStart = std::numeric_limits<int64_t>::max(), lastEnd = kUnplaced;
  for (int64_t i : order) {
    firstStart = std::min(firstStart, buffers[i].start);
    lastEnd = std::max(lastEnd, buffers[i].end);
  }
  std::vector<Placed> wholeStep;
  auto byOffset = [](const Placed &x, const Placed &y) {
    return std::tie(x.lo, x.hi) < std::tie(y.lo, y.hi);
  };
  // Appends the placed buffers among leaves [0, limit) ending at or after
  // `from` (node `node` covering leaves [lo, lo + size)).
  auto collect = [&](auto &self, int64_t node, int64_t lo, int64_t size,
                     int64_t limit, int64_t from) -> void {
    if (lo >= limit || maxEnd[node] < from)
      return;
    if (size == 1) {
      live.push_back(placedAt[lo]);
      return;
    }
    self(self, 2 * node, lo, size / 2, limit, from);
    self(self, 2 * node + 1, lo + size / 2, size / 2, limit, from);
  };
  arenaBytes = 0;
  for (int64_t i : order) {
    PlannedBuffer &b = buffers[i];
    int64_t size = align(b.bytes), offset = 0;
    live.clear();
    int64_t limit = llvm::upper_bound(starts, b.end) - starts.begin();
    collect(collect, 1, 0, width, limit, b.start);
    llvm::sort(live, byOffset);
    // First fit over the merge of `live` and `wholeStep`, in (lo, hi) order.
    for (size_t a = 0, w = 0; a < live.size() || w < wholeStep.size();) {
      const Placed &p =
          w == wholeStep.size() ||
                  (a < live.size() && !byOffset(wholeStep[w], live[a]))
              ? live[a++]
              : wholeStep[w++];
      if (offset + size <= p.lo)
        break;
      offset = std::max(offset, p.hi);
    }
    b.arenaOffset = offset;
    arenaBytes = std::max(arenaBytes, offset + size);
    Placed placed{offset, offset + size};
    if (b.start == firstStart && b.end == lastEnd) {
      wholeStep.insert(llvm::upper_bound(wholeStep, placed, byOffset), placed);
      continue;
    }
    int64_t leaf = leafOf[i];
    placedAt[leaf] = placed;
    for (int64_t node = width + leaf; node >= 1; node /= 2)
      maxEnd[node] = std::max(maxEnd[node], b.end);
  }
  for (PlannedBuffer &b : buffers)
    if (b.aliases >= 0)
      b.arenaOffset = buffers[b.aliases].arenaOffset;
  // In buffer order: a chain's running sums come before their successors.
  for (PlannedBuffer &b : buffers)
    if (b.inPlaceOf >= 0)
      b.arenaOffset = buffers[b.inPlaceOf].arenaOffset;
}

void MemoryPlan::assignInPlace(func::FuncOp fn,
                               const std::vector<int64_t> &lastUse) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  llvm::DenseSet<int64_t> taken;
  for (Value v : ret.getOperands())
    taken.insert(ownerOf(v)); // returned: read after the step
  for (auto [idx, op] : llvm::enumerate(instructions)) {
    if (!isa<nn::AddOp>(op) || !op->hasAttr(nn::kAccumulateAttr))
      continue;
    Value sum = op->getOperand(0), result = op->getResult(0);
    int64_t in = ownerOf(sum), out = indexOf.lookup(result);
    const PlannedBuffer &b = buffers[in];
    // The running sum's memory: a whole buffer the step defined (a
    // reduction's wait is a view of all of its collective's buffer; not an
    // argument or the state's memory), of the result's type, read by
    // nothing after this add (lastUse counts an async collective's reads
    // until its wait, and an explicit fsdp.free as a use), and not the
    // other operand.
    if (buffers[indexOf.lookup(sum)].viewOffset != 0 || b.start < 0 ||
        b.aliases >= 0 || (int64_t)idx != lastUse[in] ||
        bufferTensorType(b.value.getType()) != result.getType() ||
        ownerOf(op->getOperand(1)) == in || taken.contains(in) ||
        buffers[out].viewOf >= 0)
      continue;
    buffers[out].inPlaceOf = in;
    taken.insert(in);
  }
}

void MemoryPlan::extendInPlaceChains() {
  // In buffer order, so that a sum's running sum already holds the chain's
  // root: the root's memory lives until the last sum's end.
  for (PlannedBuffer &b : buffers) {
    if (b.inPlaceOf < 0)
      continue;
    int64_t root = b.inPlaceOf;
    while (buffers[root].inPlaceOf >= 0)
      root = buffers[root].inPlaceOf;
    buffers[root].end = std::max(buffers[root].end, b.end);
  }
}

/// The optimizer update reading the old state at operand `operand` and
/// writing the new state at result `result`, element by element (kernels.h:
/// outputs may alias their inputs): p -> p', m -> m', v -> v'.
static bool updatesInPlace(Operation *op, unsigned operand, unsigned result) {
  if (isa<nn::SgdUpdateOp>(op))
    return operand == 0 && result == 0;
  if (isa<nn::AdamWUpdateOp>(op))
    return (operand == 0 && result == 0) || (operand == 2 && result == 1) ||
           (operand == 3 && result == 2);
  return false;
}

void MemoryPlan::assignAliases(func::FuncOp fn,
                               const std::vector<int64_t> &lastUse) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  llvm::DenseSet<int64_t> taken;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto role = fn.getResultAttrOfType<RoleAttr>(i, kRoleAttr);
    auto unit = fn.getResultAttrOfType<FlatSymbolRefAttr>(i, kUnitAttr);
    if (!role || !unit)
      continue;
    // The argument this result replaces at the next step.
    int64_t arg = -1;
    for (BlockArgument a : fn.getArguments())
      if (fn.getArgAttr(a.getArgNumber(), kRoleAttr) == role &&
          fn.getArgAttr(a.getArgNumber(), kUnitAttr) == unit &&
          fn.getArgAttr(a.getArgNumber(), kLayoutAttr) ==
              fn.getResultAttr(i, kLayoutAttr))
        arg = indexOf.lookup(a);
    int64_t self = indexOf.lookup(v);
    int64_t out = buffers[self].viewOf >= 0 ? buffers[self].viewOf : self;
    PlannedBuffer &o = buffers[out];
    // The whole owner must be the result, defined in the step, the same
    // size as the argument, and used for nothing else the next step sees.
    if (arg < 0 || o.start < 0 || o.bytes != buffers[arg].bytes ||
        (self != out && buffers[self].viewOffset != 0) ||
        bufferTensorType(o.value.getType()) != buffers[arg].value.getType() ||
        taken.contains(out) || taken.contains(arg))
      continue;
    // Nothing reads the argument after the output is written, except the
    // update that writes it in place.
    Operation *def = instructions[o.start];
    bool ok = lastUse[arg] < o.start;
    if (lastUse[arg] == o.start) {
      ok = true;
      unsigned result = cast<OpResult>(o.value).getResultNumber();
      for (OpOperand &use : def->getOpOperands()) {
        Value u = use.get();
        int64_t ui = indexOf.lookup(u);
        int64_t uo = buffers[ui].viewOf >= 0 ? buffers[ui].viewOf : ui;
        if (uo == arg && !updatesInPlace(def, use.getOperandNumber(), result))
          ok = false;
      }
    }
    if (!ok)
      continue;
    o.aliases = arg;
    taken.insert(out);
    taken.insert(arg);
  }
}
