//===- Preflight.cpp - fsdp-run's checks before step 1 --------------------===//
#include "fsdp/tooling/Preflight.h"
#include "fsdp/tooling/Checkpoint.h"
#include "fsdp/tooling/InputDigest.h"

#include <nlohmann/json.hpp>

#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using fsdp::Error;
using fsdp::rt::AllocMode;

namespace fsdp::tooling {

namespace {
void checkOutputsAreNotInputs(const Options &opt);
} // namespace

void checkOutputPaths(const Options &opt) {
  namespace fs = std::filesystem;
  checkOutputsAreNotInputs(opt);
  for (auto [flag, path] : {std::pair{"--dump-params", &opt.dumpParams},
                            std::pair{"--export", &opt.exportPath}}) {
    if (path->empty())
      continue;
    fs::path dir = fs::absolute(*path).parent_path();
    if (fs::is_directory(*path) || !fs::is_directory(dir) ||
        access(dir.c_str(), W_OK) != 0)
      throw Error(std::string("cannot write ") + flag + " file '" + *path +
                  "' (not a writable location)");
  }
  // --export writes PATH.partial: create it once now (a directory of that
  // name, /proc, a full disk fail here, not after training).
  if (!opt.exportPath.empty() && fsdp_rank() == 0) {
    std::string partial = opt.exportPath + ".partial";
    int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw Error("cannot write --export file '" + opt.exportPath + "': '" +
                  partial + "': " + std::strerror(errno));
    ::close(fd);
    ::unlink(partial.c_str());
  }
  if (!opt.save.empty())
    checkSaveDir(opt.save, opt.saveEvery > 0);
}

namespace {

namespace fs = std::filesystem;

/// The files --init-from reads, as SafeTensorsArchive::open finds them (a
/// file; a directory's model.safetensors, else its index and the files of
/// its weight_map), without its checks: a bad archive is named when it is
/// opened.
std::vector<std::string> initFromFiles(const std::string &path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    return {path};
  fs::path single = fs::path(path) / "model.safetensors";
  fs::path index = fs::path(path) / "model.safetensors.index.json";
  if (fs::exists(single, ec) || !fs::exists(index, ec))
    return {single.string()};
  std::vector<std::string> files{index.string()};
  std::ifstream in(index);
  nlohmann::json idx = nlohmann::json::parse(in, nullptr, false);
  std::set<std::string> shards;
  if (idx.is_object() && idx.contains("weight_map") &&
      idx["weight_map"].is_object())
    for (const auto &f : idx["weight_map"])
      if (f.is_string())
        shards.insert(f.get<std::string>());
  for (const std::string &f : shards)
    files.push_back((fs::path(path) / f).string());
  return files;
}

/// "a file of N bytes, SHA-256 X", or that it cannot be read.
std::string describe(const FileDigest &d) {
  return d.sha256.empty() ? "a file that cannot be read"
                          : "a file of " + std::to_string(d.bytes) +
                                " bytes, SHA-256 " + d.sha256;
}

/// An output path as every rank must name it: absolute, with `.` and `..`
/// and the symbolic links of its existing part resolved.
std::string resolvedPath(const std::string &p) {
  if (p.empty())
    return "none";
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p), ec);
  return ec ? fs::absolute(p).lexically_normal().string() : r.string();
}

/// Whether output path `out` would write over `in`: the same file (inode)
/// where both exist, else the same resolved path; with `inside`, also a
/// path under directory `in`.
bool writesOver(const std::string &out, const std::string &in,
                bool inside = false) {
  std::error_code ec;
  if (fs::exists(out, ec) && fs::exists(in, ec) && fs::equivalent(out, in, ec))
    return true;
  std::string o = resolvedPath(out), i = resolvedPath(in);
  return o == i || (inside && o.rfind(i + "/", 0) == 0);
}

/// Throws when --export or --dump-params would write over a file this run
/// reads (the schedule, the compiled step, --data, an --init-from file, the
/// --load checkpoint) or over each other: the file would be lost, with no
/// error, at the end of the run.
void checkOutputsAreNotInputs(const Options &opt) {
  std::vector<std::pair<std::string, std::string>> inputs;
  if (!opt.schedule.empty())
    inputs.emplace_back("the schedule", opt.schedule);
  if (!opt.compiled.empty())
    inputs.emplace_back("the --compiled step", opt.compiled);
  if (!opt.data.empty())
    inputs.emplace_back("the --data file", opt.data);
  if (!opt.initFrom.empty()) {
    inputs.emplace_back("the --init-from weights", opt.initFrom);
    for (const std::string &f : initFromFiles(opt.initFrom))
      inputs.emplace_back("the --init-from weights", f);
  }
  std::string loadDir;
  try {
    if (!opt.load.empty())
      loadDir = resolveCheckpoint(opt.load);
  } catch (const Error &) {
    // No checkpoint there: the load itself says so, naming it.
  }
  for (auto [flag, path] : {std::pair{"--dump-params", &opt.dumpParams},
                            std::pair{"--export", &opt.exportPath}}) {
    if (path->empty())
      continue;
    for (const auto &[what, in] : inputs)
      if (writesOver(*path, in))
        throw Error(std::string(flag) + " '" + *path + "' would overwrite " +
                    what + " '" + in +
                    "', which this run reads: give another "
                    "path");
    if (!loadDir.empty() && writesOver(*path, loadDir, /*inside=*/true))
      throw Error(std::string(flag) + " '" + *path +
                  "' would overwrite a file of the --load checkpoint '" +
                  loadDir + "', which this run reads: give another path");
  }
  if (!opt.exportPath.empty() && !opt.dumpParams.empty() &&
      writesOver(opt.exportPath, opt.dumpParams))
    throw Error("--export and --dump-params name the same file '" +
                opt.exportPath + "': one would overwrite the other");
}

/// The options that change what a rank does, one "--option value" per line;
/// a tab starts what the message shows but the ranks need not share (a
/// path: ranks may read node-local copies of the same bytes).
std::string workOf(const Options &o, const std::vector<FileDigest> &d,
                   const std::string &loadDir, size_t initFromCount) {
  std::string data = "none";
  size_t next = 0;
  if (!o.data.empty())
    data = describe(d[next++]) + "\t ('" + o.data + "')";
  std::string init = "none";
  if (!o.initFrom.empty()) {
    // A digest of the files' names (relative to the archive) and digests.
    std::string list;
    uint64_t bytes = 0;
    bool ok = true;
    for (size_t i = 0; i < initFromCount; ++i, ++next) {
      list += fs::path(d[next].path).filename().string() + " " +
              d[next].sha256 + "\n";
      bytes += d[next].bytes;
      ok &= !d[next].sha256.empty();
    }
    init = ok ? std::to_string(initFromCount) + " file(s) of " +
                    std::to_string(bytes) + " bytes, SHA-256 " + sha256Hex(list)
              : "weights that cannot be read";
    init += "\t ('" + o.initFrom + "')";
  }
  std::string load = "none";
  if (!o.load.empty()) {
    // The index names the step and every file's size and CRC-32, which
    // each reader checks: its digest stands for the checkpoint.
    const FileDigest &idx = d[next++];
    std::ifstream in(idx.path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    std::string step = j.is_object() && j.contains("step") ? j["step"].dump()
                                                           : std::string("?");
    load = idx.sha256.empty() ? "a checkpoint that cannot be read"
                              : "the checkpoint of step " + step +
                                    " (index.json SHA-256 " + idx.sha256 + ")";
    load += "\t ('" + loadDir + "')";
  }
  std::ostringstream w;
  w << "--steps " << o.steps << "\n--total-steps "
    << (o.totalSteps ? std::to_string(o.totalSteps) : "unset") << "\n--seed "
    << o.seed << "\n--warmup " << o.warmup << "\n--data " << data
    << "\n--data-order " << (o.dataOrder.empty() ? "random" : o.dataOrder)
    << "\n--init-from " << init << "\n--load " << load << "\n--save "
    << resolvedPath(o.save) << "\n--save-every " << o.saveEvery << "\n--keep "
    << o.keep << "\n--export " << resolvedPath(o.exportPath)
    << "\n--dump-params " << resolvedPath(o.dumpParams) << "\n--profile "
    << (o.profile ? "on" : "off") << "\n--device "
    << (o.device.rfind("cuda", 0) == 0 ? "cuda" : o.device)
    << "\n--collectives " << o.collectives << "\n--alloc "
    << (o.alloc == AllocMode::Arena ? "arena" : "per-buffer") << "\n--compiled "
    << (o.compiled.empty() ? "none" : "given") << "\n--on-nonfinite "
    << (o.skipNonfinite ? "skip" : "stop") << "\n--loss-scale-init "
    << o.lossScaleInit << "\n--loss-scale-growth-interval "
    << o.lossScaleGrowthInterval;
  return w.str();
}

/// A line without its tab-separated remark.
std::string keyOf(const std::string &line) {
  return line.substr(0, line.find('\t'));
}

std::string shown(const std::string &line) {
  std::string s = line;
  s.erase(std::remove(s.begin(), s.end(), '\t'), s.end());
  return s;
}

} // namespace

AgreedInputs checkSameWorkOnAllRanks(const Options &o) {
  // Every rank digests its files (collective, whatever each rank's list);
  // one rank has no one to agree with, and digests only the data file, for
  // its checkpoints.
  bool alone = fsdp_world_size() <= 1;
  std::vector<std::string> files;
  if (!o.data.empty())
    files.push_back(o.data);
  std::vector<std::string> init;
  if (!o.initFrom.empty() && !alone)
    init = initFromFiles(o.initFrom);
  files.insert(files.end(), init.begin(), init.end());
  std::string loadDir;
  if (!o.load.empty() && !alone) {
    loadDir = resolveCheckpoint(o.load);
    files.push_back((fs::path(loadDir) / "index.json").string());
  }
  std::vector<FileDigest> digests = fileDigests(files);
  AgreedInputs agreed;
  if (!o.data.empty())
    agreed.dataSha256 = digests[0].sha256;
  if (alone)
    return agreed;

  std::string mine = workOf(o, digests, loadDir, init.size());
  std::vector<std::string> all = allGatherWorld(mine);
  std::vector<std::string> first = linesOf(all[0]);
  for (size_t r = 1; r < all.size(); ++r) {
    std::vector<std::string> other = linesOf(all[r]);
    for (size_t i = 0; i < first.size() && i < other.size(); ++i)
      if (keyOf(first[i]) != keyOf(other[i]))
        throw fsdp::CollectiveError(
            "the ranks were started with different options: rank " +
            std::to_string(r) + " has " + shown(other[i]) + ", rank 0 has " +
            shown(first[i]) +
            " (every rank must run the same steps on the same "
            "data)");
  }
  return agreed;
}

namespace {

/// The node's memory in bytes: $FSDP_HOST_MEMORY_BYTES (a positive integer)
/// if set, else the physical memory.
int64_t nodeMemoryBytes() {
  if (const char *env = std::getenv("FSDP_HOST_MEMORY_BYTES")) {
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(env, &end, 10);
    if (!*env || *end || errno || v <= 0)
      throw Error(std::string("FSDP_HOST_MEMORY_BYTES must be a positive "
                              "number of bytes, got '") +
                  env + "'");
    return v;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

} // namespace

void checkNodeMemory(const fsdp::schedule::Program &p, const Options &opt) {
  if (opt.device.rfind("cuda", 0) == 0)
    return;
  // Every rank takes part (the collectives below), whatever its plan.
  int64_t mine = opt.alloc == AllocMode::Arena && p.usesArena()
                     ? p.plannedArenaBytes()
                     : std::max<int64_t>(p.plannedPeakBytes(), 0);
  int64_t memory = nodeMemoryBytes();
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, fsdp_rank(),
                          MPI_INFO_NULL, &node) != MPI_SUCCESS)
    throw Error("MPI_Comm_split_type of the node's ranks failed");
  int64_t total = 0;
  int ranks = 0;
  int rc = MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, node);
  MPI_Comm_size(node, &ranks);
  MPI_Comm_free(&node);
  if (rc != MPI_SUCCESS)
    throw Error("MPI_Allreduce of the node's planned bytes failed");
  if (memory <= 0 || total <= memory)
    return;
  throw Error(
      p.name() + ": " +
      (ranks == 1
           ? std::string("the rank on this node needs ")
           : "the " + std::to_string(ranks) + " ranks on this node need ") +
      std::to_string(total) + " bytes together (this rank's memory plan: " +
      std::to_string(mine) + " bytes), more than the node's " +
      std::to_string(memory) + " bytes of memory (" +
      (std::getenv("FSDP_HOST_MEMORY_BYTES") ? "FSDP_HOST_MEMORY_BYTES"
                                             : "physical") +
      "): start fewer ranks per node, or plan more ranks (smaller shards), "
      "a smaller micro-batch or activation checkpointing (fsdp-opt's "
      "memory-budget= checks a plan against a size)");
}

fsdp_collectives collectivesOf(const Options &opt) {
  bool cuda = opt.device.rfind("cuda", 0) == 0;
  if (opt.collectives == "nccl" && !cuda)
    throw Error("--collectives nccl needs a cuda device, got --device " +
                opt.device);
  return opt.collectives == "mpi" && cuda ? FSDP_COLLECTIVES_MPI
                                          : FSDP_COLLECTIVES_NATIVE;
}

} // namespace fsdp::tooling
