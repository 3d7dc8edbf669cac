//===- Options.h - overrides of fsdp-import and fsdp-sweep ---*- C++ -*-===//
#ifndef FSDP_IMPORT_OPTIONS_H
#define FSDP_IMPORT_OPTIONS_H

#include "fsdp/Import/Config.h"

#include "llvm/Support/CommandLine.h"

#include <string>

namespace fsdp_import {

/// The model-shape overrides (--layers, --hidden, --heads, --kv-heads,
/// --intermediate, --vocab), registered in `category` when constructed: one
/// static instance per tool.
class ArchitectureOptions {
public:
  explicit ArchitectureOptions(llvm::cl::OptionCategory &category);
  /// Copies the overrides given on the command line into `ov`; false with
  /// `error` set if one is outside [1, kMaxOverride].
  bool read(Overrides &ov, std::string &error) const;

private:
  llvm::cl::opt<int64_t> layers, hidden, heads, kvHeads, intermediate, vocab;
};

/// `opt`'s value into `dst` if it was given (or `always`); false with `error`
/// ("--NAME must be in [1, 2^31 - 1], got V") if outside [1, kMaxOverride].
bool readOverride(const llvm::cl::opt<int64_t> &opt,
                  std::optional<int64_t> &dst, std::string &error,
                  bool always = false);

} // namespace fsdp_import

#endif // FSDP_IMPORT_OPTIONS_H
