//===- Parse.cpp - the JSON schedule into a Program -----------------------===//
//
// Parsing and static validation of runtime/docs/schedule-format.md into
// fsdp::schedule::Program: header fields, units, buffers (view chains
// resolved and bounds-checked), the arena plan, inputs/outputs and
// instructions, whose attributes are decoded by their op's attribute list
// and whose operands are checked by their op's rules (OpDefs.h, ops/). So a
// step runs into data errors only. Messages name the file, the instruction
// index and its `loc`.
//
//===----------------------------------------------------------------------===//
#include "OpDefs.h"
#include "ShapeUtil.h"

#include "fsdp/Sharding.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

using nlohmann::json;

namespace fsdp::schedule {

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
  DType t;
  if (!lookupDType(s, t))
    throw Error(ctx + ": unknown dtype '" + s +
                "' (supported: f32, f64, bf16, f16, i32, i64)");
  return t;
}

double numberOr(const json &obj, const char *key, double dflt,
                const std::string &ctx) {
  if (!obj.contains(key))
    return dflt;
  if (!obj.at(key).is_number())
    throw Error(ctx + ": attribute '" + key + "' must be a number, got " +
                obj.at(key).dump());
  return obj.at(key).get<double>();
}

/// "a", "b" or "c" for messages.
std::string quotedChoices(const std::vector<const char *> &choices) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i)
    s += std::string(i == 0                    ? ""
                     : i + 1 == choices.size() ? " or "
                                               : ", ") +
         "\"" + choices[i] + "\"";
  return s;
}

/// Attribute `spec` of `attrs` decoded (or its default).
AttrValue decodeAttr(const AttrSpec &spec, const json &attrs,
                     const OptimizerDesc &opt, const std::string &ctx) {
  AttrValue v;
  std::string key = spec.name;
  if (!attrs.contains(key)) {
    if (spec.required)
      throw Error(ctx + ": missing attribute '" + key + "'");
    v.number = spec.optimizerDefault ? opt.*spec.optimizerDefault : spec.dflt;
    v.integer = static_cast<int64_t>(spec.dflt);
    return v;
  }
  const json &a = attrs.at(key);
  switch (spec.type) {
  case AttrType::Number:
    v.number = numberOr(attrs, spec.name, 0, ctx);
    break;
  case AttrType::Integer:
    if (!a.is_number_integer())
      throw Error(ctx + ": attribute '" + key + "' must be an integer, got " +
                  a.dump());
    v.integer = a.get<int64_t>();
    break;
  case AttrType::Flag:
    if (!a.is_boolean())
      throw Error(ctx + ": attribute '" + key + "' must be a boolean, got " +
                  a.dump());
    v.integer = a.get<bool>();
    break;
  case AttrType::Ints:
    v.ints = intList(a, ctx + ": attribute '" + key + "'");
    break;
  case AttrType::Choice: {
    std::string s = a.is_string() ? a.get<std::string>() : a.dump();
    for (size_t i = 0; i < spec.choices.size(); ++i)
      if (s == spec.choices[i]) {
        v.integer = static_cast<int64_t>(i);
        return v;
      }
    if (spec.unknownStyle) {
      std::string list;
      for (const char *c : spec.choices)
        list += (list.empty() ? "" : ", ") + std::string(c);
      throw Error(ctx + ": unknown " + key + " '" + s +
                  "' (supported: " + list + ")");
    }
    throw Error(ctx + ": attribute '" + key + "' must be " +
                quotedChoices(spec.choices) + ", got " + s);
  }
  }
  return v;
}

} // namespace

/// Attributes the compiler writes for people and tools, which no op reads.
const char *const kNoteAttrs[] = {"unit", "bucket", "async", "fqn", "offset"};

/// Fills a Program from the JSON text, one section at a time.
class Parser {
public:
  Parser(Program &p, const json &root) : p(p), root(root), src(p.sourceName) {}

  void parse(int64_t expectedWorldSize) {
    parseHeader(expectedWorldSize);
    parseOptimizer();
    parseUnits();
    parseBuffers();
    parseArena();
    resolveViews();
    parseIo("inputs", p.inputList, true);
    parseIo("outputs", p.outputList, false);
    checkCarriedLayouts();
    parseInstructions();
    p.validateAliases();
    p.validateInPlace();
  }

private:
  void parseHeader(int64_t expectedWorldSize);
  void parseGrid();
  void parseOptimizer();
  void parseUnits();
  UnitDesc parseUnit(const json &u);
  void parseBuffers();
  void parseArena();
  void resolveViews();
  void parseIo(const char *key, std::vector<IoDesc> &list, bool isIn);
  void checkUnitIo(const json &e, IoDesc &io, const std::string &ctx);
  void checkCarriedLayouts();
  void parseInstructions();
  Instruction parseInstruction(const json &ij, size_t idx);

  Program &p;
  const json &root;
  const std::string &src;
};

void Parser::parseHeader(int64_t expectedWorldSize) {
  if (!root.contains("format") || !root["format"].is_string() ||
      root["format"] != kFormat)
    throw Error(src + ": not an fsdp schedule: 'format' is " +
                (root.contains("format") ? root["format"].dump()
                                         : std::string("missing")) +
                ", expected \"fsdp-schedule\"");
  if (!root.contains("version") || !root["version"].is_number_integer() ||
      root["version"].get<int64_t>() != kVersion)
    throw Error(src + ": unsupported schedule version " +
                (root.contains("version") ? root["version"].dump()
                                          : std::string("(missing)")) +
                "; this runtime supports version " + std::to_string(kVersion) +
                " (recompile it with this fsdp-translate)");

  p.functionName = root.value("function", std::string("forward"));
  p.worldSizeValue = intField(root, "world_size", src);
  if (p.worldSizeValue < 1)
    throw Error(src + ": world_size must be >= 1, got " +
                std::to_string(p.worldSizeValue));
  if (expectedWorldSize > 0 && p.worldSizeValue != expectedWorldSize)
    throw Error(src + ": the schedule was planned for world_size " +
                std::to_string(p.worldSizeValue) + " but " +
                std::to_string(expectedWorldSize) +
                " rank(s) are running (mpirun -np " +
                std::to_string(expectedWorldSize) + ")");
  if (root.contains("strategy")) {
    p.strategyName = strField(root, "strategy", src);
    if (!contains(kStrategies, p.strategyName)) {
      std::string list;
      for (const char *s : kStrategies)
        list += (list.empty() ? "" : ", ") + std::string(s);
      throw Error(src + ": unknown strategy '" + p.strategyName +
                  "' (supported: " + list + ")");
    }
  }
  parseGrid();
  if (root.contains("pipeline")) {
    const json &pl = root["pipeline"];
    if (!pl.is_object())
      throw Error(src + ": 'pipeline' must be an object");
    const std::string ctx = src + ": pipeline";
    p.pipelineStagesValue = intField(pl, "stages", ctx);
    p.pipelineStageValue = intField(pl, "stage", ctx);
    if (p.pipelineStagesValue < 1 || p.pipelineStageValue < 0 ||
        p.pipelineStageValue >= p.pipelineStagesValue)
      throw Error(src + ": pipeline stage " +
                  std::to_string(p.pipelineStageValue) + " of " +
                  std::to_string(p.pipelineStagesValue) + " is out of range");
    if (pl.contains("schedule")) {
      p.pipelineScheduleName = strField(pl, "schedule", ctx);
      if (!contains({"gpipe", "1f1b", "interleaved-1f1b"},
                    p.pipelineScheduleName))
        throw Error(ctx + ": unknown schedule '" + p.pipelineScheduleName +
                    "' (supported: gpipe, 1f1b, interleaved-1f1b)");
    }
    auto optional = [&](const char *key, int64_t absent) {
      return pl.contains(key) ? intField(pl, key, ctx) : absent;
    };
    int64_t &m = p.pipelineMicroBatchesValue, &v = p.pipelineChunksValue;
    m = optional("micro_batches", 0);
    v = optional("chunks", 1);
    // fsdp-pipeline's rules; the tags (and the watchdog) decode with m, v.
    if (pl.contains("micro_batches") && m < p.pipelineStagesValue)
      throw Error(ctx + ": micro_batches " + std::to_string(m) +
                  " must be >= the " + std::to_string(p.pipelineStagesValue) +
                  " stages (each stage needs a micro-batch in flight)");
    if (v < 1)
      throw Error(ctx + ": chunks " + std::to_string(v) + " must be >= 1");
  }
  p.globalBatchValue =
      root.contains("global_batch") ? intField(root, "global_batch", src) : 0;
}

// Sharding strategy and grid ("Sharding strategies"): R x S = N.
void Parser::parseGrid() {
  p.replicasValue = 1;
  p.tensorParallelValue = 1;
  if (root.contains("tensor_parallel")) {
    p.tensorParallelValue = intField(root, "tensor_parallel", src);
    if (p.tensorParallelValue < 1 ||
        p.worldSizeValue % p.tensorParallelValue != 0)
      throw Error(src + ": tensor_parallel " +
                  std::to_string(p.tensorParallelValue) +
                  " must be >= 1 and divide world_size " +
                  std::to_string(p.worldSizeValue));
  }
  int64_t dp = p.worldSizeValue / p.tensorParallelValue;
  p.shardSizeValue = dp;
  if (!root.contains("grid"))
    return;
  const json &g = root["grid"];
  std::string ctx = src + ": grid";
  if (!g.is_object())
    throw Error(ctx +
                " must be an object {\"replicas\": R, \"shard_size\": S}, "
                "got " +
                g.dump());
  p.replicasValue = intField(g, "replicas", ctx);
  p.shardSizeValue = intField(g, "shard_size", ctx);
  if (p.shardSizeValue < 1 || p.replicasValue < 1)
    throw Error(ctx + ": replicas " + std::to_string(p.replicasValue) +
                " and shard_size " + std::to_string(p.shardSizeValue) +
                " must be >= 1");
  if (p.replicasValue * p.shardSizeValue != dp)
    throw Error(
        ctx + ": replicas " + std::to_string(p.replicasValue) +
        " x shard_size " + std::to_string(p.shardSizeValue) + " = " +
        std::to_string(p.replicasValue * p.shardSizeValue) +
        " does not equal world_size " + std::to_string(p.worldSizeValue) +
        (p.tensorParallelValue > 1
             ? " / tensor_parallel " + std::to_string(p.tensorParallelValue)
             : std::string()));
}

void Parser::parseOptimizer() {
  if (!root.contains("optimizer"))
    return;
  const json &o = root["optimizer"];
  std::string ctx = src + ": optimizer";
  OptimizerDesc &od = p.optimizerDesc;
  od.kind = o.value("kind", std::string(kDefaultOptimizer));
  if (!contains(kOptimizers, od.kind))
    throw Error(ctx + ": unknown kind '" + od.kind +
                "' (supported: adamw, sgd)");
  od.lr = numberOr(o, "lr", od.lr, ctx);
  od.beta1 = numberOr(o, "beta1", od.beta1, ctx);
  od.beta2 = numberOr(o, "beta2", od.beta2, ctx);
  od.eps = numberOr(o, "eps", od.eps, ctx);
  od.weightDecay = numberOr(o, "weight_decay", od.weightDecay, ctx);
}

void Parser::parseUnits() {
  for (const json &u : root.value("units", json::array())) {
    UnitDesc ud = parseUnit(u);
    if (p.findUnit(ud.name))
      throw Error(src + ": unit '" + ud.name + "': duplicate unit name");
    p.unitList.push_back(std::move(ud));
  }
}

UnitDesc Parser::parseUnit(const json &u) {
  UnitDesc ud;
  std::string ctx = src + ": unit";
  ud.name = strField(u, "name", ctx);
  ctx += " '" + ud.name + "'";
  ud.dtype = parseDType(u, ctx);
  ud.numel = intField(u, "numel", ctx);
  ud.paddedNumel = intField(u, "padded_numel", ctx);
  ud.shardNumel = intField(u, "shard_numel", ctx);
  // padded_numel: a multiple of S, at least numel and S (the compiler pads
  // with fsdp::paddedNumel(numel, S)); shard_numel = padded / S.
  int64_t S = p.shardSizeValue;
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
    pd.globalShape = pd.shape;
    if (pj.contains("tensor_slice")) {
      const json &ts = pj["tensor_slice"];
      std::string tctx = pctx + ": tensor_slice";
      pd.tpDim = intField(ts, "dim", tctx);
      pd.tpBlocks = intField(ts, "blocks", tctx);
      pd.globalShape = intListField(ts, "global_shape", tctx);
      int64_t T = p.tensorParallelValue;
      bool ok = pd.tpDim >= 0 &&
                pd.tpDim < static_cast<int64_t>(pd.shape.size()) &&
                pd.globalShape.size() == pd.shape.size() && pd.tpBlocks >= 1;
      for (size_t k = 0; ok && k < pd.shape.size(); ++k)
        ok = static_cast<int64_t>(k) == pd.tpDim
                 ? pd.globalShape[k] == pd.shape[k] * T &&
                       pd.shape[k] % pd.tpBlocks == 0
                 : pd.globalShape[k] == pd.shape[k];
      if (!ok)
        throw Error(tctx + ": global_shape " + shapeStr(pd.globalShape) +
                    " split along dim " + std::to_string(pd.tpDim) + " in " +
                    std::to_string(pd.tpBlocks) + " block(s) over " +
                    "tensor_parallel " + std::to_string(T) +
                    " does not give the shape " + shapeStr(pd.shape));
    }
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
  return ud;
}

void Parser::parseBuffers() {
  for (const json &b : field(root, "buffers", src)) {
    BufferDesc bd;
    bd.id = intField(b, "id", src + ": buffer");
    std::string ctx = src + ": buffer " + std::to_string(bd.id);
    if (p.bufferMap.count(bd.id))
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
    if (b.contains("in_place_of") && !b["in_place_of"].is_null()) {
      bd.inPlaceOf = intField(b, "in_place_of", ctx);
      if (bd.inPlaceOf < 0)
        throw Error(ctx + ": in_place_of must be a buffer id, got " +
                    std::to_string(bd.inPlaceOf));
    }
    if (b.contains("arena_offset") && !b["arena_offset"].is_null()) {
      bd.arenaOffset = intField(b, "arena_offset", ctx);
      if (bd.arenaOffset < 0)
        throw Error(ctx + ": arena_offset must be >= 0, got " +
                    std::to_string(bd.arenaOffset));
    }
    p.bufferMap[bd.id] = bd;
  }
}

// The planned arena ("Runtime decisions"): used when memory_plan has
// arena_bytes and every owned buffer an arena_offset; each offset must be
// aligned and its bytes inside the arena.
void Parser::parseArena() {
  p.arenaPlanned = false;
  if (!root.contains("memory_plan") || !root["memory_plan"].is_object())
    return;
  const json &mp = root["memory_plan"];
  std::string ctx = src + ": memory_plan";
  if (mp.contains("peak_bytes"))
    p.plannedPeak = intField(mp, "peak_bytes", ctx);
  if (mp.contains("peak_bytes_with_scratch"))
    p.plannedPeakScratch = intField(mp, "peak_bytes_with_scratch", ctx);
  if (!mp.contains("arena_bytes"))
    return;
  p.arenaSize = intField(mp, "arena_bytes", ctx);
  p.arenaAlignmentValue = mp.contains("arena_alignment")
                              ? intField(mp, "arena_alignment", ctx)
                              : 64;
  int64_t align = p.arenaAlignmentValue;
  if (p.arenaSize < 0 || align < 1 || (align & (align - 1)) != 0)
    throw Error(ctx + ": arena_bytes " + std::to_string(p.arenaSize) +
                " must be >= 0 and arena_alignment " + std::to_string(align) +
                " a power of two");
  for (const auto &[id, bd] : p.bufferMap)
    if (bd.viewOf < 0 && bd.arenaOffset < 0)
      return; // a partial plan: allocate per buffer
  p.arenaPlanned = true;
  for (const auto &[id, bd] : p.bufferMap) {
    if (bd.viewOf >= 0)
      continue;
    std::string range = src + ": buffer " + std::to_string(id) +
                        ": arena bytes [" + std::to_string(bd.arenaOffset) +
                        ", " + std::to_string(bd.arenaOffset + bd.bytes) + ")";
    if (bd.arenaOffset + bd.bytes > p.arenaSize)
      throw Error(range + " end past the arena of " +
                  std::to_string(p.arenaSize) + " bytes");
    if (bd.arenaOffset % align != 0)
      throw Error(range + " start at an offset that is not " +
                  std::to_string(align) + "-byte aligned");
  }
}

// Resolve view chains to their allocated root; check bounds and dtypes.
void Parser::resolveViews() {
  for (auto &[id, bd] : p.bufferMap) {
    std::string ctx = src + ": buffer " + std::to_string(id);
    int64_t cur = id, off = 0;
    std::set<int64_t> seen;
    while (p.bufferMap.at(cur).viewOf >= 0) {
      if (!seen.insert(cur).second)
        throw Error(ctx + ": cycle in view_of chain");
      const BufferDesc &v = p.bufferMap.at(cur);
      if (!p.bufferMap.count(v.viewOf))
        throw Error(ctx + ": view_of unknown buffer " +
                    std::to_string(v.viewOf));
      off += v.offset;
      cur = v.viewOf;
    }
    const BufferDesc &rootBuf = p.bufferMap.at(cur);
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
}

void Parser::parseIo(const char *key, std::vector<IoDesc> &list, bool isIn) {
  for (const json &e : field(root, key, src)) {
    IoDesc io;
    std::string ctx = src + ": " + key;
    io.buffer = intField(e, "buffer", ctx);
    ctx += " buffer " + std::to_string(io.buffer);
    io.role = strField(e, "role", ctx);
    if (!p.bufferMap.count(io.buffer))
      throw Error(ctx + ": unknown buffer id");
    if (isIn ? !contains(kInputRoles, io.role)
             : !contains(kOutputRoles, io.role))
      throw Error(ctx + ": unknown role '" + io.role + "'");
    if (isIn && p.bufferMap[io.buffer].viewOf >= 0)
      throw Error(ctx + ": an input cannot be a view");
    if (e.contains("unit")) {
      checkUnitIo(e, io, ctx);
    } else if (e.contains("fqn") && (io.role == "param" || io.role == "grad")) {
      // An unsharded parameter (or its gradient), named by its FQN: the
      // buffer holds the whole tensor.
      io.fqn = strField(e, "fqn", ctx);
    } else if (isStateRole(io.role)) {
      throw Error(ctx + ": role '" + io.role + "' needs a 'unit'" +
                  (io.role == "param" ? " or an 'fqn'" : ""));
    }
    if (e.contains("global_shape")) {
      io.globalShape = intListField(e, "global_shape", ctx);
      // Rank r holds rows [r·b, (r+1)·b) of the global batch: the batch
      // the ops that place rows in it read (nn.dropout) is this one.
      if (p.globalBatchValue > 0 && !io.globalShape.empty() &&
          io.globalShape[0] != p.globalBatchValue)
        throw Error(ctx + ": global_shape " + shapeStr(io.globalShape) +
                    " does not have global_batch " +
                    std::to_string(p.globalBatchValue) + " rows");
    }
    if (!isIn && e.contains("aliases")) {
      io.aliases = intField(e, "aliases", ctx);
      if (io.aliases < 0)
        throw Error(ctx + ": 'aliases' must be an input buffer id, got " +
                    std::to_string(io.aliases));
    }
    list.push_back(io);
  }
}

void Parser::checkUnitIo(const json &e, IoDesc &io, const std::string &ctx) {
  io.unit = strField(e, "unit", ctx);
  const UnitDesc *u = p.findUnit(io.unit);
  if (!u)
    throw Error(ctx + ": unknown unit '" + io.unit + "'");
  if (e.contains("layout")) {
    io.layout = strField(e, "layout", ctx);
    if (!contains(kLayouts, io.layout))
      throw Error(ctx + ": unknown layout '" + io.layout +
                  "' (supported: shard, full)");
  }
  bool full = io.layout == "full";
  int64_t want = full ? u->paddedNumel : u->shardNumel;
  const BufferDesc &bd = p.bufferMap[io.buffer];
  // "Mixed precision": a `param` may be held in a 2-byte float dtype (the
  // param-dtype copy beside an f32 `master`); every other unit role has the
  // unit's dtype.
  bool dtypeOk =
      bd.dtype == u->dtype ||
      (io.role == "param" && isHalfDType(bd.dtype) && isFloatDType(u->dtype));
  if (bd.numel != want || !dtypeOk)
    throw Error(ctx + ": shape " + shapeStr(bd.shape) + " " +
                dtypeName(bd.dtype) + " does not hold unit '" + io.unit + "' " +
                (full ? "full padded buffer" : "shard") + " of " +
                std::to_string(want) + " " + dtypeName(u->dtype) +
                (io.role == "param" ? " (or bf16/f16)" : "") + " (layout '" +
                io.layout + "')");
}

// An output that replaces an input at the next step keeps its layout.
void Parser::checkCarriedLayouts() {
  for (const IoDesc &o : p.outputList)
    for (const IoDesc &i : p.inputList)
      if (!o.unit.empty() && o.unit == i.unit && o.role == i.role &&
          o.layout != i.layout)
        throw Error(src + ": output buffer " + std::to_string(o.buffer) +
                    " (role '" + o.role + "', unit '" + o.unit +
                    "') has layout '" + o.layout + "' but input buffer " +
                    std::to_string(i.buffer) + " has layout '" + i.layout +
                    "'");
}

void Parser::parseInstructions() {
  const json &insts = field(root, "instructions", src);
  if (!insts.is_array())
    throw Error(src + ": 'instructions' must be a list");
  for (size_t idx = 0; idx < insts.size(); ++idx) {
    p.program.push_back(parseInstruction(insts[idx], idx));
    opDef(p.program.back().kind).validate(Checker(p, p.program.back(), idx));
  }
}

Instruction Parser::parseInstruction(const json &ij, size_t idx) {
  Instruction in;
  std::string ctx = src + ": instruction #" + std::to_string(idx);
  in.op = strField(ij, "op", ctx);
  in.loc = ij.value("loc", std::string());
  if (!in.loc.empty())
    ctx += " (" + in.loc + ")";
  if (!lookupOp(in.op.c_str(), in.kind) || !hasLowering(in.kind))
    throw Error(ctx + ": unknown op '" + in.op + "'");
  ctx += " '" + in.op + "'";
  in.operands = intListField(ij, "operands", ctx, false);
  in.results = intListField(ij, "results", ctx, false);
  in.frees = intListField(ij, "frees", ctx, false);
  json attrs = ij.value("attrs", json::object());
  if (!attrs.is_object())
    throw Error(ctx + ": 'attrs' must be an object, got " + attrs.dump());
  // A unit named by an op must be one of the schedule's units.
  if (attrs.contains("unit") && (!attrs["unit"].is_string() ||
                                 !p.findUnit(attrs["unit"].get<std::string>())))
    throw Error(ctx + ": unknown unit " + attrs["unit"].dump());
  const std::vector<AttrSpec> &specs = opDef(in.kind).attrs;
  // An attribute the op does not read is a mistake (a misspelt name would
  // silently run with the default), except the compiler's notes for people
  // and tools: which unit or bucket, async, a view's FQN and element offset.
  for (const auto &item : attrs.items()) {
    // Not a structured binding: C++17 lambdas cannot capture one.
    const std::string &key = item.key();
    if (!std::count(std::begin(kNoteAttrs), std::end(kNoteAttrs), key) &&
        std::none_of(specs.begin(), specs.end(),
                     [&](const AttrSpec &s) { return key == s.name; })) {
      std::string reads;
      for (const AttrSpec &s : specs)
        reads += (reads.empty() ? "" : ", ") + std::string(s.name);
      throw Error(
          ctx + ": unknown attribute '" + key + "'" +
          (reads.empty() ? " (it has none)" : " (it reads: " + reads + ")"));
    }
  }
  for (const AttrSpec &spec : specs)
    in.attrs.emplace_back(spec.name,
                          decodeAttr(spec, attrs, p.optimizerDesc, ctx));
  return in;
}

Program Program::fromFile(const std::string &path, int64_t expectedWorldSize,
                          int64_t worldRank) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("cannot open schedule file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return fromString(ss.str(), expectedWorldSize, path, worldRank);
}

namespace {
/// A pipeline-parallel document: {"world_size": N, "pipeline_stages": P,
/// "stages": [program 0, ..., program P-1]}; returns stage
/// worldRank / (N / P)'s program and its expected world size N / P.
std::pair<const json *, int64_t>
pipelineStageOf(const json &root, const std::string &name,
                int64_t expectedWorldSize, int64_t worldRank, int64_t &stage) {
  auto integer = [&](const char *key) {
    if (!root.contains(key) || !root[key].is_number_integer())
      throw Error(name + ": a pipeline-parallel schedule needs an integer '" +
                  key + "'");
    return root[key].get<int64_t>();
  };
  int64_t n = integer("world_size"), stages = integer("pipeline_stages");
  const json &list = root["stages"];
  if (stages < 1 || n % stages != 0 || !list.is_array() ||
      static_cast<int64_t>(list.size()) != stages)
    throw Error(name + ": pipeline_stages " + std::to_string(stages) +
                " must be >= 1, divide world_size " + std::to_string(n) +
                " and count the 'stages' programs");
  if (expectedWorldSize > 0 && n != expectedWorldSize)
    throw Error(name + ": the schedule was planned for world_size " +
                std::to_string(n) + " but " +
                std::to_string(expectedWorldSize) +
                " rank(s) are running (mpirun -np " + std::to_string(n) + ")");
  if (worldRank < 0 || worldRank >= n)
    throw Error(name + ": rank " + std::to_string(worldRank) +
                " is outside world_size " + std::to_string(n));
  stage = worldRank / (n / stages);
  return {&list[static_cast<size_t>(stage)], n / stages};
}
} // namespace

Program Program::fromString(const std::string &text, int64_t expectedWorldSize,
                            const std::string &name, int64_t worldRank) {
  Program p;
  p.sourceName = name;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &e) {
    // e.what() names the line and column of the error (parse_error), or the
    // number that does not fit (out_of_range 406, found by fuzzing).
    throw Error(name + ": not valid JSON: " + e.what());
  }
  if (!root.is_object())
    throw Error(name + ": not a schedule: the top level is not a JSON object");
  auto fnv = [](const json &j) {
    uint64_t h = 1469598103934665603ull; // FNV-1a, 64-bit
    for (unsigned char c : j.dump())
      h = (h ^ c) * 1099511628211ull;
    return h;
  };
  if (root.contains("stages")) {
    int64_t stage = 0;
    auto [doc, stageWorld] =
        pipelineStageOf(root, name, expectedWorldSize, worldRank, stage);
    Program sp = fromString(doc->dump(), expectedWorldSize > 0 ? stageWorld : 0,
                            name + " (stage " + std::to_string(stage) + ")");
    if (sp.pipelineStagesValue != root["pipeline_stages"].get<int64_t>() ||
        sp.pipelineStageValue != stage)
      throw Error(name + ": program " + std::to_string(stage) +
                  " of 'stages' is not stage " + std::to_string(stage) +
                  " of " + root["pipeline_stages"].dump() +
                  " (its 'pipeline' header says otherwise)");
    sp.jobFingerprintValue = fnv(root);
    return sp;
  }
  p.wholeFingerprint = p.jobFingerprintValue = fnv(root);
  try {
    Parser(p, root).parse(expectedWorldSize);
  } catch (const json::exception &e) {
    // A field of the wrong JSON type where the parser reads it with a
    // default (value(), get()): found by fuzzing (test/fuzz).
    throw Error(name + ": malformed schedule: " + e.what());
  }
  return p;
}

bool Program::tryFromFile(const std::string &path, Program &out,
                          std::string &error, int64_t expectedWorldSize) {
  try {
    out = fromFile(path, expectedWorldSize);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

bool Program::tryFromString(const std::string &text, Program &out,
                            std::string &error, int64_t expectedWorldSize,
                            const std::string &name) {
  try {
    out = fromString(text, expectedWorldSize, name);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

} // namespace fsdp::schedule
