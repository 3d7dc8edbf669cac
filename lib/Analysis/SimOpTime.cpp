//===- SimOpTime.cpp - the simulator's time of one compute op -------------===//
//
// The roofline of one nn op on a cluster (Williams, Waterman & Patterson,
// CACM 2009), shared by the step simulation (Simulator.cpp) and the
// pipeline split's stage balance (PipelineSplit.cpp), so that both price an
// op alike. The model is described at the top of Simulator.cpp.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Dialect/NN/NN.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

/// K / (K + matmul_half_k) for a GEMM with reduction length K (the input's
/// last dimension for nn.linear; the contracted dimension of the left operand
/// for nn.matmul, as NNCost's flopsOf); 1 without the key.
static double reductionFactor(const ClusterSpec &spec, Operation *op) {
  if (spec.matmulHalfK <= 0)
    return 1;
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
  int64_t k = 1;
  if (auto linear = dyn_cast<nn::LinearOp>(op))
    k = cols(linear.getInput());
  else if (auto mm = dyn_cast<nn::MatmulOp>(op))
    k = mm.getTransposeA() ? rows(mm.getLhs()) : cols(mm.getLhs());
  return double(k) / (double(k) + spec.matmulHalfK);
}

FailureOr<double> Simulator::opTime(Operation *op, int64_t *flopsOut,
                                    int64_t *bytesOut,
                                    std::string *matmulDtype) const {
  auto cost = dyn_cast<nn::CostOpInterface>(op);
  if (!cost)
    return 0.0;
  int64_t flops = cost.getFlops(), bytes = cost.getBytesAccessed();
  if (flopsOut)
    *flopsOut = flops;
  if (bytesOut)
    *bytesOut = bytes;
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
    eff = isa<nn::AttentionOp, nn::AttentionGradOp>(op)
              ? spec.effAttention
              : spec.effMatmul * reductionFactor(spec, op);
    if (matmulDtype)
      *matmulDtype = dtype;
  } else {
    peak = spec.peakFlops.at("f32");
    eff = spec.effElementwise;
  }
  if (auto it = spec.opEfficiency.find(op->getName().getStringRef().str());
      it != spec.opEfficiency.end())
    (flops > 0 ? eff : effMem) = it->second;
  return std::max(flops / (peak * eff),
                  bytes / (spec.memoryBandwidth * effMem));
}
