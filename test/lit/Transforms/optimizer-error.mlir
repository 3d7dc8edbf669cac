// RUN: fsdp-opt %s --fsdp-optimizer -split-input-file -verify-diagnostics
// The diagnostics of fsdp-optimizer on IR it cannot append an update to
// (option errors are tested with the options).

// expected-error @+1 {{expects a func.func with a body (the model's forward function), found none}}
module {
  func.func private @external(tensor<2xf32>) -> tensor<f32>
}

// -----

// expected-error @+1 {{expects exactly one function whose result is marked 'nn.loss' (or a single function), found 2 functions}}
module {
  func.func @a() {
    return
  }
  func.func @b() {
    return
  }
}

// -----

// A forward function (fsdp-autodiff not run): a loss but no gradient.
// expected-error @+1 {{expects a loss and gradients marked 'nn.grad_of' (run fsdp-autodiff first)}}
func.func @forward(%w: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Gradients but no loss result.
// expected-error @+1 {{expects a loss and gradients marked 'nn.grad_of' (run fsdp-autodiff first)}}
func.func @no_loss(%w: tensor<2xf32> {nn.param = "w"}) -> (tensor<2xf32> {nn.grad_of = "w"}) {
  return %w : tensor<2xf32>
}

// -----

// expected-error @+1 {{returns the gradient of unknown parameter 'v'}}
func.func @unknown(%w: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}, tensor<2xf32> {nn.grad_of = "v"}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<2xf32>
}
