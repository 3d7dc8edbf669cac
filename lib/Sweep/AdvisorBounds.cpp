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
#include "fsdp/Sweep/Sweep.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

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

/// The step as the planner builds it before sharding: fsdp-autodiff,
/// fsdp-optimizer, fsdp-wrap (policy=block) and fsdp-activation-checkpoint
/// with `mode`, in fsdp-pipeline's order, then its canonicalizer, on a
/// clone of `model`; `visit`
/// sees its step function. Nothing on a failure.
void withCheckpointedStep(ModuleOp model, ActivationCheckpoint mode,
                          llvm::function_ref<void(func::FuncOp)> visit) {
  OwningOpRef<ModuleOp> clone = model.clone();
  PassManager pm(model.getContext());
  pm.addPass(createFSDPAutodiff());
  pm.addPass(createFSDPOptimizer());
  FSDPWrapOptions wrap; // the advisor's units (Advisor.cpp, policy=block)
  wrap.policy = WrapPolicy::Block;
  pm.addPass(createFSDPWrap(wrap));
  FSDPActivationCheckpointOptions ac;
  ac.mode = mode;
  pm.addPass(createFSDPActivationCheckpoint(ac));
  // Dead backward ops (a gradient nothing reads) go, as in fsdp-pipeline's
  // canonicalizer: what they read is not kept.
  GreedyRewriteConfig canonicalize;
  canonicalize.setRegionSimplificationLevel(
      GreedySimplifyRegionLevel::Disabled);
  pm.addPass(createCanonicalizerPass(canonicalize));
  ScopedDiagnosticHandler quiet(model.getContext(),
                                [](Diagnostic &) { return success(); });
  if (failed(pm.run(*clone)))
    return;
  if (FailureOr<func::FuncOp> fn = getStepFunction(*clone); succeeded(fn))
    visit(*fn);
}

/// What the step `fn` keeps of each block's forward for its backward, per
/// sequence of the `sequences` it was imported with: the fewest over the
/// blocks of (floating-point elements, bytes of other element types) of the
/// forward values read by a backward op (AdvisorBounds.h). A forward op
/// belongs to the block of the last parameter read by it or an op before
/// it (a transformer's forward reads its blocks in order); none when a
/// block keeps nothing.
std::optional<std::pair<double, double>>
keptPerBlock(func::FuncOp fn, int64_t sequences, int64_t blocks) {
  StepPhases phases(fn);
  llvm::DenseMap<Value, std::string> blockOf; // parameter -> block or ""
  for (BlockArgument arg : fn.getArguments())
    if (auto fqn =
            fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), nn::kParamAttr))
      blockOf[arg] = transformerBlockOf(fqn.getValue());
  std::map<std::string, std::pair<double, double>> kept;
  std::string current;
  for (Operation &op : fn.getBody().front()) {
    if (phases.phaseOf(&op).second || op.hasAttr(nn::kRecomputeAttr))
      continue;
    for (Value v : op.getOperands())
      if (auto it = blockOf.find(v); it != blockOf.end())
        current = it->second;
    if (current.empty())
      continue;
    for (OpResult r : op.getResults()) {
      auto t = dyn_cast<RankedTensorType>(r.getType());
      if (!t || !t.getElementType().isIntOrFloat() ||
          llvm::none_of(r.getUsers(),
                        [&](Operation *u) { return phases.phaseOf(u).second; }))
        continue;
      auto elements = static_cast<double>(t.getNumElements()) /
                      static_cast<double>(sequences);
      if (isa<FloatType>(t.getElementType()))
        kept[current].first += elements;
      else
        kept[current].second +=
            elements * (t.getElementType().getIntOrFloatBitWidth() / 8);
    }
  }
  if (static_cast<int64_t>(kept.size()) != blocks)
    return std::nullopt;
  std::pair<double, double> fewest{std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::infinity()};
  for (const auto &[b, k] : kept)
    fewest = {std::min(fewest.first, k.first),
              std::min(fewest.second, k.second)};
  return fewest;
}

} // namespace

ModelBoundFacts sweep::measureModel(ModuleOp model, int64_t sequences,
                                    const ClusterSpec &spec,
                                    const std::string &pipelineOptions) {
  ModelBoundFacts f;
  f.params = fsdp_import::countParams(model);
  f.sequences = sequences;
  // Whether --pipeline sets option `key` ("name="), which the bounds below
  // either cannot price or measure with the passes' defaults.
  auto sets = [&](llvm::StringRef key) {
    return sweep::pipelineSets(pipelineOptions, key);
  };
  f.stateKnown = llvm::none_of(
      std::initializer_list<llvm::StringRef>{
          "optimizer=", "frozen=", "master-weights="},
      sets);
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
  bool backward = !sets("frozen=");

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
  if (!sets("ac-units="))
    withCheckpointedStep(
        model, ActivationCheckpoint::Full, [&](func::FuncOp fn) {
          fn.walk([&](nn::LinearOp linear) {
            if (linear->hasAttr(nn::kRecomputeAttr))
              f.recomputeSeconds += linearForwardSeconds(spec, peak, linear);
          });
        });
  measureBlocks(model, sequences, f);
  // What the other modes keep, measured with the passes' defaults: an
  // option that changes what a block keeps (its units, regions, kernels)
  // leaves the modes unmeasured (their bound counts no activations).
  bool defaults = llvm::none_of(
      std::initializer_list<llvm::StringRef>{
          "policy=", "units=", "unit-depth=", "min-unit-numel=", "ac-units=",
          "ac-regions=", "fused-swiglu=", "attention=", "frozen=",
          "micro-batches=", "accumulate="},
      sets);
  if (defaults && f.blocks > 0)
    for (ActivationCheckpoint mode :
         {ActivationCheckpoint::None, ActivationCheckpoint::Selective,
          ActivationCheckpoint::SelectiveOp})
      withCheckpointedStep(model, mode, [&](func::FuncOp fn) {
        if (auto kept = keptPerBlock(fn, sequences, f.blocks))
          f.keptPerSequence[stringifyActivationCheckpoint(mode).str()] = *kept;
      });
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
  // The activations a block keeps per micro-batch in flight.
  double checkpoint = 0;
  if (l.acMode == "full") {
    checkpoint = static_cast<double>(l.microBatch) * f.blockInputPerSequence *
                 paramBytes / t;
  } else if (auto it = f.keptPerSequence.find(l.acMode);
             it != f.keptPerSequence.end()) {
    checkpoint = static_cast<double>(l.microBatch) *
                 (it->second.first * paramBytes + it->second.second) / t;
  }
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

std::map<int64_t, std::string>
mlir::fsdp::sweep::tensorParallelRefusals(ModuleOp model,
                                          const std::vector<int64_t> &degrees,
                                          const std::string &pipelineOptions) {
  std::map<int64_t, std::string> refusals;
  if (!model)
    return refusals;
  std::string passOptions;
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(pipelineOptions, words);
  for (llvm::StringRef w : words)
    if (w.starts_with("sequence-parallel=") || w.starts_with("vocab-parallel="))
      passOptions += " " + w.str();
  for (int64_t t : degrees) {
    if (t <= 1 || refusals.count(t))
      continue;
    std::unique_ptr<Pass> pass = createFSDPTensorParallel();
    auto ignore = [](const llvm::Twine &) { return failure(); };
    if (failed(pass->initializeOptions("tp=" + std::to_string(t) + passOptions,
                                       ignore)))
      continue; // every plan reports the malformed option itself
    std::string firstError;
    ScopedDiagnosticHandler handler(model.getContext(), [&](Diagnostic &d) {
      if (d.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
        firstError = d.str();
      return success();
    });
    OwningOpRef<ModuleOp> clone = model.clone();
    PassManager pm(model.getContext());
    pm.addPass(std::move(pass));
    if (failed(pm.run(*clone)))
      refusals[t] =
          firstError.empty()
              ? "fsdp-tensor-parallel failed with tp=" + std::to_string(t)
              : firstError;
  }
  return refusals;
}
