//===- Transformer.cpp - the transformer ops: rules and runtime calls -----===//
//
// nn.embedding and nn.position_embedding (and their VJPs), the norms
// (LayerNorm, RMSNorm and their VJPs), nn.rope and causal nn.attention
// (GQA) with its VJP: their attributes, the checks of their operands and
// the kernel of kernels.h each calls.
//
//===----------------------------------------------------------------------===//
#include "../OpDefs.h"
#include "../PlanBuilder.h"
#include "../ShapeUtil.h"

namespace fsdp::schedule {

namespace {

//===--- Embeddings -------------------------------------------------------===//

void validateEmbedding(const Checker &c) {
  c.need(2, 1);
  bool grad = c.in.kind == OpKind::EmbeddingGrad;
  const auto &o = c.o, &r = c.r;
  if (!isIntDType(c.desc(o[0]).dtype))
    c.fail(std::string("indices must be i32 or i64, got ") +
           dtypeName(c.desc(o[0]).dtype));
  int64_t table = grad ? r[0] : o[1], rows = grad ? o[1] : r[0];
  c.floatSame({table, rows});
  const auto &ts = c.desc(table).shape;
  if (ts.size() != 2)
    c.fail("table " + shapeStr(ts) + " must be [V, C]");
  if (grad && ts[0] != c.in.integer("num_embeddings"))
    c.fail("result " + shapeStr(ts) + " does not have num_embeddings = " +
           std::to_string(c.in.integer("num_embeddings")) + " rows");
  if (c.desc(rows).numel != c.desc(o[0]).numel * ts[1] ||
      (ts[1] && c.lastDim(rows) != ts[1]))
    c.fail(std::string(grad ? "gradient " : "result ") +
           shapeStr(c.desc(rows).shape) + " should be indices " +
           shapeStr(c.desc(o[0]).shape) + " x " + std::to_string(ts[1]));
}

/// nn.embedding (the table is operand 1) and nn.embedding_grad (result 0):
/// (s, t, idx, idx dtype, table or dy, y or dtable, n, vocab, dim, first,
/// total). `vocab_parallel`: the table is rows [t·V, (t+1)·V) of a
/// vocabulary of T·V, t this rank's index in the tensor-parallel group.
void lowerEmbedding(OpLowering &l) {
  bool grad = l.in.kind == OpKind::EmbeddingGrad;
  const std::vector<int64_t> &ts = l.desc(grad ? l.r[0] : l.o[1]).shape;
  bool split = l.in.flag("vocab_parallel");
  int64_t tp = split ? l.prog.groupSize(Group::Tensor) : 1;
  l.call(grad ? "fsdp_embedding_grad" : "fsdp_embedding",
         {l.stream(), l.t(), l.operand(0), l.dtypeArg(l.desc(l.o[0]).dtype),
          l.operand(1), l.result(0), l.i64(l.desc(l.o[0]).numel), l.i64(ts[0]),
          l.i64(ts[1]), split ? l.rankTimes(Group::Tensor, ts[0]) : l.i64(0),
          l.i64(ts[0] * tp)});
}

void validatePositionEmbedding(const Checker &c) {
  bool grad = c.in.kind == OpKind::PositionEmbeddingGrad;
  c.need(grad ? 1 : 2, 1);
  int64_t x = c.o[0], table = grad ? c.r[0] : c.o[1];
  c.floatSame({x, table, c.r[0]});
  const auto &xs = c.desc(x).shape, &ts = c.desc(table).shape;
  if (xs.size() != 3)
    c.fail("input " + shapeStr(xs) + " must be [B, T, C]");
  if (ts.size() != 2 || ts[1] != xs[2] || ts[0] < xs[1])
    c.fail("table " + shapeStr(ts) + " must be [P >= " + std::to_string(xs[1]) +
           ", " + std::to_string(xs[2]) + "]");
  if (grad && ts[0] != c.in.integer("num_positions"))
    c.fail("result " + shapeStr(ts) + " does not have num_positions = " +
           std::to_string(c.in.integer("num_positions")) + " rows");
  if (!grad)
    c.sameNumel(x, c.r[0]);
}

void lowerPositionEmbedding(OpLowering &l) {
  const std::vector<int64_t> &xs = l.desc(l.o[0]).shape;
  if (l.in.kind == OpKind::PositionEmbedding)
    l.call("fsdp_position_embedding",
           {l.stream(), l.t(), l.operand(0), l.operand(1), l.result(0),
            l.i64(xs[0]), l.i64(xs[1]), l.i64(xs[2])});
  else
    l.call("fsdp_position_embedding_grad",
           {l.stream(), l.t(), l.operand(0), l.result(0), l.i64(xs[0]),
            l.i64(xs[1]), l.i64(xs[2]), l.i64(l.desc(l.r[0]).shape[0])});
}

//===--- Norms ------------------------------------------------------------===//

void validateNorm(const Checker &c) {
  OpKind k = c.in.kind;
  bool ln = k == OpKind::LayerNorm || k == OpKind::LayerNormGrad;
  bool grad = k == OpKind::LayerNormGrad || k == OpKind::RmsNormGrad;
  const auto &o = c.o, &r = c.r;
  // forward: x, w(, b) -> y; grad: x, w, dy -> dx, dw(, db)
  c.need(ln || grad ? 3 : 2, grad ? (ln ? 3 : 2) : 1);
  std::vector<int64_t> all(o.begin(), o.end());
  all.insert(all.end(), r.begin(), r.end());
  for (int64_t id : all)
    c.floatSame({o[0], id});
  int64_t channels = c.lastDim(o[0]);
  std::vector<int64_t> perChannel = {o[1]};
  if (ln && !grad)
    perChannel.push_back(o[2]);
  if (grad)
    perChannel.insert(perChannel.end(), r.begin() + 1, r.end());
  for (int64_t id : perChannel)
    if (c.desc(id).numel != channels)
      c.fail("buffer " + std::to_string(id) + " " + shapeStr(c.desc(id).shape) +
             " should hold " + std::to_string(channels) + " channels");
  c.sameNumel(o[0], r[0]);
  if (grad)
    c.sameNumel(o[0], o[2]);
  if (!(c.in.number("eps") >= 0))
    c.fail("eps must be >= 0");
}

/// (s, t, operands..., results..., rows, channels, eps).
void lowerNorm(OpLowering &l) {
  const char *entry = l.in.kind == OpKind::LayerNorm ? "fsdp_layer_norm"
                      : l.in.kind == OpKind::LayerNormGrad
                          ? "fsdp_layer_norm_grad"
                      : l.in.kind == OpKind::RmsNorm ? "fsdp_rms_norm"
                                                     : "fsdp_rms_norm_grad";
  int64_t c = l.desc(l.o[0]).shape.back(),
          rows = c ? l.desc(l.o[0]).numel / c : 0;
  std::vector<Arg> args{l.stream(), l.t()};
  for (size_t i = 0; i < l.o.size(); ++i)
    args.push_back(l.operand(i));
  for (size_t i = 0; i < l.r.size(); ++i)
    args.push_back(l.result(i));
  args.push_back(l.i64(rows));
  args.push_back(l.i64(c));
  args.push_back(l.f64(l.in.number("eps")));
  l.call(entry, args);
}

//===--- Rotary embedding and attention -----------------------------------===//

void validateRope(const Checker &c) {
  c.need(1, 1);
  c.floatSame({c.o[0], c.r[0]});
  c.sameNumel(c.o[0], c.r[0]);
  const auto &xs = c.desc(c.o[0]).shape;
  int64_t headDim = c.in.integer("head_dim");
  if (xs.size() != 3)
    c.fail("input " + shapeStr(xs) + " must be [B, T, H*D]");
  if (headDim <= 0 || headDim % 2 || xs[2] % headDim)
    c.fail("head_dim " + std::to_string(headDim) +
           " must be positive, even and divide " + std::to_string(xs[2]));
  if (!(c.in.number("theta") > 0))
    c.fail("theta must be > 0");
  if (!(c.in.number("factor") > 0) || !(c.in.number("attention_factor") > 0))
    c.fail("factor and attention_factor must be > 0");
  int64_t type = c.in.integer("rope_type");
  double low = c.in.number("low_freq_factor"),
         high = c.in.number("high_freq_factor");
  if (type == FSDP_ROPE_LLAMA3 && (!(low > 0) || !(high > low)))
    c.fail("llama3 needs 0 < low_freq_factor < high_freq_factor");
  if ((type == FSDP_ROPE_LLAMA3 || type == FSDP_ROPE_YARN) &&
      c.in.integer("original_max_position_embeddings") <= 0)
    c.fail("original_max_position_embeddings must be > 0");
  if (type == FSDP_ROPE_YARN &&
      (!(c.in.number("beta_fast") > 0) || !(c.in.number("beta_slow") > 0)))
    c.fail("beta_fast and beta_slow must be > 0");
}

/// fsdp_rope(s, t, x, y, B, T, H, D, theta, rope_type, factor, low, high,
/// original context, beta_fast, beta_slow, truncate, attention_factor,
/// inverse).
void lowerRope(OpLowering &l) {
  const std::vector<int64_t> &xs = l.desc(l.o[0]).shape;
  int64_t headDim = l.in.integer("head_dim");
  l.call("fsdp_rope",
         {l.stream(), l.t(), l.operand(0), l.result(0), l.i64(xs[0]),
          l.i64(xs[1]), l.i64(xs[2] / headDim), l.i64(headDim),
          l.f64(l.in.number("theta")),
          l.i32(static_cast<int32_t>(l.in.integer("rope_type"))),
          l.f64(l.in.number("factor")), l.f64(l.in.number("low_freq_factor")),
          l.f64(l.in.number("high_freq_factor")),
          l.f64(static_cast<double>(
              l.in.integer("original_max_position_embeddings"))),
          l.f64(l.in.number("beta_fast")), l.f64(l.in.number("beta_slow")),
          l.i32(l.in.flag("truncate")), l.f64(l.in.number("attention_factor")),
          l.i32(l.in.flag("inverse"))});
}

/// nn.rope's attributes: the rotation, then the frequency transform's
/// parameters with the defaults of Format.h (the ODS DefaultValuedAttrs).
std::vector<AttrSpec> ropeAttrs() {
  return {integer("head_dim", kRequired),
          number("theta", kRequired),
          flag("inverse"),
          choice("rope_type", std::vector<const char *>(std::begin(kRopeTypes),
                                                        std::end(kRopeTypes))),
          number("factor", false, kDefaultRopeFactor),
          number("low_freq_factor", false, kDefaultRopeLowFreqFactor),
          number("high_freq_factor", false, kDefaultRopeHighFreqFactor),
          integer("original_max_position_embeddings", false,
                  kDefaultRopeOriginalMaxPositions),
          number("beta_fast", false, kDefaultRopeBetaFast),
          number("beta_slow", false, kDefaultRopeBetaSlow),
          flag("truncate", kDefaultRopeTruncate),
          number("attention_factor", false, kDefaultRopeAttentionFactor)};
}

/// attention: (q, k, v) -> (o, lse); attention_grad: (q, k, v, o, lse,
/// dout) -> (dq, dk, dv). lse [B, Hq, T] is f32 (f64 for f64 tensors).
void validateAttention(const Checker &c) {
  bool grad = c.in.kind == OpKind::AttentionGrad;
  const auto &o = c.o, &r = c.r;
  c.need(grad ? 6 : 3, grad ? 3 : 2);
  int64_t lse = grad ? o[4] : r[1];
  std::vector<int64_t> all;
  for (const auto *ids : {&o, &r})
    for (int64_t id : *ids)
      if (id != lse)
        all.push_back(id);
  c.floatSame(all);
  int64_t hq = c.in.integer("num_heads"), hkv = c.in.integer("num_kv_heads");
  if (hq <= 0 || hkv <= 0 || hq % hkv)
    c.fail("num_heads " + std::to_string(hq) +
           " must be a positive multiple of num_kv_heads " +
           std::to_string(hkv));
  const auto &qs = c.desc(o[0]).shape;
  if (qs.size() != 3 || qs[2] % hq)
    c.fail("query " + shapeStr(qs) + " must be [B, T, " + std::to_string(hq) +
           "*D]");
  int64_t d = qs[2] / hq;
  std::vector<int64_t> kvShape = {qs[0], qs[1], hkv * d};
  for (int64_t id : {o[1], o[2]})
    if (c.desc(id).shape != kvShape)
      c.fail("key/value buffer " + std::to_string(id) + " " +
             shapeStr(c.desc(id).shape) + " should be " + shapeStr(kvShape));
  std::vector<int64_t> lseShape = {qs[0], hq, qs[1]};
  DType lseType = c.desc(o[0]).dtype == DType::F64 ? DType::F64 : DType::F32;
  if (c.desc(lse).shape != lseShape || c.desc(lse).dtype != lseType)
    c.fail("logsumexp buffer " + std::to_string(lse) + " " +
           shapeStr(c.desc(lse).shape) + " " +
           std::string(dtypeName(c.desc(lse).dtype)) + " should be " +
           shapeStr(lseShape) + " " + std::string(dtypeName(lseType)));
  c.sameNumel(o[0], r[0]);
  if (grad) {
    c.sameNumel(o[0], o[3]);
    c.sameNumel(o[0], o[5]);
    c.sameNumel(o[1], r[1]);
    c.sameNumel(o[2], r[2]);
  }
}

/// (s, t, q, k, v, o, lse, batch, seq, hq, hkv, head dim) or
/// (s, t, q, k, v, o, lse, dout, dq, dk, dv, batch, seq, hq, hkv, head dim).
void lowerAttention(OpLowering &l) {
  const std::vector<int64_t> &qs = l.desc(l.o[0]).shape;
  int64_t hq = l.in.integer("num_heads");
  std::vector<Arg> args{l.stream(), l.t()};
  for (size_t i = 0; i < l.o.size(); ++i)
    args.push_back(l.operand(i));
  for (size_t i = 0; i < l.r.size(); ++i)
    args.push_back(l.result(i));
  for (int64_t v : {qs[0], qs[1], hq, l.in.integer("num_kv_heads"), qs[2] / hq})
    args.push_back(l.i64(v));
  l.call(l.in.kind == OpKind::Attention ? "fsdp_attention"
                                        : "fsdp_attention_grad",
         args);
}

std::vector<AttrSpec> attentionAttrs() {
  return {integer("num_heads", kRequired), integer("num_kv_heads", kRequired)};
}

} // namespace

std::vector<OpDef> transformerOps() {
  return {
      {OpKind::Embedding,
       {flag("vocab_parallel")},
       validateEmbedding,
       lowerEmbedding},
      {OpKind::EmbeddingGrad,
       {integer("num_embeddings", kRequired), flag("vocab_parallel")},
       validateEmbedding,
       lowerEmbedding},
      {OpKind::PositionEmbedding,
       {},
       validatePositionEmbedding,
       lowerPositionEmbedding},
      {OpKind::PositionEmbeddingGrad,
       {integer("num_positions", kRequired)},
       validatePositionEmbedding,
       lowerPositionEmbedding},
      {OpKind::LayerNorm, {number("eps", kRequired)}, validateNorm, lowerNorm},
      {OpKind::LayerNormGrad,
       {number("eps", kRequired)},
       validateNorm,
       lowerNorm},
      {OpKind::RmsNorm, {number("eps", kRequired)}, validateNorm, lowerNorm},
      {OpKind::RmsNormGrad,
       {number("eps", kRequired)},
       validateNorm,
       lowerNorm},
      {OpKind::Rope, ropeAttrs(), validateRope, lowerRope},
      {OpKind::Attention, attentionAttrs(), validateAttention, lowerAttention},
      {OpKind::AttentionGrad, attentionAttrs(), validateAttention,
       lowerAttention},
  };
}

} // namespace fsdp::schedule
