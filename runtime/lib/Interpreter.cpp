//===- Interpreter.cpp - Loads and validates fsdp-schedule JSON -----------===//
//
// Parsing and static validation of runtime/docs/schedule-format.md into
// fsdp::rt::Program: header fields, units, buffers (with view chains resolved
// and bounds-checked), inputs/outputs and instruction attributes. The
// per-op operand/dtype/shape checks are in InterpreterValidate.cpp, so that
// run() (InterpreterRun.cpp) only meets data errors. Messages name the file,
// the instruction index and its `loc`.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Interpreter.h"
#include "ShapeUtil.h"

#include "fsdp/Sharding.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

using nlohmann::json;

namespace fsdp::rt {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "?";
}

const char *groupName(Group g) {
  switch (g) {
  case Group::World:
    return "world";
  case Group::Shard:
    return "shard";
  case Group::Replicate:
    return "replicate";
  }
  return "?";
}

int64_t dtypeSize(DType t) {
  if (isHalfDType(t))
    return 2;
  return (t == DType::F32 || t == DType::I32) ? 4 : 8;
}

bool isFloatDType(DType t) {
  return t == DType::F32 || t == DType::F64 || isHalfDType(t);
}

bool isHalfDType(DType t) { return t == DType::BF16 || t == DType::F16; }

namespace {

// Typed field access with messages that name the JSON context.
const json &field(const json &obj, const char *key, const std::string &ctx) {
  if (!obj.is_object() || !obj.contains(key))
    throw Error(ctx + ": missing field '" + key + "'");
  return obj.at(key);
}
int64_t intField(const json &obj, const char *key, const std::string &ctx) {
  const json &v = field(obj, key, ctx);
  if (!v.is_number_integer())
    throw Error(ctx + ": field '" + key + "' must be an integer, got " +
                v.dump());
  return v.get<int64_t>();
}
std::string strField(const json &obj, const char *key, const std::string &ctx) {
  const json &v = field(obj, key, ctx);
  if (!v.is_string())
    throw Error(ctx + ": field '" + key + "' must be a string, got " +
                v.dump());
  return v.get<std::string>();
}
std::vector<int64_t> intList(const json &v, const std::string &ctx) {
  if (!v.is_array())
    throw Error(ctx + " must be a list of integers, got " + v.dump());
  std::vector<int64_t> out;
  for (const json &e : v) {
    if (!e.is_number_integer())
      throw Error(ctx + " must be a list of integers, got " + v.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}
std::vector<int64_t> intListField(const json &obj, const char *key,
                                  const std::string &ctx,
                                  bool required = true) {
  if (!obj.contains(key)) {
    if (required)
      throw Error(ctx + ": missing field '" + key + "'");
    return {};
  }
  return intList(obj.at(key), ctx + ": field '" + key + "'");
}

DType parseDType(const json &obj, const std::string &ctx) {
  std::string s = strField(obj, "dtype", ctx);
  if (s == "f32")
    return DType::F32;
  if (s == "f64")
    return DType::F64;
  if (s == "i32")
    return DType::I32;
  if (s == "i64")
    return DType::I64;
  if (s == "bf16")
    return DType::BF16;
  if (s == "f16")
    return DType::F16;
  throw Error(ctx + ": unknown dtype '" + s +
              "' (supported: f32, f64, bf16, f16, i32, i64)");
}

double attrNum(const json &attrs, const char *key, double dflt,
               const std::string &ctx) {
  if (!attrs.contains(key))
    return dflt;
  if (!attrs.at(key).is_number())
    throw Error(ctx + ": attribute '" + key + "' must be a number, got " +
                attrs.at(key).dump());
  return attrs.at(key).get<double>();
}
int64_t attrInt(const json &attrs, const char *key, int64_t dflt,
                const std::string &ctx) {
  if (!attrs.contains(key))
    return dflt;
  if (!attrs.at(key).is_number_integer())
    throw Error(ctx + ": attribute '" + key + "' must be an integer, got " +
                attrs.at(key).dump());
  return attrs.at(key).get<int64_t>();
}
bool attrBool(const json &attrs, const char *key, const std::string &ctx) {
  if (!attrs.contains(key))
    return false;
  if (!attrs.at(key).is_boolean())
    throw Error(ctx + ": attribute '" + key + "' must be a boolean, got " +
                attrs.at(key).dump());
  return attrs.at(key).get<bool>();
}

} // namespace

const BufferDesc &Program::buffer(int64_t id) const {
  auto it = bufferMap.find(id);
  if (it == bufferMap.end())
    throw Error(sourceName + ": unknown buffer id " + std::to_string(id));
  return it->second;
}

const UnitDesc *Program::findUnit(const std::string &name) const {
  for (const UnitDesc &u : unitList)
    if (u.name == name)
      return &u;
  return nullptr;
}

const IoDesc *Program::findUnitInput(const std::string &role,
                                     const std::string &unit) const {
  for (const IoDesc &io : inputList)
    if (io.role == role && io.unit == unit)
      return &io;
  return nullptr;
}

int64_t Program::groupSize(Group g) const {
  switch (g) {
  case Group::World:
    return worldSizeValue;
  case Group::Shard:
    return shardSizeValue;
  case Group::Replicate:
    return replicasValue;
  }
  return 1;
}

int64_t Program::numClasses() const {
  for (const Instruction &i : program)
    if (i.kind == OpKind::CrossEntropy) {
      const BufferDesc &l = buffer(i.operands[0]);
      return l.shape.empty() ? 1 : l.shape.back();
    }
  return -1;
}

std::string Program::instructionName(size_t index) const {
  const Instruction &i = program[index];
  return "instruction #" + std::to_string(index) + " '" + i.op + "'" +
         (i.loc.empty() ? "" : " (" + i.loc + ")");
}

std::string Program::where(size_t index) const {
  return sourceName + ": " + instructionName(index);
}

Program Program::fromFile(const std::string &path, bool checkWorldSize) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open schedule file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return fromString(ss.str(), checkWorldSize, path);
}

Program Program::fromString(const std::string &text, bool checkWorldSize,
                            const std::string &name) {
  Program p;
  p.sourceName = name;
  try {
    p.parse(text, checkWorldSize);
  } catch (const json::exception &e) {
    // A field of the wrong JSON type where the parser reads it with a
    // default (value(), get()): found by fuzzing (test/fuzz).
    throw Error(name + ": malformed schedule: " + e.what());
  }
  return p;
}

void Program::parse(const std::string &text, bool checkWorldSize) {
  const std::string &src = sourceName;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &e) {
    // e.what() names the line and column of the error (parse_error), or the
    // number that does not fit (out_of_range 406, found by fuzzing).
    throw Error(src + ": not valid JSON: " + e.what());
  }
  if (!root.is_object())
    throw Error(src + ": not a schedule: the top level is not a JSON object");
  {
    uint64_t h = 1469598103934665603ull; // FNV-1a, 64-bit
    for (unsigned char c : root.dump())
      h = (h ^ c) * 1099511628211ull;
    wholeFingerprint = h;
  }
  if (!root.contains("format") || !root["format"].is_string() ||
      root["format"] != schedule::kFormat)
    throw Error(src + ": not an fsdp schedule: 'format' is " +
                (root.contains("format") ? root["format"].dump()
                                         : std::string("missing")) +
                ", expected \"fsdp-schedule\"");
  if (!root.contains("version") || !root["version"].is_number_integer() ||
      root["version"].get<int64_t>() != schedule::kVersion)
    throw Error(src + ": unsupported schedule version " +
                (root.contains("version") ? root["version"].dump()
                                          : std::string("(missing)")) +
                "; this runtime supports version " +
                std::to_string(schedule::kVersion) +
                " (recompile it with this fsdp-translate)");

  functionName = root.value("function", std::string("forward"));
  worldSizeValue = intField(root, "world_size", src);
  if (worldSizeValue < 1)
    throw Error(src + ": world_size must be >= 1, got " +
                std::to_string(worldSizeValue));
  if (checkWorldSize && worldSizeValue != fsdp_world_size())
    throw Error(src + ": the schedule was planned for world_size " +
                std::to_string(worldSizeValue) + " but " +
                std::to_string(fsdp_world_size()) +
                " rank(s) are running (mpirun -np " +
                std::to_string(fsdp_world_size()) + ")");
  // Sharding strategy and grid ("Sharding strategies"): R x S = N.
  static const std::set<std::string> kStrategies = {
      "full-shard", "shard-grad-op", "shard-optimizer", "no-shard",
      "hybrid-shard"};
  if (root.contains("strategy")) {
    strategyName = strField(root, "strategy", src);
    if (!kStrategies.count(strategyName))
      throw Error(src + ": unknown strategy '" + strategyName +
                  "' (supported: full-shard, shard-grad-op, shard-optimizer, "
                  "no-shard, hybrid-shard)");
  }
  replicasValue = 1;
  shardSizeValue = worldSizeValue;
  if (root.contains("grid")) {
    const json &g = root["grid"];
    std::string ctx = src + ": grid";
    if (!g.is_object())
      throw Error(ctx +
                  " must be an object {\"replicas\": R, "
                  "\"shard_size\": S}, got " +
                  g.dump());
    replicasValue = intField(g, "replicas", ctx);
    shardSizeValue = intField(g, "shard_size", ctx);
    if (shardSizeValue < 1 || replicasValue < 1)
      throw Error(ctx + ": replicas " + std::to_string(replicasValue) +
                  " and shard_size " + std::to_string(shardSizeValue) +
                  " must be >= 1");
    if (replicasValue * shardSizeValue != worldSizeValue)
      throw Error(ctx + ": replicas " + std::to_string(replicasValue) +
                  " x shard_size " + std::to_string(shardSizeValue) + " = " +
                  std::to_string(replicasValue * shardSizeValue) +
                  " does not equal world_size " +
                  std::to_string(worldSizeValue));
  }
  globalBatchValue =
      root.contains("global_batch") ? intField(root, "global_batch", src) : 0;

  if (root.contains("optimizer")) {
    const json &o = root["optimizer"];
    std::string ctx = src + ": optimizer";
    optimizerDesc.kind =
        o.value("kind", std::string(schedule::kDefaultOptimizer));
    if (optimizerDesc.kind != "adamw" && optimizerDesc.kind != "sgd")
      throw Error(ctx + ": unknown kind '" + optimizerDesc.kind +
                  "' (supported: adamw, sgd)");
    optimizerDesc.lr = attrNum(o, "lr", optimizerDesc.lr, ctx);
    optimizerDesc.beta1 = attrNum(o, "beta1", optimizerDesc.beta1, ctx);
    optimizerDesc.beta2 = attrNum(o, "beta2", optimizerDesc.beta2, ctx);
    optimizerDesc.eps = attrNum(o, "eps", optimizerDesc.eps, ctx);
    optimizerDesc.weightDecay =
        attrNum(o, "weight_decay", optimizerDesc.weightDecay, ctx);
  }

  // Units.
  for (const json &u : root.value("units", json::array())) {
    UnitDesc ud;
    std::string ctx = src + ": unit";
    ud.name = strField(u, "name", ctx);
    ctx += " '" + ud.name + "'";
    ud.dtype = parseDType(u, ctx);
    ud.numel = intField(u, "numel", ctx);
    ud.paddedNumel = intField(u, "padded_numel", ctx);
    ud.shardNumel = intField(u, "shard_numel", ctx);
    // padded_numel: a multiple of S, at least numel and S (the compiler
    // pads with fsdp::paddedNumel(numel, S)); shard_numel = padded / S.
    int64_t S = shardSizeValue;
    for (int64_t v : {ud.numel, ud.paddedNumel, ud.shardNumel})
      if (v < 0 || v > kMaxCount)
        throw Error(
            ctx +
            ": numel, padded_numel and shard_numel must be in [0, 2^62], got " +
            std::to_string(v));
    if (ud.shardNumel > kMaxCount / S)
      throw Error(ctx + ": shard_numel " + std::to_string(ud.shardNumel) +
                  " x shard_size " + std::to_string(S) + " exceeds 2^62");
    if (ud.paddedNumel < ud.numel || ud.paddedNumel < S ||
        ud.paddedNumel % S != 0 || ud.shardNumel * S != ud.paddedNumel)
      throw Error(ctx + ": padded_numel " + std::to_string(ud.paddedNumel) +
                  " / shard_numel " + std::to_string(ud.shardNumel) +
                  " do not match numel " + std::to_string(ud.numel) +
                  " over shard_size " + std::to_string(S) +
                  " (padded_numel must be a multiple of " + std::to_string(S) +
                  ", at least numel and " + std::to_string(S) +
                  ", and shard_numel = padded_numel / " + std::to_string(S) +
                  "; expected e.g. " +
                  std::to_string(fsdp::paddedNumel(ud.numel, S)) + " / " +
                  std::to_string(fsdp::shardNumel(ud.numel, S)) + ")");
    for (const json &pj : u.value("params", json::array())) {
      ParamDesc pd;
      pd.fqn = strField(pj, "fqn", ctx + ": param");
      std::string pctx = ctx + ": param '" + pd.fqn + "'";
      pd.shape = intListField(pj, "shape", pctx);
      pd.offset = intField(pj, "offset", pctx);
      pd.numel = intField(pj, "numel", pctx);
      pd.init = pj.value("init", std::string("zeros"));
      pd.trainable = pj.value("trainable", true);
      int64_t shapeNumel;
      try {
        shapeNumel = numelOf(pd.shape);
      } catch (const Error &e) {
        throw Error(pctx + ": " + e.what() + " " + shapeStr(pd.shape));
      }
      if (pd.numel != shapeNumel)
        throw Error(pctx + ": numel " + std::to_string(pd.numel) +
                    " != product of shape " + shapeStr(pd.shape));
      if (pd.offset < 0 || pd.offset > kMaxCount ||
          pd.offset + pd.numel > ud.numel)
        throw Error(pctx + ": elements [" + std::to_string(pd.offset) + ", " +
                    std::to_string(pd.offset + pd.numel) +
                    ") exceed the unit's numel " + std::to_string(ud.numel));
      ud.params.push_back(pd);
    }
    if (findUnit(ud.name))
      throw Error(ctx + ": duplicate unit name");
    unitList.push_back(ud);
  }

  // Buffers.
  for (const json &b : field(root, "buffers", src)) {
    BufferDesc bd;
    bd.id = intField(b, "id", src + ": buffer");
    std::string ctx = src + ": buffer " + std::to_string(bd.id);
    if (bufferMap.count(bd.id))
      throw Error(ctx + ": duplicate buffer id");
    bd.dtype = parseDType(b, ctx);
    bd.shape = intListField(b, "shape", ctx);
    for (int64_t d : bd.shape)
      if (d < 0)
        throw Error(ctx + ": negative dimension in shape " +
                    shapeStr(bd.shape));
    try {
      bd.numel = numelOf(bd.shape);
    } catch (const Error &e) {
      throw Error(ctx + ": " + e.what() + " " + shapeStr(bd.shape));
    }
    if (bd.numel > kMaxCount / dtypeSize(bd.dtype))
      throw Error(ctx + ": shape " + shapeStr(bd.shape) +
                  " has more than 2^62 bytes");
    bd.bytes = bd.numel * dtypeSize(bd.dtype);
    if (b.contains("bytes") && intField(b, "bytes", ctx) != bd.bytes)
      throw Error(ctx + ": 'bytes' is " +
                  std::to_string(intField(b, "bytes", ctx)) + " but shape " +
                  shapeStr(bd.shape) + " of " + dtypeName(bd.dtype) + " is " +
                  std::to_string(bd.bytes) + " bytes");
    bd.cls = b.value("class", std::string("temporary"));
    if (b.contains("view_of") && !b["view_of"].is_null()) {
      bd.viewOf = intField(b, "view_of", ctx);
      bd.offset = b.contains("offset") ? intField(b, "offset", ctx) : 0;
    }
    if (b.contains("arena_offset") && !b["arena_offset"].is_null())
      bd.arenaOffset = intField(b, "arena_offset", ctx);
    bufferMap[bd.id] = bd;
  }
  // The planned arena ("Runtime decisions"): used when memory_plan has
  // arena_bytes and every owned buffer an arena_offset; each offset must be
  // aligned and its bytes inside the arena.
  arenaPlanned = false;
  if (root.contains("memory_plan") && root["memory_plan"].is_object() &&
      root["memory_plan"].contains("peak_bytes"))
    plannedPeak =
        intField(root["memory_plan"], "peak_bytes", src + ": memory_plan");
  if (root.contains("memory_plan") && root["memory_plan"].is_object() &&
      root["memory_plan"].contains("peak_bytes_with_scratch"))
    plannedPeakScratch = intField(
        root["memory_plan"], "peak_bytes_with_scratch", src + ": memory_plan");
  if (root.contains("memory_plan") && root["memory_plan"].is_object() &&
      root["memory_plan"].contains("arena_bytes")) {
    const json &mp = root["memory_plan"];
    std::string ctx = src + ": memory_plan";
    arenaSize = intField(mp, "arena_bytes", ctx);
    arenaAlignmentValue = mp.contains("arena_alignment")
                              ? intField(mp, "arena_alignment", ctx)
                              : 64;
    if (arenaSize < 0 || arenaAlignmentValue < 1 ||
        (arenaAlignmentValue & (arenaAlignmentValue - 1)) != 0)
      throw Error(ctx + ": arena_bytes " + std::to_string(arenaSize) +
                  " must be >= 0 and arena_alignment " +
                  std::to_string(arenaAlignmentValue) + " a power of two");
    arenaPlanned = true;
    for (const auto &[id, bd] : bufferMap)
      if (bd.viewOf < 0 && bd.arenaOffset < 0)
        arenaPlanned = false; // a partial plan: allocate per buffer
    for (const auto &[id, bd] : bufferMap) {
      if (!arenaPlanned)
        break;
      if (bd.viewOf >= 0)
        continue;
      std::string range = src + ": buffer " + std::to_string(id) +
                          ": arena bytes [" + std::to_string(bd.arenaOffset) +
                          ", " + std::to_string(bd.arenaOffset + bd.bytes) +
                          ")";
      if (bd.arenaOffset + bd.bytes > arenaSize)
        throw Error(range + " end past the arena of " +
                    std::to_string(arenaSize) + " bytes");
      if (bd.arenaOffset % arenaAlignmentValue != 0)
        throw Error(range + " start at an offset that is not " +
                    std::to_string(arenaAlignmentValue) + "-byte aligned");
    }
  }
  // Resolve view chains to their allocated root; check bounds and dtypes.
  for (auto &[id, bd] : bufferMap) {
    std::string ctx = src + ": buffer " + std::to_string(id);
    int64_t cur = id, off = 0;
    std::set<int64_t> seen;
    while (bufferMap.at(cur).viewOf >= 0) {
      if (!seen.insert(cur).second)
        throw Error(ctx + ": cycle in view_of chain");
      const BufferDesc &v = bufferMap.at(cur);
      if (!bufferMap.count(v.viewOf))
        throw Error(ctx + ": view_of unknown buffer " +
                    std::to_string(v.viewOf));
      off += v.offset;
      cur = v.viewOf;
    }
    const BufferDesc &rootBuf = bufferMap.at(cur);
    if (bd.viewOf >= 0) {
      if (rootBuf.dtype != bd.dtype)
        throw Error(ctx + ": view of " + dtypeName(rootBuf.dtype) + " buffer " +
                    std::to_string(cur) + " has dtype " + dtypeName(bd.dtype));
      if (off < 0 || off + bd.numel > rootBuf.numel)
        throw Error(ctx + ": view elements [" + std::to_string(off) + ", " +
                    std::to_string(off + bd.numel) + ") exceed base buffer " +
                    std::to_string(cur) + " of " +
                    std::to_string(rootBuf.numel) + " elements");
    }
    bd.rootId = cur;
    bd.rootOffset = off;
  }

  // Inputs and outputs.
  static const std::set<std::string> kInRoles = {
      "features",    "labels", "tokens", "targets", "step",
      "total_steps", "param",  "master", "exp_avg", "exp_avg_sq"};
  static const std::set<std::string> kOutRoles = {
      "loss", "param",  "master", "exp_avg", "exp_avg_sq",
      "grad", "logits", "output", "lr",      "grad_norm"};
  auto parseIo = [&](const char *key, std::vector<IoDesc> &list, bool isIn) {
    for (const json &e : field(root, key, src)) {
      IoDesc io;
      std::string ctx = src + ": " + key;
      io.buffer = intField(e, "buffer", ctx);
      ctx += " buffer " + std::to_string(io.buffer);
      io.role = strField(e, "role", ctx);
      if (!bufferMap.count(io.buffer))
        throw Error(ctx + ": unknown buffer id");
      if (isIn ? !kInRoles.count(io.role) : !kOutRoles.count(io.role))
        throw Error(ctx + ": unknown role '" + io.role + "'");
      if (isIn && bufferMap[io.buffer].viewOf >= 0)
        throw Error(ctx + ": an input cannot be a view");
      if (e.contains("unit")) {
        io.unit = strField(e, "unit", ctx);
        const UnitDesc *u = findUnit(io.unit);
        if (!u)
          throw Error(ctx + ": unknown unit '" + io.unit + "'");
        if (e.contains("layout")) {
          io.layout = strField(e, "layout", ctx);
          if (io.layout != "shard" && io.layout != "full")
            throw Error(ctx + ": unknown layout '" + io.layout +
                        "' (supported: shard, full)");
        }
        bool full = io.layout == "full";
        int64_t want = full ? u->paddedNumel : u->shardNumel;
        const BufferDesc &bd = bufferMap[io.buffer];
        // "Mixed precision": a `param` may be held in a 2-byte float dtype
        // (the param-dtype copy beside an f32 `master`); every other unit
        // role has the unit's dtype.
        bool dtypeOk = bd.dtype == u->dtype ||
                       (io.role == "param" && isHalfDType(bd.dtype) &&
                        isFloatDType(u->dtype));
        if (bd.numel != want || !dtypeOk)
          throw Error(ctx + ": shape " + shapeStr(bd.shape) + " " +
                      dtypeName(bd.dtype) + " does not hold unit '" + io.unit +
                      "' " + (full ? "full padded buffer" : "shard") + " of " +
                      std::to_string(want) + " " + dtypeName(u->dtype) +
                      (io.role == "param" ? " (or bf16/f16)" : "") +
                      " (layout '" + io.layout + "')");
      } else if (e.contains("fqn") &&
                 (io.role == "param" || io.role == "grad")) {
        // An unsharded parameter (or its gradient), named by its FQN: the
        // buffer holds the whole tensor.
        io.fqn = strField(e, "fqn", ctx);
      } else if (io.role == "param" || io.role == "master" ||
                 io.role == "exp_avg" || io.role == "exp_avg_sq") {
        throw Error(ctx + ": role '" + io.role + "' needs a 'unit'" +
                    (io.role == "param" ? " or an 'fqn'" : ""));
      }
      if (e.contains("global_shape"))
        io.globalShape = intListField(e, "global_shape", ctx);
      if (!isIn && e.contains("aliases")) {
        io.aliases = intField(e, "aliases", ctx);
        if (io.aliases < 0)
          throw Error(ctx + ": 'aliases' must be an input buffer id, got " +
                      std::to_string(io.aliases));
      }
      list.push_back(io);
    }
  };
  parseIo("inputs", inputList, true);
  parseIo("outputs", outputList, false);
  // An output that replaces an input at the next step keeps its layout.
  for (const IoDesc &o : outputList)
    for (const IoDesc &i : inputList)
      if (!o.unit.empty() && o.unit == i.unit && o.role == i.role &&
          o.layout != i.layout)
        throw Error(src + ": output buffer " + std::to_string(o.buffer) +
                    " (role '" + o.role + "', unit '" + o.unit +
                    "') has layout '" + o.layout + "' but input buffer " +
                    std::to_string(i.buffer) + " has layout '" + i.layout +
                    "'");

  // Instructions.
  const json &insts = field(root, "instructions", src);
  if (!insts.is_array())
    throw Error(src + ": 'instructions' must be a list");
  for (size_t idx = 0; idx < insts.size(); ++idx) {
    const json &ij = insts[idx];
    Instruction in;
    std::string ctx = src + ": instruction #" + std::to_string(idx);
    in.op = strField(ij, "op", ctx);
    in.loc = ij.value("loc", std::string());
    if (!in.loc.empty())
      ctx += " (" + in.loc + ")";
    if (!schedule::lookupOp(in.op.c_str(), in.kind))
      throw Error(ctx + ": unknown op '" + in.op + "'");
    ctx += " '" + in.op + "'";
    in.operands = intListField(ij, "operands", ctx, false);
    in.results = intListField(ij, "results", ctx, false);
    in.frees = intListField(ij, "frees", ctx, false);
    json attrs = ij.value("attrs", json::object());
    in.value = attrNum(attrs, "value", 0.0, ctx);
    if (in.kind == OpKind::Constant && !attrs.contains("value"))
      throw Error(ctx + ": missing attribute 'value'");
    in.transA = attrBool(attrs, "transpose_a", ctx);
    in.transB = attrBool(attrs, "transpose_b", ctx);
    {
      std::string a = schedule::kDefaultGeluApproximation;
      if (attrs.contains("approximate"))
        a = attrs["approximate"].is_string()
                ? attrs["approximate"].get<std::string>()
                : attrs["approximate"].dump();
      if (a != "none" && a != "tanh")
        throw Error(ctx +
                    ": attribute 'approximate' must be \"none\" or "
                    "\"tanh\", got " +
                    a);
      in.approxTanh = (a == "tanh");
    }
    if (attrs.contains("axes"))
      in.axes = intList(attrs["axes"], ctx + ": attribute 'axes'");
    if (attrs.contains("offsets"))
      in.offsets = intList(attrs["offsets"], ctx + ": attribute 'offsets'");
    {
      std::string o = schedule::kDefaultReduction;
      if (attrs.contains("op"))
        o = attrs["op"].is_string() ? attrs["op"].get<std::string>()
                                    : attrs["op"].dump();
      if (o != "avg" && o != "sum")
        throw Error(ctx + ": attribute 'op' must be \"avg\" or \"sum\", got " +
                    o);
      in.average = (o == "avg");
    }
    // A unit named by an op must be one of the schedule's units.
    if (attrs.contains("unit") && (!attrs["unit"].is_string() ||
                                   !findUnit(attrs["unit"].get<std::string>())))
      throw Error(ctx + ": unknown unit " + attrs["unit"].dump());
    // Process group of collectives and fsdp.local_shard.
    {
      std::string g = in.kind == OpKind::AllReduce
                          ? schedule::kDefaultAllReduceGroup
                          : schedule::kDefaultGroup;
      if (attrs.contains("group"))
        g = attrs["group"].is_string() ? attrs["group"].get<std::string>()
                                       : attrs["group"].dump();
      if (g == "world")
        in.group = Group::World;
      else if (g == "shard")
        in.group = Group::Shard;
      else if (g == "replicate")
        in.group = Group::Replicate;
      else
        throw Error(ctx + ": unknown group '" + g +
                    "' (supported: world, shard, replicate)");
    }
    const OptimizerDesc &od = optimizerDesc;
    double dfltWd = od.weightDecay;
    in.lr = attrNum(attrs, "lr", od.lr, ctx);
    in.beta1 = attrNum(attrs, "beta1", od.beta1, ctx);
    in.beta2 = attrNum(attrs, "beta2", od.beta2, ctx);
    in.eps = attrNum(attrs, "eps", od.eps, ctx);
    in.weightDecay = attrNum(attrs, "weight_decay", dfltWd, ctx);
    // Transformer ops. Attributes the op cannot do without are required.
    auto require = [&](const char *key) {
      if (!attrs.contains(key))
        throw Error(ctx + ": missing attribute '" + key + "'");
    };
    switch (in.kind) {
    case OpKind::LayerNorm:
    case OpKind::LayerNormGrad:
    case OpKind::RmsNorm:
    case OpKind::RmsNormGrad:
      require("eps");
      break;
    case OpKind::EmbeddingGrad:
      require("num_embeddings");
      break;
    case OpKind::PositionEmbeddingGrad:
      require("num_positions");
      break;
    case OpKind::Rope:
      require("head_dim");
      require("theta");
      break;
    case OpKind::Attention:
    case OpKind::AttentionGrad:
      require("num_heads");
      require("num_kv_heads");
      break;
    case OpKind::Split:
      require("sizes");
      require("axis");
      break;
    case OpKind::Concat:
      require("axis");
      break;
    case OpKind::MicroBatch:
      require("index");
      require("count");
      break;
    case OpKind::Pack:
    case OpKind::Unpack:
      require("blocks");
      break;
    default:
      break;
    }
    in.blocks = attrInt(attrs, "blocks", 1, ctx);
    in.index = attrInt(attrs, "index", 0, ctx);
    in.count = attrInt(attrs, "count", 1, ctx);
    in.transposeWeight = attrBool(attrs, "transpose_weight", ctx);
    in.numEmbeddings = attrInt(attrs, "num_embeddings", 0, ctx);
    in.numPositions = attrInt(attrs, "num_positions", 0, ctx);
    in.headDim = attrInt(attrs, "head_dim", 0, ctx);
    in.theta = attrNum(attrs, "theta", 0.0, ctx);
    in.inverse = attrBool(attrs, "inverse", ctx);
    in.numHeads = attrInt(attrs, "num_heads", 0, ctx);
    in.numKvHeads = attrInt(attrs, "num_kv_heads", 0, ctx);
    in.axis = attrInt(attrs, "axis", 0, ctx);
    if (attrs.contains("sizes"))
      in.sizes = intList(attrs["sizes"], ctx + ": attribute 'sizes'");
    if (in.kind == OpKind::LrSchedule) {
      for (const char *key :
           {"kind", "lr", "warmup_steps", "decay_steps", "min_lr"})
        require(key);
      std::string k = attrs["kind"].is_string()
                          ? attrs["kind"].get<std::string>()
                          : attrs["kind"].dump();
      if (k == "constant")
        in.lrKind = FSDP_LR_CONSTANT;
      else if (k == "linear")
        in.lrKind = FSDP_LR_LINEAR;
      else if (k == "cosine")
        in.lrKind = FSDP_LR_COSINE;
      else
        throw Error(ctx +
                    ": attribute 'kind' must be \"constant\", "
                    "\"linear\" or \"cosine\", got " +
                    k);
      in.warmupSteps = attrInt(attrs, "warmup_steps", 0, ctx);
      in.decaySteps = attrInt(attrs, "decay_steps", 0, ctx);
      in.minLr = attrNum(attrs, "min_lr", 0.0, ctx);
    }
    in.maxNorm = attrNum(attrs, "max_norm", 0.0, ctx);
    if (attrs.contains("no_decay"))
      in.noDecay = intList(attrs["no_decay"], ctx + ": attribute 'no_decay'");
    in.sharded = attrBool(attrs, "sharded", ctx);
    program.push_back(in);
    validateInstruction(program.back(), idx);
  }
  validateAliases();
}

bool isStateRole(const std::string &role) {
  return role == "param" || role == "master" || role == "exp_avg" ||
         role == "exp_avg_sq";
}

const IoDesc *Program::carriedOutput(int64_t inputBuffer) const {
  const IoDesc *in = nullptr;
  for (const IoDesc &i : inputList)
    if (i.buffer == inputBuffer)
      in = &i;
  if (!in || in->unit.empty() || !isStateRole(in->role))
    return nullptr;
  for (const IoDesc &o : outputList)
    if (o.role == in->role && o.unit == in->unit)
      return &o;
  return nullptr;
}

uint64_t Program::collectiveFingerprint() const {
  uint64_t h = 1469598103934665603ull; // FNV-1a, 64-bit
  auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const Instruction &in : program) {
    if (in.kind != OpKind::AllGather && in.kind != OpKind::ReduceScatter &&
        in.kind != OpKind::AllReduce)
      continue;
    mix(static_cast<int64_t>(in.kind));
    mix(static_cast<int64_t>(in.group));
    mix(in.average ? 1 : 0);
    for (int64_t id : in.operands) {
      mix(static_cast<int64_t>(buffer(id).dtype));
      mix(buffer(id).numel);
    }
    for (int64_t id : in.results)
      mix(buffer(id).numel);
  }
  return h;
}

void Program::checkSameCollectivesOnAllRanks() const {
  int init = 0, world = 1;
  MPI_Initialized(&init);
  if (!init)
    return;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world == 1 || world != worldSizeValue)
    return;
  unsigned long long mine = collectiveFingerprint();
  std::vector<unsigned long long> all(static_cast<size_t>(world));
  if (MPI_Allgather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1,
                    MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(sourceName +
                ": MPI_Allgather of the collective fingerprints failed");
  // Each rank's schedule file name, for the messages (fixed width: names
  // longer than that are cut).
  constexpr int kName = 256;
  std::vector<char> names(static_cast<size_t>(world) * kName, '\0');
  std::string me = sourceName.substr(0, kName - 1);
  std::vector<char> mine2(kName, '\0');
  std::copy(me.begin(), me.end(), mine2.begin());
  unsigned long long whole = wholeFingerprint;
  std::vector<unsigned long long> wholes(static_cast<size_t>(world));
  if (MPI_Allgather(mine2.data(), kName, MPI_CHAR, names.data(), kName,
                    MPI_CHAR, MPI_COMM_WORLD) != MPI_SUCCESS ||
      MPI_Allgather(&whole, 1, MPI_UNSIGNED_LONG_LONG, wholes.data(), 1,
                    MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD) != MPI_SUCCESS)
    throw Error(sourceName +
                ": MPI_Allgather of the schedule fingerprints failed");
  auto name = [&](int r) {
    return std::string(&names[static_cast<size_t>(r) * kName]);
  };
  for (int r = 0; r < world; ++r)
    if (all[static_cast<size_t>(r)] != all[0])
      throw CollectiveError(
          sourceName + ": rank " + std::to_string(r) +
          " runs a different sequence of collectives than rank 0 (schedules '" +
          name(r) + "' and '" + name(0) + "', fingerprints " +
          std::to_string(all[static_cast<size_t>(r)]) + " and " +
          std::to_string(all[0]) + "): every rank must run the same schedule");
  for (int r = 0; r < world; ++r)
    if (wholes[static_cast<size_t>(r)] != wholes[0])
      throw CollectiveError(
          sourceName + ": rank " + std::to_string(r) +
          " runs another schedule than rank 0 (schedules '" + name(r) +
          "' and '" + name(0) +
          "'): the collectives agree, but an instruction or an attribute "
          "differs (fingerprints " +
          std::to_string(wholes[static_cast<size_t>(r)]) + " and " +
          std::to_string(wholes[0]) +
          "): every rank must run the same schedule");
}

} // namespace fsdp::rt
