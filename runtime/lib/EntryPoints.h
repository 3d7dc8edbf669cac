//===- EntryPoints.h - the runtime calls a step plan can make ---*- C++ -*-===//
//
// Private to the runtime. Every `int fsdp_*(...)` a step plan may call
// (StepPlan.h's Call::entry names), as a thunk that takes the call's
// arguments as an array of 64-bit words -- a pointer, an integer or a
// double each, in the order of the C prototype -- and the prototype's
// parameter classes, so that the executor checks each call of a plan against
// the C function it calls before the first step.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_ENTRYPOINTS_H
#define FSDP_RUNTIME_ENTRYPOINTS_H

#include "fsdp/schedule/StepPlan.h"

#include <cstdint>
#include <string>

namespace fsdp::rt {

/// One argument word: a pointer, an integer or a double.
union Word {
  const void *p;
  int64_t i;
  double f;
};
static_assert(sizeof(Word) == 8, "one 64-bit word per argument");

/// Calls an entry point with words[0..arity).
using EntryThunk = int (*)(const Word *words);

struct EntryPoint {
  EntryThunk thunk = nullptr;
  /// One class per parameter: 'p' pointer, 'i' 32-bit integer or enum,
  /// 'l' 64-bit integer, 'd' double.
  std::string params;
};

/// The entry point called `name`; false if the runtime has none.
bool lookupEntryPoint(const std::string &name, EntryPoint &out);

/// The parameter class a plan argument of `kind` passes ('p', 'i', 'l' or
/// 'd', as EntryPoint::params).
char argClass(schedule::ArgKind kind);

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_ENTRYPOINTS_H
