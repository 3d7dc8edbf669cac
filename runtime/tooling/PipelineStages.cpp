//===- PipelineStages.cpp - Whole-model files under pipeline parallelism ===//
//
// Implementation of PipelineStages.h. The stage leaders' documents travel as
// JSON text: a stage's parameter list or checkpoint-index part is small
// beside the tensors (an entry per FQN and saved range).
//
//===----------------------------------------------------------------------===//
#include "PipelineStages.h"
#include "HostCodec.h"
#include "JsonFields.h"
#include "fsdp/tooling/InputDigest.h"

#include <mpi.h>

#include <set>

using fsdp::Error;
using fsdp::schedule::DType;
using fsdp::schedule::IoDesc;
using fsdp::schedule::ParamDesc;
using fsdp::schedule::Program;
using fsdp::schedule::UnitDesc;
using nlohmann::json;

namespace fsdp::tooling {

namespace {

/// This program's parameters (its stage's), in unit and parameter order.
std::vector<ModelParam> localParams(const Program &p) {
  std::vector<ModelParam> out;
  for (const UnitDesc &u : p.units()) {
    const IoDesc *io = p.findUnitInput("master", u.name);
    if (!io)
      io = p.findUnitInput("param", u.name);
    DType t = DType::F32;
    if (io && floatBytes(p.buffer(io->buffer).dtype))
      t = p.buffer(io->buffer).dtype;
    for (const ParamDesc &q : u.params)
      out.push_back({q.fqn, q.tpDim >= 0 ? q.globalShape : q.shape,
                     p.pipelineStage(), t, io != nullptr});
  }
  return out;
}

DType dtypeNamed(const std::string &s) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16})
    if (s == fsdp::schedule::dtypeName(t))
      return t;
  return DType::F32;
}

} // namespace

std::vector<std::string> gatherOnRoot(const std::string &mine, bool contribute,
                                      int worldRank, const std::string &what) {
  int n = 0, len = contribute ? static_cast<int>(mine.size()) : 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> lens(static_cast<size_t>(n)), at(static_cast<size_t>(n));
  if (MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0,
                 MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error("MPI_Gather of the sizes of " + what + " failed");
  int total = 0;
  for (size_t r = 0; r < lens.size(); ++r) {
    at[r] = total;
    total += lens[r];
  }
  std::string all(worldRank == 0 ? static_cast<size_t>(total) : 0, '\0');
  if (MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                  at.data(), MPI_CHAR, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error("MPI_Gatherv of " + what + " failed");
  std::vector<std::string> out;
  if (worldRank == 0)
    for (size_t r = 0; r < lens.size(); ++r)
      if (lens[r])
        out.push_back(all.substr(static_cast<size_t>(at[r]),
                                 static_cast<size_t>(lens[r])));
  return out;
}

std::vector<ModelParam> modelParams(const Program &p) {
  std::vector<ModelParam> mine = localParams(p);
  if (p.pipelineStages() <= 1)
    return mine;
  int worldRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  json list = json::array();
  if (stageRankOf(p, worldRank) == 0)
    for (const ModelParam &m : mine)
      list.push_back({m.fqn, m.shape, m.stage,
                      fsdp::schedule::dtypeName(m.dtype), m.stored});
  // World ranks are stage-major, so rank order is stage order.
  std::vector<ModelParam> all;
  for (const std::string &text :
       allGatherWorld(stageRankOf(p, worldRank) == 0 ? list.dump() : ""))
    if (!text.empty())
      for (const json &e : json::parse(text))
        all.push_back({e[0].get<std::string>(),
                       e[1].get<std::vector<int64_t>>(), e[2].get<int64_t>(),
                       dtypeNamed(e[3].get<std::string>()), e[4].get<bool>()});
  return all;
}

std::set<std::string> heldByEarlierStage(const Program &p) {
  std::set<std::string> earlier, tied;
  if (p.pipelineStages() <= 1)
    return tied;
  for (const ModelParam &m : modelParams(p)) // stage order
    if (m.stage < p.pipelineStage())
      earlier.insert(m.fqn);
    else if (m.stage == p.pipelineStage() && earlier.count(m.fqn))
      tied.insert(m.fqn);
  return tied;
}

json mergeStageParts(const Program &p, const json &mine, bool leader,
                     int worldRank) {
  if (p.pipelineStages() <= 1)
    return worldRank == 0 ? mine : json::object();
  std::vector<std::string> parts =
      gatherOnRoot(leader ? mine.dump() : std::string(), leader, worldRank,
                   "the pipeline stages' indexes");
  if (worldRank != 0)
    return json::object();
  json merged = {{"files", json::array()}, {"tensors", json::array()}};
  std::set<std::string> roles;
  for (const std::string &text : parts) {
    json part = json::parse(text);
    size_t base = merged["files"].size();
    for (json &f : part["files"])
      merged["files"].push_back(std::move(f));
    for (json &t : part["tensors"]) {
      for (json &r : t["ranges"])
        r["file"] = r["file"].get<size_t>() + base;
      merged["tensors"].push_back(std::move(t));
    }
    for (const json &r : part["roles"])
      roles.insert(r.get<std::string>());
  }
  merged["roles"] = json::array();
  for (const char *role : fsdp::schedule::kStateRoles)
    if (roles.count(role))
      merged["roles"].push_back(role);
  return merged;
}

void checkStageLayout(const json &index, const std::string &ipath) {
  auto bad = [&](const std::string &what) {
    return Error("--load: '" + ipath + "' is malformed: " + what);
  };
  json grid = index.value("grid", json::object());
  if (!grid.is_object())
    throw bad("grid must be an object");
  // Integers only through intOf (a float that does not fit is undefined
  // behaviour in nlohmann's get<int64_t>; the index is fuzzed).
  int64_t stages = 1;
  try {
    stages =
        intOf(grid.value("pipeline_stages", json(1)), "grid.pipeline_stages");
    if (stages < 1 || stages > (int64_t(1) << 20))
      throw BadField("grid.pipeline_stages must be in [1, 2^20], got " +
                     std::to_string(stages));
    std::vector<bool> seen(static_cast<size_t>(stages));
    if (!grid.contains("pipeline_stages"))
      seen.assign(1, true); // saved without pipeline parallelism
    for (const json &t : index.at("tensors")) {
      int64_t s = t.is_object() && t.contains("stage")
                      ? intOf(t["stage"], "tensors[].stage")
                      : 0;
      if (s < 0 || s >= stages)
        throw BadField("tensors[].stage must be in [0, " +
                       std::to_string(stages) + "), got " + std::to_string(s));
      seen[static_cast<size_t>(s)] = true;
    }
    for (size_t s = 0; s < seen.size(); ++s)
      if (!seen[s])
        throw Error("--load: '" + ipath +
                    "' has no tensors of pipeline stage " + std::to_string(s) +
                    " of " + std::to_string(stages) +
                    " (grid.pipeline_stages): the stage's part of the index "
                    "is missing");
  } catch (const BadField &e) {
    throw bad(e.what());
  }
}

} // namespace fsdp::tooling
