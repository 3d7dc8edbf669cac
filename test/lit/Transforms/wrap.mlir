// RUN: fsdp-opt %s --fsdp-wrap -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=MODULE
// RUN: fsdp-opt %s --fsdp-wrap="unit-depth=1" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=DEPTH
// RUN: not fsdp-opt %s --fsdp-wrap="units=h.0,h" -split-input-file 2>&1 | FileCheck %s --check-prefix=EXPLICIT
// RUN: not fsdp-opt %s --fsdp-wrap="unit-depth=-1" 2>&1 | FileCheck %s --check-prefix=NEG

// Units follow first use: h.0 before h.1 before head, whatever the argument order.
// MODULE: fsdp.unit @h.0.fc params ["h.0.fc.weight", "h.0.fc.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], shapes = [array<i64: 3, 4>, array<i64: 3>], trainable = array<i1: true, true>}
// MODULE: fsdp.unit @h.1.fc params ["h.1.fc.weight"] {element_type = f32, inits = ["normal(0.02)"]
// MODULE: fsdp.unit @head params ["head.weight"]
// MODULE-NOT: fsdp.unit
// MODULE: // {{-+}}

// DEPTH: fsdp.unit @h params ["h.0.fc.weight", "h.0.fc.bias", "h.1.fc.weight"]
// DEPTH: fsdp.unit @head params ["head.weight"]

// EXPLICIT: fsdp.unit @h.0 params ["h.0.fc.weight", "h.0.fc.bias"]
// EXPLICIT: fsdp.unit @h params ["h.1.fc.weight"]
// EXPLICIT: fsdp.unit @root params ["head.weight"]

// NEG: fsdp-wrap: unit-depth must be >= 0, got -1

func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
             %head: tensor<5x3xf32> {nn.param = "head.weight"},
             %w1: tensor<3x3xf32> {nn.param = "h.1.fc.weight", nn.init = "normal(0.02)"},
             %w0: tensor<3x4xf32> {nn.param = "h.0.fc.weight"}, %b0: tensor<3xf32> {nn.param = "h.0.fc.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h0 = nn.linear %x, %w0, %b0 : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %h1 = nn.linear %h0, %w1 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %o = nn.linear %h1, %head : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  %l = nn.cross_entropy %o, %y : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error-re @+1 {{unit '{{a|root|size.0}}' mixes element types 'f32' and 'f64' (parameter 'a.y'): one flat buffer has one dtype}}
func.func @dtypes(%p: tensor<2xf32> {nn.param = "a.x"}, %q: tensor<2xf64> {nn.param = "a.y"}) {
  return
}

// -----

// Frozen and trainable parameters of one unit get two flat buffers.
// MODULE-LABEL: fsdp.unit @b params ["b.x"]
// MODULE-SAME: trainable = array<i1: true>
// MODULE: fsdp.unit @b.frozen params ["b.y"]
// MODULE-SAME: trainable = array<i1: false>
func.func @frozen(%p: tensor<2xf32> {nn.param = "b.x"}, %q: tensor<2xf32> {nn.param = "b.y", nn.trainable = false}) {
  return
}

// -----

// expected-error @+1 {{parameter 'c.x' is declared twice (arguments #0 and #1)}}
func.func @twice(%p: tensor<2xf32> {nn.param = "c.x"}, %q: tensor<2xf32> {nn.param = "c.x"}) {
  return
}

// -----

// RUN: fsdp-opt %s --fsdp-wrap="policy=block" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=BLOCK
// BLOCK-LABEL: fsdp.unit @root params ["transformer.wte.weight", "transformer.ln_f.weight"]
// BLOCK: fsdp.unit @transformer.h.0 params ["transformer.h.0.mlp.weight", "transformer.h.0.attn.weight"]
// BLOCK: fsdp.unit @transformer.h.1 params ["transformer.h.1.mlp.weight"]
func.func @blocks(%t: tensor<2x3xi32> {nn.data = "tokens"}, %y: tensor<2x3xi32> {nn.data = "targets"},
                  %wte: tensor<7x4xf32> {nn.param = "transformer.wte.weight"},
                  %a0: tensor<4x4xf32> {nn.param = "transformer.h.0.attn.weight"},
                  %m0: tensor<4x4xf32> {nn.param = "transformer.h.0.mlp.weight"},
                  %m1: tensor<4x4xf32> {nn.param = "transformer.h.1.mlp.weight"},
                  %lnf: tensor<4xf32> {nn.param = "transformer.ln_f.weight"}) -> (tensor<f32> {nn.loss}) {
  %x = nn.embedding %t, %wte : (tensor<2x3xi32>, tensor<7x4xf32>) -> tensor<2x3x4xf32>
  %n = nn.rms_norm %x, %lnf {eps = 1.0e-05 : f64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %h0 = nn.linear %n, %m0 : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %h1 = nn.linear %h0, %a0 : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %h2 = nn.linear %h1, %m1 : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %o = nn.linear %h2, %wte : (tensor<2x3x4xf32>, tensor<7x4xf32>) -> tensor<2x3x7xf32>
  %l = nn.cross_entropy %o, %y : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// RUN: fsdp-opt %s --fsdp-wrap="policy=size min-unit-numel=20" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=SIZE
// Units fill in first-use order until they hold 20 elements: 12 + 12, then 12 + 4.
// SIZE-LABEL: fsdp.unit @size.0 params ["l0.weight", "l1.weight"]
// SIZE: fsdp.unit @size.1 params ["l2.weight", "l2.bias"]
func.func @sizes(%x: tensor<2x3xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
                 %w0: tensor<4x3xf32> {nn.param = "l0.weight"}, %w1: tensor<3x4xf32> {nn.param = "l1.weight"},
                 %w2: tensor<4x3xf32> {nn.param = "l2.weight"}, %b2: tensor<4xf32> {nn.param = "l2.bias"}) -> (tensor<f32> {nn.loss}) {
  %h0 = nn.linear %x, %w0 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %h1 = nn.linear %h0, %w1 : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
  %h2 = nn.linear %h1, %w2, %b2 : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %l = nn.cross_entropy %h2, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// RUN: not fsdp-opt %s --fsdp-wrap="units=transformer.wte,lm_head" -split-input-file 2>&1 | FileCheck %s --check-prefix=TIED
// TIED: error: parameter 'transformer.wte.weight' is tied to 'lm_head.weight' (one parameter, two names), but the wrap request puts them in units 'transformer.wte' and 'lm_head'; tied parameters live in one unit
func.func @tied(%t: tensor<2x3xi32> {nn.data = "tokens"}, %y: tensor<2x3xi32> {nn.data = "targets"},
                %wte: tensor<7x4xf32> {nn.param = "transformer.wte.weight", nn.tied = ["lm_head.weight"]}) -> (tensor<f32> {nn.loss}) {
  %x = nn.embedding %t, %wte : (tensor<2x3xi32>, tensor<7x4xf32>) -> tensor<2x3x4xf32>
  %o = nn.linear %x, %wte : (tensor<2x3x4xf32>, tensor<7x4xf32>) -> tensor<2x3x7xf32>
  %l = nn.cross_entropy %o, %y : (tensor<2x3x7xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
