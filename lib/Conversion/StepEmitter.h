//===- StepEmitter.h - the step's body, emitted as the interpreter runs it
//-===//
//
// Private to lib/Conversion. StepEmitter walks a schedule's instructions
// doing what fsdp::rt::Executor's Frame does at run time (live slots,
// collectives in flight, waits, zero-fills), statically, and emits the
// runtime call the interpreter would make at each point (StepEmitter.cpp);
// the kernels' calls are the table of KernelLowerings.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_CONVERSION_STEPEMITTER_H
#define FSDP_LIB_CONVERSION_STEPEMITTER_H

#include "fsdp/Interpreter.h"
#include "fsdp/ScheduleFormat.h"
#include "fsdp/compiled.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlir::fsdp::conversion {

namespace rt = ::fsdp::rt;
using rt::OpKind;

inline fsdp_dtype toC(rt::DType t) {
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

/// Emits the calls of one instruction; `t` is the dtype of its first result
/// (of its first operand for ops without results).
using Lower = void (*)(StepEmitter &e, const rt::Instruction &in, Value t);
/// The lowering of `kind` (KernelLowerings.cpp), or null.
Lower findLowering(OpKind kind);

} // namespace mlir::fsdp::conversion

#endif // FSDP_LIB_CONVERSION_STEPEMITTER_H
