//===- VocabParallelCeTest.cpp - the vocab-parallel cross-entropy kernels -===//
//
// fsdp_vocab_ce_stats / _loss / _grad (cpu driver) against the whole-row
// fsdp_cross_entropy and fsdp_cross_entropy_grad, an independent kernel: the
// logits' columns cut into T slices, each slice's statistics in its slot,
// the slots summed (what the tensor-parallel all-reduce does), then the
// merged loss equals the whole row's and the slices' gradients are the
// whole gradient's columns, in f64 to rounding. Large logits (±300, where
// e^x overflows f64 without the max shift) check the merge's stability; a
// label outside [0, T·C) is FSDP_ERR_DATA.
//
//===----------------------------------------------------------------------===//
#include "TestDevice.h"
#include "fsdp/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

struct Case {
  int64_t positions, classes, tp;
  double scale; // the logits' range
};

void checkAgainstWholeRow(const Case &k) {
  int64_t n = k.positions, v = k.classes * k.tp, c = k.classes;
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-k.scale, k.scale);
  std::vector<double> logits(n * v);
  for (double &x : logits)
    x = u(gen);
  std::vector<int32_t> labels(n);
  for (int64_t p = 0; p < n; ++p)
    labels[p] = static_cast<int32_t>((p * 7 + 3) % v);
  fsdp_stream s = fsdp::test::cpuStream();
  double whole = 0, dloss = 0.75;
  ASSERT_EQ(fsdp_cross_entropy(s, FSDP_F64, logits.data(), labels.data(),
                               FSDP_I32, n, v, &whole),
            FSDP_OK)
      << fsdp_last_error();
  std::vector<double> dwhole(n * v);
  ASSERT_EQ(fsdp_cross_entropy_grad(s, FSDP_F64, logits.data(), labels.data(),
                                    FSDP_I32, &dloss, dwhole.data(), n, v),
            FSDP_OK)
      << fsdp_last_error();
  std::vector<std::vector<double>> slices(k.tp, std::vector<double>(n * c));
  std::vector<double> sum(k.tp * n * 3, 0.0);
  for (int64_t t = 0; t < k.tp; ++t) {
    for (int64_t p = 0; p < n; ++p)
      for (int64_t j = 0; j < c; ++j)
        slices[t][p * c + j] = logits[p * v + t * c + j];
    std::vector<double> stats(k.tp * n * 3, 99.0);
    ASSERT_EQ(fsdp_vocab_ce_stats(s, FSDP_F64, slices[t].data(), labels.data(),
                                  FSDP_I32, n, c, t * c, v, k.tp, t,
                                  stats.data()),
              FSDP_OK)
        << fsdp_last_error();
    for (size_t i = 0; i < stats.size(); ++i) {
      if (static_cast<int64_t>(i) / (n * 3) != t)
        EXPECT_EQ(stats[i], 0.0) << "slot " << t << " wrote element " << i;
      sum[i] += stats[i];
    }
  }
  double loss = 0;
  ASSERT_EQ(fsdp_vocab_ce_loss(s, FSDP_F64, sum.data(), n, k.tp, &loss),
            FSDP_OK)
      << fsdp_last_error();
  EXPECT_NEAR(loss, whole, 1e-13 * std::fabs(whole));
  for (int64_t t = 0; t < k.tp; ++t) {
    std::vector<double> d(n * c);
    ASSERT_EQ(fsdp_vocab_ce_grad(s, FSDP_F64, slices[t].data(), labels.data(),
                                 FSDP_I32, sum.data(), &dloss, d.data(), n, c,
                                 t * c, k.tp),
              FSDP_OK)
        << fsdp_last_error();
    for (int64_t p = 0; p < n; ++p)
      for (int64_t j = 0; j < c; ++j)
        EXPECT_NEAR(d[p * c + j], dwhole[p * v + t * c + j], 1e-15)
            << "position " << p << " column " << t * c + j;
  }
}

TEST(VocabParallelCe, EqualsWholeRowCrossEntropy) {
  checkAgainstWholeRow({5, 8, 2, 3.0});
  checkAgainstWholeRow({3, 4, 4, 3.0});
}

TEST(VocabParallelCe, LargeLogitsStayFinite) {
  checkAgainstWholeRow({4, 6, 2, 300.0});
}

TEST(VocabParallelCe, LabelOutsideTheVocabularyIsADataError) {
  std::vector<double> logits(2 * 4, 0.5), stats(2 * 2 * 3);
  std::vector<int32_t> labels = {3, 8}; // vocabulary 2 x 4 = 8
  EXPECT_EQ(fsdp_vocab_ce_stats(fsdp::test::cpuStream(), FSDP_F64,
                                logits.data(), labels.data(), FSDP_I32, 2, 4, 4,
                                8, 2, 1, stats.data()),
            FSDP_ERR_DATA);
  EXPECT_NE(std::string(fsdp_last_error()).find("label 8 at position 1"),
            std::string::npos)
      << fsdp_last_error();
}

} // namespace
