//===- Format.h - the compiler <-> runtime schedule contract ----*- C++ -*-===//
//
// The one definition of what `fsdp-translate --fsdp-to-schedule` writes and
// the runtime reads (runtime/docs/schedule-format.md): the format name and
// version, every op with its kind, the dtypes, process groups, strategies,
// input/output roles, optimizer and learning-rate schedule kinds, and the
// defaults of optional attributes. The compiler's translation rejects an op
// missing from kOps; the schedule library (Program.h) applies the defaults
// to attributes a schedule leaves out, and they are the ODS defaults of the
// collectives' enum attributes, nn.gelu and the updates; the ODS enums of
// the dialects must spell the same names (test/unit/DialectTest.cpp checks
// both). Header-only; it includes only the runtime's C headers, for the
// C values of the enums.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_FORMAT_H
#define FSDP_SCHEDULE_FORMAT_H

#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <cstdint>
#include <cstring>
#include <string>

namespace fsdp::schedule {

/// The value of the top-level "format" field.
inline constexpr const char *kFormat = "fsdp-schedule";
/// The schedule version: 2 adds input/output aliasing of the carried
/// training state (outputs[].aliases) and per-instruction kernel scratch
/// (memory_plan.scratch_bytes) to version 1.
inline constexpr int kVersion = 2;

/// Every instruction of the format ("op" names in kOps).
enum class OpKind {
  Constant,
  Linear,
  Matmul,
  Add,
  Mul,
  Relu,
  ReluGrad,
  Gelu,
  GeluGrad,
  ReduceSum,
  Broadcast,
  CrossEntropy,
  CrossEntropyGrad,
  SgdUpdate,
  AdamwUpdate,
  AllGather,
  ReduceScatter,
  Free,
  ParamView,
  Wait,
  Flatten,
  AllReduce,
  LocalShard, // "Sharding strategies"
  Pack,
  Unpack, // buckets: copy units' flat buffers into / out of one
  // "Transformer ops".
  Embedding,
  EmbeddingGrad,
  PositionEmbedding,
  PositionEmbeddingGrad,
  LayerNorm,
  LayerNormGrad,
  RmsNorm,
  RmsNormGrad,
  Rope,
  Attention,
  AttentionGrad,
  Silu,
  SiluGrad,
  Dropout,
  Split,
  Concat,
  ZerosLike,
  Cast,       // "Mixed precision"
  MicroBatch, // gradient accumulation: rows [index·m, (index+1)·m) of the batch
  // "Learning-rate schedules and gradient clipping".
  LrSchedule,
  SumSquares,
  GradNorm,
  Scale,
  // "Tensor parallelism": Megatron's f and g.
  TpCopy,
  TpAllReduce,
  // "Sequence parallelism": Megatron's g-bar and its conjugates.
  SpAllGather,
  SpReduceScatter,
  SpSplit,
  // Megatron's vocab-parallel cross-entropy.
  VocabParallelCeStats,
  VocabParallelCrossEntropy,
  VocabParallelCrossEntropyGrad,
  // "Pipeline parallelism": point-to-point transfers between stages.
  Send,
  Recv
};

struct OpInfo {
  const char *name;
  OpKind kind;
};

/// The op names of the format, as the IR spells them.
inline constexpr OpInfo kOps[] = {
    {"arith.constant", OpKind::Constant},
    {"nn.linear", OpKind::Linear},
    {"nn.matmul", OpKind::Matmul},
    {"nn.add", OpKind::Add},
    {"nn.mul", OpKind::Mul},
    {"nn.relu", OpKind::Relu},
    {"nn.relu_grad", OpKind::ReluGrad},
    {"nn.gelu", OpKind::Gelu},
    {"nn.gelu_grad", OpKind::GeluGrad},
    {"nn.reduce_sum", OpKind::ReduceSum},
    {"nn.broadcast", OpKind::Broadcast},
    {"nn.cross_entropy", OpKind::CrossEntropy},
    {"nn.cross_entropy_grad", OpKind::CrossEntropyGrad},
    {"nn.sgd_update", OpKind::SgdUpdate},
    {"nn.adamw_update", OpKind::AdamwUpdate},
    {"fsdp.all_gather", OpKind::AllGather},
    {"fsdp.reduce_scatter", OpKind::ReduceScatter},
    {"fsdp.free", OpKind::Free},
    {"fsdp.param_view", OpKind::ParamView},
    {"fsdp.wait", OpKind::Wait},
    {"fsdp.pack", OpKind::Pack},
    {"fsdp.unpack", OpKind::Unpack},
    {"fsdp.flatten", OpKind::Flatten},
    {"fsdp.all_reduce", OpKind::AllReduce},
    {"fsdp.local_shard", OpKind::LocalShard},
    {"nn.embedding", OpKind::Embedding},
    {"nn.embedding_grad", OpKind::EmbeddingGrad},
    {"nn.position_embedding", OpKind::PositionEmbedding},
    {"nn.position_embedding_grad", OpKind::PositionEmbeddingGrad},
    {"nn.layer_norm", OpKind::LayerNorm},
    {"nn.layer_norm_grad", OpKind::LayerNormGrad},
    {"nn.rms_norm", OpKind::RmsNorm},
    {"nn.rms_norm_grad", OpKind::RmsNormGrad},
    {"nn.rope", OpKind::Rope},
    {"nn.attention", OpKind::Attention},
    {"nn.attention_grad", OpKind::AttentionGrad},
    {"nn.silu", OpKind::Silu},
    {"nn.silu_grad", OpKind::SiluGrad},
    {"nn.dropout", OpKind::Dropout},
    {"nn.split", OpKind::Split},
    {"nn.concat", OpKind::Concat},
    {"nn.zeros_like", OpKind::ZerosLike},
    {"nn.cast", OpKind::Cast},
    {"nn.micro_batch", OpKind::MicroBatch},
    {"nn.lr_schedule", OpKind::LrSchedule},
    {"nn.sum_squares", OpKind::SumSquares},
    {"nn.grad_norm", OpKind::GradNorm},
    {"nn.scale", OpKind::Scale},
    {"nn.tp_copy", OpKind::TpCopy},
    {"nn.tp_all_reduce", OpKind::TpAllReduce},
    {"nn.sp_all_gather", OpKind::SpAllGather},
    {"nn.sp_reduce_scatter", OpKind::SpReduceScatter},
    {"nn.sp_split", OpKind::SpSplit},
    {"nn.vocab_parallel_ce_stats", OpKind::VocabParallelCeStats},
    {"nn.vocab_parallel_cross_entropy", OpKind::VocabParallelCrossEntropy},
    {"nn.vocab_parallel_cross_entropy_grad",
     OpKind::VocabParallelCrossEntropyGrad},
    {"fsdp.send", OpKind::Send},
    {"fsdp.recv", OpKind::Recv},
};

/// The kind of op `name`; false if the format has no such op.
inline bool lookupOp(const char *name, OpKind &kind) {
  for (const OpInfo &o : kOps)
    if (std::strcmp(o.name, name) == 0) {
      kind = o.kind;
      return true;
    }
  return false;
}

/// The name of op kind `kind` (its kOps entry).
inline const char *opName(OpKind kind) {
  for (const OpInfo &o : kOps)
    if (o.kind == kind)
      return o.name;
  return "?";
}

//===--- Element types ----------------------------------------------------===//

/// Buffer element types: the runtime's fsdp_dtype as a C++ enum (the same
/// values, so that the C value is a cast). BF16 and F16 are 2-byte storage
/// dtypes ("Mixed precision"): nn ops on them compute in f32 (Half.h).
enum class DType {
  F32 = FSDP_F32,
  F64 = FSDP_F64,
  I32 = FSDP_I32,
  I64 = FSDP_I64,
  BF16 = FSDP_BF16,
  F16 = FSDP_F16
};

struct DTypeInfo {
  const char *name;
  DType dtype;
  int64_t bytes;
};
/// The dtypes as the format spells them, with their element sizes.
inline constexpr DTypeInfo kDTypes[] = {
    {"f32", DType::F32, 4}, {"f64", DType::F64, 8},   {"i32", DType::I32, 4},
    {"i64", DType::I64, 8}, {"bf16", DType::BF16, 2}, {"f16", DType::F16, 2},
};

/// "f32", "f64", "i32", "i64", "bf16", "f16".
inline const char *dtypeName(DType t) {
  for (const DTypeInfo &d : kDTypes)
    if (d.dtype == t)
      return d.name;
  return "?";
}
/// 2, 4 or 8 bytes.
inline int64_t dtypeSize(DType t) {
  for (const DTypeInfo &d : kDTypes)
    if (d.dtype == t)
      return d.bytes;
  return 0;
}
/// The dtype called `name`; false if the format has none.
inline bool lookupDType(const std::string &name, DType &out) {
  for (const DTypeInfo &d : kDTypes)
    if (name == d.name) {
      out = d.dtype;
      return true;
    }
  return false;
}
/// bf16 or f16 (2-byte floats).
inline bool isHalfDType(DType t) { return t == DType::BF16 || t == DType::F16; }
/// f32, f64, bf16 or f16.
inline bool isFloatDType(DType t) {
  return t == DType::F32 || t == DType::F64 || isHalfDType(t);
}
/// The dtype of nn.cross_entropy's loss and of nn.cross_entropy_grad's
/// dloss for logits of dtype `logits`: f32 for bf16/f16 (as torch.autocast
/// computes cross_entropy in f32), else `logits` (fsdp_cross_entropy).
inline DType lossDType(DType logits) {
  return isHalfDType(logits) ? DType::F32 : logits;
}
/// i32 or i64.
inline bool isIntDType(DType t) { return t == DType::I32 || t == DType::I64; }
/// The C API's value of `t`.
inline fsdp_dtype toC(DType t) { return static_cast<fsdp_dtype>(t); }

//===--- Process groups, strategies, roles --------------------------------===//

/// Process groups of the grid T x R x S ("Sharding strategies", "Tensor
/// parallelism"): world (N = T·R·S ranks), shard (the S ranks of one replica
/// with one tensor-parallel rank), replicate (the R ranks with the same shard
/// and tensor-parallel index), tensor (the T adjacent ranks kT..kT+T-1). The
/// names are FSDPEnums.td's Group cases.
/// Pipeline parallelism adds pipeline (the P ranks of the P stages with
/// this rank's index in its stage); a stage's program runs the other groups
/// over its stage's ranks ("Pipeline parallelism").
enum class Group { World, Shard, Replicate, Tensor, Pipeline };
inline constexpr int kNumGroups = 5;
inline constexpr const char *kGroupNames[] = {"world", "shard", "replicate",
                                              "tensor", "pipeline"};
/// "world", "shard", "replicate", "tensor", "pipeline".
inline const char *groupName(Group g) {
  return kGroupNames[static_cast<int>(g)];
}

/// The sharding strategies ("strategy"; FSDPEnums.td's Strategy cases, the
/// pipeline's `strategy` option). The first is the default.
inline constexpr const char *kStrategies[] = {"full-shard", "shard-grad-op",
                                              "shard-optimizer", "no-shard",
                                              "hybrid-shard"};

/// Roles of the training state: resident on the device across steps, one
/// per unit (FSDPEnums.td's StateRole cases).
inline constexpr const char *kStateRoles[] = {"param", "master", "exp_avg",
                                              "exp_avg_sq"};
/// Roles of inputs: the data, the step counters, the loss scale (one f64,
/// the dynamic loss scale fsdp-run keeps) and the state.
inline constexpr const char *kInputRoles[] = {
    "features", "labels",     "tokens", "targets", "step",      "total_steps",
    "param",    "loss_scale", "master", "exp_avg", "exp_avg_sq"};
/// Roles of outputs.
inline constexpr const char *kOutputRoles[] = {
    "loss", "param",  "master", "exp_avg", "exp_avg_sq",
    "grad", "logits", "output", "lr",      "grad_norm"};

/// Layouts of a unit's input or output ("layout"; FSDPEnums.td's Layout):
/// this rank's shard (the default) or the whole padded flat buffer.
inline constexpr const char *kLayouts[] = {"shard", "full"};

template <size_t N>
inline bool contains(const char *const (&names)[N], const std::string &s) {
  for (const char *n : names)
    if (s == n)
      return true;
  return false;
}
/// An input of the training state (role param, master, exp_avg or
/// exp_avg_sq): resident in device memory across steps.
inline bool isStateRole(const std::string &role) {
  return contains(kStateRoles, role);
}

/// The optimizers ("optimizer.kind", the pipeline's `optimizer` option).
inline constexpr const char *kOptimizers[] = {"adamw", "sgd"};

/// Learning-rate schedules (nn.lr_schedule's "kind", the pipeline's
/// `lr-schedule` option) and their fsdp_lr_schedule values (kernels.h).
struct LrScheduleInfo {
  const char *name;
  int value;
};
inline constexpr LrScheduleInfo kLrSchedules[] = {
    {"constant", FSDP_LR_CONSTANT},
    {"linear", FSDP_LR_LINEAR},
    {"cosine", FSDP_LR_COSINE}};

// Defaults of optional attributes (the ODS DefaultValuedAttr values).
/// "group" of fsdp.all_gather, fsdp.reduce_scatter and fsdp.local_shard.
inline constexpr const char *kDefaultGroup = "shard";
/// "group" of fsdp.all_reduce.
inline constexpr const char *kDefaultAllReduceGroup = "world";
/// "op" of fsdp.reduce_scatter and fsdp.all_reduce ("avg" or "sum").
inline constexpr const char *kDefaultReduction = "avg";
/// "approximate" of nn.gelu and nn.gelu_grad ("none" or "tanh").
inline constexpr const char *kDefaultGeluApproximation = "none";
/// "rope_type" of nn.rope: its choices, in the order of fsdp_rope's
/// FSDP_ROPE_* (transformers' rope_parameters "rope_type" values with a
/// static frequency transform), and the defaults of its parameters: no
/// scaling (factor and attention_factor 1), Llama 3.1's low/high frequency
/// factors and original context (1, 4, 8192; _compute_llama3_parameters)
/// and YaRN's beta_fast, beta_slow and truncate (32, 1, true;
/// _compute_yarn_parameters).
inline constexpr const char *kRopeTypes[] = {"default", "linear", "llama3",
                                             "yarn"};
inline constexpr const char *kDefaultRopeType = "default";
inline constexpr double kDefaultRopeFactor = 1.0;
inline constexpr double kDefaultRopeLowFreqFactor = 1.0;
inline constexpr double kDefaultRopeHighFreqFactor = 4.0;
inline constexpr int64_t kDefaultRopeOriginalMaxPositions = 8192;
inline constexpr double kDefaultRopeBetaFast = 32.0;
inline constexpr double kDefaultRopeBetaSlow = 1.0;
inline constexpr bool kDefaultRopeTruncate = true;
inline constexpr double kDefaultRopeAttentionFactor = 1.0;

// Defaults of the "optimizer" section, which in turn supplies the
// attributes an nn.sgd_update / nn.adamw_update instruction leaves out:
// torch.optim.AdamW's lr, betas and eps, and no weight decay (an update
// that does not say it decays does not). fsdp-optimizer's options default
// to the same values (Passes.td names these constants), except its
// weight-decay, kOptionWeightDecay.
inline constexpr const char *kDefaultOptimizer = "adamw";
inline constexpr double kDefaultLr = 1e-3;
inline constexpr double kDefaultBeta1 = 0.9;
inline constexpr double kDefaultBeta2 = 0.999;
inline constexpr double kDefaultEps = 1e-8;
inline constexpr double kDefaultWeightDecay = 0.0;
/// fsdp-optimizer's (and fsdp-pipeline's) `weight-decay` when not given:
/// torch.optim.AdamW's default 0.01. The compiler writes it on every update,
/// so it never reaches the format's default above.
inline constexpr double kOptionWeightDecay = 0.01;

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_FORMAT_H
