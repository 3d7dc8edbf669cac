//===- Interpreter.h - Executes fsdp-schedule JSON programs ----*- C++ -*-===//
//
// fsdp::rt::Program loads and validates a schedule
// (runtime/docs/schedule-format.md); fsdp::rt::Executor runs its steps on one
// device, SPMD on every rank, with the training state resident in device
// memory from initialisation to the end:
//
//   fsdp::rt::Device dev("cpu");                      // or "cuda", "cuda:1"
//   fsdp::rt::Program prog = fsdp::rt::Program::fromFile("step.json");
//   fsdp::rt::Executor ex(prog, dev.get());           // collective
//   ex.write(paramShardId, initialValues);            // once: the state
//   for (step...) { ex.write(tokensId, tokens); ex.write(stepId, {s});
//                   ex.step(); double loss = ex.readScalar(lossId); }
//
// The interpreter only decodes the schedule and calls the runtime's C API
// (runtime.h, kernels.h): the same code for every driver. Host values are
// row-major element values as double whatever the buffer's dtype (f32 <->
// double and i32 <-> double are exact; i64 up to 2^53; a value written into a
// bf16/f16 buffer is rounded to f32 and then to the 2-byte dtype, so that it
// equals nn.cast of the f32 value; reads widen exactly). Errors (bad file,
// bad schedule, bad input, a kernel's data error such as a label out of
// range) throw fsdp::rt::Error with a message naming the file, instruction
// index and source location.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INTERPRETER_H
#define FSDP_INTERPRETER_H

#include "fsdp/ScheduleFormat.h"
#include "fsdp/compiled.h"
#include "fsdp/runtime.h"

#include <atomic>
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
/// An Error that every rank detects alike, from data they exchanged (ranks
/// that disagree on the schedule or the options): one rank reporting it is
/// enough, and the others should let it (fsdp-run has rank 0 report, so
/// that the message is never lost to the abort of another rank).
class CollectiveError : public Error {
public:
  using Error::Error;
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
  std::string init; ///< fsdp/InitSpec.h: "zeros", "normal(s)", ...
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
  std::string kind = schedule::kDefaultOptimizer;
  double lr = schedule::kDefaultLr, beta1 = schedule::kDefaultBeta1,
         beta2 = schedule::kDefaultBeta2, eps = schedule::kDefaultEps,
         weightDecay = schedule::kDefaultWeightDecay;
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

/// An input of the training state (role param, master, exp_avg or
/// exp_avg_sq): resident in device memory across steps.
bool isStateRole(const std::string &role);

/// Process groups of the grid R x S ("Sharding strategies"): world (N
/// ranks), shard (the S ranks of one replica), replicate (the R ranks with
/// the same shard index).
enum class Group { World, Shard, Replicate };
/// "world", "shard", "replicate".
const char *groupName(Group g);

using OpKind = fsdp::schedule::OpKind;

/// One parsed instruction with its attributes decoded.
struct Instruction {
  OpKind kind = OpKind::Constant;
  std::string op;  ///< the op name as written
  std::string loc; ///< "file:line:col" or ""
  std::vector<int64_t> operands, results, frees;
  double value = 0.0;                  ///< arith.constant
  bool transA = false, transB = false; ///< nn.matmul
  bool approxTanh = false;             ///< nn.gelu(_grad)
  std::vector<int64_t> axes;           ///< reduce_sum / broadcast
  std::vector<int64_t> offsets;        ///< fsdp.flatten
  bool average = true;                 ///< reduce_scatter/all_reduce
  Group group = Group::Shard;          ///< collectives, local_shard
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0,
         weightDecay = 0;               ///< updates
                                        ///< (eps: also the norms')
  bool transposeWeight = false;         ///< nn.linear: w is [K, N]
  int64_t numEmbeddings = 0;            ///< nn.embedding_grad
  int64_t numPositions = 0;             ///< nn.position_embedding_grad
  int64_t headDim = 0;                  ///< nn.rope
  double theta = 0;                     ///< nn.rope
  bool inverse = false;                 ///< nn.rope
  int64_t numHeads = 0, numKvHeads = 0; ///< nn.attention(_grad)
  int64_t axis = 0;                     ///< split / concat (as given)
  std::vector<int64_t> sizes;           ///< nn.split
  int64_t index = 0, count = 1;         ///< nn.micro_batch
  int64_t blocks = 1;                   ///< fsdp.pack / fsdp.unpack
  /// nn.lr_schedule: "kind" (FSDP_LR_*), warmup_steps, decay_steps, min_lr
  /// (its base rate is `lr`); a second operand (a total_steps input) gives
  /// the decay steps at run time instead (decay_steps 0).
  int lrKind = 0;
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0;
  double maxNorm = 0; ///< nn.grad_norm: max_norm, 0 when absent
  /// Updates: [begin, end) flat elements with weight decay 0; `sharded`: the
  /// operands are this rank's shard of the shard group.
  std::vector<int64_t> noDecay;
  bool sharded = false;
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

  /// Runs one step in-process on a fresh "cpu" device (an Executor): writes
  /// every input from `inputs` (each must be present with exactly numel
  /// values), runs, and returns every output by buffer id. For tests and
  /// tools; training loops keep an Executor (state stays on the device).
  /// Throws Error on any failure.
  HostValues run(const HostValues &inputs);
  /// The same, writing each output into `outputs[buffer]` (resized and
  /// overwritten in place; other entries are left as they are).
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

  /// The schedule's buffers' peak bytes during the last run() (the
  /// Executor's bookkeeping, Executor::lastPeakBytes).
  int64_t lastPeakBytes() const { return lastPeak; }

  /// True when the schedule has a `memory_plan` with `arena_bytes` and every
  /// owned (non-view) buffer has an `arena_offset`: an Executor in arena
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
  /// Ranks in `g` under the schedule's grid: N, S or R.
  int64_t groupSize(Group g) const;
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
  /// FNV-1a hash of the schedule's collectives in program order (kind,
  /// group, reduction, dtype and element counts): what every rank must agree
  /// on for SPMD execution to match collectives up.
  uint64_t collectiveFingerprint() const;
  /// FNV-1a hash of the whole schedule (its JSON re-serialised, so every
  /// instruction and attribute, independent of the file's formatting).
  uint64_t scheduleFingerprint() const { return wholeFingerprint; }
  /// Number of classes C of the first nn.cross_entropy (last dim of its
  /// logits), or -1 if there is none. Used to synthesise labels.
  int64_t numClasses() const;

  /// Throws Error on every rank unless all ranks' collectiveFingerprint()
  /// agree, then unless their scheduleFingerprint() agree (a schedule that
  /// differs only in, say, a learning rate or a micro-batch count would
  /// run silently otherwise); the messages name both ranks' schedule files
  /// (MPI_Allgather over MPI_COMM_WORLD; skipped without MPI, on one rank,
  /// or for a schedule of another world size). Collective.
  void checkSameCollectivesOnAllRanks() const;
  /// "instruction #i 'op' (loc)" and "file: instruction #i 'op' (loc)" for
  /// messages.
  std::string instructionName(size_t index) const;
  std::string where(size_t index) const;
  /// The output carried into input `inputBuffer` at the next step (same
  /// role, unit and layout), or nullptr.
  const IoDesc *carriedOutput(int64_t inputBuffer) const;

private:
  void parse(const std::string &text, bool checkWorldSize);
  void validateInstruction(const Instruction &inst, size_t index) const;
  void validateAliases() const;

  std::string sourceName;
  std::string functionName;
  int64_t worldSizeValue = 1;
  int64_t globalBatchValue = 0;
  OptimizerDesc optimizerDesc;
  std::string strategyName = "full-shard";
  int64_t replicasValue = 1, shardSizeValue = 1;
  uint64_t wholeFingerprint = 0;
  std::vector<UnitDesc> unitList;
  std::map<int64_t, BufferDesc> bufferMap;
  std::vector<IoDesc> inputList, outputList;
  std::vector<Instruction> program;
  int64_t lastPeak = 0;
  bool arenaPlanned = false;
  int64_t arenaSize = 0, arenaAlignmentValue = 64, plannedPeak = -1,
          plannedPeakScratch = -1;
};

/// An owned device (fsdp_device_create / fsdp_device_destroy).
class Device {
public:
  /// Throws Error with the driver's message (unknown name, no GPU, ...).
  explicit Device(const std::string &name,
                  fsdp_collectives collectives = FSDP_COLLECTIVES_NATIVE);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  fsdp_device get() const { return dev; }

private:
  fsdp_device dev = nullptr;
};

/// Where an Executor puts the step's buffers.
enum class AllocMode {
  /// One arena of memory_plan.arena_bytes, every buffer at its planned
  /// offset (per buffer when the schedule has no usable plan).
  Arena,
  /// One fsdp_device_alloc per buffer when it becomes live, freed at its
  /// free: the allocator's statistics then measure the step
  /// (fsdp-run --alloc per-buffer, device_peak_bytes).
  PerBuffer
};

/// A compiled step (`fsdp-compile`'s STEP.so, fsdp/compiled.h), dlopen'ed.
/// Its symbols resolve against the process's runtime (fsdp-run exports the
/// C API), so the step's calls reach the same devices and channels.
class CompiledStep {
public:
  /// Loads `path` and checks it before any step: a file dlopen refuses (not
  /// a shared object, truncated), a missing fsdp_step or fsdp_step_describe,
  /// another ABI or schedule format version, and, with checkWorldSize,
  /// another world size than fsdp_world_size() are each an Error naming the
  /// file. The library stays loaded for the process's life (a compiled step
  /// may be bound to several Executors).
  static CompiledStep open(const std::string &path, bool checkWorldSize = true);
  /// The step's schedule (the descriptor's document, validated as a JSON
  /// schedule is; messages name `path`).
  const Program &program() const { return *prog; }
  const fsdp_step_descriptor &descriptor() const { return *desc; }
  fsdp_step_fn function() const { return fn; }
  const std::string &path() const { return file; }

private:
  std::string file;
  const fsdp_step_descriptor *desc = nullptr;
  fsdp_step_fn fn = nullptr;
  std::shared_ptr<Program> prog;
};

/// Runs the steps of a Program on one device. The state inputs (roles
/// param, master, exp_avg, exp_avg_sq) are resident: allocated once (in
/// arena mode at their arena slots, which the planner keeps live for the
/// whole step), written by the host with write(), and replaced at the end
/// of every step by the output carried into them (the same role, unit and
/// layout) -- in place when the output `aliases` the input (the update
/// writes the state where it is), else by a device-to-device copy. Other
/// inputs (data, step) are staged on the host by write() and copied to the
/// device when the next step binds them. Not thread-safe.
class Executor {
public:
  /// Creates the channels of the schedule's grid (world; shard: color r/S,
  /// key r mod S; replicate: color r mod S, key r/S), allocates the state
  /// (and the arena), zero-filled, and checks that every rank runs the same
  /// collectives. Collective over MPI_COMM_WORLD. Throws Error.
  Executor(const Program &program, fsdp_device device,
           AllocMode alloc = AllocMode::Arena);
  ~Executor();
  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;

  /// Host values for input `buffer`: a state input is written into device
  /// memory now; another input is staged for the next step(). `n` must be
  /// the buffer's numel.
  void write(int64_t buffer, const double *values, int64_t n);
  void write(int64_t buffer, const std::vector<double> &values) {
    write(buffer, values.data(), static_cast<int64_t>(values.size()));
  }
  /// Reads a state input (the current state) or an output of the last
  /// step (valid until the next step()) into `out` (resized to numel).
  void read(int64_t buffer, std::vector<double> &out) const;
  /// Element 0 of read(buffer).
  double readScalar(int64_t buffer) const;

  /// Runs one step: binds the inputs, executes every instruction, completes
  /// the collectives, carries the state outputs into the state, and waits
  /// for the device (a deferred kernel error surfaces here). Every input
  /// that is not state must have been written (once; it stays for later
  /// steps until written again). Throws Error.
  void step();

  /// Runs every later step() with `compiled`'s machine code instead of
  /// interpreting the instructions: the same inputs, state, outputs and
  /// errors. `compiled` must describe this Executor's program (it is
  /// compiled.program() or a copy) and outlive the Executor; needs arena
  /// mode with a complete memory plan. Throws Error.
  void useCompiledStep(const CompiledStep &compiled);
  bool isCompiled() const { return compiledFn != nullptr; }

  /// High-water mark of the bytes of the schedule's live buffers during the
  /// last step (the plan's bookkeeping: equals memory_plan.peak_bytes).
  int64_t lastPeakBytes() const { return lastPeak; }
  /// Bytes of the arena (0 in per-buffer mode).
  int64_t arenaBytes() const { return arenaSize; }
  bool usesArena() const { return arena != nullptr; }
  /// Carried state outputs written in place (aliases) / copied per step.
  int64_t inPlaceOutputs() const {
    return static_cast<int64_t>(aliasOf.size());
  }
  int64_t copiedOutputs() const { return static_cast<int64_t>(copies.size()); }
  fsdp_device device() const { return dev; }
  const Program &program() const { return prog; }
  /// The instruction step() is executing (its index), kStepEnd while it
  /// waits for the last collectives and stores the outputs, or kIdle
  /// outside step(). Safe to read from another thread (a watchdog).
  static constexpr int64_t kIdle = -1, kStepEnd = -2;
  int64_t currentInstruction() const {
    int64_t i = running.load(std::memory_order_relaxed);
    if (i == kCompiledStep) // the compiled step's own record
      return __atomic_load_n(&stepContext.instruction, __ATOMIC_RELAXED);
    return i;
  }

private:
  friend class Frame;
  struct Staged {
    std::vector<unsigned char> bytes;
  };
  void *stateAt(int64_t buffer) const;
  void init(AllocMode alloc);
  void compiledStep();
  /// The end of a step, interpreted or compiled: the carried outputs
  /// without `aliases` copied into the state, the stream synchronised (a
  /// deferred data error thrown), `peak` recorded.
  void finishStep(int64_t peak);
  static constexpr int64_t kCompiledStep = -3;
  void release();

  const Program &prog;
  fsdp_device dev;
  fsdp_stream compute;
  std::atomic<int64_t> running{kIdle};
  fsdp_channel world = nullptr, shard = nullptr, replicate = nullptr;
  char *arena = nullptr;
  void *arenaAlloc = nullptr;
  int64_t arenaSize = 0;
  std::map<int64_t, void *> state;   ///< state input buffer -> memory
  std::map<int64_t, Staged> staged;  ///< other inputs, staged on the host
  std::map<int64_t, void *> outputs; ///< output buffer -> memory (last step)
  std::vector<void *> ownedOutputs;  ///< per-buffer mode: freed next step
  /// Root of each output written in place -> the state input it aliases.
  std::map<int64_t, int64_t> aliasOf;
  /// (state input, output) pairs copied into the state after each step.
  std::vector<std::pair<int64_t, int64_t>> copies;
  int64_t lastPeak = 0;
  fsdp_step_fn compiledFn = nullptr;
  const fsdp_step_descriptor *compiledDesc = nullptr;
  fsdp_step_context stepContext{};
  std::vector<fsdp_event> stepEvents;
};

} // namespace fsdp::rt

#endif // FSDP_INTERPRETER_H
