//===- BlasTest.cpp - The cpu driver's choice of OpenBLAS kernels ---------===//
//
// runtime/lib/cpu/Blas.h: the core for a CPU's features, the tiers of
// OpenBLAS's cores, the GEMM self-test (it must reject a wrong GEMM), and the
// choice this process made, against the CPU's flags as the kernel reports
// them in /proc/cpuinfo (not the runtime's CPUID reading).
//
//===----------------------------------------------------------------------===//
#include "Blas.h"

#include "fsdp/Device.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <cblas.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace fsdp::rt::cpu;

namespace {

CpuFeatures zen5() { // AMD EPYC family 26: AVX-512 with BF16
  CpuFeatures f;
  f.avx = f.avx2 = f.fma = f.avx512 = f.avx512bf16 = true;
  return f;
}

TEST(BlasTest, CoreCandidatesFollowTheCpuTier) {
  EXPECT_EQ(coreCandidates(zen5()),
            (std::vector<std::string>{"Cooperlake", "SkylakeX", "Haswell",
                                      "Sandybridge"}));
  CpuFeatures skx = zen5();
  skx.avx512bf16 = false;
  EXPECT_EQ(coreCandidates(skx).front(), "SkylakeX");
  CpuFeatures hsw;
  hsw.avx = hsw.avx2 = hsw.fma = true;
  EXPECT_EQ(cpuTier(hsw), IsaTier::Avx2);
  EXPECT_EQ(coreCandidates(hsw),
            (std::vector<std::string>{"Haswell", "Sandybridge"}));
  CpuFeatures avx2NoFma = hsw; // no FMA3: Haswell's kernels would fault
  avx2NoFma.fma = false;
  EXPECT_EQ(cpuTier(avx2NoFma), IsaTier::Avx);
  EXPECT_TRUE(coreCandidates(CpuFeatures{}).empty());
  EXPECT_EQ(cpuTier(CpuFeatures{}), IsaTier::Generic);
}

TEST(BlasTest, CoreTiers) {
  EXPECT_EQ(coreTier("Prescott"), IsaTier::Generic);
  EXPECT_EQ(coreTier("Nehalem"), IsaTier::Generic);
  EXPECT_EQ(coreTier("Sandybridge"), IsaTier::Avx);
  EXPECT_EQ(coreTier("Haswell"), IsaTier::Avx2);
  EXPECT_EQ(coreTier("zen"), IsaTier::Avx2); // any case
  EXPECT_EQ(coreTier("SkylakeX"), IsaTier::Avx512);
  EXPECT_EQ(coreTier("Cooperlake"), IsaTier::Avx512);
  EXPECT_EQ(coreTier("no such core"), IsaTier::Generic);
}

void blasSgemm(int m, int n, int k, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b,
              n, 0.0f, c, n);
}

// A GEMM that reads B as if it were transposed (a wrong kernel's typical
// mistake), and one that loses the last step of every dot product.
void transposedSgemm(int m, int n, int k, const float *a, const float *b,
                     float *c) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0;
      for (int p = 0; p < k; ++p)
        s += a[i * k + p] * b[j * k + p];
      c[i * n + j] = s;
    }
}
void shortSgemm(int m, int n, int k, const float *a, const float *b, float *c) {
  blasSgemm(m, n, k - 1, a, b, c);
}

TEST(BlasTest, SelfTestRejectsAWrongGemm) {
  EXPECT_LT(sgemmRelError(blasSgemm, 67, 45, 129), 1e-5);
  EXPECT_GT(sgemmRelError(transposedSgemm, 67, 45, 129), 0.1);
  // One term of 129 missing: a relative error of about 1/sqrt(129).
  EXPECT_GT(sgemmRelError(shortSgemm, 67, 45, 129), 1e-2);
}

std::set<std::string> procCpuFlags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      return {std::istream_iterator<std::string>(words), {}};
    }
  return {};
}

// This process's choice: a core of the CPU's tier (the tier from
// /proc/cpuinfo), correct, and faster than the generic core.
TEST(BlasTest, ThisProcessRunsTheCpusTier) {
  std::set<std::string> flags = procCpuFlags();
  if (flags.empty())
    GTEST_SKIP() << "no /proc/cpuinfo flags (not Linux on x86)";
  auto has = [&](const char *f) { return flags.count(f) > 0; };
  IsaTier tier = IsaTier::Generic;
  if (has("avx"))
    tier = IsaTier::Avx;
  if (has("avx2") && has("fma"))
    tier = IsaTier::Avx2;
  if (tier == IsaTier::Avx2 && has("avx512f") && has("avx512cd") &&
      has("avx512bw") && has("avx512dq") && has("avx512vl"))
    tier = IsaTier::Avx512;
  const BlasInfo &b = selectBlas();
  EXPECT_EQ(b.cpuIsa, isaTierName(tier));
  EXPECT_EQ(b.library, "OpenBLAS");
  EXPECT_FALSE(b.version.empty());
  EXPECT_GE(coreTier(b.core), tier)
      << "core " << b.core << ", chosen by " << b.chosenBy;
  EXPECT_TRUE(b.warning.empty()) << b.warning;
  EXPECT_GE(b.selfTestMaxRelError, 0);
  EXPECT_LE(b.selfTestMaxRelError, 1e-5);
  // The C API reports the same record.
  fsdp::rt::Device cpu("cpu");
  fsdp_blas_info info{};
  ASSERT_EQ(fsdp_device_blas(cpu.get(), &info), FSDP_OK);
  EXPECT_EQ(info.core, b.core);
  EXPECT_EQ(info.chosen_by, b.chosenBy);
  EXPECT_EQ(fsdp_device_blas(nullptr, &info), FSDP_ERR_INVALID);
}

} // namespace
