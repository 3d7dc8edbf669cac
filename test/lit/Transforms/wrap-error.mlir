// RUN: fsdp-opt %s --fsdp-wrap -split-input-file -verify-diagnostics
// The diagnostics of fsdp-wrap on IR it cannot wrap (option errors, and the
// tied parameter split by units=, are tested with the options in wrap.mlir).

// expected-error @+1 {{expects a func.func with a body (the model's forward function), found none}}
module {
  func.func private @external(tensor<2xf32>) -> tensor<f32>
}

// -----

// expected-error @+1 {{expects exactly one function whose result is marked 'nn.loss' (or a single function), found 2 functions}}
module {
  func.func @a(%w: tensor<2xf32> {nn.param = "a.w"}) {
    return
  }
  func.func @b(%w: tensor<2xf32> {nn.param = "b.w"}) {
    return
  }
}

// -----

// Wrapping twice.
// expected-error @+1 {{fsdp-wrap: the module already declares FSDP units}}
module {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
  func.func @wrapped(%w: tensor<2xf32> {nn.param = "fc.weight"}) {
    return
  }
}

// -----

// expected-error @+1 {{has no parameter (an argument with 'nn.param') to wrap}}
func.func @no_params(%x: tensor<2x2xf32> {nn.data = "features"}) {
  return
}

// -----

// expected-error @+1 {{parameter 'c.x' is declared twice (arguments #0 and #1); a tied parameter is one argument used twice}}
func.func @twice(%p: tensor<2xf32> {nn.param = "c.x"}, %q: tensor<2xf32> {nn.param = "c.x"}) {
  return
}

// -----

// One unit (module a), two dtypes.
// expected-error @+1 {{unit 'a' mixes element types 'f32' and 'f64' (parameter 'a.y'): one flat buffer has one dtype; wrap them into separate units with units=}}
func.func @dtypes(%p: tensor<2xf32> {nn.param = "a.x"}, %q: tensor<2xf64> {nn.param = "a.y"}) {
  return
}
