//===- MemoryPlanPass.cpp - fsdp-memory-plan: record, report, budget ------===//
#include "ClusterSpecCache.h"
#include "PipelineReport.h"
#include "fsdp/Analysis/FrameworkMemory.h"
#include "fsdp/Analysis/MemoryPlanRecord.h"
#include "fsdp/Analysis/PipelineMemory.h"
#include "fsdp/Analysis/PipelineSim.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPMEMORYPLAN
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

namespace {
struct FSDPMemoryPlanPass
    : ClusterSpecPass<mlir::fsdp::impl::FSDPMemoryPlanBase<FSDPMemoryPlanPass>,
                      FSDPMemoryPlanOptions> {
  using ClusterSpecPass::ClusterSpecPass;

  /// What would bring the peak under the budget, by the dominant class.
  static std::string advice(StringRef cls, const json &r, int64_t over) {
    std::optional<Strategy> strategy =
        symbolizeStrategy(r["strategy"].get<std::string>());
    int64_t world = r["world_size"], state = r["per_rank"]["model_state_bytes"];
    std::string s;
    if (cls == "param_shard" || cls == "opt_state" || cls == "grad_shard") {
      if (strategy != Strategy::FullShard && strategy != Strategy::HybridShard)
        s += "strategy=full-shard shards parameters, gradients and optimizer "
             "state; ";
      // Model state scales as 1/N when fully sharded.
      if (state > over) {
        int64_t n =
            (int64_t)std::ceil((double)world * state / (double)(state - over));
        s += "about world-size=" + std::to_string(n) +
             " ranks would fit the model state";
      } else {
        s += "the model state alone exceeds what sharding over more ranks can "
             "save";
      }
    } else if (cls == "gathered_param" || cls == "comm_buffer") {
      s = "smaller units (policy=block or units=...) or "
          "reshard-after-forward=true";
    } else {
      s = "a smaller micro-batch (activations scale with the per-rank batch: a "
          "smaller "
          "global batch or more ranks)";
    }
    return s;
  }

  /// "N bytes (x.x%)" over `budget` bytes; the share left out for a zero
  /// budget, "<0.1%" below a tenth of a percent.
  static std::string overBudget(int64_t over, int64_t budget) {
    std::string text = std::to_string(over) + " bytes";
    if (budget <= 0)
      return text;
    double pct =
        100.0 * static_cast<double>(over) / static_cast<double>(budget);
    char buf[32];
    snprintf(buf, sizeof(buf), pct < 0.05 ? " (<0.1%%)" : " (%.1f%%)", pct);
    return text + buf;
  }

  /// Each planned stage's recorded peak (bytes per rank of that stage)
  /// against `budget`: an error naming every stage over it. The ranks of a
  /// pipeline hold one stage each, so the budget is per stage, as
  /// fsdp-pipeline checks it while planning.
  static LogicalResult checkStagesFit(ArrayRef<ModuleOp> stages,
                                      int64_t budget) {
    bool fits = true;
    for (ModuleOp stage : stages) {
      FailureOr<func::FuncOp> fn = getStepFunction(stage);
      if (failed(fn))
        return failure();
      FailureOr<MemoryPlanRecord> rec = MemoryPlanRecord::get(*fn);
      if (failed(rec))
        return failure();
      if (rec->peakBytes <= budget)
        continue;
      fits = false;
      auto index = stage->getAttrOfType<IntegerAttr>(kPipelineStageAttr);
      // At the stage's location: on the op, a diagnostic prints the op.
      mlir::emitError(stage.getLoc())
          << "fsdp-memory-plan: pipeline stage "
          << (index ? index.getInt() : -1) << " needs " << rec->peakBytes
          << " bytes per rank at its peak, "
          << overBudget(rec->peakBytes - budget, budget)
          << " over the memory budget of " << budget
          << " bytes (its report: fsdp-pipeline's report= stages[], or this "
             "pass on the stage alone)";
    }
    return success(fits);
  }

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkEveryStagePlanned(module)))
      return signalPassFailure();
    const bool hasCluster = clusterSpecs->hasCluster(cluster);
    if (!trace.empty() && !hasCluster) {
      module.emitError()
          << "fsdp-memory-plan: trace= needs cluster=SPEC.json (the trace is "
             "the simulated step on that cluster)";
      return signalPassFailure();
    }
    std::optional<int64_t> budget;
    if (!memoryBudget.empty()) {
      budget = parseByteSize(memoryBudget);
      if (!budget) {
        module.emitError()
            << "fsdp-memory-plan: memory-budget must be a byte count such as "
               "80GiB, 1.5GB or 1000000, got '"
            << memoryBudget << "'";
        return signalPassFailure();
      }
    }
    std::optional<FrameworkMemory> framework =
        parseFrameworkMemory(frameworkMemory);
    if (!framework) {
      module.emitError() << "fsdp-memory-plan: framework-memory must be "
                            "fsdp-run, torch-eager or torch-compile, got '"
                         << frameworkMemory << "'";
      return signalPassFailure();
    }
    if (frameworkLoss != "torch" && frameworkLoss != "fused") {
      module.emitError() << "fsdp-memory-plan: framework-loss must be torch or "
                            "fused, got '"
                         << frameworkLoss << "'";
      return signalPassFailure();
    }
    if (frameworkLoss == "fused" && *framework == FrameworkMemory::FsdpRun) {
      module.emitError()
          << "fsdp-memory-plan: framework-loss=fused changes nothing without "
             "framework-memory=torch-eager or torch-compile";
      return signalPassFailure();
    }
    bool pipelined =
        !pipelineStages(module).empty() || module->hasAttr(kPipelineStageAttr);
    if (*framework != FrameworkMemory::FsdpRun && pipelined) {
      module.emitError() << "fsdp-memory-plan: framework-memory="
                         << frameworkMemory
                         << " is not modelled for pipeline-parallel steps "
                            "(pp > 1); use framework-memory=fsdp-run";
      return signalPassFailure();
    }
    // A planned pipeline (each stage's plan recorded): its stages simulated
    // against each other.
    if (SmallVector<ModuleOp> stages = pipelineStages(module);
        !stages.empty()) {
      // Reported here too when no report or trace would read it.
      if (hasCluster && !clusterSpecs->get()) {
        module.emitError() << "fsdp-memory-plan: " << clusterSpecs->getError();
        return signalPassFailure();
      }
      if (failed(writePipelineOutputs(module, *clusterSpecs, cluster, report,
                                      trace)) ||
          (budget && failed(checkStagesFit(stages, *budget))))
        signalPassFailure();
      return;
    }
    // The plan is computed here, once, and recorded on the step: the report
    // below, the JSON schedule and fsdp-sweep read it from there.
    FailureOr<func::FuncOp> fn = getStepFunction(module);
    if (failed(fn))
      return signalPassFailure();
    FailureOr<MemoryPlan> plan = MemoryPlan::compute(*fn, arenaOffsets);
    if (failed(plan))
      return signalPassFailure();
    MemoryPlanRecord::of(*plan).recordOn(*fn);
    // A pipeline stage is simulated with the other stages once all are
    // planned (fsdp-pipeline's writePipelineOutputs); alone it would be
    // simulated for nothing, so without a report or a budget to check its
    // report is not built.
    const bool stage = module->hasAttr(kPipelineStageAttr);
    if (report.empty() && !budget && (!hasCluster || stage))
      return;
    FailureOr<json> r = buildPlanReport(module);
    if (failed(r))
      return signalPassFailure();
    if (failed(addFrameworkMemoryToReport(*r, *fn, *framework,
                                          frameworkLoss == "fused")))
      return signalPassFailure();
    if (hasCluster && !stage) {
      const ClusterSpec *spec = clusterSpecs->get();
      if (!spec) {
        module.emitError() << "fsdp-memory-plan: " << clusterSpecs->getError();
        return signalPassFailure();
      }
      std::string err;
      Simulator sim(*spec);
      FailureOr<SimResult> res = sim.run(module);
      if (failed(res))
        return signalPassFailure();
      addSimulationToReport(*r, *res, spec->name);
      addAllocatorToReport(*r, *spec);
      if (!trace.empty()) {
        auto out = openOutputFile(trace, &err);
        if (!out) {
          module.emitError()
              << "fsdp-memory-plan: cannot write the trace: " << err;
          return signalPassFailure();
        }
        out->os() << chromeTrace(*res, spec->name).dump(1) << "\n";
        out->keep();
      }
    }
    if (!report.empty()) {
      std::string err;
      auto out = openOutputFile(report, &err);
      if (!out) {
        module.emitError() << "fsdp-memory-plan: cannot write the report: "
                           << err;
        return signalPassFailure();
      }
      if (report == "-")
        out->os() << formatPlanReport(*r);
      else
        out->os() << r->dump(2) << "\n";
      out->keep();
    }
    int64_t peak = (*r)["per_rank"]["peak_bytes"];
    if (budget && peak > *budget) {
      std::string dominant;
      int64_t most = -1;
      for (auto &[cls, bytes] : (*r)["per_rank"]["peak_bytes_by_class"].items())
        if (bytes.get<int64_t>() > most) {
          most = bytes.get<int64_t>();
          dominant = cls;
        }
      int64_t over = peak - *budget;
      InFlightDiagnostic diag = module.emitError();
      diag << "the plan needs " << peak << " bytes per rank at its peak, "
           << overBudget(over, *budget) << " over the memory budget of "
           << *budget << " bytes";
      if (!(*r)["per_rank"]["peak_at"].is_null())
        diag << " (at instruction #"
             << (*r)["per_rank"]["peak_instruction"].get<int64_t>() << " "
             << (*r)["per_rank"]["peak_at"].get<std::string>() << ")";
      diag << "; the largest class there is " << dominant << " with " << most
           << " bytes; to fit: " << advice(dominant, *r, over);
      return signalPassFailure();
    }
  }
};
} // namespace

std::unique_ptr<Pass>
mlir::fsdp::createFSDPMemoryPlan(FSDPMemoryPlanOptions options,
                                 std::shared_ptr<ClusterSpecCache> specs) {
  return std::make_unique<FSDPMemoryPlanPass>(std::move(options),
                                              std::move(specs));
}
