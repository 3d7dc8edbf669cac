//===- Compute.cpp - the nn compute ops: rules and runtime calls ----------===//
//
// arith.constant, nn.zeros_like, nn.linear, nn.matmul, the elementwise ops
// and their VJPs, nn.reduce_sum, nn.broadcast, nn.cross_entropy(_grad),
// nn.cast, nn.micro_batch, nn.split and nn.concat: their attributes, the
// checks of their operands (OpDefs.h) and the kernel of kernels.h each
// calls, with its arguments.
//
//===----------------------------------------------------------------------===//
#include "../OpDefs.h"
#include "../PlanBuilder.h"
#include "../ShapeUtil.h"

#include <algorithm>
#include <set>

namespace fsdp::schedule {

namespace {

int64_t rowsOf(const OpLowering &l, int64_t id) {
  int64_t c = l.desc(id).shape.back();
  return c ? l.desc(id).numel / c : 0;
}

//===--- Elementwise ------------------------------------------------------===//

/// nn.add, nn.mul, nn.*_grad: two inputs and a result of one size.
void validateBinary(const Checker &c) {
  c.need(2, 1);
  c.floatSame({c.o[0], c.o[1], c.r[0]});
  c.sameNumel(c.o[0], c.o[1]);
  c.sameNumel(c.o[0], c.r[0]);
}

/// nn.relu, nn.gelu, nn.silu.
void validateUnary(const Checker &c) {
  c.need(1, 1);
  c.floatSame({c.o[0], c.r[0]});
  c.sameNumel(c.o[0], c.r[0]);
}

/// An elementwise kernel (s, t, inputs..., y, n) with n the result's numel,
/// then `extra`.
template <int Inputs>
void elementwise(OpLowering &l, const char *entry, std::vector<Arg> extra) {
  std::vector<Arg> args{l.stream(), l.t()};
  for (int i = 0; i < Inputs; ++i)
    args.push_back(l.operand(static_cast<size_t>(i)));
  args.push_back(l.result(0));
  args.push_back(l.i64(l.desc(l.r[0]).numel));
  args.insert(args.end(), extra.begin(), extra.end());
  l.call(entry, args);
}

template <int Inputs, const char *Entry> void lowerElementwise(OpLowering &l) {
  elementwise<Inputs>(l, Entry, {});
}

/// nn.gelu(_grad): approximate "tanh" is index 1 of its choices.
template <int Inputs, const char *Entry> void lowerGelu(OpLowering &l) {
  elementwise<Inputs>(l, Entry, {l.i32(l.in.integer("approximate"))});
}

constexpr char kAdd[] = "fsdp_add", kMul[] = "fsdp_mul", kRelu[] = "fsdp_relu",
               kReluGrad[] = "fsdp_relu_grad", kGelu[] = "fsdp_gelu",
               kGeluGrad[] = "fsdp_gelu_grad", kSilu[] = "fsdp_silu",
               kSiluGrad[] = "fsdp_silu_grad";

AttrSpec geluApproximation() {
  return choice("approximate", {"none", "tanh"},
                std::string(kDefaultGeluApproximation) == "tanh");
}

//===--- Dropout ----------------------------------------------------------===//

void validateDropout(const Checker &c) {
  c.need(2, 1);
  c.floatSame({c.o[0], c.r[0]});
  c.sameNumel(c.o[0], c.r[0]);
  if (!isIntDType(c.desc(c.o[1]).dtype) || c.desc(c.o[1]).numel != 1)
    c.fail("step must be an i64 scalar");
  double rate = c.in.number("rate");
  if (!(rate >= 0) || !(rate < 1))
    c.fail("rate must be in [0, 1), got " + std::to_string(rate));
  const BufferDesc &x = c.desc(c.o[0]);
  if (x.shape.empty())
    c.fail("the input must have rows (a dimension 0)");
  // The first element's index in the global tensor must fit in int64.
  int64_t microBatch = c.in.integer("micro_batch");
  if (microBatch < 0 || (x.numel > 0 && microBatch > (kMaxCount / x.numel)))
    c.fail("micro_batch " + std::to_string(microBatch) +
           " must be >= 0 and its rows' index in the batch below 2^62");
  int64_t split = c.in.integer("tensor_split");
  if (split != -1 &&
      (split < 1 || split >= static_cast<int64_t>(x.shape.size())))
    c.fail("tensor_split " + std::to_string(split) +
           " must be -1 or a dimension in [1, " +
           std::to_string(x.shape.size()) + ") of the input");
}

/// The mask is drawn by each element's place in the whole tensor. Rows of
/// an activation split across the ranks (`batch_split`): data-parallel rank
/// d (world rank / T) holds rows [d·b, (d+1)·b) of the global batch
/// (b = global_batch / (world_size / T)), and micro-batch j rows
/// [j·m, (j+1)·m) of those (m the input's rows), so the first row here is
/// row d·b + j·m, of G elements in the global tensor. Under tensor
/// parallelism the T ranks of a group hold the same rows; a dimension k
/// split across the group (`tensor_split`) leaves each rank piece t of it:
/// runs of chunk = (its size · the dimensions after k) elements, T·chunk
/// apart, the first at t·chunk (G = T · the local row). A tensor whose rows
/// are not the batch's (a parameter) is the same on every rank, and so is
/// its mask.
void lowerDropout(OpLowering &l) {
  const BufferDesc &x = l.desc(l.o[0]);
  int64_t tp = l.prog.tensorParallel();
  int64_t rows = x.shape[0], rowNumel = rows ? x.numel / rows : 0;
  int64_t split = l.in.integer("tensor_split");
  int64_t chunk = std::max<int64_t>(x.numel, 1), globalRow = rowNumel;
  Arg chunkFirst = l.i64(0);
  if (split >= 1) {
    chunk = 1;
    for (size_t d = static_cast<size_t>(split); d < x.shape.size(); ++d)
      chunk *= x.shape[d];
    chunk = std::max<int64_t>(chunk, 1);
    chunkFirst = l.rankTimes(Group::Tensor, chunk);
    globalRow = rowNumel * tp;
  }
  int64_t first = l.in.integer("micro_batch") * rows * globalRow;
  Arg index = l.i64(first);
  if (l.in.flag("batch_split")) {
    // The global batch: "global_batch", else (a hand-written schedule) the
    // data inputs' global_shape[0], as runtime/docs/schedule-format.md says.
    int64_t global = l.prog.globalBatch();
    for (const IoDesc &io : l.prog.inputs())
      if (global <= 0 && !io.globalShape.empty())
        global = io.globalShape[0];
    int64_t dp = l.prog.worldSize() / tp;
    int64_t perRank = global > 0 && global % dp == 0 ? global / dp : rows;
    index = l.rankTimes(Group::World, perRank * globalRow, first, tp);
  }
  l.call("fsdp_dropout",
         {l.stream(), l.t(), l.operand(0), l.result(0), l.i64(x.numel),
          l.f64(l.in.number("rate")), l.i64(l.in.integer("seed")), l.operand(1),
          l.dtypeArg(l.desc(l.o[1]).dtype), index, l.i64(chunk),
          l.i64(tp * chunk), chunkFirst});
}

//===--- Constants, copies and casts --------------------------------------===//

void lowerConstant(OpLowering &l) {
  l.call("fsdp_fill",
         {l.stream(), l.t(), l.result(0), l.i64(l.desc(l.r[0]).numel),
          l.f64(l.in.number("value"))});
}

void validateZerosLike(const Checker &c) {
  c.need(1, 1);
  if (!isFloatDType(c.desc(c.r[0]).dtype))
    c.fail("result must be a float dtype");
}

void lowerZerosLike(OpLowering &l) {
  l.call("fsdp_memset_zero",
         {l.stream(), l.result(0), l.i64(l.desc(l.r[0]).bytes)});
}

void validateCast(const Checker &c) {
  // Any float dtype to any float dtype, elementwise.
  c.need(1, 1);
  c.floatSame({c.o[0]});
  c.floatSame({c.r[0]});
  c.sameNumel(c.o[0], c.r[0]);
}

void lowerCast(OpLowering &l) {
  l.call("fsdp_cast",
         {l.stream(), l.dtypeArg(l.desc(l.o[0]).dtype), l.operand(0), l.t(),
          l.result(0), l.i64(l.desc(l.r[0]).numel)});
}

void validateMicroBatch(const Checker &c) {
  // Any dtype: a contiguous block of rows of the rank's batch.
  c.need(1, 1);
  const BufferDesc &x = c.desc(c.o[0]), &y = c.desc(c.r[0]);
  int64_t index = c.in.integer("index"), count = c.in.integer("count");
  std::vector<int64_t> expect = x.shape;
  if (x.dtype != y.dtype || expect.empty() || count < 1 || index < 0 ||
      index >= count || expect[0] % count)
    c.fail("expects 0 <= index < count, a batch " + shapeStr(x.shape) +
           " that divides by count " + std::to_string(count) +
           " and a result of the input's dtype");
  expect[0] /= count;
  if (y.shape != expect)
    c.fail("result " + shapeStr(y.shape) + " should be " + shapeStr(expect));
}

void lowerMicroBatch(OpLowering &l) {
  // Micro-batch `index` is the contiguous block of rows [index·m,
  // (index+1)·m).
  int64_t bytes = l.desc(l.r[0]).bytes;
  l.call("fsdp_memcpy",
         {l.stream(), l.result(0), l.buf(l.o[0], l.in.integer("index") * bytes),
          l.i64(bytes)});
}

//===--- Linear algebra ---------------------------------------------------===//

void validateLinear(const Checker &c) {
  const auto &o = c.o;
  if (o.size() != 2 && o.size() != 3)
    c.fail("expected 2 or 3 operands, got " + std::to_string(o.size()));
  c.need(o.size(), 1);
  c.floatSame({o[0], o[1], c.r[0]});
  int64_t k = c.lastDim(o[0]);
  int tw = c.in.flag("transpose_weight") ? 1 : 0; // weight [N, K], or [K, N]
  if (c.desc(o[1]).shape.size() != 2 || c.desc(o[1]).shape[1 - tw] != k)
    c.fail("weight " + shapeStr(c.desc(o[1]).shape) + " does not match input " +
           shapeStr(c.desc(o[0]).shape) +
           (tw ? " (transpose_weight: [in, out])" : ""));
  int64_t n = c.desc(o[1]).shape[tw];
  int64_t m = k ? c.desc(o[0]).numel / k : 0;
  if (o.size() == 3) {
    c.floatSame({o[0], o[2]});
    if (c.desc(o[2]).numel != n)
      c.fail("bias " + shapeStr(c.desc(o[2]).shape) + " does not match " +
             std::to_string(n) + " outputs");
  }
  if (c.desc(c.r[0]).numel != m * n || (n && c.lastDim(c.r[0]) != n))
    c.fail("result " + shapeStr(c.desc(c.r[0]).shape) + " should be [" +
           std::to_string(m) + ", " + std::to_string(n) + "]");
}

void lowerLinear(OpLowering &l) {
  bool tw = l.in.flag("transpose_weight");
  int64_t k = l.desc(l.o[0]).shape.back();
  int64_t n = l.desc(l.o[1]).shape[tw ? 1 : 0];
  l.call("fsdp_linear", {l.stream(), l.t(), l.operand(0), l.operand(1),
                         l.o.size() == 3 ? l.operand(2) : l.null(), l.result(0),
                         l.i64(k ? l.desc(l.o[0]).numel / k : 0), l.i64(k),
                         l.i64(n), l.i32(tw)});
}

void validateMatmul(const Checker &c) {
  c.need(2, 1);
  c.floatSame({c.o[0], c.o[1], c.r[0]});
  bool ta = c.in.flag("transpose_a"), tb = c.in.flag("transpose_b");
  int64_t ac = c.lastDim(c.o[0]), ar = ac ? c.desc(c.o[0]).numel / ac : 0;
  int64_t bc = c.lastDim(c.o[1]), br = bc ? c.desc(c.o[1]).numel / bc : 0;
  int64_t m = ta ? ac : ar, k = ta ? ar : ac;
  int64_t kb = tb ? bc : br, n = tb ? br : bc;
  if (k != kb)
    c.fail("inner dimensions differ: " + shapeStr(c.desc(c.o[0]).shape) +
           (ta ? "ᵀ" : "") + " · " + shapeStr(c.desc(c.o[1]).shape) +
           (tb ? "ᵀ" : ""));
  if (c.desc(c.r[0]).numel != m * n)
    c.fail("result " + shapeStr(c.desc(c.r[0]).shape) + " should hold [" +
           std::to_string(m) + ", " + std::to_string(n) + "]");
}

void lowerMatmul(OpLowering &l) {
  int64_t a = l.o[0], b = l.o[1];
  l.call("fsdp_matmul",
         {l.stream(), l.t(), l.operand(0), l.operand(1), l.result(0),
          l.i64(rowsOf(l, a)), l.i64(l.desc(a).shape.back()),
          l.i64(rowsOf(l, b)), l.i64(l.desc(b).shape.back()),
          l.i32(l.in.flag("transpose_a")), l.i32(l.in.flag("transpose_b"))});
}

//===--- Reductions -------------------------------------------------------===//

void validateReduceBroadcast(const Checker &c) {
  c.need(1, 1);
  c.floatSame({c.o[0], c.r[0]});
  bool red = c.in.kind == OpKind::ReduceSum;
  const auto &full = red ? c.desc(c.o[0]).shape : c.desc(c.r[0]).shape;
  const auto &part = red ? c.desc(c.r[0]).shape : c.desc(c.o[0]).shape;
  const std::vector<int64_t> &axes = c.in.ints("axes");
  std::set<int64_t> ax(axes.begin(), axes.end());
  for (int64_t a : axes)
    if (a < 0 || a >= static_cast<int64_t>(full.size()))
      c.fail("axis " + std::to_string(a) + " out of range for shape " +
             shapeStr(full));
  if (ax.size() != axes.size())
    c.fail("repeated axis in 'axes'");
  std::vector<int64_t> expect;
  for (size_t i = 0; i < full.size(); ++i)
    if (!ax.count(static_cast<int64_t>(i)))
      expect.push_back(full[i]);
  if (numelOf(expect) != numelOf(part))
    c.fail("shape " + shapeStr(part) + " does not match " + shapeStr(full) +
           " without axes " + shapeStr(axes));
}

/// nn.reduce_sum takes x's shape, nn.broadcast y's.
void lowerReduceBroadcast(OpLowering &l) {
  bool red = l.in.kind == OpKind::ReduceSum;
  const std::vector<int64_t> &shape = l.desc(red ? l.o[0] : l.r[0]).shape;
  const std::vector<int64_t> &axes = l.in.ints("axes");
  l.call(red ? "fsdp_reduce_sum" : "fsdp_broadcast",
         {l.stream(), l.t(), l.operand(0), l.int64s(shape),
          l.i32(static_cast<int64_t>(shape.size())), l.int64s(axes),
          l.i32(static_cast<int64_t>(axes.size())), l.result(0)});
}

/// Integer labels [...], and logits [..., C] with one row per label.
void checkLogitsLabels(const Checker &c, int64_t logits, int64_t labels) {
  if (!isIntDType(c.desc(labels).dtype))
    c.fail(std::string("labels must be i32 or i64, got ") +
           dtypeName(c.desc(labels).dtype));
  if (c.desc(logits).numel != c.desc(labels).numel * c.lastDim(logits))
    c.fail("logits " + shapeStr(c.desc(logits).shape) +
           " do not match labels " + shapeStr(c.desc(labels).shape));
}

void validateCrossEntropy(const Checker &c) {
  bool grad = c.in.kind == OpKind::CrossEntropyGrad;
  const auto &o = c.o, &r = c.r;
  c.need(grad ? 3 : 2, 1);
  checkLogitsLabels(c, o[0], o[1]);
  // The loss and dloss are f32 for bf16/f16 logits (fsdp_cross_entropy).
  int64_t loss = grad ? o[2] : r[0];
  DType lt = c.desc(o[0]).dtype, want = lossDType(lt);
  if (grad)
    c.floatSame({o[0], r[0]});
  else
    c.floatSame({o[0]});
  if (c.desc(loss).dtype != want)
    c.fail(std::string(grad ? "dloss" : "the loss") + " of " + dtypeName(lt) +
           " logits must be " + dtypeName(want) + ", got " +
           dtypeName(c.desc(loss).dtype));
  if (c.desc(loss).numel != 1)
    c.fail(grad ? "dloss must be a scalar"
                : "the loss result must be a scalar");
  if (grad)
    c.sameNumel(o[0], r[0]);
}

void lowerCrossEntropy(OpLowering &l) {
  int64_t labels = l.o[1];
  Arg positions = l.i64(l.desc(labels).numel);
  Arg classes = l.i64(l.desc(l.o[0]).shape.back());
  Arg lt = l.dtypeArg(l.desc(labels).dtype);
  // The logits' dtype: the loss (the op's result) is f32 for 16-bit logits.
  Arg t = l.dtypeArg(l.desc(l.o[0]).dtype);
  if (l.in.kind == OpKind::CrossEntropy)
    l.call("fsdp_cross_entropy", {l.stream(), t, l.operand(0), l.operand(1), lt,
                                  positions, classes, l.result(0)});
  else
    l.call("fsdp_cross_entropy_grad",
           {l.stream(), t, l.operand(0), l.operand(1), lt, l.operand(2),
            l.result(0), positions, classes});
}

//===--- The vocab-parallel cross-entropy ---------------------------------===//

/// nn.vocab_parallel_ce_stats (logits, labels → stats), _cross_entropy
/// (logits, labels, stats → loss) and _grad (logits, labels, stats, dloss →
/// dlogits): the logits are tensor-parallel rank t's columns [t·C, (t+1)·C)
/// of a vocabulary of T·C, stats [T, positions, 3] of the loss dtype.
void validateVocabCrossEntropy(const Checker &c) {
  OpKind k = c.in.kind;
  bool stats = k == OpKind::VocabParallelCeStats,
       grad = k == OpKind::VocabParallelCrossEntropyGrad;
  c.need(stats ? 2 : grad ? 4 : 3, 1);
  const auto &o = c.o, &r = c.r;
  checkLogitsLabels(c, o[0], o[1]);
  c.floatSame({o[0]});
  DType want = lossDType(c.desc(o[0]).dtype);
  int64_t st = stats ? r[0] : o[2];
  int64_t tp = c.prog.groupSize(Group::Tensor);
  if (c.desc(st).dtype != want ||
      c.desc(st).numel != tp * c.desc(o[1]).numel * 3)
    c.fail("statistics " + shapeStr(c.desc(st).shape) + " " +
           dtypeName(c.desc(st).dtype) + " must be [tensor_parallel " +
           std::to_string(tp) + ", positions " +
           std::to_string(c.desc(o[1]).numel) + ", 3] " + dtypeName(want));
  if (k == OpKind::VocabParallelCrossEntropy &&
      (c.desc(r[0]).dtype != want || c.desc(r[0]).numel != 1))
    c.fail(std::string("the loss must be a scalar ") + dtypeName(want));
  if (grad) {
    if (c.desc(o[3]).dtype != want || c.desc(o[3]).numel != 1)
      c.fail(std::string("dloss must be a scalar ") + dtypeName(want));
    c.floatSame({o[0], r[0]});
    c.sameNumel(o[0], r[0]);
  }
}

void lowerVocabCrossEntropy(OpLowering &l) {
  int64_t labels = l.o[1];
  int64_t classes = l.desc(l.o[0]).shape.back();
  int64_t tp = l.prog.groupSize(Group::Tensor);
  Arg positions = l.i64(l.desc(labels).numel);
  Arg lt = l.dtypeArg(l.desc(labels).dtype);
  Arg t = l.dtypeArg(l.desc(l.o[0]).dtype);
  // This rank's first column: its index in the tensor-parallel group x C.
  Arg first = l.rankTimes(Group::Tensor, classes);
  switch (l.in.kind) {
  case OpKind::VocabParallelCeStats:
    l.call("fsdp_vocab_ce_stats",
           {l.stream(), t, l.operand(0), l.operand(1), lt, positions,
            l.i64(classes), first, l.i64(classes * tp), l.i64(tp),
            l.rankTimes(Group::Tensor, 1), l.result(0)});
    break;
  case OpKind::VocabParallelCrossEntropy:
    l.call("fsdp_vocab_ce_loss",
           {l.stream(), t, l.operand(2), positions, l.i64(tp), l.result(0)});
    break;
  default:
    l.call("fsdp_vocab_ce_grad", {l.stream(), t, l.operand(0), l.operand(1), lt,
                                  l.operand(2), l.operand(3), l.result(0),
                                  positions, l.i64(classes), first, l.i64(tp)});
  }
}

//===--- Split and concat -------------------------------------------------===//

void validateSplitConcat(const Checker &c) {
  bool sp = c.in.kind == OpKind::Split;
  static const std::vector<int64_t> kNoSizes;
  const std::vector<int64_t> &sizes = sp ? c.in.ints("sizes") : kNoSizes;
  if (sp)
    c.need(1, sizes.size());
  else if (c.r.size() != 1 || c.o.empty())
    c.fail("expected at least 1 operand and 1 result");
  int64_t whole = sp ? c.o[0] : c.r[0];
  const std::vector<int64_t> &parts = sp ? c.r : c.o;
  const auto &ws = c.desc(whole).shape;
  int64_t rank = static_cast<int64_t>(ws.size());
  int64_t given = c.in.integer("axis");
  int64_t axis = given < 0 ? given + rank : given;
  if (axis < 0 || axis >= rank)
    c.fail("axis " + std::to_string(given) + " out of range for shape " +
           shapeStr(ws));
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    c.floatSame({whole, parts[i]});
    std::vector<int64_t> expect = ws;
    int64_t sz;
    if (sp) {
      sz = sizes[i];
    } else {
      const auto &ps = c.desc(parts[i]).shape;
      if (static_cast<int64_t>(ps.size()) != rank)
        c.fail("operand " + std::to_string(parts[i]) + " " + shapeStr(ps) +
               " has a different rank than " + shapeStr(ws));
      sz = ps[axis];
    }
    if (sz < 0)
      c.fail("negative size along the axis");
    expect[axis] = sz;
    total += sz;
    if (c.desc(parts[i]).shape != expect)
      c.fail("piece " + std::to_string(parts[i]) + " " +
             shapeStr(c.desc(parts[i]).shape) + " should be " +
             shapeStr(expect));
  }
  if (total != ws[axis])
    c.fail("pieces add up to " + std::to_string(total) + " along axis " +
           std::to_string(axis) + " but " + shapeStr(ws) + " has " +
           std::to_string(ws[axis]));
}

/// The whole viewed as [outer, Σ sizes, inner] around the axis.
void lowerSplitConcat(OpLowering &l) {
  bool sp = l.in.kind == OpKind::Split;
  const BufferDesc &whole = l.desc(sp ? l.o[0] : l.r[0]);
  int64_t rank = static_cast<int64_t>(whole.shape.size());
  int64_t given = l.in.integer("axis");
  int64_t axis = given < 0 ? given + rank : given;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= whole.shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= whole.shape[i];
  const std::vector<int64_t> &parts = sp ? l.r : l.o;
  std::vector<int64_t> sizes;
  for (int64_t id : parts)
    sizes.push_back(l.desc(id).shape[axis]);
  Arg list = l.buffers(parts), n = l.i32(static_cast<int64_t>(parts.size()));
  if (sp)
    l.call("fsdp_split", {l.stream(), l.t(), l.operand(0), list,
                          l.int64s(sizes), n, l.i64(outer), l.i64(inner)});
  else
    l.call("fsdp_concat", {l.stream(), l.t(), list, l.result(0),
                           l.int64s(sizes), n, l.i64(outer), l.i64(inner)});
}

} // namespace

std::vector<OpDef> computeOps() {
  return {
      {OpKind::Constant,
       {number("value", kRequired)},
       [](const Checker &c) { c.need(0, 1); },
       lowerConstant},
      {OpKind::ZerosLike, {}, validateZerosLike, lowerZerosLike},
      {OpKind::Cast, {}, validateCast, lowerCast},
      {OpKind::MicroBatch,
       {integer("index", kRequired), integer("count", kRequired, 1)},
       validateMicroBatch,
       lowerMicroBatch},
      {OpKind::Linear, {flag("transpose_weight")}, validateLinear, lowerLinear},
      {OpKind::Matmul,
       {flag("transpose_a"), flag("transpose_b")},
       validateMatmul,
       lowerMatmul},
      {OpKind::Add, {}, validateBinary, lowerElementwise<2, kAdd>},
      {OpKind::Mul, {}, validateBinary, lowerElementwise<2, kMul>},
      {OpKind::Relu, {}, validateUnary, lowerElementwise<1, kRelu>},
      {OpKind::ReluGrad, {}, validateBinary, lowerElementwise<2, kReluGrad>},
      {OpKind::Gelu, {geluApproximation()}, validateUnary, lowerGelu<1, kGelu>},
      {OpKind::GeluGrad,
       {geluApproximation()},
       validateBinary,
       lowerGelu<2, kGeluGrad>},
      {OpKind::Silu, {}, validateUnary, lowerElementwise<1, kSilu>},
      {OpKind::SiluGrad, {}, validateBinary, lowerElementwise<2, kSiluGrad>},
      {OpKind::Dropout,
       {number("rate", kRequired), integer("seed", kRequired),
        flag("batch_split"), integer("micro_batch"),
        integer("tensor_split", false, -1)},
       validateDropout,
       lowerDropout},
      {OpKind::ReduceSum,
       {ints("axes")},
       validateReduceBroadcast,
       lowerReduceBroadcast},
      {OpKind::Broadcast,
       {ints("axes")},
       validateReduceBroadcast,
       lowerReduceBroadcast},
      {OpKind::CrossEntropy, {}, validateCrossEntropy, lowerCrossEntropy},
      {OpKind::CrossEntropyGrad, {}, validateCrossEntropy, lowerCrossEntropy},
      {OpKind::VocabParallelCeStats,
       {integer("tp", kRequired)},
       validateVocabCrossEntropy,
       lowerVocabCrossEntropy},
      {OpKind::VocabParallelCrossEntropy,
       {},
       validateVocabCrossEntropy,
       lowerVocabCrossEntropy},
      {OpKind::VocabParallelCrossEntropyGrad,
       {},
       validateVocabCrossEntropy,
       lowerVocabCrossEntropy},
      {OpKind::Split,
       {ints("sizes", kRequired), integer("axis", kRequired)},
       validateSplitConcat,
       lowerSplitConcat},
      {OpKind::Concat,
       {integer("axis", kRequired)},
       validateSplitConcat,
       lowerSplitConcat},
  };
}

} // namespace fsdp::schedule
