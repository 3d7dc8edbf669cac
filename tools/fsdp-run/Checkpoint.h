//===- Checkpoint.h - fsdp-run --save / --load of sharded training state --===//
//
// A checkpoint directory holds one raw little-endian file per rank,
// `rank<r>.bin`, with that rank's buffers of every unit (for each unit in
// schedule order: param, then master, exp_avg and exp_avg_sq when the
// schedule has them; shard_numel elements of the buffer's dtype (the unit's,
// or bf16/f16 for a mixed-precision param) each for layout "shard",
// padded_numel for layout "full" -- full buffers are written by every rank,
// each its own copy, so that loading is per rank and needs no broadcast),
// and `index.json` written by rank 0 last (nlohmann/json):
//
//   {"format": "fsdp-checkpoint", "version": 1, "world_size": N,
//    "strategy": "...", "grid": {"replicas": R, "shard_size": S}, "step": K,
//    "roles": ["param", "exp_avg", "exp_avg_sq"],
//    "units": [{"name", "dtype", "numel", "padded_numel", "shard_numel",
//               "layouts": {"param": "shard" | "full", ...},
//               "dtypes": {"param": "bf16", "master": "f32", ...},
//               "params": [{"fqn", "shape", "dtype", "offset", "numel"}]}],
//    "files": [{"rank": r, "path": "rank<r>.bin", "bytes": B,
//               "shards": {"<unit>": {"param": byte offset, ...}}}]}
//
// `step` is the number of optimizer steps taken; a resumed run continues at
// step K+1 (data and AdamW bias correction use the global step). Loading
// checks the grid and every role's layout and dtype besides the units (an
// index without "grid"/"layouts"/"dtypes" means R = 1, S = N, all "shard",
// every role in the unit dtype).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUN_CHECKPOINT_H
#define FSDP_RUN_CHECKPOINT_H

#include "fsdp/Interpreter.h"

#include <cstdint>
#include <string>

namespace fsdp::run {

/// Writes this rank's state (the `param`/`master`/`exp_avg`/`exp_avg_sq`
/// inputs resident on the executor's device, shard or full layout, read back
/// to the host) to dir/rank<r>.bin and, on rank 0 after a barrier,
/// dir/index.json for `step` completed steps. Collective: every rank must
/// call it. Throws fsdp::rt::Error on I/O errors.
void saveCheckpoint(const std::string &dir, const fsdp::rt::Executor &ex,
                    int64_t step, int rank);

/// Reads dir/index.json, checks it against the schedule (world size, grid,
/// units, dtypes, sizes, layouts, parameter FQNs, shapes and offsets, roles)
/// and writes this rank's buffers into the executor's state. Returns the
/// saved step count. Throws fsdp::rt::Error with a message naming the
/// mismatch.
int64_t loadCheckpoint(const std::string &dir, fsdp::rt::Executor &ex,
                       int rank);

} // namespace fsdp::run

#endif // FSDP_RUN_CHECKPOINT_H
