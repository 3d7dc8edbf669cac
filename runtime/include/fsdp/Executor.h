//===- Executor.h - runs a schedule's steps on one device -----------------===//
//
// fsdp::rt::Executor runs the steps of a schedule (fsdp::schedule::Program)
// on one device, SPMD on every rank, with the training state resident in
// device memory from initialisation to the end:
//
//   fsdp::rt::Device dev("cpu");                      // or "cuda", "cuda:1"
//   auto prog = fsdp::schedule::Program::fromFile("step.json",
//                                                 fsdp_world_size());
//   fsdp::rt::Executor ex(prog, dev.get());           // collective
//   ex.write(paramShardId, initialValues);            // once: the state
//   for (step...) { ex.write(tokensId, tokens); ex.write(stepId, {s});
//                   ex.step(); double loss = ex.readScalar(lossId); }
//
// A step runs the program's step plan (fsdp/schedule/StepPlan.h), built once
// on the first step: the runtime calls of runtime.h and kernels.h with their
// arguments resolved, the same for every driver -- or a compiled step that
// was made from the same plan (useCompiledStep). Host values are row-major
// element values as double whatever the buffer's dtype (f32 <-> double and
// i32 <-> double are exact; i64 up to 2^53; a value written into a bf16/f16
// buffer is rounded to f32 and then to the 2-byte dtype, so that it equals
// nn.cast of the f32 value; reads widen exactly). Errors (bad input, a
// kernel's data error such as a label out of range, a planner error) throw
// fsdp::Error with a message naming the file, instruction index and source
// location.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_EXECUTOR_H
#define FSDP_EXECUTOR_H

#include "fsdp/compiled.h"
#include "fsdp/runtime.h"
#include "fsdp/schedule/Program.h"
#include "fsdp/schedule/StepPlan.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::rt {

class CompiledStep;
union Word;

/// Buffer id -> element values (row-major, as double).
using HostValues = std::map<int64_t, std::vector<double>>;

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

/// Throws fsdp::CollectiveError on every rank unless all ranks'
/// Program::collectiveFingerprint() agree, then unless their
/// scheduleFingerprint() agree (a schedule that differs only in, say, a
/// learning rate or a micro-batch count would run silently otherwise); the
/// messages name both ranks' schedule files (MPI_Allgather over
/// MPI_COMM_WORLD; skipped without MPI, on one rank, or for a schedule of
/// another world size). Collective.
void checkSameScheduleOnAllRanks(const schedule::Program &prog);

/// The stage layout across a pipeline's stages, before any channel exists:
/// throws fsdp::CollectiveError on every rank unless all ranks agree on the
/// number of stages P, then on the pipeline schedule and its micro-batches,
/// then on the whole job document (Program::jobFingerprint: the stage split
/// and every stage's program). Ranks that all run one program (P = 1) are
/// left to checkSameScheduleOnAllRanks. The same collectives whatever each
/// rank's schedule (MPI_Allgather over MPI_COMM_WORLD; skipped without MPI
/// or on one rank), so ranks that disagree fail instead of waiting on each
/// other's channel set-up. Collective.
void checkSameJobOnAllRanks(const schedule::Program &prog);

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
  /// schedule. Collective over MPI_COMM_WORLD. Throws fsdp::Error.
  Executor(const schedule::Program &program, fsdp_device device,
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
  /// The device memory of state input `buffer` (role param, master,
  /// exp_avg or exp_avg_sq; zero-filled until written), for writers that
  /// fill it on the device (fsdp-run's initialisation); null for any other
  /// buffer. Valid for the Executor's lifetime.
  void *stateMemory(int64_t buffer) const { return stateAt(buffer); }

  /// Runs one step: binds the inputs, runs the step plan, completes the
  /// collectives, carries the state outputs into the state, and waits for
  /// the device (a deferred kernel error surfaces here). Every input that
  /// is not state must have been written (once; it stays for later steps
  /// until written again). Throws fsdp::Error.
  void step();

  /// Runs every later step() with `compiled`'s machine code instead of
  /// interpreting the plan: the same inputs, state, outputs and errors.
  /// `compiled` must describe this Executor's program (it is
  /// compiled.program() or a copy) and outlive the Executor; needs arena
  /// mode with a complete memory plan. Throws fsdp::Error.
  void useCompiledStep(const CompiledStep &compiled);
  bool isCompiled() const { return compiledFn != nullptr; }

  /// The step plan this Executor runs, built on first use (a schedule it
  /// cannot plan gives a plan that fails where the step meets the error).
  const schedule::StepPlan &plan();

  /// High-water mark of the bytes of the schedule's live buffers during the
  /// last step (the plan's bookkeeping: equals memory_plan.peak_bytes).
  int64_t lastPeakBytes() const { return lastPeak; }
  /// Bytes of the arena (0 in per-buffer mode).
  int64_t arenaBytes() const { return arenaSize; }
  bool usesArena() const { return arena != nullptr; }
  /// Carried state outputs written in place (aliases) / copied per step.
  int64_t inPlaceOutputs() const { return inPlace; }
  int64_t copiedOutputs() const { return static_cast<int64_t>(copies.size()); }
  fsdp_device device() const { return dev; }
  const schedule::Program &program() const { return prog; }
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
  /// The instruction that started the collective the host waits for (an
  /// interpreted step's fsdp_wait; at the step's end, the last collective
  /// the step started, which the final synchronisation waits for on a
  /// device whose waits do not block the host), or -1. Safe to read from
  /// another thread.
  int64_t awaitedCollective() const {
    return awaited.load(std::memory_order_relaxed);
  }
  /// Seconds the host has spent in the waits of pipeline transfers
  /// (fsdp.send / fsdp.recv; interpreted steps), since construction: the
  /// measured bubble's waits (fsdp-run's pipeline.rank_idle_s).
  double pipelineWaitSeconds() const { return pipelineWait; }
  /// Bytes this rank has sent on each of its channels since they were
  /// created (each channel counts what the C entry points start on it: the
  /// ring volume, (G−1)/G of the full buffer per all-gather and
  /// reduce-scatter, 2(G−1)/G per all-reduce, fsdp/Sharding.h, and each
  /// point-to-point message's bytes), by group: "world" (this stage's ranks),
  /// "shard", "replicate", "tensor", and with pipeline stages "pipeline"
  /// and "job" (every rank).
  std::map<std::string, int64_t> channelBytesSent() const;

private:
  friend class StepRun;
  void init(AllocMode alloc);
  void release();
  void *stateAt(int64_t buffer) const;
  fsdp_channel channel(schedule::Group g) const;
  /// Resolves the plan's entry points and, in arena mode, every argument
  /// (all addresses are then constants).
  void bind(const schedule::StepPlan &p);
  void interpretedStep();
  void compiledStep();
  /// The end of a step, interpreted or compiled: the carried outputs
  /// without `aliases` copied into the state, the stream synchronised (a
  /// deferred data error thrown), `peak` recorded.
  void finishStep(int64_t peak);
  static constexpr int64_t kCompiledStep = -3;

  const schedule::Program &prog;
  fsdp_device dev;
  fsdp_stream compute;
  std::atomic<int64_t> running{kIdle};
  std::atomic<int64_t> awaited{-1};
  int64_t lastCollective = -1; ///< of this step (interpreted), or -1
  fsdp_channel world = nullptr, shard = nullptr, replicate = nullptr,
               tensor = nullptr;
  /// Pipeline parallelism: every rank of the job (`world` is then this
  /// stage's ranks) and the pipeline group (one rank per stage, this rank's
  /// index in its stage).
  fsdp_channel job = nullptr, pipeline = nullptr;
  char *arena = nullptr;
  void *arenaAlloc = nullptr;
  int64_t arenaSize = 0;
  std::map<int64_t, void *> state; ///< state input buffer -> memory
  /// Other inputs' bytes, staged on the host, by input index.
  std::vector<std::vector<unsigned char>> staged;
  std::vector<bool> written;         ///< by input index
  std::map<int64_t, void *> outputs; ///< output buffer -> memory (last step)
  std::vector<void *> ownedOutputs;  ///< per-buffer mode: freed next step
  /// (state input, output) pairs copied into the state after each step.
  std::vector<std::pair<int64_t, int64_t>> copies;
  int64_t inPlace = 0;
  int64_t lastPeak = 0;
  double pipelineWait = 0;
  // The step plan and what the interpreter resolved of it.
  std::unique_ptr<schedule::StepPlan> stepPlan;
  using Invoke = int (*)(const Word *args);
  std::vector<Invoke> entryFns; ///< by Call::entry
  std::vector<char *> base;     ///< slot -> its memory
  std::vector<Word> boundArgs;  ///< arena mode: every argument, resolved
  std::vector<std::vector<void *>> boundLists; ///< pointer lists, resolved
  std::vector<fsdp_event> events;              ///< the step's event slots
  // A compiled step.
  fsdp_step_fn compiledFn = nullptr;
  const fsdp_step_descriptor *compiledDesc = nullptr;
  fsdp_step_context stepContext{};
};

/// Runs one step of `prog` in-process on a fresh "cpu" device: writes
/// every input from `inputs` (each must be present with exactly numel
/// values), runs, and returns every output by buffer id; `peakBytes`, when
/// given, receives Executor::lastPeakBytes. For tests and tools; training
/// loops keep an Executor (the state stays on the device). Throws
/// fsdp::Error.
HostValues runStep(const schedule::Program &prog, const HostValues &inputs,
                   int64_t *peakBytes = nullptr);
/// The same without exceptions (callers built with -fno-exceptions).
bool tryRunStep(const schedule::Program &prog, const HostValues &inputs,
                HostValues &outputs, std::string &error);

} // namespace fsdp::rt

#endif // FSDP_EXECUTOR_H
