//===- RankAgreement.cpp - every rank runs the same schedule -------------===//
//
// Before the first step the ranks compare their schedules' fingerprints
// (fsdp::schedule::Program) over MPI: SPMD execution matches collectives up
// by their order, so ranks that disagree would hang or compute garbage.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Executor.h"

#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

namespace fsdp::rt {

using schedule::Program;

namespace {

/// Every rank's `text` (cut to a fixed width), over MPI_COMM_WORLD.
std::vector<std::string> allGatherNames(const std::string &text, int world,
                                        const Program &prog) {
  constexpr int kName = 256;
  std::vector<char> all(static_cast<size_t>(world) * kName, '\0');
  std::vector<char> mine(kName, '\0');
  std::string cut = text.substr(0, kName - 1);
  std::copy(cut.begin(), cut.end(), mine.begin());
  if (MPI_Allgather(mine.data(), kName, MPI_CHAR, all.data(), kName, MPI_CHAR,
                    MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(prog.name() + ": MPI_Allgather of the schedule names failed");
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r)
    out.emplace_back(&all[static_cast<size_t>(r) * kName]);
  return out;
}

/// The largest MPI tag of any stage's fsdp.send / fsdp.recv against
/// MPI_TAG_UB (MPI 4.0, Sec. 9.1.2: at least 32767; Open MPI's ob1 2^31 - 1),
/// queried on MPI_COMM_WORLD (the pipeline communicator is split from it
/// and keeps the value, Sec. 7.7). The maximum over every rank (one
/// MPI_Allreduce): every rank refuses alike, before step 1, where a larger
/// tag would fail in MPI_Isend mid-step on some ranks only.
void checkPipelineTags(const Program &prog) {
  long long mine = -1, largest = -1;
  int64_t at = -1;
  const auto &is = prog.instructions();
  for (size_t i = 0; i < is.size(); ++i)
    if ((is[i].op == "fsdp.send" || is[i].op == "fsdp.recv") &&
        is[i].integer("tag") > mine) {
      mine = is[i].integer("tag");
      at = static_cast<int64_t>(i);
    }
  if (MPI_Allreduce(&mine, &largest, 1, MPI_LONG_LONG, MPI_MAX,
                    MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(prog.name() + ": MPI_Allreduce of the largest MPI tag failed");
  void *value = nullptr;
  int found = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found) !=
          MPI_SUCCESS ||
      !found)
    throw Error(prog.name() + ": MPI_TAG_UB is not set on MPI_COMM_WORLD");
  long long ub = *static_cast<int *>(value);
  if (largest <= ub)
    return;
  throw Error(prog.name() + ": the pipeline's largest MPI tag " +
              std::to_string(largest) + " exceeds this MPI's MPI_TAG_UB " +
              std::to_string(ub) +
              (mine == largest
                   ? " (" + prog.where(static_cast<size_t>(at)) + ")"
                   : std::string(" (on another stage)")) +
              ": plan fewer micro-batches or pipeline chunks");
}

} // namespace

void checkSameJobOnAllRanks(const Program &prog) {
  int init = 0, world = 1;
  MPI_Initialized(&init);
  if (!init)
    return;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1)
    return;
  constexpr int kFields = 4;
  unsigned long long mine[kFields] = {
      static_cast<unsigned long long>(prog.pipelineStages()),
      static_cast<unsigned long long>(prog.pipelineMicroBatches()),
      static_cast<unsigned long long>(prog.worldSize() * prog.pipelineStages()),
      prog.jobFingerprint()};
  std::vector<unsigned long long> all(static_cast<size_t>(world) * kFields);
  if (MPI_Allgather(mine, kFields, MPI_UNSIGNED_LONG_LONG, all.data(), kFields,
                    MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(prog.name() + ": MPI_Allgather of the stage layouts failed");
  std::vector<std::string> names = allGatherNames(prog.name(), world, prog);
  std::vector<std::string> schedules =
      allGatherNames(prog.pipelineSchedule(), world, prog);
  auto field = [&](int r, int k) {
    return all[static_cast<size_t>(r) * kFields + static_cast<size_t>(k)];
  };
  bool anyPipeline = false;
  for (int r = 0; r < world; ++r)
    anyPipeline = anyPipeline || field(r, 0) > 1;
  if (!anyPipeline)
    return;
  // The file each rank read (a pipeline stage's name says its stage).
  auto files = [&](int r) {
    return " (schedules '" + names[static_cast<size_t>(r)] + "' and '" +
           names[0] + "')";
  };
  for (int r = 1; r < world; ++r) {
    if (field(r, 0) != field(0, 0))
      throw CollectiveError(
          prog.name() + ": rank " + std::to_string(r) +
          " has pp=" + std::to_string(field(r, 0)) +
          ", rank 0 has pp=" + std::to_string(field(0, 0)) + files(r) +
          ": every rank must run the same pipeline stage layout");
    if (schedules[static_cast<size_t>(r)] != schedules[0] ||
        field(r, 1) != field(0, 1))
      throw CollectiveError(
          prog.name() + ": rank " + std::to_string(r) + " runs pipeline " +
          "schedule '" + schedules[static_cast<size_t>(r)] + "' with " +
          std::to_string(field(r, 1)) + " micro-batches, rank 0 '" +
          schedules[0] + "' with " + std::to_string(field(0, 1)) + files(r) +
          ": every stage must run the same pipeline schedule");
    if (field(r, 2) != field(0, 2) || field(r, 3) != field(0, 3))
      throw CollectiveError(
          prog.name() + ": rank " + std::to_string(r) +
          "'s pipeline document differs from rank 0's" + files(r) +
          ": the stage split or a stage's program is not the same (every "
          "rank must read the same pipeline schedule)");
  }
  checkPipelineTags(prog);
}

void checkSameScheduleOnAllRanks(const Program &prog) {
  int init = 0, world = 1;
  MPI_Initialized(&init);
  if (!init)
    return;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1 || world != prog.worldSize())
    return;
  // The collective fingerprint and the tensor-parallel degree T, which
  // decides every rank's slices and groups (named first: a T mismatch also
  // changes the collectives).
  unsigned long long mine[2] = {
      prog.collectiveFingerprint(),
      static_cast<unsigned long long>(prog.tensorParallel())};
  std::vector<unsigned long long> pairs(2 * static_cast<size_t>(world));
  if (MPI_Allgather(mine, 2, MPI_UNSIGNED_LONG_LONG, pairs.data(), 2,
                    MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(prog.name() +
                ": MPI_Allgather of the collective fingerprints failed");
  std::vector<unsigned long long> all(static_cast<size_t>(world)),
      tp(static_cast<size_t>(world));
  for (size_t r = 0; r < all.size(); ++r) {
    all[r] = pairs[2 * r];
    tp[r] = pairs[2 * r + 1];
  }
  // Each rank's schedule file name, for the messages (fixed width: names
  // longer than that are cut).
  constexpr int kName = 256;
  std::vector<char> names(static_cast<size_t>(world) * kName, '\0');
  std::string me = prog.name().substr(0, kName - 1);
  std::vector<char> mine2(kName, '\0');
  std::copy(me.begin(), me.end(), mine2.begin());
  unsigned long long whole = prog.scheduleFingerprint();
  std::vector<unsigned long long> wholes(static_cast<size_t>(world));
  if (MPI_Allgather(mine2.data(), kName, MPI_CHAR, names.data(), kName,
                    MPI_CHAR, MPI_COMM_WORLD) != MPI_SUCCESS ||
      MPI_Allgather(&whole, 1, MPI_UNSIGNED_LONG_LONG, wholes.data(), 1,
                    MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(prog.name() +
                ": MPI_Allgather of the schedule fingerprints failed");
  auto name = [&](int r) {
    return std::string(&names[static_cast<size_t>(r) * kName]);
  };
  for (int r = 0; r < world; ++r)
    if (tp[static_cast<size_t>(r)] != tp[0])
      throw CollectiveError(
          prog.name() + ": rank " + std::to_string(r) +
          " has tensor_parallel " + std::to_string(tp[static_cast<size_t>(r)]) +
          ", rank 0 has " + std::to_string(tp[0]) + " (schedules '" + name(r) +
          "' and '" + name(0) +
          "'): every rank must run the same schedule (the same tp=T)");
  for (int r = 0; r < world; ++r)
    if (all[static_cast<size_t>(r)] != all[0])
      throw CollectiveError(
          prog.name() + ": rank " + std::to_string(r) +
          " runs a different sequence of collectives than rank 0 (schedules '" +
          name(r) + "' and '" + name(0) + "', fingerprints " +
          std::to_string(all[static_cast<size_t>(r)]) + " and " +
          std::to_string(all[0]) + "): every rank must run the same schedule");
  for (int r = 0; r < world; ++r)
    if (wholes[static_cast<size_t>(r)] != wholes[0])
      throw CollectiveError(
          prog.name() + ": rank " + std::to_string(r) +
          " runs another schedule than rank 0 (schedules '" + name(r) +
          "' and '" + name(0) +
          "'): the collectives agree, but an instruction or an attribute "
          "differs (fingerprints " +
          std::to_string(wholes[static_cast<size_t>(r)]) + " and " +
          std::to_string(wholes[0]) +
          "): every rank must run the same schedule");
}

} // namespace fsdp::rt
