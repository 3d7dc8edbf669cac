//===- NonFinite.cpp - the first inf or nan of the training state ---------===//
#include "fsdp/tooling/NonFinite.h"

#include "FileIo.h"
#include "PipelineStages.h"

#include "fsdp/schedule/Error.h"
#include "fsdp/tooling/InputDigest.h"

#include <mpi.h>

#include <climits>
#include <cmath>

using fsdp::schedule::IoDesc;
using fsdp::schedule::ParamDesc;
using fsdp::schedule::Program;
using fsdp::schedule::UnitDesc;

namespace fsdp::tooling {

namespace {

// A key orders (unit, role, flat element) and carries the value's kind in
// its low 2 bits: ((unit · 4 + role) · 2^40 + element) · 4 + kind. Flat
// elements stay below 2^40 (10^12) and units below 2^19.
constexpr int kElementBits = 40;
enum Kind : int64_t { kNan = 0, kPlusInf = 1, kMinusInf = 2 };

int64_t keyOf(size_t unit, size_t role, int64_t element, double v) {
  int64_t kind = std::isnan(v) ? kNan : v > 0 ? kPlusInf : kMinusInf;
  return (((static_cast<int64_t>(unit) * 4 + static_cast<int64_t>(role))
           << kElementBits) +
          element) *
             4 +
         kind;
}

/// The text of key `first` of this program (keyOf): role, FQN and element
/// (or the unit's padding) and the kind of value.
std::string describeKey(const Program &prog,
                        const std::vector<std::string> &roles,
                        long long first) {
  int64_t kind = first % 4, rest = first / 4;
  int64_t element = rest & ((int64_t(1) << kElementBits) - 1);
  int64_t unitRole = rest >> kElementBits;
  const UnitDesc &u = prog.units()[static_cast<size_t>(unitRole / 4)];
  std::string what = roles[static_cast<size_t>(unitRole % 4)] + " of ";
  const ParamDesc *param = nullptr;
  for (const ParamDesc &p : u.params)
    if (element >= p.offset && element < p.offset + p.numel)
      param = &p;
  // Padding is zero-filled; a non-finite value there is reported by unit.
  what += param ? "'" + param->fqn + "' element " +
                      std::to_string(element - param->offset)
                : "unit '" + u.name + "' flat element " +
                      std::to_string(element) + " (padding)";
  return what + " is " +
         (kind == kNan       ? "nan"
          : kind == kPlusInf ? "inf"
                             : "-inf");
}

} // namespace

std::vector<std::string> allStateRoles() {
  return {std::begin(fsdp::schedule::kStateRoles),
          std::end(fsdp::schedule::kStateRoles)};
}

std::string firstNonFiniteState(const fsdp::rt::Executor &ex, int rank,
                                const std::vector<std::string> &roles) {
  const Program &prog = ex.program();
  long long mine = LLONG_MAX;
  std::vector<double> values;
  for (size_t ui = 0; ui < prog.units().size() && mine == LLONG_MAX; ++ui) {
    const UnitDesc &u = prog.units()[ui];
    for (size_t ri = 0; ri < roles.size() && mine == LLONG_MAX; ++ri) {
      const IoDesc *io = prog.findUnitInput(roles[ri], u.name);
      if (!io)
        continue;
      int64_t begin, end;
      stateRange(prog, u, *io, stageRankOf(prog, rank), begin, end);
      ex.read(io->buffer, values);
      for (size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i])) {
          mine = keyOf(ui, ri, begin + static_cast<int64_t>(i), values[i]);
          break;
        }
    }
  }
  // Under pipeline parallelism a key means something in its own stage's
  // program only: the first stage with a non-finite value finds its first
  // key and describes it to every rank.
  int64_t stages = prog.pipelineStages(), stage = prog.pipelineStage();
  long long firstStage = 0, first = LLONG_MAX;
  long long myStage = mine == LLONG_MAX ? LLONG_MAX : stage;
  if (stages > 1 && MPI_Allreduce(&myStage, &firstStage, 1, MPI_LONG_LONG,
                                  MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error("MPI_Allreduce of the non-finite state check failed");
  if (firstStage == LLONG_MAX)
    return "";
  if (stage != firstStage)
    mine = LLONG_MAX;
  if (MPI_Allreduce(&mine, &first, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    throw Error("MPI_Allreduce of the non-finite state check failed");
  if (first == LLONG_MAX)
    return "";
  std::string what = stage == firstStage ? describeKey(prog, roles, first) : "";
  if (stages == 1)
    return what;
  for (const std::string &text : allGatherWorld(what))
    if (!text.empty())
      return text + " (pipeline stage " + std::to_string(firstStage) + ")";
  return what;
}

} // namespace fsdp::tooling
