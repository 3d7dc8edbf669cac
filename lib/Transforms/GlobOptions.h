//===- GlobOptions.h - the passes' glob-pattern options ------------------===//
//
// frozen (fsdp-autodiff), no-decay (fsdp-optimizer) and ac-units
// (fsdp-activation-checkpoint) name parameters or units by glob patterns
// (llvm::GlobPattern: `*.bias`, `model.layers.*`); a pattern that is not a
// glob, or that matches nothing, is the user's typo and an error, the same
// way in every pass. Private to lib/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_GLOBOPTIONS_H
#define FSDP_LIB_TRANSFORMS_GLOBOPTIONS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/GlobPattern.h"

#include <string>

namespace mlir::fsdp {

/// Calls `onMatch(i)` for every `names[i]` that a pattern of `patterns`
/// matches. Fails with an error at `op` for a pattern that is not a valid
/// glob ("<option> pattern 'p' is not a valid glob") or that matches no name
/// ("<option> pattern 'p' matches no <what>"); `option` is spelled with its
/// pass, e.g. "fsdp-optimizer: no-decay".
inline LogicalResult matchGlobs(Operation *op, StringRef option,
                                ArrayRef<std::string> patterns,
                                ArrayRef<StringRef> names, StringRef what,
                                llvm::function_ref<void(size_t)> onMatch) {
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
    if (!matched)
      return op->emitError()
             << option << " pattern '" << pattern << "' matches no " << what;
  }
  return success();
}

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_GLOBOPTIONS_H
