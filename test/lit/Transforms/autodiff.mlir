// RUN: fsdp-opt %s --fsdp-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// The forward function returns the loss followed by one gradient per
// trainable parameter; backward ops follow forward ops in reverse order.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: -> (tensor<f32> {nn.loss}, tensor<3x4xf32> {nn.grad_of = "fc.weight"}, tensor<3xf32> {nn.grad_of = "fc.bias"})
func.func @mlp(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
               %w: tensor<3x4xf32> {nn.param = "fc.weight"}, %b: tensor<3xf32> {nn.param = "fc.bias"})
    -> (tensor<f32> {nn.loss}) {
  // CHECK: %[[H:.*]] = nn.linear %arg0, %arg2, %arg3
  %h = nn.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: %[[A:.*]] = nn.relu %[[H]]
  %a = nn.relu %h : tensor<2x3xf32>
  // CHECK: %[[L:.*]] = nn.cross_entropy %[[A]], %arg1
  %l = nn.cross_entropy %a, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  // CHECK: %[[ONE:.*]] = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
  // CHECK: %[[DA:.*]] = nn.cross_entropy_grad %[[A]], %arg1, %[[ONE]]
  // CHECK: %[[DH:.*]] = nn.relu_grad %[[H]], %[[DA]]
  // The input is data: no dx is computed.
  // CHECK-NOT: nn.matmul %[[DH]], %arg2 :
  // CHECK: %[[DW:.*]] = nn.matmul %[[DH]], %arg0 {transpose_a = true}
  // CHECK: %[[DB:.*]] = nn.reduce_sum %[[DH]] {axes = array<i64: 0>}
  // CHECK: return %[[L]], %[[DW]], %[[DB]]
  return %l : tensor<f32>
}

// -----

// A value used twice gets the sum of both cotangents; a frozen parameter gets
// no gradient; a trainable one that does not reach the loss gets zeros.
// CHECK-LABEL: func.func @fanout
// CHECK-SAME: -> (tensor<f32> {nn.loss}, tensor<2x2xf32> {nn.grad_of = "w"}, tensor<5xf32> {nn.grad_of = "unused"})
func.func @fanout(%x: tensor<2x2xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
                  %w: tensor<2x2xf32> {nn.param = "w"}, %f: tensor<2x2xf32> {nn.param = "frozen", nn.trainable = false},
                  %u: tensor<5xf32> {nn.param = "unused"}) -> (tensor<f32> {nn.loss}) {
  %m = nn.mul %w, %w : tensor<2x2xf32>
  %s = nn.add %m, %f : tensor<2x2xf32>
  %l = nn.cross_entropy %s, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  // CHECK: nn.cross_entropy_grad
  // CHECK: %[[G1:.*]] = nn.mul %{{.*}}, %arg2
  // CHECK: %[[G2:.*]] = nn.mul %{{.*}}, %arg2
  // CHECK: %[[G:.*]] = nn.add %[[G1]], %[[G2]]
  // CHECK: %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<5xf32>
  // CHECK: return %{{.*}}, %[[G]], %[[Z]]
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{has no trainable parameter (an argument with 'nn.param' that is not frozen): nothing to train}}
func.func @no_params(%x: tensor<2x2xf32>, %y: tensor<2xi32>) -> (tensor<f32> {nn.loss}) {
  %l = nn.cross_entropy %x, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @not_scalar(%w: tensor<2xf32> {nn.param = "w"}) -> tensor<2xf32> {
  // expected-error @+1 {{expects the loss to be a scalar float tensor, got 'tensor<2xf32>'}}
  return %w : tensor<2xf32>
}

// -----

func.func @detached(%x: tensor<2x2xf32>, %y: tensor<2xi32>, %w: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  %l = nn.cross_entropy %x, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
  // expected-error @+1 {{the loss does not depend on any trainable parameter}}
  return %l : tensor<f32>
}

// -----

// Attention's VJP reads the forward's output and its statistics (the
// log-sum-exp, f32 [B, Hq, T]; f64 for f64) rather than recomputing them.
// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x8xf32> {nn.param = "q"}, %k: tensor<2x4x4xf32> {nn.param = "k"},
                     %v: tensor<2x4x4xf32> {nn.param = "v"}) -> (tensor<f32> {nn.loss}) {
  // CHECK: %[[A:.*]], %[[L:.*]] = nn.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %a, %lse = nn.attention %q, %k, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %l = nn.reduce_sum %a {axes = array<i64: 0, 1, 2>} : tensor<2x4x8xf32> -> tensor<f32>
  // CHECK: %[[G:.*]] = nn.broadcast
  // CHECK: nn.attention_grad %arg0, %arg1, %arg2, %[[A]], %[[L]], %[[G]] {num_heads = 2 : i64, num_kv_heads = 1 : i64}
  return %l : tensor<f32>
}
