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

#include <cmath>

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
  RopeScaling rope;
};
} // namespace

/// A number of the RoPE parameters `p` (named `where` in messages): > 0,
/// or >= 1 where `atLeastOne`; `dflt` when absent or null (nullopt: needed).
static std::optional<double>
ropeNumber(ConfigReader &cfg, const nlohmann::json &p, const std::string &where,
           const char *key, std::optional<double> dflt) {
  auto it = p.find(key);
  if (it == p.end() || it->is_null()) {
    if (!dflt)
      cfg.fail("key '" + where + "." + key + "' is needed by its rope_type");
    return dflt;
  }
  if (!it->is_number() || !(it->get<double>() > 0)) {
    cfg.fail("key '" + where + "." + key + "' must be a number > 0, got " +
             it->dump());
    return std::nullopt;
  }
  return it->get<double>();
}

/// The frequency transform of the RoPE parameters `p`, as transformers'
/// standardize_rope_params and ROPE_INIT_FUNCTIONS read them
/// (src/transformers/modeling_rope_utils.py): rope_type (or the older
/// "type"), and per type: linear factor; llama3 factor, low_freq_factor,
/// high_freq_factor, original_max_position_embeddings; yarn factor (else
/// max_position_embeddings / original), beta_fast (`or 32`), beta_slow (`or
/// 1`), truncate (true), attention_factor (else from mscale and
/// mscale_all_dim: get_mscale). original_max_position_embeddings defaults
/// to max_position_embeddings. Any other type (dynamic, longrope, ...) is an
/// error: their frequencies depend on the sequence, not the config alone.
static bool readRopeScaling(ConfigReader &cfg, const nlohmann::json &p,
                            const std::string &where, int64_t positions,
                            RopeScaling &out) {
  auto t = p.find("rope_type");
  if (t == p.end() || t->is_null())
    t = p.find("type");
  std::string type = t == p.end() || t->is_null()
                         ? "default"
                         : (t->is_string() ? t->get<std::string>() : t->dump());
  out.type = type;
  if (type == "default")
    return true;
  if (type != "linear" && type != "llama3" && type != "yarn") {
    cfg.fail("key '" + where + ".rope_type': unsupported value \"" + type +
             "\" (supported: \"default\", \"linear\", \"llama3\", "
             "\"yarn\")");
    return false;
  }
  if (type == "linear") {
    auto factor = ropeNumber(cfg, p, where, "factor", std::nullopt);
    if (!factor)
      return false;
    out.factor = *factor;
    return true;
  }
  auto orig = ropeNumber(cfg, p, where, "original_max_position_embeddings",
                         static_cast<double>(positions));
  if (!orig)
    return false;
  out.originalMaxPositions = static_cast<int64_t>(*orig);
  if (type == "yarn") {
    // transformers: factor None -> max_position_embeddings / original.
    auto factor = ropeNumber(cfg, p, where, "factor",
                             static_cast<double>(positions) / *orig);
    auto fast = ropeNumber(cfg, p, where, "beta_fast", 32.0);
    auto slow = ropeNumber(cfg, p, where, "beta_slow", 1.0);
    auto mscale = ropeNumber(cfg, p, where, "mscale", 0.0);
    auto mscaleAll = ropeNumber(cfg, p, where, "mscale_all_dim", 0.0);
    auto tr = p.find("truncate");
    if (cfg.failed())
      return false;
    if (tr != p.end() && !tr->is_null() && !tr->is_boolean()) {
      cfg.fail("key '" + where + ".truncate' must be a boolean, got " +
               tr->dump());
      return false;
    }
    out.factor = *factor;
    out.betaFast = *fast;
    out.betaSlow = *slow;
    out.truncate = tr == p.end() || tr->is_null() || tr->get<bool>();
    // get_mscale(scale, m) = 0.1·m·ln(scale) + 1 (1 for scale <= 1).
    auto getMscale = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    double dflt =
        *mscale > 0 && *mscaleAll > 0
            ? getMscale(*factor, *mscale) / getMscale(*factor, *mscaleAll)
            : getMscale(*factor, 1.0);
    auto attn = ropeNumber(cfg, p, where, "attention_factor", dflt);
    if (!attn)
      return false;
    out.attentionFactor = *attn;
    return true;
  }
  auto factor = ropeNumber(cfg, p, where, "factor", std::nullopt);
  if (!factor)
    return false;
  out.factor = *factor;
  auto low = ropeNumber(cfg, p, where, "low_freq_factor", std::nullopt);
  auto high = ropeNumber(cfg, p, where, "high_freq_factor", std::nullopt);
  if (!low || !high)
    return false;
  if (!(*high > *low)) {
    cfg.fail("key '" + where + ".high_freq_factor' (" + std::to_string(*high) +
             ") must exceed 'low_freq_factor' (" + std::to_string(*low) + ")");
    return false;
  }
  out.lowFreqFactor = *low;
  out.highFreqFactor = *high;
  return true;
}

/// rope_theta and the rope's frequency transform: transformers >= 5's
/// {"rope_parameters": {"rope_type", "rope_theta", ...}}, or a top-level
/// rope_theta with the older "rope_scaling" object (null: plain RoPE).
static bool readRope(ConfigReader &cfg, std::optional<double> &theta,
                     int64_t positions, RopeScaling &scaling) {
  const nlohmann::json *rp = cfg.find("rope_parameters");
  if (!rp) {
    const nlohmann::json *rs = cfg.find("rope_scaling");
    if (rs && !rs->is_object()) {
      cfg.fail("key 'rope_scaling' must be an object or null, got " +
               rs->dump());
      return false;
    }
    return !rs || readRopeScaling(cfg, *rs, "rope_scaling", positions, scaling);
  }
  auto t = rp->is_object() ? rp->find("rope_theta") : rp->end();
  if (!rp->is_object() || t == rp->end() || !t->is_number() ||
      t->get<double>() <= 0) {
    cfg.fail("key 'rope_parameters' must be an object with a positive "
             "'rope_theta', got " +
             rp->dump());
    return false;
  }
  theta = t->get<double>();
  return readRopeScaling(cfg, *rp, "rope_parameters", positions, scaling);
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
  RopeScaling rope;
  if (!positions || !readRope(cfg, theta, *positions, rope))
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
                    normalInit(*initRange),
                    rope};
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
  q = mb.rope(attn, q, s.D, s.theta, s.rope);
  k = mb.rope(attn, k, s.D, s.theta, s.rope);
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
  return mb.finish(mb.crossEntropy("loss", logits, mb.targets(), ov.lossF32));
}

} // namespace fsdp_import
