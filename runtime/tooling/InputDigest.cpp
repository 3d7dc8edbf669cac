//===- InputDigest.cpp - content digests of the files fsdp-run reads ------===//
//
// The two-level SHA-256 of InputDigest.h, its blocks shared among the ranks
// of a node that read the same file: two all-gathers within the node (who
// reads what; the block digests), the same two calls on every rank whatever
// its list, so the calls match up even when the ranks were given different
// files.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/InputDigest.h"
#include "fsdp/Executor.h"

#include <mpi.h>
#include <openssl/evp.h>

#include <algorithm>
#include <fcntl.h>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::tooling {

namespace {

std::string toHex(const unsigned char *d, size_t n) {
  static const char *digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[d[i] >> 4];
    s += digits[d[i] & 15];
  }
  return s;
}

std::string fromHex(const std::string &h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

/// An OpenSSL EVP SHA-256 context.
class Sha256 {
public:
  Sha256() : ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
      throw Error("OpenSSL: cannot set up SHA-256");
  }
  void update(const void *p, size_t n) { EVP_DigestUpdate(ctx.get(), p, n); }
  std::string hex() {
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx.get(), d, &n);
    return toHex(d, n);
  }

private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX *)> ctx;
};

/// Every rank's `mine` in `comm`, in rank order.
std::vector<std::string> allGatherText(const std::string &mine, MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(n)), offs(static_cast<size_t>(n));
  if (MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm) !=
      MPI_SUCCESS)
    throw Error("MPI_Allgather of the input digests failed");
  int total = 0;
  for (int r = 0; r < n; ++r) {
    offs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  if (MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                     offs.data(), MPI_CHAR, comm) != MPI_SUCCESS)
    throw Error("MPI_Allgatherv of the input digests failed");
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.push_back(
        all.substr(static_cast<size_t>(offs[static_cast<size_t>(r)]),
                   static_cast<size_t>(lens[static_cast<size_t>(r)])));
  return out;
}

/// The SHA-256 of bytes [begin, end) of `path` as hex, or "-" on a read
/// error.
std::string hashBlock(const std::string &path, uint64_t begin, uint64_t end) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "-";
  Sha256 h;
  std::vector<char> buf(size_t{1} << 20);
  uint64_t at = begin;
  while (at < end) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), end - at));
    ssize_t got = ::pread(fd, buf.data(), want, static_cast<off_t>(at));
    if (got <= 0)
      break;
    h.update(buf.data(), static_cast<size_t>(got));
    at += static_cast<uint64_t>(got);
  }
  ::close(fd);
  return at == end ? h.hex() : "-";
}

uint64_t blocksOf(uint64_t bytes) {
  return (bytes + kDigestBlockBytes - 1) / kDigestBlockBytes;
}

} // namespace

std::vector<std::string> linesOf(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

std::vector<std::string> allGatherWorld(const std::string &mine) {
  return allGatherText(mine, MPI_COMM_WORLD);
}

std::string sha256Hex(const std::string &text) {
  Sha256 h;
  h.update(text.data(), text.size());
  return h.hex();
}

std::vector<FileDigest> fileDigests(const std::vector<std::string> &paths) {
  MPI_Comm node = MPI_COMM_NULL;
  int worldRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank,
                          MPI_INFO_NULL, &node) != MPI_SUCCESS)
    throw Error("MPI_Comm_split_type of the node's ranks failed");
  std::unique_ptr<MPI_Comm, void (*)(MPI_Comm *)> freeNode(
      &node, [](MPI_Comm *c) { MPI_Comm_free(c); });
  int me = 0;
  MPI_Comm_rank(node, &me);

  // A file is "dev:ino size" on this node; a path that is not a readable
  // regular file has no key (its digest stays "").
  std::vector<FileDigest> out;
  std::vector<std::string> keys;
  std::map<std::string, uint64_t> sizes;
  std::string mine;
  for (const std::string &p : paths) {
    struct stat st;
    FileDigest d{p, 0, ""};
    std::string key;
    if (::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      d.bytes = static_cast<uint64_t>(st.st_size);
      key = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" +
            std::to_string(d.bytes);
      sizes[key] = d.bytes;
      mine += key + "\n";
    }
    out.push_back(d);
    keys.push_back(key);
  }

  // Who on this node reads each file; block b of a file is hashed by the
  // (b mod n)-th of its n readers.
  std::map<std::string, std::vector<int>> readers;
  std::vector<std::string> listed = allGatherText(mine, node);
  for (size_t r = 0; r < listed.size(); ++r)
    for (const std::string &k : linesOf(listed[r])) {
      auto &v = readers[k];
      if (v.empty() || v.back() != static_cast<int>(r))
        v.push_back(static_cast<int>(r));
    }
  std::string records;
  std::set<std::string> done;
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string &k = keys[i];
    if (k.empty() || !done.insert(k).second)
      continue;
    const std::vector<int> &who = readers[k];
    uint64_t bytes = sizes[k];
    for (uint64_t b = 0; b < blocksOf(bytes); ++b)
      if (who[b % who.size()] == me)
        records += k + " " + std::to_string(b) + " " +
                   hashBlock(paths[i], b * kDigestBlockBytes,
                             std::min(bytes, (b + 1) * kDigestBlockBytes)) +
                   "\n";
  }
  std::map<std::pair<std::string, uint64_t>, std::string> blocks;
  for (const std::string &text : allGatherText(records, node))
    for (const std::string &line : linesOf(text)) {
      std::istringstream in(line);
      std::string k, hex;
      uint64_t b = 0;
      in >> k >> b >> hex;
      blocks[{k, b}] = hex;
    }

  for (size_t i = 0; i < out.size(); ++i) {
    if (keys[i].empty())
      continue;
    Sha256 top;
    unsigned char size[8];
    for (int j = 0; j < 8; ++j)
      size[j] = static_cast<unsigned char>(out[i].bytes >> (8 * j));
    top.update(size, sizeof size);
    bool ok = true;
    for (uint64_t b = 0; ok && b < blocksOf(out[i].bytes); ++b) {
      auto it = blocks.find({keys[i], b});
      ok = it != blocks.end() && it->second.size() == 64;
      if (ok) {
        std::string raw = fromHex(it->second);
        top.update(raw.data(), raw.size());
      }
    }
    if (ok)
      out[i].sha256 = top.hex();
  }
  return out;
}

} // namespace fsdp::tooling
