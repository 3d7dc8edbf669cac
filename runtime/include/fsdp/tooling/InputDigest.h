//===- InputDigest.h - content digests of the files fsdp-run reads -*- C++
//-*-===//
//
// Ranks must train on the same bytes: a data file, --init-from weights, a
// --load checkpoint. Paths cannot tell (ranks may read node-local copies)
// and neither can sizes (two data files of one size), so the preflight
// compares content digests. A file's digest is SHA-256 (OpenSSL's EVP) over
// its size as 8 little-endian bytes followed by the SHA-256 of each of its
// 16 MiB blocks in order: a two-level hash whose blocks the ranks of a node
// that read the same file (same device and inode) hash between them, so
// each of L such ranks reads about 1/L of the file (every rank hashes the
// whole file where no other rank of its node reads it).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_INPUTDIGEST_H
#define FSDP_TOOLING_INPUTDIGEST_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::tooling {

/// The block size of the two-level digest (bytes).
inline constexpr uint64_t kDigestBlockBytes = uint64_t{16} << 20;

/// The content digest of a file, as fileDigests computes it.
struct FileDigest {
  std::string path;
  uint64_t bytes = 0;
  /// 64 lowercase hex digits, or "" if the file cannot be stat'ed or read
  /// (the reader that opens it later names the error).
  std::string sha256;
};

/// The digests of `paths` (each rank its own list, of any length).
/// Collective over MPI_COMM_WORLD: every rank must call it the same number
/// of times. Ranks on one node (MPI_COMM_TYPE_SHARED) that list the same
/// file (device and inode) hash its blocks round-robin and share the
/// block digests. Throws fsdp::Error only if MPI fails.
std::vector<FileDigest> fileDigests(const std::vector<std::string> &paths);

/// Every rank's `mine`, in rank order (MPI_Allgatherv over
/// MPI_COMM_WORLD; collective). Throws fsdp::Error if MPI fails.
std::vector<std::string> allGatherWorld(const std::string &mine);

/// The lines of `text`, without their newlines (an all-gathered record).
std::vector<std::string> linesOf(const std::string &text);

/// SHA-256 of `text` as 64 hex digits (the digest of a list of digests).
std::string sha256Hex(const std::string &text);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_INPUTDIGEST_H
