//===- InterpreterValidate.cpp - Static checks of each instruction --------===//
//
// Program::validateInstruction: operand/result counts, dtypes (float ops need
// one float dtype throughout, bf16/f16 included, except nn.cast; optimizer
// updates f32 or f64 only; indices and labels i32 or i64), shapes and
// attribute values of every op of runtime/docs/schedule-format.md, checked once
// at load time. Messages name the file, the instruction index, the op and its
// `loc`. Program::validateAliases checks that an output written in place
// into a state input ("aliases") is safe: nothing reads the old state after
// the instruction that writes the new one.
//
//===----------------------------------------------------------------------===//
#include "ShapeUtil.h"
#include "fsdp/Interpreter.h"
#include "fsdp/kernels.h"

#include <set>
#include <string>

namespace fsdp::rt {

namespace {

bool isFloat(DType t) { return isFloatDType(t); }
bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }

} // namespace

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
                    dtypeName(B(id).dtype) +
                    ", expected a float dtype (f32, f64, bf16, f16)");
      if (B(id).dtype != t)
        throw Error(ctx + ": mixed dtypes (" + dtypeName(t) + " and " +
                    dtypeName(B(id).dtype) + ")");
    }
  };
  // The optimizer updates see f32 (or f64) operands only ("Mixed precision":
  // the compiler casts the reduced gradient to f32).
  auto wideFloat = [&](const std::vector<int64_t> &ids) {
    for (int64_t id : ids)
      if (isHalfDType(B(id).dtype))
        throw Error(ctx + ": " + in.op +
                    " needs f32 or f64 operands and "
                    "results, but buffer " +
                    std::to_string(id) + " is " + dtypeName(B(id).dtype) +
                    " (cast the gradient and keep "
                    "an f32 master copy of the parameters)");
  };
  auto lastDim = [&](int64_t id) -> int64_t {
    const auto &s = B(id).shape;
    if (s.empty())
      throw Error(ctx + ": buffer " + std::to_string(id) +
                  " must have rank >= 1");
    return s.back();
  };
  // A step statistic (learning rate, norm, coefficient): one f64.
  auto f64Scalar = [&](int64_t id, const char *what) {
    if (B(id).dtype != DType::F64 || B(id).numel != 1)
      throw Error(ctx + ": " + what + " (buffer " + std::to_string(id) +
                  ") must be one f64, got " + dtypeName(B(id).dtype) + " " +
                  shapeStr(B(id).shape));
  };
  auto noDecayRanges = [&] {
    const std::vector<int64_t> &nd = in.noDecay;
    int64_t last = 0;
    if (nd.size() % 2 != 0)
      throw Error(ctx + ": attribute 'no_decay' must hold [begin, end) pairs");
    for (size_t i = 0; i < nd.size(); i += 2) {
      if (nd[i] < last || nd[i + 1] <= nd[i])
        throw Error(ctx +
                    ": attribute 'no_decay' must hold ascending, "
                    "non-empty, disjoint ranges, got [" +
                    std::to_string(nd[i]) + ", " + std::to_string(nd[i + 1]) +
                    ")");
      last = nd[i + 1];
    }
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
    int tw = in.transposeWeight ? 1 : 0; // weight [N, K], or [K, N]
    if (B(o[1]).shape.size() != 2 || B(o[1]).shape[1 - tw] != k)
      throw Error(ctx + ": weight " + shapeStr(B(o[1]).shape) +
                  " does not match input " + shapeStr(B(o[0]).shape) +
                  (tw ? " (transpose_weight: [in, out])" : ""));
    int64_t n = B(o[1]).shape[tw];
    int64_t m = k ? B(o[0]).numel / k : 0;
    if (o.size() == 3) {
      floatSame({o[0], o[2]});
      if (B(o[2]).numel != n)
        throw Error(ctx + ": bias " + shapeStr(B(o[2]).shape) +
                    " does not match " + std::to_string(n) + " outputs");
    }
    if (B(r[0]).numel != m * n || (n && lastDim(r[0]) != n))
      throw Error(ctx + ": result " + shapeStr(B(r[0]).shape) + " should be [" +
                  std::to_string(m) + ", " + std::to_string(n) + "]");
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
      throw Error(ctx + ": inner dimensions differ: " +
                  shapeStr(B(o[0]).shape) + (in.transA ? "ᵀ" : "") + " · " +
                  shapeStr(B(o[1]).shape) + (in.transB ? "ᵀ" : ""));
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
    need(o.size() == 3 ? 3 : 2, 1);
    wideFloat({o[0], o[1], r[0]});
    floatSame({o[0], o[1], r[0]});
    sameNumel(o[0], o[1]);
    sameNumel(o[0], r[0]);
    if (o.size() == 3)
      f64Scalar(o[2], "the learning rate");
    noDecayRanges();
    break;
  case OpKind::AdamwUpdate:
    need(o.size() == 6 ? 6 : 5, 3);
    wideFloat({o[0], o[1], o[2], o[3], r[0], r[1], r[2]});
    floatSame({o[0], o[1], o[2], o[3], r[0], r[1], r[2]});
    for (int64_t id : {o[1], o[2], o[3], r[0], r[1], r[2]})
      sameNumel(o[0], id);
    if (!isInt(B(o[4]).dtype) || B(o[4]).numel != 1)
      throw Error(ctx + ": step must be an i64 scalar");
    if (o.size() == 6)
      f64Scalar(o[5], "the learning rate");
    noDecayRanges();
    break;
  case OpKind::LrSchedule:
    need(o.size() == 2 ? 2 : 1, 1);
    if (!isInt(B(o[0]).dtype) || B(o[0]).numel != 1)
      throw Error(ctx + ": step must be an i64 scalar");
    // The second operand: the run's total steps (a total_steps input).
    if (o.size() == 2 && (B(o[1]).dtype != DType::I64 || B(o[1]).numel != 1 ||
                          in.lrKind == FSDP_LR_CONSTANT || in.decaySteps != 0))
      throw Error(ctx + ": the total steps operand must be an i64 scalar of "
                        "a linear or cosine schedule with decay_steps 0");
    f64Scalar(r[0], "the learning rate");
    if (!(in.lr > 0) || !(in.minLr >= 0 && in.minLr <= in.lr) ||
        in.warmupSteps < 0 ||
        (in.lrKind != FSDP_LR_CONSTANT && o.size() == 1 && in.decaySteps < 1))
      throw Error(ctx + ": expects lr > 0, min_lr in [0, lr], warmup_steps "
                        ">= 0 and (linear, cosine) decay_steps >= 1 or a "
                        "total steps operand");
    break;
  case OpKind::SumSquares:
    need(1, 1);
    floatSame({o[0]});
    f64Scalar(r[0], "the sum of squares");
    break;
  case OpKind::GradNorm:
    need(1, 2);
    f64Scalar(o[0], "the sum of squares");
    f64Scalar(r[0], "the norm");
    f64Scalar(r[1], "the clip coefficient");
    if (!(in.maxNorm >= 0))
      throw Error(ctx + ": max_norm must be > 0");
    break;
  case OpKind::Scale:
    need(2, 1);
    floatSame({o[0], r[0]});
    sameNumel(o[0], r[0]);
    f64Scalar(o[1], "the scale");
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
    int64_t g = groupSize(in.group);
    if (B(full).numel != B(shard).numel * g)
      throw Error(ctx + ": full buffer " + std::to_string(full) + " has " +
                  std::to_string(B(full).numel) + " elements, expected shard " +
                  std::to_string(B(shard).numel) + " x " + groupName(in.group) +
                  " group size " + std::to_string(g));
    break;
  }
  case OpKind::AllReduce:
    need(1, 1);
    if (B(o[0]).dtype != B(r[0]).dtype)
      throw Error(ctx + ": operand and result dtypes differ");
    if (!isFloat(B(o[0]).dtype) && in.average)
      throw Error(ctx + ": 'avg' needs a float buffer");
    sameNumel(o[0], r[0]);
    break;
  case OpKind::LocalShard: {
    need(1, 1);
    if (B(o[0]).dtype != B(r[0]).dtype)
      throw Error(ctx + ": operand and result dtypes differ");
    int64_t g = groupSize(in.group);
    if (B(o[0]).numel != B(r[0]).numel * g)
      throw Error(ctx + ": full buffer " + std::to_string(o[0]) + " has " +
                  std::to_string(B(o[0]).numel) +
                  " elements, expected the "
                  "result's " +
                  std::to_string(B(r[0]).numel) + " x " + groupName(in.group) +
                  " group size " + std::to_string(g));
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
  case OpKind::Pack:
  case OpKind::Unpack: {
    bool pack = in.kind == OpKind::Pack;
    const std::vector<int64_t> &parts = pack ? o : r;
    int64_t bucket = pack ? r[0] : o[0];
    if (pack)
      need(o.size(), 1);
    else
      need(1, r.size());
    if (parts.size() < 2)
      throw Error(ctx + ": a bucket needs at least two unit buffers");
    if (in.blocks < 1)
      throw Error(ctx + ": blocks must be >= 1, got " +
                  std::to_string(in.blocks));
    int64_t total = 0;
    for (int64_t id : parts) {
      if (B(id).dtype != B(bucket).dtype)
        throw Error(ctx + ": unit buffer " + std::to_string(id) +
                    " and bucket " + std::to_string(bucket) +
                    " have different dtypes");
      if (B(id).numel % in.blocks != 0)
        throw Error(ctx + ": unit buffer " + std::to_string(id) + " of " +
                    std::to_string(B(id).numel) + " elements is not " +
                    std::to_string(in.blocks) + " blocks");
      total += B(id).numel;
    }
    if (total != B(bucket).numel)
      throw Error(ctx + ": bucket " + std::to_string(bucket) + " has " +
                  std::to_string(B(bucket).numel) + " elements, its units " +
                  std::to_string(total));
    break;
  }
  case OpKind::Wait:
    need(1, 1);
    if (B(r[0]).viewOf < 0 || B(r[0]).rootId != B(o[0]).rootId ||
        B(r[0]).rootOffset != B(o[0]).rootOffset ||
        B(r[0]).numel != B(o[0]).numel || B(r[0]).dtype != B(o[0]).dtype)
      throw Error(ctx + ": result buffer " + std::to_string(r[0]) +
                  " must be a whole view_of operand buffer " +
                  std::to_string(o[0]) + " (the awaited collective's buffer)");
    break;
  case OpKind::Flatten:
    need(o.size(), 1);
    if (in.offsets.size() != o.size())
      throw Error(ctx + ": " + std::to_string(o.size()) + " operands but " +
                  std::to_string(in.offsets.size()) + " offsets");
    for (size_t i = 0; i < o.size(); ++i) {
      floatSame({o[i], r[0]});
      if (in.offsets[i] < 0 || in.offsets[i] + B(o[i]).numel > B(r[0]).numel)
        throw Error(ctx + ": operand " + std::to_string(o[i]) + " at offset " +
                    std::to_string(in.offsets[i]) + " does not fit in " +
                    std::to_string(B(r[0]).numel) + " elements");
    }
    break;
  case OpKind::Embedding:
  case OpKind::EmbeddingGrad: {
    need(2, 1);
    bool grad = in.kind == OpKind::EmbeddingGrad;
    if (!isInt(B(o[0]).dtype))
      throw Error(ctx + ": indices must be i32 or i64, got " +
                  dtypeName(B(o[0]).dtype));
    int64_t table = grad ? r[0] : o[1], rows = grad ? o[1] : r[0];
    floatSame({table, rows});
    const auto &ts = B(table).shape;
    if (ts.size() != 2)
      throw Error(ctx + ": table " + shapeStr(ts) + " must be [V, C]");
    if (grad && ts[0] != in.numEmbeddings)
      throw Error(ctx + ": result " + shapeStr(ts) +
                  " does not have "
                  "num_embeddings = " +
                  std::to_string(in.numEmbeddings) + " rows");
    if (B(rows).numel != B(o[0]).numel * ts[1] ||
        (ts[1] && lastDim(rows) != ts[1]))
      throw Error(ctx + ": " + (grad ? "gradient " : "result ") +
                  shapeStr(B(rows).shape) + " should be indices " +
                  shapeStr(B(o[0]).shape) + " x " + std::to_string(ts[1]));
    break;
  }
  case OpKind::PositionEmbedding:
  case OpKind::PositionEmbeddingGrad: {
    bool grad = in.kind == OpKind::PositionEmbeddingGrad;
    need(grad ? 1 : 2, 1);
    int64_t x = o[0], table = grad ? r[0] : o[1];
    floatSame({x, table, r[0]});
    const auto &xs = B(x).shape, &ts = B(table).shape;
    if (xs.size() != 3)
      throw Error(ctx + ": input " + shapeStr(xs) + " must be [B, T, C]");
    if (ts.size() != 2 || ts[1] != xs[2] || ts[0] < xs[1])
      throw Error(ctx + ": table " + shapeStr(ts) + " must be [P >= " +
                  std::to_string(xs[1]) + ", " + std::to_string(xs[2]) + "]");
    if (grad && ts[0] != in.numPositions)
      throw Error(ctx + ": result " + shapeStr(ts) +
                  " does not have "
                  "num_positions = " +
                  std::to_string(in.numPositions) + " rows");
    if (!grad)
      sameNumel(x, r[0]);
    break;
  }
  case OpKind::LayerNorm:
  case OpKind::LayerNormGrad:
  case OpKind::RmsNorm:
  case OpKind::RmsNormGrad: {
    bool ln = in.kind == OpKind::LayerNorm || in.kind == OpKind::LayerNormGrad;
    bool grad =
        in.kind == OpKind::LayerNormGrad || in.kind == OpKind::RmsNormGrad;
    // forward: x, w(, b) -> y; grad: x, w, dy -> dx, dw(, db)
    need(ln || grad ? 3 : 2, grad ? (ln ? 3 : 2) : 1);
    std::vector<int64_t> all(o.begin(), o.end());
    all.insert(all.end(), r.begin(), r.end());
    for (int64_t id : all)
      floatSame({o[0], id});
    int64_t c = lastDim(o[0]);
    std::vector<int64_t> perChannel = {o[1]};
    if (ln && !grad)
      perChannel.push_back(o[2]);
    if (grad)
      perChannel.insert(perChannel.end(), r.begin() + 1, r.end());
    for (int64_t id : perChannel)
      if (B(id).numel != c)
        throw Error(ctx + ": buffer " + std::to_string(id) + " " +
                    shapeStr(B(id).shape) + " should hold " +
                    std::to_string(c) + " channels");
    sameNumel(o[0], r[0]);
    if (grad)
      sameNumel(o[0], o[2]);
    if (!(in.eps >= 0))
      throw Error(ctx + ": eps must be >= 0");
    break;
  }
  case OpKind::Rope: {
    need(1, 1);
    floatSame({o[0], r[0]});
    sameNumel(o[0], r[0]);
    const auto &xs = B(o[0]).shape;
    if (xs.size() != 3)
      throw Error(ctx + ": input " + shapeStr(xs) + " must be [B, T, H*D]");
    if (in.headDim <= 0 || in.headDim % 2 || xs[2] % in.headDim)
      throw Error(ctx + ": head_dim " + std::to_string(in.headDim) +
                  " must be positive, even and divide " +
                  std::to_string(xs[2]));
    if (!(in.theta > 0))
      throw Error(ctx + ": theta must be > 0");
    break;
  }
  case OpKind::Attention:
  case OpKind::AttentionGrad: {
    bool grad = in.kind == OpKind::AttentionGrad;
    need(grad ? 4 : 3, grad ? 3 : 1);
    std::vector<int64_t> all(o.begin(), o.end());
    all.insert(all.end(), r.begin(), r.end());
    for (int64_t id : all)
      floatSame({o[0], id});
    int64_t hq = in.numHeads, hkv = in.numKvHeads;
    if (hq <= 0 || hkv <= 0 || hq % hkv)
      throw Error(ctx + ": num_heads " + std::to_string(hq) +
                  " must be a positive multiple of num_kv_heads " +
                  std::to_string(hkv));
    const auto &qs = B(o[0]).shape;
    if (qs.size() != 3 || qs[2] % hq)
      throw Error(ctx + ": query " + shapeStr(qs) + " must be [B, T, " +
                  std::to_string(hq) + "*D]");
    int64_t d = qs[2] / hq;
    std::vector<int64_t> kvShape = {qs[0], qs[1], hkv * d};
    for (int64_t id : {o[1], o[2]})
      if (B(id).shape != kvShape)
        throw Error(ctx + ": key/value buffer " + std::to_string(id) + " " +
                    shapeStr(B(id).shape) + " should be " + shapeStr(kvShape));
    sameNumel(o[0], r[0]);
    if (grad) {
      sameNumel(o[0], o[3]);
      sameNumel(o[1], r[1]);
      sameNumel(o[2], r[2]);
    }
    break;
  }
  case OpKind::Silu:
    need(1, 1);
    floatSame({o[0], r[0]});
    sameNumel(o[0], r[0]);
    break;
  case OpKind::SiluGrad:
    need(2, 1);
    floatSame({o[0], o[1], r[0]});
    sameNumel(o[0], o[1]);
    sameNumel(o[0], r[0]);
    break;
  case OpKind::Split:
  case OpKind::Concat: {
    bool sp = in.kind == OpKind::Split;
    if (sp)
      need(1, in.sizes.size());
    else if (r.size() != 1 || o.empty())
      throw Error(ctx + ": expected at least 1 operand and 1 result");
    int64_t whole = sp ? o[0] : r[0];
    const std::vector<int64_t> &parts = sp ? r : o;
    const auto &ws = B(whole).shape;
    int64_t rank = static_cast<int64_t>(ws.size());
    int64_t axis = in.axis < 0 ? in.axis + rank : in.axis;
    if (axis < 0 || axis >= rank)
      throw Error(ctx + ": axis " + std::to_string(in.axis) +
                  " out of range for shape " + shapeStr(ws));
    int64_t total = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      floatSame({whole, parts[i]});
      std::vector<int64_t> expect = ws;
      int64_t sz;
      if (sp) {
        sz = in.sizes[i];
      } else {
        const auto &ps = B(parts[i]).shape;
        if (static_cast<int64_t>(ps.size()) != rank)
          throw Error(ctx + ": operand " + std::to_string(parts[i]) + " " +
                      shapeStr(ps) + " has a different rank than " +
                      shapeStr(ws));
        sz = ps[axis];
      }
      if (sz < 0)
        throw Error(ctx + ": negative size along the axis");
      expect[axis] = sz;
      total += sz;
      if (B(parts[i]).shape != expect)
        throw Error(ctx + ": piece " + std::to_string(parts[i]) + " " +
                    shapeStr(B(parts[i]).shape) + " should be " +
                    shapeStr(expect));
    }
    if (total != ws[axis])
      throw Error(ctx + ": pieces add up to " + std::to_string(total) +
                  " along axis " + std::to_string(axis) + " but " +
                  shapeStr(ws) + " has " + std::to_string(ws[axis]));
    break;
  }
  case OpKind::ZerosLike:
    need(1, 1);
    if (!isFloat(B(r[0]).dtype))
      throw Error(ctx + ": result must be a float dtype");
    break;
  case OpKind::MicroBatch: {
    // Any dtype: a contiguous block of rows of the rank's batch.
    need(1, 1);
    const BufferDesc &x = B(o[0]), &y = B(r[0]);
    std::vector<int64_t> expect = x.shape;
    if (x.dtype != y.dtype || expect.empty() || in.count < 1 || in.index < 0 ||
        in.index >= in.count || expect[0] % in.count)
      throw Error(ctx + ": expects 0 <= index < count, a batch " +
                  shapeStr(x.shape) + " that divides by count " +
                  std::to_string(in.count) +
                  " and a result of the input's dtype");
    expect[0] /= in.count;
    if (y.shape != expect)
      throw Error(ctx + ": result " + shapeStr(y.shape) + " should be " +
                  shapeStr(expect));
    break;
  }
  case OpKind::Cast:
    // Any float dtype to any float dtype, elementwise.
    need(1, 1);
    floatSame({o[0]});
    floatSame({r[0]});
    sameNumel(o[0], r[0]);
    break;
  }
}

void Program::validateAliases() const {
  for (const IoDesc &o : outputList) {
    // A carried output planned into its state input's slot must be written
    // in place: without `aliases` the two would be live at once.
    if (o.aliases < 0) {
      const IoDesc *in = nullptr;
      for (const IoDesc &i : inputList)
        if (carriedOutput(i.buffer) == &o)
          in = &i;
      if (in && arenaPlanned &&
          buffer(buffer(o.buffer).rootId).arenaOffset ==
              buffer(in->buffer).arenaOffset &&
          buffer(in->buffer).bytes > 0)
        throw Error(
            sourceName + ": output buffer " + std::to_string(o.buffer) +
            " (role '" + o.role + "', unit '" + o.unit +
            "') has the arena_offset of the state input buffer " +
            std::to_string(in->buffer) +
            " it replaces but no \"aliases\": " + std::to_string(in->buffer) +
            " (the memory plan writes it in place)");
      continue;
    }
    std::string ctx = sourceName + ": output buffer " +
                      std::to_string(o.buffer) + " (role '" + o.role + "'" +
                      (o.unit.empty() ? "" : ", unit '" + o.unit + "'") +
                      ") aliases input buffer " + std::to_string(o.aliases);
    const IoDesc *in = nullptr;
    for (const IoDesc &i : inputList)
      if (i.buffer == o.aliases)
        in = &i;
    if (!in || !isStateRole(in->role) || carriedOutput(in->buffer) != &o)
      throw Error(ctx + ", which is not the state input it replaces (an "
                        "input of the same role, unit and layout)");
    const BufferDesc &out = buffer(o.buffer), &root = buffer(out.rootId),
                     &state = buffer(in->buffer);
    if (out.rootOffset != 0 || out.numel != root.numel ||
        root.bytes != state.bytes || root.dtype != state.dtype)
      throw Error(ctx + ", but its memory (buffer " + std::to_string(root.id) +
                  ", " + std::to_string(root.bytes) + " bytes of " +
                  dtypeName(root.dtype) + ") is not exactly the input's (" +
                  std::to_string(state.bytes) + " bytes of " +
                  dtypeName(state.dtype) + ")");
    if (arenaPlanned && root.arenaOffset != state.arenaOffset)
      throw Error(ctx + ", but its arena_offset " +
                  std::to_string(root.arenaOffset) +
                  " differs from the "
                  "input's " +
                  std::to_string(state.arenaOffset));
    // The instruction that defines the output's memory, and every read of
    // the state input (through views) at or after it.
    int64_t def = -1;
    for (size_t i = 0; i < program.size() && def < 0; ++i)
      for (int64_t r : program[i].results)
        if (r == root.id)
          def = static_cast<int64_t>(i);
    if (def < 0)
      throw Error(ctx + ", but no instruction defines buffer " +
                  std::to_string(root.id));
    for (size_t i = static_cast<size_t>(def); i < program.size(); ++i) {
      const Instruction &ins = program[i];
      for (size_t j = 0; j < ins.operands.size(); ++j) {
        if (buffer(ins.operands[j]).rootId != in->buffer)
          continue;
        // The update itself reads the old state element by element
        // before it writes the new one (kernels.h: outputs may alias).
        bool update =
            static_cast<int64_t>(i) == def &&
            (ins.kind == OpKind::AdamwUpdate || ins.kind == OpKind::SgdUpdate);
        static const int kAdamwPair[] = {0, -1, 1, 2, -1};
        int pair = ins.kind == OpKind::SgdUpdate ? (j == 0 ? 0 : -1)
                                                 : (j < 5 ? kAdamwPair[j] : -1);
        if (update && pair >= 0 &&
            static_cast<size_t>(pair) < ins.results.size() &&
            ins.results[pair] == root.id)
          continue;
        throw Error(ctx + ", but " + instructionName(i) + " reads the input " +
                    (static_cast<int64_t>(i) == def ? "while " : "after ") +
                    instructionName(static_cast<size_t>(def)) +
                    " writes the output");
      }
    }
  }
}

} // namespace fsdp::rt
