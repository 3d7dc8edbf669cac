//===- PipelineReport.cpp - fsdp-pipeline's report and trace for pp > 1 ---===//
//
// The stages are planned one by one (fsdp-pipeline's runStages) and only
// then simulated against each other, so the report and the trace of a
// pipeline are written here, once, instead of by each stage's
// fsdp-memory-plan.
//
//===----------------------------------------------------------------------===//
#include "PipelineReport.h"
#include "fsdp/Analysis/PipelineSim.h"
#include "fsdp/Analysis/PlanReport.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cstdio>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

static LogicalResult writeFile(ModuleOp module, StringRef path, StringRef what,
                               const std::string &text) {
  std::string err;
  auto out = openOutputFile(path, &err);
  if (!out)
    return module.emitError()
           << "fsdp-pipeline: cannot write the " << what << ": " << err;
  out->os() << text;
  out->keep();
  return success();
}

LogicalResult mlir::fsdp::writePipelineOutputs(ModuleOp module,
                                               ClusterSpecCache &specs,
                                               StringRef cluster,
                                               StringRef report,
                                               StringRef trace) {
  if (!trace.empty() && !specs.hasCluster(cluster))
    return module.emitError()
           << "fsdp-memory-plan: trace= needs cluster=SPEC.json (the trace is "
              "the simulated step on that cluster)";
  if (report.empty() && trace.empty())
    return success();
  const ClusterSpec *spec = nullptr;
  if (specs.hasCluster(cluster)) {
    specs.load(cluster, module.getContext());
    if (!(spec = specs.get()))
      return module.emitError() << "fsdp-memory-plan: " << specs.getError();
  }
  PipelineSimResult sim;
  FailureOr<json> r = buildPipelineReport(module, spec, &sim);
  if (failed(r))
    return failure();
  if (!trace.empty() &&
      failed(writeFile(module, trace, "trace",
                       pipelineChromeTrace(sim, spec->name).dump(1) + "\n")))
    return failure();
  if (report.empty())
    return success();
  if (report != "-")
    return writeFile(module, report, "report", r->dump(2) + "\n");
  // The pipeline's header, its simulated step (with a cluster), then each
  // stage's plan and, with a cluster, its simulated line.
  std::string text =
      "fsdp-opt pipeline plan: " + (*r)["pipeline_stages"].dump() +
      " stages over " + (*r)["world_size"].dump() +
      " ranks; peak bytes per rank by stage " +
      (*r)["stage_peak_bytes"].dump() + "\n";
  if (const json &p = (*r)["pipeline"]; p.contains("split")) {
    const json &sp = p["split"];
    text += "split: pp-split=" + sp["boundaries"].dump() + " (objective " +
            sp["objective"].get<std::string>() + ", constraint " +
            sp["constraint"].get<std::string>() +
            (sp.value("ends", "none") != "none"
                 ? ", ends " + sp["ends"].get<std::string>()
                 : std::string()) +
            (sp.contains("budget_bytes")
                 ? " " + sp["budget_bytes"].dump() + " bytes"
                 : std::string()) +
            "); layers per stage " + sp["stage_layers"].dump() +
            (sp.contains("stage_predicted_s")
                 ? ", predicted s " + sp["stage_predicted_s"].dump()
                 : std::string()) +
            ", estimated peak bytes " +
            sp["stage_estimated_peak_bytes"].dump() + "\n";
  }
  if (spec)
    text += formatPlanReport(*r);
  char line[256];
  for (const json &s : (*r)["stages"]) {
    text += "stage " + s["stage"].dump() + ": " + formatPlanReport(s);
    snprintf(
        line, sizeof(line), "stage %d: peak %lld bytes per rank",
        s["stage"].get<int>(),
        static_cast<long long>(s["per_rank"]["peak_bytes"].get<int64_t>()));
    text += line;
    if (s.contains("predicted_step_time_s")) {
      snprintf(line, sizeof(line),
               ", done at %.6g s, bubble %.4f (idle %.6g s), p2p %lld bytes "
               "sent, %.6g s exposed",
               s["predicted_step_time_s"].get<double>(),
               s["bubble_fraction"].get<double>(), s["idle_s"].get<double>(),
               static_cast<long long>(s["p2p_bytes"].get<int64_t>()),
               s["p2p_exposed_s"].get<double>());
      text += line;
    }
    text += "\n";
  }
  return writeFile(module, report, "report", text);
}
