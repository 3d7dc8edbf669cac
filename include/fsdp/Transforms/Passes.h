//===- Passes.h - the FSDP planning passes and pipeline
//---------------------===//
#ifndef FSDP_TRANSFORMS_PASSES_H
#define FSDP_TRANSFORMS_PASSES_H

#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Transforms/Passes.h.inc"

/// Options of `fsdp-pipeline`: autodiff, optimizer, wrap, shard, collectives.
struct PipelineOptions : public PassPipelineOptions<PipelineOptions> {
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::desc("number of ranks (>= 1)"),
                            llvm::cl::init(1)};
  Option<std::string> strategy{
      *this, "strategy",
      llvm::cl::desc("full-shard, shard-grad-op, shard-optimizer, "
                     "no-shard or hybrid-shard"),
      llvm::cl::init("full-shard")};
  Option<int64_t> shardSize{
      *this, "shard-size",
      llvm::cl::desc("hybrid-shard: ranks per shard group"), llvm::cl::init(0)};
  Option<std::string> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("f32, bf16 or f16: gathered parameters and compute"),
      llvm::cl::init("")};
  Option<std::string> reduceDtype{*this, "reduce-dtype",
                                  llvm::cl::desc("dtype of gradient reduction"),
                                  llvm::cl::init("")};
  Option<std::string> masterWeights{
      *this, "master-weights", llvm::cl::desc("cast-on-gather or separate"),
      llvm::cl::init("cast-on-gather")};
  ListOption<std::string> frozen{
      *this, "frozen",
      llvm::cl::desc("FQN glob patterns of frozen parameters")};
  Option<int64_t> minUnitNumel{
      *this, "min-unit-numel",
      llvm::cl::desc("policy=size: minimum numel of a unit"),
      llvm::cl::init(100000000)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("micro-batches per optimizer step"), llvm::cl::init(1)};
  Option<std::string> accumulate{
      *this, "accumulate",
      llvm::cl::desc("sharded or unsharded gradient accumulation"),
      llvm::cl::init("sharded")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("weight decay"),
                             llvm::cl::init(0.01)};
  Option<std::string> policy{*this, "policy",
                             llvm::cl::desc("wrap policy: module or block"),
                             llvm::cl::init("module")};
  Option<int> unitDepth{
      *this, "unit-depth",
      llvm::cl::desc("FQN components naming a unit (0: module)"),
      llvm::cl::init(0)};
  ListOption<std::string> units{*this, "units",
                                llvm::cl::desc("explicit unit FQN prefixes")};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("memory/communication report path ('-': text)"),
      llvm::cl::init("")};
  Option<std::string> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("per-rank memory budget, e.g. 80GiB"), llvm::cl::init("")};
  Option<std::string> cluster{
      *this, "cluster",
      llvm::cl::desc("cluster spec JSON: predict the step time"),
      llvm::cl::init("")};
  Option<std::string> trace{
      *this, "trace",
      llvm::cl::desc("Chrome trace of the simulated step (needs cluster)"),
      llvm::cl::init("")};
  Option<std::string> prefetch{
      *this, "prefetch",
      llvm::cl::desc(
          "all-gather prefetch (fsdp-schedule): auto, none, fsdp1 or fsdp2"),
      llvm::cl::init("auto")};
  Option<int64_t> maxInFlight{
      *this, "max-in-flight",
      llvm::cl::desc(
          "most all-gathers started and not yet waited (fsdp-schedule)"),
      llvm::cl::init(2)};
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("bucket consecutive units' collectives up to this many "
                     "bytes (fsdp-schedule)"),
      llvm::cl::init(0)};
  ListOption<std::string> keepGathered{
      *this, "keep-gathered",
      llvm::cl::desc("units kept gathered from forward to backward")};
  Option<bool> reshardAfterForward{
      *this, "reshard-after-forward",
      llvm::cl::desc("reshard parameters after forward"), llvm::cl::init(true)};
};

/// Adds the full planning pipeline to `pm`.
void buildFSDPPipeline(OpPassManager &pm, const PipelineOptions &options);

/// Registers every pass and `fsdp-pipeline`.
void registerAllFSDPPasses();

} // namespace mlir::fsdp

#endif // FSDP_TRANSFORMS_PASSES_H
