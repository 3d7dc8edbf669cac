//===- ScheduleFormat.h - the compiler <-> runtime schedule contract -*- C++
//-*-===//
//
// The one definition of what `fsdp-translate --fsdp-to-schedule` writes and
// the runtime reads (runtime/docs/schedule-format.md): the format name and
// version, every op with its kind, and the defaults of optional attributes.
// The compiler's translation rejects an op missing from kOps (the runtime
// would have no kernel for it); the runtime applies the defaults below to
// attributes a schedule leaves out, and they are the ODS defaults of the
// collectives' enum attributes and nn.gelu (test/unit/DialectTest.cpp checks
// that they agree).
// Header-only, no dependencies: the runtime does not depend on MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULEFORMAT_H
#define FSDP_SCHEDULEFORMAT_H

#include <cstring>

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
  Split,
  Concat,
  ZerosLike,
  Cast,       // "Mixed precision"
  MicroBatch, // gradient accumulation: rows [index·m, (index+1)·m) of the batch
  // "Learning-rate schedules and gradient clipping".
  LrSchedule,
  SumSquares,
  GradNorm,
  Scale
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
    {"nn.split", OpKind::Split},
    {"nn.concat", OpKind::Concat},
    {"nn.zeros_like", OpKind::ZerosLike},
    {"nn.cast", OpKind::Cast},
    {"nn.micro_batch", OpKind::MicroBatch},
    {"nn.lr_schedule", OpKind::LrSchedule},
    {"nn.sum_squares", OpKind::SumSquares},
    {"nn.grad_norm", OpKind::GradNorm},
    {"nn.scale", OpKind::Scale},
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

// Defaults of optional attributes (the ODS DefaultValuedAttr values).
/// "group" of fsdp.all_gather, fsdp.reduce_scatter and fsdp.local_shard.
inline constexpr const char *kDefaultGroup = "shard";
/// "group" of fsdp.all_reduce.
inline constexpr const char *kDefaultAllReduceGroup = "world";
/// "op" of fsdp.reduce_scatter and fsdp.all_reduce ("avg" or "sum").
inline constexpr const char *kDefaultReduction = "avg";
/// "approximate" of nn.gelu and nn.gelu_grad ("none" or "tanh").
inline constexpr const char *kDefaultGeluApproximation = "none";

// Defaults of the "optimizer" section, which in turn supplies the
// attributes an nn.sgd_update / nn.adamw_update instruction leaves out.
inline constexpr const char *kDefaultOptimizer = "adamw";
inline constexpr double kDefaultLr = 1e-3;
inline constexpr double kDefaultBeta1 = 0.9;
inline constexpr double kDefaultBeta2 = 0.999;
inline constexpr double kDefaultEps = 1e-8;
inline constexpr double kDefaultWeightDecay = 0.0;

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULEFORMAT_H
