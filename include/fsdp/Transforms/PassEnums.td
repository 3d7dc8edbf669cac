//===- PassEnums.td - the closed sets of the passes' options --------------===//
//
// Each enum is the one list of the values of a pass option (Passes.td builds
// the option's cl::values from it, so a value is spelled once). The sharding
// strategy is the fsdp dialect's (FSDPEnums.td): the IR carries it too.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TRANSFORMS_PASSENUMS
#define FSDP_TRANSFORMS_PASSENUMS

include "mlir/IR/EnumAttr.td"

/// A value of a pass option, with its help text in --help.
class OptionValue<string sym, int val, string str, string help>
    : I32EnumCase<sym, val, str> {
  string description = help;
}

class OptionEnum<string name, string summary, list<OptionValue> values>
    : I32Enum<name, summary, values> {
  let cppNamespace = "::mlir::fsdp";
}

def FSDP_WrapPolicy : OptionEnum<"WrapPolicy", "fsdp-wrap policy", [
    OptionValue<"Module", 0, "module",
                "a unit per module: FQN prefixes, unit-depth or units">,
    OptionValue<"Block", 1, "block",
                "one unit per transformer block, named by the FQN up to its "
                "block index, plus a root unit for the rest (PyTorch's "
                "transformer_auto_wrap_policy)">,
    OptionValue<"Size", 2, "size",
                "units filled in first-use order to min-unit-numel elements "
                "(torch's size_based_auto_wrap_policy)">]>;

/// param-dtype and reduce-dtype; Default keeps the model's own dtype (or,
/// for reduce-dtype, param-dtype).
def FSDP_ComputeDtype : OptionEnum<"ComputeDtype", "floating-point dtype", [
    OptionValue<"Default", 0, "", "the default">,
    OptionValue<"F32", 1, "f32", "">,
    OptionValue<"BF16", 2, "bf16", "">,
    OptionValue<"F16", 3, "f16", "">]>;

def FSDP_Accumulate : OptionEnum<"Accumulate", "gradient accumulation", [
    OptionValue<"Sharded", 0, "sharded",
                "reduce-scatter every micro-batch, accumulate shards">,
    OptionValue<"Unsharded", 1, "unsharded",
                "accumulate full gradients, reduce once (FSDP's no_sync)">]>;

def FSDP_MasterWeights : OptionEnum<"MasterWeights", "master weights", [
    OptionValue<"CastOnGather", 0, "cast-on-gather",
                "FSDP2: the f32 shard is the only copy, cast as it is "
                "gathered">,
    OptionValue<"Separate", 1, "separate",
                "ZeRO: a persistent param-dtype copy beside the f32 master">]>;

def FSDP_ActivationCheckpoint : OptionEnum<"ActivationCheckpoint",
    "activation checkpointing", [
    OptionValue<"None", 0, "none", "keep every activation">,
    OptionValue<"Full", 1, "full",
                "keep a checkpointed unit's inputs, recompute its forward in "
                "backward">,
    OptionValue<"Selective", 2, "selective",
                "keep every matmul/linear and attention output, recompute the "
                "rest (torchtitan's save list without its every-second-mm "
                "rule)">,
    OptionValue<"SelectiveOp", 3, "selective-op",
                "torchtitan's op-level selective AC: keep attention outputs "
                "and every other mm's output, recompute the rest">]>;

def FSDP_AcRegions : OptionEnum<"AcRegions",
    "activation checkpointing regions", [
    OptionValue<"Unit", 0, "unit",
                "a checkpointed region is an FSDP unit (PyTorch FSDP and "
                "torchtitan wrap each block in both)">,
    OptionValue<"Block", 1, "block",
                "a checkpointed region is a transformer block, whatever the "
                "FSDP units (a per-block checkpoint_wrapper over PyTorch "
                "FSDP's size-based units; Megatron-LM's per-layer checkpoint "
                "under DeepSpeed ZeRO-3's per-module gathers)">]>;

/// The attention implementation the plan prices and plans memory for
/// (fsdp/Analysis/UnfusedAttention.h); fsdp-run runs one kernel either way.
def FSDP_AttentionImpl : OptionEnum<"AttentionImpl", "attention implementation", [
    OptionValue<"Flash", 0, "flash",
                "a FlashAttention-class kernel: efficiency.attention of peak, "
                "the scores never written">,
    OptionValue<"Unfused", 1, "unfused",
                "Megatron-LM's core attention: q.k^T and p.v as batched GEMMs, "
                "the fused scale-mask-softmax and attention dropout on the "
                "[b, a, s, s] scores, kept for the backward (5as^2b bytes per "
                "layer)">,
    OptionValue<"UnfusedNoDropout", 2, "unfused-no-dropout",
                "unfused without attention dropout (the softmax output kept, "
                "2as^2b bytes per layer)">]>;

def FSDP_OptimizerKind : OptionEnum<"OptimizerKind", "fsdp-optimizer optimizer", [
    OptionValue<"SGD", 0, "sgd",
                "SGD without momentum, L2 weight decay (torch.optim.SGD)">,
    OptionValue<"AdamW", 1, "adamw",
                "AdamW with bias correction and decoupled weight decay "
                "(torch.optim.AdamW)">]>;

/// The rate's schedule; its spelling is also nn.lr_schedule's `kind`.
def FSDP_LrSchedule : OptionEnum<"LrSchedule", "learning-rate schedule", [
    OptionValue<"Constant", 0, "constant",
                "lr, after warmup-steps of linear warm-up if any">,
    OptionValue<"Linear", 1, "linear",
                "linear decay to min-lr (get_linear_schedule_with_warmup)">,
    OptionValue<"Cosine", 2, "cosine",
                "half-cosine decay to min-lr "
                "(get_cosine_schedule_with_warmup)">]>;

#endif // FSDP_TRANSFORMS_PASSENUMS
