//===- InitSpec.h - Parameter init specs, for compiler and runtime --------===//
//
// The one definition of the strings that say how a parameter starts: the
// `nn.init` argument attribute (checked by the nn dialect's verifier,
// dialects/nn/NNDialect.cpp), the `inits` of fsdp.unit and the "init" field
// of a schedule's parameters (runtime/docs/schedule-format.md), which
// fsdp-run evaluates (runtime/tooling/Data.cpp). The compiler accepts exactly
// what the runtime can execute:
//
//   zeros         0
//   ones          1
//   uniform(a)    U(-a, a), a >= 0 (torch.nn.init.uniform_(-a, a))
//   normal(s)     N(0, s²), s >= 0 (torch.nn.init.normal_(0, s))
//   constant(v)   v (torch.nn.init.constant_)
//
// Numbers are finite, in strtod's syntax, with optional white space inside
// the parentheses. Header-only, no dependencies: the runtime does not depend
// on MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITSPEC_H
#define FSDP_INITSPEC_H

#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

namespace fsdp::init {

/// The forms, as error messages list them.
inline constexpr const char *kForms =
    "zeros, ones, uniform(a), normal(s), constant(v)";

enum class Kind { Zeros, Ones, Uniform, Normal, Constant };

/// A parsed spec: `value` is a (uniform), s (normal), v (constant); 0 for
/// zeros and ones.
struct Spec {
  Kind kind = Kind::Zeros;
  double value = 0;
};

/// Why a spec did not parse.
enum class ParseError {
  None,
  UnknownKind, ///< not one of the forms above
  BadNumber,   ///< a known form whose number is malformed, out of range or
               ///< (uniform, normal) negative
};

/// Parses `text` into `out`; returns ParseError::None on success.
inline ParseError parse(std::string_view text, Spec &out) {
  out = Spec{};
  if (text == "zeros")
    return ParseError::None;
  if (text == "ones") {
    out.kind = Kind::Ones;
    return ParseError::None;
  }
  size_t open = text.find('(');
  if (open == std::string_view::npos || text.back() != ')')
    return ParseError::UnknownKind;
  std::string_view name = text.substr(0, open);
  if (name == "uniform")
    out.kind = Kind::Uniform;
  else if (name == "normal")
    out.kind = Kind::Normal;
  else if (name == "constant")
    out.kind = Kind::Constant;
  else
    return ParseError::UnknownKind;
  std::string_view num = text.substr(open + 1, text.size() - open - 2);
  const char *space = " \t\n\v\f\r";
  size_t first = num.find_first_not_of(space);
  if (first == std::string_view::npos)
    return ParseError::BadNumber;
  num = num.substr(first, num.find_last_not_of(space) - first + 1);
  std::string body(num); // strtod needs a terminated string
  char *end = nullptr;
  double v = std::strtod(body.c_str(), &end);
  // Overflow is infinite (rejected below); underflow rounds towards 0.
  if (end != body.c_str() + body.size() || !std::isfinite(v) ||
      (out.kind != Kind::Constant && !(v >= 0)))
    return ParseError::BadNumber;
  out.value = v;
  return ParseError::None;
}

/// True if `text` is a valid spec.
inline bool isValid(std::string_view text) {
  Spec s;
  return parse(text, s) == ParseError::None;
}

} // namespace fsdp::init

#endif // FSDP_INITSPEC_H
