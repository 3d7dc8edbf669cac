//===- Llama.cpp - Llama / Mistral / Qwen2 forward graph ------------------===//
//
// LlamaForCausalLM and the relatives that share its layout: pre-norm
// decoder layers with RMSNorm, rotary embeddings (rotate-half), grouped-query
// attention and a SwiGLU MLP. Parameters as in the Hugging Face state_dict
// (module registration order: self_attn.{q,k,v,o}_proj,
// mlp.{gate,up,down}_proj, input_layernorm, post_attention_layernorm); weights
// N(0, initializer_range), norms ones, biases zeros.
//
// Differences handled here: qwen2 always has q/k/v biases and no o_proj bias;
// mistral's sliding_window (qwen2's with use_sliding_window) only bounds
// --seq (the window is not applied, so the graph is exact only for
// --seq <= sliding_window, which is enforced).
//
//===----------------------------------------------------------------------===//
#include "Architectures.h"
#include "ModelBuilder.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace fsdp_import {

namespace {
/// The shape of the model, as read and checked from its config.
struct LlamaShape {
  int64_t C, I, V, L, Hq, Hkv, D; // hidden, intermediate, vocab, layers,
                                  // query and key/value heads, head_dim
  int64_t batch, seq;
  double eps, theta;
  bool tied, qkvBias, oBias, mlpBias;
  std::string wInit;
};
} // namespace

/// rope_theta, or transformers >= 5's {"rope_parameters": {"rope_type",
/// "rope_theta"}} instead of a top-level rope_theta / rope_scaling; sets
/// `scaledRope` when the rope is not plain.
static bool readRope(ConfigReader &cfg, std::optional<double> &theta,
                     bool &scaledRope) {
  scaledRope = cfg.has("rope_scaling");
  const nlohmann::json *rp = cfg.find("rope_parameters");
  if (!rp)
    return true;
  auto t = rp->is_object() ? rp->find("rope_theta") : rp->end();
  if (!rp->is_object() || t == rp->end() || !t->is_number() ||
      t->get<double>() <= 0) {
    cfg.fail("key 'rope_parameters' must be an object with a positive "
             "'rope_theta', got " +
             rp->dump());
    return false;
  }
  theta = t->get<double>();
  auto type = rp->find("rope_type");
  scaledRope = type != rp->end() && *type != "default";
  return true;
}

/// head_dim: the config's, unless absent or --hidden/--heads changed the
/// shape; even (rotary embeddings rotate pairs).
static std::optional<int64_t> resolveHeadDim(ConfigReader &cfg,
                                             const Overrides &ov,
                                             int64_t hidden, int64_t heads) {
  int64_t headDim;
  if (cfg.has("head_dim") && !ov.hidden && !ov.heads) {
    auto d = cfg.requireInt("head_dim");
    if (!d)
      return std::nullopt;
    headDim = *d;
  } else {
    if (hidden % heads) {
      cfg.fail("'hidden_size' (" + std::to_string(hidden) +
               ") is not divisible by 'num_attention_heads' (" +
               std::to_string(heads) + "), so 'head_dim' cannot be derived");
      return std::nullopt;
    }
    headDim = hidden / heads;
  }
  if (headDim % 2) {
    cfg.fail("head_dim " + std::to_string(headDim) +
             " is odd; rotary embeddings need an even "
             "'head_dim'");
    return std::nullopt;
  }
  return headDim;
}

/// qwen2 applies its window only with use_sliding_window (and then to the
/// layers max_window_layers and above; refused here whatever the layer).
static bool checkSlidingWindow(ConfigReader &cfg, StringRef modelType,
                               int64_t seq) {
  bool windowed = modelType == "mistral" ||
                  (modelType == "qwen2" && cfg.find("use_sliding_window") &&
                   *cfg.find("use_sliding_window") == true);
  if (!windowed || !cfg.has("sliding_window"))
    return true;
  auto window = cfg.requireInt("sliding_window");
  if (!window)
    return false;
  if (seq > *window) {
    cfg.fail("--seq " + std::to_string(seq) + " exceeds 'sliding_window' (" +
             std::to_string(*window) +
             "); sliding-window attention is not modelled");
    return false;
  }
  return true;
}

/// Reads and checks the config's keys (overrides first).
static std::optional<LlamaShape>
readLlama(ConfigReader &cfg, const Overrides &ov, StringRef modelType) {
  const bool qwen2 = modelType == "qwen2";
  auto vocab = cfg.requireInt("vocab_size", ov.vocab);
  auto hidden = cfg.requireInt("hidden_size", ov.hidden);
  auto inter = cfg.requireInt("intermediate_size", ov.intermediate);
  auto layers = cfg.requireInt("num_hidden_layers", ov.layers);
  auto heads = cfg.requireInt("num_attention_heads", ov.heads);
  auto positions = cfg.requireInt("max_position_embeddings");
  auto act = cfg.optionalString("hidden_act", "silu");
  auto eps = cfg.optionalNumber("rms_norm_eps", 1e-6, /*positive=*/true);
  auto theta = cfg.optionalNumber("rope_theta", 10000.0, /*positive=*/true);
  bool scaledRope;
  if (!readRope(cfg, theta, scaledRope))
    return std::nullopt;
  auto tied = cfg.optionalBool("tie_word_embeddings", false);
  auto attnBias = cfg.optionalBool("attention_bias", false);
  auto mlpBias = cfg.optionalBool("mlp_bias", false);
  auto initRange =
      cfg.optionalNumber("initializer_range", 0.02, /*positive=*/false);
  if (cfg.failed())
    return std::nullopt;
  auto kvHeads = cfg.optionalInt("num_key_value_heads", *heads, ov.kvHeads);
  if (cfg.failed())
    return std::nullopt;

  if (*act != "silu") {
    cfg.fail("key 'hidden_act': unsupported value \"" + *act +
             "\" (supported: \"silu\")");
    return std::nullopt;
  }
  if (*initRange < 0) {
    cfg.fail("key 'initializer_range' must be >= 0");
    return std::nullopt;
  }
  std::optional<int64_t> headDim = resolveHeadDim(cfg, ov, *hidden, *heads);
  if (!headDim)
    return std::nullopt;
  if (*heads % *kvHeads) {
    cfg.fail("'num_attention_heads' (" + std::to_string(*heads) +
             ") is not divisible by 'num_key_value_heads' (" +
             std::to_string(*kvHeads) + ")");
    return std::nullopt;
  }
  int64_t batch, seq;
  if (!resolveBatchSeq(cfg, ov, *positions, "max_position_embeddings", batch,
                       seq) ||
      !checkSlidingWindow(cfg, modelType, seq))
    return std::nullopt;
  if (scaledRope)
    llvm::errs() << "fsdp-import: warning: " << cfg.getPath()
                 << ": 'rope_scaling' / a 'rope_type' other than \"default\" "
                    "is ignored (plain "
                    "RoPE with 'rope_theta')\n";
  return LlamaShape{*hidden,
                    *inter,
                    *vocab,
                    *layers,
                    *heads,
                    *kvHeads,
                    *headDim,
                    batch,
                    seq,
                    *eps,
                    *theta,
                    *tied,
                    qwen2 || *attnBias,
                    !qwen2 && *attnBias,
                    *mlpBias,
                    normalInit(*initRange)};
}

/// The parameters, in the Hugging Face state_dict's order.
static void declareParams(ModelBuilder &mb, const LlamaShape &s) {
  mb.addParam("model.embed_tokens.weight", {s.V, s.C}, s.wInit);
  for (int64_t i = 0; i < s.L; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    auto proj = [&](const std::string &name, int64_t out, int64_t in,
                    bool bias) {
      mb.addParam(p + name + ".weight", {out, in}, s.wInit);
      if (bias)
        mb.addParam(p + name + ".bias", {out}, "zeros");
    };
    proj("self_attn.q_proj", s.Hq * s.D, s.C, s.qkvBias);
    proj("self_attn.k_proj", s.Hkv * s.D, s.C, s.qkvBias);
    proj("self_attn.v_proj", s.Hkv * s.D, s.C, s.qkvBias);
    proj("self_attn.o_proj", s.C, s.Hq * s.D, s.oBias);
    proj("mlp.gate_proj", s.I, s.C, s.mlpBias);
    proj("mlp.up_proj", s.I, s.C, s.mlpBias);
    proj("mlp.down_proj", s.C, s.I, s.mlpBias);
    mb.addParam(p + "input_layernorm.weight", {s.C}, "ones");
    mb.addParam(p + "post_attention_layernorm.weight", {s.C}, "ones");
  }
  mb.addParam("model.norm.weight", {s.C}, "ones");
  if (!s.tied)
    mb.addParam("lm_head.weight", {s.V, s.C}, s.wInit);
}

/// Decoder layer `i` (pre-norm attention and SwiGLU MLP, each with its
/// residual) on the hidden state `x`.
static Value decoderLayer(ModelBuilder &mb, const LlamaShape &s, int64_t i,
                          Value x) {
  std::string m = "model.layers." + std::to_string(i);
  std::string attn = m + ".self_attn", mlp = m + ".mlp";
  auto lin = [&](const std::string &mod, Value in, bool bias) {
    Value b = bias ? mb.param(mod + ".bias") : Value();
    return mb.linear(mod, in, mb.param(mod + ".weight"), b);
  };
  Value h = mb.rmsNorm(m + ".input_layernorm", x,
                       mb.param(m + ".input_layernorm.weight"), s.eps);
  Value q = lin(attn + ".q_proj", h, s.qkvBias);
  Value k = lin(attn + ".k_proj", h, s.qkvBias);
  Value v = lin(attn + ".v_proj", h, s.qkvBias);
  q = mb.rope(attn, q, s.D, s.theta);
  k = mb.rope(attn, k, s.D, s.theta);
  Value a = mb.attention(attn, q, k, v, s.Hq, s.Hkv);
  a = lin(attn + ".o_proj", a, s.oBias);
  x = mb.add(m, x, a);
  h = mb.rmsNorm(m + ".post_attention_layernorm", x,
                 mb.param(m + ".post_attention_layernorm.weight"), s.eps);
  Value gate = mb.silu(mlp + ".act_fn", lin(mlp + ".gate_proj", h, s.mlpBias));
  Value up = lin(mlp + ".up_proj", h, s.mlpBias);
  Value down = lin(mlp + ".down_proj", mb.mul(mlp, gate, up), s.mlpBias);
  return mb.add(m, x, down);
}

OwningOpRef<ModuleOp> buildLlama(MLIRContext *ctx, ConfigReader &cfg,
                                 const Overrides &ov, StringRef modelType) {
  std::optional<LlamaShape> s = readLlama(cfg, ov, modelType);
  if (!s)
    return nullptr;
  ModelBuilder mb(ctx, cfg.getPath(), s->batch, s->seq, ov.f64);
  declareParams(mb, *s);
  mb.begin();
  Value x = mb.embedding("model.embed_tokens", mb.tokens(),
                         mb.param("model.embed_tokens.weight"));
  for (int64_t i = 0; i < s->L; ++i)
    x = decoderLayer(mb, *s, i, x);
  x = mb.rmsNorm("model.norm", x, mb.param("model.norm.weight"), s->eps);
  if (s->tied)
    mb.tie("model.embed_tokens.weight", "lm_head.weight");
  Value head =
      mb.param(s->tied ? "model.embed_tokens.weight" : "lm_head.weight");
  Value logits = mb.linear("lm_head", x, head);
  return mb.finish(mb.crossEntropy("loss", logits, mb.targets()));
}

} // namespace fsdp_import
