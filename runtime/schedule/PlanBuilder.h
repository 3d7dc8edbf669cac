//===- PlanBuilder.h - what an op's lowering sees of the step plan --------===//
//
// Private to the schedule library. PlanBuilder walks a program once in
// program order, keeping what an executor would keep while it runs (the
// live slots, the collectives in flight), and appends the plan's actions
// (StepPlan.cpp). For each instruction it hands the op's lowering
// (OpDefs.h, ops/*.cpp) an OpLowering: the instruction and its buffers, and
// the makers of the arguments of the runtime calls the op makes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_PLANBUILDER_H
#define FSDP_SCHEDULE_PLANBUILDER_H

#include "fsdp/schedule/StepPlan.h"

#include <map>
#include <unordered_map>
#include <vector>

namespace fsdp::schedule {

class PlanBuilder;

/// The lowering's view of one instruction.
class OpLowering {
public:
  OpLowering(PlanBuilder &b, const Instruction &in);

  const Program &prog;
  const Instruction &in;
  const std::vector<int64_t> &o, &r;
  const BufferDesc &desc(int64_t id) const { return prog.buffer(id); }
  /// The instruction's dtype: its first result's (its first operand's for
  /// an op without results).
  DType dtype() const;

  // Arguments.
  Arg stream() const { return {ArgKind::Stream}; }
  Arg channel(Group g) const;
  /// Buffer `id`'s memory (its root's slot + its view offset + `bytes`);
  /// the buffer must be live.
  Arg buf(int64_t id, int64_t bytes = 0);
  Arg operand(size_t i) { return buf(o[i]); }
  Arg result(size_t i) { return buf(r[i]); }
  /// buf(id) + rank(g) · scale bytes: this rank's part of a buffer.
  Arg bufAtRank(int64_t id, Group g, int64_t scale);
  Arg null() const { return {ArgKind::Null}; }
  Arg i32(int64_t v) const;
  Arg i64(int64_t v) const;
  Arg f64(double v) const;
  Arg dtypeArg(DType t) const { return i32(static_cast<int64_t>(toC(t))); }
  Arg t() const { return dtypeArg(dtype()); }
  /// (rank(g) / divisor) · scale + plus, as an int64_t argument.
  Arg rankTimes(Group g, int64_t scale, int64_t plus = 0,
                int64_t divisor = 1) const;
  /// An array of the device pointers of `ids`.
  Arg buffers(const std::vector<int64_t> &ids);
  /// A constant int64_t array (null when empty).
  Arg int64s(const std::vector<int64_t> &values);
  /// The event slot of a collective that starts with this call, in flight
  /// on the roots of `send` and `recv` until it is waited on.
  Arg startCollective(int64_t send, int64_t recv);

  /// Calls runtime entry point `entry` (an `int fsdp_*(...)` returning a
  /// status) with `args`.
  void call(const char *entry, std::vector<Arg> args);
  /// fsdp.free: buffer `id`'s life ends here.
  void release(int64_t id);

private:
  PlanBuilder &b;
};

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_PLANBUILDER_H
