//===- OptionValueError.h - naming a pass option's malformed value -------===//
//
// A pass option's value that its llvm::cl parser refuses (tp=abc) is
// reported by llvm::cl on stderr ("for the --tp option: 'abc' value invalid
// for long argument!"), and MLIR's Pass::initializeOptions hands the pass
// pipeline parser an empty message: the error itself said nothing.
// initializeOptionsNamingValues finds which key=value of the options string the
// parser stopped at and names it with what the option takes. Private to
// lib/Transforms.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_OPTIONVALUEERROR_H
#define FSDP_LIB_TRANSFORMS_OPTIONVALUEERROR_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/LogicalResult.h"

#include <string>

namespace mlir::fsdp {

/// One key=value of a pass options string; `hasValue` is false for a key
/// written without '='.
struct PassOptionPair {
  llvm::StringRef key, value;
  bool hasValue = false;
};

/// The key=value pairs of a pass options string, split as MLIR's
/// PassOptions::parseFromString splits them: space-separated, a value may
/// hold spaces inside '...', "..." or {...}.
inline llvm::SmallVector<PassOptionPair>
splitPassOptions(llvm::StringRef options) {
  llvm::SmallVector<PassOptionPair> pairs;
  size_t i = 0, n = options.size();
  while (i < n) {
    if (options[i] == ' ') {
      ++i;
      continue;
    }
    size_t keyBegin = i;
    while (i < n && options[i] != ' ' && options[i] != '=')
      ++i;
    llvm::StringRef key = options.slice(keyBegin, i);
    if (i == n || options[i] == ' ') {
      pairs.push_back({key, "", false});
      continue;
    }
    size_t valueBegin = ++i;
    int braces = 0;
    char quote = 0;
    for (; i < n && (quote || braces || options[i] != ' '); ++i) {
      char c = options[i];
      if (quote)
        quote = c == quote ? 0 : quote;
      else if (c == '\'' || c == '"')
        quote = c;
      else if (c == '{')
        ++braces;
      else if (c == '}' && braces)
        --braces;
    }
    pairs.push_back({key, options.slice(valueBegin, i), true});
  }
  return pairs;
}

/// Parses `options` with `parse` (the pass's Pass::initializeOptions) and
/// reports a failure through `errorHandler` with a message that names the
/// refused option: llvm::cl's own complaint goes to stderr and MLIR passes
/// on an empty message. `anyOption` is one option of the pass (its
/// subcommand holds them all). The refused pair is found without parsing
/// again: llvm::cl counts an option's occurrence before it parses the value
/// and the parser stops at the first refusal, so it is the last pair whose
/// option has counted all of its occurrences so far. A key that needs a
/// value and has none is refused before parsing (llvm::cl refuses it
/// without counting it). Messages: "<pass>: option 'key' needs a value
/// (key=...)", "<pass>: option 'key': 'value' is not a valid value (key:
/// <the option's description>)".
inline llvm::LogicalResult initializeOptionsNamingValues(
    llvm::StringRef pass, llvm::StringRef options,
    const llvm::cl::Option &anyOption,
    llvm::function_ref<llvm::LogicalResult(
        llvm::StringRef,
        llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)>)>
        parse,
    llvm::function_ref<llvm::LogicalResult(const llvm::Twine &)> errorHandler) {
  if (anyOption.Subs.empty())
    return parse(options, errorHandler);
  const llvm::cl::SubCommand &sub = **anyOption.Subs.begin();
  llvm::SmallVector<PassOptionPair> pairs = splitPassOptions(options);
  for (const PassOptionPair &p : pairs) {
    auto it = sub.OptionsMap.find(p.key);
    if (it == sub.OptionsMap.end())
      break; // the parser refuses an unknown key with its own message
    if (!p.hasValue &&
        it->second->getValueExpectedFlag() == llvm::cl::ValueRequired)
      return errorHandler(pass + ": option '" + p.key + "' needs a value (" +
                          p.key + "=...)");
  }
  std::string message;
  if (llvm::succeeded(parse(options, [&](const llvm::Twine &m) {
        message = m.str();
        return llvm::failure();
      })))
    return llvm::success();
  if (!message.empty())
    return errorHandler(message);
  llvm::StringMap<unsigned> seen;
  const llvm::cl::Option *refused = nullptr;
  PassOptionPair refusedPair;
  for (const PassOptionPair &p : pairs) {
    auto it = sub.OptionsMap.find(p.key);
    if (it == sub.OptionsMap.end() ||
        static_cast<unsigned>(it->second->getNumOccurrences()) < ++seen[p.key])
      break;
    refused = it->second;
    refusedPair = p;
  }
  if (!refused)
    return errorHandler(pass + ": the options '" + options + "' do not parse");
  return errorHandler(pass + ": option '" + refusedPair.key + "': '" +
                      refusedPair.value + "' is not a valid value (" +
                      refusedPair.key + ": " + refused->HelpStr + ")");
}

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_OPTIONVALUEERROR_H
