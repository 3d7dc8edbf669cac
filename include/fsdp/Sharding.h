//===- Sharding.h - FlatParameter padding and shard arithmetic ------------===//
//
// Header-only arithmetic shared by the compiler (fsdp-shard) and the runtime
// (initialisation of shards, gathering for --dump-params). A unit of `numel`
// elements is flattened, right-padded to a multiple of the world size N and
// split into N equal contiguous shards, as PyTorch FSDP's FlatParameter (Zhao
// et al., "PyTorch FSDP", VLDB 2023, Sec. 3.2.1): padding is at most N-1
// elements and rank r owns flat elements [r*S, (r+1)*S) with S = padded / N.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SHARDING_H
#define FSDP_SHARDING_H

#include <cstdint>

namespace fsdp {

/// Padded numel of a flat buffer of `numel` elements over `worldSize` ranks:
/// the smallest multiple of worldSize that is >= numel, and at least worldSize
/// so that every rank owns one element even for an empty unit.
/// Requires worldSize >= 1 (callers diagnose bad world sizes first).
inline int64_t paddedNumel(int64_t numel, int64_t worldSize) {
  int64_t padded = (numel + worldSize - 1) / worldSize * worldSize;
  return padded < worldSize ? worldSize : padded;
}

/// Elements per rank shard: paddedNumel(numel, N) / N.
inline int64_t shardNumel(int64_t numel, int64_t worldSize) {
  return paddedNumel(numel, worldSize) / worldSize;
}

/// The half-open flat range [begin, end) of the *unpadded* elements that `rank`
/// owns; empty (begin == end) for a rank whose shard is all padding.
struct ShardRange {
  int64_t begin;
  int64_t end;
  int64_t size() const { return end - begin; }
};
inline ShardRange ownedRange(int64_t numel, int64_t worldSize, int64_t rank) {
  int64_t s = shardNumel(numel, worldSize);
  int64_t b = rank * s, e = b + s;
  if (b > numel)
    b = numel;
  if (e > numel)
    e = numel;
  return {b, e};
}

/// Bytes one rank sends in a ring all-gather or ring reduce-scatter of a flat
/// buffer of `paddedBytes` total bytes over N ranks: (N-1)/N * S (Thakur,
/// Rabenseifner & Gropp, IJHPCA 2005, Sec. 4; nccl-tests PERFORMANCE.md "bus
/// bandwidth"). Exact in bytes because paddedBytes is a multiple of N.
inline int64_t ringCollectiveBytesPerRank(int64_t paddedBytes,
                                          int64_t worldSize) {
  return paddedBytes / worldSize * (worldSize - 1);
}

/// Bytes one rank sends in a ring all-reduce of a buffer of `bytes` bytes
/// over a group of `groupSize` ranks: 2*(G-1)/G * B, a reduce-scatter then an
/// all-gather (Thakur, Rabenseifner & Gropp, IJHPCA 2005, Sec. 4.4; Patarasuk
/// & Yuan, JPDC 2009). Rounded down to whole bytes when G does not divide
/// 2*(G-1)*B; 0 for G <= 1.
inline int64_t ringAllReduceBytesPerRank(int64_t bytes, int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  return 2 * (groupSize - 1) * bytes / groupSize;
}

} // namespace fsdp

#endif // FSDP_SHARDING_H
