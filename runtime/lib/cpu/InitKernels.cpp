//===- InitKernels.cpp - the cpu driver's parameter initialisation --------===//
//
// fsdp_init_values on the host: fsdp/InitValues.h's initRange over
// contiguous slices of the elements, one slice per std::thread. Every value
// is a pure function of its element index, so the bits do not depend on the
// thread count. Compiled with -ffp-contract=off (runtime/CMakeLists.txt), as
// the cuda driver's kernel is with --fmad=false: the same roundings.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "fsdp/InitValues.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace fsdp::rt::cpu {

int initThreads(int requested, int64_t n) {
  // Below this many elements per thread, starting threads costs more than
  // the values (about 30 ns each for normal(s)).
  constexpr int64_t kMinPerThread = 1 << 16;
  int64_t t = requested > 0
                  ? requested
                  : static_cast<int64_t>(std::thread::hardware_concurrency());
  t = std::min<int64_t>(std::max<int64_t>(t, 1), n / kMinPerThread);
  return static_cast<int>(std::max<int64_t>(t, 1));
}

void initValues(fsdp_dtype t, void *y, fsdp_dtype mt, void *master, int64_t n,
                uint64_t seed, uint64_t fqnHash, uint64_t firstIndex, int kind,
                double value, int threads) {
  int nt = initThreads(threads, n);
  auto slice = [&](int i) {
    int64_t begin = n * i / nt, end = n * (i + 1) / nt;
    init::initRange(t, y, mt, master, begin, end, seed, fqnHash, firstIndex,
                    kind, value);
  };
  if (nt == 1) {
    slice(0);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(nt - 1));
  for (int i = 1; i < nt; ++i)
    pool.emplace_back(slice, i);
  slice(0);
  for (std::thread &th : pool)
    th.join();
}

} // namespace fsdp::rt::cpu
