//===- HeapMeter.cpp - the cpu driver's allocator high-water mark ---------===//
//
// See HeapMeter.h. The accounting below follows glibc's malloc (2.26 and
// later, malloc/malloc.c): a chunk in use is its usable size plus one size
// word (SIZE_SZ, 8 bytes: musable) in an arena, plus two (CHUNK_HDR_SZ) when
// mmapped, where mallinfo2's hblkhd counts the whole mapping; a freed chunk
// of at most MAX_TCACHE_SIZE (1032) usable bytes may stay in the thread's
// cache, which the arena (and so mallinfo2) still counts as in use; an
// allocation of that size may move up to TCACHE_FILL_COUNT (7) more chunks
// of its size from a bin into the cache (tcache "stashing"), and an aligned
// one (_int_memalign) frees the ends of the larger chunk it carves, each
// of which may land in the cache.
//
//===----------------------------------------------------------------------===//
#include "HeapMeter.h"

#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace fsdp::rt::cpu::detail {

namespace {

constexpr int64_t kSizeWord = sizeof(size_t);
/// The largest chunk the per-thread cache holds: MAX_TCACHE_SIZE usable
/// bytes plus its size word.
constexpr int64_t kCacheChunk = 1032 + kSizeWord;
/// How close the bound may come to the mark before a sample is taken: room
/// for what the process allocates between two samples without telling the
/// meter (the interpreter's and MPI's own small blocks), measured with
/// FSDP_CPU_HEAP_AUDIT (runtime/docs/drivers.md).
constexpr int64_t kHeapMargin = 64 * 1024;

/// glibc's bytes in use: the arenas' allocated chunks (uordblks: system
/// bytes less the top chunk, the bins and the free fast-bin chunks) plus
/// the mmapped ones (hblkhd). uordblks already excludes the fast bins
/// (int_mallinfo adds fastavail to avail), so fsmblks is not subtracted.
int64_t mallinfoInUse() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

/// An upper bound of what glibc's bytes in use grow by when `p` was just
/// allocated (see the file comment).
int64_t blockBytesUpper(const void *p, bool aligned) {
  auto usable = static_cast<int64_t>(malloc_usable_size(const_cast<void *>(p)));
  int64_t bytes = usable + 2 * kSizeWord;
  if (usable + kSizeWord <= kCacheChunk)
    bytes += 7 * kCacheChunk; // chunks stashed into the cache
  if (aligned)
    bytes += 2 * kCacheChunk; // the carved chunk's two ends
  return bytes;
}

struct Meter {
  std::mutex mutex;
  int64_t high = 0;  ///< the high-water mark of the samples taken
  int64_t bound = 0; ///< >= the bytes in use now (given the noted blocks)
  // FSDP_CPU_HEAP_AUDIT: every sample measured, to check the skipped ones.
  bool audit = false;
  int64_t samples = 0, taken = 0, missed = 0, largestMiss = 0;
  int64_t everyHigh = 0; ///< the high-water mark of every sample

  Meter() {
    const char *v = std::getenv("FSDP_CPU_HEAP_AUDIT");
    audit = v && *v && std::string_view(v) != "0";
  }

  void take() { // with the mutex held
    int64_t now = mallinfoInUse();
    high = std::max(high, now);
    everyHigh = std::max(everyHigh, now);
    bound = now;
    ++taken;
  }
  void sample(bool untracked) {
    std::lock_guard<std::mutex> lock(mutex);
    ++samples;
    if (untracked || bound + kHeapMargin > high) {
      take();
      return;
    }
    if (!audit)
      return;
    int64_t now = mallinfoInUse();
    everyHigh = std::max(everyHigh, now);
    if (now > high) {
      ++missed;
      largestMiss = std::max(largestMiss, now - high);
    }
  }
  ~Meter() {
    if (audit)
      std::fprintf(
          stderr,
          "fsdp cpu heap audit: %lld samples, %lld taken, %lld "
          "skipped above the mark (largest %lld bytes); peak %lld, "
          "every sample's peak %lld\n",
          static_cast<long long>(samples), static_cast<long long>(taken),
          static_cast<long long>(missed), static_cast<long long>(largestMiss),
          static_cast<long long>(high), static_cast<long long>(everyHigh));
  }
};

Meter &meter() {
  static Meter m;
  return m;
}

} // namespace

void heapAllocated(const void *p, bool aligned) {
  if (!p)
    return;
  int64_t bytes = blockBytesUpper(p, aligned);
  Meter &m = meter();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.bound += bytes;
}

void heapFreeing(const void *p) {
  if (!p)
    return;
  auto usable = static_cast<int64_t>(malloc_usable_size(const_cast<void *>(p)));
  if (usable + kSizeWord <= kCacheChunk)
    return; // may stay in the cache: still in use for glibc
  Meter &m = meter();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.bound -= usable + kSizeWord;
}

void sampleHeap() { meter().sample(false); }
void sampleHeapUntracked() { meter().sample(true); }

int64_t heapNow() { return mallinfoInUse(); }

int64_t heapPeak() {
  Meter &m = meter();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.high;
}

void resetHeapPeak() {
  Meter &m = meter();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.high = m.everyHigh = m.bound = mallinfoInUse();
}

} // namespace fsdp::rt::cpu::detail
