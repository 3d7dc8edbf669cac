// RUN: fsdp-opt %s --fsdp-collectives -split-input-file -verify-diagnostics
// The diagnostics of fsdp-collectives on IR it cannot place collectives in.

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

// Forward ends at the op that defines the loss: a function without one.
// expected-error @+1 {{expects a result marked 'nn.loss' computed in the function}}
func.func @no_loss(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}

// -----

// expected-error @+1 {{expects a result marked 'nn.loss' computed in the function}}
func.func @loss_is_argument(%l: tensor<f32>) -> (tensor<f32> {nn.loss}) {
  return %l : tensor<f32>
}

// -----

// Parameters are read through fsdp.param_view of a gathered buffer; another
// use of the buffer cannot be re-materialised with the gather.
module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], numel = 4 : i64, offsets = array<i64: 0>, padded_numel = 4 : i64, shapes = [array<i64: 4>], shard_numel = 2 : i64, trainable = array<i1: true>}
  func.func @direct_use(%p: tensor<2xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}) -> (tensor<f32> {nn.loss}) {
    %full = fsdp.all_gather @fc %p : tensor<2xf32> -> tensor<4xf32>
    %w = fsdp.param_view %full "fc.weight" at 0 : tensor<4xf32> -> tensor<4xf32>
    %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    // expected-error @+1 {{'nn.reduce_sum' op uses a gathered buffer directly; expected fsdp.param_view}}
    %s = nn.reduce_sum %full {axes = array<i64: 0>} : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
