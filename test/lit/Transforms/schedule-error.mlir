// RUN: fsdp-opt %s --fsdp-schedule -split-input-file -verify-diagnostics
// The diagnostics of fsdp-schedule on IR it cannot schedule.

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

// The default (auto) list scheduler plans memory, which sizes every buffer:
// an element type it cannot size is an error at the value.
// expected-error @+1 {{the memory plan supports statically shaped tensors of f32, f64, bf16, f16, i32 and i64, got 'tensor<4xi8>'}}
func.func @bytes(%tokens: tensor<4xi8> {nn.data = "tokens"}, %w: tensor<2xf32>) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
