//===- Sweep.cpp - Plans and simulates a grid of FSDP configurations ------===//
#include "fsdp/Sweep/Sweep.h"
#include "fsdp/Analysis/PipelineSim.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Import/Import.h"
#include "fsdp/InitAll.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::sweep;
using json = nlohmann::ordered_json;

FailureOr<PipelineBuilder>
sweep::parsePipeline(llvm::StringRef options,
                     std::shared_ptr<const ClusterSpec> cluster,
                     std::string &error) {
  std::string msg;
  if (!createFSDPPipeline(options, msg, cluster)) {
    error = llvm::StringRef(msg).trim().str();
    return failure();
  }
  // fsdp-schedule's prefetch=auto picks its schedule with the cost model on
  // the cluster (and within its device memory) as fsdp-opt's cluster= does.
  // A sweep's plans are never run: planned without the arena's offsets
  // (fsdp-memory-plan's arena-offsets), which change no number it reads.
  return PipelineBuilder([text = "arena-offsets=false " + options.str(),
                          cluster](PassManager &pm) {
    std::string unused; // the options parsed above
    pm.addPass(createFSDPPipeline(text, unused, cluster));
  });
}

bool sweep::pipelineSets(llvm::StringRef options, llvm::StringRef key) {
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(options, words);
  return llvm::any_of(words,
                      [&](llvm::StringRef w) { return w.starts_with(key); });
}

std::string SweepOptions::attentionImpl() const {
  if (!attention.empty())
    return attention;
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(pipeline, words);
  for (llvm::StringRef w : words)
    if (w.consume_front("attention="))
      return w.str();
  return "flash";
}

std::string Plan::policy() const {
  if (!minUnitNumel)
    return "block";
  int64_t mantissa = minUnitNumel, exponent = 0;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  return "size>=" + (exponent >= 3 ? std::to_string(mantissa) + "e" +
                                         std::to_string(exponent)
                                   : std::to_string(minUnitNumel));
}

std::vector<Plan> sweep::makePlans(const SweepOptions &o,
                                   const ClusterSpec &spec,
                                   int64_t &skippedHybrid) {
  std::vector<Plan> plans;
  auto cluster = std::make_shared<const ClusterSpec>(spec);
  auto addPlan = [&](int64_t n, int64_t tp, int64_t pp,
                     const std::string &schedule, const std::string &strategy,
                     int64_t minNumel, int64_t bucket, const std::string &ac) {
    Plan p;
    p.worldSize = n;
    p.tp = tp;
    p.pp = pp;
    p.ppSchedule = schedule;
    p.strategy = strategy;
    p.minUnitNumel = minNumel;
    p.bucketBytes = bucket;
    p.activationCheckpoint = ac;
    std::string opts =
        "world-size=" + std::to_string(n) + " strategy=" + strategy;
    if (strategy == "hybrid-shard") {
      p.shardSize = spec.devicesPerNode;
      opts += " shard-size=" + std::to_string(p.shardSize);
    }
    opts += minNumel ? " policy=size min-unit-numel=" + std::to_string(minNumel)
                     : std::string(" policy=block");
    if (bucket >= 0)
      opts += " bucket-bytes=" + std::to_string(bucket);
    if (!ac.empty())
      opts += " activation-checkpoint=" + ac;
    opts += " param-dtype=" + o.paramDtype;
    if (!o.attention.empty())
      opts += " attention=" + o.attention;
    if (o.tensorParallelGiven)
      opts += " tp=" + std::to_string(tp);
    if (pp > 1) {
      opts += " pp=" + std::to_string(pp) + " pp-schedule=" + schedule;
      if (llvm::StringRef(" " + o.pipeline).find(" micro-batches=") ==
          llvm::StringRef::npos)
        opts += " micro-batches=" + std::to_string(o.microBatch * pp);
    }
    if (!o.pipeline.empty())
      opts += " " + o.pipeline;
    p.optionString = opts + " cluster=" + o.clusterPath;
    if (n % (tp * pp)) {
      p.error = (pp > 1 ? "pp x tp = " + std::to_string(pp * tp)
                        : "tp=" + std::to_string(tp)) +
                " does not divide world size " + std::to_string(n);
      plans.push_back(std::move(p));
      return;
    }
    std::string msg;
    FailureOr<PipelineBuilder> pipeline = parsePipeline(opts, cluster, msg);
    if (failed(pipeline))
      p.error = "options: " + msg;
    else
      p.pipeline = std::move(*pipeline);
    plans.push_back(std::move(p));
  };
  skippedHybrid = 0;
  std::vector<std::string> modes = o.activationCheckpoints;
  if (modes.empty())
    modes.push_back(""); // not set
  for (int64_t n : o.worldSizes)
    for (int64_t tp : o.tensorParallel)
      for (int64_t pp : o.pipelineParallel)
        for (const std::string &schedule :
             pp > 1 ? o.ppSchedules : std::vector<std::string>{""})
          for (const std::string &s : o.strategies) {
            if (s == "hybrid-shard" && n <= spec.devicesPerNode) {
              ++skippedHybrid;
              continue;
            }
            for (int64_t minNumel : o.unitNumels)
              for (int64_t bucket : o.bucketLimits)
                for (const std::string &ac : modes)
                  addPlan(n, tp, pp, schedule, s, minNumel, bucket, ac);
          }
  return plans;
}

namespace {

/// Largest and mean bytes one all-gather of the planned step function moves
/// (its gathered buffer: a unit's flat parameter, or a bucket of units); for a
/// step without all-gathers (no-shard), one all-reduce (its flat gradient).
/// A pipeline's: over every stage's step.
void measureBuckets(ModuleOp module, Operation *fn, Plan &plan) {
  std::vector<int64_t> gathers, allReduces;
  fn->walk([&](Operation *op) {
    if (auto ag = dyn_cast<AllGatherOp>(op))
      gathers.push_back(bufferBytes(ag.getResult()));
    else if (auto ar = dyn_cast<AllReduceOp>(op))
      allReduces.push_back(bufferBytes(ar.getInput()));
  });
  plan.units = 0;
  module.walk([&](UnitOp) { ++plan.units; });
  const std::vector<int64_t> &sizes = gathers.empty() ? allReduces : gathers;
  int64_t total = 0;
  for (int64_t bytes : sizes) {
    plan.bucketMaxBytes = std::max(plan.bucketMaxBytes, bytes);
    total += bytes;
  }
  if (!sizes.empty())
    plan.bucketMeanBytes = total / static_cast<int64_t>(sizes.size());
}

} // namespace

void sweep::runPlan(MLIRContext &ctx, ModuleOp model, const ClusterSpec &spec,
                    Plan &plan) {
  auto start = std::chrono::steady_clock::now();
  std::string firstError;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
      firstError = diag.str();
    return success();
  });
  auto fail = [&](const char *what) {
    plan.error = firstError.empty() ? std::string(what) : firstError;
  };
  OwningOpRef<ModuleOp> module = model.clone();
  PassManager pm(&ctx);
  // Verified once, after the pipeline, rather than after each of its passes
  // and each stage's nested pipeline (18% of a 405B pipeline plan, half of
  // it without the arena; perf); the lit tests verify after every pass.
  pm.enableVerifier(false);
  plan.pipeline(pm);
  if (failed(pm.run(*module)))
    return fail("the pipeline failed");
  if (failed(verify(*module)))
    return fail("the planned step does not verify");
  if (auto screened =
          (*module)->getAttrOfType<IntegerAttr>(kPipelineScreenAttr)) {
    // pp-plan=fattest: the one stage's plan and the device bytes it needs
    // (no step: the pipeline is not simulated).
    SmallVector<ModuleOp> stages = pipelineStages(*module);
    FailureOr<json> report = failure();
    if (stages.size() == 1)
      report = buildPlanReport(stages.front());
    if (failed(report))
      return fail("the screened stage's report could not be built");
    addAllocatorToReport(*report, spec);
    (*report)["pipeline_screen_stage"] = screened.getInt();
    (*report)["pipeline"]["split"] = pipelineSplitReport(*module);
    plan.report = std::move(*report);
  } else if (holdsSplitOnly(*module)) {
    // pp-plan=split: the split alone.
    plan.report = {{"pipeline", {{"split", pipelineSplitReport(*module)}}}};
  } else if (!pipelineStages(*module).empty()) {
    // The stages simulated against each other (PipelineSim.h).
    FailureOr<json> report = buildPipelineReport(*module, &spec);
    if (failed(report))
      return fail("the pipeline's report or simulation failed");
    plan.report = std::move(*report);
    measureBuckets(*module, *module, plan);
  } else {
    FailureOr<json> report = buildPlanReport(*module);
    if (failed(report))
      return fail("the report could not be built");
    FailureOr<SimResult> sim = Simulator(spec).run(*module);
    if (failed(sim))
      return fail("the simulation failed");
    addSimulationToReport(*report, *sim, spec.name);
    addAllocatorToReport(*report, spec);
    plan.report = std::move(*report);
    measureBuckets(*module, *getStepFunction(*module), plan);
  }
  plan.planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}

namespace {

/// A worker: one MLIR context, the model of the world size it is on, and the
/// next plan taken from `next` until none is left (plans are ordered by world
/// size and tensor-parallel degree, so a worker imports a model about once
/// per pair). The model gets o.overrides' batch per data-parallel rank × the
/// data-parallel size N/T.
void worker(std::vector<Plan> &plans, std::atomic<size_t> &next,
            const SweepOptions &o, const ClusterSpec &spec) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  const fsdp_import::Overrides &base = o.overrides;
  int64_t dataParallel = 0;
  OwningOpRef<ModuleOp> model;
  std::string importError;
  for (size_t i = next++; i < plans.size(); i = next++) {
    Plan &plan = plans[i];
    if (!plan.error.empty()) // its options did not parse
      continue;
    if (plan.worldSize / plan.tp != dataParallel) {
      dataParallel = plan.worldSize / plan.tp;
      fsdp_import::Overrides ov = base;
      ov.batch = *base.batch * dataParallel;
      importError.clear();
      model = fsdp_import::importConfig(&ctx, o.configPath, ov, importError);
      std::string overflow;
      if (model && failed(fsdp_import::checkSizes(*model, overflow))) {
        importError = o.configPath + ": " + overflow;
        model = nullptr;
      }
    }
    if (!model) {
      plan.error = "import: " + importError;
      continue;
    }
    runPlan(ctx, *model, spec, plan);
  }
}

} // namespace

unsigned sweep::runPlans(std::vector<Plan> &plans, unsigned jobs,
                         const SweepOptions &o, const ClusterSpec &spec) {
  if (!jobs)
    jobs = std::max(1u, std::thread::hardware_concurrency());
  jobs = std::max<unsigned>(1, std::min<size_t>(jobs, plans.size()));
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t)
    threads.emplace_back(worker, std::ref(plans), std::ref(next), std::cref(o),
                         std::cref(spec));
  worker(plans, next, o, spec);
  for (std::thread &t : threads)
    t.join();
  // Rows that fit only with activation checkpointing: the plan of the same
  // world size, strategy, policy and bucket limit with activation-
  // checkpoint=none does not fit.
  auto fits = [&](const Plan &p) {
    return p.error.empty() && deviceBytes(p.report) <= spec.memoryBytes;
  };
  for (Plan &p : plans) {
    if (p.activationCheckpoint.empty() || p.activationCheckpoint == "none" ||
        !fits(p))
      continue;
    for (const Plan &q : plans)
      if (q.activationCheckpoint == "none" && q.worldSize == p.worldSize &&
          q.tp == p.tp && q.pp == p.pp && q.ppSchedule == p.ppSchedule &&
          q.strategy == p.strategy && q.minUnitNumel == p.minUnitNumel &&
          q.bucketBytes == p.bucketBytes && q.error.empty() && !fits(q))
        p.fitsOnlyWithAC = true;
  }
  return jobs;
}

LogicalResult sweep::inspectModel(const SweepOptions &o, int64_t &params,
                                  int64_t &seq, std::string &error) {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> model =
      fsdp_import::importConfig(&ctx, o.configPath, o.overrides, error);
  if (!model)
    return failure();
  params = fsdp_import::countParams(*model);
  // The `nn.data = "tokens"` argument of the forward function, [B, T] i32.
  Value tokens;
  if (FailureOr<func::FuncOp> fn = getStepFunction(*model); succeeded(fn))
    for (unsigned a = 0; a < fn->getNumArguments() && !tokens; ++a)
      if (auto data = fn->getArgAttrOfType<StringAttr>(a, nn::kDataAttr);
          data && data.getValue() == "tokens")
        tokens = fn->getArgument(a);
  if (!tokens) {
    error = o.configPath + ": the imported model has no tokens argument";
    return failure();
  }
  seq = cast<RankedTensorType>(tokens.getType()).getDimSize(1);
  return success();
}
