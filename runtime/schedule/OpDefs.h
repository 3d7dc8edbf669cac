//===- OpDefs.h - what the schedule library knows of each op ----*- C++ -*-===//
//
// Private to the schedule library. Each op of the format (Format.h's kOps)
// has one definition in runtime/schedule/ops/: the attributes it reads
// (decoded and defaulted once, by Parse.cpp), the rules its operands and
// results must meet (checked when the schedule is loaded) and its lowering:
// the runtime calls it makes, with their arguments, in the step plan
// (StepPlan.h), which both the executor and --convert-fsdp-to-llvm run.
// runtime/docs/adding-an-op.md lists the files a new op touches.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_OPDEFS_H
#define FSDP_SCHEDULE_OPDEFS_H

#include "fsdp/schedule/Program.h"
#include "fsdp/schedule/StepPlan.h"

#include <initializer_list>
#include <string>
#include <vector>

namespace fsdp::schedule {

//===--- Attributes -------------------------------------------------------===//

enum class AttrType { Number, Integer, Flag, Ints, Choice };

/// One attribute an op reads: its JSON type, whether it is required, and
/// its default (a number, or a choice's index; for the update ops' lr,
/// betas, eps and weight_decay the schedule's "optimizer" section).
struct AttrSpec {
  const char *name;
  AttrType type;
  bool required = false;
  double dflt = 0;
  std::vector<const char *> choices = {};
  /// Choices: "unknown <name> 'x' (supported: a, b)" instead of
  /// "attribute 'name' must be "a" or "b", got x".
  bool unknownStyle = false;
  /// Number: the default is this field of the optimizer section.
  double OptimizerDesc::*optimizerDefault = nullptr;
};

inline AttrSpec number(const char *name, bool required = false,
                       double dflt = 0) {
  return {name, AttrType::Number, required, dflt};
}
inline AttrSpec integer(const char *name, bool required = false,
                        int64_t dflt = 0) {
  return {name, AttrType::Integer, required, static_cast<double>(dflt)};
}
inline AttrSpec flag(const char *name, bool dflt = false) {
  return {name, AttrType::Flag, false, dflt ? 1.0 : 0.0};
}
inline AttrSpec ints(const char *name, bool required = false) {
  return {name, AttrType::Ints, required};
}
inline AttrSpec choice(const char *name, std::vector<const char *> choices,
                       int dflt = 0, bool required = false) {
  AttrSpec s{name, AttrType::Choice, required, static_cast<double>(dflt)};
  s.choices = std::move(choices);
  return s;
}
inline AttrSpec optimizerNumber(const char *name,
                                double OptimizerDesc::*field) {
  AttrSpec s{name, AttrType::Number};
  s.optimizerDefault = field;
  return s;
}
inline constexpr bool kRequired = true;

/// "group" of a collective (default `dflt`: kDefaultGroup or
/// kDefaultAllReduceGroup) and "op" (kDefaultReduction). `pipeline`: the
/// pipeline group is a choice too (fsdp.all_reduce: the gradient norm's sum
/// over the stages).
AttrSpec groupAttr(const char *dflt, bool pipeline = false);
AttrSpec reductionAttr();

//===--- Validation -------------------------------------------------------===//

/// The checks of one instruction against its program: every message names
/// the file, the instruction and its location, and says what was expected.
class Checker {
public:
  Checker(const Program &p, const Instruction &in, size_t index);

  const Program &prog;
  const Instruction &in;
  const std::vector<int64_t> &o, &r;
  const std::string ctx; ///< "file: instruction #i 'op' (loc)"

  const BufferDesc &desc(int64_t id) const { return prog.buffer(id); }
  [[noreturn]] void fail(const std::string &what) const;
  /// Exactly nOps operands and nRes results.
  void need(size_t nOps, size_t nRes) const;
  /// Buffers `a` and `b` hold as many elements.
  void sameNumel(int64_t a, int64_t b) const;
  /// Every buffer has one float dtype (f32, f64, bf16 or f16).
  void floatSame(std::initializer_list<int64_t> ids) const;
  void floatSame(const std::vector<int64_t> &ids) const;
  /// The optimizer updates see f32 (or f64) operands only.
  void wideFloat(const std::vector<int64_t> &ids) const;
  /// The last dimension of a buffer of rank >= 1.
  int64_t lastDim(int64_t id) const;
  /// A step statistic (learning rate, norm, coefficient): one f64.
  void f64Scalar(int64_t id, const char *what) const;
  /// The operand and result of a copy or collective have one dtype.
  void sameDType(int64_t a, int64_t b) const;
};

//===--- Definitions ------------------------------------------------------===//

class OpLowering;

struct OpDef {
  OpKind kind;
  std::vector<AttrSpec> attrs;
  void (*validate)(const Checker &c);
  void (*lower)(OpLowering &l);
};

/// The definitions of the op families (runtime/schedule/ops/*.cpp).
std::vector<OpDef> computeOps();
std::vector<OpDef> distributedOps();
std::vector<OpDef> optimizerOps();
std::vector<OpDef> transformerOps();

/// The definition of `kind`. Every op of kOps has one
/// (test/unit/DialectTest.cpp checks).
const OpDef &opDef(OpKind kind);

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_OPDEFS_H
