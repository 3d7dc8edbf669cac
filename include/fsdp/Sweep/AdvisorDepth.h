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
// test/lit/Sweep/advisor-extrapolate.test checks the extrapolation against
// full plans.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SWEEP_ADVISORDEPTH_H
#define FSDP_SWEEP_ADVISORDEPTH_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

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
/// and bubble_fraction as (ratio × step) extrapolated, over the step. It
/// records `extrapolated_from_layers` [la, lb] and `layers`.
nlohmann::ordered_json extrapolateReport(const nlohmann::ordered_json &a,
                                         int64_t la,
                                         const nlohmann::ordered_json &b,
                                         int64_t lb, int64_t layers);

/// Whether a pipeline's stage split (fsdp-pipeline-balance: the fastest
/// split whose stages' estimated peaks fit the memory budget) extrapolates:
/// each stage gains the same blocks from depth to depth (reports `a`,
/// `mid`, `b` at equally spaced depths), and under a memory budget the
/// split extrapolated to full depth (`full`) still fits it; else the
/// balancer would choose another split there (a budget-bound split is not
/// affine in the depth). True for reports without pipeline parallelism.
bool pipelineSplitIsAffine(const nlohmann::ordered_json &a,
                           const nlohmann::ordered_json &mid,
                           const nlohmann::ordered_json &b,
                           const nlohmann::ordered_json &full);

} // namespace mlir::fsdp::sweep

#endif // FSDP_SWEEP_ADVISORDEPTH_H
