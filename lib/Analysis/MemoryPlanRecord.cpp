//===- MemoryPlanRecord.cpp - the memory plan recorded on the step --------===//
//
// Writes and reads fsdp.memory_plan (the keys: MemoryPlanRecord.h). Reading
// checks the record against the step it is on: the same instructions and
// buffers, and the same fingerprint.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/MemoryPlanRecord.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/InterleavedRange.h"
#include "llvm/Support/xxhash.h"

#include <array>
#include <limits>
#include <map>

using namespace mlir;
using namespace mlir::fsdp;

namespace {
constexpr StringLiteral kInstructions = "instructions";
constexpr StringLiteral kFingerprint = "fingerprint";
constexpr StringLiteral kArenaBytes = "arena_bytes";
constexpr StringLiteral kAlignment = "alignment";
constexpr StringLiteral kPeakBytes = "peak_bytes";
constexpr StringLiteral kPeakInstruction = "peak_instruction";
constexpr StringLiteral kPeakBytesWithScratch = "peak_bytes_with_scratch";
constexpr StringLiteral kPeakBytesByClass = "peak_bytes_by_class";
constexpr StringLiteral kMaxBytesByClass = "max_bytes_by_class";
constexpr StringLiteral kPhasePeakBytes = "phase_peak_bytes";
constexpr size_t kPhaseFields = 5; // a PhasePeak's, recorded flat
constexpr StringLiteral kSendBufferBytes = "send_buffer_bytes";
// SendBufferBytes's fields, in its order.
constexpr StringLiteral kSendFields[] = {"gather_max", "gather_at_peak",
                                         "reduce_max", "reduce_at_peak"};
constexpr StringLiteral kClasses = "classes";
constexpr StringLiteral kArenaOffsets = "arena_offsets";
constexpr StringLiteral kViews = "views";
constexpr StringLiteral kAliases = "aliases";
constexpr StringLiteral kInPlace = "in_place";
constexpr StringLiteral kFrees = "frees";
} // namespace

/// The instructions and buffers of `fn`, numbered as MemoryPlan numbers them.
static void numberStep(func::FuncOp fn, MemoryPlanRecord &r) {
  auto add = [&](Value v) {
    r.indexOf[v] = r.buffers.size();
    r.buffers.push_back(v);
  };
  for (BlockArgument a : fn.getArguments())
    add(a);
  for (Operation &op : fn.getBody().front().without_terminator()) {
    r.instructions.push_back(&op);
    for (Value v : op.getResults())
      add(v);
  }
}

/// A hash of what the plan is a plan of: the signature with its argument and
/// result attributes, and every op of the block, in order, with its operands
/// (as buffer numbers), attributes and result types. Locations and value
/// names are left out: printing and parsing may change them, not the step.
/// Each op name, attribute value and result type enters as the hash of its
/// printed text, printed once per distinct one (they are uniqued in a
/// context, and the clones of a micro-batch or a block share most of
/// theirs); an op's inherent attributes are read one by one, as building its
/// attribute dictionary from its properties would create one per op.
/// Printing every op's dictionary was a fifth of a 405B pipeline stage's plan
/// (perf), and a plan is fingerprinted when recorded and on every read.
static uint64_t fingerprint(func::FuncOp fn,
                            const llvm::DenseMap<Value, int64_t> &indexOf) {
  // Printed whole, whatever --mlir-elide-elementsattrs-if-larger or
  // --mlir-print-elementsattrs-with-hex-if-larger the reading tool was given:
  // the hash is of the step, not of how a tool prints it.
  OpPrintingFlags flags;
  flags.elideLargeElementsAttrs(std::numeric_limits<int64_t>::max())
      .printLargeElementsAttrWithHex(100) // MLIR's default
      .elideLargeResourceString(std::numeric_limits<int64_t>::max());
  AsmState state(fn.getContext(), flags);
  llvm::DenseMap<const void *, uint64_t> printed;
  std::string scratch;
  auto hashOf = [&](const void *key, auto print) {
    auto [it, inserted] = printed.try_emplace(key, 0);
    if (inserted) {
      scratch.clear();
      llvm::raw_string_ostream os(scratch);
      print(os);
      it->second = llvm::xxh3_64bits(scratch);
    }
    return it->second;
  };
  auto attrHash = [&](Attribute a) {
    return hashOf(a.getAsOpaquePointer(),
                  [&](llvm::raw_ostream &os) { a.print(os, state); });
  };
  std::vector<uint64_t> words;
  std::string signature;
  llvm::raw_string_ostream sig(signature);
  fn.getFunctionType().print(sig, state);
  if (ArrayAttr attrs = fn.getArgAttrsAttr())
    attrs.print(sig, state);
  if (ArrayAttr attrs = fn.getResAttrsAttr())
    attrs.print(sig, state);
  words.push_back(llvm::xxh3_64bits(signature));
  for (Operation &op : fn.getBody().front()) {
    OperationName name = op.getName();
    words.push_back(hashOf(name.getAsOpaquePointer(),
                           [&](llvm::raw_ostream &os) { os << name; }));
    words.push_back(op.getNumOperands());
    for (Value v : op.getOperands()) {
      auto it = indexOf.find(v);
      words.push_back(it == indexOf.end() ? ~uint64_t(0) : it->second);
    }
    auto addAttr = [&](StringAttr key, Attribute value) {
      words.push_back(attrHash(key));
      words.push_back(attrHash(value));
    };
    for (StringAttr key : name.getAttributeNames())
      if (std::optional<Attribute> value = op.getInherentAttr(key.getValue());
          value && *value)
        addAttr(key, *value);
    for (NamedAttribute a : op.getDiscardableAttrs())
      addAttr(a.getName(), a.getValue());
    words.push_back(op.getNumResults());
    for (Type t : op.getResultTypes())
      words.push_back(
          hashOf(t.getAsOpaquePointer(),
                 [&](llvm::raw_ostream &os) { t.print(os, state); }));
  }
  return llvm::xxh3_64bits(
      llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(words.data()),
                              words.size() * sizeof(uint64_t)));
}

Value MemoryPlanRecord::ownerOf(Value v) const {
  int64_t owner = viewOf[indexOf.lookup(v)];
  return owner >= 0 ? buffers[owner] : v;
}

/// SendBufferBytes's fields, in kSendFields's order.
static std::array<int64_t *, 4> sendFieldsOf(SendBufferBytes &s) {
  return {&s.gatherMax, &s.gatherAtPeak, &s.reduceMax, &s.reduceAtPeak};
}

/// MemoryPlanRecord::phasePeaks of a computed plan.
static std::vector<PhasePeak> peaksByPhase(const MemoryPlan &plan) {
  std::vector<PhasePeak> out;
  if (plan.instructions.empty())
    return out;
  auto fn = plan.instructions.front()->getParentOfType<func::FuncOp>();
  if (!fn)
    return out;
  StepPhases phases(fn);
  // Without micro-batches every op is placed by the step's loss.
  const bool microBatched = llvm::any_of(plan.instructions, [](Operation *op) {
    return op->hasAttr(nn::kMicroBatchAttr);
  });
  std::pair<int64_t, bool> phase{-1, false};
  std::map<std::pair<int64_t, bool>, size_t> slot; // phase -> its entry
  for (auto [i, op] : llvm::enumerate(plan.instructions)) {
    if (isa<nn::AdamWUpdateOp, nn::SgdUpdateOp>(op))
      phase = {-2, true}; // the optimizer: its updates and the ops after them
    else if (!microBatched || op->hasAttr(nn::kMicroBatchAttr))
      phase = phases.phaseOf(op);
    auto [it, inserted] = slot.try_emplace(phase, out.size());
    if (inserted)
      out.push_back({phase.first, phase.second, -1, 0, 0});
    PhasePeak &entry = out[it->second];
    if (plan.liveBytes[i] > entry.bytes)
      entry = {phase.first, phase.second, plan.liveBytes[i],
               plan.gatheredLiveBytes[i], plan.gatherSendLiveBytes[i]};
  }
  return out;
}

MemoryPlanRecord MemoryPlanRecord::of(const MemoryPlan &plan) {
  MemoryPlanRecord r;
  r.instructions = plan.instructions;
  r.indexOf = plan.indexOf;
  for (const PlannedBuffer &b : plan.buffers) {
    r.buffers.push_back(b.value);
    r.classes.push_back(b.cls);
    r.arenaOffsets.push_back(b.arenaOffset);
    r.viewOf.push_back(b.viewOf);
    r.aliases.push_back(b.aliases);
    r.inPlaceOf.push_back(b.inPlaceOf);
  }
  r.freesAfter = plan.freesAfter;
  r.peakBytes = plan.peakBytes;
  r.peakBytesWithScratch = plan.peakBytesWithScratch;
  r.peakInstruction = plan.peakInstruction;
  r.peakBytesByClass = plan.peakBytesByClass;
  r.maxBytesByClass = plan.maxBytesByClass;
  r.phasePeaks = peaksByPhase(plan);
  r.sendBytes = plan.sendBytes;
  r.arenaBytes = plan.arenaBytes;
  r.alignment = MemoryPlan::kAlignment;
  return r;
}

void MemoryPlanRecord::recordOn(func::FuncOp fn) const {
  Builder b(fn.getContext());
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  auto byClass = [&](ArrayRef<int64_t> bytes) {
    SmallVector<NamedAttribute> entries;
    for (unsigned c = 0; c < kNumMemoryClasses; ++c)
      entries.push_back(
          b.getNamedAttr(memoryClassName((MemoryClass)c), i64(bytes[c])));
    return b.getDictionaryAttr(entries);
  };
  auto sendFields = [&] {
    SendBufferBytes send = sendBytes;
    SmallVector<NamedAttribute> entries;
    for (auto [key, field] : llvm::zip(kSendFields, sendFieldsOf(send)))
      entries.push_back(b.getNamedAttr(key, i64(*field)));
    return b.getDictionaryAttr(entries);
  };
  SmallVector<Attribute> classNames;
  SmallVector<int64_t> views, aliasPairs, inPlacePairs, frees;
  for (auto [i, cls] : llvm::enumerate(classes)) {
    classNames.push_back(b.getStringAttr(memoryClassName(cls)));
    if (viewOf[i] >= 0)
      views.append({(int64_t)i, viewOf[i]});
    if (aliases[i] >= 0)
      aliasPairs.append({(int64_t)i, aliases[i]});
    if (inPlaceOf[i] >= 0)
      inPlacePairs.append({(int64_t)i, inPlaceOf[i]});
  }
  SmallVector<int64_t> phaseFields;
  for (const PhasePeak &p : phasePeaks)
    phaseFields.append({p.microBatch, p.backward ? 1 : 0, p.bytes,
                        p.gatheredBytes, p.gatherSendBytes});
  for (auto [i, freed] : llvm::enumerate(freesAfter))
    for (int64_t buffer : freed)
      frees.append({(int64_t)i, buffer});
  NamedAttribute entries[] = {
      b.getNamedAttr(kInstructions, i64(instructions.size())),
      b.getNamedAttr(kFingerprint, i64(fingerprint(fn, indexOf))),
      b.getNamedAttr(kArenaBytes, i64(arenaBytes)),
      b.getNamedAttr(kAlignment, i64(alignment)),
      b.getNamedAttr(kPeakBytes, i64(peakBytes)),
      b.getNamedAttr(kPeakInstruction, i64(peakInstruction)),
      b.getNamedAttr(kPeakBytesWithScratch, i64(peakBytesWithScratch)),
      b.getNamedAttr(kPeakBytesByClass, byClass(peakBytesByClass)),
      b.getNamedAttr(kMaxBytesByClass, byClass(maxBytesByClass)),
      b.getNamedAttr(kPhasePeakBytes, b.getDenseI64ArrayAttr(phaseFields)),
      b.getNamedAttr(kSendBufferBytes, sendFields()),
      b.getNamedAttr(kClasses, b.getArrayAttr(classNames)),
      b.getNamedAttr(kArenaOffsets, b.getDenseI64ArrayAttr(arenaOffsets)),
      b.getNamedAttr(kViews, b.getDenseI64ArrayAttr(views)),
      b.getNamedAttr(kAliases, b.getDenseI64ArrayAttr(aliasPairs)),
      b.getNamedAttr(kInPlace, b.getDenseI64ArrayAttr(inPlacePairs)),
      b.getNamedAttr(kFrees, b.getDenseI64ArrayAttr(frees))};
  fn->setAttr(kMemoryPlanAttr, b.getDictionaryAttr(entries));
}

namespace {
/// Reads a fsdp.memory_plan dictionary into a record of the step `fn`,
/// refusing, with a diagnostic on `fn`, what does not fit the step.
class RecordReader {
public:
  RecordReader(func::FuncOp fn, DictionaryAttr plan) : fn(fn), plan(plan) {}

  FailureOr<MemoryPlanRecord> read() {
    numberStep(fn, r);
    if (failed(checkStep()) || failed(readTotals()) ||
        failed(readPerBuffer()) || failed(readPairs()))
      return failure();
    return std::move(r);
  }

private:
  InFlightDiagnostic error() {
    return fn.emitError() << "'" << kMemoryPlanAttr << "' ";
  }

  LogicalResult integer(StringRef key, int64_t &out) {
    auto a = plan.getAs<IntegerAttr>(key);
    if (!a)
      return error() << "has no integer '" << key << "'";
    out = a.getInt();
    return success();
  }

  LogicalResult array(StringRef key, ArrayRef<int64_t> &out) {
    auto a = plan.getAs<DenseI64ArrayAttr>(key);
    if (!a)
      return error() << "has no array<i64> '" << key << "'";
    out = a.asArrayRef();
    return success();
  }

  /// The step is the one the plan was made for.
  LogicalResult checkStep() {
    int64_t instructions, hash;
    if (failed(integer(kInstructions, instructions)) ||
        failed(integer(kFingerprint, hash)))
      return failure();
    if (instructions != (int64_t)r.instructions.size() ||
        (uint64_t)hash != fingerprint(fn, r.indexOf))
      return error() << "was made for another step: the step changed after "
                        "fsdp-memory-plan (run it again, last)";
    return success();
  }

  LogicalResult byClass(StringRef key, std::vector<int64_t> &out) {
    auto d = plan.getAs<DictionaryAttr>(key);
    if (!d)
      return error() << "has no dictionary '" << key << "'";
    out.assign(kNumMemoryClasses, 0);
    for (unsigned c = 0; c < kNumMemoryClasses; ++c) {
      StringRef name = memoryClassName((MemoryClass)c);
      auto bytes = d.getAs<IntegerAttr>(name);
      if (!bytes)
        return error() << "'" << key << "' has no integer '" << name << "'";
      out[c] = bytes.getInt();
    }
    return success();
  }

  LogicalResult readSendBytes() {
    auto d = plan.getAs<DictionaryAttr>(kSendBufferBytes);
    if (!d)
      return error() << "has no dictionary '" << kSendBufferBytes << "'";
    for (auto [key, field] :
         llvm::zip(kSendFields, sendFieldsOf(r.sendBytes))) {
      auto bytes = d.getAs<IntegerAttr>(key);
      if (!bytes)
        return error() << "'" << kSendBufferBytes << "' has no integer '" << key
                       << "'";
      *field = bytes.getInt();
    }
    return success();
  }

  LogicalResult readTotals() {
    if (failed(integer(kArenaBytes, r.arenaBytes)) ||
        failed(integer(kAlignment, r.alignment)) ||
        failed(integer(kPeakBytes, r.peakBytes)) ||
        failed(integer(kPeakInstruction, r.peakInstruction)) ||
        failed(integer(kPeakBytesWithScratch, r.peakBytesWithScratch)) ||
        failed(byClass(kPeakBytesByClass, r.peakBytesByClass)) ||
        failed(byClass(kMaxBytesByClass, r.maxBytesByClass)) ||
        failed(readSendBytes()))
      return failure();
    // Optional: a record written before it was added reads without it.
    if (plan.get(kPhasePeakBytes)) {
      ArrayRef<int64_t> phases;
      if (failed(array(kPhasePeakBytes, phases)))
        return failure();
      if (phases.size() % kPhaseFields)
        return error() << "has a '" << kPhasePeakBytes << "' of "
                       << phases.size() << " values, not groups of "
                       << kPhaseFields;
      for (size_t i = 0; i < phases.size(); i += kPhaseFields) {
        ArrayRef<int64_t> p = phases.slice(i, kPhaseFields);
        if (p[0] < -2 || p[1] < 0 || p[1] > 1 || p[2] < 0 ||
            p[2] > r.peakBytes || p[3] < 0 || p[4] < 0 || p[3] + p[4] > p[2])
          return error() << "has a '" << kPhasePeakBytes << "' entry ("
                         << llvm::interleaved(p)
                         << ") that is no phase (micro-batch >= -2, backward "
                            "0 or 1, bytes 0 to peak_bytes, of them gathered "
                            "and gather-send bytes)";
        r.phasePeaks.push_back({p[0], p[1] == 1, p[2], p[3], p[4]});
      }
    }
    if (r.peakInstruction < -1 ||
        r.peakInstruction >= (int64_t)r.instructions.size())
      return error() << "has peak_instruction " << r.peakInstruction
                     << " outside the step's " << r.instructions.size()
                     << " instructions";
    return success();
  }

  LogicalResult readPerBuffer() {
    size_t n = r.buffers.size();
    auto names = plan.getAs<ArrayAttr>(kClasses);
    ArrayRef<int64_t> offsets;
    if (!names || names.size() != n)
      return error() << "needs '" << kClasses << "', one class per buffer ("
                     << n << ")";
    if (failed(array(kArenaOffsets, offsets)))
      return failure();
    if (offsets.size() != n)
      return error() << "needs '" << kArenaOffsets
                     << "', one offset per buffer (" << n << "), got "
                     << offsets.size();
    for (Attribute a : names) {
      auto name = dyn_cast<StringAttr>(a);
      std::optional<MemoryClass> cls =
          name ? memoryClassFromName(name.getValue()) : std::nullopt;
      if (!cls)
        return error() << "has " << a << " in '" << kClasses
                       << "', which is no memory class";
      r.classes.push_back(*cls);
    }
    r.arenaOffsets.assign(offsets.begin(), offsets.end());
    return success();
  }

  /// `key`'s (first, second) pairs, `first` less than `firstBound`, `second`
  /// a buffer.
  LogicalResult pairs(StringRef key, size_t firstBound,
                      function_ref<void(int64_t, int64_t)> onPair) {
    ArrayRef<int64_t> flat;
    if (failed(array(key, flat)))
      return failure();
    if (flat.size() % 2)
      return error() << "'" << key << "' must hold pairs, got " << flat.size()
                     << " numbers";
    for (size_t i = 0; i < flat.size(); i += 2) {
      if (flat[i] < 0 || flat[i] >= (int64_t)firstBound || flat[i + 1] < 0 ||
          flat[i + 1] >= (int64_t)r.buffers.size())
        return error() << "'" << key << "' has the pair (" << flat[i] << ", "
                       << flat[i + 1] << ") outside the step";
      onPair(flat[i], flat[i + 1]);
    }
    return success();
  }

  LogicalResult readPairs() {
    size_t n = r.buffers.size();
    r.viewOf.assign(n, -1);
    r.aliases.assign(n, -1);
    r.inPlaceOf.assign(n, -1);
    r.freesAfter.assign(r.instructions.size(), {});
    return success(succeeded(pairs(kViews, n,
                                   [&](int64_t v, int64_t owner) {
                                     r.viewOf[v] = owner;
                                   })) &&
                   succeeded(pairs(kAliases, n,
                                   [&](int64_t out, int64_t arg) {
                                     r.aliases[out] = arg;
                                   })) &&
                   succeeded(pairs(kInPlace, n,
                                   [&](int64_t out, int64_t sum) {
                                     r.inPlaceOf[out] = sum;
                                   })) &&
                   succeeded(pairs(kFrees, r.instructions.size(),
                                   [&](int64_t i, int64_t buffer) {
                                     r.freesAfter[i].push_back(buffer);
                                   })));
  }

  func::FuncOp fn;
  DictionaryAttr plan;
  MemoryPlanRecord r;
};
} // namespace

FailureOr<MemoryPlanRecord> MemoryPlanRecord::get(func::FuncOp fn) {
  if (auto recorded = fn->getAttrOfType<DictionaryAttr>(kMemoryPlanAttr))
    return RecordReader(fn, recorded).read();
  FailureOr<MemoryPlan> plan = MemoryPlan::compute(fn);
  if (failed(plan))
    return failure();
  return of(*plan);
}
