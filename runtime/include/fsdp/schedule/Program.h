//===- Program.h - a parsed, validated schedule ---------------------------===//
//
// fsdp::schedule::Program is the schedule of one SPMD training step
// (runtime/docs/schedule-format.md) as a plain value: its units, buffers,
// inputs, outputs and instructions, each instruction's attributes decoded
// by the op's attribute list (OpDefs) and checked by the op's rules, so that
// whoever runs it -- the executor or a compiled step -- meets data errors
// only. Parsing needs no device, MPI or MLIR:
//
//   fsdp::schedule::Program p = fsdp::schedule::Program::fromFile("s.json");
//   fsdp::schedule::StepPlan plan = fsdp::schedule::StepPlan::build(p, {});
//
// Errors throw fsdp::Error naming the file, the instruction index and its
// source location; the try* functions return the message instead, for
// callers built without exceptions (the compiler).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_PROGRAM_H
#define FSDP_SCHEDULE_PROGRAM_H

#include "fsdp/schedule/Error.h"
#include "fsdp/schedule/Format.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fsdp::schedule {

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
  /// "in_place_of": the buffer whose memory this one takes over when its
  /// instruction (an nn.add reading it, or a view of all of it, as operand
  /// 0, its last read) writes it element by element; -1 when absent.
  int64_t inPlaceOf = -1;
};

/// One parameter inside a unit's flat buffer ("units[].params[]").
struct ParamDesc {
  std::string fqn;
  std::vector<int64_t> shape;
  int64_t offset = 0; ///< elements into the unpadded flat buffer
  int64_t numel = 0;
  std::string init; ///< fsdp/InitSpec.h: "zeros", "normal(s)", ...
  bool trainable = true;
  /// Tensor parallelism ("tensor_slice"): the global parameter's shape, and
  /// its dimension `tpDim` (-1: replicated in the tensor-parallel group) cut
  /// into `tpBlocks` equal blocks, each into T pieces; tensor-parallel rank
  /// t holds piece t of every block (`shape` is that local slice).
  int64_t tpDim = -1, tpBlocks = 1;
  std::vector<int64_t> globalShape;

  /// The global element index (row-major in globalShape) of element
  /// `local` (row-major in shape) on tensor-parallel rank `tpRank` of
  /// `tp`; `local` itself when the parameter is replicated.
  int64_t globalIndex(int64_t local, int64_t tpRank, int64_t tp) const {
    if (tpDim < 0)
      return local;
    int64_t global = 0, rest = local, stride = 1;
    std::vector<int64_t> coord(shape.size());
    for (size_t k = shape.size(); k-- > 0;) {
      coord[k] = rest % shape[k];
      rest /= shape[k];
    }
    int64_t piece = shape[static_cast<size_t>(tpDim)] / tpBlocks;
    int64_t block = globalShape[static_cast<size_t>(tpDim)] / tpBlocks;
    int64_t &c = coord[static_cast<size_t>(tpDim)];
    c = (c / piece) * block + tpRank * piece + c % piece;
    (void)tp;
    for (size_t k = shape.size(); k-- > 0;) {
      global += coord[k] * stride;
      stride *= globalShape[k];
    }
    return global;
  }

  /// How many local elements from `local` on have consecutive global
  /// indices (a piece of the tensor-parallel dimension times the elements
  /// inside it); everything to the end when the parameter is replicated.
  int64_t contiguousRun(int64_t local) const {
    if (tpDim < 0)
      return numel - local;
    int64_t run = shape[static_cast<size_t>(tpDim)] / tpBlocks;
    for (size_t k = static_cast<size_t>(tpDim) + 1; k < shape.size(); ++k)
      run *= shape[k];
    return run - local % run;
  }
};

/// One FSDP unit (FlatParameter): `paddedNumel` = shardNumel * S, S the
/// grid's shard_size (the world size unless the schedule says otherwise).
struct UnitDesc {
  std::string name;
  DType dtype = DType::F32;
  int64_t numel = 0, paddedNumel = 0, shardNumel = 0;
  std::vector<ParamDesc> params;
};

/// The "optimizer" section; update ops without explicit attributes use
/// these values.
struct OptimizerDesc {
  std::string kind = kDefaultOptimizer;
  double lr = kDefaultLr, beta1 = kDefaultBeta1, beta2 = kDefaultBeta2,
         eps = kDefaultEps, weightDecay = kDefaultWeightDecay;
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
  /// Outputs: the input buffer this output is written into in place
  /// ("aliases", schedule version 2), or -1.
  int64_t aliases = -1;
};

/// A decoded attribute: a number, an integer, a flag, a list of integers or
/// one of an op's named choices (stored as the choice's index).
struct AttrValue {
  double number = 0;
  int64_t integer = 0;
  std::vector<int64_t> ints;
};

/// One parsed instruction. `attrs` holds every attribute of the op's
/// attribute list (OpDefs.h), decoded and with its default applied, so
/// that the accessors below cannot fail for an attribute the op declares.
struct Instruction {
  OpKind kind = OpKind::Constant;
  std::string op;  ///< the op name as written
  std::string loc; ///< "file:line:col" or ""
  std::vector<int64_t> operands, results, frees;
  std::vector<std::pair<std::string, AttrValue>> attrs;

  /// The attribute `name`; throws Error for one the op does not declare (a
  /// bug of the op's definition, not of the schedule).
  const AttrValue &attr(const char *name) const;
  double number(const char *name) const { return attr(name).number; }
  int64_t integer(const char *name) const { return attr(name).integer; }
  bool flag(const char *name) const { return attr(name).integer != 0; }
  const std::vector<int64_t> &ints(const char *name) const {
    return attr(name).ints;
  }
  /// The process group of a collective or fsdp.local_shard.
  Group group() const { return static_cast<Group>(integer("group")); }
  /// A reduction's "op" is "avg" (else "sum").
  bool average() const { return integer("op") == 0; }
};

/// A loaded, validated schedule. A plain value: copyable, no run state.
class Program {
public:
  /// Reads and validates `path`. With expectedWorldSize >= 1 the file's
  /// world_size must equal it (the ranks running: fsdp_world_size()).
  /// A pipeline-parallel document ("stages", one program per stage) yields
  /// the program of world rank `worldRank`'s stage (rank / (N / P), the
  /// stage outermost), whose world is its stage's N / P ranks.
  static Program fromFile(const std::string &path,
                          int64_t expectedWorldSize = 0, int64_t worldRank = 0);
  /// Same for a JSON text; `name` is used in messages.
  static Program fromString(const std::string &text,
                            int64_t expectedWorldSize = 0,
                            const std::string &name = "<schedule>",
                            int64_t worldRank = 0);
  /// Non-throwing variants for callers built with -fno-exceptions (LLVM
  /// style): return false and set `error` to the message instead.
  static bool tryFromFile(const std::string &path, Program &out,
                          std::string &error, int64_t expectedWorldSize = 0);
  static bool tryFromString(const std::string &text, Program &out,
                            std::string &error, int64_t expectedWorldSize = 0,
                            const std::string &name = "<schedule>");

  /// True when the schedule has a `memory_plan` with `arena_bytes` and every
  /// owned (non-view) buffer has an `arena_offset`: an executor in arena
  /// mode then allocates one arena and binds each buffer to
  /// base + arena_offset instead of allocating it.
  bool usesArena() const { return arenaPlanned; }
  /// memory_plan.arena_bytes (0 without a usable plan).
  int64_t plannedArenaBytes() const { return arenaPlanned ? arenaSize : 0; }
  /// memory_plan.arena_alignment (64 when absent).
  int64_t arenaAlignment() const { return arenaAlignmentValue; }
  /// memory_plan.peak_bytes and peak_bytes_with_scratch (-1 when absent).
  int64_t plannedPeakBytes() const { return plannedPeak; }
  int64_t plannedPeakBytesWithScratch() const { return plannedPeakScratch; }

  const std::string &name() const { return sourceName; }
  int64_t worldSize() const { return worldSizeValue; }
  int64_t globalBatch() const { return globalBatchValue; }
  const std::string &function() const { return functionName; }
  const OptimizerDesc &optimizer() const { return optimizerDesc; }
  /// "strategy" (default "full-shard") and "grid" (default R = 1, S = N).
  const std::string &strategy() const { return strategyName; }
  int64_t replicas() const { return replicasValue; }
  int64_t shardSize() const { return shardSizeValue; }
  /// The tensor-parallel degree T ("tensor_parallel", default 1).
  int64_t tensorParallel() const { return tensorParallelValue; }
  /// This world rank's tensor-parallel rank (r mod T), data-parallel rank
  /// (r / T) and shard index in its shard group ((r / T) mod S).
  int64_t tensorRank(int64_t r) const { return r % tensorParallelValue; }
  int64_t dataRank(int64_t r) const { return r / tensorParallelValue; }
  int64_t shardIndex(int64_t r) const { return dataRank(r) % shardSizeValue; }
  /// Ranks in `g` under the schedule's grid: N, S, R, T or P.
  int64_t groupSize(Group g) const;
  /// Pipeline parallelism ("pipeline"): the stages P (1 without), this
  /// program's stage s and the schedule's name ("" without). worldSize() is
  /// then the stage's ranks; the job runs on P times as many.
  int64_t pipelineStages() const { return pipelineStagesValue; }
  int64_t pipelineStage() const { return pipelineStageValue; }
  const std::string &pipelineSchedule() const { return pipelineScheduleName; }
  /// The pipeline's micro-batches m ("micro_batches"; 0 when absent), which
  /// a transfer's tag encodes: tag = (boundary value · m + micro-batch) · 2
  /// + (1 for a gradient).
  int64_t pipelineMicroBatches() const { return pipelineMicroBatchesValue; }
  /// Interleaved 1F1B's chunks v per rank ("chunks"; 1 when absent): its
  /// tags are the value above · v + (the sending virtual stage) / P.
  int64_t pipelineChunks() const { return pipelineChunksValue; }
  const std::vector<UnitDesc> &units() const { return unitList; }
  const std::map<int64_t, BufferDesc> &buffers() const { return bufferMap; }
  const std::vector<IoDesc> &inputs() const { return inputList; }
  const std::vector<IoDesc> &outputs() const { return outputList; }
  const std::vector<Instruction> &instructions() const { return program; }
  /// The buffer `id`; throws Error if absent.
  const BufferDesc &buffer(int64_t id) const;
  /// The unit called `name`, or nullptr.
  const UnitDesc *findUnit(const std::string &name) const;
  /// The input of `role` (param, master, exp_avg, exp_avg_sq) of unit
  /// `unit`, or nullptr.
  const IoDesc *findUnitInput(const std::string &role,
                              const std::string &unit) const;
  /// The output carried into input `inputBuffer` at the next step (same
  /// role, unit and layout), or nullptr.
  const IoDesc *carriedOutput(int64_t inputBuffer) const;
  /// FNV-1a hash of the schedule's collectives in program order (kind,
  /// group, reduction, dtype and element counts): what every rank must agree
  /// on for SPMD execution to match collectives up.
  uint64_t collectiveFingerprint() const;
  /// FNV-1a hash of the whole schedule (its JSON re-serialised, so every
  /// instruction and attribute, independent of the file's formatting).
  uint64_t scheduleFingerprint() const { return wholeFingerprint; }
  /// The same hash of the job's document: a pipeline's whole document (every
  /// stage's program, the stage layout), else scheduleFingerprint(). The
  /// ranks of every stage must agree on it.
  uint64_t jobFingerprint() const { return jobFingerprintValue; }
  /// Number of classes C of the first nn.cross_entropy (last dim of its
  /// logits; of a vocab-parallel one, that times the tensor-parallel size),
  /// or, on a pipeline stage without one, the rows of its token embedding
  /// (times T when vocab-parallel); -1 if neither. Used to synthesise labels
  /// and tokens.
  int64_t numClasses() const;
  /// "instruction #i 'op' (loc)" and "file: instruction #i 'op' (loc)" for
  /// messages.
  std::string instructionName(size_t index) const;
  std::string where(size_t index) const;

private:
  friend class Parser;
  void validateAliases() const;
  /// Each "in_place_of" names a whole buffer of the same dtype and size (at
  /// the same arena offset) that the defining nn.add reads as operand 0 and
  /// that nothing reads after it.
  void validateInPlace() const;

  std::string sourceName;
  std::string functionName;
  int64_t worldSizeValue = 1;
  int64_t globalBatchValue = 0;
  OptimizerDesc optimizerDesc;
  std::string strategyName = kStrategies[0];
  int64_t replicasValue = 1, shardSizeValue = 1, tensorParallelValue = 1;
  int64_t pipelineStagesValue = 1, pipelineStageValue = 0,
          pipelineMicroBatchesValue = 0, pipelineChunksValue = 1;
  std::string pipelineScheduleName;
  uint64_t wholeFingerprint = 0, jobFingerprintValue = 0;
  std::vector<UnitDesc> unitList;
  std::map<int64_t, BufferDesc> bufferMap;
  std::vector<IoDesc> inputList, outputList;
  std::vector<Instruction> program;
  bool arenaPlanned = false;
  int64_t arenaSize = 0, arenaAlignmentValue = 64, plannedPeak = -1,
          plannedPeakScratch = -1;
};

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_PROGRAM_H
