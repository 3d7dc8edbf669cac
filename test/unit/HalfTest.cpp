//===- HalfTest.cpp - bf16/f16 conversions and mixed-precision ops --------===//
//
// fsdp/Half.h against known bit patterns (round to nearest even, ties,
// subnormals, overflow to inf, NaN, exact widening, single rounding from
// f64), the 2-byte collectives of the C API without MPI, and the interpreter
// in-process on bf16/f16 schedules: nn.cast, f32 kernels on widened operands,
// load-time dtype errors, and peak bytes that leave out the f32 scratch.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Half.h"
#include "TestDevice.h"
#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

using namespace fsdp;
using namespace fsdp::schedule;

namespace {

uint16_t bf(uint32_t bits) { return floatToBf16(bitsFloat(bits)); }
uint16_t hf(float f) { return floatToF16(f); }

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBf16(0.0f), 0x0000);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  // Ties: to the even neighbour.
  EXPECT_EQ(bf(0x3F808000u), 0x3F80);
  EXPECT_EQ(bf(0x3F818000u), 0x3F82);
  // Just above / below a tie.
  EXPECT_EQ(bf(0x3F808001u), 0x3F81);
  EXPECT_EQ(bf(0x3F807FFFu), 0x3F80);
  // Subnormals: the smallest f32 ones round to zero, bf16's smallest stays.
  EXPECT_EQ(bf(0x00000001u), 0x0000);
  EXPECT_EQ(bf(0x80000001u), 0x8000);
  EXPECT_EQ(bf(0x00010000u), 0x0001);
  EXPECT_EQ(bf(0x00018000u), 0x0002); // tie, odd -> up
  EXPECT_EQ(bf(0x007FFFFFu), 0x0080); // largest subnormal -> smallest normal
  // Overflow: FLT_MAX rounds to inf; inf stays.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(floatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(bf(0x7F7F7FFFu), 0x7F7F); // below the halfway point: finite
  // NaN stays NaN (also one whose payload is only in the low bits).
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(bf(0x7F800001u))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(bf(0xFF800001u))));
}

TEST(Half, Bf16WidensExactly) {
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(floatBits(bf16ToFloat(0x0001)), 0x00010000u);
  EXPECT_EQ(floatBits(bf16ToFloat(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isinf(bf16ToFloat(0x7F80)));
  for (uint32_t h = 0; h < 0x10000; ++h) { // round trip of every finite value
    float f = bf16ToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToBf16(f), h) << h;
    }
  }
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(hf(1.0f), 0x3C00);
  EXPECT_EQ(hf(-2.0f), 0xC000);
  EXPECT_EQ(hf(0.5f), 0x3800);
  EXPECT_EQ(hf(-0.0f), 0x8000);
  EXPECT_EQ(hf(65504.0f), 0x7BFF); // the largest finite
  EXPECT_EQ(hf(65519.0f), 0x7BFF);
  EXPECT_EQ(hf(65520.0f), 0x7C00); // halfway to 2^16: rounds to inf
  EXPECT_EQ(hf(-65520.0f), 0xFC00);
  EXPECT_EQ(hf(1e10f), 0x7C00);
  EXPECT_EQ(hf(std::numeric_limits<float>::infinity()), 0x7C00);
  // Ties in the normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(hf(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(hf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie with 0 (even: 0).
  EXPECT_EQ(hf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(hf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(hf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(hf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(hf(std::ldexp(3.0f, -25)), 0x0002);    // 1.5 units: tie, odd -> up
  EXPECT_EQ(hf(std::ldexp(5.0f, -25)), 0x0002);    // 2.5 units: tie -> even 2
  EXPECT_EQ(hf(std::ldexp(1.0f, -14)), 0x0400);    // smallest normal
  EXPECT_EQ(hf(std::ldexp(1023.5f, -24)), 0x0400); // rounds up into normal
  EXPECT_EQ(hf(bitsFloat(0x00000001u)), 0x0000);
  // NaN.
  EXPECT_TRUE(std::isnan(f16ToFloat(hf(std::nanf("")))));
  EXPECT_TRUE(std::isnan(f16ToFloat(hf(bitsFloat(0x7F800001u)))));
}

TEST(Half, F16WidensExactly) {
  EXPECT_EQ(f16ToFloat(0x3C00), 1.0f);
  EXPECT_EQ(f16ToFloat(0x7BFF), 65504.0f);
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(floatBits(f16ToFloat(0x8000)), 0x80000000u);
  EXPECT_TRUE(std::isinf(f16ToFloat(0xFC00)) && f16ToFloat(0xFC00) < 0);
  EXPECT_TRUE(std::isnan(f16ToFloat(0x7E00)));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16ToFloat(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(floatToF16(f), h) << h;
    }
  }
}

TEST(Half, DoubleRoundsOnce) {
  // 1 + 2^-8 + 2^-30 is just above the bf16 tie 1 + 2^-8: rounds up, but
  // through a plain f32 rounding it would become the tie and go to even.
  double d = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  EXPECT_EQ(floatToBf16(static_cast<float>(d)), 0x3F80);
  EXPECT_EQ(doubleToBf16(d), 0x3F81);
  double e = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(doubleToF16(e), 0x3C01);
  EXPECT_EQ(doubleToBf16(1.0), 0x3F80);
  EXPECT_EQ(doubleToF16(1e300), 0x7C00);
  EXPECT_EQ(doubleToBf16(1e300), 0x7F80);
  EXPECT_EQ(doubleToF16(-1e-300), 0x8000);
  EXPECT_TRUE(std::isnan(bf16ToFloat(doubleToBf16(std::nan("")))));
}

TEST(Half, CollectivesWithoutMpi) {
  EXPECT_EQ(fsdp_dtype_size(FSDP_BF16), 2u);
  EXPECT_EQ(fsdp_dtype_size(FSDP_F16), 2u);
  uint16_t in[3] = {floatToBf16(1.0f), floatToBf16(-3.0f), floatToBf16(0.5f)};
  uint16_t out[3] = {0, 0, 0};
  fsdp_event h = nullptr;
  ASSERT_EQ(fsdp_reduce_scatter_start(fsdp::test::worldChannel(), in, out, 3,
                                      FSDP_BF16, FSDP_REDUCE_AVG, &h),
            FSDP_OK);
  ASSERT_EQ(fsdp_wait(h), FSDP_OK);
  EXPECT_EQ(bf16ToFloat(out[1]), -3.0f);
  uint16_t g[3] = {hf(2.0f), hf(4.0f), hf(8.0f)}, r[3];
  ASSERT_EQ(fsdp_all_reduce_start(fsdp::test::worldChannel(), g, r, 3, FSDP_F16,
                                  FSDP_REDUCE_AVG, &h),
            FSDP_OK);
  ASSERT_EQ(fsdp_wait(h), FSDP_OK);
  EXPECT_EQ(f16ToFloat(r[2]), 8.0f);
}

// A schedule with buffers 0 (input, dtype `in`, [2, 3]) -> op -> 1 (`out`).
std::string oneOp(const std::string &op, const std::string &in,
                  const std::string &out, const std::string &operands = "[0]") {
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "units": [], "buffers": [
      {"id": 0, "dtype": ")" +
         in + R"(", "shape": [2, 3]},
      {"id": 1, "dtype": ")" +
         out + R"(", "shape": [2, 3]}],
    "inputs": [{"buffer": 0, "role": "features", "global_shape": [2, 3]}],
    "outputs": [{"buffer": 1, "role": "output"}],
    "instructions": [{"op": ")" +
         op + R"(", "operands": )" + operands +
         R"(, "results": [1], "frees": [0]}]})";
}

TEST(Half, CastKernel) {
  using schedule::Program;
  // f32 -> bf16 -> widened output: rounded values; peak = 24 + 12 bytes.
  Program p = Program::fromString(oneOp("nn.cast", "f32", "bf16"));
  double tie = bitsFloat(0x3F818000u);
  int64_t peak = 0;
  rt::HostValues out =
      rt::runStep(p, {{0, {1.0, tie, 65520.0, -1e-40, 3.0, 1e39}}}, &peak);
  EXPECT_EQ(out.at(1)[0], 1.0);
  EXPECT_EQ(out.at(1)[1], bf16ToFloat(0x3F82));
  EXPECT_EQ(out.at(1)[2], 65536.0);
  EXPECT_EQ(out.at(1)[3], -std::ldexp(1.0, -133)); // ~1.09 subnormal units
  EXPECT_TRUE(std::isinf(out.at(1)[5]));           // 1e39 is inf already in f32
  EXPECT_EQ(peak, 24 + 12);
  // f32 -> f16: 65520 overflows to inf.
  Program q = Program::fromString(oneOp("nn.cast", "f32", "f16"));
  out = rt::runStep(q, {{0,
                         {1.0, 65504.0, 65520.0, -2.5, std::ldexp(1.0, -25),
                          std::ldexp(3.0, -25)}}});
  EXPECT_EQ(out.at(1)[1], 65504.0);
  EXPECT_TRUE(std::isinf(out.at(1)[2]));
  EXPECT_EQ(out.at(1)[4], 0.0);
  EXPECT_EQ(out.at(1)[5], std::ldexp(1.0, -23));
  // f64 -> bf16 rounds once; bf16 -> f64 and f16 -> f32 widen exactly.
  Program r = Program::fromString(oneOp("nn.cast", "f64", "bf16"));
  double d = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  out = rt::runStep(r, {{0, {d, 0, 0, 0, 0, 0}}});
  EXPECT_EQ(out.at(1)[0], bf16ToFloat(0x3F81));
  Program w = Program::fromString(oneOp("nn.cast", "f16", "f64"));
  out = rt::runStep(w, {{0, {std::ldexp(1.0, -24), 65504, -1, 0, 0, 0.1}}});
  EXPECT_EQ(out.at(1)[0], std::ldexp(1.0, -24));
  EXPECT_EQ(out.at(1)[5], f16ToFloat(hf(0.1f)));
}

TEST(Half, OpsComputeInF32AndRound) {
  using schedule::Program;
  // relu in bf16: operands widened, the f32 kernel, results rounded.
  Program p = Program::fromString(oneOp("nn.relu", "bf16", "bf16"));
  int64_t peak = 0;
  rt::HostValues out =
      rt::runStep(p, {{0, {-1, 1.00390625, 3, -0.5, 0.1, 2}}}, &peak);
  EXPECT_EQ(out.at(1)[0], 0.0);
  EXPECT_EQ(out.at(1)[1], 1.0); // the input was rounded to bf16 already
  EXPECT_EQ(out.at(1)[4], bf16ToFloat(floatToBf16(0.1f)));
  // Peak bytes count the two 12-byte schedule buffers, not the f32 scratch.
  EXPECT_EQ(peak, 24);
  // add in f16 (x + x): the input 1024.5 is a tie in f16 and was stored
  // as 1024; 60000 + 60000 overflows to inf.
  Program a = Program::fromString(oneOp("nn.add", "f16", "f16", "[0, 0]"));
  out = rt::runStep(a, {{0, {1024.5, 1, 2, 3, 60000, 0.25}}});
  EXPECT_EQ(out.at(1)[0], 2048.0);
  EXPECT_TRUE(std::isinf(out.at(1)[4])); // 120000 overflows
  EXPECT_EQ(out.at(1)[5], 0.5);
}

std::string errorOf(const std::string &text) {
  try {
    schedule::Program::fromString(text, fsdp_world_size(), "test.json");
  } catch (const fsdp::Error &e) {
    return e.what();
  }
  return "";
}

TEST(Half, LoadTimeDtypeErrors) {
  // One float dtype per op (except nn.cast).
  std::string m = errorOf(oneOp("nn.relu", "bf16", "f32"));
  EXPECT_NE(m.find("mixed dtypes (bf16 and f32)"), std::string::npos) << m;
  m = errorOf(oneOp("nn.cast", "i32", "bf16"));
  EXPECT_NE(m.find("has dtype i32, expected a float dtype"), std::string::npos)
      << m;
  // Optimizer updates: f32/f64 only.
  std::string sgd = R"({"format": "fsdp-schedule", "version": 2,
    "world_size": 1, "units": [], "buffers": [
      {"id": 0, "dtype": "bf16", "shape": [4]},
      {"id": 1, "dtype": "bf16", "shape": [4]},
      {"id": 2, "dtype": "bf16", "shape": [4]}],
    "inputs": [{"buffer": 0, "role": "features"},
               {"buffer": 1, "role": "features"}],
    "outputs": [{"buffer": 2, "role": "output"}],
    "instructions": [{"op": "nn.sgd_update", "operands": [0, 1],
      "results": [2], "attrs": {"lr": 0.1}}]})";
  m = errorOf(sgd);
  EXPECT_NE(m.find("nn.sgd_update needs f32 or f64 operands"),
            std::string::npos)
      << m;
  // A bf16 "bytes" field is 2 per element.
  m = errorOf(R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
    "units": [], "buffers": [{"id": 0, "dtype": "f16", "shape": [3],
    "bytes": 12}], "inputs": [], "outputs": [], "instructions": []})");
  EXPECT_NE(m.find("of f16 is 6 bytes"), std::string::npos) << m;
}

} // namespace
