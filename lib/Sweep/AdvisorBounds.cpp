//===- AdvisorBounds.cpp - proven lower bounds on a layout's step and bytes
//===//
//
// fsdp/Sweep/AdvisorBounds.h derives both bounds.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sweep/AdvisorBounds.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Import/Import.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::sweep;

namespace {

/// The op's efficiency at most: `classEff`, or its op_efficiency entry where
/// the spec names it (it replaces the class's, Simulator.cpp costTime).
double largestEfficiency(const ClusterSpec &spec, llvm::StringRef op,
                         double classEff) {
  auto it = spec.opEfficiency.find(op.str());
  return it == spec.opEfficiency.end() ? classEff
                                       : std::max(classEff, it->second);
}

/// A forward nn.linear's time at most efficiency: FLOPs / (peak ·
/// efficiency.matmul · K / (K + matmul_half_k)) at its own K.
double linearForwardSeconds(const ClusterSpec &spec, double peak,
                            nn::LinearOp linear) {
  double kFactor = 1;
  if (spec.matmulHalfK > 0) {
    auto t = cast<RankedTensorType>(linear.getInput().getType());
    auto k = static_cast<double>(t.getRank() ? t.getShape().back() : 1);
    kFactor = k / (k + spec.matmulHalfK);
  }
  auto flops = static_cast<double>(
      cast<nn::CostOpInterface>(linear.getOperation()).getFlops());
  return flops / (peak * largestEfficiency(spec, "nn.linear",
                                           spec.effMatmul * kFactor));
}

/// ModelBoundFacts' block fields from the step function's parameters.
void measureBlocks(ModuleOp model, int64_t sequences, ModelBoundFacts &f) {
  FailureOr<func::FuncOp> fn = getStepFunction(model);
  if (failed(fn) || sequences <= 0)
    return;
  std::map<std::string, double> params;     // block -> parameters
  llvm::DenseMap<Value, std::string> block; // parameter -> its block
  for (BlockArgument arg : fn->getArguments()) {
    auto fqn =
        fn->getArgAttrOfType<StringAttr>(arg.getArgNumber(), nn::kParamAttr);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!fqn || !type)
      continue;
    std::string b = transformerBlockOf(fqn.getValue());
    if (b.empty())
      continue;
    params[b] += static_cast<double>(type.getNumElements());
    block[arg] = b;
  }
  // Each block's input: the largest non-parameter tensor operand of the
  // first op that reads one of its parameters.
  std::map<std::string, double> input;
  fn->walk([&](Operation *op) {
    std::string b;
    for (Value v : op->getOperands())
      if (auto it = block.find(v); it != block.end())
        b = it->second;
    if (b.empty() || input.count(b))
      return;
    double elements = 0;
    for (Value v : op->getOperands())
      if (auto t = dyn_cast<RankedTensorType>(v.getType());
          t && !block.count(v))
        elements = std::max(elements, static_cast<double>(t.getNumElements()));
    input[b] = elements / static_cast<double>(sequences);
  });
  if (params.empty() || input.size() != params.size())
    return;
  f.blocks = static_cast<int64_t>(params.size());
  f.blockParams = std::numeric_limits<double>::infinity();
  f.blockInputPerSequence = std::numeric_limits<double>::infinity();
  for (const auto &[b, n] : params) {
    f.blockParams = std::min(f.blockParams, n);
    f.blockInputPerSequence = std::min(f.blockInputPerSequence, input[b]);
  }
}

/// The nn.linear ops that activation-checkpoint=full recomputes, as the
/// planner decides them: fsdp-autodiff, fsdp-optimizer, fsdp-wrap
/// (policy=block) and fsdp-activation-checkpoint mode=full, in
/// fsdp-pipeline's order, on a clone of `model`; `credit` is called with
/// each linear marked nn.recompute. Nothing on a failure.
void forEachRecomputedLinear(ModuleOp model,
                             llvm::function_ref<void(nn::LinearOp)> credit) {
  OwningOpRef<ModuleOp> clone = model.clone();
  PassManager pm(model.getContext());
  pm.addPass(createFSDPAutodiff());
  pm.addPass(createFSDPOptimizer());
  pm.addPass(createFSDPWrap());
  FSDPActivationCheckpointOptions ac;
  ac.mode = ActivationCheckpoint::Full;
  pm.addPass(createFSDPActivationCheckpoint(ac));
  ScopedDiagnosticHandler quiet(model.getContext(),
                                [](Diagnostic &) { return success(); });
  if (failed(pm.run(*clone)))
    return;
  clone->walk([&](nn::LinearOp linear) {
    if (linear->hasAttr(nn::kRecomputeAttr))
      credit(linear);
  });
}

} // namespace

ModelBoundFacts sweep::measureModel(ModuleOp model, int64_t sequences,
                                    const ClusterSpec &spec,
                                    const std::string &pipelineOptions) {
  ModelBoundFacts f;
  f.params = fsdp_import::countParams(model);
  f.sequences = sequences;
  for (llvm::StringRef key : {"optimizer=", "frozen=", "master-weights="})
    if (llvm::StringRef(pipelineOptions).contains(key))
      f.stateKnown = false;
  double peak = 0;
  for (const auto &[dtype, flops] : spec.peakFlops)
    peak = std::max(peak, flops);
  if (peak <= 0)
    return f;
  // A backward GEMM is an nn.linear or nn.matmul: the larger of their
  // efficiencies, without the K factor (<= 1).
  double backwardEff =
      std::max(largestEfficiency(spec, "nn.linear", spec.effMatmul),
               largestEfficiency(spec, "nn.matmul", spec.effMatmul));
  // Frozen parameters have no dW GEMM: the backward is not counted then.
  bool backward = !llvm::StringRef(pipelineOptions).contains("frozen=");

  model.walk([&](Operation *op) {
    auto cost = dyn_cast<nn::CostOpInterface>(op);
    if (!cost || !isa<nn::LinearOp, nn::MatmulOp, nn::AttentionOp>(op))
      return;
    auto flops = static_cast<double>(cost.getFlops());
    llvm::StringRef name = op->getName().getStringRef();
    if (isa<nn::AttentionOp>(op)) {
      f.computeSeconds +=
          flops / (peak * largestEfficiency(spec, name, spec.effAttention));
      return;
    }
    auto linear = dyn_cast<nn::LinearOp>(op);
    f.computeSeconds +=
        linear ? linearForwardSeconds(spec, peak, linear)
               : flops / (peak * largestEfficiency(spec, name, spec.effMatmul));
    if (backward && isa<nn::LinearOp>(op))
      f.computeSeconds += 2 * flops / (peak * backwardEff);
  });
  // Full AC's recomputation (unless ac-units= chooses other units), at the
  // forward's efficiency bound.
  if (!llvm::StringRef(pipelineOptions).contains("ac-units="))
    forEachRecomputedLinear(model, [&](nn::LinearOp linear) {
      f.recomputeSeconds += linearForwardSeconds(spec, peak, linear);
    });
  measureBlocks(model, sequences, f);
  return f;
}

double sweep::deviceBytesLowerBound(const ModelBoundFacts &f,
                                    const ClusterSpec &spec,
                                    const BoundLayout &l) {
  if (!f.stateKnown)
    return 0;
  // Ranks a parameter's f32 master copy and its moments are sharded over,
  // and whether its matmuls read a gathered param-dtype copy.
  double masterShards = 1, momentShards = 1;
  bool gathers = true;
  if (l.strategy == "full-shard" || l.strategy == "shard-grad-op") {
    masterShards = momentShards = static_cast<double>(l.dp);
  } else if (l.strategy == "shard-optimizer") {
    momentShards = static_cast<double>(l.dp);
    gathers = false;
  } else if (l.strategy == "hybrid-shard") {
    masterShards = momentShards = static_cast<double>(l.shardSize);
  } else if (l.strategy == "no-shard") {
    gathers = false;
  } else {
    return 0;
  }
  auto t = static_cast<double>(l.tp);
  double stateBytes = 4 / masterShards + 8 / momentShards;
  double workspace = spec.hasAllocator ? spec.workspaceBytes : 0;
  double paramBytes = l.paramDtype == "f32" || l.paramDtype == "f64" ? 4 : 2;
  if (f.blocks <= 0) // no block structure: the state alone
    return static_cast<double>(f.params) / (t * static_cast<double>(l.pp)) *
               stateBytes +
           workspace;
  double state = f.blockParams / t * stateBytes;
  double checkpoint = l.fullAC ? static_cast<double>(l.microBatch) *
                                     f.blockInputPerSequence * paramBytes / t
                               : 0;
  double inverse = 0; // Σ_j 1 / w_j
  for (int64_t j = 0; j < l.pp; ++j) {
    int64_t inFlight = 1;
    if (l.pp > 1 && l.ppSchedule == "1f1b")
      inFlight = l.pp - j;
    else if (l.pp > 1 && l.ppSchedule == "gpipe")
      inFlight = l.pp;
    inverse += 1 / (state + static_cast<double>(inFlight) * checkpoint);
  }
  double gathered = gathers ? f.blockParams * paramBytes / t : 0;
  return static_cast<double>(f.blocks) / inverse + gathered + workspace;
}

double sweep::stepLowerBound(const ModelBoundFacts &f, int64_t t, int64_t pp,
                             int64_t s, int64_t k, bool fullAC) {
  if (f.sequences <= 0 || k <= 0)
    return 0;
  // One micro-batch of s / k sequences through every stage, per TP rank.
  double c = (f.computeSeconds + (fullAC ? f.recomputeSeconds : 0)) /
             static_cast<double>(f.sequences) * static_cast<double>(s) /
             static_cast<double>(k) / static_cast<double>(t);
  if (pp <= 1)
    return static_cast<double>(k) * c;
  return c / (1 - std::pow(1 - 1.0 / static_cast<double>(k),
                           static_cast<double>(pp)));
}
