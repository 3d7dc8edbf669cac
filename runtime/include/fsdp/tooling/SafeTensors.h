//===- SafeTensors.h - Hugging Face weights in and out of fsdp-run --------===//
//
// The safetensors format (https://huggingface.co/docs/safetensors, "Format"):
// an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {str: str}?, "<name>": {"dtype": "F32", "shape": [..],
//    "data_offsets": [begin, end]}, ...}
// (offsets in bytes into the data that follows the header), then the raw
// little-endian, row-major tensor bytes. A sharded checkpoint (how 8B+ models
// ship) is a directory with `model.safetensors.index.json`,
//   {"metadata": {...}, "weight_map": {"<name>": "<file>.safetensors"}},
// beside its shard files. The header is parsed with nlohmann/json; the data
// are read with positioned reads (pread) of only the byte ranges a rank
// needs, so loading never holds a whole tensor, let alone the model, in one
// rank's memory.
//
// fsdp-run --init-from fills every unit's param (and master) state from such
// a checkpoint; --export writes the trained parameters as one file in the
// same layout (names = the schedule's FQNs = Hugging Face's state_dict keys).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_SAFETENSORS_H
#define FSDP_TOOLING_SAFETENSORS_H

#include "fsdp/Executor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fsdp::tooling {

/// One tensor of a safetensors archive.
struct TensorEntry {
  std::string name;
  std::string file;  ///< the .safetensors file holding it
  std::string dtype; ///< "F64", "F32", "BF16", "F16" (others: error on read)
  std::vector<int64_t> shape;
  int64_t numel = 0;
  uint64_t fileOffset = 0; ///< absolute byte offset of element 0 in `file`
  uint64_t bytes = 0;
};

/// A safetensors file, or a directory with model.safetensors.index.json (or
/// a single model.safetensors). Opening parses and checks every header; the
/// tensor data are read on demand.
class SafeTensorsArchive {
public:
  /// Throws fsdp::Error naming the file for: a missing path, a file
  /// shorter than its header, a header length beyond the file or over
  /// 100 MB, a header that is not a JSON object, an entry without a known
  /// dtype, a valid shape or data_offsets, a byte size that is not
  /// numel × element size, a range beyond the data, overlapping ranges; an
  /// index whose weight_map names a missing file or a tensor its file lacks.
  static SafeTensorsArchive open(const std::string &path);

  /// The tensor `name`, or nullptr.
  const TensorEntry *find(const std::string &name) const;
  const std::map<std::string, TensorEntry> &tensors() const { return entries; }
  const std::string &path() const { return root; }

  /// Elements [first, first + count) of `t` (row-major), widened to double
  /// (bf16/f16 exactly, through f32). Reads in chunks of at most 1 MiB.
  /// Throws fsdp::Error for an unsupported dtype or a short read.
  void read(const TensorEntry &t, int64_t first, int64_t count,
            double *out) const;
  /// The element runs (first, count) of `t`, one after another into `out`
  /// (the sum of the counts elements), with one open of the file: a
  /// tensor-parallel slice is one run per piece of its split dimension.
  /// Throws as read().
  void readRuns(const TensorEntry &t,
                const std::vector<std::pair<int64_t, int64_t>> &runs,
                double *out) const;

private:
  std::string root;
  std::map<std::string, TensorEntry> entries;
};

/// Writes every unit's `param` (for units with an f32 `master`, the master)
/// and nothing else from the executor's device state into the state's
/// shards. Under tensor parallelism the archive holds the global tensors
/// (Hugging Face's shapes) and each rank reads the elements of its own
/// slice (the schedule's tensor_slice: ParamDesc::globalIndex). Names: the
/// schedule's FQNs; a checkpoint name without the model's base prefix
/// ("transformer." for GPT-2, "model." for Llama, as in the original GPT-2
/// release) matches too. GPT-2's causal-mask buffers
/// (`*.attn.bias`, `*.attn.masked_bias`) and rotary `*.rotary_emb.inv_freq`
/// are not parameters and are skipped. Every rank checks the whole archive
/// against the schedule and reads only the element ranges of its shards.
/// Under pipeline parallelism (`rank` is the world rank) every rank checks
/// the archive against every stage's parameters and reads its own stage's
/// (collective over MPI_COMM_WORLD). Throws fsdp::Error naming the tensor
/// and the file for a missing tensor, an unknown extra tensor, a shape
/// mismatch or an unsupported dtype.
void initFromSafeTensors(const SafeTensorsArchive &archive,
                         fsdp::rt::Executor &ex, int rank);

/// Writes the full unsharded parameters (the f32 master where a unit has
/// one, else the param buffer) as one safetensors file at `path`: F64 for
/// f64 units, BF16/F16 for half params without a master, F32 otherwise.
/// Rank 0 writes the header into `path`.partial and sizes the file; then
/// every rank of the first replica writes the byte ranges of its own shards
/// (positioned writes, so no rank gathers the model), fsyncs, and rank 0
/// renames the file into place once every rank succeeded. Collective over
/// MPI_COMM_WORLD. Under tensor parallelism every tensor is written whole
/// (its global shape): each tensor-parallel rank of the first replica
/// writes the global element runs of its slices, a parameter replicated in
/// the tensor-parallel group is written by tensor-parallel rank 0. Under
/// pipeline parallelism (`rank` is the world rank) the header holds every
/// stage's parameters (stage order) and each stage's ranks write their own.
/// `step` is recorded in __metadata__. Throws
/// fsdp::Error on any rank's I/O error (all ranks throw).
void exportSafeTensors(const std::string &path, const fsdp::rt::Executor &ex,
                       int64_t step, int rank);

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_SAFETENSORS_H
