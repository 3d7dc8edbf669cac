//===- Checkpoint.cpp - fsdp-run --save / --load of sharded training state ===//
//
// Implementation of Checkpoint.h: raw per-rank shard files plus a JSON index
// that describes the units, parameters and byte offsets, and the checks that
// a checkpoint matches the schedule it is loaded into. Each role's buffer is
// stored in its own dtype (a bf16/f16 `param` as 2-byte elements beside its
// f32 `master`).
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include "HostCodec.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

using fsdp::rt::DType;
using fsdp::rt::Error;
using fsdp::rt::Executor;
using fsdp::rt::IoDesc;
using fsdp::rt::Program;
using fsdp::rt::UnitDesc;
using nlohmann::json;

namespace fsdp::run {

namespace {

const char *const kRoles[] = {"param", "master", "exp_avg", "exp_avg_sq"};

/// The input buffer of (role, unit), or -1.
int64_t shardInput(const Program &p, const std::string &role,
                   const std::string &unit) {
  const IoDesc *io = p.findUnitInput(role, unit);
  return io ? io->buffer : -1;
}

std::string rankFile(int rank) { return "rank" + std::to_string(rank) + ".bin"; }

/// The byte layout shared by every rank file: unit -> role -> offset.
json shardLayout(const Program &p, int64_t &totalBytes) {
  json shards = json::object();
  totalBytes = 0;
  for (const UnitDesc &u : p.units()) {
    json roles = json::object();
    for (const char *role : kRoles)
      if (shardInput(p, role, u.name) >= 0) {
        roles[role] = totalBytes;
        totalBytes += p.buffer(shardInput(p, role, u.name)).bytes;
      }
    shards[u.name] = roles;
  }
  return shards;
}

void writeShard(std::ofstream &out, const std::vector<double> &v, DType t) {
  std::vector<char> bytes(v.size() * static_cast<size_t>(floatBytes(t)));
  encodeValues(t, v.data(), static_cast<int64_t>(v.size()), bytes.data());
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<double> readShard(std::ifstream &in, int64_t n, DType t) {
  std::vector<char> bytes(static_cast<size_t>(n * floatBytes(t)));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::vector<double> v(n);
  decodeValues(t, bytes.data(), n, v.data());
  return v;
}

template <typename T>
void expectEq(const T &got, const T &want, const std::string &what,
              const std::string &ctx) {
  if (got != want)
    throw Error(ctx + ": " + what + " is " + json(got).dump() +
                " in the checkpoint but " + json(want).dump() +
                " in the schedule");
}

} // namespace

void saveCheckpoint(const std::string &dir, const Executor &ex, int64_t step,
                    int rank) {
  const Program &prog = ex.program();
  namespace fs = std::filesystem;
  int ok = 1;
  std::string err;
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      ok = 0;
      err = ec.message();
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok)
    throw Error("--save: cannot create directory '" + dir + "'" +
                (err.empty() ? std::string() : ": " + err));

  int64_t total = 0;
  json layout = shardLayout(prog, total);
  std::string path = (fs::path(dir) / rankFile(rank)).string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error("--save: cannot write '" + path + "'");
    std::vector<double> values;
    for (const UnitDesc &u : prog.units())
      for (const char *role : kRoles) {
        int64_t id = shardInput(prog, role, u.name);
        if (id < 0)
          continue;
        ex.read(id, values);
        writeShard(out, values, prog.buffer(id).dtype);
      }
    if (!out.flush())
      throw Error("--save: error writing '" + path + "'");
  }
  // The index is written last, so that its presence means every rank file
  // is complete.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0)
    return;
  json units = json::array();
  for (const UnitDesc &u : prog.units()) {
    json params = json::array(), layouts = json::object(),
         dtypes = json::object();
    for (const char *role : kRoles)
      if (const IoDesc *io = prog.findUnitInput(role, u.name)) {
        layouts[role] = io->layout;
        dtypes[role] = fsdp::rt::dtypeName(prog.buffer(io->buffer).dtype);
      }
    for (const auto &p : u.params)
      params.push_back({{"fqn", p.fqn},
                        {"shape", p.shape},
                        {"dtype", fsdp::rt::dtypeName(u.dtype)},
                        {"offset", p.offset},
                        {"numel", p.numel}});
    units.push_back({{"name", u.name},
                     {"dtype", fsdp::rt::dtypeName(u.dtype)},
                     {"numel", u.numel},
                     {"padded_numel", u.paddedNumel},
                     {"shard_numel", u.shardNumel},
                     {"layouts", layouts},
                     {"dtypes", dtypes},
                     {"params", params}});
  }
  json roles = json::array();
  for (const char *role : kRoles)
    for (const UnitDesc &u : prog.units())
      if (shardInput(prog, role, u.name) >= 0) {
        roles.push_back(role);
        break;
      }
  json files = json::array();
  for (int64_t r = 0; r < prog.worldSize(); ++r)
    files.push_back({{"rank", r},
                     {"path", rankFile(static_cast<int>(r))},
                     {"bytes", total},
                     {"shards", layout}});
  json index = {{"format", "fsdp-checkpoint"},
                {"version", 1},
                {"schedule", prog.name()},
                {"world_size", prog.worldSize()},
                {"strategy", prog.strategy()},
                {"grid", {{"replicas", prog.replicas()},
                          {"shard_size", prog.shardSize()}}},
                {"step", step},
                {"roles", roles},
                {"units", units},
                {"files", files}};
  std::string ipath = (fs::path(dir) / "index.json").string();
  std::ofstream out(ipath);
  if (!out || !(out << index.dump(1) << "\n") || !out.flush())
    throw Error("--save: cannot write '" + ipath + "'");
}

int64_t loadCheckpoint(const std::string &dir, Executor &ex, int rank) {
  const Program &prog = ex.program();
  namespace fs = std::filesystem;
  std::string ipath = (fs::path(dir) / "index.json").string();
  std::ifstream in(ipath);
  if (!in)
    throw Error("--load: cannot open '" + ipath +
                "' (not a checkpoint directory, or the save did not finish)");
  std::stringstream ss;
  ss << in.rdbuf();
  json index;
  try {
    index = json::parse(ss.str());
  } catch (const json::exception &e) {
    throw Error("--load: '" + ipath + "' is not valid JSON: " + e.what());
  }
  const std::string ctx = "--load: checkpoint '" + dir + "' does not match "
                          "schedule '" + prog.name() + "'";
  try {
    if (index.value("format", std::string()) != "fsdp-checkpoint" ||
        index.value("version", 0) != 1)
      throw Error("--load: '" + ipath + "' is not an fsdp-checkpoint "
                  "version 1 index");
    expectEq(index.at("world_size").get<int64_t>(), prog.worldSize(),
             "world_size", ctx);
    // Checkpoints from before strategies: full-shard, R = 1, S = N.
    json grid = index.value("grid", json{{"replicas", 1},
                                         {"shard_size", prog.worldSize()}});
    expectEq(grid.at("replicas").get<int64_t>(), prog.replicas(),
             "grid.replicas", ctx);
    expectEq(grid.at("shard_size").get<int64_t>(), prog.shardSize(),
             "grid.shard_size", ctx);
    const json &units = index.at("units");
    expectEq(units.size(), prog.units().size(), "the number of units", ctx);
    for (size_t i = 0; i < units.size(); ++i) {
      const json &ju = units[i];
      const UnitDesc &u = prog.units()[i];
      expectEq(ju.at("name").get<std::string>(), u.name,
               "the name of unit #" + std::to_string(i), ctx);
      std::string uctx = ctx + ": unit '" + u.name + "'";
      expectEq(ju.at("dtype").get<std::string>(),
               std::string(fsdp::rt::dtypeName(u.dtype)), "dtype", uctx);
      expectEq(ju.at("numel").get<int64_t>(), u.numel, "numel", uctx);
      expectEq(ju.at("shard_numel").get<int64_t>(), u.shardNumel,
               "shard_numel", uctx);
      json layouts = ju.value("layouts", json::object());
      // Checkpoints without "dtypes" hold every role in the unit dtype.
      json dtypes = ju.value("dtypes", json::object());
      for (const char *role : kRoles)
        if (const IoDesc *io = prog.findUnitInput(role, u.name)) {
          expectEq(layouts.value(role, std::string("shard")), io->layout,
                   std::string("the layout of '") + role + "'", uctx);
          expectEq(dtypes.value(role, std::string(fsdp::rt::dtypeName(u.dtype))),
                   std::string(fsdp::rt::dtypeName(prog.buffer(io->buffer).dtype)),
                   std::string("the dtype of '") + role + "'", uctx);
        }
      const json &params = ju.at("params");
      expectEq(params.size(), u.params.size(), "the number of parameters",
               uctx);
      for (size_t j = 0; j < params.size(); ++j) {
        const auto &p = u.params[j];
        expectEq(params[j].at("fqn").get<std::string>(), p.fqn,
                 "the FQN of parameter #" + std::to_string(j), uctx);
        std::string pctx = uctx + ": parameter '" + p.fqn + "'";
        expectEq(params[j].at("shape").get<std::vector<int64_t>>(), p.shape,
                 "shape", pctx);
        expectEq(params[j].at("offset").get<int64_t>(), p.offset, "offset",
                 pctx);
      }
    }
    const json *file = nullptr;
    for (const json &f : index.at("files"))
      if (f.at("rank").get<int64_t>() == rank)
        file = &f;
    if (!file)
      throw Error(ctx + ": no file for rank " + std::to_string(rank));
    std::string path = (fs::path(dir) / file->at("path").get<std::string>())
                           .string();
    std::error_code ec;
    auto size = fs::file_size(path, ec);
    if (ec || static_cast<int64_t>(size) != file->at("bytes").get<int64_t>())
      throw Error("--load: '" + path + "' is missing or does not have the " +
                  std::to_string(file->at("bytes").get<int64_t>()) +
                  " bytes the index gives");
    std::ifstream bin(path, std::ios::binary);
    const json &shards = file->at("shards");
    for (const UnitDesc &u : prog.units())
      for (const char *role : kRoles) {
        int64_t id = shardInput(prog, role, u.name);
        if (id < 0)
          continue;
        if (!shards.contains(u.name) || !shards[u.name].contains(role))
          throw Error(ctx + ": unit '" + u.name + "' has no '" + role +
                      "' shard in the checkpoint");
        bin.seekg(shards[u.name][role].get<int64_t>());
        std::vector<double> v =
            readShard(bin, prog.buffer(id).numel, prog.buffer(id).dtype);
        if (!bin)
          throw Error("--load: error reading '" + path + "'");
        ex.write(id, v);
      }
    return index.at("step").get<int64_t>();
  } catch (const json::exception &e) {
    throw Error("--load: '" + ipath + "' is malformed: " + e.what());
  }
}

} // namespace fsdp::run
