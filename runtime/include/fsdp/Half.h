//===- Half.h - bfloat16 / IEEE binary16 conversions ------------*- C++ -*-===//
//
// The 2-byte storage dtypes of runtime/docs/schedule-format.md ("Mixed
// precision"): bf16 (the top 16 bits of an IEEE binary32) and f16 (IEEE
// binary16), held as uint16_t bit patterns. Narrowing rounds to nearest, ties
// to even (IEEE 754-2019, 4.3.1), including subnormal results; values beyond
// the largest finite number become ±inf; NaN stays NaN (quietened, sign and
// the top payload bits kept). Widening is exact. The f64 narrowings round
// once (through f32 with round-to-odd, which is exact for targets of at most
// 22 significand bits), not twice.
//
// All functions are inline and header-only, and __host__ __device__ under
// nvcc (FSDP_HD): the cpu and cuda drivers round with the same code. They
// assume the default floating point environment (round to nearest, no
// flush-to-zero).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_HALF_H
#define FSDP_HALF_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FSDP_HD __host__ __device__
#else
#define FSDP_HD
#endif

namespace fsdp {

/// The bit pattern of `f`.
FSDP_HD inline uint32_t floatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
/// The float with bit pattern `u`.
FSDP_HD inline float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// f32 -> bf16, round to nearest even; overflow to ±inf; NaN stays NaN.
FSDP_HD inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign/payload top, quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// bf16 -> f32 (exact).
FSDP_HD inline float bf16ToFloat(uint16_t h) {
  return bitsFloat(static_cast<uint32_t>(h) << 16);
}

/// f32 -> IEEE binary16, round to nearest even (subnormal results too);
/// |f| >= 65520 becomes ±inf; NaN stays NaN.
FSDP_HD inline uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) // NaN: quiet, top payload bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x47800000u) // >= 65536 (and inf): inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (u < 0x38800000u) { // below 2^-14: subnormal or zero result
    // Adding 0.5 (= 2^-1) aligns the binary16 subnormal unit 2^-24 with the
    // last bit of the f32 significand; the FPU rounds to nearest even.
    const uint32_t magic = 126u << 23;
    float r = bitsFloat(u) + bitsFloat(magic);
    return static_cast<uint16_t>(sign | (floatBits(r) - magic));
  }
  // Normal: rebias the exponent (127 -> 15) and round the low 13 bits;
  // a carry propagates into the exponent (65520..65535 become inf).
  uint32_t odd = (u >> 13) & 1u;
  u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + odd;
  return static_cast<uint16_t>(sign | (u >> 13));
}

/// IEEE binary16 -> f32 (exact).
FSDP_HD inline float f16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) { // zero or subnormal: mant · 2^-24, exact in f32
    float v = static_cast<float>(mant) * bitsFloat(0x33800000u);
    return bitsFloat(floatBits(v) | sign);
  }
  if (exp == 31) // inf or NaN
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

/// f64 -> f32 rounding to odd (inexact results get an odd last bit), so
/// that a second rounding to a format of at most 22 significand bits equals
/// a single rounding of the double.
FSDP_HD inline float doubleToFloatOdd(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) == d || d != d)
    return f;
  uint32_t u = floatBits(f);
  double af = f < 0 ? -static_cast<double>(f) : static_cast<double>(f);
  double ad = d < 0 ? -d : d;
  if (af > ad) // rounded away from zero: step back toward zero
    --u;
  return bitsFloat(u | 1u);
}

/// f64 -> bf16 with a single rounding to nearest even.
FSDP_HD inline uint16_t doubleToBf16(double d) {
  return floatToBf16(doubleToFloatOdd(d));
}
/// f64 -> f16 with a single rounding to nearest even.
FSDP_HD inline uint16_t doubleToF16(double d) {
  return floatToF16(doubleToFloatOdd(d));
}

/// Widens n bf16 values into f32.
FSDP_HD inline void bf16ToFloatN(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = bf16ToFloat(src[i]);
}
/// Rounds n f32 values into bf16.
FSDP_HD inline void floatToBf16N(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = floatToBf16(src[i]);
}
/// Widens n f16 values into f32.
FSDP_HD inline void f16ToFloatN(const uint16_t *src, float *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = f16ToFloat(src[i]);
}
/// Rounds n f32 values into f16.
FSDP_HD inline void floatToF16N(const float *src, uint16_t *dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = floatToF16(src[i]);
}

} // namespace fsdp

#endif // FSDP_HALF_H
