//===- FSDPToLLVM.cpp - the scheduled step to LLVM dialect runtime calls --===//
//
// --convert-fsdp-to-llvm (include/fsdp/Conversion/Passes.td). The step is
// read as the runtime reads it: translated to its JSON schedule
// (lib/Target/ScheduleJSON.cpp) and parsed by fsdp::rt::Program, so buffer
// ids, view roots, arena offsets and attribute defaults are the
// interpreter's own. StepEmitter then walks the instructions doing what
// fsdp::rt::Executor's Frame does at run time -- which buffers are live
// where, which collectives are in flight, when each is waited on, which
// buffer is zero-filled first -- but statically, emitting the runtime call
// the interpreter would make at each point (the decisions depend on the
// schedule alone, never on data). Every pointer is the arena base plus a
// constant. The kernels are the table kLowerings below: one entry per op
// of the schedule format, each the same call with the same arguments as the
// Executor's case for it (runtime/lib/Executor.cpp, Frame::execute).
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Interpreter.h"
#include "fsdp/ScheduleFormat.h"
#include "fsdp/Target/Schedule.h"
#include "fsdp/compiled.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <map>
#include <unordered_map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_CONVERTFSDPTOLLVM
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
namespace rt = ::fsdp::rt;
using rt::OpKind;

namespace {

fsdp_dtype toC(rt::DType t) {
  switch (t) {
  case rt::DType::F32:
    return FSDP_F32;
  case rt::DType::F64:
    return FSDP_F64;
  case rt::DType::I32:
    return FSDP_I32;
  case rt::DType::I64:
    return FSDP_I64;
  case rt::DType::BF16:
    return FSDP_BF16;
  case rt::DType::F16:
    return FSDP_F16;
  }
  return FSDP_F32;
}

/// Emits the body of fsdp_step while simulating the interpreter's Frame.
class StepEmitter {
public:
  StepEmitter(ModuleOp module, const rt::Program &prog,
              ArrayRef<Location> instLocs)
      : module(module), prog(prog), instLocs(instLocs), b(module.getContext()),
        loc(module.getLoc()) {
    MLIRContext *ctx = module.getContext();
    ptrT = LLVM::LLVMPointerType::get(ctx);
    i32T = IntegerType::get(ctx, 32);
    i64T = IntegerType::get(ctx, 64);
    f64T = Float64Type::get(ctx);
    for (const rt::IoDesc &o : prog.outputs())
      if (o.aliases >= 0)
        aliasOf[prog.buffer(o.buffer).rootId] = o.aliases;
  }

  LogicalResult emit();

  //===--- What a lowering entry uses -------------------------------------===//
  OpBuilder &builder() { return b; }
  Location location() const { return loc; }
  const rt::BufferDesc &B(int64_t id) const { return prog.buffer(id); }
  /// The device memory of buffer `id` (root + view offset), as Frame::ptr.
  Value ptr(int64_t id);
  Value o(const rt::Instruction &in, size_t i) { return ptr(in.operands[i]); }
  Value r(const rt::Instruction &in, size_t i) { return ptr(in.results[i]); }
  /// `p` + `bytes`.
  Value offset(Value p, Value bytes) {
    return LLVM::GEPOp::create(b, loc, ptrT, b.getI8Type(), p,
                               ArrayRef<LLVM::GEPArg>{bytes});
  }
  Value offset(Value p, int64_t bytes) {
    return bytes ? offset(p, I64(bytes)) : p;
  }
  Value I64(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i64T, b.getI64IntegerAttr(v));
  }
  Value I32(int64_t v) {
    return LLVM::ConstantOp::create(b, loc, i32T, b.getI32IntegerAttr(v));
  }
  Value F64(double v) {
    return LLVM::ConstantOp::create(b, loc, f64T, b.getF64FloatAttr(v));
  }
  Value DT(rt::DType t) { return I32(toC(t)); }
  Value null() { return LLVM::ZeroOp::create(b, loc, ptrT); }
  /// The compute stream, and the channel of a group.
  Value stream() { return streamV; }
  Value channel(rt::Group g) {
    return g == rt::Group::World   ? worldV
           : g == rt::Group::Shard ? shardV
                                   : replicateV;
  }
  /// A constant int64_t array (NULL when empty), as the kernels' shape,
  /// axes and size arguments.
  Value i64Array(ArrayRef<int64_t> values);
  /// `values` stored in the step's pointer scratch (valid until the next
  /// pointer array).
  Value ptrArray(ArrayRef<Value> values);
  /// Calls runtime entry point `fn` (declared from the arguments' types,
  /// returning int) and returns its result.
  Value callValue(StringRef fn, ArrayRef<Value> args, Type result = {});
  /// Calls a status-returning entry point: a non-zero status returns it from
  /// the step (ctx->instruction already names the instruction).
  void call(StringRef fn, ArrayRef<Value> args) {
    checkRc(callValue(fn, args));
  }
  /// The event slot of a collective starting now (its fsdp_event * for the
  /// start call), in flight on the roots of `send` and `recv`.
  Value startCollective(int64_t send, int64_t recv);
  /// fsdp.free and a result's `frees`: Frame::release.
  void release(int64_t id);

  /// The first error found (a planner or schedule bug the interpreter would
  /// report at run time), emitted at the current instruction.
  void fail(const std::string &msg) {
    if (error.empty())
      error = msg;
  }

private:
  struct Slot {
    int64_t id, inst;
  };
  struct Pending {
    int64_t slot, sendRoot, recvRoot;
  };

  void checkRc(Value rc);
  void setInstruction(int64_t i);
  void allocate(int64_t rootId, bool overwritten);
  void define(int64_t id, bool overwritten);
  void checkSlotFree(const rt::BufferDesc &bd);
  void account(int64_t delta) {
    liveBytes += delta;
    peakBytes = std::max(peakBytes, liveBytes);
  }
  void waitTouching(int64_t id);
  void waitSlot(int64_t slot);
  void poke();
  Value eventSlot(int64_t slot) {
    return LLVM::GEPOp::create(b, loc, ptrT, ptrT, eventsV,
                               ArrayRef<LLVM::GEPArg>{I64(slot)});
  }
  Value field(Value base, int64_t byteOffset, Type t) {
    return LLVM::LoadOp::create(b, loc, t, offset(base, byteOffset));
  }
  void emitDescriptor(int64_t numEvents, const std::string &json);

  ModuleOp module;
  const rt::Program &prog;
  ArrayRef<Location> instLocs;
  OpBuilder b;
  Location loc;
  Type ptrT, i32T, i64T, f64T;
  LLVM::LLVMFuncOp stepFn;
  Block *errBlock = nullptr;
  Value ctxV, inputsV, outputsV, streamV, arenaV, worldV, shardV, replicateV,
      eventsV, progressTestV, doneV, scratchV;
  llvm::StringMap<LLVM::LLVMFuncOp> decls;
  std::map<std::vector<int64_t>, LLVM::GlobalOp> arrays;
  // The Frame's state, at compile time.
  std::unordered_map<int64_t, int64_t> liveAt; ///< root -> arena byte offset
  std::map<int64_t, Slot> slots;
  std::map<int64_t, int64_t> aliasOf;
  std::vector<Pending> pending;
  int64_t curInst = -1, nextEvent = 0, liveBytes = 0, peakBytes = 0;
  std::string error;

public:
  std::string json; ///< the descriptor's schedule document
  int64_t scratchSlots = 1;
};

//===--- The lowering table ----------------------------------------------===//
//
// One entry per op of the schedule format. Each entry emits what the
// Executor's case for the op calls (runtime/lib/Executor.cpp), in the same
// order with the same arguments; `t` is the dtype of the first result (of
// the first operand for ops without results). To lower a new op: add its
// OpKind to include/fsdp/ScheduleFormat.h and its case to Frame::execute,
// then one entry here calling the same entry point of kernels.h/runtime.h
// with e.ptr / e.I64 / e.F64 / e.DT arguments (e.call declares it).
// ConversionTest checks that every kOps op has an entry.

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
            {OpKind::Embedding,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &ts = e.B(in.operands[1]).shape;
               e.call("fsdp_embedding",
                      {e.stream(), t, e.o(in, 0),
                       e.DT(e.B(in.operands[0]).dtype), e.o(in, 1), e.r(in, 0),
                       e.I64(numelOf(e, in.operands[0])), e.I64(ts[0]),
                       e.I64(ts[1])});
             }},
            {OpKind::EmbeddingGrad,
             [](StepEmitter &e, const rt::Instruction &in, Value t) {
               const std::vector<int64_t> &ts = e.B(in.results[0]).shape;
               e.call("fsdp_embedding_grad",
                      {e.stream(), t, e.o(in, 0),
                       e.DT(e.B(in.operands[0]).dtype), e.o(in, 1), e.r(in, 0),
                       e.I64(numelOf(e, in.operands[0])), e.I64(ts[0]),
                       e.I64(ts[1])});
             }},
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

Lower findLowering(OpKind kind) {
  for (const Lowering &l : kLowerings)
    if (l.kind == kind)
      return l.lower;
  return nullptr;
}

//===--- StepEmitter -----------------------------------------------------===//

Value StepEmitter::ptr(int64_t id) {
  const rt::BufferDesc &bd = B(id);
  auto it = liveAt.find(bd.rootId);
  if (it == liveAt.end()) {
    fail("buffer " + std::to_string(id) +
         (bd.viewOf >= 0
              ? " (a view of buffer " + std::to_string(bd.rootId) + ")"
              : std::string()) +
         " is used but not live (never defined, or already freed)");
    return arenaV;
  }
  // Always a GEP, also at offset 0: every buffer reads as arena + offset.
  return offset(arenaV, I64(it->second +
                            bd.rootOffset * rt::dtypeSize(B(bd.rootId).dtype)));
}

Value StepEmitter::i64Array(ArrayRef<int64_t> values) {
  if (values.empty())
    return null();
  std::vector<int64_t> key(values.begin(), values.end());
  LLVM::GlobalOp &g = arrays[key];
  if (!g) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto type = LLVM::LLVMArrayType::get(i64T, values.size());
    auto value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(values.size())}, i64T),
        values);
    g = LLVM::GlobalOp::create(
        b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
        "fsdp_i64_" + std::to_string(arrays.size()), value);
  }
  return LLVM::AddressOfOp::create(b, loc, g);
}

Value StepEmitter::ptrArray(ArrayRef<Value> values) {
  scratchSlots = std::max<int64_t>(scratchSlots, values.size());
  for (auto [i, v] : llvm::enumerate(values))
    LLVM::StoreOp::create(b, loc, v,
                          LLVM::GEPOp::create(b, loc, ptrT, ptrT, scratchV,
                                              ArrayRef<LLVM::GEPArg>{I64(i)}));
  return scratchV;
}

Value StepEmitter::callValue(StringRef fn, ArrayRef<Value> args, Type result) {
  if (!result)
    result = i32T;
  LLVM::LLVMFuncOp &f = decls[fn];
  if (!f) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    SmallVector<Type> types;
    for (Value v : args)
      types.push_back(v.getType());
    f = LLVM::LLVMFuncOp::create(b, loc, fn,
                                 LLVM::LLVMFunctionType::get(result, types));
  }
  return LLVM::CallOp::create(b, loc, f, args).getResult();
}

void StepEmitter::checkRc(Value rc) {
  Value fails =
      LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, rc, I32(FSDP_OK));
  Block *next = new Block();
  stepFn.getBody().push_back(next);
  LLVM::CondBrOp::create(b, loc, fails, errBlock, ValueRange{rc}, next,
                         ValueRange{});
  b.setInsertionPointToEnd(next);
}

void StepEmitter::setInstruction(int64_t i) {
  curInst = i;
  LLVM::StoreOp::create(b, loc, I64(i), offset(ctxV, 56));
}

Value StepEmitter::startCollective(int64_t send, int64_t recv) {
  int64_t slot = nextEvent++;
  pending.push_back({slot, B(send).rootId, B(recv).rootId});
  return eventSlot(slot);
}

void StepEmitter::waitSlot(int64_t slot) {
  Value at = eventSlot(slot);
  Value e = LLVM::LoadOp::create(b, loc, ptrT, at);
  Value rc = callValue("fsdp_wait", {e});
  LLVM::StoreOp::create(b, loc, null(), at);
  checkRc(rc);
}

void StepEmitter::waitTouching(int64_t id) {
  int64_t root = B(id).rootId;
  for (size_t i = 0; i < pending.size();) {
    if (pending[i].sendRoot == root || pending[i].recvRoot == root) {
      int64_t slot = pending[i].slot;
      pending.erase(pending.begin() + i);
      waitSlot(slot);
    } else {
      ++i;
    }
  }
}

void StepEmitter::poke() {
  // Frame::poke: with collectives in flight and FSDP_PROGRESS_TEST, one
  // fsdp_event_query each (their status is not inspected, as there).
  if (pending.empty())
    return;
  Block *test = new Block(), *next = new Block();
  stepFn.getBody().push_back(test);
  stepFn.getBody().push_back(next);
  LLVM::CondBrOp::create(b, loc, progressTestV, test, next);
  b.setInsertionPointToEnd(test);
  for (const Pending &q : pending) {
    Value e = LLVM::LoadOp::create(b, loc, ptrT, eventSlot(q.slot));
    callValue("fsdp_event_query", {e, doneV});
  }
  LLVM::BrOp::create(b, loc, next);
  b.setInsertionPointToEnd(next);
}

void StepEmitter::checkSlotFree(const rt::BufferDesc &bd) {
  if (bd.bytes == 0)
    return;
  int64_t lo = bd.arenaOffset, hi = lo + bd.bytes;
  auto it = slots.lower_bound(hi);
  if (it == slots.begin())
    return;
  --it;
  const rt::BufferDesc &ob = B(it->second.id);
  if (it->first + ob.bytes <= lo)
    return;
  fail("memory plan error: buffer " + std::to_string(bd.id) +
       " at arena bytes [" + std::to_string(lo) + ", " + std::to_string(hi) +
       ") overlaps live buffer " + std::to_string(ob.id));
}

void StepEmitter::allocate(int64_t rootId, bool overwritten) {
  if (liveAt.count(rootId))
    return fail("buffer " + std::to_string(rootId) +
                " is defined while still live");
  const rt::BufferDesc &bd = B(rootId);
  checkSlotFree(bd);
  if (bd.bytes > 0)
    slots[bd.arenaOffset] = {rootId, curInst};
  liveAt[rootId] = bd.arenaOffset;
  if (!overwritten)
    call("fsdp_memset_zero",
         {stream(), offset(arenaV, bd.arenaOffset), I64(bd.bytes)});
  account(bd.bytes);
}

void StepEmitter::define(int64_t id, bool overwritten) {
  const rt::BufferDesc &bd = B(id);
  if (bd.viewOf >= 0) {
    if (!liveAt.count(bd.rootId))
      define(bd.rootId, false);
    return;
  }
  auto alias = aliasOf.find(id);
  if (alias != aliasOf.end()) {
    waitTouching(alias->second);
    liveAt[id] = B(alias->second).arenaOffset;
    return;
  }
  allocate(id, overwritten);
}

void StepEmitter::release(int64_t id) {
  const rt::BufferDesc &bd = B(id);
  if (bd.viewOf >= 0)
    return;
  waitTouching(id);
  auto it = liveAt.find(id);
  if (it == liveAt.end())
    return fail("buffer " + std::to_string(id) + " freed but not live");
  if (!aliasOf.count(id)) {
    account(-bd.bytes);
    if (bd.bytes > 0)
      slots.erase(bd.arenaOffset);
  }
  liveAt.erase(it);
}

LogicalResult StepEmitter::emit() {
  b.setInsertionPointToEnd(module.getBody());
  stepFn = LLVM::LLVMFuncOp::create(
      b, loc, FSDP_STEP_SYMBOL,
      LLVM::LLVMFunctionType::get(i32T, {ptrT, ptrT, ptrT}));
  Block *entry = stepFn.addEntryBlock(b);
  errBlock = new Block();
  stepFn.getBody().push_back(errBlock);
  errBlock->addArgument(i32T, loc);
  b.setInsertionPointToEnd(errBlock);
  LLVM::ReturnOp::create(b, loc, errBlock->getArgument(0));

  b.setInsertionPointToEnd(entry);
  ctxV = entry->getArgument(0);
  inputsV = entry->getArgument(1);
  outputsV = entry->getArgument(2);
  // fsdp_step_context's fields (compiled.h).
  streamV = field(ctxV, 8, ptrT);
  arenaV = field(ctxV, 16, ptrT);
  worldV = field(ctxV, 24, ptrT);
  shardV = field(ctxV, 32, ptrT);
  replicateV = field(ctxV, 40, ptrT);
  eventsV = field(ctxV, 48, ptrT);
  progressTestV = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq,
                                       callValue("fsdp_get_progress", {}, i32T),
                                       I32(FSDP_PROGRESS_TEST));
  doneV = LLVM::AllocaOp::create(b, loc, ptrT, i32T, I64(1));
  // The pointer scratch's size is known at the end; patched below.
  auto scratch = LLVM::AllocaOp::create(b, loc, ptrT, ptrT, I64(1));
  scratchV = scratch;

  auto report = [&](int64_t inst) {
    Location at = inst >= 0 && inst < static_cast<int64_t>(instLocs.size())
                      ? instLocs[inst]
                      : loc;
    emitError(at) << (inst >= 0 ? prog.instructionName(inst) + ": "
                                : std::string())
                  << error;
    return failure();
  };

  // Frame::bindInputs.
  setInstruction(-1);
  for (auto [i, io] : llvm::enumerate(prog.inputs())) {
    const rt::BufferDesc &bd = B(io.buffer);
    if (rt::isStateRole(io.role)) {
      checkSlotFree(bd);
      if (bd.bytes > 0)
        slots[bd.arenaOffset] = {bd.id, -1};
      liveAt[bd.id] = bd.arenaOffset;
      account(bd.bytes);
      continue;
    }
    allocate(bd.id, /*overwritten=*/true);
    Value src = LLVM::LoadOp::create(
        b, loc, ptrT,
        LLVM::GEPOp::create(b, loc, ptrT, ptrT, inputsV,
                            ArrayRef<LLVM::GEPArg>{I64(i)}));
    call("fsdp_memcpy", {stream(), ptr(bd.id), src, I64(bd.bytes)});
  }
  if (!error.empty())
    return report(-1);

  // Executor::step's loop.
  const std::vector<rt::Instruction> &program = prog.instructions();
  for (size_t idx = 0; idx < program.size(); ++idx) {
    const rt::Instruction &in = program[idx];
    setInstruction(static_cast<int64_t>(idx));
    Lower lower = findLowering(in.kind);
    if (!lower) {
      error = "'" + in.op + "' has no lowering to the runtime's C API";
      return report(static_cast<int64_t>(idx));
    }
    for (int64_t id : in.operands)
      waitTouching(id);
    for (int64_t id : in.results) {
      waitTouching(id);
      // Frame::overwritesResults: every kernel writes all of its results
      // (an all-gather too: the compiled step runs at its world size).
      define(id, /*overwritten=*/true);
    }
    Value t = DT(B(in.results.empty() ? in.operands[0] : in.results[0]).dtype);
    lower(*this, in, t);
    for (int64_t id : in.frees)
      release(id);
    poke();
    if (!error.empty())
      return report(static_cast<int64_t>(idx));
  }
  setInstruction(-2);
  while (!pending.empty()) {
    int64_t slot = pending.front().slot;
    pending.erase(pending.begin());
    waitSlot(slot);
  }
  for (auto [j, o] : llvm::enumerate(prog.outputs())) {
    Value p = ptr(o.buffer);
    LLVM::StoreOp::create(b, loc, p,
                          LLVM::GEPOp::create(b, loc, ptrT, ptrT, outputsV,
                                              ArrayRef<LLVM::GEPArg>{I64(j)}));
  }
  if (!error.empty())
    return report(-1);
  LLVM::ReturnOp::create(b, loc, I32(FSDP_OK));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(scratch);
    Value n = I64(scratchSlots);
    scratch.getArraySizeMutable().assign(n);
  }
  emitDescriptor(nextEvent, json);
  return success();
}

void StepEmitter::emitDescriptor(int64_t numEvents, const std::string &doc) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  // The schedule document, NUL-terminated.
  std::string text = doc;
  text.push_back('\0');
  auto docType = LLVM::LLVMArrayType::get(b.getI8Type(), text.size());
  LLVM::GlobalOp::create(b, loc, docType, /*isConstant=*/true,
                         LLVM::Linkage::Private, "fsdp_step_schedule",
                         b.getStringAttr(text));
  // fsdp_step_descriptor (compiled.h).
  SmallVector<Type> fields{i32T, i32T};
  fields.append(10, i64T);
  fields.push_back(ptrT);
  fields.push_back(i64T);
  auto descType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  auto desc = LLVM::GlobalOp::create(b, loc, descType, /*isConstant=*/true,
                                     LLVM::Linkage::Private,
                                     "fsdp_step_descriptor", Attribute());
  Block *init = b.createBlock(&desc.getInitializerRegion());
  b.setInsertionPointToEnd(init);
  Value d = LLVM::UndefOp::create(b, loc, descType);
  int64_t pos = 0;
  auto put = [&](Value v) {
    d = LLVM::InsertValueOp::create(b, loc, d, v, ArrayRef<int64_t>{pos++});
  };
  put(I32(FSDP_STEP_ABI_VERSION));
  put(I32(::fsdp::schedule::kVersion));
  for (int64_t v :
       {prog.worldSize(), prog.replicas(), prog.shardSize(),
        prog.plannedArenaBytes(), prog.arenaAlignment(),
        static_cast<int64_t>(prog.inputs().size()),
        static_cast<int64_t>(prog.outputs().size()),
        static_cast<int64_t>(prog.instructions().size()), numEvents, peakBytes})
    put(I64(v));
  put(LLVM::AddressOfOp::create(b, loc, ptrT, "fsdp_step_schedule"));
  put(I64(static_cast<int64_t>(doc.size())));
  LLVM::ReturnOp::create(b, loc, d);

  b.setInsertionPointToEnd(module.getBody());
  auto describe = LLVM::LLVMFuncOp::create(
      b, loc, FSDP_STEP_DESCRIBE_SYMBOL, LLVM::LLVMFunctionType::get(ptrT, {}));
  b.setInsertionPointToEnd(describe.addEntryBlock(b));
  LLVM::ReturnOp::create(b, loc, LLVM::AddressOfOp::create(b, loc, desc));
}

struct ConvertFSDPToLLVMPass
    : public mlir::fsdp::impl::ConvertFSDPToLLVMBase<ConvertFSDPToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> fn = mlir::fsdp::getStepFunction(module);
    if (failed(fn))
      return signalPassFailure();
    // Every op must have a lowering: named at its own location.
    SmallVector<Location> instLocs;
    bool ok = true;
    for (Operation &op : fn->getBody().front().without_terminator()) {
      instLocs.push_back(op.getLoc());
      std::string name = op.getName().getStringRef().str();
      if (!mlir::fsdp::hasLLVMLowering(name.c_str())) {
        op.emitOpError() << "has no lowering to the runtime's C API "
                            "(--convert-fsdp-to-llvm)";
        ok = false;
      }
    }
    if (!ok)
      return signalPassFailure();
    std::string doc;
    {
      llvm::raw_string_ostream os(doc);
      if (failed(mlir::fsdp::translateToSchedule(module, os)))
        return signalPassFailure();
    }
    rt::Program prog;
    std::string err;
    if (!rt::Program::tryFromString(doc, prog, err, /*checkWorldSize=*/false,
                                    "the step")) {
      module.emitError() << err;
      return signalPassFailure();
    }
    // fsdp-run binds a compiled step's state by unit, as a JSON schedule's:
    // a whole unsharded parameter (the forward graph, or fsdp-autodiff
    // alone) would compile but never run.
    for (const rt::IoDesc &io : prog.inputs())
      if (rt::isStateRole(io.role) && !prog.findUnit(io.unit)) {
        fn->emitError() << "the step is not a planned FSDP step: input '"
                        << (io.fqn.empty() ? io.role : io.fqn)
                        << "' is a whole parameter with no unit; plan it "
                           "with fsdp-opt --fsdp-pipeline first";
        return signalPassFailure();
      }
    if (!prog.usesArena()) {
      fn->emitError() << "is not memory-planned (an arena offset for every "
                         "buffer): run fsdp-pipeline or fsdp-memory-plan "
                         "first";
      return signalPassFailure();
    }
    // The step replaces the module's contents.
    SmallVector<Operation *> old;
    for (Operation &op : module.getBody()->getOperations())
      old.push_back(&op);
    SmallVector<StringAttr> drop;
    for (NamedAttribute a : module->getDiscardableAttrs())
      if (!a.getName().getValue().starts_with("llvm."))
        drop.push_back(a.getName());
    for (StringAttr a : drop)
      module->removeDiscardableAttr(a);
    StepEmitter emitter(module, prog, instLocs);
    emitter.json = std::move(doc);
    if (failed(emitter.emit()))
      return signalPassFailure();
    for (Operation *op : llvm::reverse(old))
      op->erase();
  }
};

} // namespace

bool mlir::fsdp::hasLLVMLowering(const char *name) {
  OpKind kind;
  return ::fsdp::schedule::lookupOp(name, kind) && findLowering(kind);
}
