//===- SumOrderTest.cpp - the cuda driver's summation orders on the CPU ---===//
//
// fsdp/SumOrder.h fixes the order of the cuda driver's sums; its functions
// are the kernels' own code. Here they run on the host and are compared with
// the cpu driver's kernels: the embedding gradient by sorted (token,
// position) segments, bit for bit on a batch with repeated tokens (and a
// reversed order, which must differ, shows the data can tell orders apart);
// the two-stage column sums: the partition, bit for bit with fsdp_reduce_sum
// where the stages reduce to one pass, within the grouping's roundings
// elsewhere.
//
//===----------------------------------------------------------------------===//
#include "fsdp/SumOrder.h"
#include "TestDevice.h"
#include "fsdp/Half.h"
#include "fsdp/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace {

/// dy values in dtype T's storage, from the seeded generator; bf16 as bits.
template <typename S> std::vector<S> randomRows(int64_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<S> v(static_cast<size_t>(n));
  for (S &x : v) {
    double r = d(g) * 3.7;
    if constexpr (std::is_same_v<S, uint16_t>)
      x = fsdp::floatToBf16(static_cast<float>(r));
    else
      x = static_cast<S>(r);
  }
  return v;
}

/// The cuda driver's embedding gradient in the host: the stable sort of
/// (token, position) pairs (cub::DeviceRadixSort is stable), then each
/// token's run summed by order::segmentColumnSum. `reversed`: positions in
/// decreasing order instead (an order the drivers must not use).
template <typename S, typename A, typename Load, typename Store>
std::vector<S> sortedSegmentGrad(const std::vector<int32_t> &idx, int64_t vocab,
                                 int64_t dim, Load load, Store store,
                                 bool reversed = false) {
  int64_t n = static_cast<int64_t>(idx.size());
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::iota(pos.begin(), pos.end(), 0);
  // By token, then position: what a stable sort by token gives.
  std::sort(pos.begin(), pos.end(), [&](int32_t a, int32_t b) {
    return idx[a] != idx[b] ? idx[a] < idx[b] : a < b;
  });
  std::vector<S> out(static_cast<size_t>(vocab * dim), S{});
  for (int64_t j = 0; j < n;) {
    int64_t end = j + 1;
    while (end < n && idx[pos[end]] == idx[pos[j]])
      ++end;
    if (reversed)
      std::reverse(pos.begin() + j, pos.begin() + end);
    for (int64_t c = 0; c < dim; ++c)
      out[static_cast<size_t>(idx[pos[j]] * dim + c)] = store(
          fsdp::order::segmentColumnSum<A>(pos.data(), j, end, dim, c, load));
    j = end;
  }
  return out;
}

/// Token ids with heavy repeats: a Zipf-like draw over `vocab` ids, some of
/// which never occur.
std::vector<int32_t> repeatedTokens(int64_t n, int64_t vocab) {
  std::mt19937 g(5);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  for (int32_t &t : idx) {
    double u = std::uniform_real_distribution<double>(0, 1)(g);
    t = static_cast<int32_t>(static_cast<double>(vocab - 3) * u * u * u);
  }
  return idx;
}

template <typename S>
std::vector<S> cpuEmbeddingGrad(fsdp_dtype t, const std::vector<int32_t> &idx,
                                const std::vector<S> &dy, int64_t vocab,
                                int64_t dim) {
  std::vector<S> out(static_cast<size_t>(vocab * dim));
  EXPECT_EQ(fsdp_embedding_grad(fsdp::test::cpuStream(), t, idx.data(),
                                FSDP_I32, dy.data(), out.data(),
                                static_cast<int64_t>(idx.size()), vocab, dim, 0,
                                vocab),
            FSDP_OK)
      << fsdp_last_error();
  return out;
}

TEST(SumOrder, EmbeddingGradBySortedSegmentsEqualsTheCpuDriver) {
  const int64_t n = 3000, vocab = 41, dim = 9;
  std::vector<int32_t> idx = repeatedTokens(n, vocab);
  { // f32: accumulated in float
    std::vector<float> dy = randomRows<float>(n * dim, 1);
    auto load = [&](int64_t i) { return dy[static_cast<size_t>(i)]; };
    auto store = [](float a) { return a; };
    std::vector<float> want = cpuEmbeddingGrad(FSDP_F32, idx, dy, vocab, dim);
    EXPECT_EQ((sortedSegmentGrad<float, float>(idx, vocab, dim, load, store)),
              want);
    EXPECT_NE(
        (sortedSegmentGrad<float, float>(idx, vocab, dim, load, store, true)),
        want)
        << "the data do not tell summation orders apart";
  }
  { // f64
    std::vector<double> dy = randomRows<double>(n * dim, 2);
    auto load = [&](int64_t i) { return dy[static_cast<size_t>(i)]; };
    auto store = [](double a) { return a; };
    EXPECT_EQ((sortedSegmentGrad<double, double>(idx, vocab, dim, load, store)),
              cpuEmbeddingGrad(FSDP_F64, idx, dy, vocab, dim));
  }
  { // bf16: in f32, rounded once
    std::vector<uint16_t> dy = randomRows<uint16_t>(n * dim, 3);
    auto load = [&](int64_t i) {
      return fsdp::bf16ToFloat(dy[static_cast<size_t>(i)]);
    };
    auto store = [](float a) { return fsdp::floatToBf16(a); };
    EXPECT_EQ(
        (sortedSegmentGrad<uint16_t, float>(idx, vocab, dim, load, store)),
        cpuEmbeddingGrad(FSDP_BF16, idx, dy, vocab, dim));
  }
}

TEST(SumOrder, ChunksPartitionTheRows) {
  for (int64_t rows : {0, 1, 2, 127, 128, 129, 1000, 8191, 100003})
    for (int64_t cols :
         {int64_t{1}, int64_t{4096}, int64_t{40000}, int64_t{1} << 22}) {
      int64_t p = fsdp::order::rowChunks(rows, cols);
      ASSERT_GE(p, 1);
      ASSERT_LE(p, fsdp::order::kRowChunks);
      ASSERT_LE(p * cols, std::max(cols, fsdp::order::kMaxPartials));
      EXPECT_EQ(fsdp::order::chunkBegin(rows, p, 0), 0);
      EXPECT_EQ(fsdp::order::chunkBegin(rows, p, p), rows);
      for (int64_t k = 0; k < p; ++k)
        EXPECT_LE(fsdp::order::chunkBegin(rows, p, k),
                  fsdp::order::chunkBegin(rows, p, k + 1));
      EXPECT_EQ(fsdp::order::onePass(rows, cols), p == 1 || p == rows);
    }
  EXPECT_EQ(fsdp::order::rowChunks(8192, 4096), fsdp::order::kRowChunks);
  EXPECT_EQ(fsdp::order::rowChunks(100, 4096), 100);
  EXPECT_EQ(fsdp::order::rowChunks(8192, int64_t{1} << 22), 1);
}

/// The cuda driver's column sum of x [rows, cols] (double), stage by stage.
std::vector<double> twoStage(const std::vector<double> &x, int64_t rows,
                             int64_t cols) {
  int64_t p = fsdp::order::rowChunks(rows, cols);
  std::vector<double> partial(static_cast<size_t>(p * cols));
  for (int64_t k = 0; k < p; ++k)
    for (int64_t c = 0; c < cols; ++c)
      partial[static_cast<size_t>(k * cols + c)] =
          fsdp::order::chunkSum<double>(rows, p, k, [&](int64_t r) {
            return x[static_cast<size_t>(r * cols + c)];
          });
  std::vector<double> out(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c)
    out[static_cast<size_t>(c)] =
        fsdp::order::sumPartials(partial.data(), p, cols, c);
  return out;
}

TEST(SumOrder, TwoStageColumnSumsAgainstTheCpuReduceSum) {
  for (int64_t rows : {1, 77, 128, 129, 3000}) {
    const int64_t cols = 33;
    std::vector<double> x = randomRows<double>(rows * cols, 9);
    for (size_t i = 0; i < x.size(); i += 7)
      x[i] *= 1e8; // cancellation: the grouping shows in the low bits
    std::vector<double> y(static_cast<size_t>(cols));
    int64_t shape[2] = {rows, cols}, axis = 0;
    ASSERT_EQ(fsdp_reduce_sum(fsdp::test::cpuStream(), FSDP_F64, x.data(),
                              shape, 2, &axis, 1, y.data()),
              FSDP_OK);
    std::vector<double> got = twoStage(x, rows, cols);
    if (fsdp::order::onePass(rows, cols)) {
      EXPECT_EQ(got, y) << rows << " rows";
    } else {
      bool differs = false;
      for (int64_t c = 0; c < cols; ++c) {
        double a = got[static_cast<size_t>(c)], b = y[static_cast<size_t>(c)];
        EXPECT_NEAR(a, b, 1e-6 * (1 + std::abs(b))) << rows << " rows";
        differs |= a != b;
      }
      // Grouped sums round differently: a check that could not see the
      // order would pass here as well, so make sure this one can.
      EXPECT_TRUE(differs) << rows << " rows: the grouping left no trace";
    }
  }
}

} // namespace
