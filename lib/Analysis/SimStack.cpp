//===- SimStack.cpp - the training stack's costs beside the plan ----------===//
//
// The spec's "stack" (SimStack.h; docs/collective-model.md, "Stacks"): what
// a unit's collectives cost when the training stack issues them otherwise
// than the plan. Each mechanism is read from the stack's code; for DeepSpeed
// ZeRO-3 v0.3 (microsoft/DeepSpeed at tag v0.3.15, 2c2a7f3):
//
// * Per-parameter collectives (per_param_collectives): partition_parameters.py
//   _allgather_param and _reduce_scatter_gradient issue one
//   torch.distributed collective per parameter; parameters under
//   stage3_param_persistence_threshold are gathered once after the step and
//   kept (ds_persist), so the per-use all-gathers leave them out.
// * The re-gather for the recompute (regather_for_recompute): the
//   coordinator fetches a sub-module's parameters in its forward pre-hook and
//   releases them in its post-hook (stage3.py fetch_sub_module,
//   release_sub_module), in the recompute's forward as in the first one, so
//   the backward fetches again every parameter the recompute released:
//   release_sub_module keeps one only when _keep_for_later finds its reuse
//   distance (get_reuse_distance_in_numel: the elements of the sub-modules
//   traced between its use and its next) below max_reuse_distance. The plan
//   gathers a checkpointed unit once for its recompute and backward; the
//   stack gathers the released parameters a second time.
// * Host loops (host_call_s, host_calls_per_rank): for each parameter and
//   collective every rank loops over the N ranks of the group in Python
//   (_allgather_param builds the N views of the flat buffer,
//   _reduce_scatter_gradient the N input slices), and PyTorch's c10d copies
//   each of the N list entries through a flat buffer (ProcessGroupNCCL::
//   allgather, reduce_scatter): O(parameters · N) calls per step, counted by
//   bench/fidelity/stack_host_calls.py. _allgather_param begins with
//   torch.cuda.synchronize(), so the device has nothing queued while the host
//   loops: the loops are host work on the compute stream, before the
//   collective starts.
// * The persistent gather (persistent_gather): stage3.py _post_step gathers
//   the persistent parameters after every optimizer step in one
//   _allgather_params call, which copies each parameter out of each rank's
//   partition in a loop over the N ranks per parameter.
// * Buffer passes (gather_serial_passes, gather_copy_passes,
//   reduce_copy_passes), each pass one read or one write of the moved bytes
//   at the device memory bandwidth: _allgather_param allocates the gathered
//   buffer with torch.zeros (a write of it) and then calls
//   torch.cuda.synchronize() before the all-gather is issued (1 serial
//   pass); PyTorch's ProcessGroupNCCL::allgather, given N list outputs,
//   gathers into a flat buffer and copies it out into them on the NCCL
//   stream (a read and a write: 2); ProcessGroupNCCL::reduce_scatter copies
//   the N list inputs into a flat buffer on its stream (2), after
//   stage3.py average_tensor's in-place tensor.div_ on the reduction stream
//   (2): 4. _allgather_params (the persistent gather) allocates with
//   torch.empty: only the copy passes.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/SimStack.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace mlir::fsdp;

/// The ring time of the per-parameter collectives of a unit whose
/// parameters `numels` share `bytes` by elements, over those `take` selects;
/// their bytes are added to `moved`.
static double perParamTime(const Simulator &sim, CollectiveKind kind,
                           int64_t bytes, ArrayRef<int64_t> numels,
                           llvm::function_ref<bool(size_t)> take, int64_t g,
                           int64_t stride, bool hierarchical, int64_t &calls,
                           double &moved) {
  double total = 0, t = 0;
  for (int64_t n : numels)
    total += double(n);
  for (auto [i, n] : llvm::enumerate(numels)) {
    if (!take(i))
      continue;
    auto share = std::max<int64_t>(
        static_cast<int64_t>(std::llround(double(bytes) * n / total)), 1);
    t += sim.collectiveTime(kind, share, g, stride, hierarchical);
    moved += double(share);
    ++calls;
  }
  return t;
}

/// Whether a unit's all-gather leaves out parameter `n` (elements): it
/// persists (kept gathered under the stack's persistence threshold).
static bool persists(const StackProfile &stack, int64_t n) {
  return stack.perParamCollectives && double(n) < stack.persistenceThreshold;
}

double Simulator::unitCollectiveTime(CollectiveKind kind, int64_t bytes,
                                     ArrayRef<int64_t> paramNumels, int64_t g,
                                     int64_t stride, bool hierarchical) const {
  bool gather = kind == CollectiveKind::AllGather;
  if (!spec.stack.perParamCollectives || paramNumels.empty() ||
      (!gather && kind != CollectiveKind::ReduceScatter))
    return collectiveTime(kind, bytes, g, stride, hierarchical);
  int64_t calls = 0;
  double moved = 0;
  return perParamTime(
      *this, kind, bytes, paramNumels,
      [&](size_t i) {
        return !gather || !persists(spec.stack, paramNumels[i]);
      },
      g, stride, hierarchical, calls, moved);
}

SmallVector<bool> mlir::fsdp::regatheredAfterRecompute(
    const StackProfile &stack, ArrayRef<int64_t> numels,
    ArrayRef<StringRef> fqns, const RecomputeOrder *region) {
  SmallVector<bool> again(numels.size(), false);
  if (!stack.regatherForRecompute || fqns.size() != numels.size())
    return again;
  // The order the recompute reads the parameters in: the region's, unless
  // it misses one of the unit's; else the unit's own.
  ArrayRef<StringRef> order = fqns;
  ArrayRef<int64_t> orderNumels = numels;
  if (region && region->fqns.size() == region->numels.size() &&
      llvm::all_of(fqns, [&](StringRef f) {
        return llvm::is_contained(region->fqns, f);
      })) {
    order = region->fqns;
    orderNumels = region->numels;
  }
  // The sub-module of a parameter: its FQN up to the last '.'
  // (named_parameters(recurse=False) of the module the hooks fetch).
  auto module = [](StringRef fqn) { return fqn.rsplit('.').first; };
  for (auto [i, fqn] : llvm::enumerate(fqns)) {
    // Between its recompute use and its backward use the trace holds the
    // sub-modules the recompute reads after this one, then their backward
    // (reverse order): 2 · `after` elements. _keep_for_later: kept when
    // that is below the limit, never with a limit of 0.
    size_t last = 0;
    for (auto [j, f] : llvm::enumerate(order))
      if (module(f) == module(fqn))
        last = j;
    double after = 0;
    for (size_t j = last + 1; j < order.size(); ++j)
      after += double(orderNumels[j]);
    bool released =
        stack.maxReuseDistance <= 0 || !(2 * after < stack.maxReuseDistance);
    again[i] = released && !persists(stack, numels[i]);
  }
  return again;
}

double mlir::fsdp::stackPassSeconds(double passes, double bytes,
                                    double bandwidth) {
  if (passes <= 0 || bytes <= 0 || bandwidth <= 0)
    return 0;
  return passes * bytes / bandwidth;
}

double mlir::fsdp::stackHostSeconds(const StackProfile &stack,
                                    int64_t collectives, int64_t g) {
  if (g <= 1)
    return 0;
  return double(collectives) * stack.hostCallsPerRank * double(g) *
         stack.hostCallSeconds;
}

StackCollective mlir::fsdp::priceUnitCollective(
    const Simulator &sim, const StackProfile &stack, CollectiveKind kind,
    int64_t bytes, ArrayRef<int64_t> numels, ArrayRef<StringRef> fqns,
    int64_t g, int64_t stride, bool hierarchical, bool feedsRecompute,
    const RecomputeOrder *region) {
  StackCollective c;
  bool gather = kind == CollectiveKind::AllGather;
  bool scatter = kind == CollectiveKind::ReduceScatter;
  // The bytes the collectives move (the buffer passes' bytes).
  double moved = 0;
  if (!stack.perParamCollectives || numels.empty() || (!gather && !scatter)) {
    c.seconds = sim.collectiveTime(kind, bytes, g, stride, hierarchical);
    moved = double(bytes);
  } else {
    c.calls = 0;
    c.seconds = perParamTime(
        sim, kind, bytes, numels,
        [&](size_t i) { return !gather || !persists(stack, numels[i]); }, g,
        stride, hierarchical, c.calls, moved);
  }
  if (gather && feedsRecompute) {
    // The backward's second fetch of what the recompute released: per
    // parameter under per_param_collectives, else the released parameters'
    // share of the unit as one collective.
    SmallVector<bool> again =
        regatheredAfterRecompute(stack, numels, fqns, region);
    if (stack.perParamCollectives) {
      c.seconds += perParamTime(
          sim, kind, bytes, numels, [&](size_t i) { return again[i]; }, g,
          stride, hierarchical, c.calls, moved);
    } else if (llvm::is_contained(again, true)) {
      double total = 0, share = 0;
      for (auto [n, a] : llvm::zip(numels, again)) {
        total += double(n);
        share += a ? double(n) : 0.0;
      }
      int64_t b =
          std::max<int64_t>(1, std::llround(double(bytes) * share / total));
      c.seconds += sim.collectiveTime(kind, b, g, stride, hierarchical);
      moved += double(b);
      ++c.calls;
    }
  }
  c.hostSeconds = stackHostSeconds(stack, c.calls, g);
  // The stack's buffer passes over the moved bytes (one rank: nothing
  // moves, no collective is issued).
  if (g > 1 && (gather || scatter)) {
    double bw = sim.getSpec().memoryBandwidth;
    c.seconds += stackPassSeconds(
        gather ? stack.gatherCopyPasses : stack.reduceCopyPasses, moved, bw);
    if (gather)
      c.serialSeconds = stackPassSeconds(stack.gatherSerialPasses, moved, bw);
  }
  return c;
}

StackCollective mlir::fsdp::persistentGatherCost(const Simulator &sim,
                                                 const StackProfile &stack,
                                                 int64_t params, int64_t bytes,
                                                 int64_t g, int64_t stride,
                                                 bool hierarchical) {
  StackCollective c;
  c.calls = 0;
  if (!stack.persistentGather || params <= 0 || g <= 1)
    return c;
  c.calls = 1;
  bytes = std::max<int64_t>(bytes, 1);
  c.seconds = sim.collectiveTime(CollectiveKind::AllGather, bytes, g, stride,
                                 hierarchical) +
              stackPassSeconds(stack.gatherCopyPasses, double(bytes),
                               sim.getSpec().memoryBandwidth);
  c.hostSeconds = double(g) * double(params) *
                  stack.persistentGatherCallsPerRank * stack.hostCallSeconds;
  return c;
}

StringAttr mlir::fsdp::recomputeRegionFed(Operation *gather) {
  SmallVector<Value> views(gather->result_begin(), gather->result_end());
  while (!views.empty()) {
    Value v = views.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<WaitOp, ParamViewOp>(user))
        views.append(user->result_begin(), user->result_end());
      else if (auto region =
                   user->getAttrOfType<StringAttr>(nn::kRecomputeAttr))
        return region;
    }
  }
  return {};
}

RecomputeOrder mlir::fsdp::recomputeOrder(Operation *module, StringRef region) {
  RecomputeOrder o;
  std::string prefix = (region + ".").str();
  for (Region &r : module->getRegions())
    for (UnitOp unit : r.getOps<UnitOp>())
      for (auto [fqn, shape] : llvm::zip(unit.getParams(), unit.getShapes())) {
        StringRef name = cast<StringAttr>(fqn).getValue();
        if (!name.starts_with(prefix))
          continue;
        int64_t n = 1;
        for (int64_t d : cast<DenseI64ArrayAttr>(shape).asArrayRef())
          n *= d;
        o.fqns.push_back(name);
        o.numels.push_back(n);
      }
  return o;
}
