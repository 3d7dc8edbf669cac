//===- UnfusedAttentionTest.cpp - attention=unfused's pricing and bytes ---===//
//
// Simulator::opTime of an nn.attention / nn.attention_grad marked
// attention=unfused (include/fsdp/Analysis/UnfusedAttention.h) against
// counts made independently of the code, from the papers:
// - the bytes kept for the backward, Korthikanti et al. 2022, Eq. (1):
//   5·a·s²·b per layer in fp16 (2 for the softmax output, 1 for the dropout
//   mask, 2 for the dropout output);
// - the scores' traffic of Megatron-LM's kernels, per score element in fp16:
//   forward 13 bytes (q·kᵀ writes 2; the fused softmax reads 2 and writes 2;
//   dropout reads 2, writes 2 and a 1-byte mask; p·v reads 2), backward 19
//   (dP written 2; dv reads P 2; dropout's backward reads 2 + 1 and writes
//   2; the softmax's backward reads 2 + 2 and writes 2; dq and dk read dS
//   2 each), plus q, k, v, the output and their gradients once per GEMM;
// - the GEMMs, dense (Megatron masks after q·kᵀ): 2·b·a·s²·D FLOPs each,
//   2 forward and 4 backward, at the spec's efficiency for their reduction
//   length (D for q·kᵀ and dP, s for the others).
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;
using mlir::fsdp::ClusterSpec;
using mlir::fsdp::Simulator;

namespace {
/// An nn.attention over q [b, s, a·D] (k, v with the same heads) and its
/// nn.attention_grad, in fp16, in a function of their own.
struct AttentionStep {
  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
  nn::AttentionOp forward;
  nn::AttentionGradOp backward;

  AttentionStep(int64_t b, int64_t s, int64_t a, int64_t d) {
    ctx.loadDialect<nn::NNDialect, func::FuncDialect>();
    OpBuilder builder(&ctx);
    Location loc = builder.getUnknownLoc();
    module = ModuleOp::create(loc);
    auto t = RankedTensorType::get({b, s, a * d}, builder.getF16Type());
    auto fn = func::FuncOp::create(loc, "step",
                                   builder.getFunctionType({t, t, t, t}, {}));
    module->push_back(fn);
    Block *body = fn.addEntryBlock();
    builder.setInsertionPointToStart(body);
    Value q = body->getArgument(0), k = body->getArgument(1),
          v = body->getArgument(2), g = body->getArgument(3);
    auto stats = RankedTensorType::get({b, a, s}, builder.getF32Type());
    forward = nn::AttentionOp::create(builder, loc, TypeRange{t, stats}, q, k,
                                      v, a, a);
    backward = nn::AttentionGradOp::create(builder, loc, TypeRange{t, t, t}, q,
                                           k, v, forward.getResult(),
                                           forward.getLogsumexp(), g, a, a);
    func::ReturnOp::create(builder, loc);
  }
  void mark(StringRef impl) {
    mlir::fsdp::markAttentionImpl(*module, impl);
    // nn.attention's VJP copies the mark; built by hand here, copy it too.
    if (Attribute a = forward->getAttr(mlir::fsdp::kAttentionImplAttr))
      backward->setAttr(mlir::fsdp::kAttentionImplAttr, a);
  }
};

/// An A100-like spec: fp16 peak 312 TFLOP/s, HBM 2,039 GB/s at 0.8, GEMMs
/// at 0.754 · K / (K + 293).
ClusterSpec a100() {
  ClusterSpec s;
  s.peakFlops = {{"f32", 19.5e12}, {"f16", 312e12}};
  s.memoryBandwidth = 2.039e12;
  s.effMemory = 0.8;
  s.effMatmul = 0.754;
  s.matmulHalfK = 293;
  s.effAttention = 0.5;
  s.elementwiseTraffic = 2.5;
  return s;
}
} // namespace

// Korthikanti's 5as²b, and 2as²b without dropout (the softmax output).
TEST(UnfusedAttention, SavedBytesAreKorthikantisEquationOne) {
  // GPT 1.7B at TP 1: a = 24 heads of D = 96, s = 2048, micro-batch 16.
  AttentionStep step(16, 2048, 24, 96);
  EXPECT_FALSE(mlir::fsdp::unfusedAttentionOf(step.forward)); // flash: unmarked
  step.mark("flash");
  EXPECT_FALSE(mlir::fsdp::unfusedAttentionOf(step.forward));
  step.mark("unfused");
  auto ua = mlir::fsdp::unfusedAttentionOf(step.forward);
  ASSERT_TRUE(ua);
  EXPECT_EQ(ua->savedBytes(), 5LL * 24 * 2048 * 2048 * 16);
  step.mark("unfused-no-dropout");
  ua = mlir::fsdp::unfusedAttentionOf(step.forward);
  ASSERT_TRUE(ua);
  EXPECT_EQ(ua->savedBytes(), 2LL * 24 * 2048 * 2048 * 16);
}

// Memory-bound (FLOPs free): the time is the bytes above over the bandwidth.
TEST(UnfusedAttention, ScoreTrafficIsMegatronsKernels) {
  const int64_t b = 2, s = 1024, a = 4, d = 64;
  AttentionStep step(b, s, a, d);
  step.mark("unfused");
  ClusterSpec spec = a100();
  spec.peakFlops["f16"] = 1e30;
  Simulator sim(spec);
  const double e = double(b * a * s * s), q = double(b * s * a * d) * 2;
  const double bw = spec.memoryBandwidth * spec.effMemory;
  int64_t flops = 0, bytes = 0;
  FailureOr<double> fwd = sim.opTime(step.forward, &flops, &bytes);
  ASSERT_TRUE(succeeded(fwd));
  // Each GEMM reads two of q, k, v, p and writes one of them or the scores:
  // q·kᵀ reads q and k, p·v reads v and writes the output.
  EXPECT_DOUBLE_EQ(double(bytes), 13 * e + 4 * q);
  EXPECT_NEAR(*fwd, (13 * e + 4 * q) / bw, 1e-12);
  // The FLOPs reported stay the op's causal count (the MFU's).
  EXPECT_EQ(flops, step.forward.getFlops());
  FailureOr<double> bwd = sim.opTime(step.backward, nullptr, &bytes);
  ASSERT_TRUE(succeeded(bwd));
  // Four GEMMs, each reads one of q, k, v, dO and writes one of dq, dk, dv
  // or reads a second (dP = dO·vᵀ reads two).
  EXPECT_DOUBLE_EQ(double(bytes), 19 * e + 8 * q);
  EXPECT_NEAR(*bwd, (19 * e + 8 * q) / bw, 1e-12);
  // Without dropout: forward 13 − 5, backward 19 − 5.
  step.mark("unfused-no-dropout");
  ASSERT_TRUE(succeeded(sim.opTime(step.forward, nullptr, &bytes)));
  EXPECT_DOUBLE_EQ(double(bytes), 8 * e + 4 * q);
  ASSERT_TRUE(succeeded(sim.opTime(step.backward, nullptr, &bytes)));
  EXPECT_DOUBLE_EQ(double(bytes), 14 * e + 8 * q);
}

// Compute-bound (bandwidth unlimited): dense GEMMs at their K's efficiency.
TEST(UnfusedAttention, GemmsAreDenseAtTheirReductionLength) {
  const int64_t b = 1, s = 2048, a = 2, d = 128;
  AttentionStep step(b, s, a, d);
  step.mark("unfused");
  ClusterSpec spec = a100();
  spec.memoryBandwidth = 1e30;
  Simulator sim(spec);
  const double gemm = 2.0 * b * a * s * s * d, peak = 312e12;
  const double effD = 0.754 * 128 / (128 + 293.0);
  const double effS = 0.754 * 2048 / (2048 + 293.0);
  FailureOr<double> fwd = sim.opTime(step.forward);
  ASSERT_TRUE(succeeded(fwd));
  EXPECT_NEAR(*fwd, gemm / (peak * effD) + gemm / (peak * effS), 1e-12);
  FailureOr<double> bwd = sim.opTime(step.backward);
  ASSERT_TRUE(succeeded(bwd));
  EXPECT_NEAR(*bwd, gemm / (peak * effD) + 3 * gemm / (peak * effS), 1e-12);
  // The scores' dense GEMMs at K = D are slower than the flash kernel's
  // causal FLOPs at efficiency.attention (0.5).
  step.forward->removeAttr(mlir::fsdp::kAttentionImplAttr);
  step.backward->removeAttr(mlir::fsdp::kAttentionImplAttr);
  FailureOr<double> flash = sim.opTime(step.forward);
  ASSERT_TRUE(succeeded(flash));
  EXPECT_NEAR(*flash, double(step.forward.getFlops()) / (peak * 0.5), 1e-12);
  EXPECT_GT(*fwd, 2 * *flash);
}

// The elementwise traffic factor (PyTorch eager's) does not apply to
// Megatron-LM's own fused kernels.
TEST(UnfusedAttention, EagerTrafficFactorDoesNotApply) {
  AttentionStep step(2, 512, 4, 64);
  step.mark("unfused");
  ClusterSpec spec = a100();
  spec.peakFlops["f16"] = 1e30;
  FailureOr<double> at25 = Simulator(spec).opTime(step.forward);
  spec.elementwiseTraffic = 1;
  FailureOr<double> at1 = Simulator(spec).opTime(step.forward);
  ASSERT_TRUE(succeeded(at25) && succeeded(at1));
  EXPECT_DOUBLE_EQ(*at25, *at1);
}
