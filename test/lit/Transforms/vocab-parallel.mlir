// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 sequence-parallel=false" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 sequence-parallel=false" --fsdp-autodiff | FileCheck %s --check-prefix=VJP
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 vocab-parallel=false sequence-parallel=false" | FileCheck %s --check-prefix=OFF

// fsdp-tensor-parallel's vocab-parallel layout (lib/Transforms/VocabParallel.cpp):
// a tied table (GPT-2's wte = lm_head) keeps vocabulary rows [t·8, (t+1)·8)
// of 16 for both the embedding and the LM head; the embedding's partial
// lookups are summed by g, the head's input enters through f, its logits
// are [2, 4, 8] per rank (never [.., 16]) and the loss is the statistics,
// their all-reduce and the merged cross-entropy.

// CHECK: fsdp.tensor_slices = {down.weight = array<i64: 1, 1, 8, 16>, up.weight = array<i64: 0, 1, 16, 8>, wte.weight = array<i64: 0, 1, 16, 8>}
// CHECK: %[[WTE:arg[0-9]+]]: tensor<8x8xf32> {nn.param = "wte.weight", nn.tied = ["lm_head.weight"]}
// CHECK: %[[E:.*]] = nn.embedding %arg0, %[[WTE]] {vocab_parallel} : (tensor<2x4xi32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[G:.*]] = nn.tp_all_reduce %[[E]] : tensor<2x4x8xf32>
// CHECK: nn.layer_norm %[[G]]
// CHECK: %[[N:.*]] = nn.layer_norm
// CHECK: %[[F:.*]] = nn.tp_copy %[[N]] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[L:.*]] = nn.linear %[[F]], %[[WTE]] : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[S:.*]] = nn.vocab_parallel_ce_stats %[[L]], %arg1 {tp = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x2x4x3xf32>
// CHECK-NEXT: %[[A:.*]] = nn.tp_all_reduce %[[S]] : tensor<2x2x4x3xf32>
// CHECK-NEXT: %[[LOSS:.*]] = nn.vocab_parallel_cross_entropy %[[L]], %arg1, %[[A]] : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<2x2x4x3xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]]
// CHECK-NOT: nn.cross_entropy

// The backward: the loss's gradient is local (no collective for it), the
// head's f contributes the all-reduce of its input's gradient, the tied
// table's gradient is the head's plus the embedding's, each of this rank's
// rows.
// VJP: nn.vocab_parallel_cross_entropy_grad %{{.*}}, %arg1, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<2x2x4x3xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// VJP: nn.tp_all_reduce
// VJP: nn.embedding_grad %arg0, %{{.*}} {num_embeddings = 8 : i64, vocab_parallel} : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
// VJP-NOT: nn.cross_entropy_grad

// OFF: fsdp.tensor_slices = {down.weight = array<i64: 1, 1, 8, 16>, up.weight = array<i64: 0, 1, 16, 8>}
// OFF: nn.embedding %arg0, %{{.*}} : (tensor<2x4xi32>, tensor<16x8xf32>)
// OFF: nn.cross_entropy %{{.*}}, %arg1 : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
// OFF-NOT: vocab_parallel

func.func @forward(%tok: tensor<2x4xi32> {nn.data = "tokens"}, %y: tensor<2x4xi32> {nn.data = "targets"},
                   %wte: tensor<16x8xf32> {nn.param = "wte.weight", nn.tied = ["lm_head.weight"]},
                   %g: tensor<8xf32> {nn.param = "ln.weight"}, %bb: tensor<8xf32> {nn.param = "ln.bias"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %w2: tensor<8x16xf32> {nn.param = "down.weight"}) -> (tensor<f32> {nn.loss}) {
  %e = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %n = nn.layer_norm %e, %g, %bb {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h = nn.linear %n, %w1 : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %a = nn.gelu %h : tensor<2x4x16xf32>
  %o = nn.linear %a, %w2 : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %n2 = nn.layer_norm %o, %g, %bb {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = nn.linear %n2, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
