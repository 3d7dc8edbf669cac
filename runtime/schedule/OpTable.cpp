//===- OpTable.cpp - the op definitions by kind, and the shared checks ----===//
//
// Gathers the definitions of the op families (ops/*.cpp) into one table by
// OpKind, and implements Checker, the validation helpers every op's rules
// use (OpDefs.h).
//
//===----------------------------------------------------------------------===//
#include "OpDefs.h"
#include "ShapeUtil.h"

namespace fsdp::schedule {

AttrSpec groupAttr(const char *dflt, bool pipeline) {
  int index = 0;
  for (int i = 0; i < kNumGroups; ++i)
    if (std::string(kGroupNames[i]) == dflt)
      index = i;
  std::vector<const char *> names(kGroupNames,
                                  kGroupNames + (pipeline ? kNumGroups : 4));
  AttrSpec s = choice("group", names, index);
  s.unknownStyle = true;
  return s;
}

AttrSpec reductionAttr() {
  // Index 0 is "avg": Instruction::average().
  return choice("op", {"avg", "sum"},
                std::string(kDefaultReduction) == "avg" ? 0 : 1);
}

namespace {

struct OpTable {
  std::vector<OpDef> defs;
  std::vector<int> byKind;
  OpTable() {
    for (auto family :
         {computeOps, distributedOps, optimizerOps, transformerOps})
      for (OpDef &d : family())
        defs.push_back(std::move(d));
    for (size_t i = 0; i < defs.size(); ++i) {
      size_t k = static_cast<size_t>(defs[i].kind);
      if (byKind.size() <= k)
        byKind.resize(k + 1, -1);
      byKind[k] = static_cast<int>(i);
    }
  }
};

const OpTable &table() {
  static const OpTable t;
  return t;
}

} // namespace

bool hasLowering(OpKind kind) {
  size_t k = static_cast<size_t>(kind);
  return k < table().byKind.size() && table().byKind[k] >= 0;
}

const OpDef &opDef(OpKind kind) {
  if (!hasLowering(kind))
    throw Error(std::string("internal error: op '") + opName(kind) +
                "' has no definition in runtime/schedule/ops");
  return table()
      .defs[static_cast<size_t>(table().byKind[static_cast<size_t>(kind)])];
}

//===--- Checker ----------------------------------------------------------===//

Checker::Checker(const Program &p, const Instruction &in, size_t index)
    : prog(p), in(in), o(in.operands), r(in.results), ctx(p.where(index)) {
  for (const auto *list : {&in.operands, &in.results, &in.frees})
    for (int64_t id : *list)
      if (!prog.buffers().count(id))
        fail("unknown buffer id " + std::to_string(id));
}

void Checker::fail(const std::string &what) const {
  throw Error(ctx + ": " + what);
}

void Checker::need(size_t nOps, size_t nRes) const {
  if (o.size() != nOps)
    fail("expected " + std::to_string(nOps) + " operand(s), got " +
         std::to_string(o.size()));
  if (r.size() != nRes)
    fail("expected " + std::to_string(nRes) + " result(s), got " +
         std::to_string(r.size()));
}

void Checker::sameNumel(int64_t a, int64_t b) const {
  if (desc(a).numel != desc(b).numel)
    fail("buffer " + std::to_string(a) + " " + shapeStr(desc(a).shape) +
         " and buffer " + std::to_string(b) + " " + shapeStr(desc(b).shape) +
         " differ in size");
}

void Checker::floatSame(std::initializer_list<int64_t> ids) const {
  floatSame(std::vector<int64_t>(ids));
}

void Checker::floatSame(const std::vector<int64_t> &ids) const {
  DType t = desc(ids.front()).dtype;
  for (int64_t id : ids) {
    if (!isFloatDType(desc(id).dtype))
      fail("buffer " + std::to_string(id) + " has dtype " +
           dtypeName(desc(id).dtype) +
           ", expected a float dtype (f32, f64, bf16, f16)");
    if (desc(id).dtype != t)
      fail("mixed dtypes (" + std::string(dtypeName(t)) + " and " +
           dtypeName(desc(id).dtype) + ")");
  }
}

void Checker::wideFloat(const std::vector<int64_t> &ids) const {
  // "Mixed precision": the compiler casts the reduced gradient to f32.
  for (int64_t id : ids)
    if (isHalfDType(desc(id).dtype))
      fail(in.op + " needs f32 or f64 operands and results, but buffer " +
           std::to_string(id) + " is " + dtypeName(desc(id).dtype) +
           " (cast the gradient and keep an f32 master copy of the "
           "parameters)");
}

int64_t Checker::lastDim(int64_t id) const {
  const auto &s = desc(id).shape;
  if (s.empty())
    fail("buffer " + std::to_string(id) + " must have rank >= 1");
  return s.back();
}

void Checker::f64Scalar(int64_t id, const char *what) const {
  if (desc(id).dtype != DType::F64 || desc(id).numel != 1)
    fail(std::string(what) + " (buffer " + std::to_string(id) +
         ") must be one f64, got " + dtypeName(desc(id).dtype) + " " +
         shapeStr(desc(id).shape));
}

void Checker::sameDType(int64_t a, int64_t b) const {
  if (desc(a).dtype != desc(b).dtype)
    fail("operand and result dtypes differ");
}

} // namespace fsdp::schedule
