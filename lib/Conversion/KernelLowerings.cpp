//===- KernelLowerings.cpp - one runtime call per schedule op -------------===//
//
// The kernels of --convert-fsdp-to-llvm: for each op of the schedule format
// the call the Executor's case for it makes (runtime/lib/Executor.cpp,
// Frame::execute), in the same order with the same arguments.
//
//===----------------------------------------------------------------------===//
#include "StepEmitter.h"
#include "fsdp/Conversion/Passes.h"

using namespace mlir;
using namespace mlir::fsdp::conversion;

namespace {

//===--- The lowering table ----------------------------------------------===//
//
// One entry per op of the schedule format. Each entry emits what the
// Executor's case for the op calls (runtime/lib/Executor.cpp), in the same
// order with the same arguments; `t` is the dtype of the first result (of
// the first operand for ops without results). To lower a new op: add its
// OpKind to include/fsdp/ScheduleFormat.h and its case to Frame::execute,
// then one entry here calling the same entry point of kernels.h/runtime.h
// with e.ptr / e.I64 / e.F64 / e.DT arguments (e.call declares it).
// DialectTest.EveryScheduleOpHasAnLLVMLowering checks that every kOps op has
// an entry.

using Lower = void (*)(StepEmitter &e, const rt::Instruction &in, Value t);

struct Lowering {
  OpKind kind;
  Lower lower;
};

int64_t numelOf(StepEmitter &e, int64_t id) { return e.B(id).numel; }
int64_t lastDim(StepEmitter &e, int64_t id) { return e.B(id).shape.back(); }
int64_t rowsOf(StepEmitter &e, int64_t id) {
  int64_t c = lastDim(e, id);
  return c ? e.B(id).numel / c : 0;
}

/// nn.sgd_update / nn.adamw_update through fsdp_optimizer_update, as the
/// Executor: the rate from device memory when the update has an lr operand,
/// weight-decay groups at this rank's shard offset (read from the shard
/// channel at run time: one .so serves every rank).
void optimizerUpdate(StepEmitter &e, const rt::Instruction &in, Value t) {
  bool adam = in.kind == rt::OpKind::AdamwUpdate;
  size_t lrAt = adam ? 5 : 2;
  int64_t n = numelOf(e, in.results[0]);
  OpBuilder &b = e.builder();
  Location loc = e.location();
  Value flatOffset = e.I64(0);
  if (in.sharded && !in.noDecay.empty()) {
    Value rank =
        e.callValue("fsdp_channel_rank", {e.channel(rt::Group::Shard)});
    Value rank64 = LLVM::SExtOp::create(b, loc, b.getI64Type(), rank);
    flatOffset = LLVM::MulOp::create(b, loc, rank64, e.I64(n));
  }
  auto opt = [&](bool isResult, size_t i) {
    return adam ? (isResult ? e.r(in, i) : e.o(in, i)) : e.null();
  };
  e.call("fsdp_optimizer_update",
         {e.stream(),
          t,
          e.I32(adam),
          e.o(in, 0),
          e.o(in, 1),
          opt(false, 2),
          opt(false, 3),
          opt(false, 4),
          adam ? e.DT(e.B(in.operands[4]).dtype) : e.I32(FSDP_I64),
          e.r(in, 0),
          opt(true, 1),
          opt(true, 2),
          e.I64(n),
          in.operands.size() > lrAt ? e.o(in, lrAt) : e.null(),
          e.F64(in.lr),
          e.F64(in.beta1),
          e.F64(in.beta2),
          e.F64(in.eps),
          e.F64(in.weightDecay),
          e.i64Array(in.noDecay),
          e.I64(static_cast<int64_t>(in.noDecay.size())),
          flatOffset});
}

/// nn.embedding (the table is operand 1) and nn.embedding_grad (result 0):
/// (s, t, idx, idx dtype, table or dy, y or dtable, n, vocab, dim).
void lowerEmbedding(StepEmitter &e, const rt::Instruction &in, Value t) {
  bool grad = in.kind == OpKind::EmbeddingGrad;
  const std::vector<int64_t> &ts =
      e.B(grad ? in.results[0] : in.operands[1]).shape;
  e.call(grad ? "fsdp_embedding_grad" : "fsdp_embedding",
         {e.stream(), t, e.o(in, 0), e.DT(e.B(in.operands[0]).dtype),
          e.o(in, 1), e.r(in, 0), e.I64(numelOf(e, in.operands[0])),
          e.I64(ts[0]), e.I64(ts[1])});
}

/// An elementwise kernel (s, t, inputs..., y, n) with n the result's numel.
template <int Inputs>
void elementwise(StepEmitter &e, const rt::Instruction &in, Value t,
                 StringRef fn, std::vector<Value> extra = {}) {
  std::vector<Value> args{e.stream(), t};
  for (int i = 0; i < Inputs; ++i)
    args.push_back(e.o(in, i));
  args.push_back(e.r(in, 0));
  args.push_back(e.I64(numelOf(e, in.results[0])));
  args.insert(args.end(), extra.begin(), extra.end());
  e.call(fn, args);
}

void lowerNorm(StepEmitter &e, const rt::Instruction &in, Value t) {
  int64_t c = lastDim(e, in.operands[0]), rows = rowsOf(e, in.operands[0]);
  Value s = e.stream();
  switch (in.kind) {
  case OpKind::LayerNorm:
    e.call("fsdp_layer_norm",
           {s, t, e.o(in, 0), e.o(in, 1), e.o(in, 2), e.r(in, 0), e.I64(rows),
            e.I64(c), e.F64(in.eps)});
    return;
  case OpKind::LayerNormGrad:
    e.call("fsdp_layer_norm_grad",
           {s, t, e.o(in, 0), e.o(in, 1), e.o(in, 2), e.r(in, 0), e.r(in, 1),
            e.r(in, 2), e.I64(rows), e.I64(c), e.F64(in.eps)});
    return;
  case OpKind::RmsNorm:
    e.call("fsdp_rms_norm", {s, t, e.o(in, 0), e.o(in, 1), e.r(in, 0),
                             e.I64(rows), e.I64(c), e.F64(in.eps)});
    return;
  default:
    e.call("fsdp_rms_norm_grad",
           {s, t, e.o(in, 0), e.o(in, 1), e.o(in, 2), e.r(in, 0), e.r(in, 1),
            e.I64(rows), e.I64(c), e.F64(in.eps)});
  }
}

void lowerGatherScatter(StepEmitter &e, const rt::Instruction &in, Value) {
  bool ag = in.kind == OpKind::AllGather;
  int64_t src = in.operands[0], dst = in.results[0];
  const rt::BufferDesc &sb = e.B(ag ? src : dst);
  Value ch = e.channel(in.group), ps = e.ptr(src), pd = e.ptr(dst);
  Value slot = e.startCollective(src, dst);
  if (ag)
    e.call("fsdp_all_gather_start",
           {ch, ps, pd, e.I64(sb.numel), e.DT(sb.dtype), slot});
  else
    e.call("fsdp_reduce_scatter_start",
           {ch, ps, pd, e.I64(sb.numel), e.DT(sb.dtype),
            e.I32(in.average ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM), slot});
}

void lowerPackUnpack(StepEmitter &e, const rt::Instruction &in, Value) {
  // Block b of the bucket is block b of each unit buffer in turn: one
  // strided copy per unit.
  bool pack = in.kind == OpKind::Pack;
  const std::vector<int64_t> &parts = pack ? in.operands : in.results;
  int64_t bucket = pack ? in.results[0] : in.operands[0];
  int64_t es = rt::dtypeSize(e.B(bucket).dtype), row = 0;
  for (int64_t id : parts)
    row += e.B(id).numel / in.blocks * es;
  Value bp = e.ptr(bucket);
  int64_t at = 0;
  for (int64_t id : parts) {
    int64_t width = e.B(id).numel / in.blocks * es;
    if (pack)
      e.call("fsdp_memcpy_2d",
             {e.stream(), e.offset(bp, at), e.I64(row), e.ptr(id), e.I64(width),
              e.I64(width), e.I64(in.blocks)});
    else
      e.call("fsdp_memcpy_2d",
             {e.stream(), e.ptr(id), e.I64(width), e.offset(bp, at), e.I64(row),
              e.I64(width), e.I64(in.blocks)});
    at += width;
  }
}

void lowerSplitConcat(StepEmitter &e, const rt::Instruction &in, Value t) {
  bool sp = in.kind == OpKind::Split;
  const rt::BufferDesc &whole = e.B(sp ? in.operands[0] : in.results[0]);
  int64_t rank = static_cast<int64_t>(whole.shape.size());
  int64_t axis = in.axis < 0 ? in.axis + rank : in.axis;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= whole.shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= whole.shape[i];
  const std::vector<int64_t> &parts = sp ? in.results : in.operands;
  std::vector<int64_t> sizes;
  std::vector<Value> ptrs;
  for (int64_t id : parts) {
    sizes.push_back(e.B(id).shape[axis]);
    ptrs.push_back(e.ptr(id));
  }
  Value whole_ = sp ? e.o(in, 0) : e.r(in, 0);
  Value list = e.ptrArray(ptrs), sz = e.i64Array(sizes);
  Value n = e.I32(static_cast<int64_t>(parts.size()));
  if (sp)
    e.call("fsdp_split",
           {e.stream(), t, whole_, list, sz, n, e.I64(outer), e.I64(inner)});
  else
    e.call("fsdp_concat",
           {e.stream(), t, list, whole_, sz, n, e.I64(outer), e.I64(inner)});
}

const Lowering
    kLowerings[] =
        {
            {OpKind::Constant,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               e.call("fsdp_fill",
                      {e.stream(), t, e.r(in, 0),
                       e.I64(numelOf(e, in.results[0])), e.F64(in.value)});
             }},
            {OpKind::ZerosLike,
             [](StepEmitter &e, const rt::Instruction &in, Value) {
               e.call("fsdp_memset_zero", {e.stream(), e.r(in, 0),
                                           e.I64(e.B(in.results[0]).bytes)});
             }},
            {OpKind::AllGather, lowerGatherScatter},
            {OpKind::ReduceScatter, lowerGatherScatter},
            {OpKind::AllReduce,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               Value ch = e.channel(in.group), x = e.o(in, 0), y = e.r(in, 0);
               Value slot = e.startCollective(in.operands[0], in.results[0]);
               e.call("fsdp_all_reduce_start",
                      {ch, x, y, e.I64(numelOf(e, in.results[0])), t,
                       e.I32(in.average ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM),
                       slot});
             }},
            {OpKind::LocalShard,
             [](StepEmitter &e, const rt::Instruction &in, Value) {
               // This rank's slice [i*s, (i+1)*s) of the full buffer.
               int64_t bytes = e.B(in.results[0]).bytes;
               Value i =
                   e.callValue("fsdp_channel_rank", {e.channel(in.group)});
               Value at = LLVM::MulOp::create(
                   e.builder(), e.location(),
                   LLVM::SExtOp::create(e.builder(), e.location(),
                                        e.builder().getI64Type(), i),
                   e.I64(bytes));
               e.call("fsdp_memcpy", {e.stream(), e.r(in, 0),
                                      e.offset(e.o(in, 0), at), e.I64(bytes)});
             }},
            {OpKind::MicroBatch,
             [](StepEmitter &e, const rt::Instruction &in, Value) {
               // Rows [index·m, (index+1)·m) of the batch.
               int64_t bytes = e.B(in.results[0]).bytes;
               e.call("fsdp_memcpy",
                      {e.stream(), e.r(in, 0),
                       e.offset(e.o(in, 0), in.index * bytes), e.I64(bytes)});
             }},
            {OpKind::Pack, lowerPackUnpack},
            {OpKind::Unpack, lowerPackUnpack},
            {OpKind::Free, [](StepEmitter &e, const rt::Instruction &in,
                              Value) { e.release(in.operands[0]); }},
            // Bound when their results are defined; the wait happened before.
            {OpKind::ParamView,
             [](StepEmitter &, const rt::Instruction &, Value) {}},
            {OpKind::Wait,
             [](StepEmitter &, const rt::Instruction &, Value) {}},
            {OpKind::Cast,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               e.call("fsdp_cast",
                      {e.stream(), e.DT(e.B(in.operands[0]).dtype), e.o(in, 0),
                       t, e.r(in, 0), e.I64(numelOf(e, in.results[0]))});
             }},
            {OpKind::Linear,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               int64_t k = lastDim(e, in.operands[0]);
               int64_t n =
                   e.B(in.operands[1]).shape[in.transposeWeight ? 1 : 0];
               e.call("fsdp_linear",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1),
                       in.operands.size() == 3 ? e.o(in, 2) : e.null(),
                       e.r(in, 0), e.I64(rowsOf(e, in.operands[0])), e.I64(k),
                       e.I64(n), e.I32(in.transposeWeight)});
             }},
            {OpKind::Matmul,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               int64_t a = in.operands[0], bb = in.operands[1];
               e.call("fsdp_matmul",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1), e.r(in, 0),
                       e.I64(rowsOf(e, a)), e.I64(lastDim(e, a)),
                       e.I64(rowsOf(e, bb)), e.I64(lastDim(e, bb)),
                       e.I32(in.transA), e.I32(in.transB)});
             }},
            {OpKind::Add,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<2>(e, in, t, "fsdp_add");
             }},
            {OpKind::Mul,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<2>(e, in, t, "fsdp_mul");
             }},
            {OpKind::Relu,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<1>(e, in, t, "fsdp_relu");
             }},
            {OpKind::ReluGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<2>(e, in, t, "fsdp_relu_grad");
             }},
            {OpKind::Gelu,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<1>(e, in, t, "fsdp_gelu", {e.I32(in.approxTanh)});
             }},
            {OpKind::GeluGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<2>(e, in, t, "fsdp_gelu_grad",
                              {e.I32(in.approxTanh)});
             }},
            {OpKind::Silu,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<1>(e, in, t, "fsdp_silu");
             }},
            {OpKind::SiluGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               elementwise<2>(e, in, t, "fsdp_silu_grad");
             }},
            {OpKind::ReduceSum,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &xs = e.B(in.operands[0]).shape;
               e.call(
                   "fsdp_reduce_sum",
                   {e.stream(), t, e.o(in, 0), e.i64Array(xs),
                    e.I32(static_cast<int64_t>(xs.size())), e.i64Array(in.axes),
                    e.I32(static_cast<int64_t>(in.axes.size())), e.r(in, 0)});
             }},
            {OpKind::Broadcast,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &ys = e.B(in.results[0]).shape;
               e.call(
                   "fsdp_broadcast",
                   {e.stream(), t, e.o(in, 0), e.i64Array(ys),
                    e.I32(static_cast<int64_t>(ys.size())), e.i64Array(in.axes),
                    e.I32(static_cast<int64_t>(in.axes.size())), e.r(in, 0)});
             }},
            {OpKind::CrossEntropy,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               int64_t labels = in.operands[1];
               e.call("fsdp_cross_entropy",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1),
                       e.DT(e.B(labels).dtype), e.I64(numelOf(e, labels)),
                       e.I64(lastDim(e, in.operands[0])), e.r(in, 0)});
             }},
            {OpKind::CrossEntropyGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               int64_t labels = in.operands[1];
               e.call("fsdp_cross_entropy_grad",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1),
                       e.DT(e.B(labels).dtype), e.o(in, 2), e.r(in, 0),
                       e.I64(numelOf(e, labels)),
                       e.I64(lastDim(e, in.operands[0]))});
             }},
            {OpKind::SgdUpdate, optimizerUpdate},
            {OpKind::AdamwUpdate, optimizerUpdate},
            {OpKind::LrSchedule,
             [](StepEmitter &e, const rt::Instruction &in, Value) {
               e.call("fsdp_lr_schedule",
                      {e.stream(), e.o(in, 0), e.DT(e.B(in.operands[0]).dtype),
                       e.r(in, 0), e.I32(in.lrKind), e.F64(in.lr),
                       e.I64(in.warmupSteps),
                       in.operands.size() > 1 ? e.o(in, 1) : e.null(),
                       e.I64(in.decaySteps), e.F64(in.minLr)});
             }},
            {OpKind::SumSquares,
             [](StepEmitter &e, const rt::Instruction &in, Value) {
               e.call("fsdp_sum_squares",
                      {e.stream(), e.DT(e.B(in.operands[0]).dtype), e.o(in, 0),
                       e.I64(numelOf(e, in.operands[0])), e.r(in, 0)});
             }},
            {OpKind::GradNorm,
             [](StepEmitter &e, const rt::Instruction &in, Value) {
               e.call("fsdp_grad_norm",
                      {e.stream(), e.o(in, 0), e.F64(in.maxNorm), e.r(in, 0),
                       e.r(in, 1)});
             }},
            {OpKind::Scale,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               e.call("fsdp_scale",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1), e.r(in, 0),
                       e.I64(numelOf(e, in.results[0]))});
             }},
            {OpKind::Flatten,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               std::vector<Value> parts;
               std::vector<int64_t> numels;
               for (int64_t id : in.operands) {
                 parts.push_back(e.ptr(id));
                 numels.push_back(e.B(id).numel);
               }
               Value list = e.ptrArray(parts);
               e.call("fsdp_flatten",
                      {e.stream(), t, list, e.i64Array(numels),
                       e.i64Array(in.offsets),
                       e.I32(static_cast<int64_t>(in.operands.size())),
                       e.r(in, 0), e.I64(numelOf(e, in.results[0]))});
             }},
            {OpKind::Embedding, lowerEmbedding},
            {OpKind::EmbeddingGrad, lowerEmbedding},
            {OpKind::PositionEmbedding,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &xs = e.B(in.operands[0]).shape;
               e.call("fsdp_position_embedding",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1), e.r(in, 0),
                       e.I64(xs[0]), e.I64(xs[1]), e.I64(xs[2])});
             }},
            {OpKind::PositionEmbeddingGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &xs = e.B(in.operands[0]).shape;
               e.call("fsdp_position_embedding_grad",
                      {e.stream(), t, e.o(in, 0), e.r(in, 0), e.I64(xs[0]),
                       e.I64(xs[1]), e.I64(xs[2]),
                       e.I64(e.B(in.results[0]).shape[0])});
             }},
            {OpKind::LayerNorm, lowerNorm},
            {OpKind::LayerNormGrad, lowerNorm},
            {OpKind::RmsNorm, lowerNorm},
            {OpKind::RmsNormGrad, lowerNorm},
            {OpKind::Rope,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &xs = e.B(in.operands[0]).shape;
               e.call("fsdp_rope",
                      {e.stream(), t, e.o(in, 0), e.r(in, 0), e.I64(xs[0]),
                       e.I64(xs[1]), e.I64(xs[2] / in.headDim),
                       e.I64(in.headDim), e.F64(in.theta), e.I32(in.inverse)});
             }},
            {OpKind::Attention,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &qs = e.B(in.operands[0]).shape;
               e.call("fsdp_attention",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1), e.o(in, 2),
                       e.r(in, 0), e.I64(qs[0]), e.I64(qs[1]),
                       e.I64(in.numHeads), e.I64(in.numKvHeads),
                       e.I64(qs[2] / in.numHeads)});
             }},
            {OpKind::AttentionGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &qs = e.B(in.operands[0]).shape;
               e.call("fsdp_attention_grad",
                      {e.stream(), t, e.o(in, 0), e.o(in, 1), e.o(in, 2),
                       e.o(in, 3), e.r(in, 0), e.r(in, 1), e.r(in, 2),
                       e.I64(qs[0]), e.I64(qs[1]), e.I64(in.numHeads),
                       e.I64(in.numKvHeads), e.I64(qs[2] / in.numHeads)});
             }},
            {OpKind::Split, lowerSplitConcat},
            {OpKind::Concat, lowerSplitConcat},
};

} // namespace

Lower mlir::fsdp::conversion::findLowering(OpKind kind) {
  for (const Lowering &l : kLowerings)
    if (l.kind == kind)
      return l.lower;
  return nullptr;
}

bool mlir::fsdp::hasLLVMLowering(const char *name) {
  OpKind kind;
  return ::fsdp::schedule::lookupOp(name, kind) && findLowering(kind);
}
