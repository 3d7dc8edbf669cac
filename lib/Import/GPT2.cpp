//===- GPT2.cpp - GPT-2 (GPT2LMHeadModel) forward graph -------------------===//
//
// Parameters as in Hugging Face's GPT2LMHeadModel state_dict: Conv1D
// weights are stored [in, out] and used through nn.linear transpose_weight;
// the output projection reuses transformer.wte unless tie_word_embeddings is
// false. Initialisation follows GPT2PreTrainedModel._init_weights: N(0, 0.02)
// (wpe N(0, 0.01)), the residual projections c_proj N(0, 0.02/√(2·n_layer)),
// LayerNorm ones/zeros, biases zeros.
//
//===----------------------------------------------------------------------===//
#include "Architectures.h"
#include "ModelBuilder.h"

#include <cmath>

using namespace mlir;

namespace fsdp_import {

bool resolveBatchSeq(ConfigReader &cfg, const Overrides &ov,
                     int64_t maxPositions, const std::string &maxKey,
                     int64_t &batch, int64_t &seq) {
  batch = ov.batch.value_or(1);
  seq = ov.seq.value_or(std::min<int64_t>(1024, maxPositions));
  if (seq > maxPositions) {
    cfg.fail("--seq " + std::to_string(seq) + " exceeds '" + maxKey + "' (" +
             std::to_string(maxPositions) + ")");
    return false;
  }
  return true;
}

OwningOpRef<ModuleOp> buildGPT2(MLIRContext *ctx, ConfigReader &cfg,
                                const Overrides &ov) {
  auto vocab = cfg.requireInt("vocab_size", ov.vocab);
  auto positions = cfg.requireInt("n_positions");
  auto embd = cfg.requireInt("n_embd", ov.hidden);
  auto layers = cfg.requireInt("n_layer", ov.layers);
  auto heads = cfg.requireInt("n_head", ov.heads);
  auto eps = cfg.optionalNumber("layer_norm_epsilon", 1e-5, /*positive=*/true);
  auto act = cfg.optionalString("activation_function", "gelu_new");
  auto tied = cfg.optionalBool("tie_word_embeddings", true);
  if (cfg.failed())
    return nullptr;
  auto inner = cfg.optionalInt("n_inner", 4 * *embd, ov.intermediate);
  if (cfg.failed())
    return nullptr;

  nn::GeluApproximation approximate;
  if (*act == "gelu_new")
    approximate = nn::GeluApproximation::Tanh;
  else if (*act == "gelu")
    approximate = nn::GeluApproximation::None;
  else {
    cfg.fail("key 'activation_function': unsupported value \"" + *act +
             "\" (supported: \"gelu_new\", \"gelu\")");
    return nullptr;
  }
  if (ov.kvHeads && *ov.kvHeads != *heads) {
    cfg.fail(
        "--kv-heads " + std::to_string(*ov.kvHeads) +
        ": gpt2 has no grouped-query attention (key/value heads = 'n_head' = " +
        std::to_string(*heads) + ")");
    return nullptr;
  }
  if (*embd % *heads) {
    cfg.fail("'n_embd' (" + std::to_string(*embd) +
             ") is not divisible by 'n_head' (" + std::to_string(*heads) + ")");
    return nullptr;
  }
  int64_t batch, seq;
  if (!resolveBatchSeq(cfg, ov, *positions, "n_positions", batch, seq))
    return nullptr;

  const int64_t C = *embd, I = *inner, V = *vocab, L = *layers, H = *heads;
  const std::string wInit = normalInit(0.02);
  const std::string projInit = normalInit(0.02 / std::sqrt(2.0 * double(L)));

  ModelBuilder mb(ctx, cfg.getPath(), batch, seq, ov.f64);
  mb.addParam("transformer.wte.weight", {V, C}, wInit);
  mb.addParam("transformer.wpe.weight", {*positions, C}, normalInit(0.01));
  for (int64_t i = 0; i < L; ++i) {
    std::string p = "transformer.h." + std::to_string(i) + ".";
    mb.addParam(p + "ln_1.weight", {C}, "ones");
    mb.addParam(p + "ln_1.bias", {C}, "zeros");
    mb.addParam(p + "attn.c_attn.weight", {C, 3 * C}, wInit);
    mb.addParam(p + "attn.c_attn.bias", {3 * C}, "zeros");
    mb.addParam(p + "attn.c_proj.weight", {C, C}, projInit);
    mb.addParam(p + "attn.c_proj.bias", {C}, "zeros");
    mb.addParam(p + "ln_2.weight", {C}, "ones");
    mb.addParam(p + "ln_2.bias", {C}, "zeros");
    mb.addParam(p + "mlp.c_fc.weight", {C, I}, wInit);
    mb.addParam(p + "mlp.c_fc.bias", {I}, "zeros");
    mb.addParam(p + "mlp.c_proj.weight", {I, C}, projInit);
    mb.addParam(p + "mlp.c_proj.bias", {C}, "zeros");
  }
  mb.addParam("transformer.ln_f.weight", {C}, "ones");
  mb.addParam("transformer.ln_f.bias", {C}, "zeros");
  if (!*tied)
    mb.addParam("lm_head.weight", {V, C}, wInit);

  mb.begin();
  Value x = mb.embedding("transformer.wte", mb.tokens(),
                         mb.param("transformer.wte.weight"));
  x = mb.positionEmbedding("transformer.wpe", x,
                           mb.param("transformer.wpe.weight"));
  for (int64_t i = 0; i < L; ++i) {
    std::string m = "transformer.h." + std::to_string(i);
    auto P = [&](StringRef name) { return mb.param(m + "." + name.str()); };
    std::string attn = m + ".attn", mlp = m + ".mlp";
    Value h =
        mb.layerNorm(m + ".ln_1", x, P("ln_1.weight"), P("ln_1.bias"), *eps);
    Value qkv = mb.linear(attn + ".c_attn", h, P("attn.c_attn.weight"),
                          P("attn.c_attn.bias"),
                          /*transposeWeight=*/true);
    auto parts = mb.split(attn, qkv, 2, {C, C, C});
    Value a = mb.attention(attn, parts[0], parts[1], parts[2], H, H);
    a = mb.linear(attn + ".c_proj", a, P("attn.c_proj.weight"),
                  P("attn.c_proj.bias"), true);
    x = mb.add(m, x, a);
    h = mb.layerNorm(m + ".ln_2", x, P("ln_2.weight"), P("ln_2.bias"), *eps);
    h = mb.linear(mlp + ".c_fc", h, P("mlp.c_fc.weight"), P("mlp.c_fc.bias"),
                  true);
    h = mb.gelu(mlp + ".act", h, approximate);
    h = mb.linear(mlp + ".c_proj", h, P("mlp.c_proj.weight"),
                  P("mlp.c_proj.bias"), true);
    x = mb.add(m, x, h);
  }
  x = mb.layerNorm("transformer.ln_f", x, mb.param("transformer.ln_f.weight"),
                   mb.param("transformer.ln_f.bias"), *eps);
  if (*tied)
    mb.tie("transformer.wte.weight", "lm_head.weight");
  Value head = mb.param(*tied ? "transformer.wte.weight" : "lm_head.weight");
  Value logits = mb.linear("lm_head", x, head);
  return mb.finish(mb.crossEntropy("loss", logits, mb.targets(), ov.lossF32));
}

} // namespace fsdp_import
