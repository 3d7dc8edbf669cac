//===- HeapMeter.h - the cpu driver's allocator high-water mark -----------===//
//
// The cpu driver's memory statistic is glibc's own count of the bytes in
// use (mallinfo2: uordblks + hblkhd), sampled after every device
// allocation, kernel scratch allocation and collective start; the device
// reports the high-water mark of the samples. mallinfo2 walks every free
// chunk of every arena under its lock (glibc malloc/malloc.c, int_mallinfo),
// which on a schedule of many buffers cost more than the kernels. The meter
// therefore keeps an upper bound of the bytes in use from the blocks it is
// told about (bytes in use only rise through an allocation) and calls
// mallinfo2 only where that bound comes within kHeapMargin of the mark: a
// skipped sample could not have raised it. Internal to the cpu driver.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_HEAPMETER_H
#define FSDP_RUNTIME_CPU_HEAPMETER_H

#include <cstddef>
#include <cstdint>

namespace fsdp::rt::cpu::detail {

/// A block this process just allocated through malloc/new (aligned: through
/// aligned_alloc) raises the meter's bound of the bytes in use by at most
/// what glibc can count for it (heapBlockBytes in HeapMeter.cpp). Call
/// before the sample that should see it.
void heapAllocated(const void *p, bool aligned = false);
/// A block about to be freed lowers the bound by at least what glibc stops
/// counting for it (nothing for a block small enough for the per-thread
/// cache, which glibc counts as in use). Call before the free.
void heapFreeing(const void *p);

/// A sample after a noted allocation (device buffers, kernel scratch):
/// glibc's bytes in use (mallinfo2) into the high-water mark, taken only
/// when the bound could reach the mark.
void sampleHeap();
/// A sample after a call that allocates memory the meter is not told about
/// (Open MPI's non-blocking collectives and point-to-point starts): always
/// taken.
void sampleHeapUntracked();

/// glibc's bytes in use now (a full mallinfo2), the high-water mark of the
/// samples, and a reset of that mark (and of the bound) to the bytes in use
/// now.
int64_t heapNow();
int64_t heapPeak();
void resetHeapPeak();

/// Scratch blocks a kernel holds for a scope (std::vector, unique_ptr
/// arrays): notes them allocated and samples on construction, notes them
/// freed on destruction. Declare it after the containers it names, so that
/// it is destroyed before them.
class HeapScratch {
public:
  template <typename... C>
  explicit HeapScratch(const C &...blocks) : ptrs{blocks.data()...} {
    static_assert(sizeof...(C) <= 2, "HeapScratch holds up to two blocks");
    for (const void *p : ptrs)
      heapAllocated(p);
    sampleHeap();
  }
  ~HeapScratch() {
    for (const void *p : ptrs)
      heapFreeing(p);
  }
  HeapScratch(const HeapScratch &) = delete;
  HeapScratch &operator=(const HeapScratch &) = delete;

private:
  const void *ptrs[2];
};

} // namespace fsdp::rt::cpu::detail

#endif // FSDP_RUNTIME_CPU_HEAPMETER_H
