//===- StepPlan.h - one training step as a flat list of runtime calls -----===//
//
// fsdp::schedule::StepPlan is every decision of a step that does not depend
// on data, made once: which buffers are live where, which collectives are in
// flight and where each is waited on, which memory is zero-filled first,
// where the in-flight collectives are given a chance to progress, which
// output takes over a state input's memory, and every runtime call (kernel,
// collective, copy) with its resolved arguments. Two back ends run it: the
// executor (runtime/lib/Executor.cpp) walks it at run time, and
// --convert-fsdp-to-llvm (lib/Conversion) emits it as LLVM calls of the
// same entry points with the same arguments, so the interpreted and the
// compiled step compute the same bits by construction.
//
// Memory is named by slot: a slot is one allocated (root) buffer; an
// argument's address is its slot's base plus a constant byte offset (plus a
// rank-dependent offset where a rank picks its own part). In arena mode each
// slot's base is the arena plus its planned offset, so every address is a
// constant; per buffer, Bind allocates and Release frees.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_STEPPLAN_H
#define FSDP_SCHEDULE_STEPPLAN_H

#include "fsdp/schedule/Program.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

namespace fsdp::schedule {

/// Where one argument of a call comes from.
enum class ArgKind : uint8_t {
  Stream,  ///< the compute stream (fsdp_stream)
  Channel, ///< the channel of `group` (fsdp_channel)
  /// Device memory: slot `slot`'s base + `value` bytes, + rank(`group`) ·
  /// `scale` bytes when scale != 0 (this rank's part of a replicated buffer).
  Buffer,
  Null, ///< a null pointer
  I32,  ///< `value` as a 32-bit integer (int, an enum)
  I64,  ///< `value` (int64_t, size_t)
  F64,  ///< `number`
  /// (rank(`group`) / `divisor`) · `scale` + `value` as an int64_t
  /// (integer division): known only at run time, so that one compiled step
  /// serves every rank. The world rank / T is the data-parallel rank.
  RankTimes,
  Buffers, ///< an array of device pointers: pointerLists[value]
  Int64s,  ///< a constant int64_t array: int64Lists[value] (null if empty)
  Event,   ///< the address of event slot `value` (fsdp_event *)
};

struct Arg {
  ArgKind kind = ArgKind::Null;
  Group group = Group::World;
  int32_t slot = -1;
  int64_t value = 0;
  int64_t scale = 0;
  int64_t divisor = 1; ///< RankTimes only
  double number = 0;
};

/// A call of runtime entry point entries[entry] (an `int fsdp_*(...)` of
/// runtime.h or kernels.h returning a status) with args[firstArg ...
/// firstArg + numArgs).
struct Call {
  int32_t entry = -1;
  uint32_t firstArg = 0, numArgs = 0;
};

enum class ActionKind : uint8_t {
  /// Instruction `index` starts (-1: the inputs are bound; -2: the step's
  /// end): for messages, the watchdog and the profile.
  Begin,
  /// Slot `slot` becomes live: its arena offset, or an allocation.
  Bind,
  /// Slot `slot` becomes live in state slot `other`'s memory: an output
  /// written in place into the state input it replaces.
  Alias,
  Zero,   ///< fsdp_memset_zero of slot `slot`'s bytes
  CopyIn, ///< the host bytes of input #`index` into slot `slot`
  Call,   ///< calls[index]
  /// The compute stream waits for the collective of event slot `index`,
  /// whose event is then cleared (fsdp_wait).
  Wait,
  /// With FSDP_PROGRESS_TEST, fsdp_event_query of each event slot of
  /// eventLists[index] (Open MPI moves a non-blocking collective only inside
  /// MPI calls).
  Progress,
  /// Slot `slot` is no longer live (per buffer: freed).
  Release,
  /// The schedule cannot run past this point (StepPlan::error): the
  /// executor stops with the error here, where running the step would have
  /// met it, so that the data errors before it still surface first.
  Fail,
};

struct Action {
  ActionKind kind = ActionKind::Begin;
  int32_t slot = -1, other = -1;
  int64_t index = 0;
};

/// One allocated buffer: `bytes` at `arenaOffset` (-1 without a plan);
/// `state` for a resident state input, whose memory outlives the step.
struct Slot {
  int64_t buffer = -1;
  int64_t bytes = 0;
  int64_t arenaOffset = -1;
  bool state = false;
};

/// Whether the schedule library can plan op `kind` (every op of kOps can;
/// test/unit/DialectTest.cpp checks).
bool hasLowering(OpKind kind);

class StepPlan {
public:
  struct Options {
    /// Buffers at their planned arena offsets when the program has them
    /// (Program::usesArena); the overlap of two live slots is then a
    /// memory-plan error.
    bool arena = true;
    /// Per group (Group as index): the channel has the schedule's group size.
    /// An all-gather over a smaller one (a schedule run at another world
    /// size, unchecked) writes only the gathered shards, so its result is
    /// zero-filled first.
    bool groupComplete[kNumGroups] = {true, true, true, true};
  };

  /// Plans one step of `prog`. A schedule the runtime cannot run as
  /// written (a buffer used before it is defined or after it is freed,
  /// defined twice, or planned over a live one) gives a plan that ends in a
  /// Fail action at that point, with `error` naming the instruction and
  /// location. Needs no exceptions (the compiler calls it).
  static StepPlan build(const Program &prog, const Options &options);

  /// The first planning error ("file: instruction #i 'op' (loc): ..."), or
  /// "" when the whole step is planned.
  std::string error;
  /// The instruction `error` is at (-1: the inputs, -2: the outputs).
  int64_t errorInstruction = -1;
  /// The message a Fail action throws: `error` without the instruction
  /// prefix the executor adds itself while running instruction i.
  std::string failure;

  std::vector<Slot> slots;
  std::vector<Action> actions;
  std::vector<Call> calls;
  std::vector<Arg> args;
  /// Entry point names ("fsdp_linear", ...), indexed by Call::entry.
  std::vector<std::string> entries;
  std::vector<std::vector<Arg>> pointerLists;
  std::vector<std::vector<int64_t>> int64Lists;
  std::vector<std::vector<int64_t>> eventLists;
  /// The memory of output j of the program (a Buffer argument).
  std::vector<Arg> outputs;
  /// Slots of outputs that the step owns (not the state, not written in
  /// place), each once: per buffer, freed at the next step.
  std::vector<int32_t> outputReleases;
  /// Slots still live at the end that the step owns (not the state, not an
  /// output): per buffer, freed once the step has finished.
  std::vector<int32_t> endReleases;
  /// Event slots a step uses (its collectives).
  int64_t numEvents = 0;
  /// Per event slot: the instruction that starts its collective (a
  /// watchdog names the collective a rank waits for).
  std::vector<int64_t> eventInstructions;
  /// High-water mark of the live schedule bytes (the memory plan's
  /// peak_bytes when the plan and the program agree).
  int64_t peakBytes = 0;

  /// One line per action, under its instruction, each call with its
  /// arguments (`fsdp-compile --emit-plan`).
  void print(std::ostream &os, const Program &prog) const;

  /// The slot of buffer `id`'s root, or -1.
  int32_t slotOf(int64_t bufferId) const;
  /// The arguments of call `c`.
  const Arg *argsOf(const Call &c) const { return args.data() + c.firstArg; }

private:
  friend class PlanBuilder;
  std::unordered_map<int64_t, int32_t> slotIndex; ///< root buffer id -> slot
};

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_STEPPLAN_H
