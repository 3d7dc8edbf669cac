//===- SimOpTime.cpp - the simulator's time of one compute op -------------===//
//
// The roofline of one nn op on a cluster (Williams, Waterman & Patterson,
// CACM 2009), shared by the step simulation (Simulator.cpp) and the
// pipeline split's stage balance (PipelineSplit.cpp), so that both price an
// op alike. The model is described at the top of Simulator.cpp.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Dialect/NN/NN.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

/// The reduction length K of a GEMM for ClusterSpec::matmulEfficiency: the
/// input's last dimension for nn.linear, the contracted dimension of the left
/// operand for nn.matmul (NNCost's flopsOf); 1 for other ops.
static int64_t reductionLength(Operation *op) {
  // A tensor as a matrix [rows, last dimension] (NNCost's rows, cols).
  auto cols = [](Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    return t.getRank() ? t.getShape().back() : int64_t(1);
  };
  auto rows = [&](Value v) {
    int64_t c = cols(v);
    return c ? cast<RankedTensorType>(v.getType()).getNumElements() / c
             : int64_t(0);
  };
  if (auto linear = dyn_cast<nn::LinearOp>(op))
    return cols(linear.getInput());
  if (auto mm = dyn_cast<nn::MatmulOp>(op))
    return mm.getTransposeA() ? rows(mm.getLhs()) : cols(mm.getLhs());
  return 1;
}

FailureOr<double> Simulator::opTime(Operation *op, int64_t *flopsOut,
                                    int64_t *bytesOut,
                                    std::string *matmulDtype) const {
  auto cost = dyn_cast<nn::CostOpInterface>(op);
  if (!cost)
    return 0.0;
  int64_t flops = cost.getFlops(), bytes = cost.getBytesAccessed();
  std::string dtype = "f32";
  for (Value v : op->getOperands())
    if (auto t = dyn_cast<RankedTensorType>(v.getType());
        t && isa<FloatType>(t.getElementType())) {
      dtype = nn::dtypeName(t.getElementType()).str();
      if (dtype.empty()) // a float type without a peak of its own
        dtype = "f32";
      break;
    }
  double peak, eff, effMem = spec.effMemory;
  if (isa<nn::LinearOp, nn::MatmulOp, nn::AttentionOp, nn::AttentionGradOp>(
          op)) {
    auto it = spec.peakFlops.find(dtype);
    if (it == spec.peakFlops.end())
      return op->emitError() << "the cluster spec has no peak_flops." << dtype
                             << " for this op's dtype";
    peak = it->second;
    if (matmulDtype)
      *matmulDtype = dtype;
    // attention=unfused: Megatron-LM's kernels one after another, each GEMM
    // at the efficiency of its reduction length, each elementwise kernel at
    // the memory bandwidth (include/fsdp/Analysis/UnfusedAttention.h). The
    // FLOPs reported stay the op's (the MFU's causal count).
    if (std::optional<UnfusedAttention> ua = unfusedAttentionOf(op)) {
      double t = 0;
      int64_t moved = 0;
      for (const AttentionKernel &k : isa<nn::AttentionOp>(op)
                                          ? ua->forwardKernels()
                                          : ua->backwardKernels()) {
        double memory = k.bytes / (spec.memoryBandwidth * effMem);
        t += k.flops > 0
                 ? std::max(k.flops / (peak * spec.matmulEfficiency(k.k)),
                            memory)
                 : memory;
        moved += k.bytes;
      }
      if (flopsOut)
        *flopsOut = flops;
      if (bytesOut)
        *bytesOut = moved;
      return t;
    }
    eff = isa<nn::AttentionOp, nn::AttentionGradOp>(op)
              ? spec.effAttention
              : spec.matmulEfficiency(reductionLength(op));
  } else {
    peak = spec.peakFlops.at("f32");
    eff = spec.effElementwise;
    // PyTorch eager's chain of unfused kernels per elementwise op
    // (ClusterSpec::elementwiseTraffic); the optimizer's updates and casts
    // are one kernel either way.
    if (!isa<nn::AdamWUpdateOp, nn::SgdUpdateOp, nn::CastOp>(op))
      bytes = int64_t(double(bytes) * spec.elementwiseTraffic);
  }
  if (flopsOut)
    *flopsOut = flops;
  if (bytesOut)
    *bytesOut = bytes;
  std::string name = op->getName().getStringRef().str();
  if (auto it = spec.opEfficiency.find(name); it != spec.opEfficiency.end())
    (flops > 0 ? eff : effMem) = it->second;
  // A call's cost whatever its size (ClusterSpec::opCallSeconds), beside the
  // roofline of its work.
  auto call = spec.opCallSeconds.find(name);
  return (call != spec.opCallSeconds.end() ? call->second : 0.0) +
         std::max(flops / (peak * eff),
                  bytes / (spec.memoryBandwidth * effMem));
}
