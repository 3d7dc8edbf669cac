//===- HostCodec.h - Host values <-> raw little-endian element bytes ------===//
//
// The one conversion between fsdp-run's host values (double) and the bytes
// of a floating dtype that checkpoints (Checkpoint.cpp) and safetensors files
// (SafeTensors.cpp) store. bf16/f16 are rounded to nearest even through f32
// (the runtime's cast, Half.h) and widened exactly; f32 is rounded once.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_HOSTCODEC_H
#define FSDP_TOOLING_HOSTCODEC_H

#include "fsdp/Executor.h"
#include "fsdp/Half.h"

#include <cstdint>
#include <cstring>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fsdp-run's files are raw little-endian; add byte swapping here"
#endif

namespace fsdp::tooling {

/// Bytes per element of a floating dtype (f64, f32, bf16, f16), else 0.
inline int64_t floatBytes(fsdp::schedule::DType t) {
  using fsdp::schedule::DType;
  return t == DType::F64                         ? 8
         : t == DType::F32                       ? 4
         : (t == DType::BF16 || t == DType::F16) ? 2
                                                 : 0;
}

/// Writes n values as dtype `t` into `out` (n · floatBytes(t) bytes).
inline void encodeValues(fsdp::schedule::DType t, const double *v, int64_t n,
                         void *out) {
  using fsdp::schedule::DType;
  char *o = static_cast<char *>(out);
  for (int64_t i = 0; i < n; ++i) {
    if (t == DType::F64) {
      std::memcpy(o + 8 * i, &v[i], 8);
    } else if (t == DType::F32) {
      float f = static_cast<float>(v[i]);
      std::memcpy(o + 4 * i, &f, 4);
    } else {
      float f = static_cast<float>(v[i]);
      uint16_t h =
          t == DType::BF16 ? fsdp::floatToBf16(f) : fsdp::floatToF16(f);
      std::memcpy(o + 2 * i, &h, 2);
    }
  }
}

/// Reads n elements of dtype `t` from `in` into doubles (exact widening).
inline void decodeValues(fsdp::schedule::DType t, const void *in, int64_t n,
                         double *v) {
  using fsdp::schedule::DType;
  const char *p = static_cast<const char *>(in);
  for (int64_t i = 0; i < n; ++i) {
    if (t == DType::F64) {
      std::memcpy(&v[i], p + 8 * i, 8);
    } else if (t == DType::F32) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      v[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      v[i] = t == DType::BF16 ? fsdp::bf16ToFloat(h) : fsdp::f16ToFloat(h);
    }
  }
}

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_HOSTCODEC_H
