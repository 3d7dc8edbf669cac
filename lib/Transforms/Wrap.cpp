//===- Wrap.cpp - fsdp-wrap: group parameters into FSDP units -------------===//
//
// The wrap policy of PyTorch FSDP (auto_wrap_policy) decided statically: a
// unit is the group of parameters that is gathered, freed and
// reduce-scattered together.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"
#include <cmath>

#define DEBUG_TYPE "fsdp-wrap"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPWRAP
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

std::string mlir::fsdp::transformerBlockOf(StringRef fqn) {
  // A block index is a numeric component with a name after it
  // (`transformer.h.3.attn...`, `model.layers.3...`).
  SmallVector<StringRef> parts;
  fqn.split(parts, '.');
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    unsigned idx;
    if (!parts[i].getAsInteger(10, idx))
      return llvm::join(ArrayRef<StringRef>(parts).take_front(i + 1), ".");
  }
  return "";
}

/// Default initialisation when the argument has no `nn.init`: a matrix
/// [out, in] gets torch.nn.Linear's U(−1/√in, 1/√in) (He et al., ICCV 2015,
/// with a = √5 as in PyTorch's reset_parameters), anything else zeros.
static std::string defaultInit(RankedTensorType t) {
  if (t.getRank() >= 2) {
    char buf[64];
    snprintf(buf, sizeof(buf), "uniform(%.9g)",
             1.0 / std::sqrt((double)t.getShape().back()));
    return buf;
  }
  return "zeros";
}

namespace {
/// Declares the units; the step function is not changed. For
///   func.func @f(..., %w1 {nn.param = "fc1.weight"}, %b1 {nn.param =
///   "fc1.bias"}, %w2 {nn.param = "fc2.weight"})
/// the default policy adds, in first-use order,
///   fsdp.unit @fc1 params ["fc1.weight", "fc1.bias"] {...}
///   fsdp.unit @fc2 params ["fc2.weight"] {...}
/// (the steps: checkOptions, paramsInUseOrder, groupParams, splitFrozen,
/// createUnits).
struct FSDPWrapPass : mlir::fsdp::impl::FSDPWrapBase<FSDPWrapPass> {
  using Base::Base;

  std::string unitName(StringRef fqn) {
    if (policy == WrapPolicy::Block) {
      std::string block = transformerBlockOf(fqn);
      return block.empty() ? "root" : block;
    }
    if (!units.empty()) {
      std::string best;
      for (const std::string &p : units)
        if ((fqn == p || fqn.starts_with(p + ".")) && p.size() > best.size())
          best = p;
      return best.empty() ? "root" : best;
    }
    SmallVector<StringRef> parts;
    fqn.split(parts, '.');
    if (parts.size() == 1)
      return "root";
    size_t keep = unitDepth > 0 ? std::min<size_t>(unitDepth, parts.size() - 1)
                                : parts.size() - 1;
    return llvm::join(ArrayRef<StringRef>(parts).take_front(keep), ".");
  }

  /// Why unitName(fqn) is `unit` (for -debug-only=fsdp-wrap).
  std::string reason(StringRef fqn, StringRef unit) {
    if (policy == WrapPolicy::Block)
      return unit == "root" ? "no numeric FQN component: not in a block"
                            : "the FQN up to its block index";
    if (!units.empty())
      return unit == "root" ? "no listed units= prefix matches"
                            : "the longest units= prefix of the FQN";
    if (!fqn.contains('.'))
      return "a top-level name";
    if (unitDepth > 0)
      return "its first " + std::to_string(unitDepth) + " FQN components";
    return "its module (the FQN without the last component)";
  }

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkOptions()))
      return signalPassFailure();
    FailureOr<func::FuncOp> fn = getStepFunction(module);
    if (failed(fn))
      return signalPassFailure();
    SmallVector<unsigned> params = paramsInUseOrder(*fn);
    if (params.empty()) {
      fn->emitError()
          << "has no parameter (an argument with 'nn.param') to wrap";
      return signalPassFailure();
    }
    UnitGroups groups;
    if (failed(groupParams(*fn, params, groups)) ||
        failed(checkUnitsMatched(groups)) ||
        failed(createUnits(
            *fn, splitTensorParallel(
                     *fn, splitTiedCopies(*fn, splitFrozen(*fn, groups))))))
      return signalPassFailure();
  }

  /// Units in the order of their first parameter, each with its parameters'
  /// argument numbers in first-use order.
  struct UnitGroups {
    SmallVector<std::pair<std::string, SmallVector<unsigned>>> units;
    llvm::StringMap<unsigned> indexOf;
    void add(StringRef unit, unsigned arg) {
      auto [it, inserted] = indexOf.try_emplace(unit, units.size());
      if (inserted)
        units.push_back({unit.str(), {}});
      units[it->second].second.push_back(arg);
    }
  };

  LogicalResult checkOptions() {
    ModuleOp module = getOperation();
    if (policy == WrapPolicy::Size && minUnitNumel < 1)
      return module.emitError()
             << "fsdp-wrap: min-unit-numel must be >= 1, got "
             << static_cast<int64_t>(minUnitNumel);
    if (unitDepth < 0)
      return module.emitError() << "fsdp-wrap: unit-depth must be >= 0, got "
                                << static_cast<int64_t>(unitDepth);
    // Each policy reads only its own options (unitName): an option of
    // another policy would be dropped without a word.
    if (policy != WrapPolicy::Module && (!units.empty() || unitDepth > 0))
      return module.emitError()
             << "fsdp-wrap: " << (units.empty() ? "unit-depth" : "units=")
             << " needs policy=module (policy=" << stringifyWrapPolicy(policy)
             << " names its own units)";
    if (!units.empty() && unitDepth > 0)
      return module.emitError()
             << "fsdp-wrap: give units= or unit-depth, not both (units= "
                "names every unit itself)";
    if (policy != WrapPolicy::Size &&
        minUnitNumel != FSDPWrapOptions().minUnitNumel)
      return module.emitError()
             << "fsdp-wrap: min-unit-numel needs "
                "policy=size (policy="
             << stringifyWrapPolicy(policy) << " does not fill units by size)";
    if (!module.getOps<UnitOp>().empty())
      return module.emitError()
             << "fsdp-wrap: the module already declares FSDP units";
    return success();
  }

  /// The parameter arguments in order of first use, so that units come out in
  /// the order that forward needs them; unused ones last.
  static SmallVector<unsigned> paramsInUseOrder(func::FuncOp fn) {
    llvm::MapVector<unsigned, bool> order;
    fn.walk([&](Operation *op) {
      for (Value v : op->getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v))
          if (arg.getOwner()->getParentOp() == fn &&
              fn.getArgAttr(arg.getArgNumber(), nn::kParamAttr))
            order.insert({arg.getArgNumber(), true});
    });
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (fn.getArgAttr(i, nn::kParamAttr))
        order.insert({i, true});
    SmallVector<unsigned> params;
    for (auto [i, _] : order)
      params.push_back(i);
    return params;
  }

  /// Each parameter's unit by the policy.
  LogicalResult groupParams(func::FuncOp fn, ArrayRef<unsigned> params,
                            UnitGroups &groups) {
    llvm::StringMap<unsigned> seen;
    int64_t sizeUnits = 0, sizeUnitNumel = 0;
    for (unsigned i : params) {
      StringRef fqn =
          fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr).getValue();
      if (!seen.insert({fqn, i}).second)
        return emitError(fn.getArgument(i).getLoc())
               << "parameter '" << fqn << "' is declared twice (arguments #"
               << seen[fqn] << " and #" << i
               << "); a tied parameter is one argument used twice";
      std::string n;
      if (policy == WrapPolicy::Size) {
        // Fill units in first-use order up to min-unit-numel elements.
        int64_t numel = cast<RankedTensorType>(fn.getArgument(i).getType())
                            .getNumElements();
        if (sizeUnitNumel >= minUnitNumel || groups.units.empty()) {
          LLVM_DEBUG(if (!groups.units.empty()) llvm::dbgs()
                     << "unit size." << sizeUnits - 1 << " closed at "
                     << sizeUnitNumel << " >= min-unit-numel "
                     << static_cast<int64_t>(minUnitNumel) << " elements\n");
          ++sizeUnits;
          sizeUnitNumel = 0;
        }
        sizeUnitNumel += numel;
        n = "size." + std::to_string(sizeUnits - 1);
        LLVM_DEBUG(llvm::dbgs()
                   << "'" << fqn << "' (" << numel << " elements) -> " << n
                   << ": next in first-use order, the unit now holds "
                   << sizeUnitNumel << "\n");
      } else {
        n = unitName(fqn);
        LLVM_DEBUG(llvm::dbgs() << "'" << fqn << "' -> " << n << ": "
                                << reason(fqn, n) << "\n");
      }
      if (failed(checkTied(fn, i, n)))
        return failure();
      groups.add(n, i);
    }
    return success();
  }

  /// A tied parameter's other names must not be wrapped elsewhere.
  LogicalResult checkTied(func::FuncOp fn, unsigned i, StringRef unit) {
    auto tied = fn.getArgAttrOfType<ArrayAttr>(i, nn::kTiedAttr);
    if (!tied || units.empty())
      return success();
    StringRef fqn =
        fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr).getValue();
    for (Attribute a : tied) {
      StringRef alias = cast<StringAttr>(a).getValue();
      std::string other = unitName(alias);
      if (other != unit)
        return emitError(fn.getArgument(i).getLoc())
               << "parameter '" << fqn << "' is tied to '" << alias
               << "' (one parameter, two names), but the wrap request puts "
                  "them in units '"
               << unit << "' and '" << other
               << "'; tied parameters live in one unit";
    }
    return success();
  }

  LogicalResult checkUnitsMatched(const UnitGroups &groups) {
    for (const std::string &prefix : units)
      if (!groups.indexOf.count(prefix))
        return getOperation().emitError()
               << "fsdp-wrap: units prefix '" << prefix
               << "' matches no parameter (or only ones a longer prefix takes)";
    return success();
  }

  /// Frozen and trainable parameters of one unit: two flat buffers (units
  /// `name` and `name.frozen`), so that the frozen one carries no gradient
  /// and no optimizer state.
  static SmallVector<std::pair<std::string, SmallVector<unsigned>>>
  splitFrozen(func::FuncOp fn, const UnitGroups &groups) {
    SmallVector<std::pair<std::string, SmallVector<unsigned>>> flatGroups;
    for (auto &[name, args] : groups.units) {
      SmallVector<unsigned> train, frozenArgs;
      for (unsigned i : args) {
        auto tr = fn.getArgAttrOfType<BoolAttr>(i, nn::kTrainableAttr);
        (!tr || tr.getValue() ? train : frozenArgs).push_back(i);
      }
      if (!train.empty() && !frozenArgs.empty()) {
        LLVM_DEBUG(llvm::dbgs() << "unit " << name << ": " << frozenArgs.size()
                                << " frozen parameter(s) -> " << name
                                << ".frozen (no gradient, no state)\n");
        flatGroups.push_back({name, train});
        flatGroups.push_back({name + ".frozen", frozenArgs});
      } else {
        flatGroups.push_back({name, args});
      }
    }
    return flatGroups;
  }

  /// Pipeline parallelism: the copy of a tied parameter on the later of
  /// its two stages (fsdp.pp_tied_peer below this stage) gets its own flat
  /// buffer, `name.tied_copy`, so that the global gradient norm counts the
  /// tied parameter once, on the earlier stage (fsdp-shard).
  SmallVector<std::pair<std::string, SmallVector<unsigned>>> splitTiedCopies(
      func::FuncOp fn,
      SmallVector<std::pair<std::string, SmallVector<unsigned>>> groups) {
    auto stage = getOperation()->getAttrOfType<IntegerAttr>(kPipelineStageAttr);
    if (!stage)
      return groups;
    SmallVector<std::pair<std::string, SmallVector<unsigned>>> out;
    for (auto &[name, args] : groups) {
      SmallVector<unsigned> own, copies;
      for (unsigned i : args) {
        auto peer = fn.getArgAttrOfType<IntegerAttr>(i, kPPTiedPeerAttr);
        (peer && peer.getInt() < stage.getInt() ? copies : own).push_back(i);
      }
      if (!own.empty() && !copies.empty()) {
        out.push_back({name, own});
        out.push_back({name + ".tied_copy", copies});
      } else {
        out.push_back({name, args});
      }
    }
    return out;
  }

  /// Under tensor parallelism (fsdp-tensor-parallel's fsdp.tensor_slices) a
  /// unit's trainable parameters that are replicated in the tensor-parallel
  /// group (norms, row-parallel biases) get their own flat buffer,
  /// `name.tp_replicated`, so that a unit is either split or replicated
  /// across the group and the global gradient norm can count each
  /// replicated element once (fsdp-shard).
  SmallVector<std::pair<std::string, SmallVector<unsigned>>>
  splitTensorParallel(
      func::FuncOp fn,
      SmallVector<std::pair<std::string, SmallVector<unsigned>>> groups) {
    auto slices =
        getOperation()->getAttrOfType<DictionaryAttr>(kTensorSlicesAttr);
    if (!slices)
      return groups;
    SmallVector<std::pair<std::string, SmallVector<unsigned>>> out;
    for (auto &[name, args] : groups) {
      SmallVector<unsigned> split, replicated;
      for (unsigned i : args) {
        auto fqn = fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr);
        auto tr = fn.getArgAttrOfType<BoolAttr>(i, nn::kTrainableAttr);
        bool trainable = !tr || tr.getValue();
        (!trainable || slices.get(fqn) ? split : replicated).push_back(i);
      }
      if (!split.empty() && !replicated.empty()) {
        out.push_back({name, split});
        out.push_back({name + ".tp_replicated", replicated});
      } else {
        out.push_back({name, args});
      }
    }
    return out;
  }

  /// One fsdp.unit per flat buffer, at the top of the module.
  LogicalResult createUnits(
      func::FuncOp fn,
      ArrayRef<std::pair<std::string, SmallVector<unsigned>>> flatGroups) {
    ModuleOp module = getOperation();
    OpBuilder b(module.getBody(), module.getBody()->begin());
    for (auto &[name, args] : flatGroups) {
      SmallVector<Attribute> fqns, shapes, inits;
      SmallVector<bool> trainable;
      Type elt;
      for (unsigned i : args) {
        auto t = cast<RankedTensorType>(fn.getArgument(i).getType());
        StringAttr fqn = fn.getArgAttrOfType<StringAttr>(i, nn::kParamAttr);
        if (elt && t.getElementType() != elt)
          return emitError(fn.getArgument(i).getLoc())
                 << "unit '" << name << "' mixes element types " << elt
                 << " and " << t.getElementType() << " (parameter '"
                 << fqn.getValue()
                 << "'): one flat buffer has one dtype; wrap them into "
                    "separate units with units=";
        elt = t.getElementType();
        fqns.push_back(fqn);
        shapes.push_back(b.getDenseI64ArrayAttr(t.getShape()));
        auto init = fn.getArgAttrOfType<StringAttr>(i, nn::kInitAttr);
        inits.push_back(init ? init : b.getStringAttr(defaultInit(t)));
        auto tr = fn.getArgAttrOfType<BoolAttr>(i, nn::kTrainableAttr);
        trainable.push_back(!tr || tr.getValue());
      }
      UnitOp::create(
          b, fn.getLoc(), b.getStringAttr(name), b.getArrayAttr(fqns),
          b.getArrayAttr(shapes), b.getArrayAttr(inits),
          b.getDenseBoolArrayAttr(trainable), TypeAttr::get(elt),
          /*offsets=*/nullptr, /*numel=*/nullptr, /*padded_numel=*/nullptr,
          /*shard_numel=*/nullptr);
    }
    return success();
  }
};
} // namespace
