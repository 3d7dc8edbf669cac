//===- Pipeline.cpp - fsdp-pipeline and pass registration -----------------===//
//
// fsdp-pipeline runs the planning passes as a nested pipeline. Its options
// are the passes' own declarations (Passes.td), parsed once by MLIR's option
// parser into this pass's options; each pass is then created from its
// generated options struct, every field the pipeline option of the same name.
// The values are copied as parsed, so a double arrives exactly (printed
// back as text it would be rounded to 7 digits).
//
//===----------------------------------------------------------------------===//
#include "ClusterSpecCache.h"
#include "GlobOptions.h"
#include "OptionValueError.h"
#include "PipelineChunks.h"
#include "PipelineGather.h"
#include "PipelineReport.h"
#include "PipelineSplit.h"
#include "fsdp/Analysis/PipelineMemory.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "fsdp-pipeline"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPIPELINE
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {
struct FSDPPipelinePass : mlir::fsdp::impl::FSDPPipelineBase<FSDPPipelinePass> {
  using Base::Base;
  explicit FSDPPipelinePass(std::shared_ptr<const ClusterSpec> cluster)
      : givenCluster(std::move(cluster)) {}

  /// A refused value (tp=abc) is an error naming the option and the value
  /// (OptionValueError.h), not llvm::cl's line and an empty error.
  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    return initializeOptionsNamingValues(
        getArgument(), options, tp,
        [&](StringRef o, function_ref<LogicalResult(const Twine &)> onError) {
          return Base::initializeOptions(o, onError);
        },
        errorHandler);
  }

  /// Which part of a stage buildPipeline plans (below).
  enum class Part { Whole, Chunk, Merged };
  enum class Passes { All, BeforeShard, FromShard };

  /// buildPipeline's passes before fsdp-shard: with pp, the stage's split;
  /// tensor parallelism, autodiff (a chunk's plan ends there), the
  /// micro-batches, the optimizer, the units and activation checkpointing.
  void buildBeforeShard(OpPassManager &pm, int64_t stage, Part part) const {
    if (part != Part::Merged) {
      if (stage >= 0) {
        FSDPPipelineSplitOptions o;
        o.pp = pp;
        o.ppChunks = ppChunks;
        o.ppStage = stage;
        o.ppSplit = split;
        o.ppSplitEmbedding = ppSplitEmbedding;
        o.ppSplitLoss = ppSplitLoss;
        pm.addPass(createFSDPPipelineSplit(o));
      }
      pm.addPass(createFSDPTensorParallel(tensorParallelOptions()));
      pm.addPass(createFSDPAutodiff(autodiffOptions()));
      if (part == Part::Chunk)
        return;
    }
    if (stage >= 0) {
      FSDPPipelineMicroBatchOptions o;
      o.microBatches = microBatches;
      o.ppSchedule = ppSchedule;
      o.ppChunks = ppChunks;
      pm.addPass(createFSDPPipelineMicroBatch(o));
    } else {
      pm.addPass(createFSDPMicroBatch(microBatchOptions()));
    }
    pm.addPass(createFSDPOptimizer(optimizerOptions()));
    pm.addPass(createFSDPWrap(wrapOptions()));
    pm.addPass(createFSDPActivationCheckpoint(activationCheckpointOptions()));
  }

  /// The nested pipeline, each FSDP pass created with the pipeline's
  /// values of its options (pipeline-options.mlir checks that every option
  /// reaches its passes, as each pass run alone with it).
  /// With pp = P > 1, `stage` is the pipeline stage to plan (its module
  /// holds a copy of the forward function; docs/pipeline-parallel.md).
  /// `gatherOnce`: the stage's units gathered once per step (pp-gather);
  /// `trial`: a plan of a stage that may be discarded, not checked against
  /// memory-budget by fsdp-memory-plan (runStages decides on its peak).
  /// With pp-chunks > 1 a rank's chunks are planned up to autodiff alone
  /// (Part::Chunk, `stage` the virtual stage), merged
  /// (mergePipelineChunks), then planned from the micro-batches on as one
  /// step (Part::Merged, `stage` the rank's stage). `passes`: all of them,
  /// or those before fsdp-shard (which the gather decision does not
  /// change), or fsdp-shard and those after it (planStage runs the first
  /// part once and each way of gathering on a copy of its result).
  void buildPipeline(OpPassManager &pm, int64_t stage = -1,
                     Part part = Part::Whole, bool gatherOnce = false,
                     bool trial = false, Passes passes = Passes::All) const {
    auto clusterSpecs = std::make_shared<ClusterSpecCache>(givenCluster);
    if (passes != Passes::FromShard)
      buildBeforeShard(pm, stage, part);
    if (part == Part::Chunk || passes == Passes::BeforeShard)
      return;
    FSDPShardOptions shard = shardOptions();
    FSDPCollectivesOptions collectives = collectivesOptions();
    if (stage >= 0) { // each stage is an SPMD step of world-size / P ranks
      shard.worldSize = worldSize / pp;
      // Gathered once per step, the gradients accumulate whole and are
      // reduced once (torch.distributed.pipelining's FSDP stages skip the
      // gradient sync until the last micro-batch's backward).
      if (!accumulate.hasValue())
        shard.accumulate =
            gatherOnce ? Accumulate::Unsharded : Accumulate::Sharded;
      collectives.gatherOncePerStep = gatherOnce;
    }
    pm.addPass(createFSDPShard(shard));
    if (stage >= 0)
      pm.addPass(createFSDPPipelineP2P());
    pm.addPass(createFSDPCollectives(collectives));
    // The step is one block: the greedy driver's folding and dead-op
    // erasure are what it needs; region simplification (a liveness pass
    // over the whole block) changed nothing and was 8% of a 405B pipeline
    // plan (perf).
    GreedyRewriteConfig canonicalize;
    canonicalize.setRegionSimplificationLevel(
        GreedySimplifyRegionLevel::Disabled);
    pm.addPass(createCanonicalizerPass(canonicalize));
    pm.addPass(createFSDPSchedule(scheduleOptions(), clusterSpecs));
    FSDPMemoryPlanOptions memoryPlan = memoryPlanOptions();
    if (trial)
      memoryPlan.memoryBudget = "";
    if (stage >= 0) { // the pipeline's, after all stages (runStages)
      memoryPlan.report = "";
      memoryPlan.trace = "";
    }
    pm.addPass(createFSDPMemoryPlan(memoryPlan, clusterSpecs));
  }

  // The passes' options structs (generated from Passes.td), field by field.
  template <typename T>
  static SmallVector<T> values(const ListOption<T> &option) {
    return SmallVector<T>(option.begin(), option.end());
  }
  FSDPTensorParallelOptions tensorParallelOptions() const {
    FSDPTensorParallelOptions o;
    o.tp = tp;
    o.sequenceParallel = sequenceParallel;
    o.vocabParallel = vocabParallel;
    o.ppScatterGather = ppScatterGather;
    return o;
  }
  FSDPAutodiffOptions autodiffOptions() const {
    FSDPAutodiffOptions o;
    o.frozen = values(frozen);
    o.lossScaling = lossScaling;
    o.attention = attention;
    return o;
  }
  FSDPMicroBatchOptions microBatchOptions() const {
    FSDPMicroBatchOptions o;
    o.microBatches = microBatches;
    return o;
  }
  FSDPOptimizerOptions optimizerOptions() const {
    FSDPOptimizerOptions o;
    o.optimizer = optimizer;
    o.lr = lr;
    o.beta1 = beta1;
    o.beta2 = beta2;
    o.eps = eps;
    o.weightDecay = weightDecay;
    o.lrSchedule = lrSchedule;
    o.warmupSteps = warmupSteps;
    o.decaySteps = decaySteps;
    o.minLr = minLr;
    o.noDecay = values(noDecay);
    return o;
  }
  FSDPWrapOptions wrapOptions() const {
    FSDPWrapOptions o;
    o.policy = policy;
    o.minUnitNumel = minUnitNumel;
    o.unitDepth = unitDepth;
    o.units = values(units);
    return o;
  }
  FSDPActivationCheckpointOptions activationCheckpointOptions() const {
    FSDPActivationCheckpointOptions o;
    o.mode = mode;
    o.acUnits = values(acUnits);
    o.acRegions = acRegions;
    o.fusedSwiglu = fusedSwiglu;
    return o;
  }
  FSDPShardOptions shardOptions() const {
    FSDPShardOptions o;
    o.tp = tp;
    o.worldSize = worldSize;
    o.strategy = strategy;
    o.shardSize = shardSize;
    o.paramDtype = paramDtype;
    o.reduceDtype = reduceDtype;
    o.accumulate = accumulate;
    o.masterWeights = masterWeights;
    o.maxGradNorm = maxGradNorm;
    o.reportGradNorm = reportGradNorm;
    return o;
  }
  FSDPCollectivesOptions collectivesOptions() const {
    FSDPCollectivesOptions o;
    o.reshardAfterForward = reshardAfterForward;
    o.keepGathered = values(keepGathered);
    o.reshardRoot = reshardRoot;
    o.gatherOncePerStep = gatherOncePerStep;
    return o;
  }
  FSDPScheduleOptions scheduleOptions() const {
    FSDPScheduleOptions o;
    o.prefetch = prefetch;
    o.maxInFlight = maxInFlight;
    o.bucketBytes = bucketBytes;
    o.memoryBudget = memoryBudget;
    o.cluster = cluster;
    return o;
  }
  FSDPMemoryPlanOptions memoryPlanOptions() const {
    FSDPMemoryPlanOptions o;
    o.report = report;
    o.memoryBudget = memoryBudget;
    o.cluster = cluster;
    o.trace = trace;
    o.frameworkMemory = frameworkMemory;
    o.frameworkLoss = frameworkLoss;
    o.arenaOffsets = arenaOffsets;
    return o;
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    buildPipeline(pm);
    pm.getDependentDialects(registry);
  }

  /// Options that would change nothing are refused, not ignored (the
  /// passes check the same when they run alone; through the pipeline they
  /// only see values, not which were given).
  LogicalResult checkOptionsTakeEffect() {
    ModuleOp module = getOperation();
    if (optimizer == OptimizerKind::SGD)
      for (const auto *o : {&beta1, &beta2, &eps})
        if (o->hasValue())
          return module.emitError()
                 << "fsdp-pipeline: " << o->getArgStr()
                 << " is an AdamW option; optimizer=sgd has no moments";
    if (tp < 1 || worldSize % tp != 0)
      return module.emitError()
             << "fsdp-pipeline: tp=" << static_cast<int64_t>(tp)
             << " must be >= 1 and divide world-size "
             << static_cast<int64_t>(worldSize)
             << " (world size = tp x the data-parallel size)";
    if (pp < 1 || worldSize % (pp * tp) != 0)
      return module.emitError()
             << "fsdp-pipeline: pp=" << static_cast<int64_t>(pp)
             << " must be >= 1 and pp x tp must divide world-size "
             << static_cast<int64_t>(worldSize)
             << " (world size = pp x the data-parallel size x tp)";
    if (failed(checkPipelineGather()))
      return failure();
    // With tp=1 there is no tensor-parallel group to split: ignored with a
    // warning, as Megatron-LM ignores --sequence-parallel at
    // tensor_model_parallel_size 1 ("Disabling sequence parallelism because
    // tensor model parallelism is disabled", megatron/training/arguments.py,
    // validate_args) and torchtitan applies loss parallelism only with TP
    // (parallelize_llama); a sweep's options may hold them for every degree.
    if (tp == 1)
      for (const auto *o : {&sequenceParallel, &vocabParallel})
        if (o->hasValue())
          module.emitWarning()
              << "fsdp-pipeline: " << o->getArgStr() << "="
              << (static_cast<bool>(*o) ? "true" : "false")
              << " has no effect with tp=1 (no tensor-parallel group): "
                 "ignored";
    // Likewise a region kind with nothing to checkpoint (ac-units without a
    // mode is an error; the advisor passes --pipeline to every AC mode).
    if (mode == ActivationCheckpoint::None && acRegions.hasValue() &&
        acRegions != AcRegions::Unit)
      module.emitWarning()
          << "fsdp-pipeline: ac-regions=" << stringifyAcRegions(acRegions)
          << " has no effect with activation-checkpoint=none (nothing is "
             "checkpointed): ignored";
    if (ppStage.hasValue())
      return module.emitError()
             << "fsdp-pipeline: pp-stage is fsdp-pipeline-split's option; "
                "fsdp-pipeline plans every stage";
    // Given empty ("pp-split="), the list would silently mean the default
    // split: a malformed list, as fsdp-sweep's --tp "".
    if (ppSplit.hasValue() && ppSplit.empty())
      return module.emitError()
             << "fsdp-pipeline: pp-split is empty: give P-1 increasing layer "
                "indices, or leave the option out for the default split";
    if (pp > 1) {
      if (microBatches < pp)
        return module.emitError()
               << "fsdp-pipeline: micro-batches="
               << static_cast<int64_t>(microBatches)
               << " must be >= pp=" << static_cast<int64_t>(pp)
               << " (each stage needs a micro-batch in flight)";
      bool interleaved = ppSchedule == "interleaved-1f1b";
      if (ppSchedule != "gpipe" && ppSchedule != "1f1b" && !interleaved)
        return module.emitError()
               << "fsdp-pipeline: pp-schedule='" << ppSchedule
               << "' is not supported: gpipe, 1f1b or interleaved-1f1b";
      if (ppChunks < 1 || (ppChunks > 1 && !interleaved))
        return module.emitError()
               << "fsdp-pipeline: pp-chunks=" << static_cast<int64_t>(ppChunks)
               << " (virtual stages per rank) must be >= 1, and > 1 only "
                  "with pp-schedule=interleaved-1f1b";
      if (interleaved && ppChunks < 2)
        return module.emitError()
               << "fsdp-pipeline: pp-schedule=interleaved-1f1b needs "
                  "pp-chunks >= 2 virtual stages per rank (with one it is "
                  "1f1b)";
      // Megatron-LM's interleaved order runs the micro-batches in groups of
      // P per chunk (Narayanan et al., SC'21, Sec. 2.2.2).
      if (interleaved && microBatches % pp != 0)
        return module.emitError()
               << "fsdp-pipeline: micro-batches="
               << static_cast<int64_t>(microBatches)
               << " must be a multiple of pp=" << static_cast<int64_t>(pp)
               << " with pp-schedule=interleaved-1f1b";
    } else if (!ppSplit.empty() || ppSchedule.hasValue() ||
               ppChunks.hasValue() || ppSplitEmbedding.hasValue() ||
               ppSplitLoss.hasValue()) {
      return module.emitError()
             << "fsdp-pipeline: pp-split, pp-schedule, pp-chunks, "
                "pp-split-embedding and pp-split-loss need pp > 1";
    }
    if (accumulate.hasValue() && microBatches <= 1)
      return module.emitError()
             << "fsdp-pipeline: accumulate=" << stringifyAccumulate(accumulate)
             << " needs micro-batches > 1 (one micro-batch has nothing to "
                "accumulate)";
    return success();
  }

  /// pp-gather's values; gather-once-per-step is its decision under pp.
  /// pp-plan's: fattest plans one stage and split none; neither is
  /// simulated.
  LogicalResult checkPipelineGather() {
    ModuleOp module = getOperation();
    if (ppPlan != "all" && ppPlan != "fattest" && ppPlan != "split")
      return module.emitError() << "fsdp-pipeline: pp-plan='" << ppPlan
                                << "' is not all, fattest or split";
    if (ppPlan != "all" &&
        (pp <= 1 || ppChunks > 1 || !report.empty() || !trace.empty()))
      return module.emitError()
             << "fsdp-pipeline: pp-plan=" << ppPlan
             << " (a screen: one stage or none planned) needs pp > 1 and "
                "pp-chunks=1, and writes no report= or trace= (the pipeline "
                "is not simulated)";
    if (pp <= 1 && ppGather.hasValue())
      return module.emitError() << "fsdp-pipeline: pp-gather needs pp > 1";
    if (ppGather != "auto" && ppGather != "once-per-step" &&
        ppGather != "per-micro-batch")
      return module.emitError()
             << "fsdp-pipeline: pp-gather='" << ppGather
             << "' is not auto, once-per-step or per-micro-batch";
    if (pp > 1 && gatherOncePerStep.hasValue())
      return module.emitError()
             << "fsdp-pipeline: with pp > 1, whether a stage's units are "
                "gathered once per step is pp-gather's decision; "
                "gather-once-per-step is fsdp-collectives' option";
    return success();
  }

  /// The memory budget a stage's plan must fit (fsdp-schedule's):
  /// memory-budget, else the cluster's device memory; none without either
  /// (or with a bad one, which the passes report).
  std::optional<int64_t> memoryBudgetBytes() {
    if (!memoryBudget.empty())
      return parseByteSize(memoryBudget);
    ClusterSpecCache specs(givenCluster);
    if (!specs.hasCluster(cluster))
      return std::nullopt;
    specs.load(cluster, &getContext());
    if (const ClusterSpec *spec = specs.get())
      return static_cast<int64_t>(spec->memoryBytes);
    return std::nullopt;
  }

  /// oncePerStepLowerBound (PipelineGather.h) of stage `stage`, planned up
  /// to fsdp-shard, with this pipeline's options.
  int64_t oncePerStepBound(ModuleOp stage) const {
    FailureOr<func::FuncOp> fn = getStepFunction(stage);
    if (failed(fn) || strategy == Strategy::NoShard ||
        strategy == Strategy::ShardOptimizer)
      return 0;
    OncePerStepBoundOptions o;
    o.paramBytes = paramDtype == ComputeDtype::Default ? 0
                   : paramDtype == ComputeDtype::F32   ? 4
                                                       : 2;
    o.unshardedAccumulation =
        !accumulate.hasValue() || accumulate == Accumulate::Unsharded;
    o.dataParallel = worldSize / (pp * tp);
    return oncePerStepLowerBound(*fn, o);
  }

  /// Plans stage `s` into `stage` with its units gathered once per step or
  /// per micro-batch (pp-gather; auto: once where the stage's planned peak
  /// fits the memory budget, planned first on a copy, else per micro-batch
  /// where that fits, else the one of the two with the smaller planned
  /// peak). The passes before fsdp-shard do not depend on the decision and
  /// run once. Once per step is not planned where its lower bound
  /// (oncePerStepLowerBound, PipelineGather.h) settles the same decision: over
  /// the budget, and per micro-batch fitting or planned below the bound. The
  /// decision is fsdp.pp_gather on the stage, in the schedule and the report.
  LogicalResult planStage(ModuleOp &stage, int64_t s, Part part) {
    {
      OpPassManager pm(ModuleOp::getOperationName());
      buildPipeline(pm, s, part, false, false, Passes::BeforeShard);
      if (failed(runPipeline(pm, stage)))
        return failure();
    }
    auto plan = [&](ModuleOp m, bool once, bool trial) {
      m->setAttr(kPipelineGatherAttr,
                 StringAttr::get(m.getContext(),
                                 once ? "once-per-step" : "per-micro-batch"));
      OpPassManager pm(ModuleOp::getOperationName());
      buildPipeline(pm, s, part, once, trial, Passes::FromShard);
      return runPipeline(pm, m);
    };
    if (ppGather != "auto")
      return plan(stage, ppGather == "once-per-step", /*trial=*/false);
    std::optional<int64_t> budget = memoryBudgetBytes();
    // At the module's location, not on the module: a diagnostic on an op
    // prints the op into itself unless the context says otherwise, and that
    // was a whole stage per remark (a quarter of fsdp-sweep's advisor; perf).
    auto remark = [&](ModuleOp m) {
      return mlir::emitRemark(m.getLoc())
             << "fsdp-pipeline: stage " << s << " ";
    };
    if (!budget) // nothing to decide: torchtitan's default
      return plan(stage, true, false);
    // Each way planned on a copy, without fsdp-memory-plan's budget check
    // (trial), so that their peaks can be compared.
    using Trial = std::pair<ModuleOp, int64_t>; // the copy, its peak
    auto trialPeak = [&](bool once) -> FailureOr<Trial> {
      OpBuilder b(stage);
      b.setInsertionPointAfter(stage);
      auto copy = cast<ModuleOp>(b.clone(*stage));
      FailureOr<func::FuncOp> fn = failure();
      FailureOr<MemoryPlanRecord> rec = failure();
      if (succeeded(plan(copy, once, /*trial=*/true)) &&
          succeeded(fn = getStepFunction(copy)))
        rec = MemoryPlanRecord::get(*fn);
      if (failed(rec)) {
        copy.erase();
        return failure();
      }
      return std::make_pair(copy, rec->peakBytes);
    };
    auto keep = [&](ModuleOp chosen) {
      stage.erase();
      stage = chosen;
    };
    // Neither fits. Re-gathering per micro-batch is not a fallback that
    // always saves memory: under shard-grad-op each micro-batch in flight
    // keeps its own gathered copy until its backward (Llama 3's 405B layout
    // planned 216 GiB per micro-batch against 138 GiB once per step), and it
    // multiplies the all-gathers by 2m. So the smaller plan is kept, once per
    // step on a tie; an explicit memory-budget still fails it (planned again
    // with fsdp-memory-plan's check, which names the peak). `oncePeak` is the
    // once-per-step plan's peak, or its bound ("at least") when not planned.
    auto keepSmaller = [&](std::optional<Trial> onceTrial, int64_t oncePeak,
                           Trial perTrial) {
      auto [perModule, perPeak] = perTrial;
      bool keepOnce = onceTrial && oncePeak <= perPeak;
      remark(stage) << "gathers its units "
                    << (keepOnce ? "once per step" : "per micro-batch")
                    << ": neither plan fits the memory budget of " << *budget
                    << " bytes per rank (once per step "
                    << (onceTrial ? "" : "at least ") << oncePeak
                    << ", per micro-batch " << perPeak
                    << "); the one with the smaller peak";
      if (!memoryBudget.empty()) {
        if (onceTrial)
          onceTrial->first.erase();
        perModule.erase();
        return plan(stage, keepOnce, /*trial=*/false);
      }
      if (onceTrial)
        (keepOnce ? perModule : onceTrial->first).erase();
      keep(keepOnce ? onceTrial->first : perModule);
      return success();
    };
    auto perMicroBatchFits = [&](ModuleOp perModule, int64_t oncePeak,
                                 bool planned) {
      keep(perModule);
      remark(stage) << "gathers its units per micro-batch: once per step "
                       "would need "
                    << (planned ? "" : "at least ") << oncePeak
                    << " bytes per rank, over the memory budget of " << *budget;
      return success();
    };
    std::optional<Trial> perTrial;
    if (int64_t bound = part == Part::Whole ? oncePerStepBound(stage) : 0;
        bound > *budget) {
      FailureOr<Trial> per = trialPeak(false);
      if (failed(per))
        return failure();
      if (per->second <= *budget)
        return perMicroBatchFits(per->first, bound, /*planned=*/false);
      if (bound > per->second)
        return keepSmaller(std::nullopt, bound, *per);
      perTrial = *per; // once per step may still be the smaller
    }
    auto once = trialPeak(true);
    if (failed(once)) {
      if (perTrial)
        perTrial->first.erase();
      return failure();
    }
    auto [onceModule, oncePeak] = *once;
    if (oncePeak <= *budget) { // (never with a bound over the budget)
      if (perTrial)
        perTrial->first.erase();
      keep(onceModule);
      remark(stage) << "gathers its units once per step (planned peak "
                    << oncePeak
                    << " bytes per rank, within the memory budget of "
                    << *budget << ")";
      return success();
    }
    if (!perTrial) {
      FailureOr<Trial> per = trialPeak(false);
      if (failed(per)) {
        onceModule.erase();
        return failure();
      }
      perTrial = *per;
    }
    if (perTrial->second <= *budget) {
      onceModule.erase();
      return perMicroBatchFits(perTrial->first, oncePeak, /*planned=*/true);
    }
    return keepSmaller(*once, oncePeak, *perTrial);
  }

protected:
  void runOnOperation() override {
    if (failed(checkOptionsTakeEffect()))
      return signalPassFailure();
    // Before the pipeline split prices the layers (fsdp-autodiff marks the
    // same again).
    markAttentionImpl(getOperation(), stringifyAttentionImpl(attention));
    if (pp > 1)
      return runStages();
    OpPassManager pm(ModuleOp::getOperationName());
    buildPipeline(pm);
    LLVM_DEBUG({
      llvm::dbgs() << "fsdp-pipeline runs ";
      pm.printAsTextualPipeline(llvm::dbgs());
      llvm::dbgs() << "\n";
    });
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }

  /// Pipeline parallelism: the module's contents move into P nested
  /// modules @stage<s>, each planned by the pipeline for its stage (MPMD
  /// across stages, SPMD within one); fsdp-translate writes one program per
  /// stage.
  void runStages() {
    ModuleOp module = getOperation();
    // Each of the pp x pp-chunks (virtual) stages needs a layer, hence a
    // parameter: refuse more before the module is cloned once per stage
    // (fsdp-pipeline-split names the layers; pp-chunks=100000 took 28 s
    // and 3.3 GB to reach its diagnostic, 10^7 did not).
    int64_t params = 0;
    module.walk([&](func::FuncOp fn) {
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        params += fn.getArgAttr(i, nn::kParamAttr) != nullptr;
    });
    if (pp > params || ppChunks > params || pp * ppChunks > params) {
      module.emitError() << "fsdp-pipeline: pp=" << static_cast<int64_t>(pp)
                         << " x pp-chunks=" << static_cast<int64_t>(ppChunks)
                         << " stages exceed the " << params
                         << " parameters of the model (each stage needs at "
                            "least one layer)";
      return signalPassFailure();
    }
    if (failed(chooseSplit()))
      return signalPassFailure();
    if (ppPlan == "split") // the split alone, recorded on the module
      return;
    SmallVector<Operation *> body;
    for (Operation &op : module.getBody()->getOperations())
      body.push_back(&op);
    OpBuilder b(module.getBodyRegion());
    // pp-plan=fattest: the one stage the split's estimate puts highest.
    const bool screen = ppPlan == "fattest";
    const int64_t first =
        screen ? llvm::max_element(splitPeaks) - splitPeaks.begin() : 0;
    const int64_t last = screen ? first + 1 : static_cast<int64_t>(pp);
    SmallVector<ModuleOp> stages;
    // With pp-chunks = v > 1, a module per chunk inside the stage's.
    SmallVector<SmallVector<ModuleOp>> chunks(pp);
    for (int64_t s = first; s < last; ++s) {
      auto stage =
          ModuleOp::create(b, module.getLoc(), "stage" + std::to_string(s));
      auto copyInto = [&](ModuleOp into) {
        OpBuilder inner(into.getBodyRegion());
        for (Operation *op : body)
          inner.clone(*op);
      };
      if (ppChunks > 1) {
        OpBuilder nested(stage.getBodyRegion());
        for (int64_t i = 0; i < ppChunks; ++i) {
          chunks[s].push_back(ModuleOp::create(nested, module.getLoc(),
                                               "chunk" + std::to_string(i)));
          copyInto(chunks[s].back());
        }
      } else {
        copyInto(stage);
      }
      stages.push_back(stage);
    }
    for (Operation *op : body)
      op->erase();
    module->setAttr(kPipelineStagesAttr, b.getI64IntegerAttr(pp));
    module->setAttr(kWorldSizeAttr, b.getI64IntegerAttr(worldSize));
    // frozen, no-decay, ac-units and keep-gathered may name what only some
    // stages hold; each stage records what it lacks (GlobOptions.h).
    PipelineUnmatched unmatched;
    for (auto [k, stage] : llvm::enumerate(stages)) {
      const int64_t si = first + static_cast<int64_t>(k);
      for (auto [i, chunk] : llvm::enumerate(chunks[si])) {
        OpPassManager pm(ModuleOp::getOperationName());
        buildPipeline(pm, si + static_cast<int64_t>(i) * pp, Part::Chunk);
        if (failed(runPipeline(pm, chunk)))
          return signalPassFailure();
        unmatched.collect(chunk);
      }
      if (!chunks[si].empty() && failed(mergePipelineChunks(stage, chunks[si])))
        return signalPassFailure();
      if (failed(planStage(stage, si,
                           chunks[si].empty() ? Part::Whole : Part::Merged)))
        return signalPassFailure();
      unmatched.collect(stage);
    }
    if (screen) { // the other stages may hold what a glob names
      module->setAttr(kPipelineScreenAttr, b.getI64IntegerAttr(first));
      return;
    }
    if (failed(unmatched.check(module)))
      return signalPassFailure();
    ClusterSpecCache specs(givenCluster);
    if (failed(writePipelineOutputs(module, specs, cluster, report, trace)))
      return signalPassFailure();
  }

  /// The split every stage is cut by (`split`): pp-split, else
  /// planPipelineSplit's by the cluster's predicted time and the memory
  /// budget; recorded on the module for the report (kPipelineSplitAttr).
  LogicalResult chooseSplit() {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> fn = getStepFunction(module);
    if (failed(fn))
      return failure();
    PipelineSplitConfig cfg;
    cfg.pp = pp;
    cfg.chunks = ppChunks;
    cfg.microBatches = microBatches;
    cfg.schedule = ppSchedule;
    ClusterSpecCache specs(givenCluster);
    if (specs.hasCluster(cluster)) {
      specs.load(cluster, &getContext());
      cfg.spec = specs.get(); // unreadable: fsdp-schedule says why
    }
    cfg.budget = memoryBudgetBytes();
    cfg.budgetGiven = !memoryBudget.empty();
    cfg.tp = tp;
    cfg.dataParallel = worldSize / (pp * tp);
    cfg.shardGroup = strategy == Strategy::NoShard ? 1
                     : strategy == Strategy::HybridShard && shardSize > 0
                         ? static_cast<int64_t>(shardSize)
                         : cfg.dataParallel;
    cfg.shardParams =
        strategy != Strategy::NoShard && strategy != Strategy::ShardGradOp;
    cfg.optimizerStates = optimizer == OptimizerKind::AdamW ? 2 : 0;
    cfg.mode = mode;
    cfg.ends = {ppSplitEmbedding, ppSplitLoss};
    cfg.paramDtypeBytes = paramDtype == ComputeDtype::F32       ? 4
                          : paramDtype == ComputeDtype::Default ? 0
                                                                : 2;
    FailureOr<PipelineSplitPlan> plan =
        planPipelineSplit(*fn, cfg, values(ppSplit));
    if (failed(plan))
      return failure();
    split = plan->boundaries;
    splitPeaks = plan->peakBytes;
    module->setAttr(kPipelineSplitAttr, plan->toAttr(&getContext()));
    return success();
  }

  std::shared_ptr<const ClusterSpec> givenCluster;
  SmallVector<int64_t> split;
  /// The split's estimated peak bytes per rank of each stage.
  SmallVector<int64_t> splitPeaks;
};
} // namespace

std::unique_ptr<Pass>
mlir::fsdp::createFSDPPipeline(StringRef options, std::string &error,
                               std::shared_ptr<const ClusterSpec> cluster) {
  auto pass = std::make_unique<FSDPPipelinePass>(std::move(cluster));
  if (failed(pass->initializeOptions(options, [&](const Twine &message) {
        error = message.str();
        return failure();
      })))
    return nullptr;
  return pass;
}

void mlir::fsdp::registerAllFSDPPasses() { registerFSDPPasses(); }
