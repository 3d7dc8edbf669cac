//===- Checkpoint.h - fsdp-run --save / --load of sharded training state --===//
//
// A checkpoint is a directory (runtime/docs/checkpoints.md has the format):
// `rank<r>.bin`, the raw little-endian state buffers of each rank that holds
// a written copy (the first replica's shards; rank 0's full buffers), and
// `index.json`, which maps every (FQN, role) to the element ranges each file
// holds -- the idea of torch.distributed.checkpoint's metadata, in our own
// format -- plus the optimizer step, what the data stream depends on and the
// optimizer hyper-parameters, and a CRC-32 and size per file.
//
// Because the index speaks of FQN element ranges, not of shards, --load
// reshards: any saved world size, strategy, grid, tensor-parallel degree
// (version 3: a range of a tensor-parallel slice says which slice), pipeline
// split (each stage's ranks write their stage's FQNs into the one directory;
// grid.pipeline_stages and each tensor's stage say which), wrap policy,
// bucket layout or unit dtype loads into any schedule of the same model;
// each rank reads
// only the byte ranges it needs. Saves are atomic (Checkpoint.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_CHECKPOINT_H
#define FSDP_TOOLING_CHECKPOINT_H

#include "fsdp/Executor.h"

#include <cstdint>
#include <string>

namespace fsdp::tooling {

/// What a resumed run must reproduce besides the state: its data stream
/// (a function of the seed, the data file and order, and the global step)
/// and the optimizer's hyper-parameters (from the schedule).
struct RunMeta {
  uint64_t seed = 0;
  std::string data;      ///< --data path ("" = synthetic)
  std::string dataOrder; ///< "random" or "sequential"
  /// The run's total optimizer steps a schedule's total_steps input got
  /// (0: the schedule has none; not recorded).
  int64_t totalSteps = 0;
  /// The --data file's content digest (InputDigest.h: SHA-256 over its
  /// 16 MiB blocks' SHA-256), "" for synthetic data or a checkpoint saved
  /// before it was recorded.
  std::string dataSha256;
  /// Steps whose update was skipped (a non-finite gradient norm): the
  /// optimizer step of global step s is s − skippedSteps.
  int64_t skippedSteps = 0;
  /// The dynamic loss scale after the saved step and its clean steps since
  /// the last change (torch.amp.GradScaler's scale and _growth_tracker);
  /// lossScale 0: the schedule has none; not recorded.
  double lossScale = 0;
  int64_t growthTracker = 0;
};

/// Writes the executor's state as checkpoint `dir` after `step` optimizer
/// steps. Every rank writes into `dir`.partial; rank 0 writes the index
/// last, fsyncs, and swaps the directory into place (renameat2
/// RENAME_EXCHANGE, so the previous checkpoint stays whole until the new one
/// is) only after every rank succeeded. `dir` must not exist, be empty, or
/// be a checkpoint. `rank` is the world rank (under pipeline parallelism,
/// each stage's rank 0 describes its stage's part of the index and world
/// rank 0 merges them). Collective over MPI_COMM_WORLD. Throws fsdp::Error
/// on any rank's failure (every rank throws; the partial directory is
/// removed).
void saveCheckpoint(const std::string &dir, const fsdp::rt::Executor &ex,
                    int64_t step, int rank, const RunMeta &meta);

/// The saved step and run metadata of a loaded checkpoint.
struct LoadedCheckpoint {
  int64_t step = 0;
  bool hasMeta = false; ///< version 1 indexes record no RunMeta
  RunMeta meta;
};

/// Reads dir/index.json (format version 3, 2 or 1) and, whatever the saved
/// world size, grid, tensor-parallel degree or layout, checks that it holds
/// this schedule's model (every parameter FQN with its global shape, every
/// optimizer-state role the schedule has, no extra FQN), verifies the size and
/// CRC-32 of every file this rank reads, and writes this rank's buffers:
/// `param` and `master` from the saved master if there is one, else the saved
/// param, converted to the buffer dtype; moments from the saved moments. Throws
/// fsdp::Error naming the FQN, role, shape or file that does not match.
/// Under pipeline parallelism `rank` is the world rank, the rank loads its
/// stage's units, and "no extra FQN" is judged against every stage's
/// (collective over MPI_COMM_WORLD).
LoadedCheckpoint loadCheckpoint(const std::string &dir, fsdp::rt::Executor &ex,
                                int rank);

/// Parses the text of an index.json (version 1, 2 or 3) as --load does first,
/// checking every field's type and every range's file and bounds, with
/// file paths relative to `dir`; returns the saved step. Throws
/// fsdp::Error naming what is malformed. (The fuzz target's entry.)
int64_t checkCheckpointIndex(const std::string &text, const std::string &dir);

/// Throws fsdp::Error unless `dir` can become a checkpoint: absent,
/// an empty directory, or a directory with an fsdp-checkpoint index.json
/// (a save replaces a directory, so it must never be someone's data). With
/// `periodic` (--save-every), `dir` is a root of step_<step> checkpoints
/// and may hold only those (and their .partial leftovers).
void checkSaveDir(const std::string &dir, bool periodic);

/// root/step_<step, 8 digits>: where --save-every puts the checkpoint of
/// `step`.
std::string periodicCheckpointDir(const std::string &root, int64_t step);

/// Removes all but the newest `keep` step_* checkpoints under `root` (call
/// on one rank, after a save succeeded).
void pruneCheckpoints(const std::string &root, int64_t keep);

/// On rank 0, warns on stderr when a resumed run reads other data than the
/// checkpoint's run (`saved`), naming both files: another content digest,
/// synthetic data against a file, or (a checkpoint without a digest)
/// another path.
void warnIfOtherData(const RunMeta &saved, const RunMeta &now, int rank);

/// What --load DIR names: DIR if it holds an index.json, else the newest
/// step_* checkpoint under DIR that does (a --save-every root). Throws
/// fsdp::Error if there is neither.
std::string resolveCheckpoint(const std::string &dir);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_CHECKPOINT_H
