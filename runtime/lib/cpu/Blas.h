//===- Blas.h - The cpu driver's BLAS and its kernels -----------*- C++ -*-===//
//
// The cpu driver's GEMMs are OpenBLAS's cblas_sgemm / cblas_dgemm. A
// DYNAMIC_ARCH OpenBLAS (Debian's) runs one kernel set ("core"), chosen when
// it loads: OPENBLAS_CORETYPE if the environment sets it, else its table of
// CPU families and models, which falls back to a lesser core on a CPU newer
// than the library. A core below the CPU's instruction sets runs GEMMs 2-6x
// slower (the development machine's environment sets Haswell, AVX2, on an
// AVX-512 Zen 5; a Sapphire Rapids Xeon ran the generic Prescott, SSE3).
// selectBlas() therefore chooses the core from the CPU's instruction-set
// features (the most capable core the CPU runs), checks it with a GEMM
// self-test (the result against a double-precision reference, its speed
// against the generic core) and reports what runs.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_BLAS_H
#define FSDP_RUNTIME_CPU_BLAS_H

#include <string>
#include <vector>

namespace fsdp::rt::cpu {

/// x86 instruction-set tiers as the OpenBLAS cores use them (0 also for a
/// CPU or core of no known tier, e.g. not x86).
enum class IsaTier {
  Generic = 0, ///< SSE2/SSE3 kernels (Prescott, Core2, Nehalem, ...)
  Avx = 1,     ///< AVX (Sandybridge, Bulldozer ... Excavator)
  Avx2 = 2,    ///< AVX2 + FMA3 (Haswell, Zen)
  Avx512 = 3,  ///< AVX-512 F/CD/BW/DQ/VL (SkylakeX, Cooperlake, ...)
};

/// "generic", "avx", "avx2", "avx512".
const char *isaTierName(IsaTier t);

/// The tier of the instructions OpenBLAS core `core` uses (its name as
/// openblas_get_corename() spells it, any case); Generic for unknown names.
IsaTier coreTier(const std::string &core);

/// The features of this CPU that the cores need, as the OS enables them
/// (GCC's __builtin_cpu_supports, which checks XGETBV for the AVX and
/// AVX-512 register state).
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false;
  bool avx512 = false; ///< F, CD, BW, DQ and VL: the Skylake-X set
  bool avx512bf16 = false;
};
CpuFeatures cpuFeatures();
IsaTier cpuTier(const CpuFeatures &f);

/// The OpenBLAS cores for a CPU with features `f`, most specific first:
/// Cooperlake (AVX-512 with BF16), SkylakeX, Haswell, Sandybridge; empty for
/// a CPU below AVX.
std::vector<std::string> coreCandidates(const CpuFeatures &f);

/// C = A·B (row-major, m×k times k×n, no transposes) through some GEMM.
using SgemmFn = void (*)(int m, int n, int k, const float *a, const float *b,
                         float *c);

/// The GEMM self-test's correctness half: C = A·B of m×k and k×n matrices
/// with entries in [-1, 1) by `gemm`, against the same product accumulated
/// in double: max |C − C_ref| / max |C_ref|. An f32 GEMM is within
/// k·2⁻²⁴·max|A||B|/max|C| of it (Higham, Accuracy and Stability of
/// Numerical Algorithms, 2002, §3.5); a wrong kernel is off by O(1).
double sgemmRelError(SgemmFn gemm, int m, int n, int k);

/// What the cpu driver's BLAS is and how its kernels were chosen (the
/// fsdp_blas_info of runtime.h; strings empty where unknown).
struct BlasInfo {
  std::string library;             ///< "OpenBLAS"
  std::string version;             ///< "0.3.21"
  std::string core;                ///< the core the GEMMs run
  std::string coreAtLoad;          ///< the core OpenBLAS chose when it loaded
  std::string chosenBy;            ///< "cpuid", "OPENBLAS_CORETYPE", "OpenBLAS"
  std::string cpuIsa;              ///< isaTierName(cpuTier(cpuFeatures()))
  std::string warning;             ///< why the GEMMs run below the CPU's tier
  std::string note;                ///< an OPENBLAS_CORETYPE that auto overrode
  double selfTestMaxRelError = -1; ///< sgemmRelError of sgemm and dgemm
  double selfTestGflops = 0;       ///< sgemm 128³, best of 3, 1e9 FLOP/s
  double genericGflops = 0;        ///< the same on "Prescott"; 0: not run
};

/// Chooses the core once per process (later calls return the same record),
/// by FSDP_BLAS_CORE:
/// * auto (default): when the core OpenBLAS loaded with (its own table, or
///   OPENBLAS_CORETYPE from the environment) is of a lower tier than the
///   CPU, switches to coreCandidates()'s first core the library has
///   (chosenBy "cpuid"; `note` names an overridden OPENBLAS_CORETYPE); a
///   candidate that fails the self-test (error above 1e-4) is undone with
///   a warning (its GFLOP/s against the generic core's are reported, never
///   acted on: a timing must not choose the rounding);
/// * openblas: keeps OpenBLAS's choice;
/// * a core name (Prescott, Haswell, SkylakeX, ...): switches to it.
/// Switching needs a DYNAMIC_ARCH build; without one the core stays.
/// Sets `warning` when the running core's tier is below the CPU's. Throws
/// std::runtime_error for an FSDP_BLAS_CORE the library cannot run or when
/// the running core fails the correctness test.
const BlasInfo &selectBlas();

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_BLAS_H
