//===- StepPlan.cpp - plans a step once, for both back ends ---------------===//
//
// PlanBuilder walks the program as an executor runs it -- inputs bound,
// then per instruction: every collective in flight on a buffer the
// instruction reads or writes is waited on first; its results are bound
// (to their arena slot, checked against the live ones, or to an
// allocation), zero-filled unless the op writes every element, or, for an
// output written in place, bound to the state input it replaces (a sum
// written over its running sum, "in_place_of", to that sum's); the op's
// calls; its frees; and a progress point while collectives are in flight --
// and records each of these as an action (StepPlan.h). The live bytes it
// keeps are the memory plan's own figure (peak_bytes).
//
//===----------------------------------------------------------------------===//
#include "OpDefs.h"
#include "PlanBuilder.h"

#include <algorithm>
#include <set>

namespace fsdp::schedule {

class PlanBuilder {
public:
  PlanBuilder(const Program &p, const StepPlan::Options &o, StepPlan &plan)
      : prog(p), opt(o), plan(plan) {
    opt.arena = opt.arena && prog.usesArena(); // no plan: per buffer
  }

  void build();

  // For OpLowering.
  const Program &prog;
  Arg buf(int64_t id, int64_t bytes);
  Arg startCollective(int64_t send, int64_t recv);
  void call(const char *entry, std::vector<Arg> args);
  void release(int64_t id);
  int64_t addPointerList(std::vector<Arg> list) {
    plan.pointerLists.push_back(std::move(list));
    return static_cast<int64_t>(plan.pointerLists.size()) - 1;
  }
  int64_t addInt64List(const std::vector<int64_t> &values) {
    plan.int64Lists.push_back(values);
    return static_cast<int64_t>(plan.int64Lists.size()) - 1;
  }

private:
  struct SlotUse {
    int64_t id, inst; ///< the buffer, the instruction that bound it (-1: input)
  };
  struct Pending {
    int64_t event, sendRoot, recvRoot;
  };

  void makeSlots();
  void bindInputs();
  void runInstruction(size_t idx);
  void finish();
  void action(ActionKind kind, int32_t slot = -1, int64_t index = 0,
              int32_t other = -1) {
    plan.actions.push_back({kind, slot, other, index});
  }
  int32_t slot(int64_t rootId) const { return plan.slotOf(rootId); }
  void allocate(int64_t rootId, bool overwritten);
  void define(int64_t id, bool overwritten);
  void checkSlotFree(const BufferDesc &b) const;
  void waitTouching(int64_t id);
  void account(int64_t delta) {
    liveBytes += delta;
    plan.peakBytes = std::max(plan.peakBytes, liveBytes);
  }
  bool overwritesResults(const Instruction &in) const {
    return in.kind != OpKind::AllGather ||
           opt.groupComplete[static_cast<int>(in.group())];
  }

  StepPlan::Options opt;
  StepPlan &plan;
  int64_t curInst = -1, liveBytes = 0;
  std::set<int64_t> live;             ///< live root buffers
  std::set<int64_t> freed;            ///< root buffers whose life ended
  std::map<int64_t, SlotUse> slots;   ///< live arena slots by byte offset
  std::map<int64_t, int64_t> aliasOf; ///< output root -> state input
  std::set<int64_t> handedOver; ///< running sums an in-place sum took over
  std::vector<Pending> pending; ///< collectives in flight
};

//===--- OpLowering -------------------------------------------------------===//

OpLowering::OpLowering(PlanBuilder &b, const Instruction &in)
    : prog(b.prog), in(in), o(in.operands), r(in.results), b(b) {}

DType OpLowering::dtype() const { return desc(r.empty() ? o[0] : r[0]).dtype; }

Arg OpLowering::channel(Group g) const {
  Arg a{ArgKind::Channel};
  a.group = g;
  return a;
}

Arg OpLowering::buf(int64_t id, int64_t bytes) { return b.buf(id, bytes); }

Arg OpLowering::bufAtRank(int64_t id, Group g, int64_t scale) {
  Arg a = b.buf(id, 0);
  a.group = g;
  a.scale = scale;
  return a;
}

Arg OpLowering::i32(int64_t v) const {
  Arg a{ArgKind::I32};
  a.value = v;
  return a;
}

Arg OpLowering::i64(int64_t v) const {
  Arg a{ArgKind::I64};
  a.value = v;
  return a;
}

Arg OpLowering::f64(double v) const {
  Arg a{ArgKind::F64};
  a.number = v;
  return a;
}

Arg OpLowering::rankTimes(Group g, int64_t scale, int64_t plus,
                          int64_t divisor) const {
  Arg a{ArgKind::RankTimes};
  a.group = g;
  a.scale = scale;
  a.value = plus;
  a.divisor = divisor;
  return a;
}

Arg OpLowering::buffers(const std::vector<int64_t> &ids) {
  std::vector<Arg> list;
  for (int64_t id : ids)
    list.push_back(buf(id));
  Arg a{ArgKind::Buffers};
  a.value = b.addPointerList(std::move(list));
  return a;
}

Arg OpLowering::int64s(const std::vector<int64_t> &values) {
  if (values.empty())
    return null();
  Arg a{ArgKind::Int64s};
  a.value = b.addInt64List(values);
  return a;
}

Arg OpLowering::startCollective(int64_t send, int64_t recv) {
  return b.startCollective(send, recv);
}

void OpLowering::call(const char *entry, std::vector<Arg> args) {
  b.call(entry, std::move(args));
}

void OpLowering::release(int64_t id) { b.release(id); }

//===--- PlanBuilder ------------------------------------------------------===//

void PlanBuilder::build() {
  makeSlots();
  for (const IoDesc &o : prog.outputs())
    if (o.aliases >= 0)
      aliasOf[prog.buffer(o.buffer).rootId] = o.aliases;
  // A planning error ends the plan in a Fail action where it was met.
  auto fail = [&](int64_t at, const std::string &full,
                  const std::string &thrown) {
    plan.error = full;
    plan.errorInstruction = at;
    plan.failure = thrown;
    action(ActionKind::Fail, -1, at);
  };
  try {
    bindInputs();
  } catch (const Error &e) {
    return fail(-1, e.what(), e.what());
  }
  for (size_t idx = 0; idx < prog.instructions().size(); ++idx) {
    try {
      runInstruction(idx);
    } catch (const Error &e) {
      return fail(static_cast<int64_t>(idx), prog.where(idx) + ": " + e.what(),
                  e.what());
    }
  }
  try {
    finish();
  } catch (const Error &e) {
    return fail(-2, e.what(), e.what());
  }
}

void PlanBuilder::makeSlots() {
  std::set<int64_t> state;
  for (const IoDesc &io : prog.inputs())
    if (isStateRole(io.role))
      state.insert(io.buffer);
  for (const auto &[id, b] : prog.buffers()) {
    if (b.viewOf >= 0)
      continue;
    plan.slotIndex[id] = static_cast<int32_t>(plan.slots.size());
    plan.slots.push_back(
        {id, b.bytes, opt.arena ? b.arenaOffset : -1, state.count(id) > 0});
  }
}

void PlanBuilder::bindInputs() {
  action(ActionKind::Begin, -1, -1);
  for (size_t i = 0; i < prog.inputs().size(); ++i) {
    const IoDesc &io = prog.inputs()[i];
    const BufferDesc &b = prog.buffer(io.buffer);
    try {
      if (isStateRole(io.role)) {
        // The state is checked like any binding: two inputs planned over
        // each other would silently corrupt training. Its memory is the
        // executor's, bound before the step.
        if (opt.arena) {
          checkSlotFree(b);
          if (b.bytes > 0)
            slots[b.arenaOffset] = {b.id, -1};
        }
        live.insert(b.id);
        account(b.bytes);
        continue;
      }
      allocate(b.id, /*overwritten=*/true);
      action(ActionKind::CopyIn, slot(b.id), static_cast<int64_t>(i));
    } catch (const Error &e) {
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "'): " + e.what());
    }
  }
}

void PlanBuilder::runInstruction(size_t idx) {
  const Instruction &in = prog.instructions()[idx];
  curInst = static_cast<int64_t>(idx);
  action(ActionKind::Begin, -1, curInst);
  for (int64_t id : in.operands)
    waitTouching(id);
  for (int64_t id : in.results) {
    waitTouching(id);
    define(id, overwritesResults(in));
  }
  OpLowering lowering(*this, in);
  opDef(in.kind).lower(lowering);
  for (int64_t id : in.frees)
    release(id);
  if (!pending.empty()) {
    std::vector<int64_t> events;
    for (const Pending &q : pending)
      events.push_back(q.event);
    plan.eventLists.push_back(std::move(events));
    action(ActionKind::Progress, -1,
           static_cast<int64_t>(plan.eventLists.size()) - 1);
  }
}

void PlanBuilder::finish() {
  action(ActionKind::Begin, -1, -2);
  for (const Pending &q : pending)
    action(ActionKind::Wait, -1, q.event);
  pending.clear();
  // Outputs stay readable until the next step; the state and the outputs
  // are kept, anything else still live is the step's to free.
  std::set<int64_t> kept;
  for (const Slot &s : plan.slots)
    if (s.state)
      kept.insert(s.buffer);
  for (const IoDesc &o : prog.outputs()) {
    try {
      plan.outputs.push_back(buf(o.buffer, 0));
    } catch (const Error &e) {
      throw Error(prog.name() + ": output (role '" + o.role +
                  "'): " + e.what());
    }
    int64_t root = prog.buffer(o.buffer).rootId;
    if (!aliasOf.count(root) && kept.insert(root).second)
      plan.outputReleases.push_back(slot(root));
  }
  for (int64_t id : live)
    if (!kept.count(id) && !aliasOf.count(id) && !handedOver.count(id))
      plan.endReleases.push_back(slot(id));
}

void PlanBuilder::allocate(int64_t rootId, bool overwritten) {
  if (live.count(rootId))
    throw Error("buffer " + std::to_string(rootId) +
                " is defined while still live");
  // A buffer lives once: a use of its memory (or of a view of it) after its
  // free is a planner bug, not a new buffer full of zeros.
  if (freed.count(rootId))
    throw Error("buffer " + std::to_string(rootId) +
                " is defined again after its free");
  const BufferDesc &b = prog.buffer(rootId);
  if (opt.arena) {
    checkSlotFree(b);
    if (b.bytes > 0)
      slots[b.arenaOffset] = {rootId, curInst};
  }
  action(ActionKind::Bind, slot(rootId));
  if (!overwritten)
    action(ActionKind::Zero, slot(rootId));
  account(b.bytes);
  live.insert(rootId);
}

void PlanBuilder::define(int64_t id, bool overwritten) {
  const BufferDesc &b = prog.buffer(id);
  if (b.viewOf >= 0) {
    if (!live.count(b.rootId))
      define(b.rootId, false);
    return;
  }
  if (b.inPlaceOf >= 0) {
    // A gradient accumulation written over its running sum (the memory
    // plan's in_place): the same memory, now this buffer's.
    const Instruction &in = prog.instructions()[static_cast<size_t>(curInst)];
    if (!live.count(b.inPlaceOf) || in.operands.empty() ||
        prog.buffer(in.operands[0]).rootId != b.inPlaceOf)
      throw Error("buffer " + std::to_string(id) + " is in_place_of buffer " +
                  std::to_string(b.inPlaceOf) +
                  ", which is not this instruction's live first operand");
    waitTouching(b.inPlaceOf);
    action(ActionKind::Alias, slot(id), 0, slot(b.inPlaceOf));
    if (opt.arena && b.bytes > 0)
      slots[b.arenaOffset] = {id, curInst};
    handedOver.insert(b.inPlaceOf);
    live.insert(id);
    return;
  }
  auto alias = aliasOf.find(id);
  if (alias != aliasOf.end()) {
    // Every collective still reading the old state completes first.
    waitTouching(alias->second);
    action(ActionKind::Alias, slot(id), 0, slot(alias->second));
    live.insert(id);
    return;
  }
  allocate(id, overwritten);
}

void PlanBuilder::release(int64_t id) {
  const BufferDesc &b = prog.buffer(id);
  if (b.viewOf >= 0)
    return; // a view lives as long as its base
  waitTouching(id);
  if (!live.count(id))
    throw Error("buffer " + std::to_string(id) + " freed but not live");
  // An alias is the state's memory; a handed-over running sum, the sum's.
  if (!aliasOf.count(id) && !handedOver.count(id)) {
    account(-b.bytes);
    if (opt.arena && b.bytes > 0)
      slots.erase(b.arenaOffset);
    action(ActionKind::Release, slot(id));
  }
  live.erase(id);
  freed.insert(id);
}

/// Throws the planner-bug error if a live buffer's arena bytes overlap
/// those of `b`. Live slots are disjoint, so only the last one starting
/// before b's end can overlap.
void PlanBuilder::checkSlotFree(const BufferDesc &b) const {
  if (b.bytes == 0)
    return;
  int64_t lo = b.arenaOffset, hi = lo + b.bytes;
  auto it = slots.lower_bound(hi);
  if (it == slots.begin())
    return;
  --it;
  const BufferDesc &o = prog.buffer(it->second.id);
  if (it->first + o.bytes <= lo)
    return;
  std::string since =
      it->second.inst >= 0
          ? prog.instructionName(static_cast<size_t>(it->second.inst))
          : "the step start (an input)";
  throw Error("memory plan error: buffer " + std::to_string(b.id) +
              " at arena bytes [" + std::to_string(lo) + ", " +
              std::to_string(hi) + ") overlaps live buffer " +
              std::to_string(o.id) + " at arena bytes [" +
              std::to_string(it->first) + ", " +
              std::to_string(it->first + o.bytes) + "), live since " + since);
}

/// The compute stream waits on every collective reading or writing the root
/// of `id`.
void PlanBuilder::waitTouching(int64_t id) {
  int64_t root = prog.buffer(id).rootId;
  for (size_t i = 0; i < pending.size();) {
    if (pending[i].sendRoot == root || pending[i].recvRoot == root) {
      action(ActionKind::Wait, -1, pending[i].event);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
}

Arg PlanBuilder::buf(int64_t id, int64_t bytes) {
  const BufferDesc &b = prog.buffer(id);
  if (!live.count(b.rootId))
    throw Error("buffer " + std::to_string(id) +
                (b.viewOf >= 0
                     ? " (a view of buffer " + std::to_string(b.rootId) + ")"
                     : std::string()) +
                " is used but not live (never defined, or already freed)");
  Arg a{ArgKind::Buffer};
  a.slot = slot(b.rootId);
  a.value = b.rootOffset * dtypeSize(prog.buffer(b.rootId).dtype) + bytes;
  return a;
}

Arg PlanBuilder::startCollective(int64_t send, int64_t recv) {
  int64_t event = plan.numEvents++;
  plan.eventInstructions.push_back(curInst);
  pending.push_back(
      {event, prog.buffer(send).rootId, prog.buffer(recv).rootId});
  Arg a{ArgKind::Event};
  a.value = event;
  return a;
}

void PlanBuilder::call(const char *entry, std::vector<Arg> args) {
  Call c;
  auto it = std::find(plan.entries.begin(), plan.entries.end(), entry);
  c.entry = static_cast<int32_t>(it - plan.entries.begin());
  if (it == plan.entries.end())
    plan.entries.emplace_back(entry);
  c.firstArg = static_cast<uint32_t>(plan.args.size());
  c.numArgs = static_cast<uint32_t>(args.size());
  plan.args.insert(plan.args.end(), args.begin(), args.end());
  plan.calls.push_back(c);
  action(ActionKind::Call, -1, static_cast<int64_t>(plan.calls.size()) - 1);
}

//===--- StepPlan ---------------------------------------------------------===//

StepPlan StepPlan::build(const Program &prog, const Options &options) {
  StepPlan plan;
  PlanBuilder(prog, options, plan).build();
  // Arena mode: an output written in place lives at its state input's
  // offset (Program::validateAliases checked that they are planned so).
  for (const Action &a : plan.actions)
    if (a.kind == ActionKind::Alias)
      plan.slots[static_cast<size_t>(a.slot)].arenaOffset =
          plan.slots[static_cast<size_t>(a.other)].arenaOffset;
  return plan;
}

int32_t StepPlan::slotOf(int64_t bufferId) const {
  auto it = slotIndex.find(bufferId);
  return it == slotIndex.end() ? -1 : it->second;
}

} // namespace fsdp::schedule
