//===- GlobOptions.h - the passes' glob-pattern options ------------------===//
//
// frozen (fsdp-autodiff), no-decay (fsdp-optimizer) and ac-units
// (fsdp-activation-checkpoint) name parameters or units by glob patterns
// (llvm::GlobPattern: `*.bias`, `model.layers.*`); a pattern that is not a
// glob, or that matches nothing, is the user's typo and an error, the same
// way in every pass. On a pipeline stage a name may live on another stage:
// there the pass records what matched nothing (recordUnmatched) and
// fsdp-pipeline fails on what matched on no stage (PipelineUnmatched).
// Private to lib/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_GLOBOPTIONS_H
#define FSDP_LIB_TRANSFORMS_GLOBOPTIONS_H

#include "fsdp/Dialect/FSDP/FSDP.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/GlobPattern.h"

#include <map>
#include <string>
#include <vector>

namespace mlir::fsdp {

/// On a pipeline stage's module (or a chunk's): option -> the option's
/// patterns (or names) that matched nothing on it; set by every pass that
/// checks an option there, read and removed by fsdp-pipeline. Not the
/// fsdp dialect's (it verifies its attributes, and this one never leaves
/// fsdp-pipeline), but dialect-prefixed, as a module's attributes must be.
inline constexpr llvm::StringLiteral kPPUnmatchedAttr =
    "fsdp_pipeline.pp_unmatched";

/// The module of `op` (itself if it is one) when it is a stage of a
/// pipeline of more than one stage, else null.
inline ModuleOp pipelineStageModule(Operation *op) {
  auto m =
      isa<ModuleOp>(op) ? cast<ModuleOp>(op) : op->getParentOfType<ModuleOp>();
  auto stages =
      m ? m->getAttrOfType<IntegerAttr>(kPipelineStagesAttr) : IntegerAttr();
  return stages && stages.getInt() > 1 ? m : ModuleOp();
}

/// Records on the stage's module that `option` was checked there, which of
/// its patterns matched nothing, and the names it matched against there
/// when they are listed (`what`, as matchGlobs words it: "FSDP unit (units:
/// ...)"; empty otherwise; kPPUnmatchedAttr).
inline void recordUnmatched(ModuleOp stage, StringRef option,
                            ArrayRef<std::string> unmatched,
                            StringRef what = "") {
  MLIRContext *ctx = stage.getContext();
  NamedAttrList entries;
  if (auto d = stage->getAttrOfType<DictionaryAttr>(kPPUnmatchedAttr))
    entries.append(d.getValue());
  SmallVector<Attribute> names;
  for (const std::string &u : unmatched)
    names.push_back(StringAttr::get(ctx, u));
  NamedAttrList record;
  record.set("unmatched", ArrayAttr::get(ctx, names));
  record.set("what", StringAttr::get(ctx, what));
  entries.set(StringAttr::get(ctx, option), record.getDictionary(ctx));
  stage->setAttr(kPPUnmatchedAttr, entries.getDictionary(ctx));
}

/// fsdp-pipeline's tally of recordUnmatched over the stages (and chunks)
/// it planned: a pattern is the user's typo when every module that checked
/// its option found it matching nothing.
struct PipelineUnmatched {
  struct Option {
    int runs = 0;                      ///< modules that checked it
    std::map<std::string, int> missed; ///< pattern -> modules it missed on
    std::vector<std::string> what;     ///< each module's names, as recorded
  };
  std::map<std::string, Option> tally;

  /// Adds `m`'s record and removes it from the module.
  void collect(ModuleOp m) {
    auto d = m->getAttrOfType<DictionaryAttr>(kPPUnmatchedAttr);
    if (!d)
      return;
    auto stage = m->getAttrOfType<IntegerAttr>(kPipelineStageAttr);
    for (NamedAttribute e : d) {
      Option &o = tally[e.getName().str()];
      ++o.runs;
      auto record = cast<DictionaryAttr>(e.getValue());
      for (Attribute a : record.getAs<ArrayAttr>("unmatched"))
        ++o.missed[cast<StringAttr>(a).str()];
      StringRef what = record.getAs<StringAttr>("what").getValue();
      if (!what.empty())
        o.what.push_back(
            (stage ? "stage " + std::to_string(stage.getInt()) + ": " : "") +
            what.str());
    }
    m->removeAttr(kPPUnmatchedAttr);
  }

  /// Fails at `op` on the first pattern no stage matched, naming what each
  /// stage has.
  LogicalResult check(Operation *op) const {
    for (const auto &[option, entry] : tally)
      for (const auto &[pattern, missed] : entry.missed)
        if (missed == entry.runs) {
          InFlightDiagnostic d = op->emitError()
                                 << option << " pattern '" << pattern
                                 << "' matches nothing on any pipeline stage";
          if (!entry.what.empty())
            d << " (" << llvm::join(entry.what, "; ") << ")";
          return d;
        }
    return success();
  }
};

/// Calls `onMatch(i)` for every `names[i]` that a pattern of `patterns`
/// matches. Fails with an error at `op` for a pattern that is not a valid
/// glob ("<option> pattern 'p' is not a valid glob") or that matches no name
/// ("<option> pattern 'p' matches no <what>", and with `listedAs` the names:
/// "... matches no FSDP unit (units: a, b)"); `option` is spelled with its
/// pass, e.g. "fsdp-optimizer: no-decay". On a pipeline stage a pattern
/// that matches nothing is recorded instead (recordUnmatched, with the
/// listed names).
inline LogicalResult matchGlobs(Operation *op, StringRef option,
                                ArrayRef<std::string> patterns,
                                ArrayRef<StringRef> names, StringRef noun,
                                llvm::function_ref<void(size_t)> onMatch,
                                StringRef listedAs = "") {
  ModuleOp stage = pipelineStageModule(op);
  const std::string listed =
      listedAs.empty()
          ? std::string()
          : (noun + " (" + listedAs + ": " + llvm::join(names, ", ") + ")")
                .str();
  StringRef what = listed.empty() ? noun : StringRef(listed);
  SmallVector<std::string> unmatched;
  for (const std::string &pattern : patterns) {
    llvm::Expected<llvm::GlobPattern> glob = llvm::GlobPattern::create(pattern);
    if (!glob) {
      llvm::consumeError(glob.takeError());
      return op->emitError()
             << option << " pattern '" << pattern << "' is not a valid glob";
    }
    bool matched = false;
    for (auto [i, name] : llvm::enumerate(names))
      if (glob->match(name)) {
        onMatch(i);
        matched = true;
      }
    if (!matched && stage)
      unmatched.push_back(pattern);
    else if (!matched)
      return op->emitError()
             << option << " pattern '" << pattern << "' matches no " << what;
  }
  if (stage && !patterns.empty())
    recordUnmatched(stage, option, unmatched, listed);
  return success();
}

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_GLOBOPTIONS_H
