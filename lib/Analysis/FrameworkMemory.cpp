//===- FrameworkMemory.cpp - what another training stack keeps ------------===//
//
// The terms and their sources: include/fsdp/Analysis/FrameworkMemory.h.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/FrameworkMemory.h"
#include "fsdp/Analysis/MemoryPlan.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

std::optional<FrameworkMemory>
mlir::fsdp::parseFrameworkMemory(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<FrameworkMemory>>(name)
      .Case("fsdp-run", FrameworkMemory::FsdpRun)
      .Case("torch-eager", FrameworkMemory::TorchEager)
      .Case("torch-compile", FrameworkMemory::TorchCompile)
      .Default(std::nullopt);
}

llvm::StringRef mlir::fsdp::frameworkMemoryName(FrameworkMemory f) {
  switch (f) {
  case FrameworkMemory::FsdpRun:
    return "fsdp-run";
  case FrameworkMemory::TorchEager:
    return "torch-eager";
  case FrameworkMemory::TorchCompile:
    return "torch-compile";
  }
  return "fsdp-run";
}

namespace {
/// Bytes a term adds at each instruction, as a difference array (entry i + 1
/// of `delta` for instruction i).
struct Term {
  explicit Term(size_t n) : delta(n + 1, 0) {}
  /// `bytes` live over instructions [first, last].
  void add(int64_t first, int64_t last, int64_t bytes) {
    if (first > last)
      return;
    delta[first] += bytes;
    delta[last + 1] -= bytes;
  }
  /// The bytes at each instruction.
  std::vector<int64_t> perInstruction() const {
    std::vector<int64_t> at(delta.size() - 1);
    int64_t live = 0;
    for (size_t i = 0; i + 1 < delta.size(); ++i)
      at[i] = live += delta[i];
    return at;
  }
  std::vector<int64_t> delta;
};
} // namespace

/// torch's cross_entropy: one more logits-sized buffer (nll_loss_backward's
/// dense gradient) while nn.cross_entropy_grad runs.
static Term eagerCrossEntropy(const MemoryPlan &plan) {
  Term t(plan.instructions.size());
  for (auto [i, op] : llvm::enumerate(plan.instructions))
    if (auto g = dyn_cast<nn::CrossEntropyGradOp>(op))
      t.add(i, i, bufferBytes(g.getLogits()));
  return t;
}

/// Eager selective checkpoint's cache: an nn.ac_saved = U output the plan
/// frees before U's recomputation is held until the first op recomputed for
/// U after it (the recomputation pops it from the cache).
static Term sacCache(const MemoryPlan &plan) {
  int64_t n = plan.instructions.size();
  Term t(n);
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = plan.instructions[i];
    auto unit = op->getAttrOfType<StringAttr>(nn::kAcSavedAttr);
    if (!unit)
      continue;
    int64_t recompute = -1;
    for (int64_t j = i + 1; j < n && recompute < 0; ++j)
      if (plan.instructions[j]->getAttrOfType<StringAttr>(nn::kRecomputeAttr) ==
          unit)
        recompute = j;
    if (recompute < 0) // nothing recomputed for U: the cache is not read
      continue;
    for (Value r : op->getResults()) {
      const PlannedBuffer &b = plan.buffers[plan.indexOf.lookup(r)];
      // A view, an output written over its state input or a running sum
      // holds no memory of its own.
      if (b.viewOf >= 0 || b.aliases >= 0 || b.inPlaceOf >= 0)
        continue;
      t.add(b.end + 1, recompute - 1, b.bytes);
    }
  }
  return t;
}

LogicalResult mlir::fsdp::addFrameworkMemoryToReport(json &report,
                                                     func::FuncOp fn,
                                                     FrameworkMemory f,
                                                     bool fusedLoss) {
  if (f == FrameworkMemory::FsdpRun)
    return success();
  // The liveness per instruction (the record keeps only the totals).
  FailureOr<MemoryPlan> plan = MemoryPlan::compute(fn);
  if (failed(plan))
    return failure();
  int64_t n = plan->instructions.size();
  std::vector<int64_t> ce(n, 0);
  if (!fusedLoss)
    ce = eagerCrossEntropy(*plan).perInstruction();
  std::vector<int64_t> sac(n, 0);
  if (f == FrameworkMemory::TorchEager)
    sac = sacCache(*plan).perInstruction();
  // The step's start (state only) unless an instruction holds more.
  int64_t peak = plan->peakInstruction < 0 ? plan->peakBytes : 0, at = -1;
  int64_t maxCe = 0, maxSac = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t live = plan->liveBytes[i] + ce[i] + sac[i];
    if (live > peak) {
      peak = live;
      at = i;
    }
    maxCe = std::max(maxCe, ce[i]);
    maxSac = std::max(maxSac, sac[i]);
  }
  // The plan's bytes per class at that instruction (as sweepLiveBytes counts
  // them: owning buffers live over [start, end]).
  std::vector<int64_t> byClass(kNumMemoryClasses, 0);
  int64_t point = at < 0 ? -1 : at, gatherSend = 0;
  for (const PlannedBuffer &b : plan->buffers)
    if (b.viewOf < 0 && b.aliases < 0 && b.inPlaceOf < 0 && b.start <= point &&
        point <= b.end) {
      byClass[(unsigned)b.cls] += b.bytes;
      if (b.cls == MemoryClass::CommBuffer && !isReductionInput(b.value))
        gatherSend += b.bytes;
    }
  json classes = json::object();
  for (unsigned c = 0; c < kNumMemoryClasses; ++c)
    classes[memoryClassName((MemoryClass)c).str()] = byClass[c];
  auto gradShard = (unsigned)MemoryClass::GradShard;
  json peakAt = nullptr;
  if (at >= 0) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "'" << plan->instructions[at]->getName() << "' at "
       << plan->instructions[at]->getLoc();
    peakAt = s;
  }
  report["per_rank"]["framework"] = {
      {"memory", frameworkMemoryName(f).str()},
      {"loss", fusedLoss ? "fused" : "torch"},
      {"peak_bytes", peak},
      {"peak_instruction", at},
      {"peak_at", peakAt},
      {"peak_bytes_by_class", std::move(classes)},
      {"gather_send_at_peak", gatherSend},
      {"terms_at_peak",
       {{"eager_cross_entropy", at < 0 ? 0 : ce[at]},
        {"sac_cache", at < 0 ? 0 : sac[at]}}},
      {"max_terms", {{"eager_cross_entropy", maxCe}, {"sac_cache", maxSac}}},
      {"grad_shard_pool_bytes",
       plan->maxBytesByClass[gradShard] - byClass[gradShard]}};
  return success();
}
