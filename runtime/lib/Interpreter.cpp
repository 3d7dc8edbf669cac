//===- Interpreter.cpp - Loads and validates fsdp-schedule JSON -----------===//
//
// Parsing and static validation of docs/schedule-format.md (version 1) into
// fsdp::rt::Program: header fields, units, buffers (with view chains resolved
// and bounds-checked), inputs/outputs and every instruction's operand counts,
// dtypes and shapes, so that run() (InterpreterRun.cpp) only meets data
// errors. Messages name the file, the instruction index and its `loc`.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Interpreter.h"

#include "fsdp/Sharding.h"
#include "fsdp/runtime.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

using nlohmann::json;

namespace fsdp::rt {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F64: return "f64";
  case DType::I32: return "i32";
  case DType::I64: return "i64";
  }
  return "?";
}

int64_t dtypeSize(DType t) {
  return (t == DType::F32 || t == DType::I32) ? 4 : 8;
}

namespace {

constexpr int kSupportedVersion = 1;

bool isFloat(DType t) { return t == DType::F32 || t == DType::F64; }
bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

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
    throw Error(ctx + ": field '" + key + "' must be a string, got " + v.dump());
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
                                  const std::string &ctx, bool required = true) {
  if (!obj.contains(key)) {
    if (required)
      throw Error(ctx + ": missing field '" + key + "'");
    return {};
  }
  return intList(obj.at(key), ctx + ": field '" + key + "'");
}

DType parseDType(const json &obj, const std::string &ctx) {
  std::string s = strField(obj, "dtype", ctx);
  if (s == "f32") return DType::F32;
  if (s == "f64") return DType::F64;
  if (s == "i32") return DType::I32;
  if (s == "i64") return DType::I64;
  throw Error(ctx + ": unknown dtype '" + s +
              "' (supported: f32, f64, i32, i64)");
}

struct OpInfo {
  const char *name;
  OpKind kind;
};
const OpInfo kOps[] = {
    {"arith.constant", OpKind::Constant},
    {"nn.linear", OpKind::Linear},
    {"nn.matmul", OpKind::Matmul},
    {"nn.add", OpKind::Add},
    {"nn.mul", OpKind::Mul},
    {"nn.relu", OpKind::Relu},
    {"nn.relu_grad", OpKind::ReluGrad},
    {"nn.gelu", OpKind::Gelu},
    {"nn.gelu_grad", OpKind::GeluGrad},
    {"nn.reduce_sum", OpKind::ReduceSum},
    {"nn.broadcast", OpKind::Broadcast},
    {"nn.cross_entropy", OpKind::CrossEntropy},
    {"nn.cross_entropy_grad", OpKind::CrossEntropyGrad},
    {"nn.sgd_update", OpKind::SgdUpdate},
    {"nn.adamw_update", OpKind::AdamwUpdate},
    {"fsdp.all_gather", OpKind::AllGather},
    {"fsdp.reduce_scatter", OpKind::ReduceScatter},
    {"fsdp.free", OpKind::Free},
    {"fsdp.param_view", OpKind::ParamView},
    {"fsdp.flatten", OpKind::Flatten},
};

double attrNum(const json &attrs, const char *key, double dflt,
               const std::string &ctx) {
  if (!attrs.contains(key))
    return dflt;
  if (!attrs.at(key).is_number())
    throw Error(ctx + ": attribute '" + key + "' must be a number, got " +
                attrs.at(key).dump());
  return attrs.at(key).get<double>();
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

int64_t Program::numClasses() const {
  for (const Instruction &i : program)
    if (i.kind == OpKind::CrossEntropy) {
      const BufferDesc &l = buffer(i.operands[0]);
      return l.shape.empty() ? 1 : l.shape.back();
    }
  return -1;
}

std::string Program::where(size_t index) const {
  const Instruction &i = program[index];
  std::string s = sourceName + ": instruction #" + std::to_string(index) +
                  " '" + i.op + "'";
  if (!i.loc.empty())
    s += " (" + i.loc + ")";
  return s;
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
  p.parse(text, checkWorldSize);
  return p;
}

void Program::parse(const std::string &text, bool checkWorldSize) {
  const std::string &src = sourceName;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error &e) {
    // e.what() names the line and column of the error.
    throw Error(src + ": not valid JSON: " + e.what());
  }
  if (!root.is_object())
    throw Error(src + ": not a schedule: the top level is not a JSON object");
  if (!root.contains("format") || !root["format"].is_string() ||
      root["format"] != "fsdp-schedule")
    throw Error(src + ": not an fsdp schedule: 'format' is " +
                (root.contains("format") ? root["format"].dump()
                                         : std::string("missing")) +
                ", expected \"fsdp-schedule\"");
  if (!root.contains("version") || !root["version"].is_number_integer() ||
      root["version"].get<int64_t>() != kSupportedVersion)
    throw Error(src + ": unsupported schedule version " +
                (root.contains("version") ? root["version"].dump()
                                          : std::string("(missing)")) +
                "; this runtime supports version " +
                std::to_string(kSupportedVersion));

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
  globalBatchValue = root.contains("global_batch")
                         ? intField(root, "global_batch", src)
                         : 0;

  if (root.contains("optimizer")) {
    const json &o = root["optimizer"];
    std::string ctx = src + ": optimizer";
    optimizerDesc.kind = o.value("kind", std::string("adamw"));
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
    if (ud.paddedNumel != fsdp::paddedNumel(ud.numel, worldSizeValue) ||
        ud.shardNumel != fsdp::shardNumel(ud.numel, worldSizeValue))
      throw Error(ctx + ": padded_numel " + std::to_string(ud.paddedNumel) +
                  " / shard_numel " + std::to_string(ud.shardNumel) +
                  " do not match numel " + std::to_string(ud.numel) +
                  " over world_size " + std::to_string(worldSizeValue) +
                  " (expected " +
                  std::to_string(fsdp::paddedNumel(ud.numel, worldSizeValue)) +
                  " / " +
                  std::to_string(fsdp::shardNumel(ud.numel, worldSizeValue)) +
                  ")");
    for (const json &pj : u.value("params", json::array())) {
      ParamDesc pd;
      pd.fqn = strField(pj, "fqn", ctx + ": param");
      std::string pctx = ctx + ": param '" + pd.fqn + "'";
      pd.shape = intListField(pj, "shape", pctx);
      pd.offset = intField(pj, "offset", pctx);
      pd.numel = intField(pj, "numel", pctx);
      pd.init = pj.value("init", std::string("zeros"));
      pd.trainable = pj.value("trainable", true);
      if (pd.numel != numelOf(pd.shape))
        throw Error(pctx + ": numel " + std::to_string(pd.numel) +
                    " != product of shape " + shapeStr(pd.shape));
      if (pd.offset < 0 || pd.offset + pd.numel > ud.numel)
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
        throw Error(ctx + ": negative dimension in shape " + shapeStr(bd.shape));
    bd.numel = numelOf(bd.shape);
    bd.bytes = bd.numel * dtypeSize(bd.dtype);
    if (b.contains("bytes") && intField(b, "bytes", ctx) != bd.bytes)
      throw Error(ctx + ": 'bytes' is " + std::to_string(intField(b, "bytes", ctx)) +
                  " but shape " + shapeStr(bd.shape) + " of " +
                  dtypeName(bd.dtype) + " is " + std::to_string(bd.bytes) +
                  " bytes");
    bd.cls = b.value("class", std::string("temporary"));
    if (b.contains("view_of") && !b["view_of"].is_null()) {
      bd.viewOf = intField(b, "view_of", ctx);
      bd.offset = b.contains("offset") ? intField(b, "offset", ctx) : 0;
    }
    bufferMap[bd.id] = bd;
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
      "features", "labels", "tokens", "targets", "step",
      "param", "exp_avg", "exp_avg_sq"};
  static const std::set<std::string> kOutRoles = {"loss", "param", "exp_avg",
                                                  "exp_avg_sq", "grad",
                                                  "logits", "output"};
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
        const BufferDesc &bd = bufferMap[io.buffer];
        if (bd.numel != u->shardNumel || bd.dtype != u->dtype)
          throw Error(ctx + ": shape " + shapeStr(bd.shape) + " " +
                      dtypeName(bd.dtype) + " does not hold unit '" + io.unit +
                      "' shard of " + std::to_string(u->shardNumel) + " " +
                      dtypeName(u->dtype));
      } else if (e.contains("fqn") && (io.role == "param" || io.role == "grad")) {
        // An unsharded parameter (or its gradient), named by its FQN: the
        // buffer holds the whole tensor.
        io.fqn = strField(e, "fqn", ctx);
      } else if (io.role == "param" || io.role == "exp_avg" ||
                 io.role == "exp_avg_sq") {
        throw Error(ctx + ": role '" + io.role + "' needs a 'unit'" +
                    (io.role == "param" ? " or an 'fqn'" : ""));
      }
      if (e.contains("global_shape"))
        io.globalShape = intListField(e, "global_shape", ctx);
      list.push_back(io);
    }
  };
  parseIo("inputs", inputList, true);
  parseIo("outputs", outputList, false);

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
    bool known = false;
    for (const OpInfo &o : kOps)
      if (in.op == o.name) {
        in.kind = o.kind;
        known = true;
      }
    if (!known)
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
    if (attrs.contains("approximate")) {
      std::string a = attrs["approximate"].is_string()
                          ? attrs["approximate"].get<std::string>()
                          : attrs["approximate"].dump();
      if (a != "none" && a != "tanh")
        throw Error(ctx + ": attribute 'approximate' must be \"none\" or "
                          "\"tanh\", got " + a);
      in.approxTanh = (a == "tanh");
    }
    if (attrs.contains("axes"))
      in.axes = intList(attrs["axes"], ctx + ": attribute 'axes'");
    if (attrs.contains("offsets"))
      in.offsets = intList(attrs["offsets"], ctx + ": attribute 'offsets'");
    if (attrs.contains("op")) {
      std::string o = attrs["op"].is_string() ? attrs["op"].get<std::string>()
                                              : attrs["op"].dump();
      if (o != "avg" && o != "sum")
        throw Error(ctx + ": attribute 'op' must be \"avg\" or \"sum\", got " +
                    o);
      in.average = (o == "avg");
    }
    const OptimizerDesc &od = optimizerDesc;
    double dfltWd = od.weightDecay;
    in.lr = attrNum(attrs, "lr", od.lr, ctx);
    in.beta1 = attrNum(attrs, "beta1", od.beta1, ctx);
    in.beta2 = attrNum(attrs, "beta2", od.beta2, ctx);
    in.eps = attrNum(attrs, "eps", od.eps, ctx);
    in.weightDecay = attrNum(attrs, "weight_decay", dfltWd, ctx);
    program.push_back(in);
    validateInstruction(program.back(), idx);
  }
}

void Program::validateInstruction(const Instruction &in, size_t idx) const {
  std::string ctx = where(idx);
  auto need = [&](size_t nOps, size_t nRes) {
    if (in.operands.size() != nOps)
      throw Error(ctx + ": expected " + std::to_string(nOps) +
                  " operand(s), got " + std::to_string(in.operands.size()));
    if (in.results.size() != nRes)
      throw Error(ctx + ": expected " + std::to_string(nRes) +
                  " result(s), got " + std::to_string(in.results.size()));
  };
  for (const auto *list : {&in.operands, &in.results, &in.frees})
    for (int64_t id : *list)
      if (!bufferMap.count(id))
        throw Error(ctx + ": unknown buffer id " + std::to_string(id));
  auto B = [&](int64_t id) -> const BufferDesc & { return bufferMap.at(id); };
  auto sameNumel = [&](int64_t a, int64_t b) {
    if (B(a).numel != B(b).numel)
      throw Error(ctx + ": buffer " + std::to_string(a) + " " +
                  shapeStr(B(a).shape) + " and buffer " + std::to_string(b) +
                  " " + shapeStr(B(b).shape) + " differ in size");
  };
  auto floatSame = [&](std::initializer_list<int64_t> ids) {
    DType t = B(*ids.begin()).dtype;
    for (int64_t id : ids) {
      if (!isFloat(B(id).dtype))
        throw Error(ctx + ": buffer " + std::to_string(id) + " has dtype " +
                    dtypeName(B(id).dtype) + ", expected f32 or f64");
      if (B(id).dtype != t)
        throw Error(ctx + ": mixed dtypes (" + dtypeName(t) + " and " +
                    dtypeName(B(id).dtype) + ")");
    }
  };
  auto lastDim = [&](int64_t id) -> int64_t {
    const auto &s = B(id).shape;
    if (s.empty())
      throw Error(ctx + ": buffer " + std::to_string(id) +
                  " must have rank >= 1");
    return s.back();
  };
  const auto &o = in.operands;
  const auto &r = in.results;
  switch (in.kind) {
  case OpKind::Constant:
    need(0, 1);
    break;
  case OpKind::Linear: {
    if (o.size() != 2 && o.size() != 3)
      throw Error(ctx + ": expected 2 or 3 operands, got " +
                  std::to_string(o.size()));
    need(o.size(), 1);
    floatSame({o[0], o[1], r[0]});
    int64_t k = lastDim(o[0]);
    if (B(o[1]).shape.size() != 2 || B(o[1]).shape[1] != k)
      throw Error(ctx + ": weight " + shapeStr(B(o[1]).shape) +
                  " does not match input " + shapeStr(B(o[0]).shape));
    int64_t n = B(o[1]).shape[0];
    int64_t m = k ? B(o[0]).numel / k : 0;
    if (o.size() == 3) {
      floatSame({o[0], o[2]});
      if (B(o[2]).numel != n)
        throw Error(ctx + ": bias " + shapeStr(B(o[2]).shape) +
                    " does not match " + std::to_string(n) + " outputs");
    }
    if (B(r[0]).numel != m * n || (n && lastDim(r[0]) != n))
      throw Error(ctx + ": result " + shapeStr(B(r[0]).shape) +
                  " should be [" + std::to_string(m) + ", " +
                  std::to_string(n) + "]");
    break;
  }
  case OpKind::Matmul: {
    need(2, 1);
    floatSame({o[0], o[1], r[0]});
    int64_t ac = lastDim(o[0]), ar = ac ? B(o[0]).numel / ac : 0;
    int64_t bc = lastDim(o[1]), br = bc ? B(o[1]).numel / bc : 0;
    int64_t m = in.transA ? ac : ar, k = in.transA ? ar : ac;
    int64_t kb = in.transB ? bc : br, n = in.transB ? br : bc;
    if (k != kb)
      throw Error(ctx + ": inner dimensions differ: " + shapeStr(B(o[0]).shape) +
                  (in.transA ? "ᵀ" : "") + " · " + shapeStr(B(o[1]).shape) +
                  (in.transB ? "ᵀ" : ""));
    if (B(r[0]).numel != m * n)
      throw Error(ctx + ": result " + shapeStr(B(r[0]).shape) +
                  " should hold [" + std::to_string(m) + ", " +
                  std::to_string(n) + "]");
    break;
  }
  case OpKind::Add:
  case OpKind::Mul:
  case OpKind::ReluGrad:
  case OpKind::GeluGrad:
    need(2, 1);
    floatSame({o[0], o[1], r[0]});
    sameNumel(o[0], o[1]);
    sameNumel(o[0], r[0]);
    break;
  case OpKind::Relu:
  case OpKind::Gelu:
    need(1, 1);
    floatSame({o[0], r[0]});
    sameNumel(o[0], r[0]);
    break;
  case OpKind::ReduceSum:
  case OpKind::Broadcast: {
    need(1, 1);
    floatSame({o[0], r[0]});
    bool red = in.kind == OpKind::ReduceSum;
    const auto &full = red ? B(o[0]).shape : B(r[0]).shape;
    const auto &part = red ? B(r[0]).shape : B(o[0]).shape;
    std::vector<int64_t> expect;
    std::set<int64_t> ax(in.axes.begin(), in.axes.end());
    for (int64_t a : in.axes)
      if (a < 0 || a >= static_cast<int64_t>(full.size()))
        throw Error(ctx + ": axis " + std::to_string(a) +
                    " out of range for shape " + shapeStr(full));
    if (ax.size() != in.axes.size())
      throw Error(ctx + ": repeated axis in 'axes'");
    for (size_t i = 0; i < full.size(); ++i)
      if (!ax.count(static_cast<int64_t>(i)))
        expect.push_back(full[i]);
    if (numelOf(expect) != numelOf(part))
      throw Error(ctx + ": shape " + shapeStr(part) + " does not match " +
                  shapeStr(full) + " without axes " + shapeStr(in.axes));
    break;
  }
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyGrad: {
    bool grad = in.kind == OpKind::CrossEntropyGrad;
    need(grad ? 3 : 2, 1);
    if (!isInt(B(o[1]).dtype))
      throw Error(ctx + ": labels must be i32 or i64, got " +
                  dtypeName(B(o[1]).dtype));
    int64_t c = lastDim(o[0]);
    if (B(o[0]).numel != B(o[1]).numel * c)
      throw Error(ctx + ": logits " + shapeStr(B(o[0]).shape) +
                  " do not match labels " + shapeStr(B(o[1]).shape));
    if (grad) {
      floatSame({o[0], o[2], r[0]});
      sameNumel(o[0], r[0]);
      if (B(o[2]).numel != 1)
        throw Error(ctx + ": dloss must be a scalar");
    } else {
      floatSame({o[0], r[0]});
      if (B(r[0]).numel != 1)
        throw Error(ctx + ": the loss result must be a scalar");
    }
    break;
  }
  case OpKind::SgdUpdate:
    need(2, 1);
    floatSame({o[0], o[1], r[0]});
    sameNumel(o[0], o[1]);
    sameNumel(o[0], r[0]);
    break;
  case OpKind::AdamwUpdate:
    need(5, 3);
    floatSame({o[0], o[1], o[2], o[3], r[0], r[1], r[2]});
    for (int64_t id : {o[1], o[2], o[3], r[0], r[1], r[2]})
      sameNumel(o[0], id);
    if (!isInt(B(o[4]).dtype) || B(o[4]).numel != 1)
      throw Error(ctx + ": step must be an i64 scalar");
    break;
  case OpKind::AllGather:
  case OpKind::ReduceScatter: {
    need(1, 1);
    bool ag = in.kind == OpKind::AllGather;
    int64_t shard = ag ? o[0] : r[0], full = ag ? r[0] : o[0];
    if (B(shard).dtype != B(full).dtype)
      throw Error(ctx + ": operand and result dtypes differ");
    if (!ag && !isFloat(B(full).dtype) && in.average)
      throw Error(ctx + ": 'avg' needs a float buffer");
    if (B(full).numel != B(shard).numel * worldSizeValue)
      throw Error(ctx + ": full buffer " + std::to_string(full) + " has " +
                  std::to_string(B(full).numel) + " elements, expected shard " +
                  std::to_string(B(shard).numel) + " x world_size " +
                  std::to_string(worldSizeValue));
    break;
  }
  case OpKind::Free:
    need(1, 0);
    break;
  case OpKind::ParamView:
    need(1, 1);
    if (B(r[0]).viewOf < 0 || B(r[0]).rootId != B(o[0]).rootId)
      throw Error(ctx + ": result buffer " + std::to_string(r[0]) +
                  " must be a view_of operand buffer " + std::to_string(o[0]));
    break;
  case OpKind::Flatten:
    need(o.size(), 1);
    if (in.offsets.size() != o.size())
      throw Error(ctx + ": " + std::to_string(o.size()) + " operands but " +
                  std::to_string(in.offsets.size()) + " offsets");
    for (size_t i = 0; i < o.size(); ++i) {
      floatSame({o[i], r[0]});
      if (in.offsets[i] < 0 ||
          in.offsets[i] + B(o[i]).numel > B(r[0]).numel)
        throw Error(ctx + ": operand " + std::to_string(o[i]) + " at offset " +
                    std::to_string(in.offsets[i]) + " does not fit in " +
                    std::to_string(B(r[0]).numel) + " elements");
    }
    break;
  }
}

} // namespace fsdp::rt
