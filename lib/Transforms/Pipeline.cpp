//===- Pipeline.cpp - fsdp-pipeline and pass registration -----------------===//
#include "ClusterSpecCache.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::fsdp;

void mlir::fsdp::buildFSDPPipeline(OpPassManager &pm,
                                   const PipelineOptions &o) {
  FSDPAutodiffOptions ad;
  ad.frozen = llvm::to_vector(o.frozen);
  pm.addPass(createFSDPAutodiff(ad));
  FSDPMicroBatchOptions mb;
  mb.microBatches = o.microBatches;
  pm.addPass(createFSDPMicroBatch(mb));
  FSDPOptimizerOptions opt;
  opt.optimizer = o.optimizer;
  opt.lr = o.lr;
  opt.beta1 = o.beta1;
  opt.beta2 = o.beta2;
  opt.eps = o.eps;
  opt.weightDecay = o.weightDecay;
  pm.addPass(createFSDPOptimizer(opt));
  FSDPWrapOptions wrap;
  wrap.policy = o.policy;
  wrap.minUnitNumel = o.minUnitNumel;
  wrap.unitDepth = o.unitDepth;
  wrap.units = llvm::to_vector(o.units);
  pm.addPass(createFSDPWrap(wrap));
  FSDPShardOptions shard;
  shard.worldSize = o.worldSize;
  shard.strategy = o.strategy;
  shard.shardSize = o.shardSize;
  shard.paramDtype = o.paramDtype;
  shard.reduceDtype = o.reduceDtype;
  shard.masterWeights = o.masterWeights;
  shard.accumulate = o.accumulate;
  pm.addPass(createFSDPShard(shard));
  FSDPCollectivesOptions coll;
  coll.reshardAfterForward = o.reshardAfterForward;
  coll.keepGathered = llvm::to_vector(o.keepGathered);
  pm.addPass(createFSDPCollectives(coll));
  pm.addPass(createCanonicalizerPass());
  FSDPScheduleOptions sched;
  sched.prefetch = o.prefetch;
  sched.maxInFlight = o.maxInFlight;
  sched.bucketBytes = o.bucketBytes;
  sched.memoryBudget = o.memoryBudget;
  sched.cluster = o.cluster;
  // One read of cluster= for fsdp-schedule and fsdp-memory-plan.
  auto clusterSpecs = std::make_shared<ClusterSpecCache>();
  pm.addPass(createFSDPSchedule(sched, clusterSpecs));
  FSDPMemoryPlanOptions mem;
  mem.report = o.report;
  mem.memoryBudget = o.memoryBudget;
  mem.cluster = o.cluster;
  mem.trace = o.trace;
  pm.addPass(createFSDPMemoryPlan(mem, clusterSpecs));
}

void mlir::fsdp::registerAllFSDPPasses() {
  registerFSDPPasses();
  PassPipelineRegistration<PipelineOptions>(
      "fsdp-pipeline",
      "Plan a sharded training step: autodiff, optimizer, wrap, shard, "
      "collectives, schedule",
      buildFSDPPipeline);
}
