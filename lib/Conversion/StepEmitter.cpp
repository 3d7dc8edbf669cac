//===- StepEmitter.cpp - the interpreter's Frame, replayed at compile time
//-===//
//
// See StepEmitter.h.
//
//===----------------------------------------------------------------------===//
#include "StepEmitter.h"

using namespace mlir;
using namespace mlir::fsdp::conversion;

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
