//===- PlanEmitter.cpp - a step plan as LLVM dialect calls ----------------===//
//
// See PlanEmitter.h. fsdp_step(ctx, inputs, outputs) reads its stream,
// arena, channels and event slots from the context (fsdp/compiled.h) and
// makes the plan's calls in order; in arena mode Bind, Alias and Release
// need no code (every slot lives at its planned offset).
//
//===----------------------------------------------------------------------===//
#include "PlanEmitter.h"

#include "fsdp/compiled.h"

using namespace mlir;
using namespace mlir::fsdp::conversion;
using schedule::ActionKind;
using schedule::Arg;
using schedule::ArgKind;

PlanEmitter::PlanEmitter(ModuleOp module, const schedule::Program &prog,
                         const schedule::StepPlan &plan, std::string suffix)
    : module(module), prog(prog), plan(plan), suffix(std::move(suffix)),
      b(module.getContext()), loc(module.getLoc()) {
  MLIRContext *ctx = module.getContext();
  ptrT = LLVM::LLVMPointerType::get(ctx);
  i32T = IntegerType::get(ctx, 32);
  i64T = IntegerType::get(ctx, 64);
  f64T = Float64Type::get(ctx);
}

//===--- Values -----------------------------------------------------------===//

Value PlanEmitter::i64(int64_t v) {
  return LLVM::ConstantOp::create(b, loc, i64T, b.getI64IntegerAttr(v));
}
Value PlanEmitter::i32(int64_t v) {
  return LLVM::ConstantOp::create(b, loc, i32T, b.getI32IntegerAttr(v));
}
Value PlanEmitter::f64(double v) {
  return LLVM::ConstantOp::create(b, loc, f64T, b.getF64FloatAttr(v));
}
Value PlanEmitter::null() { return LLVM::ZeroOp::create(b, loc, ptrT); }

Value PlanEmitter::offset(Value p, Value bytes) {
  return LLVM::GEPOp::create(b, loc, ptrT, b.getI8Type(), p,
                             ArrayRef<LLVM::GEPArg>{bytes});
}
Value PlanEmitter::offset(Value p, int64_t bytes) {
  return bytes ? offset(p, i64(bytes)) : p;
}

Value PlanEmitter::field(Value base, int64_t byteOffset, Type t) {
  return LLVM::LoadOp::create(b, loc, t, offset(base, byteOffset));
}

Value PlanEmitter::slotAddress(int32_t slot, int64_t bytes) {
  // Always a GEP, also at offset 0: every buffer reads as arena + offset.
  return offset(arenaV,
                i64(plan.slots[static_cast<size_t>(slot)].arenaOffset + bytes));
}

Value PlanEmitter::channel(schedule::Group g) {
  switch (g) {
  case schedule::Group::World:
    return worldV;
  case schedule::Group::Shard:
    return shardV;
  case schedule::Group::Replicate:
    return replicateV;
  case schedule::Group::Tensor:
    return tensorV;
  case schedule::Group::Pipeline:
    return pipelineV;
  }
  return worldV;
}

Value PlanEmitter::rankTimes(schedule::Group g, int64_t scale,
                             int64_t divisor) {
  Value rank = callValue("fsdp_channel_rank", {channel(g)});
  Value r = LLVM::SExtOp::create(b, loc, i64T, rank);
  if (divisor != 1)
    r = LLVM::SDivOp::create(b, loc, r, i64(divisor));
  return LLVM::MulOp::create(b, loc, r, i64(scale));
}

Value PlanEmitter::address(const Arg &a) {
  Value p = slotAddress(a.slot, a.value);
  return a.scale ? offset(p, rankTimes(a.group, a.scale)) : p;
}

Value PlanEmitter::eventSlot(int64_t slot) {
  return LLVM::GEPOp::create(b, loc, ptrT, ptrT, eventsV,
                             ArrayRef<LLVM::GEPArg>{i64(slot)});
}

Value PlanEmitter::int64Array(const std::vector<int64_t> &values) {
  LLVM::GlobalOp &g = arrays[values];
  if (!g) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    auto type = LLVM::LLVMArrayType::get(i64T, values.size());
    auto value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(values.size())}, i64T),
        ArrayRef<int64_t>(values));
    g = LLVM::GlobalOp::create(
        b, loc, type, /*isConstant=*/true, LLVM::Linkage::Private,
        "fsdp_i64" + suffix + "_" + std::to_string(arrays.size()), value);
  }
  return LLVM::AddressOfOp::create(b, loc, g);
}

Value PlanEmitter::pointerArray(const std::vector<Arg> &list) {
  // The step's pointer scratch (an alloca sized at the end), from slot
  // scratchUsed on: each call's arrays get their own slots.
  auto at = [&](int64_t i) {
    return LLVM::GEPOp::create(b, loc, ptrT, ptrT, scratchV,
                               ArrayRef<LLVM::GEPArg>{i64(i)});
  };
  int64_t first = scratchUsed;
  for (const Arg &a : list)
    LLVM::StoreOp::create(b, loc, address(a), at(scratchUsed++));
  scratchSlots = std::max(scratchSlots, scratchUsed);
  return first ? Value(at(first)) : scratchV;
}

Value PlanEmitter::arg(const Arg &a) {
  switch (a.kind) {
  case ArgKind::Stream:
    return streamV;
  case ArgKind::Channel:
    return channel(a.group);
  case ArgKind::Buffer:
    return address(a);
  case ArgKind::Null:
    return null();
  case ArgKind::I32:
    return i32(a.value);
  case ArgKind::I64:
    return i64(a.value);
  case ArgKind::F64:
    return f64(a.number);
  case ArgKind::RankTimes: {
    Value v = rankTimes(a.group, a.scale, a.divisor);
    return a.value ? LLVM::AddOp::create(b, loc, v, i64(a.value)).getResult()
                   : v;
  }
  case ArgKind::Buffers:
    return pointerArray(plan.pointerLists[static_cast<size_t>(a.value)]);
  case ArgKind::Int64s:
    return int64Array(plan.int64Lists[static_cast<size_t>(a.value)]);
  case ArgKind::Event:
    return eventSlot(a.value);
  }
  return null();
}

//===--- Calls ------------------------------------------------------------===//

Value PlanEmitter::callValue(StringRef fn, ArrayRef<Value> args, Type result) {
  if (!result)
    result = i32T;
  LLVM::LLVMFuncOp &f = decls[fn];
  // A pipeline's stages share one module: a runtime function another
  // stage's emitter declared is reused.
  if (!f)
    f = module.lookupSymbol<LLVM::LLVMFuncOp>(fn);
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

void PlanEmitter::checkRc(Value rc) {
  Value fails =
      LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, rc, i32(FSDP_OK));
  Block *next = new Block();
  stepFn.getBody().push_back(next);
  LLVM::CondBrOp::create(b, loc, fails, errBlock, ValueRange{rc}, next,
                         ValueRange{});
  b.setInsertionPointToEnd(next);
}

void PlanEmitter::setInstruction(int64_t i) {
  LLVM::StoreOp::create(b, loc, i64(i),
                        offset(ctxV, offsetof(fsdp_step_context, instruction)));
}

void PlanEmitter::emitCall(const schedule::Call &c) {
  SmallVector<Value> args(c.numArgs);
  scratchUsed = 0;
  const Arg *a = plan.argsOf(c);
  // The arguments in order, except that a collective's event slot is
  // materialised right after its buffers' addresses (only the order of the
  // IR, not of the call's arguments).
  bool afterBuffer = false, eventsDone = false;
  for (uint32_t i = 0; i < c.numArgs; ++i) {
    bool scalar = a[i].kind == ArgKind::I32 || a[i].kind == ArgKind::I64 ||
                  a[i].kind == ArgKind::F64;
    if (scalar && afterBuffer && !eventsDone) {
      for (uint32_t j = i; j < c.numArgs; ++j)
        if (a[j].kind == ArgKind::Event)
          args[j] = arg(a[j]);
      eventsDone = true;
    }
    afterBuffer = afterBuffer || a[i].kind == ArgKind::Buffer;
    if (!args[i])
      args[i] = arg(a[i]);
  }
  checkRc(callValue(plan.entries[static_cast<size_t>(c.entry)], args));
}

void PlanEmitter::emitAction(const schedule::Action &a) {
  switch (a.kind) {
  case ActionKind::Begin:
    setInstruction(a.index);
    return;
  case ActionKind::Bind:
  case ActionKind::Alias:
  case ActionKind::Release:
  case ActionKind::Fail: // the pass refuses a plan with an error
    return;
  case ActionKind::Zero:
    checkRc(callValue("fsdp_memset_zero",
                      {streamV, slotAddress(a.slot, 0),
                       i64(plan.slots[static_cast<size_t>(a.slot)].bytes)}));
    return;
  case ActionKind::CopyIn: {
    Value src = LLVM::LoadOp::create(
        b, loc, ptrT,
        LLVM::GEPOp::create(b, loc, ptrT, ptrT, inputsV,
                            ArrayRef<LLVM::GEPArg>{i64(a.index)}));
    checkRc(callValue("fsdp_memcpy",
                      {streamV, slotAddress(a.slot, 0), src,
                       i64(plan.slots[static_cast<size_t>(a.slot)].bytes)}));
    return;
  }
  case ActionKind::Call:
    emitCall(plan.calls[static_cast<size_t>(a.index)]);
    return;
  case ActionKind::Wait: {
    Value at = eventSlot(a.index);
    Value e = LLVM::LoadOp::create(b, loc, ptrT, at);
    Value rc = callValue("fsdp_wait", {e});
    LLVM::StoreOp::create(b, loc, null(), at);
    checkRc(rc);
    return;
  }
  case ActionKind::Progress: {
    // One fsdp_event_query per collective in flight (their status is not
    // inspected) when the process runs in FSDP_PROGRESS_TEST mode.
    Block *test = new Block(), *next = new Block();
    stepFn.getBody().push_back(test);
    stepFn.getBody().push_back(next);
    LLVM::CondBrOp::create(b, loc, progressTestV, test, next);
    b.setInsertionPointToEnd(test);
    for (int64_t slot : plan.eventLists[static_cast<size_t>(a.index)])
      callValue("fsdp_event_query",
                {LLVM::LoadOp::create(b, loc, ptrT, eventSlot(slot)), doneV});
    LLVM::BrOp::create(b, loc, next);
    b.setInsertionPointToEnd(next);
    return;
  }
  }
}

//===--- The step ---------------------------------------------------------===//

void PlanEmitter::emitEntry() {
  ctxV = stepFn.getArgument(0);
  inputsV = stepFn.getArgument(1);
  outputsV = stepFn.getArgument(2);
  streamV = field(ctxV, offsetof(fsdp_step_context, stream), ptrT);
  arenaV = field(ctxV, offsetof(fsdp_step_context, arena), ptrT);
  worldV = field(ctxV, offsetof(fsdp_step_context, world), ptrT);
  shardV = field(ctxV, offsetof(fsdp_step_context, shard), ptrT);
  replicateV = field(ctxV, offsetof(fsdp_step_context, replicate), ptrT);
  tensorV = field(ctxV, offsetof(fsdp_step_context, tensor), ptrT);
  pipelineV = field(ctxV, offsetof(fsdp_step_context, pipeline), ptrT);
  eventsV = field(ctxV, offsetof(fsdp_step_context, events), ptrT);
  progressTestV = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq,
                                       callValue("fsdp_get_progress", {}, i32T),
                                       i32(FSDP_PROGRESS_TEST));
  doneV = LLVM::AllocaOp::create(b, loc, ptrT, i32T, i64(1));
}

void PlanEmitter::emit(const std::string &document) {
  b.setInsertionPointToEnd(module.getBody());
  stepFn = LLVM::LLVMFuncOp::create(
      b, loc, FSDP_STEP_SYMBOL + suffix,
      LLVM::LLVMFunctionType::get(i32T, {ptrT, ptrT, ptrT}));
  Block *entry = stepFn.addEntryBlock(b);
  errBlock = new Block();
  stepFn.getBody().push_back(errBlock);
  errBlock->addArgument(i32T, loc);
  b.setInsertionPointToEnd(errBlock);
  LLVM::ReturnOp::create(b, loc, errBlock->getArgument(0));

  b.setInsertionPointToEnd(entry);
  emitEntry();
  // The pointer scratch's size is known at the end; patched below.
  auto scratch = LLVM::AllocaOp::create(b, loc, ptrT, ptrT, i64(1));
  scratchV = scratch;
  for (const schedule::Action &a : plan.actions)
    emitAction(a);
  for (size_t j = 0; j < plan.outputs.size(); ++j)
    LLVM::StoreOp::create(b, loc, address(plan.outputs[j]),
                          LLVM::GEPOp::create(b, loc, ptrT, ptrT, outputsV,
                                              ArrayRef<LLVM::GEPArg>{i64(j)}));
  LLVM::ReturnOp::create(b, loc, i32(FSDP_OK));
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(scratch);
    scratch.getArraySizeMutable().assign(i64(scratchSlots));
  }
  emitDescriptor(document);
}

void PlanEmitter::emitDescriptor(const std::string &document) {
  emitDescriptorGlobals(module, suffix, document,
                        {prog.worldSize(), prog.replicas(), prog.shardSize(),
                         prog.plannedArenaBytes(), prog.arenaAlignment(),
                         static_cast<int64_t>(prog.inputs().size()),
                         static_cast<int64_t>(prog.outputs().size()),
                         static_cast<int64_t>(prog.instructions().size()),
                         plan.numEvents, plan.peakBytes},
                        prog.pipelineStages(), prog.pipelineStage());
}

void mlir::fsdp::conversion::emitDescriptorGlobals(
    ModuleOp module, const std::string &suffix, const std::string &document,
    const std::array<int64_t, 10> &sizes, int64_t stages, int64_t stage) {
  OpBuilder b(module.getContext());
  Location loc = module.getLoc();
  Type i32T = b.getI32Type(), i64T = b.getI64Type(),
       ptrT = LLVM::LLVMPointerType::get(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  // The schedule document, NUL-terminated.
  std::string text = document;
  text.push_back('\0');
  auto docType = LLVM::LLVMArrayType::get(b.getI8Type(), text.size());
  std::string docName = "fsdp_step_schedule" + suffix;
  LLVM::GlobalOp::create(b, loc, docType, /*isConstant=*/true,
                         LLVM::Linkage::Private, docName,
                         b.getStringAttr(text));
  // fsdp_step_descriptor (compiled.h).
  SmallVector<Type> fields{i32T, i32T};
  fields.append(10, i64T);
  fields.push_back(ptrT);
  fields.append(3, i64T);
  auto descType = LLVM::LLVMStructType::getLiteral(b.getContext(), fields);
  auto desc = LLVM::GlobalOp::create(
      b, loc, descType, /*isConstant=*/true, LLVM::Linkage::Private,
      "fsdp_step_descriptor" + suffix, Attribute());
  Block *init = b.createBlock(&desc.getInitializerRegion());
  b.setInsertionPointToEnd(init);
  Value d = LLVM::UndefOp::create(b, loc, descType);
  int64_t pos = 0;
  auto put = [&](Value v) {
    d = LLVM::InsertValueOp::create(b, loc, d, v, ArrayRef<int64_t>{pos++});
  };
  auto i64 = [&](int64_t v) -> Value {
    return LLVM::ConstantOp::create(b, loc, i64T, b.getI64IntegerAttr(v));
  };
  put(LLVM::ConstantOp::create(b, loc, i32T,
                               b.getI32IntegerAttr(FSDP_STEP_ABI_VERSION)));
  put(LLVM::ConstantOp::create(b, loc, i32T,
                               b.getI32IntegerAttr(schedule::kVersion)));
  for (int64_t v : sizes)
    put(i64(v));
  put(LLVM::AddressOfOp::create(b, loc, ptrT, docName));
  put(i64(static_cast<int64_t>(document.size())));
  put(i64(stages));
  put(i64(stage));
  LLVM::ReturnOp::create(b, loc, d);

  b.setInsertionPointToEnd(module.getBody());
  auto describe =
      LLVM::LLVMFuncOp::create(b, loc, FSDP_STEP_DESCRIBE_SYMBOL + suffix,
                               LLVM::LLVMFunctionType::get(ptrT, {}));
  b.setInsertionPointToEnd(describe.addEntryBlock(b));
  LLVM::ReturnOp::create(b, loc, LLVM::AddressOfOp::create(b, loc, desc));
}
