//===- Mpi.cpp - MPI helpers shared by the drivers ------------------------===//
#include "Mpi.h"

#include "fsdp/Half.h"

#include <climits>
#include <utility>

namespace fsdp::mpi {

using hal::fail;

bool active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

std::string message(int err) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, buf, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(err);
  return std::string(buf, len);
}

void check(int err, const char *what) {
  if (err != MPI_SUCCESS)
    fail(FSDP_ERR_MPI, std::string(what) + " failed: " + message(err));
}

MPI_Datatype datatype(fsdp_dtype t) {
  switch (t) {
  case FSDP_F32:
    return MPI_FLOAT;
  case FSDP_F64:
    return MPI_DOUBLE;
  case FSDP_I32:
    return MPI_INT32_T;
  case FSDP_I64:
    return MPI_INT64_T;
  case FSDP_BF16:
  case FSDP_F16:
    return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

namespace {

// inout[i] = round(in[i] + inout[i]) with the addition in f32 (exact
// widening, one rounding per combine).
void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}
void sumF16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = floatToF16(f16ToFloat(a[i]) + f16ToFloat(b[i]));
}
MPI_Op bf16SumOp = MPI_OP_NULL, f16SumOp = MPI_OP_NULL;

} // namespace

MPI_Op sumOp(fsdp_dtype t) {
  if (!hal::isHalf(t))
    return MPI_SUM;
  MPI_Op &op = t == FSDP_BF16 ? bf16SumOp : f16SumOp;
  if (op == MPI_OP_NULL)
    check(MPI_Op_create(t == FSDP_BF16 ? sumBf16 : sumF16, /*commute=*/1, &op),
          "MPI_Op_create of the 2-byte float sum");
  return op;
}

void freeOps() {
  if (bf16SumOp != MPI_OP_NULL)
    MPI_Op_free(&bf16SumOp);
  if (f16SumOp != MPI_OP_NULL)
    MPI_Op_free(&f16SumOp);
}

DivideFactors divideFactors(int groupSize, fsdp_dtype t) {
  DivideFactors f;
  f.post = groupSize;
  if (t != FSDP_F16)
    return f;
  int pre = 1;
  while (groupSize % pre == 0 && groupSize / pre > pre)
    pre *= 2;
  f.pre = pre;
  f.post = static_cast<double>(groupSize) / pre;
  return f;
}

void divideInPlace(void *data, int64_t count, fsdp_dtype t, double divisor) {
  if (divisor == 1) // x / 1 is x: a group of one has nothing to divide
    return;
  float nf = static_cast<float>(divisor);
  switch (t) {
  case FSDP_F32: {
    float *p = static_cast<float *>(data);
    for (int64_t i = 0; i < count; ++i)
      p[i] /= nf;
    break;
  }
  case FSDP_F64: {
    double *p = static_cast<double *>(data);
    for (int64_t i = 0; i < count; ++i)
      p[i] /= divisor;
    break;
  }
  case FSDP_BF16: {
    uint16_t *p = static_cast<uint16_t *>(data);
    for (int64_t i = 0; i < count; ++i)
      p[i] = floatToBf16(bf16ToFloat(p[i]) / nf);
    break;
  }
  case FSDP_F16: {
    uint16_t *p = static_cast<uint16_t *>(data);
    for (int64_t i = 0; i < count; ++i)
      p[i] = floatToF16(f16ToFloat(p[i]) / nf);
    break;
  }
  default:
    fail(FSDP_ERR_INVALID, "avg needs a float dtype");
  }
}

void checkCollective(const char *fn, const void *a, const void *b,
                     int64_t count, fsdp_dtype dtype, bool average) {
  if (!a || !b || count < 0)
    fail(FSDP_ERR_INVALID, std::string(fn) + ": invalid argument");
  if (count > INT_MAX)
    fail(FSDP_ERR_INVALID, std::string(fn) + ": " + std::to_string(count) +
                               " elements exceed the MPI count limit");
  if (hal::dtypeSize(dtype) == 0)
    fail(FSDP_ERR_INVALID, std::string(fn) + ": invalid dtype");
  if (average && !hal::isFloat(dtype))
    fail(FSDP_ERR_INVALID, std::string(fn) + ": avg needs a float dtype");
}

Comm::Comm(MPI_Comm c) : comm(c) {
  if (comm != MPI_COMM_NULL) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &rankValue);
    MPI_Comm_size(comm, &sizeValue);
  }
}

Comm Comm::world() {
  if (!active())
    return Comm();
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
  return Comm(c);
}

Comm::Comm(Comm &&o) noexcept
    : comm(std::exchange(o.comm, MPI_COMM_NULL)), rankValue(o.rankValue),
      sizeValue(o.sizeValue) {}

Comm &Comm::operator=(Comm &&o) noexcept {
  std::swap(comm, o.comm);
  std::swap(rankValue, o.rankValue);
  std::swap(sizeValue, o.sizeValue);
  return *this;
}

Comm::~Comm() {
  if (comm != MPI_COMM_NULL && active())
    MPI_Comm_free(&comm);
}

Comm Comm::split(int color, int key) const {
  if (comm == MPI_COMM_NULL)
    return Comm(); // one rank: every split is itself
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_split(comm, color, key, &c), "MPI_Comm_split");
  return Comm(c);
}

} // namespace fsdp::mpi
