// RUN: fsdp-opt %s --fsdp-micro-batch="micro-batches=3" -split-input-file -verify-diagnostics
// The diagnostics of fsdp-micro-batch on IR it cannot cut into 3 micro-batches
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

// A forward function before fsdp-autodiff: no seed, no gradient.
// expected-error @+1 {{fsdp-micro-batch expects the output of fsdp-autodiff (a loss, its seed and gradients)}}
func.func @forward(%x: tensor<6x2xf32> {nn.data = "features"}, %w: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The batch of 4 does not divide into 3 micro-batches.
// expected-error @+1 {{the batch of data argument #0 does not divide into 3 micro-batches}}
func.func @batch(%x: tensor<4x2xf32> {nn.data = "features"}, %w: tensor<2xf32> {nn.param = "w"})
    -> (tensor<f32> {nn.loss}, tensor<2xf32> {nn.grad_of = "w"}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
  %g = nn.add %w, %w : tensor<2xf32>
  return %l, %g : tensor<f32>, tensor<2xf32>
}
