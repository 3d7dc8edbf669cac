//===- DropoutTest.cpp - nn.dropout's generator and kernel ----------------===//
//
// Philox4x32-10 against Random123's published known-answer vectors, and
// fsdp_dropout on the cpu driver: the kept fraction against 1 − rate, kept
// values scaled by exactly 1/(1 − rate), a mask that depends on the
// element's global index (so that a tensor split across ranks draws the
// mask of the whole), on the step and on the seed, and not on the dtype.
//
//===----------------------------------------------------------------------===//
#include "TestDevice.h"
#include "fsdp/ElementMath.h"
#include "fsdp/Half.h"
#include "fsdp/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace {

// Random123 (github.com/DEShawResearch/random123), tests/kat_vectors, the
// three "philox4x32 10" lines: counter[4], key[2] -> result[4].
TEST(Dropout, PhiloxKnownAnswers) {
  struct Kat {
    uint32_t ctr[4], key[2], out[4];
  } kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat &k : kats) {
    uint32_t c[4] = {k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]};
    fsdp::math::philox4x32x10(c, k.key[0], k.key[1]);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(c[i], k.out[i]) << "word " << i;
  }
}

/// x is runs of `chunk` elements `stride` apart in the global tensor, the
/// first at first + chunkFirst (chunk 0: x is one run).
std::vector<double> dropout(const std::vector<double> &x, double rate,
                            int64_t seed, int64_t step, int64_t first,
                            int64_t chunk = 0, int64_t stride = 0,
                            int64_t chunkFirst = 0) {
  std::vector<double> y(x.size());
  int64_t n = static_cast<int64_t>(x.size());
  EXPECT_EQ(fsdp_dropout(fsdp::test::cpuStream(), FSDP_F64, x.data(), y.data(),
                         n, rate, seed, &step, FSDP_I64, first,
                         chunk ? chunk : std::max<int64_t>(n, 1), stride,
                         chunkFirst),
            FSDP_OK);
  return y;
}

TEST(Dropout, KeepsOneMinusRateScaledExactly) {
  const int64_t n = 200000;
  const double rate = 0.25;
  std::vector<double> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = 1.0 + static_cast<double>(i % 7);
  std::vector<double> y = dropout(x, rate, 42, 3, 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] != 0) {
      ++kept;
      EXPECT_EQ(y[i], x[i] * (1.0 / (1.0 - rate))) << "at " << i;
    }
  }
  // Binomial(n, 0.75): within 5 standard deviations.
  double mean = n * (1 - rate), sd = std::sqrt(n * rate * (1 - rate));
  EXPECT_NEAR(static_cast<double>(kept), mean, 5 * sd);
  // Rate 0 keeps everything unscaled.
  EXPECT_EQ(dropout(x, 0.0, 42, 3, 0), x);
}

TEST(Dropout, MaskIsAFunctionOfTheGlobalIndexStepAndSeed) {
  const int64_t n = 1000;
  std::vector<double> x(n, 1.0);
  std::vector<double> whole = dropout(x, 0.5, 7, 1, 0);
  // Two "ranks" holding halves of the tensor draw the whole tensor's mask.
  std::vector<double> lo(x.begin(), x.begin() + n / 2),
      hi(x.begin() + n / 2, x.end());
  std::vector<double> a = dropout(lo, 0.5, 7, 1, 0),
                      b = dropout(hi, 0.5, 7, 1, n / 2);
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_EQ(a, whole);
  // Another step or seed draws another mask.
  EXPECT_NE(dropout(x, 0.5, 7, 2, 0), whole);
  EXPECT_NE(dropout(x, 0.5, 8, 1, 0), whole);
  // The same mask in bf16 (the staged f32 computation rounds 2 to 2).
  std::vector<uint16_t> xb(n, fsdp::floatToBf16(1.0f)), yb(n);
  int64_t step = 1;
  ASSERT_EQ(fsdp_dropout(fsdp::test::cpuStream(), FSDP_BF16, xb.data(),
                         yb.data(), n, 0.5, 7, &step, FSDP_I64, 0, n, n, 0),
            FSDP_OK);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(fsdp::bf16ToFloat(yb[i]), static_cast<float>(whole[i]));
}

TEST(Dropout, RateOutsideTheUnitIntervalIsAnError) {
  std::vector<double> x(4, 1.0), y(4);
  int64_t step = 1;
  EXPECT_EQ(fsdp_dropout(fsdp::test::cpuStream(), FSDP_F64, x.data(), y.data(),
                         4, 1.0, 0, &step, FSDP_I64, 0, 4, 4, 0),
            FSDP_ERR_INVALID);
  EXPECT_EQ(fsdp_dropout(fsdp::test::cpuStream(), FSDP_F64, x.data(), y.data(),
                         4, 0.5, 0, &step, FSDP_I64, 0, 0, 4, 0),
            FSDP_ERR_INVALID);
}

// A tensor-parallel slice: [rows, seq, heads·dim] = [3, 4, 6] split in T = 2
// along dimension 1 (sequence parallelism) or 2 (heads): each rank's piece,
// drawn with its runs (chunk, stride = T·chunk, chunkFirst = t·chunk), is
// the whole tensor's mask at its global positions.
TEST(Dropout, ATensorParallelSliceDrawsTheWholeTensorsMask) {
  const int64_t R = 3, S = 4, H = 6, T = 2;
  std::vector<double> x(R * S * H);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 1.0 + static_cast<double>(i);
  std::vector<double> whole = dropout(x, 0.5, 11, 2, 0);
  for (int64_t dim : {1, 2})
    for (int64_t t = 0; t < T; ++t) {
      int64_t s = dim == 1 ? S / T : S, h = dim == 1 ? H : H / T;
      std::vector<double> piece;
      auto at = [&](int64_t r, int64_t p, int64_t c) {
        return (r * S + p) * H + c;
      };
      for (int64_t r = 0; r < R; ++r)
        for (int64_t p = 0; p < s; ++p)
          for (int64_t c = 0; c < h; ++c)
            piece.push_back(x[static_cast<size_t>(
                at(r, dim == 1 ? t * s + p : p, dim == 2 ? t * h + c : c))]);
      int64_t chunk = dim == 1 ? s * H : h;
      std::vector<double> y =
          dropout(piece, 0.5, 11, 2, 0, chunk, T * chunk, t * chunk);
      size_t k = 0;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t p = 0; p < s; ++p)
          for (int64_t c = 0; c < h; ++c, ++k)
            EXPECT_EQ(y[k],
                      whole[static_cast<size_t>(at(r, dim == 1 ? t * s + p : p,
                                                   dim == 2 ? t * h + c : c))])
                << "dim " << dim << " rank " << t << " element " << k;
    }
}

} // namespace
