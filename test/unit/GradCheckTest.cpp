//===- GradCheckTest.cpp - finite-difference check of every nn op's VJP ---===//
//
// For each differentiable nn op, a small f64 module computes a scalar loss
// from the op (loss = Σ op(x, w) · r with r fixed random weights, or the
// cross-entropy itself). The module goes through fsdp-autodiff alone and the
// JSON schedule translation in-process, and the runtime interpreter runs the
// unsharded step. Every element of every analytic gradient is compared with
// the fourth-order central difference
// (−f(p+2h) + 8f(p+h) − 8f(p−h) + f(p−2h)) / 12h of the same schedule's loss
// (truncation O(h⁴), so h can be large enough that rounding in the loss,
// ~ε·|f|/h, stays far below the tolerance even for small gradients).
//
//===----------------------------------------------------------------------===//
#include "fsdp/Executor.h"
#include "fsdp/InitAll.h"
#include "fsdp/Target/Schedule.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

using fsdp::rt::HostValues;
using fsdp::schedule::Program;

constexpr double kStep = 1e-4;
constexpr double kTolerance = 1e-6;

/// Parses `src`, runs fsdp-autodiff, translates to a JSON schedule and loads
/// it. Returns false (with a gtest failure) on any error.
bool compile(const char *src, Program &prog) {
  mlir::DialectRegistry registry;
  mlir::fsdp::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::string diags;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diags);
    os << d << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(src, &ctx);
  if (!module) {
    ADD_FAILURE() << "parse failed:\n" << diags;
    return false;
  }
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::fsdp::createFSDPAutodiff());
  if (mlir::failed(pm.run(*module))) {
    ADD_FAILURE() << "fsdp-autodiff failed:\n" << diags;
    return false;
  }
  std::string json;
  llvm::raw_string_ostream os(json);
  if (mlir::failed(mlir::fsdp::translateToSchedule(*module, os))) {
    ADD_FAILURE() << "translation failed:\n" << diags;
    return false;
  }
  std::string error;
  if (!Program::tryFromString(json, prog, error, /*expectedWorldSize=*/0,
                              "<gradcheck>")) {
    ADD_FAILURE() << "schedule rejected: " << error << "\n" << json;
    return false;
  }
  return true;
}

struct Options {
  /// Parameter values are drawn uniformly from [-range, range] ...
  double range = 1.0;
  /// ... and redrawn while closer than this to 0 (kinks such as relu's).
  double avoidZero = 0.0;
  /// `tokens` inputs are drawn uniformly from [0, tokenRange).
  int64_t tokenRange = 1;
  unsigned seed = 20240611;
};

/// Runs the gradient check of the module `src`; returns the worst relative
/// error over every gradient element (and fails the test above tolerance).
double gradCheck(const char *src, const Options &opt = {}) {
  Program prog;
  if (!compile(src, prog))
    return INFINITY;

  // Inputs: parameters get random values, labels random classes.
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> uni(-opt.range, opt.range);
  HostValues inputs;
  std::map<std::string, int64_t> paramBuffer; // fqn -> input buffer
  for (const fsdp::schedule::IoDesc &io : prog.inputs()) {
    const fsdp::schedule::BufferDesc &bd = prog.buffer(io.buffer);
    std::vector<double> v(bd.numel);
    if (io.role == "param") {
      EXPECT_FALSE(io.fqn.empty()) << "unsharded param input without fqn";
      EXPECT_TRUE(io.unit.empty());
      EXPECT_EQ(bd.cls, "param");
      paramBuffer[io.fqn] = io.buffer;
      for (double &x : v)
        do
          x = uni(rng);
        while (std::fabs(x) < opt.avoidZero);
    } else if (io.role == "labels") {
      int64_t classes = prog.numClasses();
      EXPECT_GT(classes, 0);
      std::uniform_int_distribution<int64_t> cls(0, classes - 1);
      for (double &x : v)
        x = static_cast<double>(cls(rng));
    } else if (io.role == "step") {
      v.assign(1, 3.0); // the optimizer step nn.dropout's mask depends on
    } else if (io.role == "tokens") {
      std::uniform_int_distribution<int64_t> tok(0, opt.tokenRange - 1);
      for (double &x : v)
        x = static_cast<double>(tok(rng));
    } else {
      ADD_FAILURE() << "unexpected input role '" << io.role << "'";
      return INFINITY;
    }
    inputs[io.buffer] = std::move(v);
  }

  int64_t lossBuffer = -1;
  std::map<std::string, int64_t> gradBuffer; // fqn -> output buffer
  for (const fsdp::schedule::IoDesc &io : prog.outputs()) {
    if (io.role == "loss")
      lossBuffer = io.buffer;
    else if (io.role == "grad")
      gradBuffer[io.fqn] = io.buffer;
    else
      ADD_FAILURE() << "unexpected output role '" << io.role << "'";
  }
  EXPECT_GE(lossBuffer, 0) << "no loss output";
  EXPECT_FALSE(gradBuffer.empty()) << "no gradient output";
  if (lossBuffer < 0 || gradBuffer.empty())
    return INFINITY;

  HostValues outputs;
  std::string error;
  if (!fsdp::rt::tryRunStep(prog, inputs, outputs, error)) {
    ADD_FAILURE() << "run failed: " << error;
    return INFINITY;
  }
  auto lossAt = [&](const HostValues &in) -> double {
    HostValues out;
    std::string err;
    if (!fsdp::rt::tryRunStep(prog, in, out, err)) {
      ADD_FAILURE() << "run failed: " << err;
      return NAN;
    }
    return out.at(lossBuffer).at(0);
  };
  EXPECT_TRUE(std::isfinite(outputs.at(lossBuffer).at(0)));

  double worst = 0.0;
  for (const auto &[fqn, gbuf] : gradBuffer) {
    auto pit = paramBuffer.find(fqn);
    if (pit == paramBuffer.end()) {
      ADD_FAILURE() << "gradient of unknown parameter '" << fqn << "'";
      continue;
    }
    const std::vector<double> &analytic = outputs.at(gbuf);
    std::vector<double> &p = inputs.at(pit->second);
    EXPECT_EQ(analytic.size(), p.size()) << fqn;
    if (analytic.size() != p.size())
      continue;
    double worstHere = 0.0;
    for (size_t i = 0; i < p.size(); ++i) {
      double saved = p[i];
      auto at = [&](double delta) {
        p[i] = saved + delta;
        return lossAt(inputs);
      };
      double numeric =
          (-at(2 * kStep) + 8 * at(kStep) - 8 * at(-kStep) + at(-2 * kStep)) /
          (12 * kStep);
      p[i] = saved;
      double a = analytic[i];
      // Below |a| + |numeric| = 1e-5 the error is judged absolutely (to
      // 1e-11), above the rounding of the difference quotient (~1e-12·|f|).
      double rel = std::fabs(a - numeric) /
                   std::max(1e-5, std::fabs(a) + std::fabs(numeric));
      EXPECT_LT(rel, kTolerance)
          << "d loss / d " << fqn << "[" << i << "]: analytic " << a
          << ", numeric " << numeric;
      worstHere = std::max(worstHere, rel);
    }
    worst = std::max(worst, worstHere);
  }
  // Recorded in the test log (and in the XML report as a property).
  ::testing::Test::RecordProperty("worst_relative_error",
                                  std::to_string(worst));
  std::printf("[ gradcheck ] %s: worst relative error %.3e\n",
              ::testing::UnitTest::GetInstance()->current_test_info()->name(),
              worst);
  return worst;
}

//===----------------------------------------------------------------------===//
// nn.linear
//===----------------------------------------------------------------------===//

TEST(GradCheck, LinearWithBias) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %w: tensor<7x5xf64> {nn.param = "w"},
                   %b: tensor<7xf64> {nn.param = "b"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.linear %x, %w, %b : (tensor<3x5xf64>, tensor<7x5xf64>, tensor<7xf64>) -> tensor<3x7xf64>
  %p = nn.mul %y, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, LinearWithoutBias) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %w: tensor<7x5xf64> {nn.param = "w"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.linear %x, %w : (tensor<3x5xf64>, tensor<7x5xf64>) -> tensor<3x7xf64>
  %p = nn.mul %y, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, LinearRank3Input) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x5xf64> {nn.param = "x"},
                   %w: tensor<7x5xf64> {nn.param = "w"},
                   %b: tensor<7xf64> {nn.param = "b"},
                   %r: tensor<2x3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.linear %x, %w, %b : (tensor<2x3x5xf64>, tensor<7x5xf64>, tensor<7xf64>) -> tensor<2x3x7xf64>
  %p = nn.mul %y, %r : tensor<2x3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

//===----------------------------------------------------------------------===//
// nn.matmul: c[3x7] = op(a) · op(b) with the contraction over 5
//===----------------------------------------------------------------------===//

TEST(GradCheck, Matmul) {
  gradCheck(R"mlir(
func.func @forward(%a: tensor<3x5xf64> {nn.param = "a"},
                   %b: tensor<5x7xf64> {nn.param = "b"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %c = nn.matmul %a, %b : (tensor<3x5xf64>, tensor<5x7xf64>) -> tensor<3x7xf64>
  %p = nn.mul %c, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, MatmulTransposeA) {
  gradCheck(R"mlir(
func.func @forward(%a: tensor<5x3xf64> {nn.param = "a"},
                   %b: tensor<5x7xf64> {nn.param = "b"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %c = nn.matmul %a, %b {transpose_a = true} : (tensor<5x3xf64>, tensor<5x7xf64>) -> tensor<3x7xf64>
  %p = nn.mul %c, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, MatmulTransposeB) {
  gradCheck(R"mlir(
func.func @forward(%a: tensor<3x5xf64> {nn.param = "a"},
                   %b: tensor<7x5xf64> {nn.param = "b"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %c = nn.matmul %a, %b {transpose_b = true} : (tensor<3x5xf64>, tensor<7x5xf64>) -> tensor<3x7xf64>
  %p = nn.mul %c, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, MatmulTransposeAB) {
  gradCheck(R"mlir(
func.func @forward(%a: tensor<5x3xf64> {nn.param = "a"},
                   %b: tensor<7x5xf64> {nn.param = "b"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %c = nn.matmul %a, %b {transpose_a = true, transpose_b = true} : (tensor<5x3xf64>, tensor<7x5xf64>) -> tensor<3x7xf64>
  %p = nn.mul %c, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

TEST(GradCheck, Add) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %w: tensor<3x5xf64> {nn.param = "w"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.add %x, %w : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, Mul) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %w: tensor<3x5xf64> {nn.param = "w"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.mul %x, %w : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// x used twice by one op: the two operand gradients must be accumulated.
TEST(GradCheck, MulSameOperand) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.mul %x, %x : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, Relu) {
  Options opt;
  opt.avoidZero = 1e-3; // no element within 1e-3 of the kink
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.relu %x : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

TEST(GradCheck, GeluExact) {
  Options opt;
  opt.range = 3.0;
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.gelu %x {approximate = #nn.approximation<none>} : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

TEST(GradCheck, GeluTanh) {
  Options opt;
  opt.range = 3.0;
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.gelu %x {approximate = #nn.approximation<tanh>} : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

//===----------------------------------------------------------------------===//
// Reductions and broadcasts
//===----------------------------------------------------------------------===//

TEST(GradCheck, ReduceSumOneAxis) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x4x5xf64> {nn.param = "x"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.reduce_sum %x {axes = array<i64: 1>} : tensor<3x4x5xf64> -> tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, ReduceSumSeveralAxes) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x4x5xf64> {nn.param = "x"},
                   %r: tensor<4xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.reduce_sum %x {axes = array<i64: 0, 2>} : tensor<3x4x5xf64> -> tensor<4xf64>
  %p = nn.mul %y, %r : tensor<4xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0>} : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, Broadcast) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %r: tensor<3x4x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.broadcast %x, %r {axes = array<i64: 1>} : (tensor<3x5xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %p = nn.mul %y, %r : tensor<3x4x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<3x4x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, BroadcastSeveralAxes) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<4xf64> {nn.param = "x"},
                   %r: tensor<3x4x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.broadcast %x, %r {axes = array<i64: 0, 2>} : (tensor<4xf64>, tensor<3x4x5xf64>) -> tensor<3x4x5xf64>
  %p = nn.mul %y, %r : tensor<3x4x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<3x4x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

//===----------------------------------------------------------------------===//
// nn.cross_entropy
//===----------------------------------------------------------------------===//

TEST(GradCheck, CrossEntropyRank2) {
  Options opt;
  opt.range = 2.0;
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %y: tensor<3xi32> {nn.data = "labels"})
    -> (tensor<f64> {nn.loss}) {
  %l = nn.cross_entropy %x, %y : (tensor<3x5xf64>, tensor<3xi32>) -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

TEST(GradCheck, CrossEntropyRank3) {
  Options opt;
  opt.range = 2.0;
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x5xf64> {nn.param = "x"},
                   %y: tensor<2x3xi32> {nn.data = "labels"})
    -> (tensor<f64> {nn.loss}) {
  %l = nn.cross_entropy %x, %y : (tensor<2x3x5xf64>, tensor<2x3xi32>) -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

// A small composition (linear → gelu → linear → cross-entropy), so that
// gradients flow through several VJPs and into a shared input.
TEST(GradCheck, ComposedMlp) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %y: tensor<3xi32> {nn.data = "labels"},
                   %w1: tensor<7x5xf64> {nn.param = "fc1.weight"},
                   %b1: tensor<7xf64> {nn.param = "fc1.bias"},
                   %w2: tensor<3x7xf64> {nn.param = "fc2.weight"})
    -> (tensor<f64> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<3x5xf64>, tensor<7x5xf64>, tensor<7xf64>) -> tensor<3x7xf64>
  %a = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<3x7xf64>
  %s = nn.add %a, %h : tensor<3x7xf64>
  %z = nn.linear %s, %w2 : (tensor<3x7xf64>, tensor<3x7xf64>) -> tensor<3x3xf64>
  %l = nn.cross_entropy %z, %y : (tensor<3x3xf64>, tensor<3xi32>) -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

//===----------------------------------------------------------------------===//
// Transformer ops (runtime/docs/schedule-format.md, "Transformer ops")
//===----------------------------------------------------------------------===//

TEST(GradCheck, LinearTransposeWeight) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %w: tensor<5x7xf64> {nn.param = "w"},
                   %b: tensor<7xf64> {nn.param = "b"},
                   %r: tensor<3x7xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.linear %x, %w, %b {transpose_weight = true} : (tensor<3x5xf64>, tensor<5x7xf64>, tensor<7xf64>) -> tensor<3x7xf64>
  %p = nn.mul %y, %r : tensor<3x7xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x7xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// Gradient wrt the table; 8 tokens over 5 rows, so rows repeat.
TEST(GradCheck, Embedding) {
  Options opt;
  opt.tokenRange = 5;
  gradCheck(R"mlir(
func.func @forward(%i: tensor<2x4xi32> {nn.data = "tokens"},
                   %e: tensor<5x3xf64> {nn.param = "wte"},
                   %r: tensor<2x4x3xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.embedding %i, %e : (tensor<2x4xi32>, tensor<5x3xf64>) -> tensor<2x4x3xf64>
  %p = nn.mul %y, %r : tensor<2x4x3xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x4x3xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

// Both operands; the table has more positions (5) than the sequence (3).
TEST(GradCheck, PositionEmbedding) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x4xf64> {nn.param = "x"},
                   %e: tensor<5x4xf64> {nn.param = "wpe"},
                   %r: tensor<2x3x4xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.position_embedding %x, %e : (tensor<2x3x4xf64>, tensor<5x4xf64>) -> tensor<2x3x4xf64>
  %p = nn.mul %y, %r : tensor<2x3x4xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x3x4xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, LayerNorm) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x5xf64> {nn.param = "x"},
                   %w: tensor<5xf64> {nn.param = "ln.weight"},
                   %b: tensor<5xf64> {nn.param = "ln.bias"},
                   %r: tensor<2x3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.layer_norm %x, %w, %b {eps = 1.0e-05 : f64} : (tensor<2x3x5xf64>, tensor<5xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>
  %p = nn.mul %y, %r : tensor<2x3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, RmsNorm) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x5xf64> {nn.param = "x"},
                   %w: tensor<5xf64> {nn.param = "norm.weight"},
                   %r: tensor<2x3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.rms_norm %x, %w {eps = 1.0e-06 : f64} : (tensor<2x3x5xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>
  %p = nn.mul %y, %r : tensor<2x3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// Two heads of dim 4, then the inverse rotation of a second copy (whose VJP
// is the forward rotation).
TEST(GradCheck, Rope) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x8xf64> {nn.param = "x"},
                   %r: tensor<2x3x8xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.rope %x {head_dim = 4 : i64, theta = 10.0 : f64} : tensor<2x3x8xf64> -> tensor<2x3x8xf64>
  %z = nn.rope %x {head_dim = 4 : i64, theta = 10.0 : f64, inverse = true} : tensor<2x3x8xf64> -> tensor<2x3x8xf64>
  %p = nn.mul %y, %r : tensor<2x3x8xf64>
  %q = nn.mul %z, %p : tensor<2x3x8xf64>
  %l = nn.reduce_sum %q {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// The frequency transforms keep the VJP: YaRN with an attention factor
// (the rotation scaled by 1.3, no longer orthogonal) and Llama 3.1's bands.
TEST(GradCheck, RopeScaled) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x8xf64> {nn.param = "x"},
                   %r: tensor<2x3x8xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.rope %x {head_dim = 4 : i64, theta = 10.0 : f64, rope_type = "yarn", factor = 4.0 : f64, original_max_position_embeddings = 16 : i64, attention_factor = 1.3 : f64} : tensor<2x3x8xf64> -> tensor<2x3x8xf64>
  %z = nn.rope %x {head_dim = 4 : i64, theta = 10.0 : f64, inverse = true, rope_type = "llama3", factor = 8.0 : f64, original_max_position_embeddings = 16 : i64} : tensor<2x3x8xf64> -> tensor<2x3x8xf64>
  %p = nn.mul %y, %r : tensor<2x3x8xf64>
  %q = nn.mul %z, %p : tensor<2x3x8xf64>
  %l = nn.reduce_sum %q {axes = array<i64: 0, 1, 2>} : tensor<2x3x8xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// GQA: 4 query heads share 2 kv heads of dim 3.
TEST(GradCheck, AttentionGQA) {
  gradCheck(R"mlir(
func.func @forward(%q: tensor<2x5x12xf64> {nn.param = "q"},
                   %k: tensor<2x5x6xf64> {nn.param = "k"},
                   %v: tensor<2x5x6xf64> {nn.param = "v"},
                   %r: tensor<2x5x12xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y, %lse = nn.attention %q, %k, %v {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x5x12xf64>, tensor<2x5x6xf64>, tensor<2x5x6xf64>) -> (tensor<2x5x12xf64>, tensor<2x4x5xf64>)
  %p = nn.mul %y, %r : tensor<2x5x12xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x5x12xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, AttentionMultiHead) {
  gradCheck(R"mlir(
func.func @forward(%q: tensor<2x5x6xf64> {nn.param = "q"},
                   %k: tensor<2x5x6xf64> {nn.param = "k"},
                   %v: tensor<2x5x6xf64> {nn.param = "v"},
                   %r: tensor<2x5x6xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y, %lse = nn.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x5x6xf64>, tensor<2x5x6xf64>, tensor<2x5x6xf64>) -> (tensor<2x5x6xf64>, tensor<2x2x5xf64>)
  %p = nn.mul %y, %r : tensor<2x5x6xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x5x6xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

TEST(GradCheck, Silu) {
  Options opt;
  opt.range = 4.0;
  gradCheck(R"mlir(
func.func @forward(%x: tensor<3x5xf64> {nn.param = "x"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.silu %x : tensor<3x5xf64>
  %p = nn.mul %y, %r : tensor<3x5xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

// The VJP applies the forward's mask (same seed, step and rows): at rate
// 0.5 about half of x's gradient is 0, and the rest scaled by 2.
TEST(GradCheck, Dropout) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<4x6xf64> {nn.param = "x"},
                   %r: tensor<4x6xf64> {nn.param = "r", nn.trainable = false},
                   %step: tensor<i64> {nn.step})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.dropout %x, %step {rate = 0.5, seed = 9} : tensor<4x6xf64>, tensor<i64>
  %p = nn.mul %y, %r : tensor<4x6xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1>} : tensor<4x6xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// Three pieces, all used (the VJP concatenates their gradients).
TEST(GradCheck, SplitAllPiecesUsed) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x3x6xf64> {nn.param = "x"},
                   %r0: tensor<2x3x2xf64> {nn.param = "r0", nn.trainable = false},
                   %r1: tensor<2x3x3xf64> {nn.param = "r1", nn.trainable = false},
                   %r2: tensor<2x3x1xf64> {nn.param = "r2", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %a, %b, %c = nn.split %x {axis = 2 : i64, sizes = array<i64: 2, 3, 1>} : tensor<2x3x6xf64> -> tensor<2x3x2xf64>, tensor<2x3x3xf64>, tensor<2x3x1xf64>
  %pa = nn.mul %a, %r0 : tensor<2x3x2xf64>
  %pb = nn.mul %b, %r1 : tensor<2x3x3xf64>
  %pc = nn.mul %c, %c : tensor<2x3x1xf64>
  %la = nn.reduce_sum %pa {axes = array<i64: 0, 1, 2>} : tensor<2x3x2xf64> -> tensor<f64>
  %lb = nn.reduce_sum %pb {axes = array<i64: 0, 1, 2>} : tensor<2x3x3xf64> -> tensor<f64>
  %lc = nn.reduce_sum %pc {axes = array<i64: 0, 1, 2>} : tensor<2x3x1xf64> -> tensor<f64>
  %s = nn.add %la, %lb : tensor<f64>
  %l = nn.add %s, %lc : tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// The middle piece is unused: its gradient is nn.zeros_like.
TEST(GradCheck, SplitOnePieceUnused) {
  gradCheck(R"mlir(
func.func @forward(%x: tensor<2x6x3xf64> {nn.param = "x"},
                   %r0: tensor<2x1x3xf64> {nn.param = "r0", nn.trainable = false},
                   %r2: tensor<2x3x3xf64> {nn.param = "r2", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %a, %b, %c = nn.split %x {axis = 1 : i64, sizes = array<i64: 1, 2, 3>} : tensor<2x6x3xf64> -> tensor<2x1x3xf64>, tensor<2x2x3xf64>, tensor<2x3x3xf64>
  %pa = nn.mul %a, %r0 : tensor<2x1x3xf64>
  %pc = nn.mul %c, %r2 : tensor<2x3x3xf64>
  %la = nn.reduce_sum %pa {axes = array<i64: 0, 1, 2>} : tensor<2x1x3xf64> -> tensor<f64>
  %lc = nn.reduce_sum %pc {axes = array<i64: 0, 1, 2>} : tensor<2x3x3xf64> -> tensor<f64>
  %l = nn.add %la, %lc : tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// Three inputs along a negative axis (-2, i.e. 1).
TEST(GradCheck, Concat) {
  gradCheck(R"mlir(
func.func @forward(%a: tensor<2x1x3xf64> {nn.param = "a"},
                   %b: tensor<2x2x3xf64> {nn.param = "b"},
                   %c: tensor<2x3x3xf64> {nn.param = "c"},
                   %r: tensor<2x6x3xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %y = nn.concat %a, %b, %c {axis = -2 : i64} : (tensor<2x1x3xf64>, tensor<2x2x3xf64>, tensor<2x3x3xf64>) -> tensor<2x6x3xf64>
  %p = nn.mul %y, %r : tensor<2x6x3xf64>
  %l = nn.reduce_sum %p {axes = array<i64: 0, 1, 2>} : tensor<2x6x3xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir");
}

// A tiny GPT-2 block end to end: embeddings, LayerNorm, fused qkv split,
// attention, projection, residual, cross-entropy over the vocabulary.
TEST(GradCheck, ComposedTransformerBlock) {
  Options opt;
  opt.tokenRange = 7;
  opt.range = 0.5;
  gradCheck(R"mlir(
func.func @forward(%tok: tensor<2x4xi32> {nn.data = "tokens"},
                   %tgt: tensor<2x4xi32> {nn.data = "labels"},
                   %wte: tensor<7x6xf64> {nn.param = "wte"},
                   %wpe: tensor<4x6xf64> {nn.param = "wpe"},
                   %lnw: tensor<6xf64> {nn.param = "ln.weight"},
                   %lnb: tensor<6xf64> {nn.param = "ln.bias"},
                   %wqkv: tensor<6x18xf64> {nn.param = "attn.c_attn.weight"},
                   %wo: tensor<6x6xf64> {nn.param = "attn.c_proj.weight"})
    -> (tensor<f64> {nn.loss}) {
  %e = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<7x6xf64>) -> tensor<2x4x6xf64>
  %h = nn.position_embedding %e, %wpe : (tensor<2x4x6xf64>, tensor<4x6xf64>) -> tensor<2x4x6xf64>
  %n = nn.layer_norm %h, %lnw, %lnb {eps = 1.0e-05 : f64} : (tensor<2x4x6xf64>, tensor<6xf64>, tensor<6xf64>) -> tensor<2x4x6xf64>
  %qkv = nn.linear %n, %wqkv {transpose_weight = true} : (tensor<2x4x6xf64>, tensor<6x18xf64>) -> tensor<2x4x18xf64>
  %q, %k, %v = nn.split %qkv {axis = -1 : i64, sizes = array<i64: 6, 6, 6>} : tensor<2x4x18xf64> -> tensor<2x4x6xf64>, tensor<2x4x6xf64>, tensor<2x4x6xf64>
  %a, %lse = nn.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x6xf64>, tensor<2x4x6xf64>, tensor<2x4x6xf64>) -> (tensor<2x4x6xf64>, tensor<2x2x4xf64>)
  %o = nn.linear %a, %wo : (tensor<2x4x6xf64>, tensor<6x6xf64>) -> tensor<2x4x6xf64>
  %x = nn.add %h, %o : tensor<2x4x6xf64>
  %logits = nn.linear %x, %wte : (tensor<2x4x6xf64>, tensor<7x6xf64>) -> tensor<2x4x7xf64>
  %l = nn.cross_entropy %logits, %tgt : (tensor<2x4x7xf64>, tensor<2x4xi32>) -> tensor<f64>
  return %l : tensor<f64>
})mlir",
            opt);
}

//===----------------------------------------------------------------------===//
// Non-differentiable input
//===----------------------------------------------------------------------===//

TEST(GradCheck, LossWithoutTrainableParameterIsAnError) {
  const char *src = R"mlir(
func.func @forward(%w: tensor<3x5xf64> {nn.param = "w"},
                   %r: tensor<3x5xf64> {nn.param = "r", nn.trainable = false})
    -> (tensor<f64> {nn.loss}) {
  %l = nn.reduce_sum %r {axes = array<i64: 0, 1>} : tensor<3x5xf64> -> tensor<f64>
  return %l : tensor<f64>
})mlir";
  mlir::DialectRegistry registry;
  mlir::fsdp::registerAllDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::vector<std::string> errors;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      errors.push_back(d.str());
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(src, &ctx);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::fsdp::createFSDPAutodiff());
  EXPECT_TRUE(mlir::failed(pm.run(*module)));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(
      errors[0].find("the loss does not depend on any trainable parameter"),
      std::string::npos)
      << errors[0];
}

} // namespace
