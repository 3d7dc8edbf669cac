//===- Advisor.cpp - ranks the layouts of a model over GPU counts ---------===//
//
// The search and the ranking; fsdp/Sweep/Advisor.h describes both.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sweep/Advisor.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Sweep/AdvisorBounds.h"
#include "fsdp/Sweep/AdvisorDepth.h"
#include "fsdp/Transforms/Passes.h"

#include "ModelCache.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <time.h>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::sweep;

namespace {

/// How a refused layout's reason starts (AdvisedLayout::refused).
constexpr llvm::StringLiteral kRefused = "refused by the planner: ";

/// Every dimension of a layout but the activation-checkpoint mode and the
/// micro-batch size: one unit of work, searched by one thread.
struct LayoutFamily {
  int64_t gpus, tp, pp;
  std::string ppSchedule;
  int64_t dp, sequencesPerRank;
  std::string strategy;
  int64_t shardSize; // hybrid-shard's shard group; 0 otherwise
  int64_t bucketBytes;
  std::vector<size_t> layouts; // indices into the result, in AC order
  /// Lower bound of the step of any of its layouts (AdvisorBounds.h), at
  /// the most micro-batches it may take; 0 before it is computed.
  double stepBound = 0;
};

/// Per GPU count, the step times of the fastest `keep` layouts planned so
/// far (one per layout, its final plan), shared by the search's threads:
/// a layout whose step bound exceeds the keep-th cannot be among the
/// first `keep` (Advisor.h, step 0).
class Incumbents {
public:
  explicit Incumbents(size_t keep) : keep(std::max<size_t>(1, keep)) {}
  /// The keep-th fastest step at `gpus` (seconds), +inf while fewer fit.
  double threshold(int64_t gpus) {
    std::lock_guard<std::mutex> lock(mu);
    const std::vector<double> &v = best[gpus];
    return v.size() < keep ? std::numeric_limits<double>::infinity() : v.back();
  }
  void add(int64_t gpus, double step) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<double> &v = best[gpus];
    v.insert(llvm::upper_bound(v, step), step);
    if (v.size() > keep)
      v.pop_back();
  }

private:
  size_t keep;
  std::mutex mu;
  std::map<int64_t, std::vector<double>> best;
};

class Searcher {
public:
  Searcher(const AdvisorOptions &o, const ClusterSpec &spec,
           std::shared_ptr<const ClusterSpec> cluster, ModelCache &cache,
           const ModelBoundFacts &facts, Incumbents &incumbents,
           const std::map<int64_t, std::string> &refusals)
      : o(o), spec(spec), cluster(std::move(cluster)), cache(cache),
        facts(facts), incumbents(incumbents), refusals(refusals),
        gatherAuto(!pipelineSets(o.sweep.pipeline, "pp-gather=")),
        globs(llvm::any_of(kGlobOptions, [&](llvm::StringRef key) {
          return pipelineSets(o.sweep.pipeline, key);
        })) {}

  std::atomic<int64_t> *plansRun = nullptr;
  int64_t layers = 0; ///< the model's blocks (0: not known, no extrapolation)

  /// Searches every AC mode of `g` (Advisor.h, steps 1-3).
  void search(const LayoutFamily &g, std::vector<AdvisedLayout> &layouts) {
    // The planner refuses the degree for this model: a reason, not a memory
    // verdict, and nothing to plan (tensorParallelRefusals).
    if (auto it = refusals.find(g.tp); it != refusals.end()) {
      for (size_t li : g.layouts) {
        layouts[li].refused = true;
        layouts[li].why = kRefused.str() + it->second;
      }
      return;
    }
    std::vector<int64_t> sizes; // powers of two dividing s, ascending
    for (int64_t m = 1; m <= g.sequencesPerRank; m *= 2)
      if (g.sequencesPerRank % m == 0 &&
          g.sequencesPerRank / m <= o.maxMicroBatches &&
          g.sequencesPerRank / m >= g.pp)
        sizes.push_back(m);
    if (sizes.empty()) {
      for (size_t li : g.layouts)
        layouts[li].why =
            g.sequencesPerRank < g.pp
                ? "pp=" + std::to_string(g.pp) +
                      " needs at least as many "
                      "micro-batches, more than the " +
                      std::to_string(g.sequencesPerRank) +
                      " sequences per data-parallel rank"
                : "needs more than " + std::to_string(o.maxMicroBatches) +
                      " micro-batches (--max-micro-batches) for " +
                      std::to_string(g.sequencesPerRank) +
                      " sequences per rank";
      return;
    }
    // Memory: each mode's bound (the state and gathered block for every
    // mode, the activations the mode keeps where measured); when the first
    // mode's cannot fit, neither can those that keep more activations
    // (step 3); a later mode whose own bound cannot fit is not planned.
    BoundLayout shape{g.tp,       g.pp, g.ppSchedule,
                      g.strategy, g.dp, g.shardSize ? g.shardSize : g.dp,
                      sizes[0],   "",   o.sweep.paramDtype};
    for (size_t li : g.layouts) {
      shape.acMode = layouts[li].activationCheckpoint;
      layouts[li].bytesLowerBound = deviceBytesLowerBound(facts, spec, shape);
      layouts[li].stepLowerBound = stepLowerBound(
          facts, g.tp, g.pp, g.sequencesPerRank,
          std::min<int64_t>(g.sequencesPerRank, o.maxMicroBatches),
          shape.acMode == "full");
    }
    auto overMemory = [&](AdvisedLayout &l) {
      if (!o.prune || l.bytesLowerBound <= spec.memoryBytes)
        return false;
      l.pruned = AdvisedLayout::PrunedByMemory;
      auto bytes = static_cast<int64_t>(l.bytesLowerBound);
      const std::string &ac = l.activationCheckpoint;
      l.why = "bound: does not fit at " + std::to_string(sizes[0]) +
              (sizes[0] == 1 ? " sequence" : " sequences") +
              " per micro-batch: the training state" +
              (ac == "full" ? ", full AC's checkpoints"
               : facts.keptPerSequence.count(ac)
                   ? ", the activations AC " + ac + " keeps"
                   : "") +
              " and a gathered block alone take " +
              (bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB"
                                  : std::to_string(bytes) + " bytes") +
              " per rank";
      return true;
    };
    if (AdvisedLayout &first = layouts[g.layouts.front()]; overMemory(first)) {
      for (size_t li : g.layouts)
        if (&layouts[li] != &first) {
          layouts[li].pruned = AdvisedLayout::PrunedByMemory;
          layouts[li].why = first.why;
        }
      return;
    }
    bool heavierFailed = false; // a mode saving more memory could not fit
    for (size_t li : g.layouts) {
      AdvisedLayout &l = layouts[li];
      if (heavierFailed) {
        l.why = "not planned: activation-checkpoint modes that keep fewer "
                "activations do not fit at the smallest micro-batch";
        continue;
      }
      if (overMemory(l)) { // as a screen that does not fit at the smallest m
        heavierFailed = true;
        continue;
      }
      double keepth = incumbents.threshold(g.gpus);
      if (o.prune && l.stepLowerBound > keepth) {
        l.pruned = AdvisedLayout::PrunedByStep;
        l.why = "bound: not planned, its step is at least " +
                formatSeconds(l.stepLowerBound) + " s, slower than " +
                std::to_string(o.top + 1) + " layouts planned at " +
                std::to_string(g.gpus) + " GPUs (" + formatSeconds(keepth) +
                " s)";
        continue;
      }
      searchMode(g, sizes, l);
      l.extrapolated =
          l.fits && l.plan.report.contains("extrapolated_from_layers");
      if (l.fits)
        incumbents.add(g.gpus, stepOf(l.plan));
      if (!l.fits && l.microBatchSize == 0 &&
          l.why.rfind("screen: does not fit", 0) == 0)
        heavierFailed = true;
    }
    // Memory-limited: a mode that recomputes less (later in the order) was
    // tried, or its bound proves it, and does not fit (one the step bound
    // left out is not known: its family is slower than the ranked rows,
    // Advisor.h).
    for (size_t i = 0; i < g.layouts.size(); ++i)
      for (size_t j = i + 1; j < g.layouts.size(); ++j)
        if (!layouts[g.layouts[j]].fits &&
            layouts[g.layouts[j]].pruned != AdvisedLayout::PrunedByStep)
          layouts[g.layouts[i]].memoryLimited = true;
  }

  /// Plans the fitting layout `l` of family `g` again at full depth after
  /// an extrapolated search: the extrapolation's numbers are kept in
  /// `l.extrapolation`; if the full plan does not fit, neither does `l`.
  void planFullDepth(const LayoutFamily &g, AdvisedLayout &l) {
    const json &e = l.plan.report;
    l.extrapolation = {{"layers", e["extrapolated_from_layers"]},
                       {"predicted_step_time_s", e["predicted_step_time_s"]},
                       {"device_bytes", deviceBytes(e)},
                       {"peak_bytes", e["per_rank"]["peak_bytes"]},
                       {"plan_s", l.plan.planSeconds}};
    if (e.contains("extrapolated_pp_gather"))
      l.extrapolation["pp_gather"] = e["extrapolated_pp_gather"];
    Plan p = planAt(g, l.activationCheckpoint, l.microBatchSize, l.microBatches,
                    0, "", "a ranked row, checked whole", /*screen=*/false);
    l.extrapolated = false;
    if (fits(p)) {
      l.plan = std::move(p);
      return;
    }
    l.fits = false;
    l.why = p.error.empty() ? "does not fit at full depth (" +
                                  std::to_string(deviceBytes(p.report) >> 20) +
                                  " MiB per rank; extrapolated: " +
                                  std::to_string(deviceBytes(e) >> 20) + " MiB)"
                            : kRefused.str() + p.error;
    l.screens.push_back(std::move(l.plan));
    l.screens.push_back(std::move(p));
  }

private:
  using json = nlohmann::ordered_json;
  static double stepOf(const Plan &p) {
    return p.report["predicted_step_time_s"].get<double>();
  }
  static std::string formatSeconds(double s) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.4g", s);
    return buf;
  }

  /// The layout planned at reduced depths and extrapolated to the model's
  /// (AdvisorDepth.h, planOverDepths), or at full depth when extrapolation
  /// is off or the model is too shallow for it.
  Plan makePlan(const LayoutFamily &g, const std::string &ac, int64_t m,
                int64_t k) {
    if (layers <= 0 || o.extrapolateDepths.size() != 2)
      return planAt(g, ac, m, k, 0, "",
                    o.extrapolateDepths.size() != 2
                        ? "--extrapolate-depths none"
                        : "the model's depth is unknown");
    DepthOptions d;
    d.layers = layers;
    d.pp = g.pp;
    d.d1 = o.extrapolateDepths[0];
    d.d2 = o.extrapolateDepths[1];
    d.gatherAuto = gatherAuto;
    d.deviceBytes = static_cast<int64_t>(spec.memoryBytes);
    if (g.pp > 1 && g.ppSchedule != "interleaved-1f1b")
      d.modelSplit = [&](double &seconds) {
        return modelSplit(g, ac, m, k, seconds);
      };
    return planOverDepths(
        [&](int64_t depth, llvm::StringRef ppGather, llvm::StringRef ppSplit,
            llvm::StringRef why) {
          return planAt(g, ac, m, k, depth, ppGather, why, true, ppSplit);
        },
        d);
  }

  /// The blocks of each stage of the split fsdp-pipeline chooses for the
  /// model at its depth (pp-plan=split: the split alone, no stage planned;
  /// about 40 ms for Llama-3.1-405B; not counted among the plans nor
  /// logged); empty when it cannot say (the split counts the embedding or
  /// the loss as layers, or it failed). `seconds` receives its wall time.
  std::vector<int64_t> modelSplit(const LayoutFamily &g, const std::string &ac,
                                  int64_t m, int64_t k, double &seconds) {
    Plan p = planOptions(g, ac, m, k, " pp-plan=split");
    std::string err;
    ModuleOp model;
    if (p.error.empty())
      model = cache.get(p.globalBatch, err, 0);
    if (!model)
      return {};
    runPlan(cache.context(), model, spec, p);
    seconds = p.planSeconds;
    if (!p.error.empty() || !p.report.contains("pipeline"))
      return {};
    const json &split = p.report["pipeline"]["split"];
    if (split.value("ends", "") != "none" || !split.contains("stage_layers"))
      return {};
    return split["stage_layers"].get<std::vector<int64_t>>();
  }

  /// With --prune (and no glob option in --pipeline), a pipeline of at
  /// least this many stages is screened before it is planned whole: one stage
  /// costs about 1/P of the plan. Of the 405B command's whole pipeline plans
  /// about half did not fit (363 of 763, 454 of 1,060 s of their CPU); pp 2
  /// would pay more for its screens, half a plan each, than its failures cost.
  static constexpr int64_t kScreenStages = 4;

  /// One plan through fsdp-pipeline of the model with `depth` blocks (0:
  /// the config's), with `ppGather` as its pp-gather and `ppSplit` as its
  /// pp-split (empty: as --pipeline says); `whyWhole` (--plan-log) says why
  /// it is not extrapolated. A whole pipeline of kScreenStages or more
  /// (1F1B or GPipe) is first planned with pp-plan=fattest when `screen`
  /// and --prune: if that stage does not fit the device, neither does the
  /// layout, and the screen is the plan returned (its report the stage's,
  /// without a step).
  Plan planAt(const LayoutFamily &g, const std::string &ac, int64_t m,
              int64_t k, int64_t depth, llvm::StringRef ppGather = "",
              llvm::StringRef whyWhole = "", bool screen = true,
              llvm::StringRef ppSplit = "") {
    std::string given =
        (ppGather.empty() ? "" : " pp-gather=" + ppGather.str()) +
        (ppSplit.empty() ? "" : " pp-split=" + ppSplit.str());
    if (screen && o.prune && !globs && depth == 0 && g.pp >= kScreenStages &&
        g.ppSchedule != "interleaved-1f1b") {
      Plan stage = planOnce(g, ac, m, k, depth, ppGather,
                            "one stage screened: " + whyWhole.str(),
                            given + " pp-plan=fattest");
      if (stage.error.empty() && !fits(stage))
        return stage;
      Plan whole = planOnce(g, ac, m, k, depth, ppGather, whyWhole, given);
      whole.planSeconds += stage.planSeconds;
      return whole;
    }
    return planOnce(g, ac, m, k, depth, ppGather, whyWhole, given);
  }

  /// The layout's plan, not yet run: its fsdp-pipeline options with
  /// `extra` appended, parsed (an error when they do not parse).
  Plan planOptions(const LayoutFamily &g, const std::string &ac, int64_t m,
                   int64_t k, llvm::StringRef extra) {
    Plan p;
    p.worldSize = g.gpus;
    p.tp = g.tp;
    p.pp = g.pp;
    p.ppSchedule = g.ppSchedule;
    p.strategy = g.strategy;
    p.shardSize = g.shardSize;
    p.bucketBytes = g.bucketBytes;
    p.activationCheckpoint = ac;
    p.microBatches = k;
    p.globalBatch = m * k * g.dp;
    std::string opts =
        "world-size=" + std::to_string(g.gpus) + " strategy=" + g.strategy;
    if (g.shardSize)
      opts += " shard-size=" + std::to_string(g.shardSize);
    opts += " policy=block";
    if (g.bucketBytes >= 0)
      opts += " bucket-bytes=" + std::to_string(g.bucketBytes);
    opts +=
        " activation-checkpoint=" + ac + " param-dtype=" + o.sweep.paramDtype;
    if (!o.sweep.attention.empty())
      opts += " attention=" + o.sweep.attention;
    if (k > 1)
      opts += " micro-batches=" + std::to_string(k) + " accumulate=sharded";
    if (g.tp > 1)
      opts += " tp=" + std::to_string(g.tp);
    if (g.pp > 1)
      opts += " pp=" + std::to_string(g.pp) + " pp-schedule=" + g.ppSchedule;
    if (!o.sweep.pipeline.empty())
      opts += " " + o.sweep.pipeline;
    opts += extra.str();
    std::string msg;
    FailureOr<PipelineBuilder> pipeline = parsePipeline(opts, cluster, msg);
    if (failed(pipeline))
      p.error = "options: " + msg;
    else
      p.pipeline = std::move(*pipeline);
    p.optionString = opts + " cluster=" + o.sweep.clusterPath;
    return p;
  }

  /// planAt's one plan, with `extra` fsdp-pipeline options.
  Plan planOnce(const LayoutFamily &g, const std::string &ac, int64_t m,
                int64_t k, int64_t depth, llvm::StringRef ppGather,
                llvm::StringRef whyWhole, llvm::StringRef extra) {
    Plan p = planOptions(g, ac, m, k, extra);
    if (!p.error.empty())
      return p;
    std::string err;
    cache.beginPlan();
    ModuleOp model = cache.get(p.globalBatch, err, depth);
    if (!model) {
      p.error = "import: " + err;
      return p;
    }
    double cpu = threadCpuSeconds();
    runPlan(cache.context(), model, spec, p);
    ++*plansRun;
    if (o.planLog)
      logPlan(*o.planLog, p, depth, ppGather, whyWhole,
              threadCpuSeconds() - cpu, fits(p));
    return p;
  }

  /// The calling thread's CPU time (user + system, seconds): a plan's
  /// cost on a shared machine, where its wall time is the load's.
  static double threadCpuSeconds() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
  }

  bool fits(const Plan &p) const {
    return p.error.empty() && deviceBytes(p.report) <= spec.memoryBytes;
  }

  /// Steps 1-2 of Advisor.h for one mode.
  void searchMode(const LayoutFamily &g, const std::vector<int64_t> &sizes,
                  AdvisedLayout &l) {
    const int64_t s = g.sequencesPerRank;
    const std::string &ac = l.activationCheckpoint;
    // Screens at k = 1 by bisection: the largest m whose screen fits.
    std::map<int64_t, bool> screened;
    auto screen = [&](size_t i) {
      if (!screened.count(i)) {
        l.screens.push_back(makePlan(g, ac, sizes[i], g.pp));
        screened[i] = fits(l.screens.back());
      }
      return screened[i];
    };
    if (!screen(0)) {
      const Plan &p = l.screens.back();
      l.refused = !p.error.empty();
      l.why = p.error.empty()
                  ? "screen: does not fit at " + std::to_string(sizes[0]) +
                        (sizes[0] == 1 ? " sequence" : " sequences") +
                        " per micro-batch (" +
                        std::to_string(deviceBytes(p.report) >> 20) +
                        " MiB per rank)"
                  : kRefused.str() + p.error;
      return;
    }
    size_t lo = 0, hi = sizes.size() - 1; // screen(lo) fits
    if (screen(hi))
      lo = hi;
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      (screen(mid) ? lo : hi) = mid;
    }
    // The layout at that m, halving while it does not fit.
    for (size_t i = lo + 1; i-- > 0;) {
      int64_t m = sizes[i], k = s / m;
      Plan p;
      if (k == g.pp) { // the screen is the layout: taken out of the screens
        auto it = llvm::find_if(l.screens, [&](const Plan &q) {
          return q.globalBatch == m * k * g.dp && q.microBatches == k;
        });
        p = std::move(*it);
        l.screens.erase(it);
      } else {
        p = makePlan(g, ac, m, k);
      }
      if (fits(p)) {
        l.fits = true;
        l.microBatchSize = m;
        l.microBatches = k;
        l.memoryLimited = i + 1 < sizes.size();
        l.plan = std::move(p);
        if (g.pp > 1)
          morePipelineMicroBatches(g, sizes, i, l);
        return;
      }
      l.screens.push_back(std::move(p));
    }
    l.why = "no micro-batch size fits with " + std::to_string(s) +
            " sequences per rank";
  }

  /// With pipeline parallelism more, smaller micro-batches shrink the bubble
  /// ((P−1)/k, Narayanan et al., SC'21, §2.2) while each costs its own
  /// gathers and shorter GEMMs: every smaller size below the fitting one
  /// `chosen` is planned too, and the fastest that fits is the layout.
  void morePipelineMicroBatches(const LayoutFamily &g,
                                const std::vector<int64_t> &sizes,
                                size_t chosen, AdvisedLayout &l) {
    for (size_t i = chosen; i-- > 0;) {
      int64_t m = sizes[i], k = g.sequencesPerRank / m;
      // Its step is at least the bound: above the keep-th fastest, it can
      // only matter to a layout that is not ranked among them either.
      if (o.prune && stepLowerBound(facts, g.tp, g.pp, g.sequencesPerRank, k,
                                    l.activationCheckpoint == "full") >
                         incumbents.threshold(g.gpus))
        continue;
      Plan p = makePlan(g, l.activationCheckpoint, m, k);
      if (!fits(p) || stepOf(p) >= stepOf(l.plan)) {
        l.screens.push_back(std::move(p));
        continue;
      }
      l.screens.push_back(std::move(l.plan));
      l.plan = std::move(p);
      l.microBatchSize = m;
      l.microBatches = k;
    }
  }

  const AdvisorOptions &o;
  const ClusterSpec &spec;
  std::shared_ptr<const ClusterSpec> cluster;
  ModelCache &cache;
  const ModelBoundFacts &facts;
  Incumbents &incumbents;
  const std::map<int64_t, std::string> &refusals;
  /// --pipeline leaves pp-gather to fsdp-pipeline's auto decision (an
  /// explicit pp-gather, even auto, is not overridden per depth).
  const bool gatherAuto;
  /// fsdp-pipeline options whose patterns a stage may lack: it fails a
  /// pattern that no stage matches, which one stage cannot tell.
  static constexpr llvm::StringLiteral kGlobOptions[] = {
      "frozen=", "no-decay=", "ac-units=", "keep-gathered="};
  /// --pipeline names one of them: pipelines are not screened.
  const bool globs;
};

/// The activation-checkpoint modes from the one that keeps fewest
/// activations: full, selective-op, selective, none (those of `given`; full,
/// selective and none if empty: selective-op is planned when named).
std::vector<std::string> acOrder(const std::vector<std::string> &given) {
  std::vector<std::string> modes;
  for (const char *m : {"full", "selective-op", "selective", "none"})
    if (given.empty() ? llvm::StringRef(m) != "selective-op"
                      : llvm::is_contained(given, m))
      modes.push_back(m);
  return modes;
}

/// The bound of a fitting layout: the largest of its compute time (with
/// recomputation), its exposed FSDP communication and its exposed TP
/// communication (tp_exposed_s, absent before TP is priced).
std::string boundOf(const nlohmann::ordered_json &r) {
  double compute = r.value("compute_s", 0.0);
  double tp = r.value("tp_exposed_s", 0.0);
  double fsdp = r.value("exposed_comm_s", 0.0) - tp;
  // A pipeline's busiest stage's idle time (PipelineSim.h).
  double bubble = r.value("bubble_s", 0.0);
  if (bubble > compute && bubble >= fsdp && bubble >= tp)
    return "bubble";
  if (compute >= fsdp && compute >= tp)
    return "compute";
  return fsdp >= tp ? "FSDP comm" : "TP comm";
}

/// Measures the model of the global batch `batch` for the bounds (imported
/// in `cache`, the calling thread's), gives each family its step bound at
/// the most micro-batches it may take, and returns the order the families
/// are searched in: by their bounds with pruning (ties in enumeration
/// order), else as enumerated.
std::vector<size_t> boundFamilies(const AdvisorOptions &o,
                                  const ClusterSpec &spec, int64_t batch,
                                  ModelCache &cache,
                                  std::vector<LayoutFamily> &groups,
                                  ModelBoundFacts &facts) {
  std::string err;
  // --attention joins the planned options (planAt): it changes what an AC
  // mode keeps.
  std::string options = o.sweep.pipeline;
  if (!o.sweep.attention.empty())
    options += " attention=" + o.sweep.attention;
  if (ModuleOp model = cache.get(batch, err))
    facts = measureModel(model, batch, spec, options);
  for (LayoutFamily &g : groups) {
    int64_t k = std::min<int64_t>(g.sequencesPerRank, o.maxMicroBatches);
    g.stepBound =
        stepLowerBound(facts, g.tp, g.pp, g.sequencesPerRank, k, false);
  }
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  if (o.prune)
    llvm::sort(order, [&](size_t a, size_t b) {
      return groups[a].stepBound != groups[b].stepBound
                 ? groups[a].stepBound < groups[b].stepBound
                 : a < b;
    });
  return order;
}

/// The fitting layouts at `n` GPUs, fastest first; equal throughputs in
/// enumeration order (the pointers are into one vector).
std::vector<AdvisedLayout *> rankedAt(AdvisorResult &r, int64_t n) {
  std::vector<AdvisedLayout *> ranked;
  for (AdvisedLayout &l : r.layouts)
    if (l.gpus == n && l.fits)
      ranked.push_back(&l);
  llvm::sort(ranked, [](const AdvisedLayout *a, const AdvisedLayout *b) {
    double ta = a->plan.report.value("predicted_tokens_per_s", 0.0);
    double tb = b->plan.report.value("predicted_tokens_per_s", 0.0);
    return ta != tb ? ta > tb : a < b;
  });
  return ranked;
}

/// The rows printed and their runner-up planned at full depth, until the
/// first top + 1 of every GPU count are full plans (one that does not fit
/// at full depth drops out and the next moves up); `onThreads` runs its
/// argument on every thread's searcher.
void planRankedAtFullDepth(
    const AdvisorOptions &o, AdvisorResult &r,
    const std::vector<LayoutFamily> &groups,
    const std::function<void(const std::function<void(Searcher &)> &)>
        &onThreads) {
  std::vector<size_t> familyOf(r.layouts.size(), 0);
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t li : groups[gi].layouts)
      familyOf[li] = gi;
  for (;;) {
    std::vector<size_t> todo;
    for (int64_t n : o.gpus) {
      std::vector<AdvisedLayout *> ranked = rankedAt(r, n);
      for (size_t i = 0; i < ranked.size() && i <= o.top; ++i)
        if (ranked[i]->extrapolated)
          todo.push_back(ranked[i] - r.layouts.data());
    }
    if (todo.empty())
      return;
    std::atomic<size_t> nextFull{0};
    onThreads([&](Searcher &searcher) {
      for (size_t i = nextFull++; i < todo.size(); i = nextFull++)
        searcher.planFullDepth(groups[familyOf[todo[i]]], r.layouts[todo[i]]);
    });
    r.fullPlans += static_cast<int64_t>(todo.size());
  }
}

} // namespace

AdvisorResult sweep::runAdvisor(const AdvisorOptions &o,
                                const ClusterSpec &spec, unsigned jobs) {
  auto start = std::chrono::steady_clock::now();
  AdvisorResult r;
  r.seq = o.seq;
  r.globalBatch = o.globalBatchTokens / o.seq;
  const int64_t batch = r.globalBatch;
  std::vector<std::string> modes = acOrder(o.sweep.activationCheckpoints);
  std::vector<LayoutFamily> groups;
  auto addLayout = [&](LayoutFamily &g, const std::string &ac) {
    AdvisedLayout l;
    l.gpus = g.gpus;
    l.tp = g.tp;
    l.pp = g.pp;
    l.ppSchedule = g.ppSchedule;
    l.dataParallel = g.dp;
    l.strategy = g.strategy;
    l.shardSize = g.shardSize ? g.shardSize : g.dp;
    l.activationCheckpoint = ac;
    l.bucketBytes = g.bucketBytes;
    l.sequencesPerRank = g.sequencesPerRank;
    g.layouts.push_back(r.layouts.size());
    r.layouts.push_back(std::move(l));
  };
  // One (N, t, P, schedule): its families, or the reason it has none.
  auto addFamilies = [&](int64_t n, int64_t t, int64_t pp,
                         const std::string &schedule) {
    auto none = [&](int64_t dp, std::string why) {
      AdvisedLayout l;
      l.gpus = n;
      l.tp = t;
      l.pp = pp;
      l.ppSchedule = schedule;
      l.dataParallel = dp;
      l.why = std::move(why);
      r.layouts.push_back(std::move(l));
    };
    if (n % (t * pp)) // recorded, as fsdp-sweep's rows say it
      return none(0, (pp > 1 ? "pp x tp = " + std::to_string(pp * t)
                             : "tp=" + std::to_string(t)) +
                         " does not divide " + std::to_string(n) + " GPUs");
    int64_t dp = n / (t * pp);
    if (batch % dp) // no layout of this degree: recorded once
      return none(dp, "the global batch of " + std::to_string(batch) +
                          " sequences does not divide over " +
                          std::to_string(dp) + " data-parallel ranks");
    for (const std::string &strategy : o.sweep.strategies) {
      std::vector<int64_t> shardSizes = {0};
      if (strategy == "hybrid-shard") { // one node, two, four, ...
        shardSizes.clear();
        for (int64_t sz = spec.devicesPerNode; sz < dp; sz *= 2)
          if (dp % sz == 0)
            shardSizes.push_back(sz);
      }
      for (int64_t shard : shardSizes)
        for (int64_t bucket : o.sweep.bucketLimits) {
          LayoutFamily g{n,          t,        pp,    schedule, dp,
                         batch / dp, strategy, shard, bucket,   {}};
          for (const std::string &ac : modes)
            addLayout(g, ac);
          groups.push_back(std::move(g));
        }
    }
  };
  const std::vector<std::string> noSchedule = {""};
  for (int64_t n : o.gpus)
    for (int64_t t : o.tpDegrees)
      for (int64_t pp : o.sweep.pipelineParallel)
        for (const std::string &schedule :
             pp > 1 ? o.sweep.ppSchedules : noSchedule)
          addFamilies(n, t, pp, schedule);
  if (!jobs)
    jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = std::max<unsigned>(1, std::min<size_t>(jobs, groups.size()));
  r.jobs = jobs;
  auto cluster = std::make_shared<const ClusterSpec>(spec);
  // The bounds (Advisor.h, step 0), from the model imported once here for
  // the calling thread's searcher too.
  // One MLIR context (and its imported models) per thread.
  std::vector<std::unique_ptr<ModelCache>> caches;
  for (unsigned t = 0; t < jobs; ++t)
    caches.push_back(std::make_unique<ModelCache>(o.sweep));
  ModelCache &mainCache = *caches.front();
  std::string layersError;
  if (!o.extrapolateDepths.empty())
    r.layers = configLayers(o.sweep.configPath, o.sweep.overrides, layersError)
                   .value_or(0);
  ModelBoundFacts facts;
  std::vector<size_t> order =
      boundFamilies(o, spec, batch, mainCache, groups, facts);
  if (facts.sequences > 0)
    r.boundSecondsPerSequence =
        facts.computeSeconds / static_cast<double>(facts.sequences);
  std::string importError;
  const std::map<int64_t, std::string> refusals = tensorParallelRefusals(
      mainCache.get(batch, importError), o.tpDegrees, o.sweep.pipeline);
  Incumbents incumbents(o.top + 1);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> plansRun{0};
  // Runs `work` on every thread, each with its searcher and context.
  auto onThreads = [&](const std::function<void(Searcher &)> &work) {
    auto run = [&](unsigned t) {
      Searcher searcher(o, spec, cluster, *caches[t], facts, incumbents,
                        refusals);
      searcher.plansRun = &plansRun;
      searcher.layers = r.layers;
      work(searcher);
    };
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < jobs; ++t)
      threads.emplace_back(run, t);
    run(0);
    for (std::thread &t : threads)
      t.join();
  };
  onThreads([&](Searcher &searcher) {
    for (size_t i = next++; i < groups.size(); i = next++)
      searcher.search(groups[order[i]], r.layouts);
  });
  planRankedAtFullDepth(o, r, groups, onThreads);
  r.plansRun = plansRun;
  for (const AdvisedLayout &l : r.layouts) {
    r.prunedByMemory += l.pruned == AdvisedLayout::PrunedByMemory;
    r.prunedByStep += l.pruned == AdvisedLayout::PrunedByStep;
  }

  // Rank the fitting layouts per GPU count.
  for (int64_t n : o.gpus) {
    std::vector<AdvisedLayout *> ranked = rankedAt(r, n);
    for (size_t i = 0; i < ranked.size(); ++i) {
      AdvisedLayout &l = *ranked[i];
      l.rank = static_cast<int>(i + 1);
      l.bound = boundOf(l.plan.report);
      if (i + 1 < ranked.size())
        l.runnerUpRatio =
            ranked[i + 1]->plan.report["predicted_step_time_s"].get<double>() /
            l.plan.report["predicted_step_time_s"].get<double>();
    }
  }
  for (const AdvisedLayout &l : r.layouts) {
    r.planSeconds += l.plan.planSeconds;
    for (const Plan &p : l.screens)
      r.planSeconds += p.planSeconds;
  }
  r.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return r;
}
