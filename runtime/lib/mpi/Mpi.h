//===- Mpi.h - MPI helpers shared by the drivers --------------------------===//
//
// What the cpu driver's channels and the cuda driver's MPI channels both
// need: the MPI datatype of an fsdp_dtype, the sum of 2-byte floats (an MPI
// user-defined operation adding in f32 and rounding each combine, Half.h),
// the average applied after a reduction, messages of MPI error codes, and a
// communicator wrapper with the channel's split. Built into a small static
// library (fsdp_mpi) linked by the runtime and by the cuda driver library.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_MPI_H
#define FSDP_RUNTIME_MPI_H

#include "../Driver.h"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace fsdp::mpi {

/// MPI is initialised and not finalised.
bool active();
/// The text of MPI error `err`.
std::string message(int err);
/// Throws DeviceError(FSDP_ERR_MPI, "<what> failed: <message>") unless
/// err == MPI_SUCCESS.
void check(int err, const char *what);
/// MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T; MPI_UINT16_T for bf16/f16.
MPI_Datatype datatype(fsdp_dtype t);
/// MPI_SUM, or for bf16/f16 the commutative f32-sum-and-round operation
/// (created on first use; freeOps() frees them before MPI_Finalize).
MPI_Op sumOp(fsdp_dtype t);
void freeOps();
/// data[i] /= divisor for i < count, in the dtype's arithmetic (bf16/f16:
/// widened, divided in f32, rounded once). Floats only.
void divideInPlace(void *data, int64_t count, fsdp_dtype t, double divisor);

/// How an average over `groupSize` ranks divides: each rank's input by `pre`
/// before the sum, the sum by `post` after it (pre · post = groupSize).
struct DivideFactors {
  double pre = 1, post = 1;
};
/// PyTorch FSDP2's _get_gradient_divide_factors
/// (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py; FSDP1's
/// _get_gradient_predivide_factor): for f16, whose sum of N rank gradients
/// overflows at 65504, pre is the power of two 2^k nearest below √N that
/// divides N (N = 2: 2, 4: 2, 8: 4, 16: 4, 3: 2) and post = N / pre; for
/// the other dtypes (f32, f64, bf16: f32's range) pre = 1, post = N, as
/// FSDP2. A power-of-two pre is exact, so the result equals sum / N rounded
/// once wherever the plain sum does not overflow.
DivideFactors divideFactors(int groupSize, fsdp_dtype t);

/// Checks the arguments every collective shares; throws FSDP_ERR_INVALID.
void checkCollective(const char *fn, const void *a, const void *b,
                     int64_t count, fsdp_dtype dtype, bool average);

/// An owned communicator (MPI_COMM_NULL without MPI: a world of one).
class Comm {
public:
  /// A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN.
  static Comm world();
  Comm() = default;
  Comm(const Comm &) = delete;
  Comm &operator=(const Comm &) = delete;
  Comm(Comm &&o) noexcept;
  Comm &operator=(Comm &&o) noexcept;
  ~Comm();
  /// MPI_Comm_split(color, key); collective over this communicator.
  Comm split(int color, int key) const;
  MPI_Comm get() const { return comm; }
  bool isNull() const { return comm == MPI_COMM_NULL; }
  int rank() const { return rankValue; }
  int size() const { return sizeValue; }

private:
  explicit Comm(MPI_Comm c);
  MPI_Comm comm = MPI_COMM_NULL;
  int rankValue = 0, sizeValue = 1;
};

} // namespace fsdp::mpi

#endif // FSDP_RUNTIME_MPI_H
