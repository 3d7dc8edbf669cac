//===- NonFinite.h - fsdp-run's check of the state for inf and nan --------===//
//
// The training state must stay finite where it leaves or enters a run: a
// checkpoint is never saved with an inf or nan in it, --load, --init-from
// and --export refuse one, and a run stopped by a non-finite loss or
// gradient norm names the first non-finite parameter. One collective scan
// serves them all.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_NONFINITE_H
#define FSDP_TOOLING_NONFINITE_H

#include "fsdp/Executor.h"

#include <string>
#include <vector>

namespace fsdp::tooling {

/// The first inf or nan of the training state over all ranks, in unit
/// order, then role order (of `roles`, a subset of param, master, exp_avg,
/// exp_avg_sq), then flat element: "master of 'transformer.h.0.attn.
/// c_attn.weight' element 17 is nan"; "" when every value is finite. Each
/// rank reads its own buffers of those roles (ex.read) and the ranks agree
/// on the first by one MPI_Allreduce (MPI_MIN of a (unit, role, element)
/// key), so every rank returns the same text. Under pipeline parallelism
/// (a key names a unit of its own stage's program) the first stage with a
/// non-finite value is found first, its ranks find the first key, and the
/// text ("... (pipeline stage s)") travels to every rank. `rank` is the
/// world rank. Collective over MPI_COMM_WORLD.
std::string firstNonFiniteState(const fsdp::rt::Executor &ex, int rank,
                                const std::vector<std::string> &roles);

/// Every state role (param, master, exp_avg, exp_avg_sq).
std::vector<std::string> allStateRoles();

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_NONFINITE_H
