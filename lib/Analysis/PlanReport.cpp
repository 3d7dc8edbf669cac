//===- PlanReport.cpp - the planner's memory and communication report -----===//
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/PipelineMemory.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Sharding.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <sstream>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

CommPlan CommPlan::compute(const MemoryPlanRecord &plan, ModuleOp module) {
  CommPlan c;
  int64_t world = groupSize(module, Group::World).value_or(1);
  for (Operation *op : plan.instructions) {
    auto ring = [&](Value full, Group group) {
      return ::fsdp::ringCollectiveBytesPerRank(
          bufferBytes(full), groupSize(op, group).value_or(world));
    };
    if (auto ag = dyn_cast<AllGatherOp>(op))
      c.allGather += ring(ag.getResult(), ag.getGroup());
    else if (auto rs = dyn_cast<ReduceScatterOp>(op))
      c.reduceScatter += ring(rs.getInput(), rs.getGroup());
    else if (auto ar = dyn_cast<AllReduceOp>(op))
      c.allReduce += ::fsdp::ringAllReduceBytesPerRank(
          bufferBytes(ar.getInput()),
          groupSize(op, ar.getGroup()).value_or(world));
    else if (std::optional<TensorCollective> tc = tensorCollectiveOf(op))
      c.tensorParallel += tc->bytesPerRank();
  }
  return c;
}

ModelState ModelState::compute(const MemoryPlanRecord &plan, func::FuncOp fn) {
  ModelState m;
  for (BlockArgument arg : fn.getArguments()) {
    auto role = fn.getArgAttrOfType<RoleAttr>(arg.getArgNumber(), kRoleAttr);
    if (!role)
      continue;
    // The f32 master of separate master weights counts as optimizer state, as
    // ZeRO's K = 12 (master, momentum, variance).
    (role.getValue() == Role::Param ? m.paramBytes : m.optStateBytes) +=
        bufferBytes(arg);
  }
  // Gradient storage: what the update consumes (the reduced gradient), or the
  // whole flat gradient where the strategy keeps it (class grad, not
  // comm_buffer: gradients replicated, as ZeRO-1 and DDP).
  for (Operation *op : plan.instructions) {
    if (!isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(op))
      continue;
    Value g = op->getOperand(1);
    Value root = g;
    // Walk back through casts to the reduced gradient (stored in reduce-dtype)
    // and on to the packed gradient.
    Value reduced;
    while (Operation *def = root.getDefiningOp()) {
      if (isa<FlattenOp>(def))
        break;
      if (auto wait = dyn_cast<WaitOp>(def)) { // the same buffer
        root = wait.getToken();
        continue;
      }
      if (isa<ReduceScatterOp, AllReduceOp, UnpackOp>(def) && !reduced)
        reduced = root;
      if (isa<UnpackOp>(def)) // a bucket's unit shard: the reduced gradient
        break;
      if (!isa<ReduceScatterOp, AllReduceOp, nn::CastOp>(def))
        break;
      root = def->getOperand(0);
    }
    bool keptWhole = root.getDefiningOp<FlattenOp>() &&
                     plan.classOf(root) == MemoryClass::Grad;
    m.gradBytes += bufferBytes(keptWhole ? root : reduced ? reduced : g);
  }
  return m;
}

static std::string describe(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "'" << op->getName() << "' at " << op->getLoc();
  return s;
}

/// per_rank.peak_bytes_by_phase: one array per phase, PhasePeakField's
/// order (MemoryPlanRecord::phasePeaks).
static json phasePeaksOf(const MemoryPlanRecord &plan) {
  json out = json::array();
  for (const PhasePeak &p : plan.phasePeaks) {
    json entry = json::array();
    entry.insert(entry.end(), kNumPhasePeakFields, 0);
    entry[kPhaseMicroBatch] = p.microBatch;
    entry[kPhaseBackward] = p.backward ? 1 : 0;
    entry[kPhaseBytes] = p.bytes;
    entry[kPhaseGatheredBytes] = p.gatheredBytes;
    entry[kPhaseGatherSendBytes] = p.gatherSendBytes;
    out.push_back(std::move(entry));
  }
  return out;
}

FailureOr<json> mlir::fsdp::buildPlanReport(ModuleOp module) {
  FailureOr<func::FuncOp> fn = getStepFunction(module);
  if (failed(fn))
    return failure();
  FailureOr<MemoryPlanRecord> plan = MemoryPlanRecord::get(*fn);
  if (failed(plan))
    return failure();
  int64_t params = 0, trainable = 0;
  json units = json::array();
  for (UnitOp unit : module.getOps<UnitOp>()) {
    int64_t numel = 0;
    for (unsigned i = 0; i < unit.getParams().size(); ++i) {
      numel += unit.getParamNumel(i);
      if (unit.getTrainable()[i])
        trainable += unit.getParamNumel(i);
    }
    params += numel;
    json u{{"name", unit.getSymName().str()},
           {"params", unit.getParams().size()},
           {"numel", numel}};
    if (unit.getPaddedNumel()) {
      u["padded_numel"] = static_cast<int64_t>(*unit.getPaddedNumel());
      u["padding"] = static_cast<int64_t>(*unit.getPaddedNumel()) - numel;
      u["shard_numel"] = static_cast<int64_t>(*unit.getShardNumel());
    }
    units.push_back(std::move(u));
  }
  CommPlan comm = CommPlan::compute(*plan, module);
  ModelState state = ModelState::compute(*plan, *fn);
  json byClass = json::object(), maxByClass = json::object();
  for (unsigned c = 0; c < kNumMemoryClasses; ++c) {
    byClass[memoryClassName((MemoryClass)c).str()] = plan->peakBytesByClass[c];
    maxByClass[memoryClassName((MemoryClass)c).str()] =
        plan->maxBytesByClass[c];
  }
  json peakAt = nullptr;
  if (plan->peakInstruction >= 0)
    peakAt = describe(plan->instructions[plan->peakInstruction]);
  std::string strategy =
      stringifyStrategy(strategyOf(module).value_or(Strategy::FullShard)).str();
  int64_t world = groupSize(module, Group::World).value_or(1);
  // Tokens per step: the global shape [B, T] of the token ids (language
  // models); 0 when the step has none.
  int64_t tokens = 0;
  for (BlockArgument arg : fn->getArguments()) {
    auto kind =
        fn->getArgAttrOfType<StringAttr>(arg.getArgNumber(), nn::kDataAttr);
    if (!kind || kind.getValue() != "tokens")
      continue;
    ArrayRef<int64_t> shape = cast<RankedTensorType>(arg.getType()).getShape();
    SmallVector<int64_t> global(shape);
    if (auto gs = fn->getArgAttrOfType<DenseI64ArrayAttr>(arg.getArgNumber(),
                                                          kGlobalShapeAttr))
      global.assign(gs.asArrayRef().begin(), gs.asArrayRef().end());
    tokens = 1;
    for (int64_t d : global)
      tokens *= d;
    break;
  }
  json report{
      {"params", params},
      {"trainable_params", trainable},
      {"world_size", world},
      {"strategy", strategy},
      {"grid",
       {{"replicas", groupSize(module, Group::Replicate).value_or(1)},
        {"shard_size", groupSize(module, Group::Shard).value_or(world)},
        {"tensor_parallel", groupSize(module, Group::Tensor).value_or(1)}}},
      {"per_rank",
       {{"peak_bytes", plan->peakBytes},
        {"peak_instruction", plan->peakInstruction},
        {"peak_at", peakAt},
        {"peak_bytes_by_class", std::move(byClass)},
        {"max_bytes_by_class", std::move(maxByClass)},
        {"peak_bytes_by_phase", phasePeaksOf(*plan)},
        {"send_buffer_bytes",
         {{"gather_max", plan->sendBytes.gatherMax},
          {"gather_at_peak", plan->sendBytes.gatherAtPeak},
          {"reduce_max", plan->sendBytes.reduceMax},
          {"reduce_at_peak", plan->sendBytes.reduceAtPeak}}},
        {"model_state_bytes", state.total()},
        {"model_state",
         {{"params", state.paramBytes},
          {"grads", state.gradBytes},
          {"optimizer_state", state.optStateBytes}}},
        {"comm_bytes_per_step", comm.total()},
        {"comm_bytes_by_collective",
         {{"all_gather", comm.allGather},
          {"reduce_scatter", comm.reduceScatter},
          {"all_reduce", comm.allReduce}}},
        {"tp_bytes_per_step", comm.tensorParallel},
        {"arena_bytes",
         plan->hasArena() ? json(plan->arenaBytes) : json(nullptr)}}},
      {"units", std::move(units)}};
  if (tokens > 0)
    report["tokens_per_step"] = tokens;
  // Activation checkpointing: the mode and the FLOPs per rank per step of the
  // recomputed forward ops (nn::CostOpInterface, as the simulator counts).
  if (auto ac =
          module->getAttrOfType<StringAttr>(nn::kActivationCheckpointAttr)) {
    int64_t recomputeFlops = 0, recomputeOps = 0;
    for (Operation *op : plan->instructions)
      if (op->hasAttr(nn::kRecomputeAttr)) {
        ++recomputeOps;
        if (auto cost = dyn_cast<nn::CostOpInterface>(op))
          recomputeFlops += cost.getFlops();
      }
    report["activation_checkpoint"] = ac.getValue().str();
    report["recompute_ops"] = recomputeOps;
    report["recompute_flops"] = recomputeFlops;
  }
  if (auto sched = module->getAttrOfType<StringAttr>(kScheduleAttr))
    report["schedule"] = sched.getValue().str();
  // A pipeline stage: its peak and the micro-batches in flight there.
  if (json pp = pipelineStageMemory(module, *plan); !pp.is_null())
    report["pipeline"] = std::move(pp);
  return report;
}

void mlir::fsdp::addSimulationToReport(json &report, const SimResult &sim,
                                       StringRef clusterName) {
  report["cluster"] = clusterName.str();
  report["flops_per_rank"] = sim.flops;
  if (report.contains("activation_checkpoint"))
    report["recompute_s"] = sim.recomputeTime;
  report["predicted_step_time_s"] = sim.stepTime;
  report["compute_s"] = sim.computeTime;
  report["host_overhead_s"] = sim.hostTime;
  if (sim.yieldTime > 0)
    report["progress_yield_s"] = sim.yieldTime;
  report["comm_s"] = sim.commTime;
  report["exposed_comm_s"] = sim.exposedComm;
  if (sim.contentionTime > 0)
    report["contention_s"] = sim.contentionTime;
  report["tp_bytes"] = sim.tpBytes;
  report["tp_comm_s"] = sim.tpTime;
  report["tp_exposed_s"] = sim.tpExposed;
  report["lower_bound_s"] = sim.lowerBound;
  report["step_over_lower_bound"] =
      sim.lowerBound > 0 ? sim.stepTime / sim.lowerBound : 0.0;
  if (report.contains("tokens_per_step") && sim.stepTime > 0)
    report["predicted_tokens_per_s"] =
        report["tokens_per_step"].get<double>() / sim.stepTime;
  report["mfu"] = sim.mfu;
  report["mfu_dtype"] = sim.mfuDtype;
}

void mlir::fsdp::addAllocatorToReport(json &report, const ClusterSpec &spec) {
  if (!spec.hasAllocator)
    return;
  json &perRank = report["per_rank"];
  // Another stack's peak (per_rank.framework, addFrameworkMemoryToReport)
  // where the report has one: the pools are what is kept beside it.
  const json &atPeak =
      perRank.contains("framework") ? perRank["framework"] : perRank;
  int64_t pools = 0, gradShardPool = 0;
  if (spec.perStreamPools) {
    std::string gathered = memoryClassName(MemoryClass::GatheredParam).str();
    pools += perRank["max_bytes_by_class"].value(gathered, int64_t(0)) -
             atPeak["peak_bytes_by_class"].value(gathered, int64_t(0));
    // Of comm_buffer, the all-gathers' send buffers: a reduction's input is
    // allocated and freed on the compute stream (isReductionInput), whose
    // peak already holds what it keeps.
    const json &send = perRank["send_buffer_bytes"];
    pools += send["gather_max"].get<int64_t>() -
             (perRank.contains("framework")
                  ? atPeak["gather_send_at_peak"].get<int64_t>()
                  : send["gather_at_peak"].get<int64_t>());
    // PyTorch FSDP's gradient shards, on the reduce-scatter stream.
    gradShardPool = atPeak.value("grad_shard_pool_bytes", int64_t(0));
    pools += gradShardPool;
  }
  auto workspace = static_cast<int64_t>(spec.workspaceBytes);
  int64_t peak = atPeak["peak_bytes"];
  perRank["allocator"] = {{"stream_pool_bytes", pools},
                          {"workspace_bytes", workspace},
                          {"overhead_bytes", pools + workspace},
                          {"reserved_bytes", peak + pools + workspace}};
  if (perRank.contains("framework"))
    perRank["allocator"]["grad_shard_pool_bytes"] = gradShardPool;
}

int64_t mlir::fsdp::deviceBytes(const json &report) {
  const json &perRank = report["per_rank"];
  if (perRank.contains("allocator"))
    return perRank["allocator"]["reserved_bytes"].get<int64_t>();
  return perRank["peak_bytes"].get<int64_t>();
}

size_t mlir::fsdp::fattestStage(const json &stages) {
  size_t fattest = 0;
  for (size_t s = 1; s < stages.size(); ++s)
    if (deviceBytes(stages[s]) > deviceBytes(stages[fattest]))
      fattest = s;
  return fattest;
}

static std::string human(int64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = bytes;
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string mlir::fsdp::formatPlanReport(const json &r) {
  std::ostringstream os;
  const json &p = r["per_rank"];
  os << "fsdp-opt plan: " << r["params"].get<int64_t>()
     << " parameters, strategy " << r["strategy"].get<std::string>()
     << ", world size " << r["world_size"].get<int64_t>() << " ("
     << r["grid"]["replicas"].get<int64_t>() << " x "
     << r["grid"]["shard_size"].get<int64_t>() << ")\n";
  os << "per rank:\n";
  auto row = [&](const std::string &name, int64_t bytes) {
    char buf[160];
    snprintf(buf, sizeof(buf), "  %-28s %16lld  %12s\n", name.c_str(),
             (long long)bytes, human(bytes).c_str());
    os << buf;
  };
  row("peak bytes", p["peak_bytes"]);
  if (!p["peak_at"].is_null())
    os << "    at instruction #" << p["peak_instruction"].get<int64_t>() << " "
       << p["peak_at"].get<std::string>() << "\n";
  for (auto &[cls, bytes] : p["peak_bytes_by_class"].items())
    if (bytes.get<int64_t>() > 0)
      row("  " + cls, bytes);
  os << "  most of each class at any point of the step:\n";
  for (auto &[cls, bytes] : p["max_bytes_by_class"].items())
    if (bytes.get<int64_t>() > 0)
      row("  " + cls, bytes);
  row("model-state bytes", p["model_state_bytes"]);
  for (auto &[k, bytes] : p["model_state"].items())
    row("  " + k, bytes);
  row("comm bytes per step", p["comm_bytes_per_step"]);
  for (auto &[k, bytes] : p["comm_bytes_by_collective"].items())
    if (bytes.get<int64_t>() > 0)
      row("  " + k, bytes);
  if (p.value("tp_bytes_per_step", int64_t(0)) > 0)
    row("tensor-parallel bytes/step", p["tp_bytes_per_step"]);
  if (!p["arena_bytes"].is_null()) // planned with arena-offsets=false
    row("arena bytes", p["arena_bytes"]);
  if (p.contains("framework")) {
    const json &f = p["framework"];
    row(f["memory"].get<std::string>() + " peak bytes", f["peak_bytes"]);
    row("  eager cross-entropy", f["terms_at_peak"]["eager_cross_entropy"]);
    row("  eager checkpoint cache", f["terms_at_peak"]["sac_cache"]);
  }
  if (p.contains("allocator")) {
    const json &a = p["allocator"];
    row("allocator overhead", a["overhead_bytes"]);
    row("  stream pools", a["stream_pool_bytes"]);
    if (a.contains("grad_shard_pool_bytes"))
      row("    of which gradient shards", a["grad_shard_pool_bytes"]);
    row("  workspaces", a["workspace_bytes"]);
    row("reserved (peak + overhead)", a["reserved_bytes"]);
  }

  // A stage's report (the pipeline's own "pipeline" object has no stage).
  if (r.contains("pipeline") && r["pipeline"].contains("stage")) {
    const json &pp = r["pipeline"];
    os << "pipeline stage " << pp["stage"] << " of " << pp["stages"] << " ("
       << pp["schedule"].get<std::string>() << ", " << pp["micro_batches"]
       << " micro-batches, units gathered "
       << (pp["gather"].is_string() ? pp["gather"].get<std::string>() : "?")
       << "): micro-batches " << pp["micro_batches_in_flight_at_peak"].dump()
       << " in flight at the peak, at most "
       << pp["max_micro_batches_in_flight"] << " at once\n";
  }
  if (r.contains("activation_checkpoint")) {
    os << "activation checkpointing: "
       << r["activation_checkpoint"].get<std::string>() << ", "
       << r["recompute_ops"].get<int64_t>() << " ops recomputed, "
       << r["recompute_flops"].get<int64_t>() << " FLOPs per rank\n";
  }
  if (r.contains("predicted_step_time_s")) {
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "simulated on %s (schedule: %s):\n"
             "  flops per rank               %16lld\n"
             "  predicted step time          %16.9g s\n"
             "  compute                      %16.9g s\n"
             "  communication                %16.9g s\n"
             "  exposed communication        %16.9g s\n"
             "  lower bound                  %16.9g s\n"
             "  MFU (%s peak)              %16.4f\n",
             r["cluster"].get<std::string>().c_str(),
             r.value("schedule",
                     std::string("as placed, collectives waited at first use"))
                 .c_str(),
             (long long)r["flops_per_rank"].get<int64_t>(),
             r["predicted_step_time_s"].get<double>(),
             r["compute_s"].get<double>(), r["comm_s"].get<double>(),
             r["exposed_comm_s"].get<double>(),
             r["lower_bound_s"].get<double>(),
             r["mfu_dtype"].get<std::string>().c_str(), r["mfu"].get<double>());
    os << buf;
    if (r.value("tp_bytes", int64_t(0)) > 0) {
      snprintf(buf, sizeof(buf),
               "  tensor-parallel comm (blocks) %15.9g s, exposed %.9g s\n",
               r["tp_comm_s"].get<double>(), r["tp_exposed_s"].get<double>());
      os << buf;
    }
    if (r.value("host_overhead_s", 0.0) > 0) {
      snprintf(buf, sizeof(buf), "  host (dispatch, step I/O)    %16.9g s\n",
               r["host_overhead_s"].get<double>());
      os << buf;
    }
    if (r.contains("predicted_tokens_per_s")) {
      snprintf(buf, sizeof(buf), "  tokens/s (all ranks)         %16.1f\n",
               r["predicted_tokens_per_s"].get<double>());
      os << buf;
    }
  }
  os << "units:\n";
  for (const json &u : r["units"]) {
    char buf[200];
    snprintf(
        buf, sizeof(buf),
        "  %-32s params %3lld  numel %12lld  padded %12lld  shard %12lld\n",
        u["name"].get<std::string>().c_str(),
        (long long)u["params"].get<int64_t>(),
        (long long)u["numel"].get<int64_t>(),
        (long long)u.value("padded_numel", u["numel"].get<int64_t>()),
        (long long)u.value("shard_numel", u["numel"].get<int64_t>()));
    os << buf;
  }
  return os.str();
}

std::optional<int64_t> mlir::fsdp::parseByteSize(StringRef text) {
  text = text.trim();
  size_t i = 0;
  while (i < text.size() && (isdigit(text[i]) || text[i] == '.'))
    ++i;
  double value;
  if (i == 0 || text.take_front(i).getAsDouble(value))
    return std::nullopt;
  StringRef suffix = text.drop_front(i).trim();
  std::optional<double> scale =
      llvm::StringSwitch<std::optional<double>>(suffix)
          .Cases({"", "B"}, 1.0)
          .Cases({"K", "KB"}, 1e3)
          .Case("KiB", 1024.0)
          .Cases({"M", "MB"}, 1e6)
          .Case("MiB", 1024.0 * 1024)
          .Cases({"G", "GB"}, 1e9)
          .Case("GiB", 1024.0 * 1024 * 1024)
          .Cases({"T", "TB"}, 1e12)
          .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
          .Default(std::nullopt);
  if (!scale || !(value * *scale >= 0) || value * *scale > 9.2e18)
    return std::nullopt;
  return static_cast<int64_t>(std::llround(value * *scale));
}
