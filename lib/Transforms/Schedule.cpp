//===- Schedule.cpp - fsdp-schedule: async collectives and their placement ===//
//
// Turns every collective into a start (`async`) and an fsdp.wait, then
// places them:
//
// * Reductions (reduce-scatter, all-reduce) start where fsdp-collectives put
//   them, as soon as a unit's gradient is complete. Their wait (with the
//   ops that read the reduced gradient: its cast to the master dtype, HSDP's
//   replicate all-reduce) is sunk to the next reduction of the same kind and
//   group, or the first other use, whichever comes first: one reduction of
//   each kind in flight, and the packed gradient (freed after the wait) lives
//   only that long — as FSDP2, whose post-backward waits for the previous
//   reduce-scatter before freeing its buffers (Zhao et al., PyTorch FSDP,
//   VLDB 2023, Sec. 3.3; torch.distributed.fsdp FSDP2 `reduce_scatter_state`).
//   A micro-batch's reduced shard is then added to the unit's running sum
//   right after its wait (accumulate=sharded), so one shard accumulates.
//   A pipeline stage whose units are gathered once per step reduces each
//   whole gradient once, all in flight until the optimizer reads them (the
//   pipeline schedule's grad sync, Megatron-LM's interleaved schedule).
// * All-gather waits stay right before their first use; starts are hoisted
//   by the prefetch mode:
//   - none:  start right before the wait (no overlap of gathers);
//   - fsdp1: PyTorch FSDP1 BACKWARD_PRE: in backward, the next unit's gather
//            is issued when the current unit starts computing; forward is
//            not prefetched (forward_prefetch=False, the default);
//   - fsdp2: FSDP2's implicit prefetch: in every phase (a micro-batch's
//            forward or backward) the next unit's gather is issued when the
//            current unit starts computing;
//     under both, a pipeline stage whose units are gathered once per step
//     issues each chunk's gathers ahead of the chunk, as the pipeline
//     schedule syncs parameters (pipelineParamSync: chunks 0 and 1 at the
//     step start, chunk c >= 2 at chunk c - 1's first op; Megatron-LM's
//     forward_backward_pipelining_with_interleaving);
//   - auto:  a list scheduler (after XLA's latency-hiding scheduler): each
//            gather, in order, starts as early as possible while at most
//            `max-in-flight` gathers are started and not yet waited (FSDP1's
//            rate limiter uses 2) and the planned live bytes stay under the
//            memory budget; with `cluster=`, the cost model (the simulator)
//            then picks, among this schedule, the same with one gather in
//            flight, fsdp2, fsdp1 and none, the fastest one that fits the
//            budget (so the default is never predicted slower than the
//            anchors that fit; of equally fast ones, the smallest peak,
//            then the fewest early gathers). The budget is `memory-budget`,
//            else the cluster's device memory, else unlimited; a step whose
//            unprefetched peak is already over it is scheduled for time
//            alone (the report shows the overage).
//
// The order of collectives is program order, the same on every rank (SPMD):
// every rank runs the same schedule, and the runtime checks that (see
// runtime/docs/schedule-format.md).
//
//===----------------------------------------------------------------------===//
#include "ClusterSpecCache.h"
#include "ScheduleSteps.h"
#include "fsdp/Analysis/MemoryPlan.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/Threading.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <limits>

#define DEBUG_TYPE "fsdp-schedule"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSCHEDULE
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The name of a schedule in fsdp.schedule: "none", "fsdp1", "fsdp2" or
/// "list(max-in-flight=N)".
std::string scheduleName(StringRef mode, int64_t maxInFlight) {
  return mode == "list"
             ? "list(max-in-flight=" + std::to_string(maxInFlight) + ")"
             : mode.str();
}

struct FSDPSchedulePass
    : ClusterSpecPass<mlir::fsdp::impl::FSDPScheduleBase<FSDPSchedulePass>,
                      FSDPScheduleOptions> {
  using ClusterSpecPass::ClusterSpecPass;

  /// Applies mode `mode` ("none", "fsdp1", "fsdp2" or "list") to `module`.
  static LogicalResult apply(ModuleOp module, StringRef mode,
                             int64_t maxInFlight, int64_t budget,
                             int64_t bucketBytes) {
    FailureOr<func::FuncOp> fn = getStepFunction(module);
    if (failed(fn))
      return failure();
    LLVM_DEBUG(llvm::dbgs()
               << "schedule " << scheduleName(mode, maxInFlight) << ":\n");
    Block &block = fn->getBody().front();
    makeAsync(block);
    if (bucketBytes > 0) {
      bucketGathers(*fn, bucketBytes);
      bucketReductions(*fn, bucketBytes);
      bucketUpdateGathers(*fn, bucketBytes);
    }
    // A pipeline stage's units gathered once per step are reduced once,
    // each chunk's after its last backward, all in flight until the
    // optimizer (Megatron-LM's interleaved schedule: grad_sync_func starts
    // a chunk's reductions at its last micro-batch, finish_grad_sync waits
    // at the step's end), so no stage stalls its backward on them.
    placeReductionWaits(block, gathersOncePerStage(*fn));
    placeAccumulations(block);
    SmallVector<Gather> gathers = unitGathers(*fn);
    if (mode == "fsdp1" || mode == "fsdp2") {
      prefetchOneAhead(gathers, mode == "fsdp1");
      pipelineParamSync(*fn, gathers);
    } else if (mode == "list")
      return listSchedule(*fn, gathers, maxInFlight, budget);
    return success();
  }

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (prefetch != "auto" && prefetch != "none" && prefetch != "fsdp1" &&
        prefetch != "fsdp2") {
      module.emitError()
          << "fsdp-schedule: prefetch must be auto, none, fsdp1 or fsdp2, got '"
          << prefetch << "'";
      return signalPassFailure();
    }
    if (bucketBytes < 0) {
      module.emitError() << "fsdp-schedule: bucket-bytes must be >= 0, got "
                         << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    if (maxInFlight < 1) {
      module.emitError() << "fsdp-schedule: max-in-flight must be >= 1, got "
                         << static_cast<int64_t>(maxInFlight);
      return signalPassFailure();
    }
    const ClusterSpec *spec = nullptr;
    if (clusterSpecs->hasCluster(cluster)) {
      spec = clusterSpecs->get();
      if (!spec) {
        module.emitError() << "fsdp-schedule: " << clusterSpecs->getError();
        return signalPassFailure();
      }
    }
    int64_t budget = std::numeric_limits<int64_t>::max();
    if (!memoryBudget.empty()) {
      std::optional<int64_t> b = parseByteSize(memoryBudget);
      if (!b) {
        module.emitError()
            << "fsdp-schedule: memory-budget must be a byte count such as "
               "80GiB, got '"
            << memoryBudget << "'";
        return signalPassFailure();
      }
      budget = *b;
    } else if (spec) {
      budget = (int64_t)spec->memoryBytes;
    }

    std::string chosen =
        prefetch == "auto" ? std::string("list") : std::string(prefetch);
    int64_t limit = maxInFlight;
    if (prefetch == "auto" && spec) {
      // The cost model picks the fastest candidate that fits the budget (if
      // none fits, the fastest: the report then shows the overage). The
      // candidates are planned on clones, in parallel, and the winner's
      // body replaces the module's.
      struct Candidate {
        std::string mode;
        int64_t limit;
        OwningOpRef<ModuleOp> module;
        double time = 0;
        int64_t peak = 0;
        bool fits = false;
      };
      SmallVector<Candidate> candidates;
      candidates.push_back({"list", maxInFlight, nullptr});
      if (maxInFlight > 1)
        candidates.push_back({"list", 1, nullptr});
      for (const char *mode : {"fsdp2", "fsdp1", "none"})
        candidates.push_back({mode, 0, nullptr});
      for (Candidate &c : candidates)
        c.module = module.clone();
      Simulator sim(*spec);
      auto evaluate = [&](Candidate &c) -> LogicalResult {
        if (failed(apply(*c.module, c.mode, c.limit, budget, bucketBytes)))
          return failure();
        FailureOr<func::FuncOp> fn = getStepFunction(*c.module);
        // A candidate's peak, before any schedule is final: the analysis
        // itself (fsdp-memory-plan records the plan of the one applied).
        FailureOr<MemoryPlan> plan = MemoryPlan::compute(*fn);
        FailureOr<SimResult> r = sim.run(*c.module);
        if (failed(plan) || failed(r))
          return failure();
        c.time = r->stepTime;
        c.peak = plan->peakBytes;
        c.fits = plan->peakBytes <= budget;
        LLVM_DEBUG(llvm::dbgs()
                   << "cost model: " << scheduleName(c.mode, c.limit)
                   << " predicts " << llvm::format("%.6g", c.time)
                   << " s, peak " << c.peak << " bytes"
                   << (c.fits ? "" : ", over the budget of ")
                   << (c.fits ? "" : std::to_string(budget)) << "\n");
        return success();
      };
      // In parallel; one after the other under -debug-only, so that each
      // candidate's decisions print together.
      bool inOrder = false;
      LLVM_DEBUG(inOrder = true);
      if (inOrder
              ? llvm::any_of(candidates,
                             [&](Candidate &c) { return failed(evaluate(c)); })
              : failed(failableParallelForEach(&getContext(), candidates,
                                               evaluate)))
        return signalPassFailure();
      // Equal predicted times (within rounding: where no transfer can overlap
      // compute, comm_overlap = 0, every placement costs the same) go to the
      // smaller planned peak, then to the later candidate (fewer gathers
      // started early: none is last).
      auto faster = [](const Candidate &a, const Candidate &b) {
        double tol = 1e-9 * std::max(a.time, b.time);
        if (std::fabs(a.time - b.time) > tol)
          return a.time < b.time;
        return a.peak <= b.peak;
      };
      Candidate *best = &candidates.front();
      for (Candidate &c : candidates)
        if (c.fits ? (!best->fits || faster(c, *best))
                   : (!best->fits && faster(c, *best)))
          best = &c;
      LLVM_DEBUG(llvm::dbgs()
                 << "cost model picks " << scheduleName(best->mode, best->limit)
                 << (best->fits ? ": the fastest that fits the budget"
                                : ": none fits the budget, the fastest")
                 << " (equal times: the smaller peak, then the later "
                    "candidate)\n");
      chosen = best->mode;
      limit = best->limit;
      Block *body = module.getBody();
      body->clear();
      body->getOperations().splice(body->end(),
                                   best->module->getBody()->getOperations());
    } else if (failed(apply(module, chosen, limit, budget, bucketBytes))) {
      return signalPassFailure();
    }
    std::string label = scheduleName(chosen, limit);
    module->setAttr(
        kScheduleAttr,
        StringAttr::get(module.getContext(),
                        (prefetch == "auto" ? "auto: " : "") + label));
  }
};
} // namespace

std::unique_ptr<Pass>
mlir::fsdp::createFSDPSchedule(FSDPScheduleOptions options,
                               std::shared_ptr<ClusterSpecCache> specs) {
  return std::make_unique<FSDPSchedulePass>(std::move(options),
                                            std::move(specs));
}
