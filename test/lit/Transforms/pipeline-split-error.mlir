// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=3 pp-stage=0" -split-input-file -verify-diagnostics
// RUN: not fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-stage=0 pp-split=2" -split-input-file 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: pipeline-split-error.mlir:[[@LINE+13]]:1: error: fsdp-pipeline-split: pp-split boundary 2 is outside the model: the boundaries must increase within 1..1 (the model has 2 layers)
// A boundary inside the model that does not increase is named as such (it
// was "outside the model"), and an empty pp-split is refused (it meant the
// default split).
// RUN: not fsdp-opt %s --fsdp-pipeline-split="pp=3 pp-stage=0 pp-split=2,1" -split-input-file 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: error: fsdp-pipeline-split: pp-split boundary 1 does not increase (it follows 2): the boundaries must increase within 1..2 (the model has 3 layers)
// RUN: not fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-stage=0 pp-split=" -split-input-file 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: error: fsdp-pipeline-split: pp-split is empty: give P-1 increasing layer indices, or leave the option out for the default split
// The diagnostics of fsdp-pipeline-split, at the forward function or the
// parameter: more stages than layers, a split outside the model, tied
// weights used on three stages.

// expected-error @+1 {{fsdp-pipeline-split: pp=3 exceeds the 2 layers of the model (each stage needs at least one layer)}}
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"}) -> (tensor<f32> {nn.loss}) {
  %0 = nn.linear %x, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %1, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A weight tied across three stages (two are supported: each keeps a copy
// and they exchange their gradients).
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   // expected-error @+1 {{fsdp-pipeline-split: parameter 'wte' is used by 3 stages: tied weights are shared by two stages at most}}
                   %e: tensor<4x4xf32> {nn.param = "wte"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %w2: tensor<4x4xf32> {nn.param = "m.h.2.weight"}) -> (tensor<f32> {nn.loss}) {
  %e0 = nn.linear %x, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %0 = nn.linear %e0, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %t1 = nn.linear %1, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %t1, %w2 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %3 = nn.linear %2, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %3, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Three layers, no tied weight: pp-split=2,1 is inside the model but does
// not increase.
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %w2: tensor<4x4xf32> {nn.param = "m.h.2.weight"}) -> (tensor<f32> {nn.loss}) {
  %0 = nn.linear %x, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %1, %w2 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %2, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Layer indices that skip layers are refused, naming the deepest FQN: the
// split counts the layers from the largest index, and 10^8 once made it hold
// 10^8 layers until memory ran out (found by a helper).
// expected-error @+1 {{fsdp-pipeline-split: finds layer indices up to 100000000 ('m.h.100000000.weight') but no parameter of layer 1: the '.h.<i>.' / '.layers.<i>.' indices must count the layers from 0}}
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.100000000.weight"}) -> (tensor<f32> {nn.loss}) {
  %0 = nn.linear %x, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %1, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
