//===- ScheduleJSON.cpp - scheduled fsdp IR to the JSON schedule ----------===//
//
// Every SSA tensor (or !fsdp.future of one) becomes a buffer; every op an
// instruction in program order (runtime/docs/schedule-format.md). Frees,
// arena offsets and input/output aliases are the memory plan's, as
// fsdp-memory-plan recorded it on the step (MemoryPlanRecord; computed now
// for a step that was not planned), so the runtime allocates what was
// planned.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/MemoryPlanRecord.h"
#include "fsdp/Analysis/PipelineMemory.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Sharding.h"
#include "fsdp/Target/Schedule.h"
#include "fsdp/Transforms/Passes.h"
#include "fsdp/schedule/Format.h"
#include "fsdp/schedule/PipelineTags.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseSet.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

// The pipeline tags the compiler writes are the ones the runtime's watchdog
// decodes.
static_assert(kPPTiedTagBase == ::fsdp::schedule::kPipelineTiedTagBase &&
                  kPPBoundaryTagBase ==
                      ::fsdp::schedule::kPipelineBoundaryTagBase,
              "fsdp.send/recv tags differ between compiler and runtime");

static std::string locString(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc))
    return (f.getFilename().getValue() + ":" + std::to_string(f.getLine()) +
            ":" + std::to_string(f.getColumn()))
        .str();
  if (auto n = dyn_cast<NameLoc>(loc)) {
    // "module.name@file:line:col": the model's module path, as fsdp-import
    // names ops.
    std::string child = locString(n.getChildLoc());
    return n.getName().str() + (child.empty() ? "" : "@" + child);
  }
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto s = locString(l); !s.empty())
        return s;
  return "";
}

static FailureOr<json> attrToJson(Operation *op, NamedAttribute na) {
  Attribute a = na.getValue();
  if (auto b = dyn_cast<BoolAttr>(a))
    return json(b.getValue());
  if (isa<UnitAttr>(a))
    return json(true); // e.g. a collective's `async`
  if (auto f = dyn_cast<FloatAttr>(a))
    return json(f.getValueAsDouble());
  if (auto i = dyn_cast<IntegerAttr>(a))
    return json(i.getInt());
  if (auto s = dyn_cast<StringAttr>(a))
    return json(s.getValue().str());
  // Enum attributes: the schedule format spells each case as the IR does.
  if (auto g = dyn_cast<GroupAttr>(a))
    return json(stringifyGroup(g.getValue()).str());
  if (auto r = dyn_cast<ReductionAttr>(a))
    return json(stringifyReduction(r.getValue()).str());
  if (auto g = dyn_cast<nn::GeluApproximationAttr>(a))
    return json(nn::stringifyGeluApproximation(g.getValue()).str());
  if (auto s = dyn_cast<FlatSymbolRefAttr>(a))
    return json(s.getValue().str());
  if (auto d = dyn_cast<DenseI64ArrayAttr>(a))
    return json(std::vector<int64_t>(d.asArrayRef()));
  if (auto arr = dyn_cast<ArrayAttr>(a)) { // a bucket's units
    json list = json::array();
    for (Attribute e : arr)
      if (auto s = dyn_cast<FlatSymbolRefAttr>(e))
        list.push_back(s.getValue().str());
      else
        return op->emitOpError() << "has attribute '" << na.getName().getValue()
                                 << "' with a non-symbol element";
    return list;
  }
  return op->emitOpError() << "has attribute '" << na.getName().getValue()
                           << "' that the JSON schedule cannot express";
}

namespace {
/// Writes the schedule of one step function, one section at a time, in the
/// format's key order: the header and grid, the units, the buffers and
/// inputs, the instructions (with their frees), the outputs, then the
/// optimizer, the communication and the memory plan.
class ScheduleWriter {
public:
  ScheduleWriter(ModuleOp module, func::FuncOp fn, const MemoryPlanRecord &plan)
      : module(module), fn(fn), plan(plan) {}

  FailureOr<json> write() {
    json out = header();
    if (failed(writeInputs()) || failed(writeInstructions()) ||
        failed(writeOutputs()))
      return failure();
    out["global_batch"] = globalBatch();
    out["optimizer"] = optimizer.is_null() ? json::object() : optimizer;
    out["comm_plan"] = commPlan();
    out["memory_plan"] = memoryPlan();
    out["units"] = units();
    out["buffers"] = std::move(buffers);
    out["inputs"] = std::move(inputs);
    out["outputs"] = std::move(outputs);
    out["instructions"] = std::move(instrs);
    return out;
  }

private:
  json header() {
    int64_t worldSize = 1;
    if (auto ws = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr))
      worldSize = ws.getInt();
    json out;
    out["format"] = ::fsdp::schedule::kFormat;
    out["version"] = ::fsdp::schedule::kVersion;
    out["function"] = fn.getSymName().str();
    out["world_size"] = worldSize;
    if (std::optional<Strategy> strategy = strategyOf(module))
      out["strategy"] = stringifyStrategy(*strategy).str();
    out["grid"] = {
        {"replicas", groupSize(module, Group::Replicate).value_or(1)},
        {"shard_size", groupSize(module, Group::Shard).value_or(worldSize)}};
    if (int64_t tp = groupSize(module, Group::Tensor).value_or(1); tp > 1)
      out["tensor_parallel"] = tp;
    // A pipeline stage's program (docs/pipeline-parallel.md).
    if (auto stage = module->getAttrOfType<IntegerAttr>(kPipelineStageAttr)) {
      out["pipeline"] = {
          {"stages", groupSize(module, Group::Pipeline).value_or(1)},
          {"stage", stage.getInt()}};
      if (auto sched = module->getAttrOfType<StringAttr>(kPipelineScheduleAttr))
        out["pipeline"]["schedule"] = sched.getValue().str();
      if (auto m =
              module->getAttrOfType<IntegerAttr>(kPipelineMicroBatchesAttr))
        out["pipeline"]["micro_batches"] = m.getInt();
      if (auto v = module->getAttrOfType<IntegerAttr>(kPipelineChunksAttr))
        out["pipeline"]["chunks"] = v.getInt(); // interleaved 1F1B
      // Its memory ("Memory": the micro-batches in flight at its peak).
      out["pipeline_memory"] = pipelineStageMemory(module, plan);
    }
    return out;
  }

  /// The units (translateToSchedule checked that each is sharded).
  json units() {
    json units = json::array();
    for (UnitOp unit : module.getOps<UnitOp>()) {
      json u{{"name", unit.getSymName().str()},
             {"dtype", nn::dtypeName(unit.getElementType()).str()},
             {"numel", *unit.getNumel()},
             {"padded_numel", *unit.getPaddedNumel()},
             {"shard_numel", *unit.getShardNumel()}};
      json params = json::array();
      auto slices = module->getAttrOfType<DictionaryAttr>(kTensorSlicesAttr);
      for (unsigned i = 0; i < unit.getParams().size(); ++i) {
        StringAttr fqn = cast<StringAttr>(unit.getParams()[i]);
        params.push_back(
            {{"fqn", fqn.getValue().str()},
             {"shape", unit.getParamShape(i)},
             {"offset", (*unit.getOffsets())[i]},
             {"numel", unit.getParamNumel(i)},
             {"init", cast<StringAttr>(unit.getInits()[i]).getValue().str()},
             {"trainable", (bool)unit.getTrainable()[i]}});
        // Tensor parallelism: which slice of the global parameter this is.
        if (auto rec = slices ? slices.getAs<DenseI64ArrayAttr>(fqn)
                              : DenseI64ArrayAttr())
          params.back()["tensor_slice"] = {
              {"dim", rec[0]},
              {"blocks", rec[1]},
              {"global_shape", rec.asArrayRef().drop_front(2).vec()}};
      }
      u["params"] = std::move(params);
      units.push_back(std::move(u));
    }
    return units;
  }

  /// A buffer, in the plan's order (arguments, then results in op order).
  FailureOr<int64_t> addBuffer(Value v, StringRef cls) {
    RankedTensorType t = bufferTensorType(v.getType());
    std::string dt = t ? nn::dtypeName(t.getElementType()).str() : "";
    if (!t || !t.hasStaticShape() || dt.empty())
      return emitError(v.getLoc())
             << "the JSON schedule supports statically shaped tensors of "
                "f32, f64, bf16, f16, i32 and i64, got "
             << v.getType();
    int64_t id = buffers.size();
    ids[v] = id;
    buffers.push_back({{"id", id},
                       {"dtype", dt},
                       {"shape", std::vector<int64_t>(t.getShape())},
                       {"bytes", bufferBytes(t)},
                       {"class", cls.str()}});
    if (int64_t off = plan.arenaOffsets[plan.indexOf.lookup(v)]; off >= 0)
      buffers.back()["arena_offset"] = off;
    if (int64_t sum = plan.inPlaceOf[plan.indexOf.lookup(v)]; sum >= 0)
      buffers.back()["in_place_of"] = ids[plan.buffers[sum]];
    return id;
  }

  LogicalResult writeInputs() {
    inputs = json::array();
    for (BlockArgument arg : fn.getArguments()) {
      unsigned i = arg.getArgNumber();
      json in;
      std::string cls;
      if (auto role = fn.getArgAttrOfType<StringAttr>(i, nn::kDataAttr)) {
        in["role"] = role.getValue().str();
        cls = "data";
        if (auto gs =
                fn.getArgAttrOfType<DenseI64ArrayAttr>(i, kGlobalShapeAttr))
          in["global_shape"] = std::vector<int64_t>(gs.asArrayRef());
        else
          in["global_shape"] =
              cast<RankedTensorType>(arg.getType()).getShape().vec();
      } else if (fn.getArgAttr(i, nn::kStepAttr)) {
        in["role"] = "step";
        cls = "scalar";
      } else if (fn.getArgAttr(i, nn::kTotalStepsAttr)) {
        in["role"] = "total_steps";
        cls = "scalar";
      } else if (fn.getArgAttr(i, nn::kLossScaleAttr)) {
        in["role"] = "loss_scale";
        cls = "scalar";
      } else if (auto role = fn.getArgAttrOfType<RoleAttr>(i, kRoleAttr)) {
        in["role"] = stringifyRole(role.getValue()).str();
        in["unit"] = fn.getArgAttrOfType<FlatSymbolRefAttr>(i, kUnitAttr)
                         .getValue()
                         .str();
        if (auto layout = fn.getArgAttrOfType<LayoutAttr>(i, kLayoutAttr))
          in["layout"] = stringifyLayout(layout.getValue()).str();
        cls = role.getValue() == Role::Param ? "param_shard" : "opt_state";
      } else if (auto fqn =
                     fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr)) {
        // An unsharded parameter (e.g. after fsdp-autodiff alone): the whole
        // tensor, named by its FQN instead of a unit.
        in["role"] = "param";
        in["fqn"] = fqn.getValue().str();
        cls = "param";
      } else {
        return emitError(arg.getLoc())
               << "argument #" << i
               << " has no role (nn.data, nn.step, nn.total_steps, nn.param or "
                  "fsdp.role)";
      }
      FailureOr<int64_t> id = addBuffer(arg, cls);
      if (failed(id))
        return failure();
      json withId{{"buffer", *id}};
      withId.update(in);
      inputs.push_back(std::move(withId));
    }
    return success();
  }

  /// An instruction's attributes; the first update's are the optimizer's.
  LogicalResult writeAttrs(Operation *op, json &attrs) {
    attrs = json::object();
    if (auto c = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
      if (!dense || !dense.isSplat() || !isa<FloatType>(dense.getElementType()))
        return op->emitOpError()
               << "must be a splat float tensor constant for the JSON schedule";
      attrs["value"] = dense.getSplatValue<APFloat>().convertToDouble();
    } else {
      for (NamedAttribute na : op->getAttrs()) {
        // Discardable markers of the passes (nn.micro_batch, ...) are not
        // part of an instruction's semantics.
        if (na.getName().getValue().contains('.'))
          continue;
        // The optimizer updates' two optional scalars: the format tells them
        // apart by the update's skip_if_nonfinite flag (written below).
        if (na.getName().getValue() == "operandSegmentSizes")
          continue;
        FailureOr<json> j = attrToJson(op, na);
        if (failed(j))
          return failure();
        attrs[na.getName().getValue().str()] = *j;
      }
    }
    if (auto u = dyn_cast<nn::AdamWUpdateOp>(op); u && u.getSkipIfNonfinite())
      attrs["skip_if_nonfinite"] = true;
    if (auto u = dyn_cast<nn::SgdUpdateOp>(op); u && u.getSkipIfNonfinite())
      attrs["skip_if_nonfinite"] = true;
    if (isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(op) && optimizer.is_null()) {
      optimizer = attrs;
      optimizer["kind"] = isa<nn::AdamWUpdateOp>(op) ? "adamw" : "sgd";
      // A unit's weight-decay groups are its instruction's own.
      optimizer.erase("no_decay");
      optimizer.erase("sharded");
      optimizer.erase("skip_if_nonfinite");
    }
    return success();
  }

  /// An instruction's operands and results (new buffers, with the class the
  /// plan gave them; a view's names its owner).
  LogicalResult writeOperands(Operation *op, json &ins) {
    json operands = json::array(), results = json::array();
    // nn.broadcast's `like` only supplies the result shape, which the result
    // buffer carries: the schedule's nn.broadcast has the input alone.
    ValueRange scheduled = op->getOperands();
    if (auto bc = dyn_cast<nn::BroadcastOp>(op))
      scheduled = bc->getOperands().take_front(1);
    for (Value v : scheduled) {
      if (!ids.count(v))
        return op->emitOpError()
               << "uses a value defined outside the step function's block";
      operands.push_back(ids[v]);
    }
    for (Value r : op->getResults()) {
      FailureOr<int64_t> id = addBuffer(r, memoryClassName(plan.classOf(r)));
      if (failed(id))
        return failure();
      results.push_back(*id);
      if (auto view = dyn_cast<ParamViewOp>(op)) {
        buffers[*id]["view_of"] = ids[plan.ownerOf(view.getFlat())];
        buffers[*id]["offset"] = view.getOffset();
      } else if (auto wait = dyn_cast<WaitOp>(op)) {
        // The completed collective's own buffer.
        buffers[*id]["view_of"] = ids[plan.ownerOf(wait.getToken())];
        buffers[*id]["offset"] = 0;
      }
    }
    ins["operands"] = std::move(operands);
    ins["results"] = std::move(results);
    return success();
  }

  LogicalResult writeInstructions() {
    instrs = json::array();
    for (Operation *op : plan.instructions) {
      std::string name = op->getName().getStringRef().str();
      ::fsdp::schedule::OpKind kind;
      if (!::fsdp::schedule::lookupOp(name.c_str(), kind))
        return op->emitOpError()
               << "is not an op of the JSON schedule (version "
               << ::fsdp::schedule::kVersion
               << "): the runtime has no kernel for it";
      json ins{{"op", name}};
      json attrs;
      if (failed(writeAttrs(op, attrs)) || failed(writeOperands(op, ins)))
        return failure();
      ins["attrs"] = std::move(attrs);
      ins["loc"] = locString(op->getLoc());
      instrs.push_back(std::move(ins));
    }
    for (auto [idx, f] : llvm::enumerate(plan.freesAfter))
      instrs[idx]["frees"] = f;
    return success();
  }

  LogicalResult writeOutputs() {
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    outputs = json::array();
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      json o{{"buffer", ids[v]}};
      if (fn.getResultAttr(i, nn::kLossAttr)) {
        o["role"] = "loss";
      } else if (auto role = fn.getResultAttrOfType<RoleAttr>(i, kRoleAttr)) {
        o["role"] = stringifyRole(role.getValue()).str();
        o["unit"] = fn.getResultAttrOfType<FlatSymbolRefAttr>(i, kUnitAttr)
                        .getValue()
                        .str();
        if (auto layout = fn.getResultAttrOfType<LayoutAttr>(i, kLayoutAttr))
          o["layout"] = stringifyLayout(layout.getValue()).str();
        // Written in place into the state input it replaces (the plan's
        // aliases).
        if (int64_t arg = plan.aliases[plan.indexOf.lookup(plan.ownerOf(v))];
            arg >= 0)
          o["aliases"] = ids[plan.buffers[arg]];
      } else if (fn.getResultAttr(i, nn::kLrAttr)) {
        o["role"] = "lr";
      } else if (fn.getResultAttr(i, nn::kGradNormAttr)) {
        o["role"] = "grad_norm";
      } else if (auto g =
                     fn.getResultAttrOfType<StringAttr>(i, nn::kGradOfAttr)) {
        o["role"] = "grad";
        o["fqn"] = g.getValue().str();
      } else {
        return ret.emitOpError()
               << "result #" << i << " has no role (nn.loss or fsdp.role)";
      }
      outputs.push_back(std::move(o));
    }
    return success();
  }

  /// Dimension 0 of the first data input's global shape.
  int64_t globalBatch() const {
    for (const json &in : inputs)
      if (in.contains("global_shape") && !in["global_shape"].empty())
        return in["global_shape"][0];
    return 0;
  }

  /// Communication per rank per step: ring volume of every collective.
  json commPlan() {
    CommPlan comm = CommPlan::compute(plan, module);
    json byCollective{{"all_gather", comm.allGather},
                      {"reduce_scatter", comm.reduceScatter},
                      {"all_reduce", comm.allReduce}};
    return {{"bytes_per_step", comm.total()},
            {"by_collective", std::move(byCollective)}};
  }

  json memoryPlan() const {
    json byClass = json::object();
    for (unsigned c = 0; c < kNumMemoryClasses; ++c)
      byClass[memoryClassName((MemoryClass)c).str()] = plan.peakBytesByClass[c];
    return {{"peak_bytes", plan.peakBytes},
            {"peak_bytes_with_scratch", plan.peakBytesWithScratch},
            {"peak_instruction", plan.peakInstruction},
            {"peak_bytes_by_class", std::move(byClass)},
            {"arena_bytes", plan.arenaBytes},
            {"arena_alignment", plan.alignment}};
  }

  ModuleOp module;
  func::FuncOp fn;
  const MemoryPlanRecord &plan;
  llvm::DenseMap<Value, int64_t> ids; // value → buffer id
  json buffers = json::array(), inputs, instrs, outputs, optimizer;
};
} // namespace

/// One stage's (or the only) program as JSON.
static FailureOr<json> stageSchedule(ModuleOp module) {
  FailureOr<func::FuncOp> fn = getStepFunction(module);
  if (failed(fn))
    return failure();
  if (!fn->getBody().hasOneBlock())
    return fn->emitError() << "expects a single-block step function";
  // Checked before the plan is read (whose errors come second).
  for (UnitOp unit : module.getOps<UnitOp>())
    if (!unit.getOffsets())
      return unit.emitOpError()
             << "is not sharded (run fsdp-shard before translating)";
  FailureOr<MemoryPlanRecord> plan = MemoryPlanRecord::get(*fn);
  if (failed(plan))
    return failure();
  // At the module's location, without the op: the step's own line holds
  // the whole recorded plan, and MLIR's note would print the module.
  if (!plan->hasArena())
    return emitError(module.getLoc())
           << "the step was memory-planned without arena offsets "
              "(arena-offsets=false, for planning only); plan it again "
              "without that option (fsdp-pipeline, or fsdp-memory-plan on a "
              "step without pipeline stages) to translate it";
  return ScheduleWriter(module, *fn, *plan).write();
}

LogicalResult mlir::fsdp::translateToSchedule(ModuleOp module,
                                              raw_ostream &os) {
  // Pipeline parallelism: one program per stage module (MPMD across
  // stages), in a document that says how ranks map to stages. A stage
  // module (which says its stage) is one program.
  if (failed(checkEveryStagePlanned(module)))
    return failure();
  if (module->hasAttr(kPipelineStagesAttr) &&
      !module->hasAttr(kPipelineStageAttr)) {
    json doc{
        {"format", ::fsdp::schedule::kFormat},
        {"version", ::fsdp::schedule::kVersion},
        {"world_size", groupSize(module, Group::World).value_or(1)},
        {"pipeline_stages", groupSize(module, Group::Pipeline).value_or(1)}};
    json stages = json::array();
    for (ModuleOp stage : module.getOps<ModuleOp>()) {
      FailureOr<json> s = stageSchedule(stage);
      if (failed(s))
        return failure();
      stages.push_back(std::move(*s));
    }
    if (static_cast<int64_t>(stages.size()) != doc["pipeline_stages"])
      return module.emitError() << "expects one nested module per pipeline "
                                   "stage (fsdp-pipeline with pp > 1)";
    // Each stage's planned peak per rank (its memory_plan.peak_bytes),
    // where a reader of the whole pipeline (the simulator) finds them.
    json peaks = json::array();
    for (const json &s : stages)
      peaks.push_back(s["memory_plan"]["peak_bytes"]);
    doc["stage_peak_bytes"] = std::move(peaks);
    doc["stages"] = std::move(stages);
    os << doc.dump(1) << "\n";
    return success();
  }
  FailureOr<json> out = stageSchedule(module);
  if (failed(out))
    return failure();
  os << out->dump(1) << "\n";
  return success();
}

void mlir::fsdp::registerToScheduleTranslation() {
  TranslateFromMLIRRegistration reg(
      "fsdp-to-schedule",
      "Write the scheduled step as a JSON schedule for fsdp-run",
      [](Operation *op, raw_ostream &os) -> LogicalResult {
        auto module = dyn_cast<ModuleOp>(op);
        if (!module)
          return op->emitError() << "expects a builtin.module";
        return translateToSchedule(module, os);
      },
      [](DialectRegistry &registry) {
        registry.insert<func::FuncDialect, arith::ArithDialect, nn::NNDialect,
                        FSDPDialect>();
      });
}
