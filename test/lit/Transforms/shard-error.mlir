// RUN: fsdp-opt %s --fsdp-shard="world-size=2" -split-input-file -verify-diagnostics
// The diagnostics of fsdp-shard on IR it cannot shard (option errors are
// tested with the options).

// expected-error @+1 {{expects a func.func with a body (the model's forward function), found none}}
module {
  func.func private @external(tensor<2xf32>) -> tensor<f32>
}

// -----

// expected-error @+1 {{expects exactly one function whose result is marked 'nn.loss' (or a single function), found 2 functions}}
module {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
  func.func @a(%w: tensor<2xf32> {nn.param = "fc.weight"}) {
    return
  }
  func.func @b(%w: tensor<2xf32> {nn.param = "fc.weight"}) {
    return
  }
}

// -----

// expected-error @+1 {{fsdp-shard: no fsdp.unit declared (run fsdp-wrap first)}}
module {
  func.func @unwrapped(%x: tensor<4x2xf32> {nn.data = "features"}, %w: tensor<2x2xf32> {nn.param = "fc.weight"}) {
    return
  }
}

// -----

fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2, 2>], trainable = array<i1: true>}
// expected-error @+1 {{global batch 3 (dimension 0 of data argument #0) is not divisible by world size 2}}
func.func @odd_batch(%x: tensor<3x2xf32> {nn.data = "features"}, %w: tensor<2x2xf32> {nn.param = "fc.weight"}) {
  return
}

// -----

// The batch splits over the ranks (6 -> 3), but a micro-batch split of 2
// inside the step no longer divides it.
fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2, 2>], trainable = array<i1: true>}
func.func @micro(%x: tensor<6x2xf32> {nn.data = "features"}, %w: tensor<2x2xf32> {nn.param = "fc.weight"}) {
  // expected-error @+2 {{'nn.micro_batch' op expects the batch 3 to divide into 2 micro-batches}}
  // expected-error @+1 {{cannot split the batch over 2 ranks here}}
  %x0 = nn.micro_batch %x {count = 2 : i64, index = 0 : i64} : tensor<6x2xf32> -> tensor<3x2xf32>
  return
}

// -----

// One flat buffer per model dtype: units of different element types.
fsdp.unit @a params ["a.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
// expected-error @+1 {{'fsdp.unit' op has element type 'f64' but unit @a has 'f32': one model, one parameter dtype}}
fsdp.unit @b params ["b.weight"] {element_type = f64, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
func.func @dtypes(%a: tensor<2xf32> {nn.param = "a.weight"}, %b: tensor<2xf64> {nn.param = "b.weight"}) {
  return
}

// -----

// A wrapped but undifferentiated step: no loss result.
fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
// expected-error @+1 {{expects exactly one result marked 'nn.loss'}}
func.func @no_loss(%w: tensor<2xf32> {nn.param = "fc.weight"}) -> tensor<2xf32> {
  return %w : tensor<2xf32>
}

// -----

// A loss but no optimizer update of the trainable parameter.
fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
// expected-error @+1 {{expects exactly one optimizer update of trainable parameter 'fc.weight' (run fsdp-autodiff and fsdp-optimizer first)}}
func.func @no_update(%w: tensor<2xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Two parameters of one unit updated with different learning rates.
fsdp.unit @fc params ["fc.weight", "fc.bias"] {element_type = f32, inits = ["zeros", "zeros"], shapes = [array<i64: 2>, array<i64: 2>], trainable = array<i1: true, true>}
func.func @two_configs(%w: tensor<2xf32> {nn.param = "fc.weight"}, %b: tensor<2xf32> {nn.param = "fc.bias"})
    -> (tensor<f32> {nn.loss}, tensor<2xf32> {nn.param = "fc.weight"}, tensor<2xf32> {nn.param = "fc.bias"}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  %dw = nn.add %w, %b : tensor<2xf32>
  %w_new = nn.sgd_update %w, %dw {lr = 1.000000e-01 : f64} : tensor<2xf32>
  // expected-error @+1 {{'nn.sgd_update' op differs from the other updates of unit 'fc': one flat shard takes one optimizer configuration}}
  %b_new = nn.sgd_update %b, %dw {lr = 2.000000e-01 : f64} : tensor<2xf32>
  return %l, %w_new, %b_new : tensor<f32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// The updated parameter must only be returned: the update of a flat shard
// has no per-parameter result to read inside the step.
fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
func.func @reads_update(%w: tensor<2xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}, tensor<2xf32> {nn.param = "fc.weight"}) {
  %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  %dw = nn.add %w, %w : tensor<2xf32>
  %w_new = nn.sgd_update %w, %dw {lr = 1.000000e-01 : f64} : tensor<2xf32>
  // expected-error @+1 {{'nn.reduce_sum' op uses an updated parameter inside the step}}
  %s = nn.reduce_sum %w_new {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
  return %l, %w_new : tensor<f32>, tensor<2xf32>
}
