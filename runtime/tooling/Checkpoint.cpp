//===- Checkpoint.cpp - fsdp-run --save / --load of sharded training state ===//
//
// Implementation of Checkpoint.h. Which bytes a rank writes, and hence
// every range of the index, follows from the schedule alone (the grid and
// the units' flat layouts), so rank 0 writes the whole index after only
// gathering the files' CRCs. Loading inverts the map per FQN: for each
// element range a rank's buffer needs, the saved ranges that overlap it.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/Checkpoint.h"
#include "FileIo.h"
#include "HostCodec.h"
#include "JsonFields.h"
#include "PipelineStages.h"
#include "fsdp/tooling/NonFinite.h"

#include <mpi.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <vector>

using fsdp::Error;
using fsdp::rt::Executor;
using fsdp::schedule::DType;
using fsdp::schedule::IoDesc;
using fsdp::schedule::ParamDesc;
using fsdp::schedule::Program;
using fsdp::schedule::UnitDesc;
using nlohmann::json;
namespace fs = std::filesystem;

namespace fsdp::tooling {

namespace {

/// The index version written: 3 (version 2 plus the ranges' tensor-parallel
/// "slice") for a schedule with tensor_parallel > 1, else 2, which older
/// readers load.
constexpr int kVersion = 2, kVersionTp = 3;
constexpr int64_t kChunkBytes = 1 << 20;

std::string rankFile(int64_t rank) {
  return "rank" + std::to_string(rank) + ".bin";
}

DType parseDtype(const std::string &s) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16})
    if (s == fsdp::schedule::dtypeName(t))
      return t;
  throw Error("unsupported state dtype '" + s + "'");
}

/// One state buffer's part of a rank file: flat elements [begin, end) of
/// the unit, at byte `offset` of the file.
struct Block {
  const UnitDesc *unit;
  const IoDesc *io;
  const char *role;
  DType dtype;
  int64_t begin, end;
  uint64_t offset;
};

/// The blocks of `rank`'s file, in file order, and its size in bytes. A
/// unit replicated in the tensor-parallel group (fsdp-wrap's
/// `unit.tp_replicated`: no parameter with a tensor_slice) is written by
/// tensor-parallel rank 0 only; a unit whose parameters an earlier pipeline
/// stage saves (`tied`, heldByEarlierStage) by none.
std::vector<Block> fileBlocks(const Program &p, int64_t rank, uint64_t &bytes,
                              const std::set<std::string> &tied) {
  std::vector<Block> blocks;
  bytes = 0;
  for (const UnitDesc &u : p.units())
    for (const char *role : fsdp::schedule::kStateRoles) {
      if (!tied.empty() &&
          std::all_of(u.params.begin(), u.params.end(),
                      [&](const ParamDesc &q) { return tied.count(q.fqn); }))
        continue;
      const IoDesc *io = p.findUnitInput(role, u.name);
      bool split = std::any_of(u.params.begin(), u.params.end(),
                               [](const ParamDesc &q) { return q.tpDim >= 0; });
      if (!io || !writesCopy(p, *io, static_cast<int>(rank)) ||
          (!split && p.tensorRank(rank) != 0))
        continue;
      Block b{&u, io, role, p.buffer(io->buffer).dtype, 0, 0, bytes};
      stateRange(p, u, *io, static_cast<int>(rank), b.begin, b.end);
      bytes += static_cast<uint64_t>((b.end - b.begin) * floatBytes(b.dtype));
      blocks.push_back(b);
    }
  return blocks;
}

/// A saved element range [begin, end) of one (FQN, role) in file `file`:
/// of the whole tensor, or (`dim` >= 0, index version 3) of slice `index`
/// of `count` of the tensor (dimension `dim` cut into `blocks` equal blocks,
/// each into `count` pieces, the slice holding piece `index` of every block:
/// the schedule's tensor_slice and the saving rank's tensor-parallel rank),
/// row-major in the slice's shape. Which global elements a range holds is
/// ParamDesc::globalIndex of that slice (DCP's chunk metadata, for slices
/// that are not one box).
struct Range {
  size_t file;
  uint64_t offset;
  int64_t begin, end;
  int64_t dim = -1, blocks = 1, index = 0, count = 1;
};
struct Saved {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::vector<Range> ranges;
};
struct SavedFile {
  std::string path;
  uint64_t bytes = 0;
  int64_t crc = -1; ///< -1: none recorded (version 1)
};
using SavedMap = std::map<std::pair<std::string, std::string>, Saved>;

/// Adds the (FQN, role) ranges of `blocks` (rank `rank`'s file `file`) to
/// `saved`: shapes are the global ones, a tensor-parallel slice's ranges
/// say which slice they index.
void addRanges(const Program &prog, int rank, const std::vector<Block> &blocks,
               size_t file, SavedMap &saved,
               const std::set<std::string> &tied) {
  for (const Block &b : blocks) {
    int64_t es = floatBytes(b.dtype);
    forEachParamIn(
        *b.unit, b.begin, b.end,
        [&](const ParamDesc &p, int64_t lo, int64_t hi) {
          if (!writesParam(prog, p, rank) || tied.count(p.fqn))
            return;
          Saved &s = saved[{p.fqn, b.role}];
          s.shape = globalShapeOf(p);
          s.dtype = b.dtype;
          Range r{file, b.offset + static_cast<uint64_t>((lo - b.begin) * es),
                  lo - p.offset, hi - p.offset};
          if (p.tpDim >= 0) {
            r.dim = p.tpDim;
            r.blocks = p.tpBlocks;
            r.index = prog.tensorRank(rank);
            r.count = prog.tensorParallel();
          }
          s.ranges.push_back(r);
        });
  }
}

/// Stage `prog`'s part of the index, described by its rank 0 (world rank
/// `first`): its ranks' files (world ranks first.., without CRCs), the
/// (FQN, role) ranges of its units (file indices into the part's files;
/// under pipeline parallelism each tensor says its stage) and its roles.
json stageIndexPart(const Program &prog, int64_t first,
                    const std::set<std::string> &tied) {
  SavedMap saved;
  json files = json::array();
  for (int64_t r = 0; r < prog.worldSize(); ++r) {
    uint64_t b = 0;
    std::vector<Block> bl = fileBlocks(prog, r, b, tied);
    if (bl.empty())
      continue;
    addRanges(prog, static_cast<int>(r), bl, files.size(), saved, tied);
    files.push_back(
        {{"rank", first + r}, {"path", rankFile(first + r)}, {"bytes", b}});
  }
  json tensors = json::array(), roles = json::array();
  for (const char *role : fsdp::schedule::kStateRoles)
    for (const UnitDesc &u : prog.units())
      if (prog.findUnitInput(role, u.name)) {
        roles.push_back(role);
        break;
      }
  for (const UnitDesc &u : prog.units())
    for (const ParamDesc &p : u.params)
      for (const char *role : fsdp::schedule::kStateRoles) {
        auto it = saved.find({p.fqn, role});
        if (it == saved.end())
          continue;
        json ranges = json::array();
        for (const Range &r : it->second.ranges) {
          ranges.push_back({{"file", r.file},
                            {"offset", r.offset},
                            {"begin", r.begin},
                            {"end", r.end}});
          if (r.dim >= 0)
            ranges.back()["slice"] = {{"dim", r.dim},
                                      {"blocks", r.blocks},
                                      {"index", r.index},
                                      {"count", r.count}};
        }
        tensors.push_back(
            {{"fqn", p.fqn},
             {"role", role},
             {"shape", globalShapeOf(p)},
             {"dtype", fsdp::schedule::dtypeName(it->second.dtype)},
             {"ranges", ranges}});
        if (prog.pipelineStages() > 1)
          tensors.back()["stage"] = prog.pipelineStage();
      }
  return {{"files", files}, {"tensors", tensors}, {"roles", roles}};
}

/// Checks a parsed range's slice against its tensor's shape; "" if sound.
std::string badSlice(const std::vector<int64_t> &shape, const Range &r) {
  if (r.dim < 0)
    return "";
  // Every product checked: the index is untrusted input (fuzzed).
  int64_t pieces = 0, numel = 1;
  bool bad = r.dim >= static_cast<int64_t>(shape.size()) || r.blocks < 1 ||
             r.count < 1 || r.index < 0 || r.index >= r.count ||
             __builtin_mul_overflow(r.blocks, r.count, &pieces);
  for (int64_t d : shape)
    bad = bad || d < 0 || __builtin_mul_overflow(numel, d, &numel);
  if (bad || shape[static_cast<size_t>(r.dim)] % pieces != 0)
    return "slice {dim " + std::to_string(r.dim) + ", blocks " +
           std::to_string(r.blocks) + ", index " + std::to_string(r.index) +
           ", count " + std::to_string(r.count) + "} of shape " +
           json(shape).dump();
  if (r.end > numel / r.count)
    return "elements beyond the slice's " + std::to_string(numel / r.count);
  return "";
}

json optimizerJson(const Program &p) {
  const auto &o = p.optimizer();
  return {{"kind", o.kind},   {"lr", o.lr},   {"beta1", o.beta1},
          {"beta2", o.beta2}, {"eps", o.eps}, {"weight_decay", o.weightDecay}};
}

/// Every rank learns whether all succeeded; throws on every rank if not.
void agree(const std::string &err, const std::string &what,
           const std::string &cleanup, int rank) {
  int ok = err.empty(), all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all)
    return;
  if (rank == 0 && !cleanup.empty()) {
    std::error_code ec;
    fs::remove_all(cleanup, ec);
  }
  throw Error("--save: " +
              (err.empty() ? "another rank failed to " + what : err));
}

/// The CRC-32 (zlib) of a whole file, read in chunks; false on a read error.
bool fileCrc(const std::string &path, uint64_t bytes, uint32_t &crc) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0)
    return false;
  std::vector<char> buf(kChunkBytes);
  crc = crc32(0L, Z_NULL, 0);
  for (uint64_t off = 0; off < bytes;) {
    uint64_t n = std::min<uint64_t>(kChunkBytes, bytes - off);
    if (!readAt(f.fd, buf.data(), n, off))
      return false;
    crc = crc32(crc, reinterpret_cast<const Bytef *>(buf.data()),
                static_cast<uInt>(n));
    off += n;
  }
  return true;
}

/// The saved ranges of a version-1 index (rank files of whole shards in
/// unit order, every rank one file; replicas' files are skipped).
void readVersion1(const json &index, const std::string &dir, SavedMap &saved,
                  std::vector<SavedFile> &files) {
  int64_t n = intOf(index.at("world_size"), "world_size");
  json grid = index.value("grid", json{{"replicas", 1}, {"shard_size", n}});
  int64_t s = intOf(grid.at("shard_size"), "grid.shard_size");
  for (const json &f : index.at("files")) {
    int64_t r = intOf(f.at("rank"), "files[].rank");
    const json &shards = f.at("shards");
    SavedFile sf{(fs::path(dir) / f.at("path").get<std::string>()).string(),
                 uintOf(f.at("bytes"), "files[].bytes")};
    size_t fileIdx = files.size();
    bool used = false;
    for (const json &ju : index.at("units")) {
      std::string name = ju.at("name").get<std::string>();
      json layouts = ju.value("layouts", json::object());
      json dtypes = ju.value("dtypes", json::object());
      int64_t shardNumel = intOf(ju.at("shard_numel"), "units[].shard_numel");
      int64_t padded = (ju.contains("padded_numel")
                            ? intOf(ju["padded_numel"], "units[].padded_numel")
                            : shardNumel * s);
      for (const char *role : fsdp::schedule::kStateRoles) {
        if (!shards.contains(name) || !shards[name].contains(role))
          continue;
        bool full = layouts.value(role, std::string("shard")) == "full";
        if (full ? r != 0 : r >= s)
          continue; // a replica's copy
        DType dt =
            parseDtype(dtypes.value(role, ju.at("dtype").get<std::string>()));
        int64_t begin = full ? 0 : (r % s) * shardNumel,
                end = full ? padded : begin + shardNumel;
        uint64_t base = uintOf(shards[name][role], "files[].shards offset");
        for (const json &jp : ju.at("params")) {
          int64_t off = intOf(jp.at("offset"), "params[].offset");
          int64_t numel =
              (jp.contains("numel") ? intOf(jp["numel"], "params[].numel")
                                    : int64_t(1));
          if (!jp.contains("numel"))
            for (int64_t d : intsOf(jp.at("shape"), "params[].shape"))
              numel *= d;
          int64_t lo = std::max(begin, off), hi = std::min(end, off + numel);
          if (lo >= hi)
            continue;
          Saved &sv = saved[{jp.at("fqn").get<std::string>(), role}];
          sv.shape = intsOf(jp.at("shape"), "params[].shape");
          sv.dtype = dt;
          sv.ranges.push_back(
              {fileIdx,
               base + static_cast<uint64_t>((lo - begin) * floatBytes(dt)),
               lo - off, hi - off});
          used = true;
        }
      }
    }
    if (used)
      files.push_back(sf);
  }
}

/// The index's "run" record: what a resume checks and restores beyond the
/// tensors (seed, data and its SHA-256, schedule length, loss scale).
json runJson(const RunMeta &meta) {
  json run = {
      {"seed", meta.seed}, {"data", meta.data}, {"data_order", meta.dataOrder}};
  if (meta.totalSteps > 0) // a schedule that decays over the run's total
    run["total_steps"] = meta.totalSteps;
  if (!meta.dataSha256.empty()) // for the resume's --data check
    run["data_sha256"] = meta.dataSha256;
  if (meta.skippedSteps > 0)
    run["skipped_steps"] = meta.skippedSteps;
  if (meta.lossScale > 0) {
    run["loss_scale"] = meta.lossScale;
    run["growth_tracker"] = meta.growthTracker;
  }
  return run;
}

} // namespace

void saveCheckpoint(const std::string &dir, const Executor &ex, int64_t step,
                    int rank, const RunMeta &meta) {
  const Program &prog = ex.program();
  const int stageRank = stageRankOf(prog, rank);
  const std::string target = fs::absolute(dir).lexically_normal().string();
  const std::string tmp = target + ".partial";
  // Never a checkpoint with an inf or nan: it would replace (or, through
  // --keep, prune) the last one a run can resume from.
  std::string bad = firstNonFiniteState(ex, rank, allStateRoles());
  if (!bad.empty())
    throw fsdp::CollectiveError(
        "--save: refusing to save the state of step " + std::to_string(step) +
        " to '" + dir + "': " + bad +
        " (a checkpoint never holds inf or nan; the previous ones are kept)");
  std::string err;
  if (rank == 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec); // a save killed earlier
    if (!ec)
      fs::create_directories(tmp, ec);
    if (ec)
      err = "cannot create '" + tmp + "': " + ec.message();
  }
  agree(err, "create the directory", "", rank);

  // This rank's file: its written copies of every state buffer (named by
  // its world rank: one directory for every pipeline stage).
  uint64_t bytes = 0;
  const std::set<std::string> tied = heldByEarlierStage(prog);
  std::vector<Block> blocks = fileBlocks(prog, stageRank, bytes, tied);
  uint32_t crc = crc32(0L, Z_NULL, 0);
  if (!blocks.empty()) {
    std::string path = tmp + "/" + rankFile(rank);
    Fd f(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    std::vector<double> values;
    std::vector<char> raw;
    if (f.fd < 0)
      err = "cannot write '" + path + "': " + std::strerror(errno);
    for (const Block &b : blocks) {
      if (!err.empty())
        break;
      ex.read(b.io->buffer, values);
      raw.resize(values.size() * static_cast<size_t>(floatBytes(b.dtype)));
      encodeValues(b.dtype, values.data(), static_cast<int64_t>(values.size()),
                   raw.data());
      if (!writeAt(f.fd, raw.data(), raw.size(), b.offset))
        err = "error writing '" + path + "': " + std::strerror(errno);
      crc = crc32(crc, reinterpret_cast<const Bytef *>(raw.data()),
                  static_cast<uInt>(raw.size()));
    }
    if (err.empty() && ::fsync(f.fd) != 0)
      err = "fsync of '" + path + "' failed: " + std::strerror(errno);
  }
  agree(err, "write its file", tmp, rank);
  unsigned long long mine = crc;
  std::vector<unsigned long long> crcs(static_cast<size_t>(jobSizeOf(prog)));
  MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, crcs.data(), 1,
             MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);

  // Each stage's rank 0 describes its stage's files and tensors (they
  // follow from its program alone); world rank 0 merges the stages' parts.
  json part =
      stageRank == 0 ? stageIndexPart(prog, rank, tied) : json::object();
  json merged = mergeStageParts(prog, part, stageRank == 0, rank);
  if (rank == 0) {
    for (json &f : merged["files"])
      f["crc32"] = crcs[f["rank"].get<size_t>()];
    json index = {
        {"format", "fsdp-checkpoint"},
        {"version", prog.tensorParallel() > 1 ? kVersionTp : kVersion},
        {"schedule", jobScheduleName(prog)},
        {"world_size", jobSizeOf(prog)},
        {"strategy", prog.strategy()},
        {"grid",
         {{"replicas", prog.replicas()}, {"shard_size", prog.shardSize()}}},
        {"step", step},
        {"run", runJson(meta)},
        {"optimizer", optimizerJson(prog)},
        {"roles", merged["roles"]},
        {"files", merged["files"]},
        {"tensors", merged["tensors"]}};
    if (prog.tensorParallel() > 1)
      index["grid"]["tensor_parallel"] = prog.tensorParallel();
    if (prog.pipelineStages() > 1) // every tensor's "stage" says which
      index["grid"]["pipeline_stages"] = prog.pipelineStages();
    std::string ipath = tmp + "/index.json";
    {
      std::ofstream out(ipath);
      if (!out || !(out << index.dump(1) << "\n") || !out.flush())
        err = "cannot write '" + ipath + "'";
    }
    if (err.empty() && (!fsyncPath(ipath, O_RDONLY) ||
                        !fsyncPath(tmp, O_RDONLY | O_DIRECTORY)))
      err = "fsync of '" + tmp + "' failed";
    // The swap: the previous checkpoint stays whole until the new one is.
    std::error_code ec;
    if (err.empty()) {
      if (fs::exists(target, ec)) {
        if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(),
                        RENAME_EXCHANGE) != 0)
          err = "cannot swap '" + tmp + "' into '" + target +
                "': " + std::strerror(errno);
        else
          fs::remove_all(tmp, ec); // now the previous checkpoint
      } else if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        err = "cannot rename '" + tmp + "' to '" + target +
              "': " + std::strerror(errno);
      }
    }
    if (err.empty())
      fsyncPath(fs::path(target).parent_path().string(),
                O_RDONLY | O_DIRECTORY);
  }
  agree(err, "finish the save", tmp, rank);
}

namespace {

/// Parses index.json's `text` (either version) into the saved ranges and
/// files: every field's type, every range's file and bounds are checked.
/// `optimizer` receives the recorded hyper-parameters (empty for version 1).
void parseIndex(const std::string &text, const std::string &dir,
                const std::string &ipath, SavedMap &saved,
                std::vector<SavedFile> &files, LoadedCheckpoint &result,
                json &optimizer) {
  json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object())
    throw Error("--load: '" + ipath + "' is not valid JSON");
  try {
    int64_t version =
        index.value("format", std::string()) == "fsdp-checkpoint" &&
                index.contains("version")
            ? intOf(index["version"], "version")
            : 0;
    if (version == 1) {
      readVersion1(index, dir, saved, files);
    } else if (version == kVersion || version == kVersionTp) {
      for (const json &f : index.at("files"))
        files.push_back(
            {(fs::path(dir) / f.at("path").get<std::string>()).string(),
             uintOf(f.at("bytes"), "files[].bytes"),
             intOf(f.at("crc32"), "files[].crc32")});
      for (const json &t : index.at("tensors")) {
        std::string fqn = t.at("fqn").get<std::string>();
        Saved &s = saved[{fqn, t.at("role").get<std::string>()}];
        s.shape = intsOf(t.at("shape"), "tensors[].shape");
        s.dtype = parseDtype(t.at("dtype").get<std::string>());
        for (const json &r : t.at("ranges")) {
          size_t file =
              static_cast<size_t>(uintOf(r.at("file"), "ranges[].file"));
          Range range{file, uintOf(r.at("offset"), "ranges[].offset"),
                      intOf(r.at("begin"), "ranges[].begin"),
                      intOf(r.at("end"), "ranges[].end")};
          if (version == kVersionTp && r.contains("slice")) {
            const json &sl = r["slice"];
            range.dim = intOf(sl.at("dim"), "ranges[].slice.dim");
            range.blocks = intOf(sl.at("blocks"), "ranges[].slice.blocks");
            range.index = intOf(sl.at("index"), "ranges[].slice.index");
            range.count = intOf(sl.at("count"), "ranges[].slice.count");
            if (range.dim < 0)
              throw BadField("ranges[].slice.dim must be >= 0, got " +
                             std::to_string(range.dim));
          }
          std::string slice = badSlice(s.shape, range);
          if (!slice.empty())
            throw Error("--load: '" + ipath + "': a range of '" + fqn +
                        "' has a bad " + slice);
          if (file >= files.size() || range.begin < 0 ||
              range.end < range.begin)
            throw Error("--load: '" + ipath + "': a range of '" + fqn +
                        "' (file #" + std::to_string(file) + " of " +
                        std::to_string(files.size()) + ", elements [" +
                        std::to_string(range.begin) + ", " +
                        std::to_string(range.end) + ")) is out of bounds");
          s.ranges.push_back(range);
        }
      }
      checkStageLayout(index, ipath); // every pipeline stage's tensors
      const json &run = index.value("run", json::object());
      result.hasMeta = true;
      result.meta.seed =
          run.contains("seed") ? uintOf(run["seed"], "run.seed") : 0;
      result.meta.data = run.value("data", std::string());
      result.meta.dataOrder = run.value("data_order", std::string("random"));
      result.meta.dataSha256 = run.value("data_sha256", std::string());
      if (run.contains("total_steps")) {
        result.meta.totalSteps = intOf(run["total_steps"], "run.total_steps");
        if (result.meta.totalSteps < 1)
          throw Error("--load: '" + ipath +
                      "': run.total_steps must be >= 1, got " +
                      std::to_string(result.meta.totalSteps));
      }
      result.meta.skippedSteps =
          run.contains("skipped_steps")
              ? intOf(run["skipped_steps"], "run.skipped_steps")
              : 0;
      if (run.contains("loss_scale")) {
        const json &ls = run["loss_scale"];
        result.meta.lossScale = ls.is_number() ? ls.get<double>() : -1;
        result.meta.growthTracker =
            intOf(run.at("growth_tracker"), "run.growth_tracker");
        if (!(result.meta.lossScale > 0) || result.meta.lossScale > 1e300 ||
            result.meta.growthTracker < 0)
          throw Error("--load: '" + ipath +
                      "': run.loss_scale must be a number > 0 and "
                      "run.growth_tracker >= 0");
      }
      if (result.meta.skippedSteps < 0)
        throw Error("--load: '" + ipath +
                    "': run.skipped_steps must be >= 0, got " +
                    std::to_string(result.meta.skippedSteps));
      optimizer = index.value("optimizer", json::object());
    } else {
      throw Error("--load: '" + ipath +
                  "' is not an fsdp-checkpoint index of version 1, 2 or 3");
    }
    result.step = intOf(index.at("step"), "step");
    if (result.meta.skippedSteps > result.step)
      throw Error("--load: '" + ipath + "': run.skipped_steps " +
                  std::to_string(result.meta.skippedSteps) +
                  " exceeds the step " + std::to_string(result.step));
  } catch (const json::exception &e) {
    throw Error("--load: '" + ipath + "' is malformed: " + e.what());
  } catch (const BadField &e) {
    throw Error("--load: '" + ipath + "' is malformed: " + e.what());
  }
}

/// Reads the saved elements of (FQN, role)s by global index: each saved
/// range as sorted runs of consecutive global elements at a file position
/// (built on first use; a tensor-parallel slice's range is one run per piece
/// of its split dimension), each file checked (size, CRC-32) when first read.
class SavedReader {
public:
  SavedReader(const std::vector<SavedFile> &files, const std::string &ctx)
      : files(files), ctx(ctx) {}

  /// Global elements [g, g + n) of `s` (FQN `fqn`, role `role`) into
  /// `out`; throws naming them if the checkpoint's files miss some or hold
  /// one twice.
  void read(const std::string &fqn, const char *role, const Saved &s, int64_t g,
            int64_t n, double *out) {
    const std::vector<GlobalRun> &v = runs(fqn, role, s);
    int64_t es = floatBytes(s.dtype), covered = 0;
    auto it = std::upper_bound(
        v.begin(), v.end(), g,
        [](int64_t x, const GlobalRun &r) { return x < r.begin; });
    if (it != v.begin())
      --it;
    for (; it != v.end() && it->begin < g + n; ++it) {
      int64_t a = std::max(g, it->begin), b = std::min(g + n, it->end);
      if (a >= b)
        continue;
      int f = fd(it->file);
      raw.resize(static_cast<size_t>((b - a) * es));
      if (f < 0 ||
          !readAt(f, raw.data(), raw.size(),
                  it->offset + static_cast<uint64_t>((a - it->begin) * es)))
        throw Error("--load: error reading '" + files[it->file].path + "'");
      decodeValues(s.dtype, raw.data(), b - a, out + (a - g));
      covered += b - a;
    }
    if (covered != n)
      throw Error(ctx + ": elements [" + std::to_string(g) + ", " +
                  std::to_string(g + n) + ") of '" + fqn + "' ('" + role +
                  "') are missing from the checkpoint's files");
  }

private:
  struct GlobalRun {
    int64_t begin, end;
    size_t file;
    uint64_t offset;
  };

  const std::vector<GlobalRun> &runs(const std::string &fqn, const char *role,
                                     const Saved &s) {
    auto [it, fresh] = runsOf.try_emplace(&s);
    std::vector<GlobalRun> &v = it->second;
    if (!fresh)
      return v;
    int64_t es = floatBytes(s.dtype);
    for (const Range &r : s.ranges) {
      if (r.dim < 0 && r.begin < r.end)
        v.push_back({r.begin, r.end, r.file, r.offset});
      else if (r.dim >= 0)
        forEachGlobalRun(
            sliceOf(s.shape, r.dim, r.blocks, r.count), r.index, r.count,
            r.begin, r.end, [&](int64_t local, int64_t g, int64_t n) {
              v.push_back(
                  {g, g + n, r.file,
                   r.offset + static_cast<uint64_t>((local - r.begin) * es)});
            });
    }
    std::sort(v.begin(), v.end(), [](const GlobalRun &x, const GlobalRun &y) {
      return x.begin < y.begin;
    });
    for (size_t i = 1; i < v.size(); ++i)
      if (v[i].begin < v[i - 1].end)
        throw Error(ctx + ": element " + std::to_string(v[i].begin) + " of '" +
                    fqn + "' ('" + role +
                    "') is saved twice in the checkpoint's files");
    return v;
  }

  int fd(size_t file) {
    const SavedFile &f = files[file];
    auto &fd = open[file];
    if (fd)
      return fd->fd;
    struct stat st;
    bool found = ::stat(f.path.c_str(), &st) == 0;
    if (!found || static_cast<uint64_t>(st.st_size) != f.bytes)
      throw Error("--load: '" + f.path + "' is missing or truncated: " +
                  (found ? std::to_string(st.st_size) + " bytes"
                         : std::string("cannot stat it")) +
                  ", the index gives " + std::to_string(f.bytes));
    uint32_t crc = 0;
    if (f.crc >= 0 && (!fileCrc(f.path, f.bytes, crc) || crc != f.crc))
      throw Error("--load: '" + f.path + "' is corrupted: its CRC-32 is " +
                  std::to_string(crc) + ", the index gives " +
                  std::to_string(f.crc));
    fd = std::make_unique<Fd>(::open(f.path.c_str(), O_RDONLY | O_CLOEXEC));
    return fd->fd;
  }

  const std::vector<SavedFile> &files;
  const std::string &ctx;
  std::map<const Saved *, std::vector<GlobalRun>> runsOf;
  std::map<size_t, std::unique_ptr<Fd>> open;
  std::vector<char> raw;
};

} // namespace

int64_t checkCheckpointIndex(const std::string &text, const std::string &dir) {
  SavedMap saved;
  std::vector<SavedFile> files;
  LoadedCheckpoint result;
  json optimizer;
  parseIndex(text, dir, (fs::path(dir) / "index.json").string(), saved, files,
             result, optimizer);
  return result.step;
}

LoadedCheckpoint loadCheckpoint(const std::string &dir, Executor &ex,
                                int rank) {
  const Program &prog = ex.program();
  std::string ipath = (fs::path(dir) / "index.json").string();
  std::ifstream in(ipath);
  if (!in)
    throw Error("--load: cannot open '" + ipath +
                "' (not a checkpoint directory, or the save did not finish)");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string ctx = "--load: checkpoint '" + dir +
                          "' does not match schedule '" + prog.name() + "'";
  LoadedCheckpoint result;
  SavedMap saved;
  std::vector<SavedFile> files;
  json got;
  parseIndex(ss.str(), dir, ipath, saved, files, result, got);
  json want = optimizerJson(prog);
  if (rank == 0 && result.hasMeta && got != want)
    std::fprintf(stderr,
                 "fsdp-run: warning: --load: the checkpoint was trained with "
                 "optimizer %s; "
                 "this schedule has %s\n",
                 got.dump().c_str(), want.dump().c_str());

  // The model must be the schedule's: every FQN, its shape, every role the
  // schedule keeps, and nothing else (under pipeline parallelism: no FQN of
  // any stage's; each stage checks its own FQNs' shapes and roles).
  std::map<std::string, const ParamDesc *> params;
  for (const UnitDesc &u : prog.units())
    for (const ParamDesc &p : u.params)
      params[p.fqn] = &p;
  std::set<std::string> model;
  for (const ModelParam &m : modelParams(prog))
    model.insert(m.fqn);
  for (const auto &[key, s] : saved)
    if (!model.count(key.first))
      throw Error(ctx + ": the checkpoint has parameter '" + key.first +
                  "', which the schedule does not");
  auto source = [&](const std::string &fqn, const char *role) -> const Saved & {
    bool weights = !std::strcmp(role, "param") || !std::strcmp(role, "master");
    auto it = weights ? saved.find({fqn, "master"}) : saved.end();
    if (it == saved.end())
      it = saved.find({fqn, weights ? "param" : role});
    if (it == saved.end())
      throw Error(
          ctx + ": the checkpoint has no '" +
          std::string(weights ? "param" : role) + "' of parameter '" + fqn +
          "'" +
          (weights ? "" : " (saved by a run without that optimizer state?)"));
    if (it->second.shape != globalShapeOf(*params[fqn]))
      throw Error(ctx + ": parameter '" + fqn + "' has shape " +
                  json(it->second.shape).dump() + " in the checkpoint but " +
                  json(globalShapeOf(*params[fqn])).dump() +
                  " in the schedule");
    return it->second;
  };
  for (const UnitDesc &u : prog.units())
    for (const char *role : fsdp::schedule::kStateRoles)
      if (prog.findUnitInput(role, u.name))
        for (const ParamDesc &p : u.params)
          source(p.fqn, role);

  // This rank's buffers (under tensor parallelism its slices' global runs),
  // from the saved runs that overlap them.
  std::vector<double> values;
  SavedReader reader(files, ctx);
  const int stageRank = stageRankOf(prog, rank);
  int64_t tpRank = prog.tensorRank(stageRank), tp = prog.tensorParallel();
  for (const UnitDesc &u : prog.units())
    for (const char *role : fsdp::schedule::kStateRoles) {
      const IoDesc *io = prog.findUnitInput(role, u.name);
      if (!io)
        continue;
      int64_t begin, end;
      stateRange(prog, u, *io, stageRank, begin, end);
      values.assign(static_cast<size_t>(end - begin), 0.0); // padding: zero
      forEachParamIn(
          u, begin, end,
          [&](const ParamDesc &p, int64_t flatLo, int64_t flatHi) {
            const Saved &s = source(p.fqn, role);
            auto want = [&](int64_t local, int64_t g, int64_t n) {
              reader.read(
                  p.fqn, role, s, g, n,
                  &values[static_cast<size_t>(p.offset + local - begin)]);
            };
            forEachGlobalRun(p, tpRank, tp, flatLo - p.offset,
                             flatHi - p.offset, want);
          });
      ex.write(io->buffer, values);
    }
  std::string bad = firstNonFiniteState(ex, rank, allStateRoles());
  if (!bad.empty())
    throw fsdp::CollectiveError("--load: checkpoint '" + dir +
                                "' holds a non-finite value: " + bad);
  return result;
}

} // namespace fsdp::tooling
