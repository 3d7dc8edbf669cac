//===- SimStack.h - the training stack's costs beside the plan --*- C++ -*-===//
//
// How a training stack issues its FSDP collectives where that differs from
// the plan (one collective per unit, waited where its result is read): the
// spec's optional "stack" object (docs/collective-model.md, "Stacks";
// profiles in bench/fidelity/stacks.json, each read from the stack's code).
// The simulator (lib/Analysis/Simulator.cpp) asks these functions what one
// of a unit's collectives costs under the stack, and what the stack does
// after the step; lib/Analysis/SimStack.cpp has the model and its sources.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_SIMSTACK_H
#define FSDP_ANALYSIS_SIMSTACK_H

#include "fsdp/Analysis/CollectiveCurve.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace mlir {
class Operation;
namespace fsdp {
class Simulator;

/// The spec's "stack" object (keys in fsdp/ClusterSpec.h; all off when
/// absent). Every count is per rank of the collective's group.
struct StackProfile {
  /// A unit's all-gather and reduce-scatter are one collective per
  /// parameter (DeepSpeed ZeRO-3 v0.3: partition_parameters.py).
  bool perParamCollectives = false;
  /// Elements: with perParamCollectives, a parameter with fewer elements is
  /// not all-gathered per use (kept gathered, ds_persist).
  double persistenceThreshold = 0;
  /// Waiting for an all-gather waits for every collective issued before it.
  bool syncAtGatherWait = false;
  /// With activation checkpointing, the backward all-gathers again the
  /// parameters the recompute released (regatheredAfterRecompute).
  bool regatherForRecompute = false;
  /// Elements: a sub-module's parameters are kept gathered between two uses
  /// when fewer elements are used between them
  /// (stage3_max_reuse_distance; DeepSpeed's default 1e9); 0 releases every
  /// parameter after each use.
  double maxReuseDistance = 1e9;
  /// Seconds of host time per call of the stack's per-rank loops (a rank
  /// with a core to itself).
  double hostCallSeconds = 0;
  /// Host calls per rank of the group for each collective the stack issues:
  /// each of its all-gathers and reduce-scatters costs hostCallsPerRank ·
  /// G · hostCallSeconds of host work before it starts.
  double hostCallsPerRank = 0;
  /// The parameters under persistenceThreshold are all-gathered once per
  /// step after the optimizer (one collective of all of them).
  bool persistentGather = false;
  /// Host calls per rank per persistent parameter in that gather.
  double persistentGatherCallsPerRank = 0;
  /// Passes over an all-gather's bytes at the device memory bandwidth
  /// serial with it, before it starts (a buffer written, then the device
  /// synchronized): on the compute stream, not overlapped.
  double gatherSerialPasses = 0;
  /// Passes over an all-gather's bytes on the communication stream (the
  /// output copied out of a flat buffer), added to its seconds.
  double gatherCopyPasses = 0;
  /// Passes over a reduce-scatter's bytes on the communication stream (the
  /// input copied into a flat buffer, the averaging), added to its seconds.
  double reduceCopyPasses = 0;
};

/// What one all-gather or reduce-scatter of a unit costs under the stack.
struct StackCollective {
  /// Seconds of the collectives on the communication stream (ring times,
  /// without the ranks' skew).
  double seconds = 0;
  /// Collectives issued (each pays the ranks' skew, collective_sync_s).
  int64_t calls = 1;
  /// Seconds of host work before the first of them starts (the stack's
  /// per-rank loops; a rank with a core to itself).
  double hostSeconds = 0;
  /// Seconds of device work serial with them, before the first starts
  /// (gatherSerialPasses): the compute stream waits for it.
  double serialSeconds = 0;
};

/// The parameters of a recomputed region (fsdp-activation-checkpoint's
/// `nn.recompute` region: a unit, or a transformer block under
/// ac-regions=block) in the order the forward first uses them: their FQNs
/// and elements.
struct RecomputeOrder {
  llvm::SmallVector<llvm::StringRef> fqns;
  llvm::SmallVector<int64_t> numels;
};

/// Of a unit's parameters (`numels` elements, `fqns` their names), which
/// ones the backward all-gathers again after the recompute has used and
/// released them. Parameters of one sub-module (the same FQN up to the last
/// '.') are fetched and released together; after its recompute use, a sub-
/// module is kept only when the elements used before its backward use (the
/// sub-modules the recompute reads after it, then again in the backward,
/// which runs them in reverse: 2 · their sum) are fewer than
/// maxReuseDistance (DeepSpeed v0.3.15 stage3.py, _keep_for_later and
/// PrefetchCoordinator.get_reuse_distance_in_numel); persistent parameters
/// are never released. The later sub-modules are those of `region` after
/// the sub-module's last parameter (the region's forward order, which may
/// span several units: a block checkpointed whole over per-module units;
/// torch.utils.checkpoint runs the region's whole forward again, so its
/// hooks fetch every sub-module of it); without `region`, or when it lacks
/// one of `fqns`, the unit's own parameters after it (a unit's order is the
/// forward's). All false without regatherForRecompute.
llvm::SmallVector<bool>
regatheredAfterRecompute(const StackProfile &stack,
                         llvm::ArrayRef<int64_t> numels,
                         llvm::ArrayRef<llvm::StringRef> fqns,
                         const RecomputeOrder *region = nullptr);

/// Host seconds (a rank with a core to itself) of `collectives` collectives
/// over `g` ranks issued by the stack: collectives · hostCallsPerRank · g ·
/// hostCallSeconds; 0 for g <= 1.
double stackHostSeconds(const StackProfile &stack, int64_t collectives,
                        int64_t g);

/// One all-gather or reduce-scatter of `bytes` (the unit's full flat
/// buffer) of a unit with parameters `numels` / `fqns` over `g` ranks
/// (`stride`, `hierarchical` as Simulator::collectiveTime), priced under
/// the stack: Simulator::unitCollectiveTime's collectives, plus, for an
/// all-gather that feeds the recompute (`feedsRecompute`), the re-gather
/// of regatheredAfterRecompute's parameters (each its share of the bytes by
/// elements; `region` as there); each collective with its host loops
/// (stackHostSeconds). The
/// stack's buffer passes over the bytes the collectives move
/// (stackPassSeconds): gatherCopyPasses / reduceCopyPasses added to the
/// seconds, and gatherSerialPasses as serialSeconds. A kind other than these
/// two is one collective (with its host loops, without passes).
StackCollective priceUnitCollective(const Simulator &sim,
                                    const StackProfile &stack,
                                    CollectiveKind kind, int64_t bytes,
                                    llvm::ArrayRef<int64_t> numels,
                                    llvm::ArrayRef<llvm::StringRef> fqns,
                                    int64_t g, int64_t stride,
                                    bool hierarchical, bool feedsRecompute,
                                    const RecomputeOrder *region = nullptr);

/// Seconds of `passes` passes over `bytes` at the device memory bandwidth
/// `bandwidth` (bytes/s; the spec's memory_bandwidth): passes · bytes /
/// bandwidth, each pass one read or one write of the bytes (a copy is two);
/// 0 without passes or bandwidth.
double stackPassSeconds(double passes, double bytes, double bandwidth);

/// The gather of the persistent parameters after the optimizer step
/// (persistentGather; DeepSpeed v0.3.15 stage3.py _post_step): one
/// all-gather of `bytes` (their full size) over `g` ranks, and host loops of
/// g · `params` · persistentGatherCallsPerRank · hostCallSeconds
/// (partition_parameters.py _allgather_params copies each parameter out of
/// each rank's partition); its seconds include gatherCopyPasses over the
/// bytes (its all-gather is given the N partitions as a list). Zero without
/// persistentGather or parameters.
StackCollective persistentGatherCost(const Simulator &sim,
                                     const StackProfile &stack, int64_t params,
                                     int64_t bytes, int64_t g, int64_t stride,
                                     bool hierarchical);

/// The region (`nn.recompute`, fsdp-activation-checkpoint) of a recomputed
/// op that reads a parameter view of the fsdp.all_gather `gather` (through
/// fsdp.wait and fsdp.param_view); null when no recomputed op does.
StringAttr recomputeRegionFed(Operation *gather);

/// The RecomputeOrder of region `region` in `module`: the parameters of its
/// fsdp.unit ops, in their order (first use, as fsdp-wrap orders units and
/// their parameters), whose FQN lies under `region` (`region` + '.'
/// prefixes it: a block's or a module unit's name is its parameters' FQN
/// prefix); empty when none does (a unit named otherwise, as `root`).
RecomputeOrder recomputeOrder(Operation *module, StringRef region);

} // namespace fsdp
} // namespace mlir

#endif // FSDP_ANALYSIS_SIMSTACK_H
