// RUN: fsdp-opt %s -split-input-file -verify-diagnostics
// nn.init takes exactly the specs fsdp-run executes (fsdp/InitSpec.h; the
// runtime side is test/unit/InitSpecTest.cpp and
// test/lit/Integration/init-specs.test).

// constant(v), which fsdp-run always executed, and white space inside the
// parentheses.
func.func @accepted(%a: tensor<4xf32> {nn.param = "a", nn.init = "constant(-0.5)"},
                    %b: tensor<4xf32> {nn.param = "b", nn.init = "uniform( 0.5 )"},
                    %c: tensor<4xf32> {nn.param = "c", nn.init = "normal(0)"}) {
  return
}

// -----

// A negative scale, which fsdp-run used to accept.
// expected-error @+1 {{'nn.init' on argument of type 'tensor<4xf32>' must be one of "zeros", "ones", "uniform(a)", "normal(std)" with a non-negative number, got "normal(-0.02)"; "constant(v)" takes any finite number}}
func.func @negative(%w: tensor<4xf32> {nn.param = "w", nn.init = "normal(-0.02)"}) {
  return
}

// -----

// A number that is not finite, which both used to accept.
// expected-error @+1 {{got "uniform(1e400)"}}
func.func @overflow(%w: tensor<4xf32> {nn.param = "w", nn.init = "uniform(1e400)"}) {
  return
}

// -----

// expected-error @+1 {{got "constant(inf)"}}
func.func @infinite(%w: tensor<4xf32> {nn.param = "w", nn.init = "constant(inf)"}) {
  return
}
