//===- InitValues.h - counter-based parameter init, host and device -------===//
//
// The initial value of element i of parameter FQN under an init spec
// (fsdp/InitSpec.h: zeros, ones, uniform(a), normal(s), constant(v)) as a
// pure function of (seed, FNV-1a(FQN), i): no state, so any thread, rank or
// GPU computes any element. Written once, compiled by g++ for the cpu driver
// (fsdp_init_values, threaded) and by nvcc (FSDP_HD) for the cuda driver's
// kernel, so that both produce the same bits.
//
// Only +, −, ×, ÷ and √ are used, each an IEEE-754 correctly rounded
// operation on both targets, in a fixed order (g++ with -ffp-contract=off,
// nvcc with --fmad=false: no fused multiply-add), so the results do not
// depend on a math library. log and cos are fdlibm 5.3's algorithms
// (Sun Microsystems 1993; e_log.c, k_cos.c, k_sin.c and the medium-size case
// of e_rem_pio2.c, "error < 1 ulp"), not glibc's or CUDA's: those differ from
// each other in the last bit. Against glibc 2.36 they differ by at most 1 ulp
// (the same bits for 96.5% of log's and 97.9% of cos's arguments:
// InitValuesTest), so a normal(s) value is within 3 ulp of f64 of the former
// glibc-based one and, once rounded to f32, the same bits but for an
// expected element in 10^9 or fewer (none in the 2^20 tested).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITVALUES_H
#define FSDP_INITVALUES_H

#include "fsdp/Half.h" // FSDP_HD
#include "fsdp/runtime.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fsdp::init {

/// The kinds of fsdp/InitSpec.h's init::Kind, as integers (the C entry
/// point fsdp_init_values takes them): zeros, ones, uniform, normal,
/// constant.
enum : int {
  kInitZeros = 0,
  kInitOnes = 1,
  kInitUniform = 2,
  kInitNormal = 3,
  kInitConstant = 4
};

/// The stream tag of parameter values in the hashed tuple (the data
/// streams of fsdp-run use other tags, runtime/tooling/Data.cpp).
inline constexpr uint64_t kParamTag = 1;

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): a bijective 64-bit mixer.
FSDP_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// hashKey({seed, kParamTag, fqnHash, i}) of runtime/tooling/Data.h: h =
/// splitmix64(h ^ v) folded left from 0x5eed5eed5eed5eed.
FSDP_HD inline uint64_t paramHash(uint64_t seed, uint64_t fqnHash, uint64_t i) {
  uint64_t h = 0x5eed5eed5eed5eedULL;
  h = splitmix64(h ^ seed);
  h = splitmix64(h ^ kParamTag);
  h = splitmix64(h ^ fqnHash);
  return splitmix64(h ^ i);
}

/// Uniform in the open interval (0, 1) from the top 53 bits: a multiple of
/// 2^-54, exact.
FSDP_HD inline double uniform01(uint64_t h) {
  return (static_cast<double>(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

FSDP_HD inline uint64_t doubleBits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
#endif
}
FSDP_HD inline double bitsDouble(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, sizeof d);
  return d;
#endif
}
FSDP_HD inline int32_t highWord(double d) {
  return static_cast<int32_t>(doubleBits(d) >> 32);
}

/// Natural logarithm of a positive normal finite x: fdlibm's e_log.c
/// (x = 2^k·(1+f), 1+f in [√2/2, √2); log(1+f) = f − s·(f − R(s²)) with s
/// = f/(2+f) and R Remez's degree-14 even polynomial; < 1 ulp).
FSDP_HD inline double logPositive(double x) {
  const double ln2Hi = 6.93147180369123816490e-01, // 0x3FE62E42FEE00000
      ln2Lo = 1.90821492927058770002e-10,          // 0x3DEA39EF35793C76
      lg1 = 6.666666666666735130e-01, lg2 = 3.999999999940941908e-01,
               lg3 = 2.857142874366239149e-01, lg4 = 2.222219843214978396e-01,
               lg5 = 1.818357216161805012e-01, lg6 = 1.531383769920937332e-01,
               lg7 = 1.479819860511658591e-01;
  int32_t hx = highWord(x);
  int32_t k = (hx >> 20) - 1023;
  hx &= 0x000fffff;
  int32_t i = (hx + 0x95f64) & 0x100000;
  // x (or x/2) normalised into [√2/2, √2).
  uint64_t lo = doubleBits(x) & 0xffffffffULL;
  x = bitsDouble(
      (static_cast<uint64_t>(static_cast<uint32_t>(hx | (i ^ 0x3ff00000)))
       << 32) |
      lo);
  k += (i >> 20);
  double f = x - 1.0;
  double dk = static_cast<double>(k);
  if ((0x000fffff & (2 + hx)) < 3) { // |f| < 2^-20
    if (f == 0.0)
      return k == 0 ? 0.0 : dk * ln2Hi + dk * ln2Lo;
    double r = f * f * (0.5 - 0.33333333333333333 * f);
    return k == 0 ? f - r : dk * ln2Hi - ((r - dk * ln2Lo) - f);
  }
  double s = f / (2.0 + f);
  double z = s * s;
  i = hx - 0x6147a;
  double w = z * z;
  int32_t j = 0x6b851 - hx;
  double t1 = w * (lg2 + w * (lg4 + w * lg6));
  double t2 = z * (lg1 + w * (lg3 + w * (lg5 + w * lg7)));
  i |= j;
  double r = t2 + t1;
  if (i > 0) {
    double hfsq = 0.5 * f * f;
    return k == 0 ? f - (hfsq - s * (hfsq + r))
                  : dk * ln2Hi - ((hfsq - (s * (hfsq + r) + dk * ln2Lo)) - f);
  }
  return k == 0 ? f - s * (f - r)
                : dk * ln2Hi - ((s * (f - r) - dk * ln2Lo) - f);
}

/// cos(x + y) for |x| ≤ π/4, y the tail of x: fdlibm's k_cos.c (as
/// FreeBSD's msun simplified it, without the qx split).
FSDP_HD inline double kernelCos(double x, double y) {
  const double c1 = 4.16666666666666019037e-02,
               c2 = -1.38888888888741095749e-03,
               c3 = 2.48015872894767294178e-05,
               c4 = -2.75573143513906633035e-07,
               c5 = 2.08757232129817482790e-09,
               c6 = -1.13596475577881948265e-11;
  double z = x * x;
  double w = z * z;
  double r = z * (c1 + z * (c2 + z * c3)) + w * w * (c4 + z * (c5 + z * c6));
  double hz = 0.5 * z;
  w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * r - x * y));
}

/// sin(x + y) for |x| ≤ π/4, y the tail of x: fdlibm's k_sin.c.
FSDP_HD inline double kernelSin(double x, double y) {
  const double s1 = -1.66666666666666324348e-01,
               s2 = 8.33333333332248946124e-03,
               s3 = -1.98412698298579493134e-04,
               s4 = 2.75573137070700676789e-06,
               s5 = -2.50507602534068634195e-08,
               s6 = 1.58969099521155010221e-10;
  double z = x * x;
  double v = z * x;
  double r = s2 + z * (s3 + z * (s4 + z * (s5 + z * s6)));
  return x - ((z * (0.5 * y - v * r) - y) - v * s1);
}

/// cos(x) for 0 ≤ x ≤ 2π (more generally x < 2^19·π/2): fdlibm's e_rem_pio2.c
/// medium case (x − n·π/2 with π/2 in three 33-bit pieces, the 2nd and 3rd
/// only where the 1st cancels) and the kernels above by quadrant.
FSDP_HD inline double cosNonNegative(double x) {
  const double invPio2 = 6.36619772367581382433e-01, // 0x3FE45F306DC9C883
      pio2One = 1.57079632673412561417e+00,          // 0x3FF921FB54400000
      pio2OneTail = 6.07710050650619224932e-11,      // 0x3DD0B4611A626331
      pio2Two = 6.07710050630396597660e-11,          // 0x3DD0B4611A600000
      pio2TwoTail = 2.02226624879595063154e-21,      // 0x3BA3198A2E037073
      pio2Three = 2.02226624871116645580e-21,        // 0x3BA3198A2E000000
      pio2ThreeTail = 8.47842766036889956997e-32;    // 0x397B839A252049C1
  int32_t ix = highWord(x) & 0x7fffffff;
  if (ix <= 0x3fe921fb) // |x| ≤ π/4 (fdlibm's test)
    return kernelCos(x, 0.0);
  int32_t n = static_cast<int32_t>(x * invPio2 + 0.5);
  double fn = static_cast<double>(n);
  double r = x - fn * pio2One;
  double w = fn * pio2OneTail; // good to 85 bits
  double y0 = r - w;
  int32_t j = ix >> 20;
  if (j - ((highWord(y0) >> 20) & 0x7ff) > 16) { // cancelled: 118 bits
    double t = r;
    w = fn * pio2Two;
    r = t - w;
    w = fn * pio2TwoTail - ((t - r) - w);
    y0 = r - w;
    if (j - ((highWord(y0) >> 20) & 0x7ff) > 49) { // 151 bits
      t = r;
      w = fn * pio2Three;
      r = t - w;
      w = fn * pio2ThreeTail - ((t - r) - w);
      y0 = r - w;
    }
  }
  double y1 = (r - y0) - w;
  switch (n & 3) {
  case 0:
    return kernelCos(y0, y1);
  case 1:
    return -kernelSin(y0, y1);
  case 2:
    return -kernelCos(y0, y1);
  default:
    return kernelSin(y0, y1);
  }
}

/// Standard normal by Box–Muller (Box & Muller 1958) from two hashes
/// derived from h: √(−2·ln u1)·cos(2π·u2), the product 2π·u2 rounded first
/// as before (6.283185307179586 is 2π rounded to double).
FSDP_HD inline double normal01(uint64_t h) {
  double u1 = uniform01(splitmix64(h ^ 1)), u2 = uniform01(splitmix64(h ^ 2));
  return sqrt(-2.0 * logPositive(u1)) * cosNonNegative(6.283185307179586 * u2);
}

/// Value of element i of the parameter whose FQN hashes (FNV-1a) to
/// fqnHash, for init `kind` (kInit*) with `value` (a, s or v).
FSDP_HD inline double initValue(int kind, double value, uint64_t seed,
                                uint64_t fqnHash, uint64_t i) {
  switch (kind) {
  case kInitOnes:
    return 1.0;
  case kInitUniform:
    return value * (2.0 * uniform01(paramHash(seed, fqnHash, i)) - 1.0);
  case kInitNormal:
    return value * normal01(paramHash(seed, fqnHash, i));
  case kInitConstant:
    return value;
  default:
    return 0.0;
  }
}

/// Stores host value v as element j of `p` in float dtype t, as the
/// executor writes host values: f64 as is, f32 rounded once, bf16/f16
/// through f32 (so that a bf16 param equals nn.cast of its f32 master).
FSDP_HD inline void storeValue(fsdp_dtype t, void *p, int64_t j, double v) {
  switch (t) {
  case FSDP_F64:
    static_cast<double *>(p)[j] = v;
    break;
  case FSDP_F32:
    static_cast<float *>(p)[j] = static_cast<float>(v);
    break;
  case FSDP_BF16:
    static_cast<uint16_t *>(p)[j] = floatToBf16(static_cast<float>(v));
    break;
  default: // FSDP_F16 (the callers check the dtype)
    static_cast<uint16_t *>(p)[j] = floatToF16(static_cast<float>(v));
    break;
  }
}

/// Elements [begin, end) of fsdp_init_values: y[j] (and master[j] when not
/// null) = initValue(..., firstIndex + j), each value computed once.
FSDP_HD inline void initRange(fsdp_dtype t, void *y, fsdp_dtype mt,
                              void *master, int64_t begin, int64_t end,
                              uint64_t seed, uint64_t fqnHash,
                              uint64_t firstIndex, int kind, double value) {
  for (int64_t j = begin; j < end; ++j) {
    double v = initValue(kind, value, seed, fqnHash,
                         firstIndex + static_cast<uint64_t>(j));
    storeValue(t, y, j, v);
    if (master)
      storeValue(mt, master, j, v);
  }
}

} // namespace fsdp::init

#endif // FSDP_INITVALUES_H
