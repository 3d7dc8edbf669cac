//===- ExecutorStep.cpp - one step: the step plan, interpreted ------------===//
//
// Executor::interpretedStep walks the program's step plan
// (fsdp/schedule/StepPlan.h) and makes its runtime calls: the same calls
// with the same arguments --convert-fsdp-to-llvm emits for a compiled step.
// In arena mode every slot's memory is the arena plus its planned offset,
// so every argument is resolved once, when the plan is bound; per buffer,
// Bind allocates and Release frees, and arguments are resolved as they are
// called. The profile (fsdp_profile_enabled) puts each instruction's call
// time, to the end of its work on the compute stream, under its op name, its
// waits under "(comm wait)" and the rest of the interpreter's own work under
// "(interpreter)".
//
//===----------------------------------------------------------------------===//
#include "EntryPoints.h"
#include "fsdp/Executor.h"

namespace fsdp::rt {

using namespace fsdp::schedule;

namespace {

void check(int rc) {
  if (rc != FSDP_OK)
    throw Error(fsdp_last_error());
}

} // namespace

/// One step's run state; on an error it completes the collectives in flight
/// and frees the step's own allocations.
class StepRun {
public:
  StepRun(Executor &e, const StepPlan &plan) : ex(e), p(plan) {
    std::fill(ex.events.begin(), ex.events.end(), nullptr);
    if (!ex.arena)
      owned.assign(p.slots.size(), false);
  }
  ~StepRun() {
    for (fsdp_event &e : ex.events)
      if (e) {
        fsdp_wait(e);
        e = nullptr;
      }
    for (size_t s = 0; s < owned.size(); ++s)
      if (owned[s])
        fsdp_device_free(ex.dev, ex.base[s]);
  }

  void run();
  /// The words of call `c`'s arguments.
  void resolve(const Call &c, Word *words);

private:
  const void *address(const Arg &a) const;
  void call(const Call &c);
  void wait(int64_t event);
  void bind(int32_t slot);
  void profileInstruction(int64_t next);

  Executor &ex;
  const StepPlan &p;
  std::vector<bool> owned; ///< per buffer: slots this step allocated
  int64_t inst = -1;
  double waitSeconds = 0, callSeconds = 0, instStart = 0;
  bool profiling = fsdp_profile_enabled();
};

const void *StepRun::address(const Arg &a) const {
  char *at = ex.base[static_cast<size_t>(a.slot)] + a.value;
  if (a.scale)
    at += int64_t{fsdp_channel_rank(ex.channel(a.group))} * a.scale;
  return at;
}

void StepRun::resolve(const Call &c, Word *w) {
  const Arg *args = p.argsOf(c);
  for (uint32_t i = 0; i < c.numArgs; ++i) {
    const Arg &a = args[i];
    switch (a.kind) {
    case ArgKind::Stream:
      w[i].p = ex.compute;
      break;
    case ArgKind::Channel:
      w[i].p = ex.channel(a.group);
      break;
    case ArgKind::Buffer:
      w[i].p = address(a);
      break;
    case ArgKind::Null:
      w[i].p = nullptr;
      break;
    case ArgKind::I32:
    case ArgKind::I64:
      w[i].i = a.value;
      break;
    case ArgKind::F64:
      w[i].f = a.number;
      break;
    case ArgKind::RankTimes:
      w[i].i = int64_t{fsdp_channel_rank(ex.channel(a.group))} / a.divisor *
                   a.scale +
               a.value;
      break;
    case ArgKind::Buffers: {
      std::vector<void *> &list = ex.boundLists[static_cast<size_t>(a.value)];
      const std::vector<Arg> &from =
          p.pointerLists[static_cast<size_t>(a.value)];
      for (size_t j = 0; j < from.size(); ++j)
        list[j] = const_cast<void *>(address(from[j]));
      w[i].p = list.data();
      break;
    }
    case ArgKind::Int64s:
      w[i].p = p.int64Lists[static_cast<size_t>(a.value)].data();
      break;
    case ArgKind::Event:
      w[i].p = &ex.events[static_cast<size_t>(a.value)];
      break;
    }
  }
}

void StepRun::call(const Call &c) {
  double t0 = profiling ? fsdp_now() : 0;
  const Word *words;
  Word local[32];
  if (ex.arena) {
    words = ex.boundArgs.data() + c.firstArg;
  } else {
    resolve(c, local);
    words = local;
  }
  int rc = ex.entryFns[static_cast<size_t>(c.entry)](words);
  if (profiling) {
    // A GPU kernel returns at its launch: wait for it, so that the op's
    // seconds are its kernel's (the cpu driver's calls return done).
    if (rc == FSDP_OK)
      rc = fsdp_stream_synchronize(ex.compute);
    callSeconds += fsdp_now() - t0;
  }
  check(rc);
}

/// fsdp.wait, its host time added to waitSeconds (the profile's comm wait).
void StepRun::wait(int64_t event) {
  fsdp_event &e = ex.events[static_cast<size_t>(event)];
  double t0 = fsdp_now();
  ex.awaited.store(p.eventInstructions[static_cast<size_t>(event)],
                   std::memory_order_relaxed);
  int rc = fsdp_wait(e);
  ex.awaited.store(-1, std::memory_order_relaxed);
  e = nullptr;
  double dt = fsdp_now() - t0;
  waitSeconds += dt;
  const std::string &op =
      ex.prog
          .instructions()[static_cast<size_t>(
              p.eventInstructions[static_cast<size_t>(event)])]
          .op;
  if (op == "fsdp.send" || op == "fsdp.recv")
    ex.pipelineWait += dt;
  check(rc);
}

void StepRun::bind(int32_t slot) {
  if (ex.arena)
    return; // bound once to its planned offset
  const Slot &s = p.slots[static_cast<size_t>(slot)];
  void *mem;
  check(fsdp_device_alloc(ex.dev, static_cast<size_t>(s.bytes), &mem));
  ex.base[static_cast<size_t>(slot)] = static_cast<char *>(mem);
  owned[static_cast<size_t>(slot)] = true;
}

void StepRun::profileInstruction(int64_t next) {
  if (profiling && inst >= 0) {
    double total = fsdp_now() - instStart;
    fsdp_profile_add(
        ex.prog.instructions()[static_cast<size_t>(inst)].op.c_str(),
        callSeconds);
    fsdp_profile_add("(comm wait)", waitSeconds);
    fsdp_profile_add("(interpreter)", total - callSeconds - waitSeconds);
  }
  inst = next;
  callSeconds = waitSeconds = 0;
  instStart = profiling ? fsdp_now() : 0;
}

void StepRun::run() {
  bool progressTest = fsdp_get_progress() == FSDP_PROGRESS_TEST;
  ex.lastCollective =
      p.eventInstructions.empty() ? -1 : p.eventInstructions.back();
  for (const Action &a : p.actions) {
    try {
      switch (a.kind) {
      case ActionKind::Begin:
        profileInstruction(a.index);
        if (a.index >= 0 || a.index == Executor::kStepEnd)
          ex.running.store(a.index, std::memory_order_relaxed);
        break;
      case ActionKind::Bind:
        bind(a.slot);
        break;
      case ActionKind::Alias:
        ex.base[static_cast<size_t>(a.slot)] =
            ex.base[static_cast<size_t>(a.other)];
        // Per buffer, an in-place sum takes over its running sum's
        // allocation (the state's memory is never the step's).
        if (!ex.arena && owned[static_cast<size_t>(a.other)]) {
          owned[static_cast<size_t>(a.slot)] = true;
          owned[static_cast<size_t>(a.other)] = false;
        }
        break;
      case ActionKind::Zero:
        check(fsdp_memset_zero(
            ex.compute, ex.base[static_cast<size_t>(a.slot)],
            static_cast<size_t>(p.slots[static_cast<size_t>(a.slot)].bytes)));
        break;
      case ActionKind::CopyIn: {
        const IoDesc &io = ex.prog.inputs()[static_cast<size_t>(a.index)];
        size_t i = static_cast<size_t>(a.index);
        if (!ex.written[i])
          throw Error(ex.prog.name() + ": input buffer " +
                      std::to_string(io.buffer) + " (role '" + io.role +
                      "'): was not written (Executor::write before step)");
        check(fsdp_memcpy(ex.compute, ex.base[static_cast<size_t>(a.slot)],
                          ex.staged[i].data(), ex.staged[i].size()));
        break;
      }
      case ActionKind::Call:
        call(p.calls[static_cast<size_t>(a.index)]);
        break;
      case ActionKind::Wait:
        wait(a.index);
        break;
      case ActionKind::Progress:
        if (progressTest)
          for (int64_t e : p.eventLists[static_cast<size_t>(a.index)]) {
            int done = 0;
            fsdp_event_query(ex.events[static_cast<size_t>(e)], &done);
          }
        break;
      case ActionKind::Release:
        if (!ex.arena) {
          fsdp_device_free(ex.dev, ex.base[static_cast<size_t>(a.slot)]);
          owned[static_cast<size_t>(a.slot)] = false;
        }
        break;
      case ActionKind::Fail:
        throw Error(p.failure);
      }
    } catch (const std::exception &e) {
      ex.running.store(Executor::kIdle, std::memory_order_relaxed);
      ex.awaited.store(-1, std::memory_order_relaxed);
      if (inst < 0)
        throw;
      throw Error(ex.prog.where(static_cast<size_t>(inst)) + ": " + e.what());
    }
  }
  if (profiling)
    fsdp_profile_add("(comm wait)", waitSeconds);
  // Outputs stay readable until the next step; per buffer, those the step
  // allocated are freed then.
  for (size_t j = 0; j < ex.prog.outputs().size(); ++j)
    ex.outputs[ex.prog.outputs()[j].buffer] =
        const_cast<void *>(address(p.outputs[j]));
  for (int32_t s : p.outputReleases)
    if (!ex.arena) {
      ex.ownedOutputs.push_back(ex.base[static_cast<size_t>(s)]);
      owned[static_cast<size_t>(s)] = false;
    }
  ex.finishStep(p.peakBytes);
  // The step's own buffers still live at its end (per buffer), after the
  // device has finished with them.
  for (int32_t s : p.endReleases)
    if (!ex.arena && owned[static_cast<size_t>(s)]) {
      fsdp_device_free(ex.dev, ex.base[static_cast<size_t>(s)]);
      owned[static_cast<size_t>(s)] = false;
    }
}

//===--- Executor ---------------------------------------------------------===//

const StepPlan &Executor::plan() {
  if (!stepPlan) {
    StepPlan::Options o;
    o.arena = arena != nullptr;
    for (Group g :
         {Group::World, Group::Shard, Group::Replicate, Group::Tensor})
      o.groupComplete[static_cast<int>(g)] =
          fsdp_channel_size(channel(g)) == prog.groupSize(g);
    auto p = std::make_unique<StepPlan>(StepPlan::build(prog, o));
    bind(*p);
    stepPlan = std::move(p);
  }
  return *stepPlan;
}

void Executor::bind(const StepPlan &p) {
  // Every call against its C prototype: a plan that passes other classes
  // of arguments than the function takes is a bug of an op's lowering.
  entryFns.clear();
  std::vector<std::string> params;
  for (const std::string &name : p.entries) {
    EntryPoint e;
    if (!lookupEntryPoint(name, e))
      throw Error(prog.name() + ": internal error: the step plan calls '" +
                  name + "', which the runtime does not have");
    entryFns.push_back(e.thunk);
    params.push_back(e.params);
  }
  for (const Call &c : p.calls) {
    std::string got;
    for (uint32_t i = 0; i < c.numArgs; ++i)
      got += argClass(p.argsOf(c)[i].kind);
    const std::string &want = params[static_cast<size_t>(c.entry)];
    if (got != want || c.numArgs > 32)
      throw Error(prog.name() + ": internal error: the step plan calls " +
                  p.entries[static_cast<size_t>(c.entry)] +
                  " with arguments '" + got + "' but it takes '" + want + "'");
  }
  events.assign(static_cast<size_t>(p.numEvents), nullptr);
  boundLists.clear();
  for (const auto &list : p.pointerLists)
    boundLists.emplace_back(list.size(), nullptr);
  base.assign(p.slots.size(), nullptr);
  for (size_t s = 0; s < p.slots.size(); ++s) {
    if (arena)
      base[s] = arena + p.slots[s].arenaOffset;
    else if (p.slots[s].state)
      base[s] = static_cast<char *>(stateAt(p.slots[s].buffer));
  }
  boundArgs.clear();
  if (!arena)
    return;
  // Arena mode: every address is a constant, every argument resolved now.
  boundArgs.assign(p.args.size(), Word{});
  StepRun resolver(*this, p);
  for (const Call &c : p.calls)
    resolver.resolve(c, boundArgs.data() + c.firstArg);
}

void Executor::interpretedStep() { StepRun(*this, plan()).run(); }

} // namespace fsdp::rt
