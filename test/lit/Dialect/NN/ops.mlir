// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// Every nn op parses, verifies and prints back.

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<4x3xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %w: tensor<5x3xf32> {nn.param = "l.weight", nn.init = "normal(0.02)"},
                   %b: tensor<5xf32> {nn.param = "l.bias", nn.init = "zeros", nn.trainable = false},
                   %step: tensor<i64> {nn.step}) -> (tensor<f32> {nn.loss}) {
  // CHECK: nn.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %h = nn.linear %x, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: nn.linear %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %h0 = nn.linear %x, %w : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %m = nn.matmul %h, %x {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %a = nn.add %h, %h0 : tensor<4x5xf32>
  %p = nn.mul %a, %h : tensor<4x5xf32>
  %r = nn.relu %p : tensor<4x5xf32>
  // CHECK: nn.gelu %{{.*}} {approximate = "tanh"} : tensor<4x5xf32>
  %g = nn.gelu %r {approximate = "tanh"} : tensor<4x5xf32>
  %rg = nn.relu_grad %p, %g : tensor<4x5xf32>
  %gg = nn.gelu_grad %r, %rg : tensor<4x5xf32>
  // CHECK: nn.reduce_sum %{{.*}} {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
  %s = nn.reduce_sum %gg {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
  // CHECK: nn.broadcast %{{.*}}, %{{.*}} {axes = array<i64: 0>} : (tensor<5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %bc = nn.broadcast %s, %gg {axes = array<i64: 0>} : (tensor<5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %loss = nn.cross_entropy %bc, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  %dl = nn.cross_entropy_grad %bc, %y, %loss : (tensor<4x5xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x5xf32>
  // CHECK: nn.sgd_update
  %ws = nn.sgd_update %w, %m {lr = 1.0e-01 : f64} : tensor<5x3xf32>
  // CHECK: nn.adamw_update
  %np, %nm, %nv = nn.adamw_update %w, %m, %m, %m, %step {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : tensor<5x3xf32>, tensor<i64>
  return %loss : tensor<f32>
}
