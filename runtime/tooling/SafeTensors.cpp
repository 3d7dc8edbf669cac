//===- SafeTensors.cpp - Hugging Face weights in and out of fsdp-run ------===//
//
// Implementation of SafeTensors.h. Every tensor is addressed by absolute
// file offsets after the headers are checked; reads and writes are pread /
// pwrite of element ranges, converted by HostCodec.h.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/SafeTensors.h"
#include "FileIo.h"
#include "HostCodec.h"
#include "PipelineStages.h"
#include "fsdp/tooling/NonFinite.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

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

constexpr uint64_t kMaxHeaderBytes = 100u << 20; // the reference reader's limit
constexpr int64_t kChunkBytes = 1 << 20;

/// Element bytes of every dtype the format defines (0: unknown).
int64_t stDtypeBytes(const std::string &d) {
  if (d == "F64" || d == "I64" || d == "U64")
    return 8;
  if (d == "F32" || d == "I32" || d == "U32")
    return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16")
    return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2")
    return 1;
  return 0;
}

/// The runtime dtype of a floating safetensors dtype, or false.
bool stFloatType(const std::string &d, DType &t) {
  if (d == "F64")
    t = DType::F64;
  else if (d == "F32")
    t = DType::F32;
  else if (d == "BF16")
    t = DType::BF16;
  else if (d == "F16")
    t = DType::F16;
  else
    return false;
  return true;
}

const char *stName(DType t) {
  return t == DType::F64    ? "F64"
         : t == DType::BF16 ? "BF16"
         : t == DType::F16  ? "F16"
                            : "F32";
}

/// Parses and checks one file's header, adding its tensors to `out`.
void parseFile(const std::string &path,
               std::map<std::string, TensorEntry> &out) {
  auto bad = [&](const std::string &what) {
    return Error("--init-from: safetensors file '" + path + "': " + what);
  };
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0)
    throw bad(std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw bad("not a regular file");
  uint64_t size = static_cast<uint64_t>(st.st_size);
  uint64_t n = 0;
  if (size < 8 || !readAt(f.fd, &n, 8, 0))
    throw bad("truncated: " + std::to_string(size) +
              " bytes, shorter than the 8-byte header length");
  if (n > kMaxHeaderBytes || n > size - 8) {
    // Its first bytes say what it is instead: a PyTorch .bin / .pt
    // checkpoint is a zip archive ("PK\3\4"), text is text.
    char head[4] = {};
    readAt(f.fd, head, sizeof head, 0);
    bool zip = std::memcmp(head, "PK\3\4", 4) == 0;
    throw bad("header length " + std::to_string(n) + " exceeds " +
              (n > kMaxHeaderBytes
                   ? "the 100 MB limit"
                   : "the file (" + std::to_string(size) + " bytes)") +
              ": not a safetensors file (it starts with the 8-byte "
              "little-endian length of its JSON header)" +
              (zip ? "; this is a zip archive, as PyTorch's .bin / .pt "
                     "checkpoints are: convert it with safetensors' "
                     "save_file"
                   : ""));
  }
  std::string text(n, '\0');
  if (!readAt(f.fd, text.data(), n, 8))
    throw bad("cannot read the header");
  json h = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object())
    throw bad("the header is not a JSON object");
  uint64_t dataStart = 8 + n, dataBytes = size - dataStart;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    const json &e = it.value();
    std::string where = "tensor '" + it.key() + "'";
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() ||
        !e.contains("shape") || !e["shape"].is_array() ||
        !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      throw bad(where +
                ": needs \"dtype\", \"shape\" and two \"data_offsets\"");
    TensorEntry t;
    t.name = it.key();
    t.file = path;
    t.dtype = e["dtype"].get<std::string>();
    int64_t es = stDtypeBytes(t.dtype);
    if (!es)
      throw bad(where + ": unknown dtype \"" + t.dtype + "\"");
    t.numel = 1;
    for (const json &d : e["shape"]) {
      if (!d.is_number_unsigned())
        throw bad(where + ": shape " + e["shape"].dump() +
                  " is not a list of non-negative integers");
      int64_t dim = d.get<int64_t>();
      if (dim < 0 || __builtin_mul_overflow(t.numel, dim, &t.numel))
        throw bad(where + ": shape " + e["shape"].dump() + " overflows");
      t.shape.push_back(dim);
    }
    const json &o = e["data_offsets"];
    if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned())
      throw bad(where + ": data_offsets " + o.dump() +
                " are not non-negative integers");
    uint64_t b = o[0].get<uint64_t>(), end = o[1].get<uint64_t>();
    int64_t want;
    if (__builtin_mul_overflow(t.numel, es, &want) || b > end ||
        end - b != static_cast<uint64_t>(want))
      throw bad(where + ": data_offsets " + o.dump() + " do not hold " +
                std::to_string(t.numel) + " " + t.dtype + " elements");
    if (end > dataBytes)
      throw bad(where + ": data_offsets " + o.dump() + " end beyond the " +
                std::to_string(dataBytes) + " data bytes (truncated file?)");
    t.fileOffset = dataStart + b;
    t.bytes = end - b;
    if (t.bytes)
      ranges.push_back({b, end});
    if (!out.emplace(t.name, t).second)
      throw bad(where + ": also in '" + out[t.name].file + "'");
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second)
      throw bad("tensor data ranges overlap at byte " +
                std::to_string(ranges[i].first));
}

/// The checkpoint tensor that holds schedule parameter `fqn`: the FQN
/// itself, or without the model's base prefix.
const TensorEntry *lookup(const SafeTensorsArchive &a, const std::string &fqn) {
  if (const TensorEntry *t = a.find(fqn))
    return t;
  for (const char *prefix : {"transformer.", "model."})
    if (fqn.rfind(prefix, 0) == 0)
      if (const TensorEntry *t = a.find(fqn.substr(std::strlen(prefix))))
        return t;
  return nullptr;
}

/// Non-parameter buffers some checkpoints carry.
bool isKnownBuffer(const std::string &name) {
  auto ends = [&](const char *s) {
    size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return ends(".attn.bias") || ends(".attn.masked_bias") ||
         ends(".rotary_emb.inv_freq");
}

} // namespace

SafeTensorsArchive SafeTensorsArchive::open(const std::string &path) {
  SafeTensorsArchive a;
  a.root = path;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error("--init-from: '" + path + "' does not exist");
  if (!fs::is_directory(path, ec)) {
    parseFile(path, a.entries);
    return a;
  }
  // As transformers' from_pretrained: model.safetensors first, then the
  // index of a sharded checkpoint.
  fs::path index = fs::path(path) / "model.safetensors.index.json";
  fs::path single = fs::path(path) / "model.safetensors";
  if (fs::exists(single, ec)) {
    parseFile(single.string(), a.entries);
    return a;
  }
  if (!fs::exists(index, ec))
    throw Error("--init-from: directory '" + path +
                "' has neither "
                "model.safetensors nor model.safetensors.index.json");
  std::string ipath = index.string();
  FILE *f = std::fopen(ipath.c_str(), "rb");
  if (!f)
    throw Error("--init-from: cannot open '" + ipath + "'");
  json idx = json::parse(f, nullptr, /*allow_exceptions=*/false);
  std::fclose(f);
  if (idx.is_discarded() || !idx.is_object() || !idx.contains("weight_map") ||
      !idx["weight_map"].is_object())
    throw Error("--init-from: '" + ipath +
                "' is not a JSON object with a "
                "\"weight_map\" object");
  std::map<std::string, std::string> wanted; // tensor -> file
  std::set<std::string> files;
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end();
       ++it) {
    if (!it.value().is_string())
      throw Error("--init-from: '" + ipath + "': weight_map[\"" + it.key() +
                  "\"] is not a file name");
    std::string file =
        (fs::path(path) / it.value().get<std::string>()).string();
    wanted[it.key()] = file;
    files.insert(file);
  }
  for (const std::string &file : files)
    parseFile(file, a.entries);
  for (const auto &[name, file] : wanted) {
    auto it = a.entries.find(name);
    if (it == a.entries.end() || it->second.file != file)
      throw Error("--init-from: '" + ipath + "' maps tensor '" + name +
                  "' to '" + file + "', which does not hold it");
  }
  return a;
}

const TensorEntry *SafeTensorsArchive::find(const std::string &name) const {
  auto it = entries.find(name);
  return it == entries.end() ? nullptr : &it->second;
}

void SafeTensorsArchive::read(const TensorEntry &t, int64_t first,
                              int64_t count, double *out) const {
  readRuns(t, {{first, count}}, out);
}

void SafeTensorsArchive::readRuns(
    const TensorEntry &t, const std::vector<std::pair<int64_t, int64_t>> &runs,
    double *out) const {
  DType dt;
  if (!stFloatType(t.dtype, dt))
    throw Error("--init-from: tensor '" + t.name + "' in '" + t.file +
                "' has dtype " + t.dtype +
                "; parameters need F32, BF16, F16 "
                "or F64");
  for (auto [first, count] : runs)
    if (first < 0 || count < 0 || first + count > t.numel)
      throw Error("--init-from: element range out of tensor '" + t.name + "'");
  Fd f(::open(t.file.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0)
    throw Error("--init-from: cannot open '" + t.file +
                "': " + std::strerror(errno));
  int64_t es = floatBytes(dt), per = kChunkBytes / es;
  std::vector<char> buf;
  for (auto [first, count] : runs) {
    buf.resize(static_cast<size_t>(std::min(count, per) * es));
    for (int64_t done = 0; done < count;) {
      int64_t n = std::min(per, count - done);
      if (!readAt(f.fd, buf.data(), static_cast<uint64_t>(n * es),
                  t.fileOffset + static_cast<uint64_t>((first + done) * es)))
        throw Error("--init-from: short read of tensor '" + t.name +
                    "' from '" + t.file + "' (file truncated or changed?)");
      decodeValues(dt, buf.data(), n, out + done);
      done += n;
    }
    out += count;
  }
}

void initFromSafeTensors(const SafeTensorsArchive &archive, Executor &ex,
                         int rank) {
  const Program &prog = ex.program();
  // Check the whole archive against the schedule first: nothing is written
  // unless every tensor is there with its shape. Under pipeline parallelism
  // every rank checks every stage's parameters (the same message on every
  // rank) and reads its own stage's.
  std::map<std::string, const TensorEntry *> source;
  std::set<std::string> used;
  std::vector<std::string> missing;
  for (const ModelParam &p : modelParams(prog)) {
    const TensorEntry *t = lookup(archive, p.fqn);
    if (!t) {
      missing.push_back(p.fqn);
      continue;
    }
    if (t->shape != p.shape)
      throw Error("--init-from: tensor '" + t->name + "' in '" + t->file +
                  "' has shape " + json(t->shape).dump() +
                  "; the schedule's '" + p.fqn + "' is " +
                  json(p.shape).dump());
    DType dt;
    if (!stFloatType(t->dtype, dt))
      throw Error("--init-from: tensor '" + t->name + "' in '" + t->file +
                  "' has dtype " + t->dtype +
                  "; parameters need F32, BF16, "
                  "F16 or F64");
    source[p.fqn] = t;
    used.insert(t->name);
  }
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size() && i < 5; ++i)
      list += (i ? ", '" : "'") + missing[i] + "'";
    if (missing.size() > 5)
      list += " and " + std::to_string(missing.size() - 5) + " more";
    throw Error("--init-from: '" + archive.path() + "' has no tensor for " +
                std::to_string(missing.size()) +
                " parameter(s) of the "
                "schedule: " +
                list);
  }
  for (const auto &[name, t] : archive.tensors())
    if (!used.count(name) && !isKnownBuffer(name)) {
      std::string hint;
      if (name == "lm_head.weight")
        hint = " (the schedule's model ties the output projection to the "
               "token embedding; import a config with "
               "\"tie_word_embeddings\": false to train it separately)";
      throw Error("--init-from: tensor '" + name + "' in '" + t.file +
                  "' is not a parameter of the schedule" + hint);
    }

  // This rank's element range of every param/master buffer (under tensor
  // parallelism, the global runs of its slices).
  std::vector<double> values;
  std::vector<std::pair<int64_t, int64_t>> runs;
  const int stageRank = stageRankOf(prog, rank);
  int64_t tpRank = prog.tensorRank(stageRank), tp = prog.tensorParallel();
  for (const UnitDesc &u : prog.units())
    for (const char *role : {"param", "master"}) {
      const IoDesc *io = prog.findUnitInput(role, u.name);
      if (!io)
        continue;
      int64_t begin, end;
      stateRange(prog, u, *io, stageRank, begin, end);
      values.assign(static_cast<size_t>(end - begin), 0.0); // padding: zero
      forEachParamIn(
          u, begin, end, [&](const ParamDesc &p, int64_t lo, int64_t hi) {
            runs.clear();
            forEachGlobalRun(
                p, tpRank, tp, lo - p.offset, hi - p.offset,
                [&](int64_t, int64_t g, int64_t n) { runs.push_back({g, n}); });
            archive.readRuns(*source[p.fqn], runs, &values[lo - begin]);
          });
      ex.write(io->buffer, values);
    }
  // The tensors' names are the FQNs: the message names the tensor.
  std::string bad = firstNonFiniteState(ex, rank, {"param", "master"});
  if (!bad.empty())
    throw fsdp::CollectiveError("--init-from: '" + archive.path() +
                                "' holds a non-finite value: " + bad);
}

void exportSafeTensors(const std::string &path, const Executor &ex,
                       int64_t step, int rank) {
  const Program &prog = ex.program();
  const std::string partial = path + ".partial";
  std::string bad = firstNonFiniteState(ex, rank, {"param", "master"});
  if (!bad.empty())
    throw fsdp::CollectiveError(
        "--export: refusing to write '" + path + "': the parameters of step " +
        std::to_string(step) + " are not finite: " + bad);
  // Source buffer and file dtype of every unit.
  struct Src {
    const UnitDesc *unit;
    const IoDesc *io;
    DType type;
  };
  std::vector<Src> srcs;
  for (const UnitDesc &u : prog.units()) {
    const IoDesc *io = prog.findUnitInput("master", u.name);
    if (!io)
      io = prog.findUnitInput("param", u.name);
    if (!io)
      continue;
    DType bt = prog.buffer(io->buffer).dtype;
    srcs.push_back({&u, io, floatBytes(bt) ? bt : DType::F32});
  }
  // The header, the same on every rank: every stage's parameters (in stage
  // order; without pipeline parallelism the schedule's unit order).
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"},
                            {"producer", "fsdp-run"},
                            {"schedule", jobScheduleName(prog)},
                            {"step", std::to_string(step)}};
  std::map<std::string, uint64_t> dataOffset;
  uint64_t total = 0;
  for (const ModelParam &p : modelParams(prog)) {
    if (!p.stored)
      continue;
    int64_t numel = 1;
    for (int64_t d : p.shape)
      numel *= d;
    uint64_t bytes = static_cast<uint64_t>(numel * floatBytes(p.dtype));
    header[p.fqn] = {{"dtype", stName(p.dtype)},
                     {"shape", p.shape},
                     {"data_offsets", {total, total + bytes}}};
    dataOffset[p.fqn] = total;
    total += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8,
              ' '); // the reference writer's alignment
  const uint64_t dataStart = 8 + text.size();

  std::string err;
  auto agree = [&](const std::string &what) {
    int ok = err.empty(), all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) {
      if (rank == 0)
        ::unlink(partial.c_str());
      throw Error("--export: " +
                  (err.empty() ? "another rank failed to " + what : err));
    }
  };
  if (rank == 0) {
    Fd f(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                0644));
    uint64_t n = text.size();
    if (f.fd < 0 || !writeAt(f.fd, &n, 8, 0) ||
        !writeAt(f.fd, text.data(), n, 8) ||
        ::ftruncate(f.fd, static_cast<off_t>(dataStart + total)) != 0)
      err = "cannot write '" + partial + "': " + std::strerror(errno);
  }
  agree("create the file");

  // The first replica's ranks write their shards; a full (replicated)
  // buffer is written by data-parallel rank 0 alone; each tensor-parallel
  // rank writes its slices' global runs (writesCopy, writesParam); each
  // pipeline stage its own parameters.
  {
    const int stageRank = stageRankOf(prog, rank);
    int64_t tpRank = prog.tensorRank(stageRank), tp = prog.tensorParallel();
    Fd f(::open(partial.c_str(), O_WRONLY | O_CLOEXEC));
    if (f.fd < 0)
      err = "cannot open '" + partial + "' on rank " + std::to_string(rank) +
            ": " + std::strerror(errno);
    std::vector<double> values;
    std::vector<char> bytes;
    for (const Src &s : srcs) {
      if (!err.empty())
        break;
      if (!writesCopy(prog, *s.io, stageRank))
        continue;
      int64_t begin, end;
      stateRange(prog, *s.unit, *s.io, stageRank, begin, end);
      ex.read(s.io->buffer, values);
      int64_t es = floatBytes(s.type);
      forEachParamIn(
          *s.unit, begin, end, [&](const ParamDesc &p, int64_t lo, int64_t hi) {
            if (!err.empty() || !writesParam(prog, p, stageRank))
              return;
            bytes.resize(static_cast<size_t>((hi - lo) * es));
            encodeValues(s.type, &values[lo - begin], hi - lo, bytes.data());
            forEachGlobalRun(
                p, tpRank, tp, lo - p.offset, hi - p.offset,
                [&](int64_t local, int64_t g, int64_t n) {
                  if (err.empty() &&
                      !writeAt(f.fd, &bytes[(local + p.offset - lo) * es],
                               static_cast<uint64_t>(n * es),
                               dataStart + dataOffset[p.fqn] +
                                   static_cast<uint64_t>(g * es)))
                    err = "error writing '" + partial + "' on rank " +
                          std::to_string(rank) + ": " + std::strerror(errno);
                });
          });
    }
    if (err.empty() && f.fd >= 0 && ::fsync(f.fd) != 0)
      err = "fsync of '" + partial + "' failed on rank " + std::to_string(rank);
  }
  agree("write its shards");
  if (rank == 0 && std::rename(partial.c_str(), path.c_str()) != 0)
    err = "cannot rename '" + partial + "' to '" + path +
          "': " + std::strerror(errno);
  agree("rename the file");
}

} // namespace fsdp::tooling
