//===- ShardingTest.cpp - Tests of include/fsdp/Sharding.h ----------------===//
//
// FlatParameter padding and shard arithmetic: padding is at most N-1, shards
// tile the padded range exactly, owned ranges cover [0, numel) exactly once
// (also when N > numel), and the ring collective volume is (N-1)/N.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Sharding.h"

#include <gtest/gtest.h>

namespace {

TEST(Sharding, PaddingIsBelowWorldSize) {
  for (int64_t n = 1; n <= 9; ++n)
    for (int64_t numel = 1; numel <= 100; ++numel) {
      int64_t p = fsdp::paddedNumel(numel, n);
      EXPECT_GE(p, numel);
      EXPECT_LE(p - numel, n - 1) << numel << " over " << n;
      EXPECT_EQ(p % n, 0);
      EXPECT_EQ(fsdp::shardNumel(numel, n) * n, p);
    }
  EXPECT_EQ(fsdp::paddedNumel(896, 4), 896);
  EXPECT_EQ(fsdp::paddedNumel(70, 4), 72);
  EXPECT_EQ(fsdp::paddedNumel(0, 3), 3); // every rank owns one element
}

TEST(Sharding, OwnedRangesCoverExactlyOnce) {
  for (int64_t n = 1; n <= 9; ++n)
    for (int64_t numel = 0; numel <= 40; ++numel) {
      int64_t next = 0;
      for (int64_t r = 0; r < n; ++r) {
        fsdp::ShardRange s = fsdp::ownedRange(numel, n, r);
        EXPECT_EQ(s.begin, next) << numel << " over " << n << " rank " << r;
        EXPECT_GE(s.size(), 0);
        EXPECT_LE(s.size(), fsdp::shardNumel(numel, n));
        next = s.end;
      }
      EXPECT_EQ(next, numel);
    }
}

TEST(Sharding, WorldLargerThanNumel) {
  // 3 elements over 8 ranks: shards of 1, ranks 3..7 own only padding.
  EXPECT_EQ(fsdp::shardNumel(3, 8), 1);
  EXPECT_EQ(fsdp::paddedNumel(3, 8), 8);
  for (int64_t r = 0; r < 8; ++r) {
    fsdp::ShardRange s = fsdp::ownedRange(3, 8, r);
    EXPECT_EQ(s.size(), r < 3 ? 1 : 0);
  }
}

TEST(Sharding, RingBytes) {
  EXPECT_EQ(fsdp::ringCollectiveBytesPerRank(4096, 1), 0);
  EXPECT_EQ(fsdp::ringCollectiveBytesPerRank(4096, 2), 2048);
  EXPECT_EQ(fsdp::ringCollectiveBytesPerRank(288, 4), 216);
}

} // namespace
