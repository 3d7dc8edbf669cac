// RUN: fsdp-opt %s --fsdp-autodiff -split-input-file -verify-diagnostics
// The diagnostics of fsdp-autodiff on forward functions it cannot
// differentiate (option errors, e.g. frozen patterns, are tested with the
// options).

// expected-error @+1 {{expects a func.func with a body (the model's forward function), found none}}
module {
  func.func private @external(tensor<2xf32>) -> tensor<f32>
}

// -----

// expected-error @+1 {{expects exactly one function whose result is marked 'nn.loss' (or a single function), found 2 functions}}
module {
  func.func @a(%w: tensor<2xf32> {nn.param = "w"}) {
    return
  }
  func.func @b(%w: tensor<2xf32> {nn.param = "w"}) {
    return
  }
}

// -----

// expected-error @+1 {{expects a single-block forward function}}
func.func @blocks(%w: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
^unreachable:
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{expects the forward function to return exactly one value, the scalar loss; it returns 2}}
func.func @two_results(%w: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32>, tensor<2xf32>) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<2xf32>
}

// -----

// expected-error @+1 {{expects the forward function to return exactly one value, the scalar loss; it returns 0}}
func.func @no_result(%w: tensor<2xf32> {nn.param = "w"}) {
  return
}

// -----

func.func @integer_loss(%w: tensor<2xf32> {nn.param = "w"}, %n: tensor<i32>) -> tensor<i32> {
  // expected-error @+1 {{expects the loss to be a scalar float tensor, got 'tensor<i32>'}}
  return %n : tensor<i32>
}

// -----

// Every parameter frozen: nothing to differentiate.
// expected-error @+1 {{has no trainable parameter (an argument with 'nn.param' that is not frozen): nothing to train}}
func.func @all_frozen(%w: tensor<2xf32> {nn.param = "w", nn.trainable = false}) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The loss depends only on a frozen parameter.
func.func @frozen_path(%w: tensor<2xf32> {nn.param = "w"}, %f: tensor<2xf32> {nn.param = "f", nn.trainable = false}) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %f {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  // expected-error @+1 {{the loss does not depend on any trainable parameter}}
  return %l : tensor<f32>
}

// -----

// An op without a VJP (AutodiffOpInterface) between a parameter and the loss.
func.func @no_vjp(%w: tensor<f32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  // expected-error @+1 {{'arith.addf' op is not differentiable, but the loss depends on it through a trainable parameter}}
  %l = arith.addf %w, %w : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A VJP that cannot be built: the gradient of a rank-3 weight of a matmul
// (viewed as a [4, 5] matrix) is not a plain matrix product.
func.func @vjp_shape(%x: tensor<3x4xf32> {nn.data = "features"}, %w: tensor<1x4x5xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  // expected-error @+1 {{'nn.matmul' op cannot differentiate: the gradient of an operand of shape [1, 4, 5] is not a plain matrix product of the operands (reshape first)}}
  %h = nn.matmul %x, %w : (tensor<3x4xf32>, tensor<1x4x5xf32>) -> tensor<3x5xf32>
  %l = nn.reduce_sum %h {axes = array<i64: 0, 1>} : tensor<3x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}
