//===- PipelineLayerTest.cpp - pipelineLayerOf is the regex it replaced ---===//
//
// fsdp-pipeline-split assigns a parameter to the layer named in its FQN:
// the first ".h.<i>." or ".layers.<i>." (GPT-2's transformer.h.3.attn...,
// Llama's model.layers.3.mlp...). lib/Transforms/PipelineSplit.cpp scans
// for it by hand; its answer must be the regex's it replaced, the first
// match of "\.(h|layers)\.([0-9]+)\.", on real FQNs, on near misses and on
// random strings over the characters that matter.
//
//===----------------------------------------------------------------------===//
#include "PipelineSplit.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Regex.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace {
int64_t byRegex(llvm::StringRef fqn) {
  static const llvm::Regex re("\\.(h|layers)\\.([0-9]+)\\.");
  llvm::SmallVector<llvm::StringRef> m;
  if (!re.match(fqn, &m))
    return -1;
  int64_t l = -1;
  return m[2].getAsInteger(10, l) ? -1 : l;
}

TEST(PipelineLayerTest, NamedCases) {
  const char *cases[] = {"model.layers.10.mlp.up_proj.weight",
                         "transformer.h.0.attn.c_attn.weight",
                         "model.embed_tokens.weight",
                         "lm_head.weight",
                         "model.layersX.1.w",
                         "h.3.w",
                         ".h.3.w",
                         "model.layers.3",
                         "model.layers..3.w",
                         "model.layers.3x.w",
                         "encoder.layers.2.layers.5.w",
                         "a.h.h.3.x",
                         "a.hh.3.x",
                         "a.layers.007.x",
                         "a.layers.99999999999999999999999.x",
                         "a.layers.99999999999999999999999.h.2.x",
                         "",
                         "."};
  for (const char *fqn : cases)
    EXPECT_EQ(mlir::fsdp::pipelineLayerOf(fqn), byRegex(fqn)) << fqn;
  EXPECT_EQ(mlir::fsdp::pipelineLayerOf("model.layers.10.mlp.w"), 10);
  EXPECT_EQ(mlir::fsdp::pipelineLayerOf("encoder.layers.2.layers.5.w"), 2);
}

TEST(PipelineLayerTest, RandomStringsAgreeWithTheRegex) {
  const std::string alphabet = "..hlayers019x";
  std::mt19937 rng(24);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> length(0, 24);
  const std::string pieces[] = {".h.", ".layers.", "1", "23", "."};
  std::uniform_int_distribution<size_t> piece(0, 4);
  int layered = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string s;
    for (int n = length(rng); n > 0; --n)
      s += (n % 3 == 0) ? pieces[piece(rng)]
                        : std::string(1, alphabet[pick(rng)]);
    int64_t expected = byRegex(s);
    layered += expected >= 0;
    ASSERT_EQ(mlir::fsdp::pipelineLayerOf(s), expected) << s;
  }
  EXPECT_GT(layered, 1000); // the strings do reach the matching branch
}
} // namespace
