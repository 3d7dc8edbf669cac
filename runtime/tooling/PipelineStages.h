//===- PipelineStages.h - Whole-model files under pipeline parallelism -===//
//
// Under pipeline parallelism (P > 1 stages, docs/pipeline-parallel.md) a
// rank's Program holds its stage's units only, and its world is the stage's
// N / P ranks; the files of --save / --load / --init-from / --export hold the
// whole model. These helpers give the file code the job-wide view: a rank's
// index within its stage, every stage's parameters (gathered from the stage
// leaders), and the stage leaders' parts of a checkpoint index merged on
// world rank 0. Every tensor is addressed by its FQN (and, under tensor
// parallelism, its tensor_slice), so a stage's part needs no other stage's
// layout. With P = 1 nothing is communicated.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_PIPELINESTAGES_H
#define FSDP_TOOLING_PIPELINESTAGES_H

#include "fsdp/schedule/Program.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace fsdp::tooling {

/// World rank `worldRank`'s rank within its pipeline stage (stage-major
/// mesh: world rank r is rank r mod N/P of stage r / (N/P)); `worldRank`
/// itself without pipeline parallelism. Every rank-dependent index of the
/// stage's program (shard, data-parallel and tensor-parallel rank) takes
/// this one.
inline int stageRankOf(const fsdp::schedule::Program &p, int worldRank) {
  return worldRank % static_cast<int>(p.worldSize());
}

/// The job's ranks: the stage's world size times the stages.
inline int64_t jobSizeOf(const fsdp::schedule::Program &p) {
  return p.worldSize() * p.pipelineStages();
}

/// The schedule's name as the job knows it (the "schedule" of a checkpoint
/// index or an export's metadata): Program::name() without the
/// " (stage s)" that names a pipeline stage's program.
inline std::string jobScheduleName(const fsdp::schedule::Program &p) {
  std::string name = p.name();
  std::string tail = " (stage " + std::to_string(p.pipelineStage()) + ")";
  if (p.pipelineStages() > 1 && name.size() >= tail.size() &&
      name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
    name.resize(name.size() - tail.size());
  return name;
}

/// `mine` from every rank with `contribute` (the others send nothing),
/// gathered on world rank 0 in rank order (MPI_Gather of the lengths, then
/// MPI_Gatherv); empty elsewhere. Collective over MPI_COMM_WORLD. Throws
/// fsdp::Error naming `what` when MPI fails.
std::vector<std::string> gatherOnRoot(const std::string &mine, bool contribute,
                                      int worldRank, const std::string &what);

/// One parameter of the whole model, as a safetensors file holds it.
struct ModelParam {
  std::string fqn;
  std::vector<int64_t> shape; ///< the global shape (Hugging Face's)
  int64_t stage = 0;          ///< the pipeline stage whose units hold it
  /// The dtype --export writes: the unit's master buffer's, else its
  /// param buffer's (F32 for another type).
  fsdp::schedule::DType dtype = fsdp::schedule::DType::F32;
  bool stored = false; ///< its unit has a param or master input
};

/// Every parameter of the model: each stage's, in stage order, each in its
/// units' and parameters' order (for P = 1 the program's own order).
/// Collective over MPI_COMM_WORLD when P > 1 (the stage leaders' lists,
/// gathered on every rank). Throws fsdp::Error on an MPI failure.
std::vector<ModelParam> modelParams(const fsdp::schedule::Program &p);

/// The FQNs of this program's stage that an earlier stage also holds: a
/// weight tied across stages, which fsdp-pipeline-split keeps on every stage
/// that uses it, the copies equal (docs/pipeline-parallel.md, "Tied
/// weights"). A checkpoint saves such a parameter once, from the first stage
/// that holds it. Empty when P = 1; collective over MPI_COMM_WORLD when
/// P > 1 (modelParams).
std::set<std::string> heldByEarlierStage(const fsdp::schedule::Program &p);

/// Checkpoint save under pipeline parallelism: every stage leader's part of
/// the index ({"files": [...], "tensors": [...], "roles": [...]}, file
/// indices local to the part), merged on world rank 0 into one (files
/// appended in stage order, each range's "file" renumbered, roles in
/// fsdp::schedule::kStateRoles order); other ranks get an empty object.
/// `leader`: this rank is its stage's rank 0 and `mine` is its part.
/// Collective over MPI_COMM_WORLD when P > 1.
nlohmann::json mergeStageParts(const fsdp::schedule::Program &p,
                               const nlohmann::json &mine, bool leader,
                               int worldRank);

/// Checks a version-2/3 index's pipeline layout (grid.pipeline_stages P,
/// default 1, and every tensor's "stage" in [0, P)): every stage must have
/// tensors (a stage's part missing from the index is refused, not loaded as
/// a smaller model). Throws fsdp::Error naming `ipath`. No communication.
void checkStageLayout(const nlohmann::json &index, const std::string &ipath);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_PIPELINESTAGES_H
