//===- Preflight.h - fsdp-run's checks before step 1 -----------*- C++ -*-===//
//
// What fails fast, before the device is set up and hours are spent
// training: ranks started with different work, output paths that cannot be
// written, a --collectives that the --device cannot use.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_PREFLIGHT_H
#define FSDP_TOOLING_PREFLIGHT_H

#include "fsdp/schedule/Program.h"
#include "fsdp/tooling/Options.h"

#include <string>

namespace fsdp::tooling {

/// Fails before any training if an output path cannot be written, so that a
/// long run is not lost at its end: the --dump-params file must be creatable
/// (its directory exists and is writable), the --save directory creatable;
/// --export and --dump-params must name neither a file this run reads (the
/// schedule or compiled step, --data, --init-from, a file of the --load
/// checkpoint) nor each other, which the run would overwrite at its end.
void checkOutputPaths(const Options &opt);

/// What the ranks agreed to read.
struct AgreedInputs {
  /// The --data file's content digest (InputDigest.h; "" without --data),
  /// which a checkpoint records for the resume warning.
  std::string dataSha256;
};

/// Throws on every rank unless every rank was started with the same work
/// (an MPMD launch `-np 1 fsdp-run s.json --steps 3 : -np 1 ... --steps 5`
/// would otherwise hang after step 3), naming the first option that
/// differs and both ranks' values. The files a rank reads are compared by
/// content (fileDigests: the --data file, every --init-from file, the
/// --load checkpoint's index.json, which holds its step and every file's
/// CRC-32), not by path, so node-local copies agree; the output paths
/// (--save, --export, --dump-params) by their resolved absolute path.
/// Collective over MPI_COMM_WORLD (also at world size 1, for the digests).
AgreedInputs checkSameWorkOnAllRanks(const Options &o);

/// Throws on every rank of a node, before the device allocates anything,
/// when the memory its ranks' plans need together exceeds the node's
/// memory on the cpu device: each rank's arena (memory_plan.arena_bytes;
/// with --alloc per-buffer or no arena its peak_bytes), summed over the
/// ranks of the node (MPI_COMM_TYPE_SHARED), against the physical memory
/// (sysconf(_SC_PHYS_PAGES) x the page size) or $FSDP_HOST_MEMORY_BYTES
/// (bytes, for a node whose usable memory is less: a container's limit).
/// Each rank's allocation alone may succeed (Linux commits memory as it is
/// touched), so without this the ranks would be killed mid-step by the
/// kernel's out-of-memory killer. The plan's bytes are a lower bound of
/// what the run uses, so a run that fits is never refused. Collective over
/// MPI_COMM_WORLD; nothing on other devices (their allocator says
/// out of memory itself).
void checkNodeMemory(const fsdp::schedule::Program &p, const Options &opt);

/// The device options of --device and --collectives. Throws for nccl on a
/// non-cuda device.
fsdp_collectives collectivesOf(const Options &opt);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_PREFLIGHT_H
