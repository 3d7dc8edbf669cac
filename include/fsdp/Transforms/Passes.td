//===- Passes.td - the FSDP planning passes --------------------------------===//
//
// Each pass's options are a `defvar` list declared right before the pass, so
// that fsdp-pipeline takes the very same declarations: an option is declared
// once, with one default and one description, wherever it is accepted.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TRANSFORMS_PASSES
#define FSDP_TRANSFORMS_PASSES

include "fsdp/Dialect/FSDP/FSDPEnums.td"
include "fsdp/Transforms/PassEnums.td"
include "mlir/Pass/PassBase.td"

// An option whose values are the cases of `enum` (`::llvm::cl::values`, as
// upstream's enum options): each value is spelled as in the enum, with its
// help text from the case (OptionValue, PassEnums.td) or from `help`, one
// per case in order (for an enum declared elsewhere); the description lists
// the values, for the generated docs.
class EnumOption<string varName, string arg, EnumInfo enum, string default,
                 string desc, list<string> help = []>
    : Option<varName, arg, enum.cppType, enum.cppType # "::" # default,
             desc # ": " # !interleave(!filter(name,
                 !foreach(c, enum.enumerants, c.str), !ne(name, "")), ", "),
             "::llvm::cl::values(" # !interleave(
                 !foreach(i, !range(!size(enum.enumerants)),
                   "clEnumValN(" # enum.cppType # "::" #
                   enum.enumerants[i].symbol # ", \"" #
                   enum.enumerants[i].str # "\", \"" #
                   !if(!isa<OptionValue>(enum.enumerants[i]),
                       !cast<OptionValue>(enum.enumerants[i]).description,
                       !if(!empty(help), "", help[i])) # "\")"), ", ") #
             ")">;

defvar FSDPTensorParallelOptions = [
  Option<"tp", "tp", "int64_t", "1",
         "tensor-parallel degree T (>= 1; divides world-size, the attention "
         "heads and the key/value heads): T adjacent ranks form a Megatron "
         "tensor-parallel group">,
  Option<"sequenceParallel", "sequence-parallel", "bool", "true",
         "with tp > 1, Megatron sequence parallelism (Korthikanti et al. "
         "2022): the activations outside the tensor-parallel regions (norms, "
         "residual adds) are split along the sequence over the "
         "tensor-parallel group; the sequence length must divide by tp">
];

defvar FSDPVocabParallelOptions = [
  Option<"vocabParallel", "vocab-parallel", "bool", "true",
         "with tp > 1, split the embedding, the LM head and the "
         "cross-entropy by vocabulary over the tensor-parallel group "
         "(Megatron-LM's vocab-parallel layout; the vocabulary must divide by "
         "tp); false keeps them replicated in the group">
];

defvar FSDPPipelineScatterGatherOptions = [
  Option<"ppScatterGather", "pp-scatter-gather", "bool", "true",
         "with tp > 1 and sequence-parallel=false, a pipeline stage sends "
         "each [batch, seq, ...] activation and gradient as this rank's "
         "1/tp sequence chunk and the receiving stage all-gathers it over "
         "the tensor-parallel group (Narayanan et al., SC'21, Sec. 4.1; "
         "Megatron-LM's scatter_gather_tensors_in_pipeline, on by default); "
         "false sends the whole tp-replicated activation from every rank">
];

def FSDPTensorParallel : Pass<"fsdp-tensor-parallel", "::mlir::ModuleOp"> {
  let summary = "Megatron-LM tensor parallelism on the forward graph";
  let description = [{
    Runs before fsdp-autodiff on the forward function. With `tp` = T > 1 it
    rewrites the graph into the per-rank graph of one rank of a
    tensor-parallel group (Shoeybi et al., Megatron-LM, 2019, Sec. 3): a
    *row-parallel* linear is one whose input is computed from other linears
    (the *column-parallel* ones) through nn.attention, nn.rope, nn.split,
    nn.gelu, nn.silu, nn.relu and nn.mul only, no value of that region used
    outside it (attention: q, k, v → o; MLP: up (and gate) → down). The
    column-parallel weights and biases keep 1/T of their output features
    (GPT-2's fused c_attn per q, k and v: the `nn.split` pieces), the
    row-parallel weights 1/T of their input features, attention keeps 1/T of
    its heads and key/value heads; an `nn.tp_copy` (f) enters each region and
    an `nn.tp_all_reduce` (g) sums the row-parallel linear's output, whose
    bias is added after it (`nn.broadcast` + `nn.add`). Everything else
    (norms, position embeddings) stays replicated in the group, except,
    with `vocab-parallel` (lib/Transforms/VocabParallel.cpp), the token
    embeddings and the LM head, which keep 1/T of the vocabulary rows (a
    tied table the same rows), the embedding's output summed by an
    `nn.tp_all_reduce`, the head's input entering by an `nn.tp_copy`, and
    the loss `nn.vocab_parallel_ce_stats` → `nn.tp_all_reduce` →
    `nn.vocab_parallel_cross_entropy` (no rank holds whole logits).
    With `sequence-parallel` (the default) the activations between the
    regions are split along the sequence (dimension 1 of [batch, seq,
    hidden]) over the group (Korthikanti et al. 2022, Sec. 4.2.2): an
    `nn.sp_all_gather` (backward reduce-scatter) replaces each f and an
    `nn.sp_reduce_scatter` (backward all-gather) each g of the activations
    (the vocab-parallel embedding's and head's included; the loss
    statistics' all-reduce stays), the row bias is added on the chunk; a
    replicated embedding's output enters the split by an `nn.sp_split`
    (this rank's chunk; backward all-gather) and the value a replicated
    head reads leaves it by an `nn.sp_all_gather` with `replicated_grad`
    (backward: this rank's chunk). A replicated parameter an op on chunks
    reads (a norm weight, a row bias) enters through f, so that its
    gradient, a sum over this rank's tokens only, is all-reduced over the
    group. Errors: a sequence not divisible by T (at the op whose result
    enters the split), activations without a sequence dimension.
    Without it, on a pipeline stage with `pp-scatter-gather` (the default),
    each received [batch, seq, ...] float activation whose sequence divides
    by T arrives as this rank's chunk and is all-gathered over the group
    (`nn.sp_all_gather` with `replicated_grad`: backward, this rank's chunk
    of the replicated gradient, sent back), and each such sent one leaves
    as this rank's chunk (`nn.sp_split`: backward, the chunk gradient
    received back is all-gathered): Narayanan et al., SC'21, Sec. 4.1, the
    scatter/gather optimisation, which moves 1/T of the bytes between the
    stages (over the inter-node links) for an all-gather inside the group.
    Both sides decide by the value's type alone, so their buffers agree.
    The module gets `fsdp.tensor_parallel` = T and `fsdp.tensor_slices`
    (which slice of which global parameter each rank holds). Errors: heads or
    key/value heads not divisible by T (at the attention), a graph without
    a tensor-parallel region, a split parameter used twice, a vocabulary
    not divisible by T (at the embedding or head).
  }];
  let options = !listconcat(FSDPTensorParallelOptions, FSDPVocabParallelOptions,
                            FSDPPipelineScatterGatherOptions);
  let dependentDialects = ["::mlir::nn::NNDialect", "::mlir::fsdp::FSDPDialect"];
}

defvar FSDPAutodiffOptions = [
  ListOption<"frozen", "frozen", "std::string",
             "FQN glob patterns of parameters to freeze">,
  EnumOption<"attention", "attention", FSDP_AttentionImpl, "Flash",
             "the attention implementation the plan is priced and its memory "
             "planned for (nn.attention marked nn.attention_impl; the step "
             "and fsdp-run's kernel are the same)">,
  Option<"lossScaling", "loss-scaling", "bool", "false",
         "dynamic loss scaling: the backward seed is multiplied by a "
         "`nn.loss_scale` step input that fsdp-run sets (torch.amp.GradScaler); "
         "fsdp-shard unscales, and skips the update on a non-finite norm">
];

def FSDPAutodiff : Pass<"fsdp-autodiff", "::mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the forward function";
  let description = [{
    The forward function (the one function of the module that returns a
    scalar marked `nn.loss`, or the only function) is rewritten in place to
    return the loss followed by the gradient of every trainable parameter
    (result attribute `nn.grad_of = "<FQN>"`). The backward ops are built in
    reverse program order through each op's AutodiffOpInterface and appended
    after the forward ops; gradients of values used twice are summed
    (nn.add). Only values that depend on a trainable parameter are
    differentiated. A parameter that does not reach the loss gets a zero
    gradient. `frozen` lists FQN glob patterns (`*.ln_1.*`, `transformer.wte.weight`)
    of parameters to freeze (`nn.trainable = false`): no gradient, hence no
    reduce-scatter and no optimizer state. `loss-scaling` adds a scalar
    f64 argument `nn.loss_scale` and seeds the backward with the loss's
    seed times it (`nn.scale`, in the loss's dtype), as
    torch.amp.GradScaler.scale(loss).backward(): every gradient is that of
    the loss times the scale, which fsdp-shard divides out again (see
    there). `attention=unfused` (or `unfused-no-dropout`) marks every
    nn.attention `nn.attention_impl` before differentiating (its
    nn.attention_grad gets the mark from the VJP): the simulator then prices
    Megatron-LM's unfused kernels, the memory plan keeps the scores with the
    attention's statistics, and selective activation checkpointing
    recomputes the attention alone (include/fsdp/Analysis/UnfusedAttention.h).
  }];
  let options = FSDPAutodiffOptions;
  let dependentDialects = ["::mlir::nn::NNDialect", "::mlir::arith::ArithDialect"];
}

defvar FSDPMicroBatchOptions = [
  Option<"microBatches", "micro-batches", "int64_t", "1", "micro-batches per step (>= 1)">
];

def FSDPMicroBatch : Pass<"fsdp-micro-batch", "::mlir::ModuleOp"> {
  let summary = "Gradient accumulation: k forward/backward passes per optimizer step";
  let description = [{
    Runs after fsdp-autodiff. Each data argument is cut into `micro-batches`
    contiguous micro-batches (`nn.micro_batch`); the forward and backward
    ops are cloned once per micro-batch (ops carry `nn.micro_batch = j`, the
    loss op of each clone `nn.micro_batch_loss`); the autodiff seed of each
    clone is 1/k, so the accumulated gradient is the mean over micro-batches,
    and the returned loss is the mean of the micro-batch losses. Gradients
    of one parameter are summed by `nn.add` marked `nn.accumulate`;
    fsdp-shard either reduces each micro-batch's gradients and accumulates
    shards (`accumulate=sharded`, the default) or reduces the accumulated
    full gradient once (`accumulate=unsharded`, FSDP's no_sync).
  }];
  let options = FSDPMicroBatchOptions;
  let dependentDialects = ["::mlir::nn::NNDialect", "::mlir::arith::ArithDialect"];
}

defvar FSDPOptimizerOptions = [
  EnumOption<"optimizer", "optimizer", FSDP_OptimizerKind, "AdamW",
             "the update rule">,
  // The defaults are the schedule format's (fsdp/schedule/Format.h).
  Option<"lr", "lr", "double", "::fsdp::schedule::kDefaultLr",
         "learning rate">,
  Option<"beta1", "beta1", "double", "::fsdp::schedule::kDefaultBeta1",
         "AdamW beta1 (an error with optimizer=sgd)">,
  Option<"beta2", "beta2", "double", "::fsdp::schedule::kDefaultBeta2",
         "AdamW beta2 (an error with optimizer=sgd)">,
  Option<"eps", "eps", "double", "::fsdp::schedule::kDefaultEps",
         "AdamW epsilon (an error with optimizer=sgd)">,
  Option<"weightDecay", "weight-decay", "double",
         "::fsdp::schedule::kOptionWeightDecay",
         "decoupled weight decay (AdamW) or L2 (SGD)">,
  EnumOption<"lrSchedule", "lr-schedule", FSDP_LrSchedule, "Constant",
             "the learning rate's schedule (transformers' "
             "get_*_schedule_with_warmup), computed inside the step from its "
             "step input">,
  Option<"warmupSteps", "warmup-steps", "int64_t", "0",
         "linear warm-up steps of lr-schedule (>= 0)">,
  Option<"decaySteps", "decay-steps", "int64_t", "0",
         "lr-schedule=linear|cosine: the schedule's length (num_training_steps); "
         "0: the run's total optimizer steps, a step input (nn.total_steps) "
         "that fsdp-run fills (--steps, --total-steps)">,
  Option<"minLr", "min-lr", "double", "0",
         "floor of lr-schedule=linear|cosine: after the warm-up (from 0 to "
         "lr) lr_t = min-lr + (lr - min-lr) * factor">,
  ListOption<"noDecay", "no-decay", "std::string",
             "FQN glob patterns of parameters with weight decay 0 (parameter "
             "groups)">
];

def FSDPOptimizer : Pass<"fsdp-optimizer", "::mlir::ModuleOp"> {
  let summary = "Append an SGD or AdamW update of every trainable parameter";
  let description = [{
    Consumes the gradients returned by fsdp-autodiff. For AdamW, adds two
    state arguments per parameter (`nn.opt_state = "exp_avg"/"exp_avg_sq"`,
    `nn.param_of`) and a `tensor<i64>` step argument (`nn.step`, 1-based),
    and returns the loss, the updated parameters and the updated states.
    AdamW follows Loshchilov & Hutter (ICLR 2019, Algorithm 2) with bias
    correction, as torch.optim.AdamW.

    `lr-schedule` (with `warmup-steps`, `decay-steps`, `min-lr`) adds one
    `nn.lr_schedule` of the step argument (added for SGD too) whose rate
    every update reads as its `lr` operand, and returns it (`nn.lr`): the
    rate is a function of the optimizer step alone, so every world size,
    micro-batch count and resumed run sees the same one. A linear or cosine
    schedule without `decay-steps` (0) decays over the run's total optimizer
    steps: a `tensor<i64>` argument `nn.total_steps` (after the step) that
    the runtime fills, an operand of the `nn.lr_schedule`. `no-decay` globs
    give the matched parameters weight decay 0 (fsdp-shard keeps them apart
    inside a unit's flat shard with `no_decay` element ranges).
  }];
  let options = FSDPOptimizerOptions;
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

defvar FSDPWrapOptions = [
  EnumOption<"policy", "policy", FSDP_WrapPolicy, "Module",
             "how parameters are grouped into units">,
  Option<"minUnitNumel", "min-unit-numel", "int64_t", "100000000",
         "policy=size: parameters in first-use order join a unit until it holds at "
         "least this many elements (torch's size_based_auto_wrap_policy, default 1e8)">,
  Option<"unitDepth", "unit-depth", "int", "0",
         "number of FQN components that name a unit (0: all but the last)">,
  ListOption<"units", "units", "std::string", "explicit unit FQN prefixes">
];

def FSDPWrap : Pass<"fsdp-wrap", "::mlir::ModuleOp"> {
  let summary = "Group parameters into FSDP units by FQN prefix";
  let description = [{
    Declares one `fsdp.unit` per group of parameters. By default a unit is
    the parameter's module: its FQN without the last component
    (`fc1.weight` → unit `fc1`). `unit-depth=K` groups by the first K
    components instead (`transformer.h.0.attn.c_attn.weight` with K = 3 →
    `transformer.h.0`). `units=a,b` lists explicit prefixes: a parameter
    joins the longest listed prefix of its FQN, the rest joins unit `root`.
    `policy=block` instead makes one unit per transformer block (the FQN up
    to its first numeric component: `transformer.h.3`, `model.layers.3`)
    and one `root` unit for everything else (embeddings, final norm, head),
    as PyTorch FSDP's transformer_auto_wrap_policy. `policy=size` fills
    units in first-use order up to `min-unit-numel` elements. Units are
    ordered by their first use in the function; parameters within a unit by
    first use too. A tied parameter (`nn.tied`: one parameter known under
    several FQNs) lives in one unit; explicit `units` that would place its
    names in two units are an error naming both. Frozen and trainable
    parameters of one unit get two flat buffers, `<unit>` and
    `<unit>.frozen` (gathered at the same points; the frozen one has no
    gradient, reduce-scatter or optimizer state). Parameters of different
    dtypes in one unit are rejected.
  }];
  let options = FSDPWrapOptions;
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

defvar FSDPActivationCheckpointOptions = [
  EnumOption<"mode", "activation-checkpoint", FSDP_ActivationCheckpoint, "None",
             "activation checkpointing of FSDP units">,
  ListOption<"acUnits", "ac-units", "std::string",
             "glob patterns of the FSDP units to checkpoint (default: every "
             "unit but root); with ac-regions=block, of the blocks">,
  EnumOption<"acRegions", "ac-regions", FSDP_AcRegions, "Unit",
             "what one checkpointed region is: an FSDP unit, or a "
             "transformer block whatever the units">,
  Option<"fusedSwiglu", "fused-swiglu", "bool", "false",
         "SwiGLU as one fused kernel (Megatron-LM's SwiGLUFunction, "
         "megatron/core/fusions/fused_bias_swiglu.py): silu(gate) is not kept "
         "for the backward, which recomputes it from the kept gate">
];

def FSDPActivationCheckpoint
    : Pass<"fsdp-activation-checkpoint", "::mlir::ModuleOp"> {
  let summary = "Recompute checkpointed units' forward activations in backward";
  let description = [{
    Runs after fsdp-wrap and before fsdp-shard. `activation-checkpoint=full`
    keeps from the forward of each checkpointed unit only its inputs and
    outputs (what the rest of the step keeps anyway) and recomputes the rest
    of the unit's forward right before its VJP (torch.utils.checkpoint;
    Chen et al., 2016). `selective` keeps the outputs of nn.linear,
    nn.matmul and nn.attention as well and recomputes only the other ops:
    norms, activations, rope, elementwise (torchtitan's op-level selective
    AC's save list, the matmuls and scaled-dot-product attention, kept
    whole). `selective-op` is torchtitan's op-level selective AC policy
    exactly (torchtitan models/llama/parallelize_llama.py,
    _apply_ac_to_transformer_block with selective_ac_option = "op"): per
    use of a unit it keeps nn.attention's outputs and the 1st, 3rd, 5th...
    aten.mm of the use's forward in program order and recomputes the 2nd,
    4th... (on Llama wk, wo and w3: about 37% of a block's matmul FLOPs)
    with everything else. aten.mm is nn.matmul and nn.linear without a bias;
    nn.linear with a bias is aten.addmm in PyTorch (at::linear), outside the
    save list, and is recomputed.
    An op belongs to the unit of the parameter read most recently in program
    order; a use of a unit is a run of consecutive ops of that unit in one
    micro-batch that reads no parameter twice, and each use is recomputed before its own VJP (a module
    applied twice, every micro-batch). `ac-units` are glob patterns over unit
    names (`transformer.h.*`); by default every unit but `root` is
    checkpointed. `ac-regions=block` cuts the forward into transformer
    blocks instead of FSDP units (an op belongs to the block of the
    parameter read most recently, the FQN up to its block index; what is in
    no block is `root`, not checkpointed by default), so that a block is
    checkpointed whole when its parameters are gathered module by module:
    Megatron-LM checkpoints each transformer layer
    (megatron/model/transformer.py, `_checkpointed_forward`) while DeepSpeed
    ZeRO-3 fetches each sub-module's parameters in its own forward hook
    (deepspeed/runtime/zero/stage3.py, `fetch_sub_module`); `ac-units` then
    names blocks. Recomputed ops are clones of the forward ops marked
    `nn.recompute = "<unit>"`; the module gets `nn.activation_checkpoint`.
    Later passes treat them as backward ops: fsdp-shard computes them in
    param-dtype as the forward, fsdp-collectives serves them with the
    backward all-gather (full-shard) or the kept forward gather
    (shard-grad-op, keep-gathered). Errors: ac-units without a mode, a
    pattern that is no glob or matches no unit, no unit to checkpoint.
    `fused-swiglu` (with any mode, `none` included) plans SwiGLU,
    down(silu(gate) * up), as Megatron-LM's fused kernel runs it
    (megatron/core/fusions/fused_bias_swiglu.py: SwiGLUFunction saves only
    its input [gate, up], and swiglu_back recomputes silu(gate)): every
    forward nn.silu whose forward users are nn.mul and whose result a
    backward op reads is cloned (`nn.recompute`) right before that backward
    op, so the forward's silu(gate) dies at the product. Kept per SwiGLU:
    gate, up and the product (the down projection's input), 3 intermediate-
    sized tensors instead of 4 (Korthikanti et al. 2022, Sec. 4.1, count
    the activations a layer keeps).
  }];
  let options = FSDPActivationCheckpointOptions;
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

defvar FSDPShardOptions = !listconcat(FSDPTensorParallelOptions, [
  Option<"worldSize", "world-size", "int64_t", "1", "number of ranks (>= 1)">,
  EnumOption<"strategy", "strategy", FSDP_Strategy, "FullShard",
             "what is sharded", [
               "ZeRO-3: parameters, gradients and optimizer state, "
               "re-gathered for backward",
               "ZeRO-2: the same, parameters kept gathered from forward to "
               "backward",
               "ZeRO-1: gradients and optimizer state; parameters replicated",
               "DDP: nothing; gradients all-reduced",
               "HSDP: full-shard within groups of shard-size ranks, "
               "replicated across them"]>,
  Option<"shardSize", "shard-size", "int64_t", "0",
         "hybrid-shard: ranks per shard group (divides world-size; 0: world-size)">,
  EnumOption<"paramDtype", "param-dtype", FSDP_ComputeDtype, "Default",
             "dtype of gathered parameters and of compute (default: the "
             "parameters' own)">,
  EnumOption<"reduceDtype", "reduce-dtype", FSDP_ComputeDtype, "Default",
             "dtype of gradient reduction (default: param-dtype)">,
  EnumOption<"accumulate", "accumulate", FSDP_Accumulate, "Sharded",
             "gradient accumulation with micro-batches (unsharded on a step "
             "without micro-batches is an error)">,
  EnumOption<"masterWeights", "master-weights", FSDP_MasterWeights,
             "CastOnGather", "the f32 master weights under a narrower "
             "param-dtype">,
  Option<"maxGradNorm", "max-grad-norm", "std::optional<double>", "std::nullopt",
         "clip the global gradient L2 norm to this (> 0), as "
         "torch.nn.utils.clip_grad_norm_; unset: no clipping">,
  Option<"reportGradNorm", "report-grad-norm", "bool", "false",
         "return the global gradient norm (nn.grad_norm) without clipping">
]);

def FSDPShard : Pass<"fsdp-shard", "::mlir::ModuleOp"> {
  let summary = "Flatten each unit into padded per-rank shards and split the batch";
  let description = [{
    Each unit becomes one flat buffer, right-padded to a multiple of the
    shard-group size (the world size, or `shard-size` for hybrid-shard) and
    split into equal contiguous shards (PyTorch FSDP's FlatParameter;
    include/fsdp/Sharding.h). The step function takes and returns this
    rank's shards of the parameters and of the optimizer state (`fsdp.unit`,
    `fsdp.role`) and this rank's part of the batch: data arguments lose a
    factor world-size in their first dimension (contiguous blocks;
    `fsdp.global_shape` keeps the global one), and every shape is
    re-inferred. Each unit is gathered once
    at the top (`fsdp.all_gather` + `fsdp.param_view`), its gradients are
    packed (`fsdp.flatten`) and reduce-scattered with `avg`, and the
    optimizer updates the flat shards. fsdp-collectives then places these.

    With `tp` = T > 1 (after fsdp-tensor-parallel, whose T it must be) the
    world is T x the data-parallel ranks: the batch and the shards are split
    over the world-size / T data-parallel ranks of each tensor-parallel rank
    (their shard and replicate groups), and the global gradient norm sums
    the units split across the tensor group over it too (the replicated
    units, fsdp-wrap's `*.tp_replicated`, count once). full-shard,
    shard-grad-op and no-shard only, for now.

    `max-grad-norm` clips the global gradient norm: each unit's reduced
    gradient shard gives `nn.sum_squares`, their sum is all-reduced (sum)
    over the shard group (the ranks that partition the shards; replicas of
    HSDP and DDP are not summed), `nn.grad_norm` gives the norm and
    min(1, max / (norm + 1e-6)), and `nn.scale` scales every gradient
    shard before its update (torch.nn.utils.clip_grad_norm_). The norm is
    returned (`nn.grad_norm`); `report-grad-norm` returns it without clipping.

    `strategy` chooses what is sharded (Rajbhandari et al., ZeRO, SC20,
    Sec. 5; Zhao et al., PyTorch FSDP, VLDB 2023, Sec. 3.2.2):
    full-shard and shard-grad-op shard parameters, gradients and optimizer
    state (shard-grad-op keeps gathered parameters from forward to
    backward); shard-optimizer (ZeRO-1) keeps replicated parameters
    (`fsdp.layout = #fsdp.layout<full>`), reduce-scatters gradients, updates
    this rank's
    slice (`fsdp.local_shard`) and all-gathers it back; no-shard (DDP)
    replicates everything and all-reduces gradients; hybrid-shard (HSDP)
    shards within groups of `shard-size` ranks and all-reduces gradient
    shards across the world-size / shard-size replicas.

    Mixed precision (FSDP's MixedPrecision): `param-dtype` is the dtype of
    gathered parameters and of compute, `reduce-dtype` that of gradient
    reduction; the shards keep the parameters' dtype and are cast as they
    are gathered, or with `master-weights=separate` a persistent
    param-dtype copy is kept beside them. An `nn.cast` of the logits before
    `nn.cross_entropy` (fsdp-import --loss-dtype f32) keeps its f32 target
    and its VJP casts the dlogits back to param-dtype; without mixed
    precision such identity casts are removed. With fsdp-micro-batch,
    `accumulate=sharded` reduces each micro-batch's gradients and sums the
    shards (a running sum marked `nn.accumulate`, which fsdp-schedule moves
    to each reduction's wait and the memory plan writes in place, so that one
    shard per unit accumulates); `unsharded` reduces the summed gradient
    once.
  }];
  let options = FSDPShardOptions;
  let dependentDialects = ["::mlir::fsdp::FSDPDialect", "::mlir::nn::NNDialect"];
}

defvar FSDPCollectivesOptions = [
  Option<"reshardAfterForward", "reshard-after-forward", "bool", "true",
         "free gathered parameters after forward and gather again for backward">,
  ListOption<"keepGathered", "keep-gathered", "std::string",
             "units not resharded after forward (FSDP2's per-module "
             "reshard_after_forward=False), e.g. the root unit">,
  Option<"reshardRoot", "reshard-root", "bool", "false",
         "reshard the root unit after forward too (by default the unit whose "
         "backward follows its forward at once stays gathered, as FSDP2's root "
         "and torchtitan's norm + output)">,
  Option<"gatherOncePerStep", "gather-once-per-step", "bool", "false",
         "with micro-batches, gather each unit once per step: at its first "
         "use, freed after its last, across every micro-batch's forward and "
         "backward (torchtitan's reshard_after_forward=False under pipeline "
         "parallelism; fsdp-pipeline decides it per stage with pp-gather)">
];

def FSDPCollectives : Pass<"fsdp-collectives", "::mlir::ModuleOp"> {
  let summary = "Place all-gathers, frees and reduce-scatters by first and last use";
  let description = [{
    For each unit: an all-gather right before the first forward use of its
    parameters and a free right after the last forward use; with
    `reshard-after-forward` (default, FULL_SHARD / ZeRO-3) a second
    all-gather before the first backward use and a free after the last
    (not under strategy=shard-grad-op, nor for the units listed in
    `keep-gathered`, which stay gathered from forward to backward, nor for
    the root unit of each micro-batch: the one whose forward ends the
    forward and whose backward begins the backward, no other unit's
    parameters used in between, which would be freed only to be gathered
    again at once, as FSDP2 leaves its root gathered and torchtitan its
    norm + output; `reshard-root=true` reshards it too); a
    reduce-scatter of the packed gradient right after the unit's last
    gradient is complete (under shard-optimizer where fsdp-shard put it, at
    the end of backward, as DeepSpeed's stage 1, for the last micro-batch;
    an earlier micro-batch's as soon as complete, so that one whole
    gradient, not one per micro-batch, is live), and a free of the full
    gradient after it. Forward
    ends at the op that defines the loss (with micro-batches, each
    micro-batch's forward and backward are phases of their own).
    `gather-once-per-step` makes all of a unit's uses one phase: one
    all-gather before its first use in the step and one free after its last,
    whatever the micro-batches (with accumulate=unsharded, its gradient is
    then reduced once too, after the last micro-batch's backward).
  }];
  let options = FSDPCollectivesOptions;
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

// memory-budget and cluster: one option each, taken by fsdp-schedule and
// fsdp-memory-plan alike (fsdp-pipeline gives both the same value).
defvar MemoryBudgetOption =
  Option<"memoryBudget", "memory-budget", "std::string", "\"\"",
         "per-rank memory budget, e.g. 80GiB: fsdp-schedule keeps the planned peak "
         "of its hoisted gathers under it; fsdp-memory-plan fails if the peak "
         "exceeds it (on a planned pipeline module, any stage's)">;
defvar ClusterOption =
  Option<"cluster", "cluster", "std::string", "\"\"",
         "cluster spec JSON (bench/clusters/*.json): fsdp-schedule's cost model picks "
         "the schedule on it; fsdp-memory-plan simulates the step and adds the "
         "predicted step time, lower bound, exposed communication and MFU to the "
         "report">;

defvar FSDPScheduleOptions = [
  Option<"prefetch", "prefetch", "std::string", "\"auto\"",
         "auto (cost model / list scheduler), none, fsdp1 or fsdp2">,
  Option<"maxInFlight", "max-in-flight", "int64_t", "2",
         "most all-gathers started and not yet waited (FSDP's rate limiter: 2)">,
  Option<"bucketBytes", "bucket-bytes", "int64_t", "0",
         "merge consecutive units' all-gathers (and reduce-scatters) into one of at most "
         "this many bytes (0: one collective per unit)">,
  MemoryBudgetOption,
  ClusterOption
];

def FSDPSchedule : Pass<"fsdp-schedule", "::mlir::ModuleOp"> {
  let summary = "Async collectives (start + fsdp.wait) placed for overlap";
  let description = [{
    Every collective becomes an `async` start and an `fsdp.wait`, the only
    synchronisation between the compute and communication streams.
    Reduction waits go to the next reduction of the same kind (one in
    flight, as FSDP2), and a gradient accumulation (`nn.add` marked
    `nn.accumulate`) right after the later of its operands; all-gather waits stay before first use and their
    starts are hoisted by `prefetch`: `none`; `fsdp1` (PyTorch FSDP1
    BACKWARD_PRE: one unit ahead in backward only); `fsdp2` (FSDP2's
    implicit prefetch: one unit ahead in forward and backward); `auto` (the
    default: a list scheduler hoisting each gather as early as
    `max-in-flight` and the memory budget allow; with `cluster=`, the cost
    model picks the fastest of that schedule, the same with one gather in
    flight, fsdp2, fsdp1 and none that fits the budget). The budget is
    `memory-budget`, else the cluster spec's device memory. The module gets
    `fsdp.schedule` naming the schedule applied. `bucket-bytes` merges
    consecutive small units' all-gathers of one phase (and consecutive
    reduce-scatters, HSDP's included, and ZeRO-1's all-gathers of the updated
    shards) into one collective of a packed buffer (fsdp.pack /
    fsdp.unpack); the readers of a bucketed reduction (HSDP's replicate
    all-reduces, ZeRO-1's updates) move after its unpack. See
    lib/Transforms/Schedule.cpp (the steps:
    ScheduleSteps.cpp).
  }];
  let options = FSDPScheduleOptions;
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

defvar FSDPMemoryPlanOptions = [
  Option<"report", "report", "std::string", "\"\"",
         "write the memory/communication report here (JSON; '-' for text on stdout)">,
  MemoryBudgetOption,
  ClusterOption,
  Option<"trace", "trace", "std::string", "\"\"",
         "write the simulated step as a Chrome trace JSON (Perfetto); needs cluster=">,
  Option<"frameworkMemory", "framework-memory", "std::string", "\"fsdp-run\"",
         "the software stack the report's memory describes: fsdp-run (the plan, "
         "what fsdp-run allocates), torch-eager or torch-compile (what PyTorch "
         "FSDP keeps beyond it: per_rank.framework; "
         "include/fsdp/Analysis/FrameworkMemory.h)">,
  Option<"frameworkLoss", "framework-loss", "std::string", "\"torch\"",
         "with a torch framework-memory, the loss the stack ran: torch "
         "(torch.nn.functional.cross_entropy, eager: one more logits-sized "
         "buffer in its backward) or fused (a fused cross-entropy kernel, e.g. "
         "flash-attn's CrossEntropyLoss: the logits and one gradient, as the plan)">,
  Option<"arenaOffsets", "arena-offsets", "bool", "true",
         "place every buffer in one arena (first fit by decreasing size), the "
         "offsets fsdp-translate and the compiled step need; false plans the "
         "peaks, classes and frees only (report arena_bytes null, the step "
         "cannot be translated), for planners that never run it: fsdp-sweep, "
         "where the arena was a third of a 405B pipeline plan">
];

def FSDPMemoryPlan : Pass<"fsdp-memory-plan", "::mlir::ModuleOp"> {
  let summary = "Plan every rank's memory and record the plan on the step; "
                "report it and check it against a budget";
  let description = [{
    Runs the memory-plan analysis (liveness of every buffer of the scheduled
    step, live bytes at each instruction per class, the peak and where it
    happens, offsets in one arena) and records its decisions on the step
    function as `fsdp.memory_plan` (every buffer's class and arena offset,
    views, the outputs written over their state inputs, the gradient
    accumulations written over their running sums, the frees after each
    instruction, the peaks and the arena's size;
    include/fsdp/Analysis/MemoryPlanRecord.h), which the JSON schedule
    (fsdp-translate), the report and fsdp-sweep read rather than plan again;
    a step changed after this pass is refused there, and a step never
    planned is planned on the fly. The communication plan (ring bytes per
    collective) goes into the report. `report=PATH` writes a JSON report
    (`-`: a text table on stdout); `memory-budget=BYTES` (suffixes K, M, G,
    T with B or iB, e.g. 80GiB) fails with a diagnostic that says by how
    much the peak exceeds the budget, which class dominates, and what would
    bring it under.
    Model-state bytes per rank: the units' parameter and optimizer-state
    inputs plus their gradient storage (the reduced gradient, or the whole
    flat gradient where the strategy keeps gradients replicated), as in
    ZeRO's accounting (Rajbhandari et al., SC20, Sec. 3.1 and Fig. 1).
    `cluster=SPEC.json` simulates the step as scheduled on that cluster
    (lib/Analysis/Simulator.cpp: compute and communication streams, roofline
    op times, ring collectives) and `trace=PATH` writes the simulated
    timeline as a Chrome trace.
    `framework-memory=torch-eager|torch-compile` adds to the report what a
    PyTorch FSDP run of the same step keeps beyond the plan
    (`per_rank.framework`: eager cross-entropy's dense nll_loss gradient,
    eager selective checkpointing's cache of saved outputs the backward never
    reads, FSDP's gradient shards on the reduce-scatter stream's pool; the
    terms and their sources in include/fsdp/Analysis/FrameworkMemory.h); the
    plan, the budget check and the schedule are unchanged (`fsdp-run`, the
    default: nothing added). Not for pipeline-parallel steps.
  }];
  let options = FSDPMemoryPlanOptions;
}

// The options of every pass fsdp-pipeline runs, each once (memory-budget and
// cluster are one option of two passes).
// Virtual stages per rank (interleaved 1F1B; Narayanan et al., SC'21,
// Sec. 2.2.2): fsdp-pipeline-split cuts pp x pp-chunks chunks and
// fsdp-pipeline-micro-batch orders a rank's chunks.
defvar PipelineChunksOption =
  Option<"ppChunks", "pp-chunks", "int64_t", "1",
         "virtual stages per rank v (>= 1; > 1 only with "
         "pp-schedule=interleaved-1f1b): the layers are cut into pp x v "
         "chunks and rank stage s holds chunks s, s + pp, s + 2 pp, ...">;

defvar FSDPPipelineSplitOptions = [
  PipelineChunksOption,
  Option<"pp", "pp", "int64_t", "1",
         "pipeline-parallel degree P (>= 1; divides world-size, <= the "
         "number of layers): the world is P stages of world-size / P ranks, "
         "the stage outermost">,
  Option<"ppStage", "pp-stage", "int64_t", "-1",
         "the one stage to plan (fsdp-pipeline plans every stage; this "
         "option is for running fsdp-pipeline-split alone); with pp-chunks "
         "= v > 1 the virtual stage 0..P x v - 1 (chunk c is on rank c mod P)">,
  ListOption<"ppSplit", "pp-split", "int64_t",
             "the first layer of stages 1..P-1 (P-1 increasing layer "
             "indices; P x v - 1 with pp-chunks = v, of virtual stages 1..P x v - 1); "
             "default: the split that minimises the largest "
             "stage's forward FLOPs (fsdp-pipeline: its predicted time "
             "under the memory budget, docs/pipeline-parallel.md)">,
  Option<"ppSplitEmbedding", "pp-split-embedding", "bool", "false",
         "count the embedding (the ops before layer 0's) as a layer of the "
         "split, which may then be a (virtual) stage of its own: pp-split's "
         "layer 0 is then the embedding and model layer i is i + 1 "
         "(Megatron-LM's --account-for-embedding-in-pipeline-split; "
         "torchtitan's module split with input_weight)">,
  Option<"ppSplitLoss", "pp-split-loss", "bool", "false",
         "count the final norm, head and loss (the ops from the first "
         "non-layer parameter's use after the last layer's block) as a "
         "layer of the split after the last model layer, which may then be "
         "a (virtual) stage of its own "
         "(Megatron-LM's --account-for-loss-in-pipeline-split; "
         "torchtitan's output_weight)">
];

def FSDPPipelineSplit : Pass<"fsdp-pipeline-split", "::mlir::ModuleOp"> {
  let summary = "Cut the forward graph into one pipeline stage's function";
  let description = [{
    Runs before fsdp-autodiff. Layers are the `.h.<i>.` / `.layers.<i>.`
    FQNs of the parameters; stage s runs the ops from the first use of its
    first layer's parameters to the first use of the next stage's (stage 0
    also the embeddings, the last stage the final norm, head and loss;
    with pp-split-embedding / pp-split-loss these count as a layer each and
    may be cut off, as Llama 3's first and last chunks, Dubey et al. 2024,
    Sec. 3.3.2).
    Values defined on an earlier stage and used on this one or a later one
    are the boundary: they become arguments (`fsdp.pp_input`) and, where a
    later stage uses them, results (`fsdp.pp_output`, with an argument
    `fsdp.pp_output_grad` for their gradient, received back). Constants are
    rematerialised instead of sent. The module gets fsdp.pipeline_stages and
    fsdp.pipeline_stage. Parameters used by two stages (tied embeddings) are
    refused.
  }];
  let options = FSDPPipelineSplitOptions;
  let dependentDialects = ["::mlir::nn::NNDialect", "::mlir::fsdp::FSDPDialect"];
}

defvar FSDPPipelineScheduleOptions = [
  Option<"ppSchedule", "pp-schedule", "std::string", "\"1f1b\"",
         "pipeline schedule: gpipe (all forwards, then all backwards), "
         "1f1b (warm-up P-s-1 forwards, one forward one backward, cool-down) "
         "or interleaved-1f1b (pp-chunks >= 2 virtual stages per rank, "
         "micro-batches a multiple of P; Megatron-LM's order)">,
  PipelineChunksOption
];

def FSDPPipelineMicroBatch : Pass<"fsdp-pipeline-micro-batch", "::mlir::ModuleOp"> {
  let summary = "Micro-batches of a pipeline stage in the schedule's order";
  let description = [{
    Runs after fsdp-autodiff on a stage of fsdp-pipeline-split, in place of
    fsdp-micro-batch. Each micro-batch's forward (the ops that do not depend
    on the backward seed) and backward are cloned in the order of
    `pp-schedule` (Huang et al., GPipe, 2019; Narayanan et al., PipeDream-
    Flush / 1F1B, SC'21 Sec. 2.2). Received activations and gradients are
    `nn.micro_batch` slices of their (data-like) arguments until
    fsdp-pipeline-p2p; sent ones are `fsdp.send` placeholders. Gradients are
    accumulated as fsdp-micro-batch does (seed 1/m on the last stage); the
    loss is the mean of the micro-batch losses on the last stage, zero on
    the others (fsdp-run broadcasts the last stage's).
  }];
  let options = !listconcat(FSDPMicroBatchOptions, FSDPPipelineScheduleOptions);
  let dependentDialects = ["::mlir::nn::NNDialect", "::mlir::arith::ArithDialect",
                           "::mlir::fsdp::FSDPDialect"];
}

def FSDPPipelineP2P : Pass<"fsdp-pipeline-p2p", "::mlir::ModuleOp"> {
  let summary = "Point-to-point transfers between pipeline stages";
  let description = [{
    Runs after fsdp-shard (the batch split has given the received tensors
    their shapes). Each `nn.micro_batch` of a received argument becomes
    `fsdp.recv async` + `fsdp.wait` (the argument is erased); each
    `fsdp.send` placeholder becomes `fsdp.send async`, waited before this
    stage waits for that micro-batch's gradient (a forward send) or at the
    end of the step (a backward send).
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
}

// fsdp-pipeline's own: the memory decision per stage (docs/pipeline-parallel.md,
// "Memory").
defvar FSDPPipelineMemoryOptions = [
  Option<"ppGather", "pp-gather", "std::string", "\"auto\"",
         "pp > 1: a stage's units gathered once-per-step (all-gathered at the "
         "first micro-batch's use, freed after the last's, gradients "
         "accumulated whole and reduce-scattered once: torchtitan's "
         "reshard_after_forward=False) or per-micro-batch (each micro-batch's "
         "forward and backward gather, gradients reduced per micro-batch); "
         "auto: once-per-step where the stage's planned peak fits the memory "
         "budget (memory-budget, else the cluster's device memory; no budget: "
         "once-per-step), else per-micro-batch">,
  Option<"ppPlan", "pp-plan", "std::string", "\"all\"",
         "pp > 1: which stages are planned: all; fattest (a memory screen: "
         "the split is chosen for the whole model as always, and only the "
         "stage its estimate puts highest is planned, as it would be among "
         "all; a rank of every stage holds at least its stage's peak, so a "
         "screened stage over the device memory means the layout does not "
         "fit); or split (none: the split alone, fsdp.pp_split on the "
         "module). With fattest and split the pipeline is not simulated, so "
         "report= and trace= are refused; one stage per rank, pp-chunks=1. "
         "fsdp-sweep's advisor screens its pipeline layouts with fattest and "
         "extrapolates them over the depth with the model's split">
];

defvar FSDPPipelineOptions = !foldl([]<Option>, [
    FSDPPipelineSplitOptions, FSDPPipelineScheduleOptions, FSDPPipelineMemoryOptions,
    FSDPTensorParallelOptions, FSDPVocabParallelOptions, FSDPPipelineScatterGatherOptions, FSDPAutodiffOptions, FSDPMicroBatchOptions, FSDPOptimizerOptions,
    FSDPWrapOptions, FSDPActivationCheckpointOptions, FSDPShardOptions, FSDPCollectivesOptions,
    FSDPScheduleOptions, FSDPMemoryPlanOptions],
  all, opts, !listconcat(all, !listremove(opts, all)));

def FSDPPipeline : Pass<"fsdp-pipeline", "::mlir::ModuleOp"> {
  let summary = "Plan a sharded training step: autodiff, micro-batch, optimizer, "
                "wrap, activation-checkpoint, shard, collectives, schedule, "
                "memory-plan";
  let description = [{
    Runs fsdp-tensor-parallel, fsdp-autodiff, fsdp-micro-batch, fsdp-optimizer, fsdp-wrap,
    fsdp-activation-checkpoint, fsdp-shard, fsdp-collectives, canonicalize, fsdp-schedule and
    fsdp-memory-plan on the module, as a nested pipeline. Its options are
    those passes' options (declared once, above): the value of each, as
    parsed, goes to every pass that has it (memory-budget and cluster to both
    fsdp-schedule and fsdp-memory-plan), and the spec that `cluster` names is
    read once for both.
  }];
  let options = FSDPPipelineOptions;
}

#endif // FSDP_TRANSFORMS_PASSES
