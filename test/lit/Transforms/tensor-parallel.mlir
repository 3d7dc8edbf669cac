// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 sequence-parallel=false" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 sequence-parallel=false" --fsdp-autodiff | FileCheck %s --check-prefix=VJP
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=1" | FileCheck %s --check-prefix=ONE

// A norm, then a Megatron MLP (up column-parallel, down row-parallel), then a
// replicated head (features [4, 8] have no sequence to split:
// sequence-parallel=false; sequence-parallel.mlir has the split): fc1 -> gelu -> fc2 is the region, the head's input comes
// from a norm, so it stays whole.

// CHECK: module attributes {fsdp.tensor_parallel = 2 : i64, fsdp.tensor_slices = {down.weight = array<i64: 1, 1, 8, 16>, up.bias = array<i64: 0, 1, 16>, up.weight = array<i64: 0, 1, 16, 8>}}
// CHECK: func.func @forward(%{{.*}}: tensor<4x8xf32> {nn.data = "features"}, %{{.*}}: tensor<4xi32> {nn.data = "labels"}, %{{.*}}: tensor<8xf32> {nn.param = "ln.weight"}, %{{.*}}: tensor<8xf32> {nn.param = "ln.bias"}, %{{.*}}: tensor<8x8xf32> {nn.param = "up.weight"}, %{{.*}}: tensor<8xf32> {nn.param = "up.bias"}, %{{.*}}: tensor<8x8xf32> {nn.param = "down.weight"}, %{{.*}}: tensor<8xf32> {nn.param = "down.bias"}, %{{.*}}: tensor<10x8xf32> {nn.param = "head.weight"})
// CHECK: %[[N:.*]] = nn.layer_norm
// CHECK: %[[F:.*]] = nn.tp_copy %[[N]] : tensor<4x8xf32>
// CHECK: %[[H:.*]] = nn.linear %[[F]], %arg4, %arg5 : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[A:.*]] = nn.gelu %[[H]] : tensor<4x8xf32>
// CHECK: %[[P:.*]] = nn.linear %[[A]], %arg6 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = nn.tp_all_reduce %[[P]] : tensor<4x8xf32>
// CHECK: %[[B:.*]] = nn.broadcast %arg7, %[[S]] {axes = array<i64: 0>}
// CHECK: %[[O:.*]] = nn.add %[[S]], %[[B]] : tensor<4x8xf32>
// CHECK: nn.layer_norm %[[O]]
// CHECK: nn.linear %{{.*}}, %arg8 : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>

// The backward: g's VJP is f (a copy), f's VJP the all-reduce of the norm
// output's gradient (Megatron's conjugate pair).
// VJP-COUNT-2: nn.tp_all_reduce
// VJP-NOT: nn.tp_all_reduce
// VJP: return

// ONE-NOT: fsdp.tensor_parallel
// ONE-NOT: nn.tp_

func.func @forward(%x: tensor<4x8xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %g: tensor<8xf32> {nn.param = "ln.weight"}, %bb: tensor<8xf32> {nn.param = "ln.bias"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %b1: tensor<16xf32> {nn.param = "up.bias"},
                   %w2: tensor<8x16xf32> {nn.param = "down.weight"}, %b2: tensor<8xf32> {nn.param = "down.bias"},
                   %w3: tensor<10x8xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %n = nn.layer_norm %x, %g, %bb {eps = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %h = nn.linear %n, %w1, %b1 : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = nn.gelu %h : tensor<4x16xf32>
  %o = nn.linear %a, %w2, %b2 : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %n2 = nn.layer_norm %o, %g, %bb {eps = 1.0e-05 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %logits = nn.linear %n2, %w3 : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
