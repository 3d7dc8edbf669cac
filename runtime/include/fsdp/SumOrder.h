//===- SumOrder.h - the fixed summation orders of the cuda driver ---------===//
//
// Where a GPU kernel sums many terms, the order is fixed by the shapes alone
// (never by the launch, the GPU model or timing), so that a run repeats bit
// for bit; the order is written here once, compiled by nvcc (FSDP_HD) into
// the kernels and by g++ into the tests that check it against the cpu
// driver (SumOrderTest):
//
// - Column sums (the weight and bias gradients of layer_norm and rms_norm,
//   reduce_sum, position_embedding's gradient) of a [rows, cols] matrix, two
//   stages: the rows split into P = max(1, min(rows, kRowChunks,
//   ⌊kMaxPartials/cols⌋)) chunks, chunk p = [⌊rows·p/P⌋, ⌊rows·(p+1)/P⌋);
//   stage 1 sums each chunk's rows in row order from 0, stage 2 sums the P
//   partial sums in chunk order from 0. Where every chunk is one row (rows
//   ≤ kRowChunks, few columns) or there is one chunk (≥ kMaxPartials/2
//   columns: enough threads without splitting rows), the result is the
//   plain row-order sum of the cpu driver, bit for bit, and one pass
//   computes it; otherwise it differs from that only by the roundings of
//   the grouping.
// - The embedding gradient: dtable[v] is the sum of the dy rows of the
//   positions holding token v, in increasing position order, from 0 in the
//   accumulation type (the cpu driver's loop over positions); the cuda
//   driver finds them by a stable radix sort of (token, position) pairs.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUMORDER_H
#define FSDP_SUMORDER_H

#include "fsdp/Half.h" // FSDP_HD

#include <cstdint>

namespace fsdp::order {

/// The most chunks a column sum's rows are split into (stage 1 launches
/// that many blocks per column tile; stage 2 adds that many partials).
inline constexpr int64_t kRowChunks = 128;

/// The most partial sums (P·cols) stage 1 keeps: 32 MiB of doubles.
inline constexpr int64_t kMaxPartials = int64_t{1} << 22;

/// P, the chunks of the `rows` rows of a column sum over `cols` columns.
FSDP_HD inline int64_t rowChunks(int64_t rows, int64_t cols) {
  int64_t p = rows < kRowChunks ? rows : kRowChunks;
  int64_t cap = cols > 0 ? kMaxPartials / cols : kRowChunks;
  p = p < cap ? p : cap;
  return p < 1 ? 1 : p;
}

/// Whether the two stages reduce to one row-order pass (every chunk one
/// row, or one chunk).
FSDP_HD inline bool onePass(int64_t rows, int64_t cols) {
  int64_t p = rowChunks(rows, cols);
  return p == 1 || p == rows;
}

/// The first row of chunk p of `rows` rows in `chunks` chunks (p = chunks
/// gives rows).
FSDP_HD inline int64_t chunkBegin(int64_t rows, int64_t chunks, int64_t p) {
  return rows * p / chunks;
}

/// Stage 1: Σ term(r) over chunk p's rows, in row order, from A{}.
template <typename A, typename Term>
FSDP_HD inline A chunkSum(int64_t rows, int64_t chunks, int64_t p,
                          const Term &term) {
  A acc{};
  for (int64_t r = chunkBegin(rows, chunks, p),
               e = chunkBegin(rows, chunks, p + 1);
       r < e; ++r)
    acc += term(r);
  return acc;
}

/// Stage 2: Σ partial[p·stride + c] over p < chunks, in order, from A{}.
template <typename A>
FSDP_HD inline A sumPartials(const A *partial, int64_t chunks, int64_t stride,
                             int64_t c) {
  A acc{};
  for (int64_t p = 0; p < chunks; ++p)
    acc += partial[p * stride + c];
  return acc;
}

/// The embedding gradient's element (v, c): Σ dy[pos[k]·dim + c] over the
/// k in [begin, end) (the positions of token v, increasing) in order, from
/// A{}; `load(i)` reads dy[i] in the accumulation type.
template <typename A, typename Load>
FSDP_HD inline A segmentColumnSum(const int32_t *pos, int64_t begin,
                                  int64_t end, int64_t dim, int64_t c,
                                  const Load &load) {
  A acc{};
  for (int64_t k = begin; k < end; ++k)
    acc += load(static_cast<int64_t>(pos[k]) * dim + c);
  return acc;
}

} // namespace fsdp::order

#endif // FSDP_SUMORDER_H
