//===- Advisor.h - ranks the layouts of a model over GPU counts -----------===//
//
// fsdp-sweep's advisor (--gpus with --global-batch-tokens): for one model, a
// cluster spec, a range of GPU counts and a global batch in tokens, every
// layout the planner can express is planned through fsdp-pipeline (the same
// IR, report and simulation as fsdp-opt's report=, sweep::runPlan) and the
// layouts that fit are ranked by predicted throughput per GPU count.
//
// A layout is (GPU count N, tensor-parallel degree t, pipeline-parallel
// degree P and schedule, strategy, shard group size, activation-checkpoint
// mode, bucket limit, micro-batch size m). The global batch B = tokens / seq
// sequences is fixed: each of the N / (t·P) data-parallel ranks takes s = B /
// (N / (t·P)) sequences per step in k = s / m micro-batches
// (accumulate=sharded when k > 1; k >= P with pipeline parallelism, whose
// screens plan k = P instead of 1).
//
// Before any plan, fsdp-tensor-parallel is run on the model once per TP
// degree t > 1 (with --pipeline's sequence-parallel and vocab-parallel): a
// degree it refuses (heads or vocabulary not divisible by t, ...) refuses
// every family of that degree, whose layouts say the planner's reason
// (`refused`, counted apart from those that do not fit) and are not planned.
// 0. Branch and bound (--prune, on by default): before planning, each
//   family gets AdvisorBounds.h's proven lower bounds on its device bytes
//   and its step (compute at the spec's best efficiencies, the pipeline
//   fill and drain). A family whose first mode's bytes bound exceeds the
//   device is not planned (step 3's rule then holds for its other modes),
//   nor is a later mode whose own bound (the activations that mode keeps)
//   exceeds it; families are searched in the order of their step bounds, and a
//   mode (or, with P > 1, a smaller micro-batch size) whose step bound exceeds
//   the (--top + 1)-th fastest step already planned at its GPU count is not
//   planned: it cannot be among the rows printed nor their runner-up, so
//   the table is the same as without the bounds. The counts of fitting
//   layouts and the ranks below the top + 1 can differ (a pruned layout is
//   neither planned nor ranked; its JSON row says `pruned` and why).
// The search, per family (every dimension but m), where time goes: one plan
// of 405B through the pipeline takes 0.3-1.3 s of CPU on this machine, and
// grows with k (fsdp-micro-batch clones the step k times), so the advisor
// plans few micro-batch counts:
//   1. memory screens: the family planned with k = 1 at a per-rank batch of
//      m sequences (a model imported with global batch m x N / t). Its
//      device bytes (peak + allocator overhead) are taken as a lower bound of
//      the bytes of k micro-batches of m (the k-micro-batch step holds one
//      micro-batch's activations and adds the accumulated gradient shards):
//      the largest m whose screen fits is found by bisection over the powers
//      of two dividing s; none fits (not even m = 1): the family cannot fit.
//   2. the layout: planned at that m with k = s / m; if it does not fit, m
//      halves. Fewer, larger micro-batches are taken as never slower (fewer
//      per-micro-batch reduce-scatters, longer weight-gradient GEMMs), so the
//      largest m that fits is the family's layout.
//   With pipeline parallelism (P > 1) that is not so (the bubble is
//   (P−1)/k): every smaller m is planned too and the fastest that fits is
//   the layout.
//   The micro-batch sizes are the powers of two m dividing s with P <= s / m
//   <= --max-micro-batches (16).
//   3. activation checkpointing is tried from the mode that saves most
//      (full, selective-op, selective, none; selective-op only when
//      --activation-checkpoint names it): when a mode cannot fit at m = 1,
//      the modes after it are not planned (they keep more activations); a
//      mode the planner refuses is a reason, not a memory verdict.
//   4. depth (--extrapolate-depths, AdvisorOptions::extrapolateDepths):
//      each plan above is made at three reduced depths and its report
//      extrapolated to the model's (AdvisorDepth.h); the `top` + 1 fastest
//      fitting layouts of each GPU count are then planned at full depth
//      until all of them are full plans (one that does not fit at full
//      depth is no longer ranked), so the printed rows are full plans.
// Every plan is the planner's own (no closed-form shortcut); the JSON lists
// each family's screens and plans. The model is imported once per global
// batch and cloned for every plan (the import is the only layout-
// independent step: fsdp-pipeline's passes all depend on the layout).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SWEEP_ADVISOR_H
#define FSDP_SWEEP_ADVISOR_H

#include "fsdp/Sweep/Sweep.h"

namespace mlir::fsdp::sweep {

/// What the advisor ranks.
struct AdvisorOptions {
  SweepOptions sweep;            ///< model, cluster, strategies, buckets, ...
  std::vector<int64_t> gpus;     ///< GPU counts N
  int64_t globalBatchTokens = 0; ///< tokens per optimizer step (all ranks)
  int64_t seq = 0;               ///< tokens per sequence
  /// Tensor-parallel degrees (fsdp-sweep's --tp; the data-parallel size is
  /// N / t): a TP degree becomes the pipeline's tp=t and its exposed time
  /// the report's tp_exposed_s (the bound "TP comm").
  std::vector<int64_t> tpDegrees = {1};
  /// Pipeline-parallel degrees P and their schedules (fsdp-sweep's --pp,
  /// --pp-schedule, in `sweep`): the data-parallel size is N / (t·P), and a
  /// layout with P > 1 takes k >= P micro-batches (its screens plan k = P);
  /// its bubble is the report's bubble_s (the bound "bubble").
  unsigned top = 3; ///< rows per GPU count in the table
  /// The most micro-batches k a layout may take (fsdp-micro-batch clones
  /// the step k times, so a plan's time grows with k): micro-batch sizes
  /// with s / m above it are not planned.
  int64_t maxMicroBatches = 16;
  /// Branch and bound (step 0 above; fsdp-sweep's --prune): families that
  /// the bounds of AdvisorBounds.h prove cannot fit, or cannot be among the
  /// `top` + 1 fastest of their GPU count, are not planned.
  bool prune = true;
  /// Blocks per pipeline stage (d1, d2) of the two reduced depths a layout
  /// is planned at and extrapolated from (AdvisorDepth.h; fsdp-sweep's
  /// --extrapolate-depths); empty: every layout planned at full depth. The
  /// layouts ranked among the first `top` + 1 of a GPU count are planned
  /// again at full depth, and those are the numbers printed and ranked.
  std::vector<int64_t> extrapolateDepths = {3, 4};
  /// Where each plan writes one line as it finishes (fsdp-sweep's
  /// --plan-log): GPU count, layout, depth, wall and thread CPU seconds,
  /// device bytes, fits; null: none.
  llvm::raw_ostream *planLog = nullptr;
};

/// One family's result: its best fitting layout (or why none fits).
struct AdvisedLayout {
  int64_t gpus = 0, tp = 1, dataParallel = 0;
  int64_t pp = 1;         ///< pipeline-parallel degree P
  std::string ppSchedule; ///< its schedule; empty for P = 1
  std::string strategy;
  int64_t shardSize = 0; ///< ranks per shard group (hybrid-shard), else dp
  std::string activationCheckpoint;
  int64_t bucketBytes = -1;     ///< -1: not set
  int64_t sequencesPerRank = 0; ///< s = B / dp
  int64_t microBatchSize = 0;   ///< m; 0 when nothing fits
  int64_t microBatches = 0;     ///< k = s / m
  bool fits = false;
  /// The planner refused the layout (an error, not a memory verdict): its
  /// tensor-parallel degree for this model before planning, or its first
  /// screen's plan; `why` says why.
  bool refused = false;
  std::string why; ///< when it does not fit or could not be planned
  /// Memory decided the layout: a larger micro-batch, or a mode that
  /// recomputes less, did not fit.
  bool memoryLimited = false;
  Plan plan; ///< the layout's plan (when fits)
  /// The plan's report was extrapolated from two reduced depths
  /// (AdvisorDepth.h), not planned at the model's depth.
  bool extrapolated = false;
  /// For a layout planned again at full depth after an extrapolated
  /// search: the extrapolation's depths, step and device bytes (JSON
  /// `extrapolated`), to compare with the full plan's; null otherwise.
  nlohmann::ordered_json extrapolation;
  std::vector<Plan> screens; ///< the plans tried on the way (their reports)
  std::string bound;         ///< compute, FSDP comm, TP comm or bubble
  /// The next-ranked layout's step time / this one's (>= 1: what taking
  /// the runner-up would cost); 0 for the last.
  double runnerUpRatio = 0;
  int rank = 0; ///< 1 = fastest at its GPU count; 0 unranked
  /// AdvisorBounds.h's bounds for its family: device bytes (any layout)
  /// and step seconds (at the most micro-batches it may take); 0 when the
  /// family was not enumerated that far.
  double bytesLowerBound = 0, stepLowerBound = 0;
  /// Not planned because a bound settled it: it cannot fit (memory), or it
  /// is slower than `top` + 1 layouts planned at its GPU count (step).
  enum Pruned {
    NotPruned = 0,
    PrunedByMemory,
    PrunedByStep
  } pruned = NotPruned;
};

struct AdvisorResult {
  std::vector<AdvisedLayout> layouts;
  int64_t params = 0, seq = 0, globalBatch = 0;
  unsigned jobs = 0;
  int64_t plansRun = 0;
  int64_t layers = 0;    ///< the model's transformer blocks
  int64_t fullPlans = 0; ///< of plansRun: planned again at full depth
  int64_t prunedByMemory = 0, prunedByStep = 0; ///< layouts not planned
  /// AdvisorBounds.h's compute lower bound per sequence on one device
  /// (seconds; 0 when the model could not be measured).
  double boundSecondsPerSequence = 0;
  double wallSeconds = 0, planSeconds = 0;
};

/// Enumerates the families, searches each (Advisor.h's header comment) on
/// `jobs` threads (0: the hardware's) and ranks the fitting layouts per GPU
/// count by predicted tokens/s.
AdvisorResult runAdvisor(const AdvisorOptions &o, const ClusterSpec &spec,
                         unsigned jobs);

/// The top rows per GPU count and the families that cannot fit.
void printAdvisor(llvm::raw_ostream &os, const AdvisorOptions &o,
                  const ClusterSpec &spec, const AdvisorResult &r);
/// Every family as JSON (layout, rank, bound, runner-up ratio, the report).
nlohmann::ordered_json advisorJson(const AdvisorOptions &o,
                                   const ClusterSpec &spec,
                                   const AdvisorResult &r);
/// Writes --plan-log's line for plan `p`, made at `depth` layers (0: the
/// model's; `whyWhole`, when not empty, says why it was not extrapolated)
/// with pp-gather `ppGather` (empty: as given), in `cpuSeconds` of its
/// thread's CPU; whole, under a lock shared by the search's threads.
void logPlan(llvm::raw_ostream &os, const Plan &p, int64_t depth,
             llvm::StringRef ppGather, llvm::StringRef whyWhole,
             double cpuSeconds, bool fits);

/// Every family as CSV, one line each (the JSON's scalar columns).
void writeAdvisorCsv(llvm::raw_ostream &os, const AdvisorResult &r);

} // namespace mlir::fsdp::sweep

#endif // FSDP_SWEEP_ADVISOR_H
