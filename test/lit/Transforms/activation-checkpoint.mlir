// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-wrap="units=blk" --fsdp-activation-checkpoint="activation-checkpoint=full" | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-wrap="units=blk" --fsdp-activation-checkpoint="activation-checkpoint=selective" | FileCheck %s --check-prefix=SEL
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-wrap="units=blk" --fsdp-activation-checkpoint | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-wrap="units=blk" --fsdp-activation-checkpoint="activation-checkpoint=full ac-units=root" | FileCheck %s --check-prefix=ROOT
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch="micro-batches=2" --fsdp-wrap="units=blk" --fsdp-activation-checkpoint="activation-checkpoint=full" | FileCheck %s --check-prefix=MB
// RUN: fsdp-opt %S/../Inputs/two-mm-block.mlir --fsdp-autodiff --fsdp-wrap="units=blk" --fsdp-activation-checkpoint="activation-checkpoint=selective-op" | FileCheck %s --check-prefix=SELOP
// RUN: fsdp-opt %S/../Inputs/two-mm-block.mlir --fsdp-autodiff --fsdp-wrap="units=blk" --fsdp-activation-checkpoint="activation-checkpoint=selective" | FileCheck %s --check-prefix=SEL2
// Under full-shard the recomputed forward reads the backward all-gather; in
// bf16 it computes in bf16, as the forward.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 units=blk activation-checkpoint=full param-dtype=bf16" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 units=blk activation-checkpoint=full strategy=shard-grad-op" | FileCheck %s --check-prefix=ZERO2
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 units=blk activation-checkpoint=full keep-gathered=blk" | FileCheck %s --check-prefix=ZERO2
// ac-regions=block on GPT-2 wrapped module by module (fsdp-wrap's default
// policy, DeepSpeed ZeRO-3's fetch granularity): each block is one region,
// recomputed whole from its input; unit regions recompute module by module.
// RUN: fsdp-import %S/../Inputs/models/gpt2.json --layers 2 --hidden 32 --heads 4 --vocab 256 --seq 16 --batch 4 -o %t.gpt2.mlir
// RUN: fsdp-opt %t.gpt2.mlir --fsdp-autodiff --fsdp-wrap --fsdp-activation-checkpoint="activation-checkpoint=full ac-regions=block" | FileCheck %s --check-prefix=BLOCK --implicit-check-not='nn.recompute = "transformer.h.1.' --implicit-check-not='nn.recompute = "transformer.h.0.'
// RUN: fsdp-opt %t.gpt2.mlir --fsdp-autodiff --fsdp-wrap --fsdp-activation-checkpoint="activation-checkpoint=full" | FileCheck %s --check-prefix=MODULE

// One block `blk` (layer norm, fc1, gelu, fc2, residual add) applied twice,
// then the root unit's head: two uses of blk, each recomputed before its own
// VJP.
func.func @f(%x: tensor<4x8xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %g: tensor<8xf32> {nn.param = "blk.ln.weight"}, %bt: tensor<8xf32> {nn.param = "blk.ln.bias"},
             %w1: tensor<16x8xf32> {nn.param = "blk.fc1.weight"},
             %w2: tensor<8x16xf32> {nn.param = "blk.fc2.weight"},
             %head: tensor<5x8xf32> {nn.param = "head.weight"})
    -> (tensor<f32> {nn.loss}) {
  %n = nn.layer_norm %x, %g, %bt {eps = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %h = nn.linear %n, %w1 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %a = nn.gelu %h : tensor<4x16xf32>
  %o = nn.linear %a, %w2 : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %r = nn.add %x, %o : tensor<4x8xf32>
  %n2 = nn.layer_norm %r, %g, %bt {eps = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %h2 = nn.linear %n2, %w1 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %a2 = nn.gelu %h2 : tensor<4x16xf32>
  %o2 = nn.linear %a2, %w2 : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %r2 = nn.add %r, %o2 : tensor<4x8xf32>
  %logits = nn.linear %r2, %head : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
  %l = nn.cross_entropy %logits, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// The forward is unchanged; the second use's recompute (from its input %r,
// the first use's output, kept) comes right before the first op of its VJP
// that reads its activations, the first use's (from the step's input %x)
// after the second use's VJP, before the first's. The residual sums and the
// head's input are kept.
// FULL: module attributes {nn.activation_checkpoint = "full"}
// FULL: func.func @f(%[[X:[^:]+]]: tensor<4x8xf32>
// FULL: %[[R:.+]] = nn.add %[[X]], %{{.+}} : tensor<4x8xf32>
// FULL-NOT: nn.recompute
// FULL: nn.cross_entropy_grad
// FULL-NEXT: nn.matmul
// FULL-NEXT: nn.matmul {{.*}}transpose_a
// FULL-NEXT: nn.matmul
// FULL-NEXT: %[[N2R:.+]] = nn.layer_norm %[[R]], {{.*}}nn.recompute = "blk"
// FULL-NEXT: %[[H2R:.+]] = nn.linear %[[N2R]], {{.*}}nn.recompute = "blk"
// FULL-NEXT: %[[A2R:.+]] = nn.gelu %[[H2R]] {nn.recompute = "blk"}
// FULL-NEXT: nn.matmul %{{.+}}, %[[A2R]] {transpose_a
// FULL-NEXT: nn.gelu_grad %[[H2R]],
// FULL: nn.layer_norm_grad %[[R]],
// FULL-NEXT: nn.add
// FULL-NEXT: nn.matmul
// FULL-NEXT: %[[NR:.+]] = nn.layer_norm %[[X]], {{.*}}nn.recompute = "blk"
// FULL-NEXT: %[[HR:.+]] = nn.linear %[[NR]], {{.*}}nn.recompute = "blk"
// FULL-NEXT: %[[AR:.+]] = nn.gelu %[[HR]] {nn.recompute = "blk"}
// FULL: nn.gelu_grad %[[HR]],
// FULL: nn.layer_norm_grad %[[X]],
// FULL-NOT: nn.recompute
// FULL: return

// Selective: the linear outputs are kept; only the norm and gelu are
// recomputed, from the kept inputs and linear outputs.
// SEL: module attributes {nn.activation_checkpoint = "selective"}
// SEL: %[[H:.+]] = nn.linear %{{.+}}, %arg4
// SEL: %[[R:.+]] = nn.add %arg0
// SEL: %[[H2:.+]] = nn.linear %{{.+}}, %arg4
// SEL: nn.cross_entropy_grad
// SEL-NOT: nn.recompute
// SEL: nn.layer_norm %[[R]], {{.*}}nn.recompute = "blk"
// SEL-NEXT: nn.gelu %[[H2]] {nn.recompute = "blk"}
// SEL-NEXT: nn.matmul
// SEL-NEXT: nn.gelu_grad %[[H2]],
// SEL-NOT: nn.recompute
// SEL: nn.layer_norm %arg0, {{.*}}nn.recompute = "blk"
// SEL-NEXT: nn.gelu %[[H]] {nn.recompute = "blk"}
// SEL-NOT: nn.recompute
// SEL: return

// NONE-NOT: nn.recompute
// NONE-NOT: nn.activation_checkpoint

// The root unit (the head, whose output is the loss's input): its logits are
// recomputed before the cross-entropy VJP; the loss itself is kept.
// ROOT: nn.linear %[[LOGITS_IN:[^,]+]], %arg6 :
// ROOT-NEXT: nn.cross_entropy
// ROOT-NEXT: arith.constant
// ROOT-NEXT: %[[LR:.+]] = nn.linear %[[LOGITS_IN]], {{.*}}nn.recompute = "root"
// ROOT-NEXT: nn.cross_entropy_grad %[[LR]],
// ROOT-NOT: nn.recompute

// Micro-batches: in each micro-batch's backward its two uses, each
// recomputed (from its own micro-batch's values).
// MB: nn.micro_batch_loss
// MB-NOT: nn.micro_batch = 1
// MB: nn.layer_norm {{.*}}nn.micro_batch = 0 : i64, nn.recompute = "blk"
// MB-NOT: nn.micro_batch = 1
// MB: nn.layer_norm {{.*}}nn.micro_batch = 0 : i64, nn.recompute = "blk"
// MB: nn.micro_batch_loss
// MB: nn.layer_norm {{.*}}nn.micro_batch = 1 : i64, nn.recompute = "blk"
// MB: nn.layer_norm {{.*}}nn.micro_batch = 1 : i64, nn.recompute = "blk"
// MB-NEXT: nn.linear {{.*}}nn.recompute = "blk"
// MB-NEXT: nn.gelu {{.*}}nn.recompute = "blk"
// MB-NOT: nn.recompute

// Full-shard: the recompute reads the views of blk's backward all-gather
// (the second), in bf16 as the forward.
// SHARD: fsdp.all_gather @blk
// SHARD: %[[G2:.+]] = fsdp.all_gather @blk
// SHARD: nn.cross_entropy_grad
// SHARD: %[[W2:.+]] = fsdp.wait %[[G2]] : tensor<272xbf16>
// SHARD: %[[FC1:.+]] = fsdp.param_view %[[W2]] "blk.fc1.weight"
// SHARD: %[[LNB:.+]] = fsdp.param_view %[[W2]] "blk.ln.bias"
// SHARD: %[[LNW:.+]] = fsdp.param_view %[[W2]] "blk.ln.weight"
// SHARD: %[[NR:.+]] = nn.layer_norm %{{.+}}, %[[LNW]], %[[LNB]] {{.*}}nn.recompute = "blk"} : (tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
// SHARD-NEXT: nn.linear %[[NR]], %[[FC1]] {nn.recompute = "blk"} : (tensor<2x8xbf16>, tensor<16x8xbf16>) -> tensor<2x16xbf16>

// shard-grad-op, and keep-gathered=blk: one gather of blk serves forward,
// recompute and backward.
// ZERO2-COUNT-1: fsdp.all_gather @blk
// ZERO2-NOT: fsdp.all_gather @blk

// selective-op (torchtitan's op-level policy) on two-mm-block.mlir: the 1st
// and 3rd aten.mm (q: %arg4, gate: %arg8) are kept; the 2nd (up: %arg7) is
// recomputed, and so is the biased k (%arg5, %arg6: aten.addmm, not saved),
// with the norm, products and gelu; down (%arg9) is the block's output.
// The kept ones are marked nn.ac_saved (what eager torch's selective
// checkpoint caches until the recomputation; framework-memory=torch-eager),
// the others not.
// SELOP: module attributes {nn.activation_checkpoint = "selective-op"}
// SELOP: %[[Q:.+]] = nn.linear %{{.+}}, %arg4 {nn.ac_saved = "blk"} :
// SELOP: nn.linear %{{.+}}, %arg5, %arg6 :
// SELOP: nn.linear %{{.+}}, %arg7 :
// SELOP: %[[G:.+]] = nn.linear %{{.+}}, %arg8 {nn.ac_saved = "blk"} :
// SELOP: nn.linear %{{.+}}, %arg9 :
// SELOP: nn.cross_entropy_grad
// SELOP-NOT: nn.recompute
// SELOP: %[[N:.+]] = nn.layer_norm %arg0, {{.*}}nn.recompute = "blk"
// SELOP-NEXT: %[[K:.+]] = nn.linear %[[N]], %arg5, %arg6 {nn.recompute = "blk"}
// SELOP-NEXT: %[[S:.+]] = nn.mul %[[Q]], %[[K]] {nn.recompute = "blk"}
// SELOP-NEXT: %[[U:.+]] = nn.linear %[[S]], %arg7 {nn.recompute = "blk"}
// SELOP-NEXT: %[[A:.+]] = nn.gelu %[[G]] {nn.recompute = "blk"}
// SELOP-NEXT: nn.mul %[[A]], %[[U]] {nn.recompute = "blk"}
// SELOP-NOT: nn.linear {{.*}}nn.recompute
// SELOP: return

// selective on the same block keeps every linear output: no linear is
// recomputed.
// SEL2: module attributes {nn.activation_checkpoint = "selective"}
// SEL2: nn.cross_entropy_grad
// SEL2-NOT: nn.linear {{.*}}nn.recompute
// SEL2: nn.layer_norm %arg0, {{.*}}nn.recompute = "blk"
// SEL2-NOT: nn.linear {{.*}}nn.recompute
// SEL2: nn.gelu {{.*}}nn.recompute = "blk"
// SEL2-NOT: nn.linear {{.*}}nn.recompute
// SEL2: return

// The units stay one per module; the regions are the blocks: block 1's
// recompute starts at its first layer norm, from the block's input (the
// first block's output, kept), and ends at the MLP's gelu (the down
// projection's output is the block's own, kept); block 0's likewise from
// the embeddings' sum. Root's modules (wte, wpe, ln_f) are in no block and
// not checkpointed.
// BLOCK: fsdp.unit @transformer.h.0.ln_1
// BLOCK: fsdp.unit @transformer.h.0.attn.c_attn
// BLOCK: nn.cross_entropy_grad
// BLOCK: %[[N1:[0-9]+]] = nn.layer_norm %[[IN1:[0-9]+]], {{.*}}nn.recompute = "transformer.h.1"
// BLOCK-NEXT: nn.linear %[[N1]], {{.*}}nn.recompute = "transformer.h.1"
// BLOCK: nn.add %[[IN1]], %{{[0-9]+}} {nn.recompute = "transformer.h.1"}
// BLOCK: nn.gelu {{.*}}nn.recompute = "transformer.h.1"
// BLOCK: nn.layer_norm {{.*}}nn.recompute = "transformer.h.0"
// BLOCK: nn.gelu {{.*}}nn.recompute = "transformer.h.0"
// BLOCK: return
// A region per module: each keeps its inputs and outputs, so only the
// attention and the MLP's first linear are recomputed (from their kept
// inputs), each in its module's region; the tied head (wte) is its own.
// MODULE: nn.linear {{.*}}nn.recompute = "transformer.wte"
// MODULE: nn.linear {{.*}}nn.recompute = "transformer.h.1.mlp.c_fc"
// MODULE: nn.linear {{.*}}nn.recompute = "transformer.h.1.attn.c_attn"
// MODULE-NOT: nn.layer_norm {{.*}}nn.recompute
// MODULE: return
