//===- InterpreterTest.cpp - Tests of fsdp::schedule::Program -------------===//
//
// The schedule interpreter in-process on one rank (no MPI): its error
// messages (not JSON, wrong format/version, unknown op/dtype, wrong operand
// count, world-size mismatch, label out of range), a full step of the
// hand-planned linear schedule against a direct computation, and a gradient
// check of the whole step (SGD schedule, f64) against finite differences.
//
//===----------------------------------------------------------------------===//
#include "TestDevice.h"
#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace fsdp;
using namespace fsdp::rt;
using namespace fsdp::schedule;

namespace {

const std::string kDir = FSDP_TEST_SCHEDULE_DIR;

// A minimal valid schedule: y = relu(x) for a [2, 3] f32 input.
std::string tiny(const std::string &op = "nn.relu",
                 const std::string &dtype = "f32", int version = 2,
                 int worldSize = 1, const std::string &operands = "[0]") {
  return R"({"format": "fsdp-schedule", "version": )" +
         std::to_string(version) + R"(, "world_size": )" +
         std::to_string(worldSize) + R"(, "units": [],
    "buffers": [{"id": 0, "dtype": ")" +
         dtype + R"(", "shape": [2, 3]},
                {"id": 1, "dtype": "f32", "shape": [2, 3]}],
    "inputs": [{"buffer": 0, "role": "features", "global_shape": [2, 3]}],
    "outputs": [{"buffer": 1, "role": "output"}],
    "instructions": [{"op": ")" +
         op + R"(", "operands": )" + operands +
         R"(, "results": [1], "loc": "tiny.mlir:4:7", "frees": [0]}]})";
}

std::string errorOf(const std::string &text, bool checkWorld = true) {
  try {
    Program::fromString(text, checkWorld ? fsdp_world_size() : 0, "test.json");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(haystack, needle)                                           \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

TEST(Interpreter, RunsTinySchedule) {
  Program p = Program::fromString(tiny());
  int64_t peak = 0;
  HostValues out = runStep(p, {{0, {-1, 2, -3, 4, 0, 0.5}}}, &peak);
  EXPECT_EQ(out.at(1), (std::vector<double>{0, 2, 0, 4, 0, 0.5}));
  EXPECT_EQ(peak, 48); // input and result, 24 bytes each
  EXPECT_EQ(fsdp::test::allocationsLeft([&] {
              EXPECT_EQ(
                  fsdp::test::stepOnTestDevice(p, {{0, {1, 2, 3, 4, 5, 6}}}),
                  "");
            }),
            0);
}

TEST(Interpreter, NonThrowingVariants) {
  Program p;
  std::string err;
  EXPECT_FALSE(Program::tryFromString(tiny("nn.foo"), p, err));
  EXPECT_HAS(err, "unknown op 'nn.foo'");
  ASSERT_TRUE(Program::tryFromString(tiny(), p, err));
  HostValues out;
  EXPECT_FALSE(tryRunStep(p, {}, out, err));
  EXPECT_HAS(err, "input buffer 0 (role 'features') was not provided");
  ASSERT_TRUE(tryRunStep(p, {{0, {1, -1, 1, -1, 1, -1}}}, out, err));
  EXPECT_EQ(out.at(1), (std::vector<double>{1, 0, 1, 0, 1, 0}));
  EXPECT_FALSE(Program::tryFromFile("/nonexistent.json", p, err));
}

TEST(Interpreter, ErrorNotJson) {
  std::string m = errorOf("{\"format\": \"fsdp-schedule\", \"version\": 2,,}");
  EXPECT_HAS(m, "test.json: not valid JSON");
  EXPECT_HAS(m, "line 1, column 42");
}

TEST(Interpreter, ErrorWrongFormatAndVersion) {
  std::string m = errorOf(tiny("nn.relu", "f32", 1));
  EXPECT_HAS(m, "unsupported schedule version 1");
  EXPECT_HAS(m, "supports version 2 (recompile it with this fsdp-translate)");
  m = errorOf(R"({"format": "onnx", "version": 1})");
  EXPECT_HAS(m, "'format' is \"onnx\", expected \"fsdp-schedule\"");
}

TEST(Interpreter, ErrorUnknownOpAndDtype) {
  std::string m = errorOf(tiny("nn.softmax"));
  EXPECT_HAS(m, "instruction #0 (tiny.mlir:4:7): unknown op 'nn.softmax'");
  m = errorOf(tiny("nn.relu", "f8"));
  EXPECT_HAS(m, "buffer 0: unknown dtype 'f8'");
  m = errorOf(tiny("nn.relu", "bf16")); // bf16 is known, but one per op
  EXPECT_HAS(m, "mixed dtypes (bf16 and f32)");
}

TEST(Interpreter, ErrorOperandCountAndDtype) {
  std::string m = errorOf(tiny("nn.add"));
  EXPECT_HAS(m, "'nn.add' (tiny.mlir:4:7): expected 2 operand(s), got 1");
  m = errorOf(tiny("nn.relu", "i32"));
  EXPECT_HAS(m, "has dtype i32, expected a float dtype (f32, f64, bf16, f16)");
  m = errorOf(tiny("nn.relu", "f32", 2, 1, "[7]"));
  EXPECT_HAS(m, "unknown buffer id 7");
}

TEST(Interpreter, ErrorWorldSize) {
  std::string m = errorOf(tiny("nn.relu", "f32", 2, 4));
  EXPECT_HAS(m, "planned for world_size 4 but 1 rank(s) are running");
  EXPECT_EQ(errorOf(tiny("nn.relu", "f32", 2, 4), /*checkWorld=*/false), "");
}

TEST(Interpreter, ErrorMissingFileAndInput) {
  try {
    Program::fromFile("/nonexistent/s.json");
    FAIL();
  } catch (const Error &e) {
    EXPECT_HAS(e.what(), "cannot open schedule file '/nonexistent/s.json'");
  }
  Program p = Program::fromString(tiny());
  try {
    runStep(p, {{0, {1, 2}}});
    FAIL();
  } catch (const Error &e) {
    EXPECT_HAS(e.what(), "needs 6 values, got 2");
  }
}

// Inputs of the linear schedule (test/unit/schedules/gen_linear.py: F = 13,
// C = 5, global batch 12) on one rank.
HostValues linearInputs(const Program &p, int64_t badLabel = -1) {
  HostValues in;
  for (const IoDesc &io : p.inputs()) {
    const BufferDesc &b = p.buffer(io.buffer);
    std::vector<double> v(b.numel);
    for (int64_t i = 0; i < b.numel; ++i) {
      if (io.role == "features")
        v[i] = std::sin(0.37 * i + 0.1);
      else if (io.role == "labels")
        v[i] = (i * 3) % 5;
      else if (io.role == "step")
        v[i] = 1;
      else if (io.role == "param")
        v[i] = 0.2 * std::cos(0.71 * i);
    }
    if (io.role == "labels" && badLabel >= 0)
      v[2] = static_cast<double>(badLabel);
    in[io.buffer] = v;
  }
  return in;
}

TEST(Interpreter, LinearStepMatchesDirectComputation) {
  Program p = Program::fromFile(kDir + "/linear_f64_np1.json");
  HostValues in = linearInputs(p);
  int64_t peak = 0;
  HostValues out = runStep(p, in, &peak);
  const int64_t b = 12, f = 13, c = 5;
  const auto &x = in.at(0), &lab = in.at(1), &w = in.at(3);
  double loss = 0;
  for (int64_t i = 0; i < b; ++i) {
    std::vector<double> z(c);
    double mx = -1e300, s = 0;
    for (int64_t k = 0; k < c; ++k) {
      z[k] = w[c * f + k];
      for (int64_t j = 0; j < f; ++j)
        z[k] += x[i * f + j] * w[k * f + j];
      mx = std::max(mx, z[k]);
    }
    for (int64_t k = 0; k < c; ++k)
      s += std::exp(z[k] - mx);
    loss += mx + std::log(s) - z[static_cast<int64_t>(lab[i])];
  }
  loss /= b;
  int64_t lossId = -1;
  for (const IoDesc &io : p.outputs())
    if (io.role == "loss")
      lossId = io.buffer;
  EXPECT_NEAR(out.at(lossId).at(0), loss, 1e-12);
  EXPECT_GT(peak, 0);
  EXPECT_EQ(fsdp::test::allocationsLeft(
                [&] { EXPECT_EQ(fsdp::test::stepOnTestDevice(p, in), ""); }),
            0);
}

TEST(Interpreter, LabelOutOfRangeIsAnError) {
  Program p = Program::fromFile(kDir + "/linear_f64_np1.json");
  try {
    runStep(p, linearInputs(p, 5));
    FAIL();
  } catch (const Error &e) {
    EXPECT_HAS(e.what(), "'nn.cross_entropy' (linear.mlir:5:3)");
    EXPECT_HAS(e.what(), "label 5 at position 2 is outside [0, 5)");
  }
  HostValues bad = linearInputs(p, 5);
  EXPECT_EQ(fsdp::test::allocationsLeft([&] {
              EXPECT_HAS(fsdp::test::stepOnTestDevice(p, bad), "label 5");
            }),
            0); // released on the error path
}

// With SGD (lr 0.5, no weight decay) p' = p - lr*g, so the gradient the step
// applied is (p - p')/lr; it must equal the finite-difference derivative of
// the loss the same schedule reports.
TEST(Interpreter, WholeStepGradientCheck) {
  Program p = Program::fromFile(kDir + "/linear_sgd_f64_np1.json");
  HostValues in = linearInputs(p);
  int64_t lossId = -1, paramOut = -1, paramIn = -1;
  for (const IoDesc &io : p.outputs()) {
    if (io.role == "loss")
      lossId = io.buffer;
    if (io.role == "param")
      paramOut = io.buffer;
  }
  for (const IoDesc &io : p.inputs())
    if (io.role == "param")
      paramIn = io.buffer;
  HostValues out = runStep(p, in);
  const double lr = 0.5, h = 1e-6;
  const auto &p0 = in.at(paramIn), &p1 = out.at(paramOut);
  for (size_t i = 0; i < p0.size(); ++i) {
    HostValues plus = in, minus = in;
    plus[paramIn][i] += h;
    minus[paramIn][i] -= h;
    double fd =
        (runStep(p, plus).at(lossId)[0] - runStep(p, minus).at(lossId)[0]) /
        (2 * h);
    EXPECT_NEAR((p0[i] - p1[i]) / lr, fd, 1e-7) << "parameter element " << i;
  }
}

} // namespace

namespace {

// y = embedding(tokens [2, 3] i32, table [V=4, C=2] f32), then attention over
// y as q, k and v (with its statistics, buffer 5: `lse`); for the
// transformer-op checks below.
std::string embedSchedule(
    const std::string &attentionAttrs = R"("num_heads": 2, "num_kv_heads": 1)",
    const std::string &kvShape = "[2, 3, 1]",
    const std::string &lse = R"("dtype": "f32", "shape": [2, 2, 3])") {
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "units": [],
    "buffers": [{"id": 0, "dtype": "i32", "shape": [2, 3]},
                {"id": 1, "dtype": "f32", "shape": [4, 2], "class": "param"},
                {"id": 2, "dtype": "f32", "shape": [2, 3, 2]},
                {"id": 3, "dtype": "f32", "shape": )" +
         kvShape + R"(},
                {"id": 4, "dtype": "f32", "shape": [2, 3, 2]},
                {"id": 5, )" +
         lse + R"(}],
    "inputs": [{"buffer": 0, "role": "tokens", "global_shape": [2, 3]},
               {"buffer": 1, "role": "param", "fqn": "wte"}],
    "outputs": [{"buffer": 4, "role": "output"}],
    "instructions": [
      {"op": "nn.embedding", "operands": [0, 1], "results": [2],
       "loc": "gpt.mlir:3:9"},
      {"op": "nn.split", "operands": [2], "results": [3, 3],
       "attrs": {"axis": -1, "sizes": [1, 1]}, "loc": "gpt.mlir:4:9"},
      {"op": "nn.attention", "operands": [2, 3, 3], "results": [4, 5],
       "attrs": {)" +
         attentionAttrs + R"(}, "loc": "gpt.mlir:5:9"}]})";
}

} // namespace

TEST(Interpreter, EmbeddingIndexOutOfRangeIsAnError) {
  // (The split's two results share one buffer id, which running would
  // reject, but the step stops at instruction #0.)
  std::string text = embedSchedule();
  Program p = Program::fromString(text);
  try {
    runStep(p, {{0, {0, 1, 2, 3, 4, 0}}, {1, {0, 0, 0, 0, 0, 0, 0, 0}}});
    FAIL();
  } catch (const Error &e) {
    EXPECT_HAS(e.what(), "instruction #0 'nn.embedding' (gpt.mlir:3:9)");
    EXPECT_HAS(e.what(), "index 4 at position 4 is outside [0, 4)");
  }
}

TEST(Interpreter, TransformerOpValidation) {
  std::string m =
      errorOf(embedSchedule(R"("num_heads": 3, "num_kv_heads": 2)"));
  EXPECT_HAS(m, "'nn.attention' (gpt.mlir:5:9): num_heads 3 must be a "
                "positive multiple of num_kv_heads 2");
  m = errorOf(
      embedSchedule(R"("num_heads": 2, "num_kv_heads": 1)", "[2, 3, 2]"));
  EXPECT_HAS(m, "'nn.split' (gpt.mlir:4:9): piece 3 [2, 3, 2] should be "
                "[2, 3, 1]");
  m = errorOf(embedSchedule(R"("num_heads": 2)"));
  EXPECT_HAS(m, "missing attribute 'num_kv_heads'");
  // The statistics: [B, Hq, T] in f32 (f64 for f64 tensors).
  m = errorOf(embedSchedule(R"("num_heads": 2, "num_kv_heads": 1)", "[2, 3, 1]",
                            R"("dtype": "f64", "shape": [2, 2, 3])"));
  EXPECT_HAS(m, "'nn.attention' (gpt.mlir:5:9): logsumexp buffer 5 [2, 2, 3] "
                "f64 should be [2, 2, 3] f32");
  m = errorOf(embedSchedule(R"("num_heads": 2, "num_kv_heads": 1)", "[2, 3, 1]",
                            R"("dtype": "f32", "shape": [2, 3, 2])"));
  EXPECT_HAS(m, "logsumexp buffer 5 [2, 3, 2] f32 should be [2, 2, 3] f32");
}
