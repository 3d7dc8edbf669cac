//===- FileIo.h - Positioned file reads and writes for fsdp-run -----------===//
//
// The file primitives of --init-from / --export (SafeTensors.cpp) and
// --save / --load (Checkpoint.cpp): an owning descriptor and pread / pwrite
// of exact byte counts; and where a rank's copy of a unit's state lies in
// the unit's flat buffer.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_FILEIO_H
#define FSDP_TOOLING_FILEIO_H

#include "fsdp/Executor.h"

#include <cerrno>
#include <cstdint>
#include <sys/types.h>
#include <type_traits>
#include <unistd.h>

namespace fsdp::tooling {

/// An open file descriptor, closed on scope exit.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
};

/// pread / pwrite of exactly n bytes at `off`, resumed after short
/// transfers and EINTR; false on an error or end of file.
template <typename Buf, typename Io>
inline bool transferAt(Io io, int fd, Buf *buf, uint64_t n, uint64_t off) {
  auto *p = reinterpret_cast<
      std::conditional_t<std::is_const_v<Buf>, const char, char> *>(buf);
  while (n > 0) {
    ssize_t done = io(fd, p, n, static_cast<off_t>(off));
    if (done < 0 && errno == EINTR)
      continue;
    if (done <= 0)
      return false;
    p += done;
    n -= static_cast<uint64_t>(done);
    off += static_cast<uint64_t>(done);
  }
  return true;
}
inline bool readAt(int fd, void *buf, uint64_t n, uint64_t off) {
  return transferAt(::pread, fd, buf, n, off);
}
inline bool writeAt(int fd, const void *buf, uint64_t n, uint64_t off) {
  return transferAt(::pwrite, fd, buf, n, off);
}

/// The flat element range [begin, end) of unit `u` that `rank`'s buffer of
/// input `io` holds: its shard (index rank mod S) for layout "shard", the
/// whole padded buffer for "full".
inline void stateRange(const fsdp::schedule::Program &p,
                       const fsdp::schedule::UnitDesc &u,
                       const fsdp::schedule::IoDesc &io, int rank,
                       int64_t &begin, int64_t &end) {
  if (io.layout == "full") {
    begin = 0;
    end = u.paddedNumel;
  } else {
    begin = (rank % p.shardSize()) * u.shardNumel;
    end = begin + u.shardNumel;
  }
}

/// Whether `rank` holds the copy of `io` that is written to files: the
/// first replica's shards (ranks < S), or rank 0's full buffer. Other ranks
/// hold replicas of those bytes.
inline bool writesCopy(const fsdp::schedule::Program &p,
                       const fsdp::schedule::IoDesc &io, int rank) {
  return io.layout == "full" ? rank == 0 : rank < p.shardSize();
}

/// Calls f(param, lo, hi) for every parameter of `u` that overlaps flat
/// elements [begin, end) of the unit, with [lo, hi) the overlap in the
/// unit's flat (unpadded-offset) numbering; lo < hi.
template <typename F>
inline void forEachParamIn(const fsdp::schedule::UnitDesc &u, int64_t begin,
                           int64_t end, F &&f) {
  for (const fsdp::schedule::ParamDesc &p : u.params) {
    int64_t lo = begin > p.offset ? begin : p.offset;
    int64_t hi = end < p.offset + p.numel ? end : p.offset + p.numel;
    if (lo < hi)
      f(p, lo, hi);
  }
}

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_FILEIO_H
