//===- FSDPDialect.cpp - fsdp dialect registration and verifiers ----------===//
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/InitSpec.h"
#include "fsdp/Sharding.h"

#include "llvm/ADT/TypeSwitch.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/FSDPOpsDialect.cpp.inc"

#include "fsdp/Dialect/FSDP/FSDPEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/FSDPOpsTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/FSDPAttrs.cpp.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/FSDPOps.cpp.inc"

void FSDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/FSDPOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/FSDP/FSDPOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/FSDP/FSDPAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

Attribute StrategyAttr::parse(AsmParser &parser, Type) {
  std::string name;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseKeywordOrString(&name) ||
      parser.parseGreater())
    return {};
  std::optional<Strategy> s = symbolizeStrategy(name);
  if (!s) {
    parser.emitError(loc) << "unknown strategy \"" << name << "\"";
    return {};
  }
  return StrategyAttr::get(parser.getContext(), *s);
}

void StrategyAttr::print(AsmPrinter &printer) const {
  printer << "<\"" << stringifyStrategy(getValue()) << "\">";
}

//===----------------------------------------------------------------------===//
// Attribute verifiers
//===----------------------------------------------------------------------===//

/// `"a", "b" or "c"`: the cases of an enum, quoted, for diagnostics.
template <typename E>
static std::string quotedCases(llvm::StringRef (*stringify)(E), uint32_t max) {
  std::string s;
  for (uint32_t i = 0; i <= max; ++i) {
    if (i)
      s += i == max ? " or " : ", ";
    s += "\"" + stringify(static_cast<E>(i)).str() + "\"";
  }
  return s;
}

static LogicalResult verifyArgOrResultAttr(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kUnitAttr) {
    if (!isa<FlatSymbolRefAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a symbol reference to an fsdp.unit";
    return success();
  }
  if (name == kRoleAttr) {
    if (!isa<RoleAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be #fsdp.role<...> of "
             << quotedCases(stringifyRole, getMaxEnumValForRole()) << ", got "
             << attr.getValue();
    return success();
  }
  if (name == kLayoutAttr) {
    if (!isa<LayoutAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be #fsdp.layout<...> of "
             << quotedCases(stringifyLayout, getMaxEnumValForLayout())
             << ", got " << attr.getValue();
    return success();
  }
  if (name == kGlobalShapeAttr) {
    if (!isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be an array<i64>";
    return success();
  }
  if (name == kPPInputAttr || name == kPPOutputGradAttr ||
      name == kPPOutputAttr || name == kPPInputGradAttr ||
      name == kPPTiedPeerAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || i.getInt() < 0)
      return op->emitError()
             << "'" << name << "' must be a boundary index (integer >= 0)";
    return success();
  }
  if (name == kPPChunkAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || i.getInt() < 0)
      return op->emitError()
             << "'" << name << "' must be a chunk index (integer >= 0)";
    return success();
  }
  return op->emitError() << "unknown fsdp attribute '" << name << "'";
}

LogicalResult FSDPDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned,
                                                    NamedAttribute attr) {
  return verifyArgOrResultAttr(op, attr);
}
LogicalResult FSDPDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned,
                                                       NamedAttribute attr) {
  return verifyArgOrResultAttr(op, attr);
}
LogicalResult FSDPDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == kWorldSizeAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !i || i.getInt() < 1)
      return op->emitError() << "'" << kWorldSizeAttr
                             << "' must be an integer >= 1 on the module, got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kStrategyAttr) {
    if (!isa<ModuleOp>(op) || !isa<StrategyAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kStrategyAttr << "' must be #fsdp.strategy<...> of "
             << quotedCases(stringifyStrategy, getMaxEnumValForStrategy())
             << " on the module, got " << attr.getValue();
    return success();
  }
  if (attr.getName() == kTensorSlicesAttr) {
    auto d = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !d || llvm::any_of(d, [](NamedAttribute e) {
          auto a = dyn_cast<DenseI64ArrayAttr>(e.getValue());
          return !a || a.size() < 3;
        }))
      return op->emitError() << "'" << kTensorSlicesAttr
                             << "' must be a dictionary of array<i64: dim, "
                                "blocks, shape...> on the module, got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPipelineStageAttr ||
      attr.getName() == kPipelineScreenAttr ||
      attr.getName() == kPipelineMicroBatchesAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !i || i.getInt() < 0)
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' must be an integer >= 0 on the module, got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPPChunkAttr) { // a chunk's module, op or step op
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!i || i.getInt() < 0)
      return op->emitError() << "'" << kPPChunkAttr
                             << "' must be a chunk index (integer >= 0), got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPipelineScheduleAttr) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << kPipelineScheduleAttr
                             << "' must be a string on the module";
    return success();
  }
  if (attr.getName() == kPipelineGatherAttr) {
    auto v = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !v ||
        (v.getValue() != "once-per-step" && v.getValue() != "per-micro-batch"))
      return op->emitError() << "'" << kPipelineGatherAttr
                             << "' must be \"once-per-step\" or "
                                "\"per-micro-batch\" on the module, got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPipelineSplitAttr) {
    // Written by fsdp-pipeline, read by the report (pipeline.split).
    if (!isa<ModuleOp>(op) || !isa<DictionaryAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kPipelineSplitAttr
             << "' must be a dictionary on the module, got " << attr.getValue();
    return success();
  }
  if (attr.getName() == kReplicasAttr || attr.getName() == kShardSizeAttr ||
      attr.getName() == kTensorParallelAttr ||
      attr.getName() == kPipelineStagesAttr ||
      attr.getName() == kPipelineChunksAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !i || i.getInt() < 1)
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' must be an integer >= 1 on the module, got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kScheduleAttr) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kScheduleAttr << "' must be a string on the module, got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() == kMemoryPlanAttr) {
    // Its keys are read, and checked, by MemoryPlanRecord::get.
    if (!isa<FunctionOpInterface>(op))
      return op->emitError()
             << "'" << kMemoryPlanAttr << "' must be on a function, not on '"
             << op->getName() << "'";
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitError()
             << "'" << kMemoryPlanAttr << "' must be a dictionary, got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() == kPPTiedPeerAttr) {
    auto i = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<SendOp, RecvOp>(op) || !i || i.getInt() < 0)
      return op->emitError()
             << "'" << kPPTiedPeerAttr
             << "' must be a stage index (integer >= 0) on fsdp.send or "
                "fsdp.recv";
    return success();
  }
  return op->emitError() << "unknown fsdp attribute '"
                         << attr.getName().getValue() << "'";
}

std::optional<int64_t> mlir::fsdp::groupSize(Operation *op, Group group) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (!module)
    return std::nullopt;
  auto attr = [&](StringRef name) -> std::optional<int64_t> {
    if (auto a = module->getAttrOfType<IntegerAttr>(name))
      return a.getInt();
    return std::nullopt;
  };
  std::optional<int64_t> world = attr(kWorldSizeAttr);
  if (!world && group == Group::Tensor)
    return attr(kTensorParallelAttr).value_or(1);
  if (!world)
    return std::nullopt;
  switch (group) {
  case Group::World:
    return world;
  case Group::Shard:
    return attr(kShardSizeAttr).value_or(*world);
  case Group::Replicate:
    return attr(kReplicasAttr).value_or(1);
  case Group::Tensor:
    return attr(kTensorParallelAttr).value_or(1);
  case Group::Pipeline:
    return attr(kPipelineStagesAttr).value_or(1);
  }
  llvm_unreachable("unknown fsdp::Group");
}

std::optional<Strategy> mlir::fsdp::strategyOf(Operation *op) {
  auto module =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  if (auto s = module ? module->getAttrOfType<StrategyAttr>(kStrategyAttr)
                      : StrategyAttr())
    return s.getValue();
  return std::nullopt;
}

LogicalResult mlir::fsdp::checkEveryStagePlanned(ModuleOp module) {
  if (module->hasAttr(kPipelineScreenAttr))
    return module.emitError()
           << "a pipeline planned with pp-plan=fattest holds one stage (a "
              "memory screen): plan every stage (pp-plan=all) to simulate or "
              "translate it";
  if (holdsSplitOnly(module))
    return module.emitError()
           << "a pipeline planned with pp-plan=split holds its split alone, "
              "no stage: plan every stage (pp-plan=all) to simulate or "
              "translate it";
  return success();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static int64_t numelOf(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

/// Resolves the op's `unit` symbol; emits an error naming it if missing.
static FailureOr<UnitOp> lookupUnit(Operation *op, FlatSymbolRefAttr ref,
                                    SymbolTableCollection &symbols) {
  auto unit = symbols.lookupNearestSymbolFrom<UnitOp>(op, ref);
  if (!unit)
    return op->emitOpError() << "refers to unknown fsdp.unit " << ref;
  return unit;
}

static LogicalResult sameElementType(Operation *op, Type a, Type b) {
  if (cast<RankedTensorType>(a).getElementType() !=
      cast<RankedTensorType>(b).getElementType())
    return op->emitOpError()
           << "expects operand and result of the same element type, got " << a
           << " and " << b;
  return success();
}

//===----------------------------------------------------------------------===//
// UnitOp
//===----------------------------------------------------------------------===//

SmallVector<int64_t> UnitOp::getParamShape(unsigned i) {
  return SmallVector<int64_t>(
      cast<DenseI64ArrayAttr>(getShapes()[i]).asArrayRef());
}
int64_t UnitOp::getParamNumel(unsigned i) {
  int64_t n = 1;
  for (int64_t d : getParamShape(i))
    n *= d;
  return n;
}

LogicalResult UnitOp::verify() {
  size_t n = getParams().size();
  if (n == 0)
    return emitOpError() << "expects at least one parameter";
  if (getShapes().size() != n || getInits().size() != n ||
      getTrainable().size() != n)
    return emitOpError()
           << "expects shapes, inits and trainable to have one entry per "
              "parameter ("
           << n << "), got " << getShapes().size() << ", " << getInits().size()
           << ", " << getTrainable().size();
  for (Attribute s : getShapes())
    if (!isa<DenseI64ArrayAttr>(s))
      return emitOpError() << "expects every shape to be an array<i64>, got "
                           << s;
  for (auto [fqn, init] : llvm::zip(getParams(), getInits()))
    if (!::fsdp::init::isValid(cast<StringAttr>(init).getValue()))
      return emitOpError() << "expects every init to be one of "
                           << ::fsdp::init::kForms
                           << " (a, s >= 0; finite numbers), got " << init
                           << " for parameter " << fqn;
  if (!isa<FloatType>(getElementType()))
    return emitOpError() << "expects a float element type, got "
                         << getElementType();
  if (!getOffsets())
    return success();
  if (!getNumel() || !getPaddedNumel() || !getShardNumel())
    return emitOpError()
           << "expects numel, padded_numel and shard_numel with offsets";
  ArrayRef<int64_t> offsets = *getOffsets();
  if (offsets.size() != n)
    return emitOpError() << "expects one offset per parameter (" << n
                         << "), got " << offsets.size();
  int64_t end = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (offsets[i] != end)
      return emitOpError() << "expects parameter '"
                           << cast<StringAttr>(getParams()[i]).getValue()
                           << "' at offset " << end
                           << " (parameters are packed in order), got "
                           << offsets[i];
    end += getParamNumel(i);
  }
  // I64Attr's getters are unsigned: the comparisons are in uint64_t.
  if (*getNumel() != static_cast<uint64_t>(end))
    return emitOpError() << "expects numel " << end
                         << " (the sum of parameter sizes), got "
                         << *getNumel();
  if (std::optional<int64_t> ws = groupSize(*this, Group::Shard)) {
    // fsdp-shard's padding (fsdp/Sharding.h), the one definition.
    int64_t padded = ::fsdp::paddedNumel(end, *ws);
    if (*getPaddedNumel() != static_cast<uint64_t>(padded) ||
        *getShardNumel() * static_cast<uint64_t>(*ws) !=
            static_cast<uint64_t>(padded))
      return emitOpError() << "expects padded_numel " << padded
                           << " and shard_numel " << padded / *ws
                           << " for numel " << end << " on shard groups of "
                           << *ws << " ranks, got " << *getPaddedNumel()
                           << " and " << *getShardNumel();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives and views
//===----------------------------------------------------------------------===//
// Collectives and views
//
// verify() checks what the op says on its own (types, async, sizes that do
// not depend on its unit); verifySymbolUses() resolves `unit` (and a bucket's
// units) once through the module's symbol table and checks the sizes that
// depend on them.
//===----------------------------------------------------------------------===//

/// Checks the shard/full sizes of a collective against its unit, or against
/// the sum of its bucket's units (the bucket starts with `unit`).
static LogicalResult verifyCollectiveSizes(Operation *op,
                                           FlatSymbolRefAttr unitRef,
                                           ArrayAttr bucket, Type shard,
                                           Type full,
                                           SymbolTableCollection &symbols) {
  SmallVector<FlatSymbolRefAttr> members{unitRef};
  if (bucket)
    members = llvm::to_vector(bucket.getAsRange<FlatSymbolRefAttr>());
  int64_t shardNumel = 0, paddedNumel = 0;
  for (FlatSymbolRefAttr ref : members) {
    FailureOr<UnitOp> unit = lookupUnit(op, ref, symbols);
    if (failed(unit))
      return failure();
    if (!unit->getShardNumel())
      return op->emitOpError() << "expects unit " << ref
                               << " to be sharded (run fsdp-shard first)";
    shardNumel += *unit->getShardNumel();
    paddedNumel += *unit->getPaddedNumel();
  }
  if (numelOf(shard) != shardNumel || numelOf(full) != paddedNumel)
    return op->emitOpError()
           << "expects a shard of " << shardNumel << " and a full buffer of "
           << paddedNumel << " elements for "
           << (bucket ? "the bucket of " : "unit ") << unitRef << ", got "
           << numelOf(shard) << " and " << numelOf(full);
  return success();
}

/// A gather or scatter between a shard and a full buffer over `group`: the
/// checks that need no unit.
static LogicalResult verifyShardedCollective(Operation *op,
                                             FlatSymbolRefAttr unit,
                                             ArrayAttr bucket, Group group,
                                             Type shard, Type full) {
  if (failed(sameElementType(op, shard, full)))
    return failure();
  if (bucket &&
      (bucket.size() < 2 || cast<FlatSymbolRefAttr>(bucket[0]) != unit))
    return op->emitOpError()
           << "expects a bucket of at least two units starting with " << unit;
  if (group == Group::Shard)
    return success(); // sized by the unit: verifySymbolUses
  std::optional<int64_t> g = groupSize(op, group);
  if (g && numelOf(shard) * *g != numelOf(full))
    return op->emitOpError()
           << "expects the full buffer to hold " << *g << " shards of "
           << numelOf(shard) << " elements (group \"" << stringifyGroup(group)
           << "\"), got " << numelOf(full);
  return success();
}

/// An `async` collective returns a future, which only fsdp.wait accepts
/// (a type rule); exactly one wait must complete it.
static LogicalResult verifyAsync(Operation *op, bool async) {
  Value r = op->getResult(0);
  bool future = isa<FutureType>(r.getType());
  if (async && !future)
    return op->emitOpError()
           << "is async: expects an !fsdp.future result, got " << r.getType();
  if (!async && future)
    return op->emitOpError()
           << "is not async: expects a tensor result, got " << r.getType();
  if (async && (!r.hasOneUse() || !isa<WaitOp>(*r.getUsers().begin())))
    return op->emitOpError()
           << "is async: expects its result to be used by exactly one "
              "fsdp.wait and nothing else";
  return success();
}

LogicalResult WaitOp::verify() {
  Operation *def = getToken().getDefiningOp();
  if (!def || !(isCollective(def) || isa<SendOp, RecvOp>(def)))
    return emitOpError() << "expects the result of an async fsdp.all_gather, "
                            "fsdp.reduce_scatter, fsdp.all_reduce, fsdp.send "
                            "or fsdp.recv";
  if (isCollective(def) && getResult().getType().getRank() != 1)
    return emitOpError() << "expects a flat (1-D) result for a collective";
  return success();
}

/// fsdp.send / fsdp.recv: a peer stage >= 0, a tag >= 0, and (async) a
/// future consumed by exactly one fsdp.wait.
static LogicalResult verifyPointToPoint(Operation *op, int64_t peer,
                                        int64_t tag) {
  if (peer < 0 || tag < 0)
    return op->emitOpError() << "expects a peer stage and a tag >= 0, got "
                             << peer << " and " << tag;
  for (Value r : op->getResults())
    if (!r.hasOneUse() || !isa<WaitOp>(*r.getUsers().begin()))
      return op->emitOpError() << "expects its future to be used by exactly "
                                  "one fsdp.wait and nothing else";
  return success();
}

LogicalResult SendOp::verify() {
  if (getAsync() != (getToken() != nullptr))
    return emitOpError() << "has a future result exactly when it is async";
  if (getToken()) {
    auto t = cast<FutureType>(getToken().getType()).getValueType();
    if (t.getRank() != 1 || t.getDimSize(0) != 1)
      return emitOpError() << "expects a future of a one-element completion "
                              "buffer, got "
                           << t;
  }
  return verifyPointToPoint(*this, getPeer(), getTag());
}

LogicalResult RecvOp::verify() {
  if (!getAsync())
    return emitOpError() << "is always async (its result is a future)";
  return verifyPointToPoint(*this, getPeer(), getTag());
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  return verifyShardedCollective(*this, getUnitAttr(), getBucketAttr(),
                                 getGroup(), getShard().getType(),
                                 getBufferType());
}

LogicalResult
AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (getGroup() != Group::Shard)
    return lookupUnit(*this, getUnitAttr(), symbolTable);
  return verifyCollectiveSizes(*this, getUnitAttr(), getBucketAttr(),
                               getShard().getType(), getBufferType(),
                               symbolTable);
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  return verifyShardedCollective(*this, getUnitAttr(), getBucketAttr(),
                                 getGroup(), getBufferType(),
                                 getInput().getType());
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (getGroup() != Group::Shard)
    return lookupUnit(*this, getUnitAttr(), symbolTable);
  return verifyCollectiveSizes(*this, getUnitAttr(), getBucketAttr(),
                               getBufferType(), getInput().getType(),
                               symbolTable);
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  if (getInput().getType() != getBufferType())
    return emitOpError()
           << "expects the result type to equal the input type, got "
           << getInput().getType() << " and " << getBufferType();
  return success();
}

LogicalResult
AllReduceOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnitAttr(), symbolTable);
}

static LogicalResult verifyBucketCopy(Operation *op, int64_t blocks,
                                      Value bucket, ValueRange parts) {
  if (blocks < 1)
    return op->emitOpError() << "expects blocks >= 1, got " << blocks;
  if (parts.size() < 2)
    return op->emitOpError()
           << "expects at least two unit buffers, got " << parts.size();
  int64_t total = 0;
  for (Value p : parts) {
    if (failed(sameElementType(op, p.getType(), bucket.getType())))
      return failure();
    if (numelOf(p.getType()) % blocks != 0)
      return op->emitOpError()
             << "expects every unit buffer to hold " << blocks
             << " blocks, got " << numelOf(p.getType()) << " elements";
    total += numelOf(p.getType());
  }
  if (total != numelOf(bucket.getType()))
    return op->emitOpError()
           << "expects the bucket to hold the " << total
           << " elements of its units, got " << numelOf(bucket.getType());
  return success();
}

LogicalResult PackOp::verify() {
  return verifyBucketCopy(*this, getBlocks(), getResult(), getInputs());
}

LogicalResult UnpackOp::verify() {
  return verifyBucketCopy(*this, getBlocks(), getInput(), getResults());
}

LogicalResult LocalShardOp::verify() {
  if (failed(sameElementType(*this, getInput().getType(), getType())))
    return failure();
  std::optional<int64_t> g = groupSize(*this, getGroup());
  if (g && numelOf(getType()) * *g != numelOf(getInput().getType()))
    return emitOpError() << "expects a slice of "
                         << numelOf(getInput().getType()) << " / " << *g
                         << " elements, got " << numelOf(getType());
  return success();
}

LogicalResult
LocalShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnitAttr(), symbolTable);
}

LogicalResult ParamViewOp::verify() {
  if (failed(sameElementType(*this, getFlat().getType(), getType())))
    return failure();
  int64_t off = getOffset(), n = numelOf(getType()),
          total = numelOf(getFlat().getType());
  if (off < 0 || off + n > total)
    return emitOpError() << "expects the view [" << off << ", " << off + n
                         << ") inside the flat buffer of " << total
                         << " elements";
  return success();
}

LogicalResult FlattenOp::verify() {
  ArrayRef<int64_t> offsets = getOffsets();
  if (offsets.size() != getInputs().size())
    return emitOpError() << "expects one offset per input ("
                         << getInputs().size() << "), got " << offsets.size();
  int64_t total = numelOf(getType()), end = 0;
  for (auto [i, v] : llvm::enumerate(getInputs())) {
    if (failed(sameElementType(*this, v.getType(), getType())))
      return failure();
    if (offsets[i] < end || offsets[i] + numelOf(v.getType()) > total)
      return emitOpError() << "expects input #" << i
                           << " at a non-overlapping offset inside " << total
                           << " elements, got offset " << offsets[i];
    end = offsets[i] + numelOf(v.getType());
  }
  return success();
}

LogicalResult FlattenOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  return lookupUnit(*this, getUnitAttr(), symbolTable);
}
