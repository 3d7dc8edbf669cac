//===- OptionParsers.h - pass option types beyond llvm::cl's own ----------===//
//
// `std::optional<double>`: a number option that may be left unset (fsdp-shard's
// max-grad-norm: unset is no clipping, 0 is an error). Unset is part of the
// value, not of whether the option was parsed (OptionBase::hasValue), so that
// it survives the generated options structs, from which fsdp-pipeline builds
// its passes. Included by Passes.h before the generated declarations.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TRANSFORMS_OPTIONPARSERS_H
#define FSDP_TRANSFORMS_OPTIONPARSERS_H

#include "llvm/Support/CommandLine.h"

#include <optional>

namespace llvm::cl {

/// Parses a number as cl::opt<double> does (the same values, the same
/// messages); the option's default is std::nullopt, printed as None.
template <>
class parser<std::optional<double>>
    : public basic_parser<std::optional<double>> {
public:
  parser(Option &o) : basic_parser(o) {}

  /// True on error, as every cl parser. "None" is unset: a printed pass
  /// pipeline spells it so (raw_ostream's std::optional), and parses back.
  bool parse(Option &o, StringRef argName, StringRef arg,
             std::optional<double> &value) {
    if (arg == "None") {
      value = std::nullopt;
      return false;
    }
    double number;
    if (parser<double>(o).parse(o, argName, arg, number))
      return true;
    value = number;
    return false;
  }

  StringRef getValueName() const override { return "number"; }

  void printOptionDiff(const Option &o, const std::optional<double> &,
                       const OptionValue<std::optional<double>> &,
                       size_t globalWidth) const {
    printOptionNoValue(o, globalWidth);
  }
};

} // namespace llvm::cl

#endif // FSDP_TRANSFORMS_OPTIONPARSERS_H
