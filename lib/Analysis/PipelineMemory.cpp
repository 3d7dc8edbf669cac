//===- PipelineMemory.cpp - a pipeline stage's micro-batches in flight ----===//
#include "fsdp/Analysis/PipelineMemory.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/ToolOutputFile.h"

#include <map>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

MicroBatchesInFlight
MicroBatchesInFlight::compute(const MemoryPlanRecord &plan) {
  MicroBatchesInFlight r;
  auto n = static_cast<int64_t>(plan.instructions.size());
  if (n == 0)
    return r;
  StepPhases phases(plan.instructions.front()->getParentOfType<func::FuncOp>());
  // The instruction after which each buffer is freed (n - 1: never).
  std::vector<int64_t> end(plan.buffers.size(), n - 1);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t b : plan.freesAfter[i])
      end[b] = i;
  // Per micro-batch, the forward buffers starting and ending at each
  // instruction (as +bytes at the start, -bytes after the end).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> events(n + 1);
  for (int64_t i = 0; i < n; ++i) {
    Operation *op = plan.instructions[i];
    auto [mb, backward] = phases.phaseOf(op);
    if (mb < 0 || backward)
      continue;
    for (Value v : op->getResults()) {
      int64_t b = plan.indexOf.lookup(v);
      MemoryClass c = plan.classes[b];
      // Not a micro-batch's activations: gathered parameters, packed
      // gradients, constants, and scalars (a micro-batch's loss, kept for
      // the step's mean on the last stage).
      RankedTensorType t = bufferTensorType(v.getType());
      if (plan.viewOf[b] >= 0 || c == MemoryClass::GatheredParam ||
          c == MemoryClass::CommBuffer || c == MemoryClass::Temporary || !t ||
          t.getRank() == 0)
        continue;
      int64_t bytes = bufferBytes(v.getType());
      // attention=unfused: the scores kept with the statistics (as the
      // memory plan counts them, MemoryPlan.cpp).
      if (auto ua = unfusedAttentionOf(op); ua && v == op->getResult(1))
        bytes += ua->savedBytes();
      events[i].push_back({mb, bytes});
      events[end[b] + 1].push_back({mb, -bytes});
    }
  }
  std::map<int64_t, int64_t> live; // micro-batch → its forward bytes live
  for (int64_t i = 0; i < n; ++i) {
    for (auto [mb, bytes] : events[i])
      if ((live[mb] += bytes) == 0)
        live.erase(mb);
    if (static_cast<int64_t>(live.size()) > r.most) {
      r.most = static_cast<int64_t>(live.size());
      r.mostInstruction = i;
    }
    if (i == plan.peakInstruction)
      for (auto [mb, bytes] : live) {
        r.atPeak.push_back(mb);
        r.bytesAtPeak.push_back(bytes);
      }
  }
  return r;
}

json mlir::fsdp::pipelineStageMemory(ModuleOp module,
                                     const MemoryPlanRecord &plan) {
  auto stage = module->getAttrOfType<IntegerAttr>(kPipelineStageAttr);
  if (!stage)
    return nullptr;
  json out{{"stage", stage.getInt()}};
  // The stage's attributes, where set (a stage of fsdp-pipeline-split alone
  // has no schedule yet).
  if (auto a = module->getAttrOfType<IntegerAttr>(kPipelineStagesAttr))
    out["stages"] = a.getInt();
  if (auto a = module->getAttrOfType<StringAttr>(kPipelineScheduleAttr))
    out["schedule"] = a.getValue().str();
  if (auto a = module->getAttrOfType<IntegerAttr>(kPipelineMicroBatchesAttr))
    out["micro_batches"] = a.getInt();
  if (auto a = module->getAttrOfType<StringAttr>(kPipelineGatherAttr))
    out["gather"] = a.getValue().str();
  MicroBatchesInFlight f = MicroBatchesInFlight::compute(plan);
  out["peak_bytes"] = plan.peakBytes;
  out["micro_batches_in_flight_at_peak"] = f.atPeak;
  out["micro_batch_bytes_at_peak"] = f.bytesAtPeak;
  out["max_micro_batches_in_flight"] = f.most;
  return out;
}
