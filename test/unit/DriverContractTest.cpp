//===- DriverContractTest.cpp - why 2 ranks agree bit for bit, 3 do not ---===//
//
// runtime/docs/drivers.md, "What agrees bit for bit": a sum over 2 ranks is
// one addition, so every transport gives the same bits; over 3 or more the
// order is the transport's (NCCL's ring, Open MPI's algorithm) and bf16
// results agree only within G - 1 roundings. Checked here on the cpu
// driver's own bf16 sum (the MPI operation of runtime/lib/mpi, applied with
// MPI_Reduce_local): commutative bit for bit, equal to
// round(float(a) + float(b)) computed independently, not associative, and
// each order of 3 operands within 2 bf16 roundings of the exact sum.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Half.h"
#include "fsdp/runtime.h"
#include "mpi/Mpi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using fsdp::bf16ToFloat;
using fsdp::floatToBf16;

// bf16 a (+) b through the driver's MPI operation: b's buffer is the result.
uint16_t sum(MPI_Op op, uint16_t a, uint16_t b) {
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_UINT16_T, op), MPI_SUCCESS);
  return b;
}

TEST(DriverContract, Bf16SumOrder) {
  // MPI for the operation (this process only: ctest runs each test alone);
  // finalised at the end if initialised here.
  int was = 0;
  MPI_Initialized(&was);
  if (!was)
    ASSERT_EQ(fsdp_init(nullptr, nullptr), FSDP_OK) << fsdp_last_error();
  MPI_Op op = fsdp::mpi::sumOp(FSDP_BF16);
  // A fixed-seed spread of magnitudes and signs (splitmix64).
  uint64_t s = 42;
  auto next = [&s] {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto value = [&] {
    double u = static_cast<double>(next() >> 11) / 9007199254740992.0;
    return floatToBf16(static_cast<float>(
        (u - 0.5) * std::ldexp(1.0, static_cast<int>(next() % 8))));
  };
  int reordered = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    uint16_t a = value(), b = value(), c = value();
    // 2 ranks: the same bits in either order, and the documented formula.
    uint16_t ab = sum(op, a, b);
    ASSERT_EQ(ab, sum(op, b, a)) << i;
    ASSERT_EQ(ab, floatToBf16(bf16ToFloat(a) + bf16ToFloat(b))) << i;
    // 3 ranks: two orders, each within G - 1 = 2 roundings (half an ulp,
    // at most 2^-8 of the operands' magnitudes each) of the exact sum.
    float left = bf16ToFloat(sum(op, c, ab));
    float right = bf16ToFloat(sum(op, a, sum(op, b, c)));
    double exact =
        static_cast<double>(bf16ToFloat(a)) + bf16ToFloat(b) + bf16ToFloat(c);
    double mag = std::fabs(bf16ToFloat(a)) + std::fabs(bf16ToFloat(b)) +
                 std::fabs(bf16ToFloat(c));
    ASSERT_LE(std::fabs(left - exact), 2 * std::ldexp(mag, -8)) << i;
    ASSERT_LE(std::fabs(right - exact), 2 * std::ldexp(mag, -8)) << i;
    reordered += left != right;
  }
  // The known case: 1 + 2^-8 ties to 1, so (1 + 2^-8) + 2^-8 = 1 but
  // 1 + (2^-8 + 2^-8) = 1 + 2^-7.
  uint16_t one = floatToBf16(1.0f), tiny = floatToBf16(std::ldexp(1.0f, -8));
  EXPECT_EQ(bf16ToFloat(sum(op, tiny, sum(op, one, tiny))), 1.0f);
  EXPECT_EQ(bf16ToFloat(sum(op, one, sum(op, tiny, tiny))),
            1.0f + std::ldexp(1.0f, -7));
  // Reordering changes a bf16 sum of 3 often, not rarely.
  EXPECT_GT(reordered, n / 100) << reordered << " of " << n;
  if (!was)
    fsdp_finalize(); // frees the operation too
}

} // namespace
