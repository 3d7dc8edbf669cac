//===- FSDPDialect.cpp - fsdp dialect registration and verifiers ----------===//
#include "fsdp/Dialect/FSDP/FSDP.h"

#include "llvm/ADT/TypeSwitch.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/FSDPOpsDialect.cpp.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/FSDPOps.cpp.inc"

void FSDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/FSDPOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Attribute verifiers
//===----------------------------------------------------------------------===//

static LogicalResult verifyArgOrResultAttr(Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kUnitAttr) {
    if (!isa<FlatSymbolRefAttr>(attr.getValue()))
      return op->emitError()
             << "'" << name << "' must be a symbol reference to an fsdp.unit";
    return success();
  }
  if (name == kRoleAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || !llvm::is_contained({"param", "master", "exp_avg", "exp_avg_sq"},
                                  s.getValue()))
      return op->emitError() << "'" << name
                             << "' must be \"param\", \"master\", \"exp_avg\" "
                                "or \"exp_avg_sq\", got "
                             << attr.getValue();
    return success();
  }
  if (name == kLayoutAttr) {
    auto s = dyn_cast<StringAttr>(attr.getValue());
    if (!s || (s.getValue() != "shard" && s.getValue() != "full"))
      return op->emitError()
             << "'" << name << "' must be \"shard\" or \"full\", got "
             << attr.getValue();
    return success();
  }
  if (name == kGlobalShapeAttr) {
    if (!isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitError() << "'" << name << "' must be an array<i64>";
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
    auto s = dyn_cast<StringAttr>(attr.getValue());
    bool ok =
        s && llvm::is_contained({"full-shard", "shard-grad-op",
                                 "shard-optimizer", "no-shard", "hybrid-shard"},
                                s.getValue());
    if (!isa<ModuleOp>(op) || !ok)
      return op->emitError()
             << "'" << kStrategyAttr
             << "' must be one of full-shard, shard-grad-op, shard-optimizer, "
                "no-shard, hybrid-shard on the module, got "
             << attr.getValue();
    return success();
  }
  if (attr.getName() == kReplicasAttr || attr.getName() == kShardSizeAttr) {
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
  return op->emitError() << "unknown fsdp attribute '"
                         << attr.getName().getValue() << "'";
}

std::optional<int64_t> mlir::fsdp::groupSize(Operation *op, StringRef group) {
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
  if (!world)
    return std::nullopt;
  if (group == "world")
    return world;
  if (group == "shard")
    return attr(kShardSizeAttr).value_or(*world);
  if (group == "replicate")
    return attr(kReplicasAttr).value_or(1);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

static int64_t numelOf(Type t) {
  return cast<RankedTensorType>(t).getNumElements();
}

/// Resolves the op's `unit` symbol; emits an error naming it if missing.
static FailureOr<UnitOp> lookupUnit(Operation *op, FlatSymbolRefAttr ref) {
  auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, ref);
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
  if (*getNumel() != end)
    return emitOpError() << "expects numel " << end
                         << " (the sum of parameter sizes), got "
                         << *getNumel();
  if (std::optional<int64_t> ws = groupSize(*this, "shard")) {
    int64_t padded = (end + *ws - 1) / *ws * *ws;
    if (padded < *ws)
      padded = *ws;
    if (*getPaddedNumel() != padded || *getShardNumel() * *ws != padded)
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

/// Checks the shard/full sizes of a collective against its unit, or against
/// the sum of its bucket's units (the bucket starts with `unit`).
static LogicalResult verifyCollectiveSizes(Operation *op,
                                           FlatSymbolRefAttr unitRef,
                                           ArrayAttr bucket, Type shard,
                                           Type full) {
  if (failed(sameElementType(op, shard, full)))
    return failure();
  SmallVector<FlatSymbolRefAttr> members{unitRef};
  if (bucket) {
    members.clear();
    for (Attribute a : bucket)
      members.push_back(cast<FlatSymbolRefAttr>(a));
    if (members.size() < 2 || members.front() != unitRef)
      return op->emitOpError()
             << "expects a bucket of at least two units starting with "
             << unitRef;
  }
  int64_t shardNumel = 0, paddedNumel = 0;
  for (FlatSymbolRefAttr ref : members) {
    FailureOr<UnitOp> unit = lookupUnit(op, ref);
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

/// Checks `group` names a process group; returns its size if the module
/// knows its world size.
static FailureOr<std::optional<int64_t>> verifyGroup(Operation *op,
                                                     StringRef group) {
  if (group != "world" && group != "shard" && group != "replicate")
    return op->emitOpError()
           << "expects group = \"world\", \"shard\" or \"replicate\", got \""
           << group << "\"";
  return groupSize(op, group);
}

static LogicalResult verifyReduction(Operation *op, StringRef reduction) {
  if (reduction != "avg" && reduction != "sum")
    return op->emitOpError()
           << "expects op = \"avg\" or \"sum\", got \"" << reduction << "\"";
  return success();
}

/// A gather or scatter between a shard and a full buffer over `group`.
static LogicalResult verifyShardedCollective(Operation *op,
                                             FlatSymbolRefAttr unit,
                                             ArrayAttr bucket, StringRef group,
                                             Type shard, Type full) {
  FailureOr<std::optional<int64_t>> g = verifyGroup(op, group);
  if (failed(g))
    return failure();
  if (group == "shard")
    return verifyCollectiveSizes(op, unit, bucket, shard, full);
  if (failed(lookupUnit(op, unit)) || failed(sameElementType(op, shard, full)))
    return failure();
  if (*g && numelOf(shard) * **g != numelOf(full))
    return op->emitOpError()
           << "expects the full buffer to hold " << **g << " shards of "
           << numelOf(shard) << " elements (group \"" << group << "\"), got "
           << numelOf(full);
  return success();
}

/// An `async` collective's result is a token read by exactly one fsdp.wait.
static LogicalResult verifyAsync(Operation *op, bool async) {
  if (!async)
    return success();
  Value r = op->getResult(0);
  if (!r.hasOneUse() || !isa<WaitOp>(*r.getUsers().begin()))
    return op->emitOpError()
           << "is async: expects its result to be used by exactly one "
              "fsdp.wait and nothing else";
  return success();
}

LogicalResult WaitOp::verify() {
  Operation *def = getToken().getDefiningOp();
  bool async = def && llvm::TypeSwitch<Operation *, bool>(def)
                          .Case<AllGatherOp, ReduceScatterOp, AllReduceOp>(
                              [](auto c) { return c.getAsync(); })
                          .Default([](Operation *) { return false; });
  if (!async)
    return emitOpError() << "expects the result of an async fsdp.all_gather, "
                            "fsdp.reduce_scatter or fsdp.all_reduce";
  return success();
}

LogicalResult AllGatherOp::verify() {
  if (failed(verifyAsync(*this, getAsync())))
    return failure();
  return verifyShardedCollective(*this, getUnitAttr(), getBucketAttr(),
                                 getGroup(), getShard().getType(), getType());
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(verifyReduction(*this, getOp())) ||
      failed(verifyAsync(*this, getAsync())))
    return failure();
  return verifyShardedCollective(*this, getUnitAttr(), getBucketAttr(),
                                 getGroup(), getType(), getInput().getType());
}

LogicalResult AllReduceOp::verify() {
  if (failed(verifyReduction(*this, getOp())) ||
      failed(verifyAsync(*this, getAsync())) ||
      failed(verifyGroup(*this, getGroup())) ||
      failed(lookupUnit(*this, getUnitAttr())))
    return failure();
  if (getInput().getType() != getType())
    return emitOpError()
           << "expects the result type to equal the input type, got "
           << getInput().getType() << " and " << getType();
  return success();
}

/// fsdp.pack / fsdp.unpack: `blocks` ≥ 1 rank blocks; the bucket holds
/// every part's blocks, and each part divides into `blocks` blocks.
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
  FailureOr<std::optional<int64_t>> g = verifyGroup(*this, getGroup());
  if (failed(g) || failed(lookupUnit(*this, getUnitAttr())) ||
      failed(sameElementType(*this, getInput().getType(), getType())))
    return failure();
  if (*g && numelOf(getType()) * **g != numelOf(getInput().getType()))
    return emitOpError() << "expects a slice of "
                         << numelOf(getInput().getType()) << " / " << **g
                         << " elements, got " << numelOf(getType());
  return success();
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
  return lookupUnit(*this, getUnitAttr());
}
