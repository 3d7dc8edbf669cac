//===- Data.h - fsdp-run's deterministic parameters and training data -----===//
//
// Counter-based random numbers (the same on every rank and world size),
// parameter initialisation of one rank's shard, and the DataSource that fills
// a step's data inputs: synthetic features/labels/tokens, a CSV file of
// features and labels, a text file read as bytes or a .bin file of uint16
// token ids for language models (runtime/docs/schedule-format.md, "Data roles
// for language models" and "Runtime decisions").
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_DATA_H
#define FSDP_TOOLING_DATA_H

#include "fsdp/Executor.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace fsdp::tooling {

/// splitmix64 (Steele, Lea & Flood, OOPSLA 2014): a bijective 64-bit mixer.
uint64_t splitmix64(uint64_t x);
/// FNV-1a 64-bit hash of a string (the parameter FQN).
uint64_t fnv1a(const std::string &s);
/// Hash of a tuple of integers: h = splitmix64(h ^ v) folded left.
uint64_t hashKey(std::initializer_list<uint64_t> vals);
/// Uniform in the open interval (0, 1) from the top 53 bits.
double uniform01(uint64_t h);
/// Standard normal by Box-Muller from two hashes derived from h, with the
/// host's libm (the synthetic data; parameters use init::normal01 of
/// fsdp/InitValues.h, which needs no libm).
double normal01(uint64_t h);

/// Shard `shardIndex` [shard_numel] of `unit` (a rank's index in the shard
/// group, r mod S): flat element f of the unit is in it when f in
/// [i·shard_numel, (i+1)·shard_numel); element j of parameter `fqn` is
/// the value of its init spec (fsdp/InitSpec.h) for (seed, fqn, j)
/// (fsdp/InitValues.h, init::initValue); padding and gaps are zero. Under
/// tensor parallelism (tensor-parallel rank `tpRank` of `tp`) j is the
/// element's index in the global parameter (ParamDesc::globalIndex), so that
/// every rank holds its slice of the tensor one rank initialises. On the
/// host, one thread: for tests and tools (fsdp-run initialises on the
/// device, initUnitOnDevice). Throws fsdp::Error for a spec that does not
/// parse.
std::vector<double> initShard(const fsdp::schedule::UnitDesc &u, uint64_t seed,
                              int64_t shardIndex, int64_t tpRank = 0,
                              int64_t tp = 1);
/// The whole padded flat buffer [padded_numel] of `unit` (layout "full"),
/// the same values as the shards of initShard side by side.
std::vector<double> initFull(const fsdp::schedule::UnitDesc &u, uint64_t seed,
                             int64_t tpRank = 0, int64_t tp = 1);

/// initShard(u, seed, shardIndex) (or initFull for shardIndex < 0) written
/// where the state lives: `param` in `paramDtype` and, when not null,
/// `master` in `masterDtype` (each [shard_numel] or [padded_numel] elements
/// of device memory on the device of stream `s`), both from one evaluation
/// per element: zero-filled, then one fsdp_init_values per parameter
/// overlapping the range (`threads` host threads on the cpu driver, <= 0:
/// all; the bits do not depend on it), then the stream synchronised. The
/// values equal initShard's rounded to each dtype (bf16/f16 through f32).
/// Under tensor parallelism, as initShard, each run of local elements
/// contiguous in the global parameter is one fsdp_init_values.
/// Throws fsdp::Error for a spec that does not parse or a driver error.
void initUnitOnDevice(fsdp_stream s, const fsdp::schedule::UnitDesc &u,
                      uint64_t seed, int64_t shardIndex, void *param,
                      fsdp_dtype paramDtype, void *master,
                      fsdp_dtype masterDtype, int threads = 0,
                      int64_t tpRank = 0, int64_t tp = 1);

/// How token windows are drawn from a token file.
enum class DataOrder {
  /// Window g of step s starts at hashKey(seed, 7, s, g) mod (n − T).
  Random,
  /// Window g of step s reads tokens [((s−1)·B + g)·T, … + T + 1) mod n
  /// (B the global batch): every token once per epoch, in file order.
  Sequential,
};

/// Fills the data inputs (roles features, labels, tokens, targets) of one
/// step. With an empty `dataFile` the data are synthetic; otherwise the file
/// is a CSV of features and labels when the schedule has a `features` input;
/// when it has `tokens`, a `.bin` file is read as little-endian uint16 token
/// ids (the nanoGPT / llm.c convention; memory-mapped) and any other file as
/// bytes (vocabulary 256). Windows of T+1 tokens give tokens = w[0, T) and
/// targets = w[1, T]; `order` picks where they start. Throws fsdp::Error
/// for an unreadable or too short file, a .bin of odd size, or a token id
/// >= the model's vocabulary (naming its position).
class DataSource {
public:
  DataSource(const fsdp::schedule::Program &p, const std::string &dataFile,
             uint64_t seed, int rank, DataOrder order = DataOrder::Random);
  ~DataSource();
  DataSource(const DataSource &) = delete;
  DataSource &operator=(const DataSource &) = delete;

  /// Sets in[buffer] of every data input for the 1-based global `step`.
  void fill(int64_t step, fsdp::rt::HostValues &in) const;

  /// Samples (sequences) per optimizer step over all ranks.
  int64_t globalBatch = 0;
  /// Tokens per optimizer step over all ranks (global batch × T), or 0 for
  /// schedules without a `tokens` input.
  int64_t globalTokens = 0;

private:
  struct Slot {
    int64_t buffer;
    std::string role;
    int64_t local, perSample, firstRow;
  };

  void featureRow(int64_t step, int64_t g, double *out) const;
  size_t csvRow(int64_t step, int64_t g) const;
  int64_t needClasses() const;
  int64_t token(int64_t step, int64_t g, int64_t t) const;
  int64_t mapToken(int64_t tok) const;
  int64_t windowOffset(int64_t step, int64_t g) const;
  int64_t tokenAt(int64_t i) const;
  void mapTokens(const std::string &path);
  void fillRow(int64_t step, const Slot &s, int64_t g, double *out) const;

  const fsdp::schedule::Program &prog;
  uint64_t seed;
  std::vector<Slot> slots;
  int featuresSlot = -1, tokensSlot = -1;
  /// The slot whose rows are windows of the token file: the tokens, or the
  /// targets alone (a pipeline's last stage reads no tokens).
  int windowSlot = -1;
  int64_t classes = -1;
  // CSV (features/labels schedules).
  std::vector<std::vector<double>> csvFeatures;
  std::vector<int64_t> csvLabels;
  // Token schedules: the text file's bytes, or the mapped .bin file.
  DataOrder order;
  std::string text;
  const uint16_t *ids = nullptr;
  size_t mappedBytes = 0;
  int64_t numTokens = 0;
};

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_DATA_H
