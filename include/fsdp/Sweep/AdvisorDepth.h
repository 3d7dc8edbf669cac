//===- AdvisorDepth.h - a layout's plan extrapolated over the model's depth
//===//
//
// A transformer's blocks are identical: each adds the same ops, the same
// FSDP unit (one per block, policy=block) and the same collectives to every
// micro-batch of a step, so a layout's predicted step time, its device bytes
// (peak and reserved), its FLOPs and its communication bytes are affine in
// the number of blocks per pipeline stage, b(L) = b(L1) + (L − L1)·slope,
// once the depth is large enough that the first and last blocks of a stage
// (which the prefetch and the pipeline's fill treat apart) are the same at
// both depths. fsdp-sweep's advisor (Advisor.h) therefore plans a candidate
// at small depths L1 = r + P·d1, L2 = r + P·d2 and L3 = 2·L2 − L1 layers (P
// the pipeline-parallel degree, r = L mod P: each stage gains the same
// number of blocks, the stages holding one more block than the others stay
// the same), checks that L2's step and device bytes lie on the line through
// L1's and L3's (within 0.1%: a peak or a bound that changes place with the
// depth is not affine; such a layout is planned at full depth) and
// extrapolates every number of the planner's report from L1 and L3 to the
// model's L layers; the layouts it prints are planned at full depth.
//
// A pipeline's report is a maximum of lines: its per-rank numbers are the
// fattest stage's. So its stages are checked and extrapolated one by one
// and the fattest at the model's depth gives the report's (stagesAreAffine,
// adoptFattestStage). Two decisions are taken by comparing a
// depth-dependent estimate with the memory budget, not by a line: the
// stage split (fsdp-pipeline-balance, pipelineSplitIsAffine) and each
// stage's pp-gather=auto choice (fsdp-pipeline's planStage: its
// units gathered once per step when that plan's peak fits the budget, else
// per micro-batch). The last is why pipeline layouts once disagreed with
// their whole plans: gathered once per step, a stage holds its gathered
// parameters and whole (unsharded) gradients for the whole step, and since
// its parameters are synced ahead and its reduce-scatters kept in flight
// until the optimizer (ScheduleSteps.cpp, pipelineParamSync) all of them at
// once, so that plan's peak grows by a block's bf16 parameters and f32
// gradient per block, several times the per-micro-batch plan's slope
// (a block's activations and accumulated gradient shard). Small depths fit
// the budget gathered once per step, the model's depth does not: the full
// plan switches to per micro-batch and fits where the line through the
// once-per-step plans is over the budget. So each decision is re-made at
// the model's depth from the extrapolated numbers (gatherAtFullDepth), and
// a stage that would switch has its depths planned again per micro-batch.
// test/lit/Sweep/advisor-extrapolate.test checks the extrapolation against
// full plans, pipeline layouts among them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SWEEP_ADVISORDEPTH_H
#define FSDP_SWEEP_ADVISORDEPTH_H

#include "fsdp/Sweep/Sweep.h"

#include "llvm/ADT/StringRef.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace fsdp_import {
struct Overrides;
} // namespace fsdp_import

namespace mlir::fsdp::sweep {

/// The model's number of transformer blocks (fsdp-import's `--layers`
/// override, else the config's num_hidden_layers, or n_layer for GPT-2);
/// nullopt with `error` set when the config cannot be read.
std::optional<int64_t> configLayers(const std::string &configPath,
                                    const fsdp_import::Overrides &ov,
                                    std::string &error);

/// The depths (L1, L2) = (r + P·d1, r + P·d2), r = layers mod P, at which a
/// layout of pipeline degree `pp` is planned to be extrapolated to `layers`;
/// nullopt when d1 >= d2 or L2 is not below `layers` (the layout is then
/// planned at full depth).
std::optional<std::pair<int64_t, int64_t>>
extrapolationDepths(int64_t layers, int64_t pp, int64_t d1, int64_t d2);

/// The report of a plan at `layers` from the reports `a` and `b` of the same
/// layout at depths la < lb: every number present in both (recursively, in
/// objects and in arrays of one length) as a + (b − a)·(layers − la)/(lb −
/// la), integers rounded; a string or bool equal in both is kept, anything
/// else left out (the unit list, the op at the peak). The ratios are
/// recomputed from the extrapolated numbers: predicted_tokens_per_s =
/// tokens_per_step / predicted_step_time_s, step_over_lower_bound, and mfu
/// and bubble_fraction as (ratio × step) extrapolated, over the step. A
/// peak (the report's per_rank and each stage's, and stage_peak_bytes) is
/// raised to its highest phase's extrapolated peak (per_rank.
/// peak_bytes_by_phase, MemoryPlanRecord::phasePeaks), the allocator's
/// reserved bytes by as much, peak_bytes_by_class then left out: a step's
/// peak is the largest of its phases', each affine in the depth, and the
/// phase that is highest may change past the reduced depths (Llama-3.1-405B
/// at TP 8 × PP 2 with full AC moved between 10 and 14 layers; bench/
/// README.md). It records `extrapolated_from_layers` [la, lb] and `layers`.
nlohmann::ordered_json extrapolateReport(const nlohmann::ordered_json &a,
                                         int64_t la,
                                         const nlohmann::ordered_json &b,
                                         int64_t lb, int64_t layers);

/// Whether a pipeline's stage split (fsdp-pipeline-balance: the fastest
/// split whose stages' estimated peaks fit the memory budget) extrapolates:
/// every stage gains the same number of blocks, the same for all stages,
/// from depth to depth (reports `a`, `mid`, `b` at equally spaced depths;
/// a stage that gains none while the others grow is pinned by something
/// else, as the last stage by a large LM head, and the model's split
/// differs), and under a memory budget the
/// split extrapolated to full depth (`full`) still fits it; else the
/// balancer would choose another split there (a budget-bound split is not
/// affine in the depth). True for reports without pipeline parallelism.
bool pipelineSplitIsAffine(const nlohmann::ordered_json &a,
                           const nlohmann::ordered_json &mid,
                           const nlohmann::ordered_json &b,
                           const nlohmann::ordered_json &full);

/// A pipeline report's per-rank numbers are its fattest stage's
/// (PipelineSim's peak_stage: the first stage of the largest device bytes).
/// Each stage's are affine in the depth; their maximum is not once another
/// stage overtakes it, so the fattest can differ between the depths and at
/// the model's. Whether every stage's device bytes in `mid` are on the line
/// `line` extrapolated through the outer depths to mid's depth (within
/// 0.1%); without pipeline parallelism, the report's own device bytes.
bool stagesAreAffine(const nlohmann::ordered_json &line,
                     const nlohmann::ordered_json &mid);

/// Makes the extrapolated pipeline report `full` hold its fattest stage's
/// per-rank numbers and peak_stage, as PipelineSim does for a planned
/// report (fattestStage; its per_rank, extrapolated from the outer depths'
/// fattest stages, is another stage's where the fattest changes); false
/// when a stage has no per-rank numbers. True without pipeline parallelism.
bool adoptFattestStage(nlohmann::ordered_json &full);

/// What fsdp-pipeline's pp-gather decisions (stage_gather) would be at full
/// depth, from the reports at the three reduced depths and the one
/// extrapolated from them (`full`, whose stage_peak_bytes are each stage's
/// planned peak at the model's depth, bytes per rank).
enum class GatherAtFullDepth {
  Same,          ///< every stage decides as at the reduced depths
  PerMicroBatch, ///< a stage gathered once per step would not fit there,
                 ///< and every stage ends per micro-batch: plan the depths
                 ///< again with pp-gather=per-micro-batch
  Unknown,       ///< the decisions differ between the depths, mix at full
                 ///< depth, or a peak is within 0.1% of the budget: plan
                 ///< whole
};
/// `gatherAuto`: the stages chose (pp-gather=auto, the default) against the
/// budget the split records (pipeline.split.budget_bytes, fsdp-pipeline's
/// memory-budget or the device memory); false when an option fixed it.
/// `deviceBytes` (bytes): the device memory; a stage over an explicit budget
/// below it makes the full plan fail (fsdp-memory-plan's check) where the
/// extrapolation cannot tell, so that is Unknown. The rule (planStage):
/// once per step where its peak fits the budget, else per micro-batch where
/// that fits, else the smaller peak; a stage's once-per-step peak only grows
/// with its blocks, so a stage per micro-batch at the reduced depths stays
/// so, and one whose per-micro-batch peak is over the budget at full depth
/// does not fit either way.
GatherAtFullDepth gatherAtFullDepth(const nlohmann::ordered_json &a,
                                    const nlohmann::ordered_json &mid,
                                    const nlohmann::ordered_json &b,
                                    const nlohmann::ordered_json &full,
                                    bool gatherAuto, int64_t deviceBytes);

/// Plans one layout at `depth` layers (0: the model's) with `ppGather` as
/// fsdp-pipeline's pp-gather and `ppSplit` as its pp-split (empty: the
/// layout's options as given); `whyWhole` says why a layout is planned at
/// the model's depth instead of extrapolated (for --plan-log; empty for the
/// reduced depths).
using PlanAtDepth =
    std::function<Plan(int64_t depth, llvm::StringRef ppGather,
                       llvm::StringRef ppSplit, llvm::StringRef whyWhole)>;

/// The three reduced depths a layout is planned at (layers) and, for a
/// pipeline whose split at the model's depth is known, the pp-split of
/// each (empty: chosen at that depth).
struct ReducedDepths {
  int64_t layers[3] = {0, 0, 0};
  std::string split[3];
};

/// The reduced depths of a pipeline cut as the model is: its stages hold
/// `stageLayers` blocks at the model's `layers` (fsdp-pipeline's split,
/// pp-plan=split), and each loses the same c blocks, c = min − d with d =
/// d1, d2 and 2·d2 − d1 blocks left on the smallest stage, so that every
/// stage gains the same blocks from depth to depth and the line through
/// them reaches the model's split exactly (the balancer's own split at a
/// reduced depth need not: a split bound by the memory budget at full depth
/// is not affine). nullopt when the model is too shallow for them (c < 1 at
/// the deepest). `why` then says so.
std::optional<ReducedDepths>
reducedDepthsOfSplit(int64_t layers, const std::vector<int64_t> &stageLayers,
                     int64_t d1, int64_t d2, std::string &why);

/// The model and options of planOverDepths.
struct DepthOptions {
  int64_t layers = 0;      ///< the model's blocks
  int64_t pp = 1;          ///< the layout's pipeline-parallel degree P
  int64_t d1 = 0, d2 = 0;  ///< blocks per stage of the reduced depths
  bool gatherAuto = true;  ///< pp-gather=auto decides (gatherAtFullDepth)
  int64_t deviceBytes = 0; ///< the device memory (bytes)
  /// With pp > 1, the blocks of each stage of the split fsdp-pipeline
  /// chooses at the model's depth (empty when it cannot say), `seconds` its
  /// wall time; asked when the reduced depths' own splits are not on the
  /// model's (pipelineSplitIsAffine), to plan them again cut as the model is
  /// (reducedDepthsOfSplit). Null: not asked.
  std::function<std::vector<int64_t>(double &seconds)> modelSplit;
};

/// A layout's plan, extrapolated over the depth where it is affine: planned
/// at L1, L2, L3 (extrapolationDepths; with a split that is not the model's
/// there, again at reducedDepthsOfSplit's depths; whole when the three add
/// up to more
/// than half the model's depth: too little to save), extrapolated from L1
/// and L3 when L2's step and device bytes (a pipeline's: every stage's,
/// stagesAreAffine; the fattest at full depth is then the report's,
/// adoptFattestStage) are on their line (0.1%), the pipeline's split is the
/// same at full depth (pipelineSplitIsAffine) and its stages gather as at
/// full depth (gatherAtFullDepth: PerMicroBatch plans the three depths again
/// per micro-batch); else planned at full depth. A reduced-depth plan's
/// error is returned as the plan's. planSeconds is the sum of every plan
/// made.
Plan planOverDepths(const PlanAtDepth &planAt, const DepthOptions &o);

} // namespace mlir::fsdp::sweep

#endif // FSDP_SWEEP_ADVISORDEPTH_H
