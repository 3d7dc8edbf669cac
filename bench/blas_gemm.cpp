//===- blas_gemm.cpp - sgemm rate of a CBLAS at the main job's shapes ----===//
//
// Usage: fsdp-blas-gemm LIBRARY.so [ROWS] [REPEATS]
//
// dlopens LIBRARY (any library exporting cblas_sgemm: OpenBLAS, BLIS) and
// times cblas_sgemm on every GEMM of one training step of the main job's
// GPT-2 (hidden 128, 4 heads, vocabulary 256, sequence 64) with ROWS token
// rows per rank (1024 at 1 rank, 512 at 2, 256 at 4): per linear layer
// (in, out) the forward y = x·W (NN, m=ROWS n=out k=in), the input gradient
// (NT, m=ROWS n=in k=out) and the weight gradient (TN, m=in n=out k=ROWS);
// per head and sequence the attention's S = Q·Kᵀ (64×64×32) and O = P·V
// (64×32×64). Prints the best of REPEATS passes (whole-pass time, GFLOP/s
// = 2·m·n·k summed over the pass / seconds) and, for OpenBLAS, the core it
// runs (openblas_get_corename). One thread: run with OPENBLAS_NUM_THREADS=1
// BLIS_NUM_THREADS=1. Not a test: bench/README.md records its numbers.
//
//===----------------------------------------------------------------------===//
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// CBLAS enum values (cblas.h): RowMajor 101, NoTrans 111, Trans 112.
using Sgemm = void (*)(int, int, int, int, int, int, float, const float *, int,
                       const float *, int, float, float *, int);
using CoreName = char *(*)();

struct Gemm {
  bool ta, tb;
  int m, n, k;
};

std::vector<Gemm> stepGemms(int rows) {
  std::vector<Gemm> g;
  auto linear = [&](int in, int out) {
    g.push_back({false, false, rows, out, in});
    g.push_back({false, true, rows, in, out});
    g.push_back({true, false, in, out, rows});
  };
  for (int layer = 0; layer < 4; ++layer) {
    linear(128, 384); // c_attn
    linear(128, 128); // attn.c_proj
    linear(128, 512); // mlp.c_fc
    linear(512, 128); // mlp.c_proj
    for (int h = 0; h < 4 * rows / 64; ++h) {
      g.push_back({false, true, 64, 64, 32});  // S = Q·Kᵀ
      g.push_back({false, false, 64, 32, 64}); // O = P·V
    }
  }
  linear(128, 256); // lm_head (tied wte)
  return g;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LIBRARY.so [ROWS] [REPEATS]\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto sgemm = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
  auto core = reinterpret_cast<CoreName>(dlsym(lib, "openblas_get_corename"));
  if (!sgemm) {
    std::fprintf(stderr, "%s has no cblas_sgemm\n", argv[1]);
    return 1;
  }
  int rows = argc > 2 ? std::atoi(argv[2]) : 1024;
  int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  std::vector<Gemm> gemms = stepGemms(rows);
  size_t maxA = 0, maxB = 0, maxC = 0;
  double flops = 0;
  for (const Gemm &g : gemms) {
    maxA = std::max(maxA, size_t(g.m) * g.k);
    maxB = std::max(maxB, size_t(g.k) * g.n);
    maxC = std::max(maxC, size_t(g.m) * g.n);
    flops += 2.0 * g.m * g.n * g.k;
  }
  std::vector<float> a(maxA), b(maxB), c(maxC);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(i % 17) * 0.01f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = float(i % 13) * 0.02f;
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (const Gemm &g : gemms)
      sgemm(101, g.ta ? 112 : 111, g.tb ? 112 : 111, g.m, g.n, g.k, 1.0f,
            a.data(), g.ta ? g.m : g.k, b.data(), g.tb ? g.k : g.n, 0.0f,
            c.data(), g.n);
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    best = std::min(best, s);
  }
  std::printf("%s core=%s rows=%d gemms=%zu time=%.5f s GFLOP/s=%.1f\n",
              argv[1], core ? core() : "-", rows, gemms.size(), best,
              flops / best * 1e-9);
  return 0;
}
