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
#include <fcntl.h>
#include <string>
#include <sys/types.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

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

/// fsync of `path` opened with `flags` (O_RDONLY, | O_DIRECTORY for a
/// directory); false on an error.
inline bool fsyncPath(const std::string &path, int flags) {
  Fd f(::open(path.c_str(), flags | O_CLOEXEC));
  return f.fd >= 0 && ::fsync(f.fd) == 0;
}

/// Slice `index` of `count` of a tensor of shape `globalShape` whose
/// dimension `dim` is cut into `blocks` equal blocks, each into `count`
/// pieces (a schedule's tensor_slice), as a parameter for
/// ParamDesc::globalIndex / forEachGlobalRun: `shape` the slice's, `numel`
/// its elements. `dim` must be valid and divisible.
inline fsdp::schedule::ParamDesc
sliceOf(const std::vector<int64_t> &globalShape, int64_t dim, int64_t blocks,
        int64_t count) {
  fsdp::schedule::ParamDesc p;
  p.globalShape = globalShape;
  p.shape = globalShape;
  p.tpDim = dim;
  p.tpBlocks = blocks;
  p.shape[static_cast<size_t>(dim)] /= count;
  p.numel = 1;
  for (int64_t d : p.shape)
    p.numel *= d;
  return p;
}

/// The flat element range [begin, end) of unit `u` that `rank`'s buffer of
/// input `io` holds: its shard (index (rank / T) mod S in its shard group,
/// Program::shardIndex) for layout "shard", the whole padded buffer for
/// "full".
inline void stateRange(const fsdp::schedule::Program &p,
                       const fsdp::schedule::UnitDesc &u,
                       const fsdp::schedule::IoDesc &io, int rank,
                       int64_t &begin, int64_t &end) {
  if (io.layout == "full") {
    begin = 0;
    end = u.paddedNumel;
  } else {
    begin = p.shardIndex(rank) * u.shardNumel;
    end = begin + u.shardNumel;
  }
}

/// Whether `rank` holds the copy of `io` that is written to files: the
/// first replica's shards (data-parallel ranks < S), or data-parallel rank
/// 0's full buffer, on every tensor-parallel rank (each holds its own
/// slices). Other ranks hold replicas of those bytes. A parameter
/// replicated in the tensor-parallel group is written by tensor-parallel
/// rank 0 only (writesParam).
inline bool writesCopy(const fsdp::schedule::Program &p,
                       const fsdp::schedule::IoDesc &io, int rank) {
  return io.layout == "full" ? p.dataRank(rank) == 0
                             : p.dataRank(rank) < p.shardSize();
}

/// Whether `rank`'s copy of parameter `param` is its to write (given
/// writesCopy): a tensor-parallel slice always, a parameter replicated in
/// the tensor-parallel group on tensor-parallel rank 0 only.
inline bool writesParam(const fsdp::schedule::Program &p,
                        const fsdp::schedule::ParamDesc &param, int rank) {
  return param.tpDim >= 0 || p.tensorRank(rank) == 0;
}

/// The shape of the whole (global) parameter: `globalShape` for a
/// tensor-parallel slice, else `shape`.
inline const std::vector<int64_t> &
globalShapeOf(const fsdp::schedule::ParamDesc &p) {
  return p.tpDim >= 0 ? p.globalShape : p.shape;
}

/// Calls f(local, global, n) for each run of the local elements
/// [lo, hi) of `param` on tensor-parallel rank `tpRank` of `tp` whose
/// global indices (ParamDesc::globalIndex, driven by the schedule's
/// tensor_slice alone) are consecutive: elements local..local+n-1 are
/// global..global+n-1 of the row-major global tensor. One run for a
/// parameter replicated in the tensor-parallel group.
template <typename F>
inline void forEachGlobalRun(const fsdp::schedule::ParamDesc &param,
                             int64_t tpRank, int64_t tp, int64_t lo, int64_t hi,
                             F &&f) {
  for (int64_t i = lo; i < hi;) {
    int64_t n = param.contiguousRun(i);
    n = n < hi - i ? n : hi - i;
    f(i, param.globalIndex(i, tpRank, tp), n);
    i += n;
  }
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
