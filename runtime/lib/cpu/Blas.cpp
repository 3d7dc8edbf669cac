//===- Blas.cpp - Chooses and checks the cpu driver's OpenBLAS kernels ----===//
//
// OpenBLAS reads OPENBLAS_CORETYPE once, in its load-time constructor
// (driver/others/dynamic.c, gotoblas_dynamic_init), before main. A
// DYNAMIC_ARCH build exports gotoblas_dynamic_quit (forget the core) and
// gotoblas_dynamic_init (choose again: OPENBLAS_CORETYPE if set, else its
// CPU table), so setting the variable and calling the two switches the core
// in place, as if the variable had been set at load; each core's init()
// recomputes its blocking parameters and no state outlives a GEMM call
// (our GEMMs run on one thread, and the switch happens before the first).
// A build without them (a single-core build) keeps its core.
//
//===----------------------------------------------------------------------===//
#include "Blas.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <strings.h>

namespace fsdp::rt::cpu {

namespace {

constexpr const char *kCoreVar = "OPENBLAS_CORETYPE";
constexpr const char *kModeVar = "FSDP_BLAS_CORE";
constexpr const char *kGenericCore = "Prescott";
constexpr double kMaxRelError = 1e-4;

struct CoreSwitch {
  void (*quit)() = nullptr;
  void (*init)() = nullptr;
  explicit operator bool() const { return quit && init; }
};

CoreSwitch coreSwitch() {
  CoreSwitch s;
  s.quit = reinterpret_cast<void (*)()>(
      dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  s.init = reinterpret_cast<void (*)()>(
      dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  return s;
}

std::optional<std::string> envValue(const char *name) {
  const char *v = std::getenv(name);
  return v ? std::optional<std::string>(v) : std::nullopt;
}

/// Runs OpenBLAS's core choice again with OPENBLAS_CORETYPE = `core` (unset:
/// its own CPU table), then restores the variable as it was.
void switchCore(const CoreSwitch &sw, const std::optional<std::string> &core) {
  std::optional<std::string> before = envValue(kCoreVar);
  if (core)
    setenv(kCoreVar, core->c_str(), 1);
  else
    unsetenv(kCoreVar);
  sw.quit();
  sw.init();
  if (before)
    setenv(kCoreVar, before->c_str(), 1);
  else
    unsetenv(kCoreVar);
}

/// Whether the library has core `name`: DYNAMIC_ARCH builds export each
/// core's table as gotoblas_<NAME> (an unknown OPENBLAS_CORETYPE would fall
/// back to Prescott with a message).
bool libraryHasCore(const std::string &name) {
  std::string sym = "gotoblas_";
  for (char ch : name)
    sym += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return dlsym(RTLD_DEFAULT, sym.c_str()) != nullptr;
}

std::string runningCore() {
  const char *c = openblas_get_corename();
  return c ? c : "";
}

void cblasSgemm(int m, int n, int k, const float *a, const float *b, float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b,
              n, 0.0f, c, n);
}

/// Entries in [-1, 1) from a fixed LCG (Numerical Recipes' constants).
template <typename T> std::vector<T> testMatrix(size_t n, uint32_t seed) {
  std::vector<T> v(n);
  for (T &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<T>(static_cast<double>(seed >> 8) / (1 << 23) - 1.0);
  }
  return v;
}

template <typename T>
std::vector<double> referenceGemm(const std::vector<T> &a,
                                  const std::vector<T> &b, int m, int n,
                                  int k) {
  std::vector<double> c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p)
      for (int j = 0; j < n; ++j)
        c[static_cast<size_t>(i) * n + j] +=
            static_cast<double>(a[static_cast<size_t>(i) * k + p]) *
            static_cast<double>(b[static_cast<size_t>(p) * n + j]);
  return c;
}

template <typename T>
double relError(const std::vector<T> &c, const std::vector<double> &ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double d = std::fabs(static_cast<double>(c[i]) - ref[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return scale > 0 ? err / scale : err;
}

double dgemmRelError(int m, int n, int k) {
  auto a = testMatrix<double>(static_cast<size_t>(m) * k, 3);
  auto b = testMatrix<double>(static_cast<size_t>(k) * n, 4);
  std::vector<double> c(static_cast<size_t>(m) * n);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a.data(),
              k, b.data(), n, 0.0, c.data(), n);
  return relError(c, referenceGemm(a, b, m, n, k));
}

/// sgemm of 128³ through cblas, best of 3 after one untimed call, 1e9 FLOP/s.
double sgemmGflops() {
  constexpr int n = 128;
  auto a = testMatrix<float>(n * n, 5), b = testMatrix<float>(n * n, 6);
  std::vector<float> c(n * n);
  cblasSgemm(n, n, n, a.data(), b.data(), c.data());
  double best = INFINITY;
  for (int r = 0; r < 3; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    cblasSgemm(n, n, n, a.data(), b.data(), c.data());
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return 2.0 * n * n * n / best * 1e-9;
}

double selfTestError() {
  return std::max(sgemmRelError(cblasSgemm, 67, 45, 129),
                  dgemmRelError(67, 45, 129));
}

std::string versionOf(const char *config) {
  // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64"
  std::string s = config ? config : "";
  size_t b = s.find(' ');
  if (b == std::string::npos)
    return "";
  size_t e = s.find(' ', b + 1);
  return s.substr(b + 1, e == std::string::npos ? e : e - b - 1);
}

/// The core to switch to ("" keeps the running one) for FSDP_BLAS_CORE =
/// `mode`, with info.chosenBy and info.note set.
std::string target(const std::string &mode, const CpuFeatures &f,
                   const CoreSwitch &sw, BlasInfo &info) {
  std::optional<std::string> envCore = envValue(kCoreVar);
  IsaTier tier = cpuTier(f);
  info.chosenBy = envCore ? kCoreVar : "OpenBLAS";
  if (mode == "openblas")
    return "";
  if (mode != "auto") {
    if (!sw || !libraryHasCore(mode))
      throw std::runtime_error(
          std::string(kModeVar) + "='" + mode +
          "': expected 'auto', 'openblas' or the name of a core this "
          "OpenBLAS has (" +
          (sw ? "Prescott, Haswell, SkylakeX, ...; see openblas_get_config)"
              : "none: it is not a DYNAMIC_ARCH build)"));
    info.chosenBy = kModeVar;
    return mode;
  }
  if (!sw || coreTier(info.coreAtLoad) >= tier)
    return "";
  for (const std::string &c : coreCandidates(f))
    if (libraryHasCore(c)) {
      info.chosenBy = "cpuid";
      if (envCore)
        info.note = std::string(kCoreVar) + "=" + *envCore +
                    " is below this CPU's " + isaTierName(tier) + ": running " +
                    c + " (FSDP_BLAS_CORE=openblas keeps it)";
      return c;
    }
  return "";
}

BlasInfo choose() {
  BlasInfo info;
  info.library = "OpenBLAS";
  info.version = versionOf(openblas_get_config());
  info.coreAtLoad = runningCore();
  CpuFeatures f = cpuFeatures();
  IsaTier tier = cpuTier(f);
  info.cpuIsa = isaTierName(tier);
  std::string mode = envValue(kModeVar).value_or("auto");
  CoreSwitch sw = coreSwitch();
  std::string core = target(mode, f, sw, info);
  // What OpenBLAS loaded with: its table, or OPENBLAS_CORETYPE.
  std::optional<std::string> atLoad = envValue(kCoreVar);
  if (!core.empty())
    switchCore(sw, core);
  info.selfTestMaxRelError = selfTestError();
  info.selfTestGflops = sgemmGflops();
  if (sw) {
    switchCore(sw, std::string(kGenericCore));
    info.genericGflops = sgemmGflops();
    switchCore(sw, core.empty() ? atLoad : core);
  }
  // Only a wrong result rejects the chosen core: the GFLOP/s are a report,
  // never a decision, since a rank descheduled during the timing would
  // otherwise run other kernels (other rounding) than the ranks and runs
  // that were not.
  if (info.chosenBy == "cpuid" && !(info.selfTestMaxRelError <= kMaxRelError)) {
    char why[200];
    std::snprintf(why, sizeof why,
                  "the GEMM self-test rejected core '%s' (relative error "
                  "%.3g)",
                  core.c_str(), info.selfTestMaxRelError);
    switchCore(sw, atLoad);
    info.chosenBy = atLoad ? kCoreVar : "OpenBLAS";
    info.note.clear();
    info.warning = why;
    info.selfTestMaxRelError = selfTestError();
    info.selfTestGflops = sgemmGflops();
  }
  if (!(info.selfTestMaxRelError <= kMaxRelError))
    throw std::runtime_error(
        "BLAS self-test failed: OpenBLAS core '" + runningCore() +
        "' computes a 67x45x129 GEMM with relative error " +
        std::to_string(info.selfTestMaxRelError) + " (allowed " +
        std::to_string(kMaxRelError) + "); set " + kModeVar +
        " to another core");
  info.core = runningCore();
  IsaTier running = coreTier(info.core);
  if (running < tier) {
    std::string msg = "OpenBLAS runs its " +
                      std::string(running <= IsaTier::Avx ? "generic " : "") +
                      "'" + info.core + "' kernels (" + isaTierName(running) +
                      ") on a CPU with " + isaTierName(tier) +
                      " (core chosen by " + info.chosenBy +
                      "); its GEMMs run several times slower";
    if (info.chosenBy == kModeVar)
      msg += ": unset FSDP_BLAS_CORE";
    else if (info.chosenBy == kCoreVar)
      msg += ": unset OPENBLAS_CORETYPE or FSDP_BLAS_CORE";
    info.warning = info.warning.empty() ? msg : info.warning + "; " + msg;
  }
  return info;
}

} // namespace

const char *isaTierName(IsaTier t) {
  switch (t) {
  case IsaTier::Avx512:
    return "avx512";
  case IsaTier::Avx2:
    return "avx2";
  case IsaTier::Avx:
    return "avx";
  case IsaTier::Generic:
    break;
  }
  return "generic";
}

IsaTier coreTier(const std::string &core) {
  // The kernels each core of OpenBLAS 0.3.x uses (kernel/x86_64/KERNEL.*):
  // Zen runs Haswell's, Excavator Piledriver's.
  static const std::pair<const char *, IsaTier> kCores[] = {
      {"SkylakeX", IsaTier::Avx512},
      {"Cooperlake", IsaTier::Avx512},
      {"SapphireRapids", IsaTier::Avx512},
      {"Haswell", IsaTier::Avx2},
      {"Zen", IsaTier::Avx2},
      {"Sandybridge", IsaTier::Avx},
      {"Bulldozer", IsaTier::Avx},
      {"Piledriver", IsaTier::Avx},
      {"Steamroller", IsaTier::Avx},
      {"Excavator", IsaTier::Avx}};
  for (const auto &[name, t] : kCores)
    if (strcasecmp(core.c_str(), name) == 0)
      return t;
  return IsaTier::Generic;
}

CpuFeatures cpuFeatures() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f.avx = __builtin_cpu_supports("avx");
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  f.avx512bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
#endif
  return f;
}

IsaTier cpuTier(const CpuFeatures &f) {
  if (f.avx512 && f.avx2 && f.fma)
    return IsaTier::Avx512;
  if (f.avx2 && f.fma)
    return IsaTier::Avx2;
  return f.avx ? IsaTier::Avx : IsaTier::Generic;
}

std::vector<std::string> coreCandidates(const CpuFeatures &f) {
  std::vector<std::string> c;
  IsaTier t = cpuTier(f);
  if (t == IsaTier::Avx512) {
    if (f.avx512bf16)
      c.push_back("Cooperlake");
    c.push_back("SkylakeX");
  }
  if (t >= IsaTier::Avx2)
    c.push_back("Haswell");
  if (t >= IsaTier::Avx)
    c.push_back("Sandybridge");
  return c;
}

double sgemmRelError(SgemmFn gemm, int m, int n, int k) {
  auto a = testMatrix<float>(static_cast<size_t>(m) * k, 1);
  auto b = testMatrix<float>(static_cast<size_t>(k) * n, 2);
  std::vector<float> c(static_cast<size_t>(m) * n);
  gemm(m, n, k, a.data(), b.data(), c.data());
  return relError(c, referenceGemm(a, b, m, n, k));
}

const BlasInfo &selectBlas() {
  static std::once_flag once;
  static BlasInfo info;
  std::call_once(once, [] { info = choose(); });
  return info;
}

} // namespace fsdp::rt::cpu
