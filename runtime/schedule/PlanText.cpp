//===- PlanText.cpp - a step plan as text, for people
//----------------------===//
//
// StepPlan::print: one line per action under its instruction, each call with
// its resolved arguments (`fsdp-compile --emit-plan`). What the executor
// runs and the compiled step does, readable without a debugger.
//
//===----------------------------------------------------------------------===//
#include "fsdp/schedule/StepPlan.h"

#include <charconv>

namespace fsdp::schedule {

namespace {

std::string slotName(const StepPlan &plan, int32_t slot) {
  const Slot &s = plan.slots[static_cast<size_t>(slot)];
  std::string text = "buffer " + std::to_string(s.buffer);
  if (s.arenaOffset >= 0)
    text += " @" + std::to_string(s.arenaOffset);
  return text;
}

std::string argText(const StepPlan &plan, const Arg &a) {
  std::string group = kGroupNames[static_cast<int>(a.group)];
  switch (a.kind) {
  case ArgKind::Stream:
    return "stream";
  case ArgKind::Channel:
    return group;
  case ArgKind::Buffer: {
    std::string t = slotName(plan, a.slot);
    if (a.value)
      t += "+" + std::to_string(a.value);
    if (a.scale)
      t += "+rank(" + group + ")*" + std::to_string(a.scale);
    return t;
  }
  case ArgKind::Null:
    return "null";
  case ArgKind::I32:
  case ArgKind::I64:
    return std::to_string(a.value);
  case ArgKind::F64: {
    // The shortest text that reads back as the same double.
    char text[32];
    auto end = std::to_chars(text, text + sizeof text, a.number).ptr;
    return std::string(text, end);
  }
  case ArgKind::RankTimes:
    return "rank(" + group + ")" +
           (a.divisor != 1 ? "/" + std::to_string(a.divisor) : "") + "*" +
           std::to_string(a.scale) +
           (a.value ? "+" + std::to_string(a.value) : "");
  case ArgKind::Buffers: {
    std::string t = "[";
    for (const Arg &p : plan.pointerLists[static_cast<size_t>(a.value)])
      t += (t.size() > 1 ? ", " : "") + argText(plan, p);
    return t + "]";
  }
  case ArgKind::Int64s: {
    std::string t = "{";
    for (int64_t v : plan.int64Lists[static_cast<size_t>(a.value)])
      t += (t.size() > 1 ? ", " : "") + std::to_string(v);
    return t + "}";
  }
  case ArgKind::Event:
    return "&event" + std::to_string(a.value);
  }
  return "?";
}

} // namespace

void StepPlan::print(std::ostream &os, const Program &prog) const {
  os << "step plan: " << actions.size() << " actions, " << calls.size()
     << " calls, " << slots.size() << " slots, " << numEvents
     << " events, peak " << peakBytes << " bytes\n";
  for (const Action &a : actions) {
    switch (a.kind) {
    case ActionKind::Begin:
      os << (a.index == -1 ? std::string("inputs")
             : a.index == -2
                 ? std::string("end")
                 : prog.instructionName(static_cast<size_t>(a.index)))
         << "\n";
      break;
    case ActionKind::Bind:
      os << "  bind " << slotName(*this, a.slot) << "\n";
      break;
    case ActionKind::Alias:
      os << "  bind " << slotName(*this, a.slot) << " = "
         << slotName(*this, a.other) << " (in place)\n";
      break;
    case ActionKind::Zero:
      os << "  zero " << slotName(*this, a.slot) << "\n";
      break;
    case ActionKind::CopyIn:
      os << "  copy input #" << a.index << " to " << slotName(*this, a.slot)
         << "\n";
      break;
    case ActionKind::Call: {
      const Call &c = calls[static_cast<size_t>(a.index)];
      os << "  " << entries[static_cast<size_t>(c.entry)] << "(";
      for (uint32_t i = 0; i < c.numArgs; ++i)
        os << (i ? ", " : "") << argText(*this, argsOf(c)[i]);
      os << ")\n";
      break;
    }
    case ActionKind::Wait:
      os << "  wait event" << a.index << "\n";
      break;
    case ActionKind::Progress: {
      os << "  progress";
      for (int64_t e : eventLists[static_cast<size_t>(a.index)])
        os << " event" << e;
      os << "\n";
      break;
    }
    case ActionKind::Release:
      os << "  release " << slotName(*this, a.slot) << "\n";
      break;
    case ActionKind::Fail:
      os << "  fail: " << error << "\n";
      break;
    }
  }
}

} // namespace fsdp::schedule
