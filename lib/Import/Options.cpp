//===- Options.cpp - command-line overrides shared by the import tools ----===//
#include "fsdp/Import/Options.h"
#include "fsdp/Import/Import.h"

using namespace llvm;

namespace fsdp_import {

ArchitectureOptions::ArchitectureOptions(cl::OptionCategory &category)
    : layers("layers", cl::desc("Number of layers"), cl::value_desc("N"),
             cl::cat(category)),
      hidden("hidden", cl::desc("Hidden size (n_embd / hidden_size)"),
             cl::value_desc("N"), cl::cat(category)),
      heads("heads", cl::desc("Attention heads"), cl::value_desc("N"),
            cl::cat(category)),
      kvHeads("kv-heads", cl::desc("Key/value heads (llama family)"),
              cl::value_desc("N"), cl::cat(category)),
      intermediate("intermediate",
                   cl::desc("MLP width (n_inner / intermediate_size)"),
                   cl::value_desc("N"), cl::cat(category)),
      vocab("vocab", cl::desc("Vocabulary size"), cl::value_desc("N"),
            cl::cat(category)) {}

bool readOverride(const cl::opt<int64_t> &opt, std::optional<int64_t> &dst,
                  std::string &error, bool always) {
  if (!always && !opt.getNumOccurrences())
    return true;
  if (opt < 1 || opt > kMaxOverride) {
    error = "--" + opt.ArgStr.str() + " must be in [1, 2^31 - 1], got " +
            std::to_string(opt);
    return false;
  }
  dst = opt;
  return true;
}

bool ArchitectureOptions::read(Overrides &ov, std::string &error) const {
  return readOverride(layers, ov.layers, error) &&
         readOverride(hidden, ov.hidden, error) &&
         readOverride(heads, ov.heads, error) &&
         readOverride(kvHeads, ov.kvHeads, error) &&
         readOverride(intermediate, ov.intermediate, error) &&
         readOverride(vocab, ov.vocab, error);
}

} // namespace fsdp_import
