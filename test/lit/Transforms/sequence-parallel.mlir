// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 vocab-parallel=false" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 vocab-parallel=false" --fsdp-autodiff | FileCheck %s --check-prefix=VJP
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 sequence-parallel=false vocab-parallel=false" | FileCheck %s --check-prefix=OFF

// fsdp-tensor-parallel's sequence-parallel mode (the default; Korthikanti et
// al. 2022, Sec. 4.2.2) on [batch, seq, hidden] activations: a norm, a
// Megatron MLP (up column-parallel, down row-parallel with a bias), the
// residual add, a norm and a replicated head. The input enters the sequence
// split by this rank's chunk (it is a function argument here, the embedding's
// output in a model), the norms and the residual add run on [2, 2, 8]
// chunks, f and g become the all-gather and the reduce-scatter, the row bias
// is added on the chunk, and the head's input is all-gathered with a
// replicated gradient. The norms' weights and biases and the row bias enter
// through f (their gradients summed over the group).

// CHECK: func.func @forward(%[[X:[^:]*]]: tensor<2x4x8xf32> {nn.data = "features"}
// CHECK: %[[XS:.*]] = nn.sp_split %[[X]] {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[G:.*]] = nn.tp_copy %arg2 : tensor<8xf32>
// CHECK: %[[BB:.*]] = nn.tp_copy %arg3 : tensor<8xf32>
// CHECK: %[[N:.*]] = nn.layer_norm %[[XS]], %[[G]], %[[BB]] {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[NW:.*]] = nn.sp_all_gather %[[N]] {dim = 1 : i64, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[H:.*]] = nn.linear %[[NW]], %arg4, %arg5 : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[A:.*]] = nn.gelu %[[H]] : tensor<2x4x8xf32>
// CHECK: %[[P:.*]] = nn.linear %[[A]], %arg6 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[S:.*]] = nn.sp_reduce_scatter %[[P]] {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// CHECK: %[[B2:.*]] = nn.tp_copy %arg7 : tensor<8xf32>
// CHECK: %[[B:.*]] = nn.broadcast %[[B2]], %[[S]] {axes = array<i64: 0, 1>} : (tensor<8xf32>, tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
// CHECK: %[[O:.*]] = nn.add %[[S]], %[[B]] : tensor<2x2x8xf32>
// CHECK: %[[R:.*]] = nn.add %[[XS]], %[[O]] : tensor<2x2x8xf32>
// CHECK: %[[N2:.*]] = nn.layer_norm %[[R]], {{.*}} -> tensor<2x2x8xf32>
// CHECK: %[[W:.*]] = nn.sp_all_gather %[[N2]] {dim = 1 : i64, replicated_grad = true, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// CHECK: nn.linear %[[W]], %arg8 : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
// CHECK-NOT: nn.tp_all_reduce

// The backward: the head gather's VJP takes this rank's chunk of the whole
// gradient, the reduce-scatter's VJP is an all-gather, the all-gather's a
// reduce-scatter; the five replicated parameters' gradients (sums over this
// rank's tokens) are all-reduced over the group (f's VJP); the up weight's
// gradient reads its input from a second all-gather of the norm's chunk
// (fsdp-autodiff: only the chunk is kept from forward to backward, as in
// Megatron-LM), marked nn.sp_regather and issued before the up linear's
// grad-input GEMM, which it overlaps; the data input needs no gradient, so
// the entry split has no VJP.
// VJP: %[[N:.*]] = nn.layer_norm
// VJP: nn.loss_seed
// VJP: nn.sp_split %{{.*}} {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// VJP: nn.layer_norm_grad
// VJP-NEXT: nn.tp_all_reduce %{{.*}} : tensor<8xf32>
// VJP-NEXT: nn.tp_all_reduce %{{.*}} : tensor<8xf32>
// VJP-NEXT: nn.reduce_sum
// VJP-NEXT: nn.tp_all_reduce %{{.*}} : tensor<8xf32>
// VJP-NEXT: nn.sp_all_gather %{{.*}} {dim = 1 : i64, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// VJP: %[[DY:.*]] = nn.gelu_grad
// VJP-NEXT: %[[AGAIN:.*]] = nn.sp_all_gather %[[N]] {dim = 1 : i64, nn.sp_regather, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
// VJP-NEXT: nn.matmul %[[DY]], %arg4
// VJP-NEXT: nn.matmul %[[DY]], %[[AGAIN]] {transpose_a = true}
// VJP-NEXT: nn.reduce_sum
// VJP-NEXT: nn.sp_reduce_scatter %{{.*}} {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
// VJP-NEXT: nn.layer_norm_grad
// VJP-NEXT: nn.tp_all_reduce
// VJP-NEXT: nn.add
// VJP-NEXT: nn.tp_all_reduce
// VJP-NEXT: nn.add
// VJP-NEXT: return

// OFF-NOT: nn.sp_
// OFF: nn.tp_copy
// OFF: nn.tp_all_reduce
// OFF-NOT: nn.sp_

func.func @forward(%x: tensor<2x4x8xf32> {nn.data = "features"}, %y: tensor<2x4xi32> {nn.data = "labels"},
                   %g: tensor<8xf32> {nn.param = "ln.weight"}, %bb: tensor<8xf32> {nn.param = "ln.bias"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %b1: tensor<16xf32> {nn.param = "up.bias"},
                   %w2: tensor<8x16xf32> {nn.param = "down.weight"}, %b2: tensor<8xf32> {nn.param = "down.bias"},
                   %w3: tensor<10x8xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %n = nn.layer_norm %x, %g, %bb {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %h = nn.linear %n, %w1, %b1 : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %a = nn.gelu %h : tensor<2x4x16xf32>
  %o = nn.linear %a, %w2, %b2 : (tensor<2x4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %r = nn.add %x, %o : tensor<2x4x8xf32>
  %n2 = nn.layer_norm %r, %g, %bb {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = nn.linear %n2, %w3 : (tensor<2x4x8xf32>, tensor<10x8xf32>) -> tensor<2x4x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
