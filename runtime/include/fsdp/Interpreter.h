//===- Interpreter.h - Executes fsdp-schedule JSON programs ----*- C++ -*-===//
//
// fsdp::rt::Program loads a schedule (runtime/docs/schedule-format.md, version 1),
// validates it and runs one SPMD training step on this rank:
//
//   fsdp::rt::Program prog = fsdp::rt::Program::fromFile("step.json");
//   fsdp::rt::HostValues in = {{0, features}, {1, labels}, {2, {1.0}}, ...};
//   fsdp::rt::HostValues out = prog.run(in);   // keyed by output buffer id
//
// Host values are row-major element values stored as double whatever the
// buffer's dtype (f32 <-> double and i32 <-> double are exact; i64 is exact up
// to 2^53; a bf16/f16 input is rounded to f32 and then to the 2-byte dtype,
// so that it equals nn.cast of the f32 value; their outputs widen exactly). Errors (bad file, bad schedule, bad input, a kernel error such as
// a label out of range) throw fsdp::rt::Error with a message naming the file,
// instruction index and source location. Collectives use the C API
// (runtime.h), so without MPI a world_size 1 schedule runs in-process.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INTERPRETER_H
#define FSDP_INTERPRETER_H

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp::rt {

/// Every error the interpreter reports.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Buffer element types. BF16 and F16 are 2-byte storage dtypes ("Mixed
/// precision"): nn ops on them compute in f32 (Half.h for the conversions).
enum class DType { F32, F64, I32, I64, BF16, F16 };
/// "f32", "f64", "i32", "i64", "bf16", "f16".
const char *dtypeName(DType t);
/// 2, 4 or 8 bytes.
int64_t dtypeSize(DType t);
/// f32, f64, bf16 or f16.
bool isFloatDType(DType t);
/// bf16 or f16 (2-byte floats).
bool isHalfDType(DType t);

/// One entry of "buffers". `rootId`/`rootOffset` resolve chains of views to
/// the allocated buffer (elements); for a non-view rootId == id, offset 0.
struct BufferDesc {
  int64_t id = -1;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numel = 1;
  int64_t bytes = 0;
  std::string cls;
  int64_t viewOf = -1;
  int64_t offset = 0;
  int64_t rootId = -1;
  int64_t rootOffset = 0;
  /// "arena_offset" (bytes into the planned arena), -1 when absent.
  int64_t arenaOffset = -1;
};

/// One parameter inside a unit's flat buffer ("units[].params[]").
struct ParamDesc {
  std::string fqn;
  std::vector<int64_t> shape;
  int64_t offset = 0; ///< elements into the unpadded flat buffer
  int64_t numel = 0;
  std::string init;   ///< "zeros", "ones", "uniform(a)", "normal(s)"
  bool trainable = true;
};

/// One FSDP unit (FlatParameter): `paddedNumel` = shardNumel * S, S the
/// grid's shard_size (the world size unless the schedule says otherwise).
struct UnitDesc {
  std::string name;
  DType dtype = DType::F32;
  int64_t numel = 0, paddedNumel = 0, shardNumel = 0;
  std::vector<ParamDesc> params;
};

/// The "optimizer" section; ops without explicit attrs use these values.
struct OptimizerDesc {
  std::string kind = "adamw";
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0;
};

/// One entry of "inputs" / "outputs".
struct IoDesc {
  int64_t buffer = -1;
  std::string role;
  std::string unit;                 ///< param / master / exp_avg / exp_avg_sq
  std::string fqn;                  ///< unsharded param input / grad output
  std::vector<int64_t> globalShape; ///< for data inputs (may be empty)
  /// Unit roles: "shard" (shard_numel elements, this rank's shard at its
  /// index in the shard group) or "full" (the padded flat buffer,
  /// replicated); "shard" when absent.
  std::string layout = "shard";
};

/// Process groups of the grid R x S ("Sharding strategies"): world (N
/// ranks), shard (the S ranks of one replica), replicate (the R ranks with
/// the same shard index).
enum class Group { World, Shard, Replicate };
/// "world", "shard", "replicate".
const char *groupName(Group g);

enum class OpKind {
  Constant, Linear, Matmul, Add, Mul, Relu, ReluGrad, Gelu, GeluGrad,
  ReduceSum, Broadcast, CrossEntropy, CrossEntropyGrad, SgdUpdate,
  AdamwUpdate, AllGather, ReduceScatter, Free, ParamView, Wait, Flatten,
  AllReduce, LocalShard, // "Sharding strategies"
  Pack, Unpack,          // buckets: copy units' flat buffers into / out of one
  // Transformer ops (runtime/docs/schedule-format.md, "Transformer ops").
  Embedding, EmbeddingGrad, PositionEmbedding, PositionEmbeddingGrad,
  LayerNorm, LayerNormGrad, RmsNorm, RmsNormGrad, Rope, Attention,
  AttentionGrad, Silu, SiluGrad, Split, Concat, ZerosLike,
  Cast, // "Mixed precision"
  MicroBatch // gradient accumulation: rows [index·m, (index+1)·m) of the batch
};

/// One parsed instruction with its attributes decoded.
struct Instruction {
  OpKind kind = OpKind::Constant;
  std::string op;  ///< the op name as written
  std::string loc; ///< "file:line:col" or ""
  std::vector<int64_t> operands, results, frees;
  double value = 0.0;                            ///< arith.constant
  bool transA = false, transB = false;           ///< nn.matmul
  bool approxTanh = false;                       ///< nn.gelu(_grad)
  std::vector<int64_t> axes;                     ///< reduce_sum / broadcast
  std::vector<int64_t> offsets;                  ///< fsdp.flatten
  bool average = true;                           ///< reduce_scatter/all_reduce
  Group group = Group::Shard;                    ///< collectives, local_shard
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weightDecay = 0; ///< updates
                                                 ///< (eps: also the norms')
  bool transposeWeight = false;                  ///< nn.linear: w is [K, N]
  int64_t numEmbeddings = 0;                     ///< nn.embedding_grad
  int64_t numPositions = 0;                      ///< nn.position_embedding_grad
  int64_t headDim = 0;                           ///< nn.rope
  double theta = 0;                              ///< nn.rope
  bool inverse = false;                          ///< nn.rope
  int64_t numHeads = 0, numKvHeads = 0;          ///< nn.attention(_grad)
  int64_t axis = 0;                              ///< split / concat (as given)
  std::vector<int64_t> sizes;                    ///< nn.split
  int64_t index = 0, count = 1;                  ///< nn.micro_batch
  int64_t blocks = 1;                            ///< fsdp.pack / fsdp.unpack
};

/// Buffer id -> element values (row-major, as double).
using HostValues = std::map<int64_t, std::vector<double>>;

/// A loaded, validated schedule. Copyable; run() is not thread-safe.
class Program {
public:
  /// Reads and validates `path`. With checkWorldSize, the file's world_size
  /// must equal fsdp_world_size() (the MPI world, or 1 without MPI).
  static Program fromFile(const std::string &path, bool checkWorldSize = true);
  /// Same for a JSON text; `name` is used in messages.
  static Program fromString(const std::string &text, bool checkWorldSize = true,
                            const std::string &name = "<schedule>");

  /// Runs one step: sets the runtime's grid to this schedule's shard_size
  /// (fsdp_set_grid, collective on the first run), allocates and fills every
  /// input buffer from `inputs` (with a memory plan: binds it to its slot of
  /// the arena, see usesArena())
  /// (each must be present with exactly numel values), executes the
  /// instructions, returns the values of every output buffer, and frees all
  /// buffers. Throws Error on any failure (buffers are released).
  HostValues run(const HostValues &inputs);
  /// The same, writing each output into `outputs[buffer]`: a vector already
  /// there is resized and overwritten in place, so a caller that keeps
  /// `outputs` across steps allocates no new memory per step; other entries
  /// are left as they are.
  void run(const HostValues &inputs, HostValues &outputs);

  /// Non-throwing variants for callers built with -fno-exceptions (LLVM
  /// style): return false and set `error` to the message instead of throwing.
  static bool tryFromFile(const std::string &path, Program &out,
                          std::string &error, bool checkWorldSize = true);
  static bool tryFromString(const std::string &text, Program &out,
                            std::string &error, bool checkWorldSize = true,
                            const std::string &name = "<schedule>");
  bool tryRun(const HostValues &inputs, HostValues &outputs,
              std::string &error);

  /// Peak bytes allocated through fsdp_alloc during the last run(), above
  /// the bytes that were live when it started.
  int64_t lastPeakBytes() const { return lastPeak; }

  /// True when the schedule has a `memory_plan` with `arena_bytes` and every
  /// owned (non-view) buffer has an `arena_offset`: run() then allocates one
  /// arena (fsdp_arena_alloc, on the first run, shared by copies of this
  /// Program and reused by every later run) and binds each buffer to
  /// base + arena_offset instead of allocating it. Binding a buffer whose
  /// byte range overlaps a live one is an error naming both.
  bool usesArena() const { return arenaPlanned; }
  /// memory_plan.arena_bytes (0 without a usable plan).
  int64_t plannedArenaBytes() const { return arenaPlanned ? arenaSize : 0; }
  /// Bytes of the arena actually allocated (0 before the first run or
  /// without a plan).
  int64_t arenaBytes() const { return arena ? arenaSize : 0; }

  const std::string &name() const { return sourceName; }
  int64_t worldSize() const { return worldSizeValue; }
  int64_t globalBatch() const { return globalBatchValue; }
  const std::string &function() const { return functionName; }
  const OptimizerDesc &optimizer() const { return optimizerDesc; }
  /// "strategy" (default "full-shard") and "grid" (default R = 1, S = N).
  const std::string &strategy() const { return strategyName; }
  int64_t replicas() const { return replicasValue; }
  int64_t shardSize() const { return shardSizeValue; }
  /// Ranks in `g` under the schedule's grid: N, S or R.
  int64_t groupSize(Group g) const;
  /// Whether instruction `in` writes every element of its results (their
  /// memory is then not zero-filled before it runs).
  bool overwritesResults(const Instruction &in) const;
  const std::vector<UnitDesc> &units() const { return unitList; }
  const std::map<int64_t, BufferDesc> &buffers() const { return bufferMap; }
  const std::vector<IoDesc> &inputs() const { return inputList; }
  const std::vector<IoDesc> &outputs() const { return outputList; }
  const std::vector<Instruction> &instructions() const { return program; }
  /// The buffer `id`; throws Error if absent.
  const BufferDesc &buffer(int64_t id) const;
  /// The unit called `name`, or nullptr.
  const UnitDesc *findUnit(const std::string &name) const;
  /// FNV-1a hash of the schedule's collectives in program order (kind,
  /// group, reduction, dtype and element counts): what every rank must agree
  /// on for SPMD execution to match collectives up.
  uint64_t collectiveFingerprint() const;
  /// Number of classes C of the first nn.cross_entropy (last dim of its
  /// logits), or -1 if there is none. Used to synthesise labels.
  int64_t numClasses() const;

private:
  /// Throws Error on every rank unless all ranks' collectiveFingerprint()
  /// agree (MPI_Allgather; once per Program, on its first run).
  void checkSameCollectivesOnAllRanks();
  bool collectivesChecked = false;
  void parse(const std::string &text, bool checkWorldSize);
  void validateInstruction(const Instruction &inst, size_t index) const;
  std::string where(size_t index) const;

  std::string sourceName;
  std::string functionName;
  int64_t worldSizeValue = 1;
  int64_t globalBatchValue = 0;
  OptimizerDesc optimizerDesc;
  std::string strategyName = "full-shard";
  int64_t replicasValue = 1, shardSizeValue = 1;
  std::vector<UnitDesc> unitList;
  std::map<int64_t, BufferDesc> bufferMap;
  std::vector<IoDesc> inputList, outputList;
  std::vector<Instruction> program;
  int64_t lastPeak = 0;
  bool arenaPlanned = false;
  int64_t arenaSize = 0, arenaAlignment = 64;
  std::shared_ptr<void> arena; ///< fsdp_arena_alloc'd on the first run()
};

} // namespace fsdp::rt

#endif // FSDP_INTERPRETER_H
