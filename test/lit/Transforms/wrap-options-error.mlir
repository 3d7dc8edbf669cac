// RUN: not fsdp-opt %s --fsdp-wrap="policy=block units=h.0" 2>&1 | FileCheck %s --check-prefix=BLOCK-UNITS
// RUN: not fsdp-opt %s --fsdp-wrap="policy=size unit-depth=1" 2>&1 | FileCheck %s --check-prefix=SIZE-DEPTH
// RUN: not fsdp-opt %s --fsdp-wrap="units=h.0 unit-depth=1" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not fsdp-opt %s --fsdp-wrap="min-unit-numel=10" 2>&1 | FileCheck %s --check-prefix=NUMEL
// RUN: not fsdp-opt %s --fsdp-wrap="policy=block min-unit-numel=10" 2>&1 | FileCheck %s --check-prefix=BLOCK-NUMEL
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 policy=block units=h.0" -o %t.mlir 2>&1 | FileCheck %s --check-prefix=BLOCK-UNITS
// RUN: not test -e %t.mlir
// Each wrap policy reads only its own options: units= and unit-depth are
// policy=module's (and units= names every unit, so unit-depth beside it would
// do nothing), min-unit-numel policy=size's. Given to another policy they were
// dropped without a word and the units were that policy's.
// RUN: fsdp-opt %s --fsdp-wrap="policy=size min-unit-numel=10" | FileCheck %s --check-prefix=SIZE

// BLOCK-UNITS: error: fsdp-wrap: units= needs policy=module (policy=block names its own units)
// SIZE-DEPTH: error: fsdp-wrap: unit-depth needs policy=module (policy=size names its own units)
// BOTH: error: fsdp-wrap: give units= or unit-depth, not both (units= names every unit itself)
// NUMEL: error: fsdp-wrap: min-unit-numel needs policy=size (policy=module does not fill units by size)
// BLOCK-NUMEL: error: fsdp-wrap: min-unit-numel needs policy=size (policy=block does not fill units by size)
// SIZE: fsdp.unit @size.0 params ["h.0.fc.weight"]
// SIZE: fsdp.unit @size.1 params ["h.0.fc.bias", "head.weight"]

func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
             %w0: tensor<3x4xf32> {nn.param = "h.0.fc.weight"}, %b0: tensor<3xf32> {nn.param = "h.0.fc.bias"},
             %head: tensor<5x3xf32> {nn.param = "head.weight"})
    -> (tensor<f32> {nn.loss}) {
  %h0 = nn.linear %x, %w0, %b0 : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %o = nn.linear %h0, %head : (tensor<2x3xf32>, tensor<5x3xf32>) -> tensor<2x5xf32>
  %l = nn.cross_entropy %o, %y : (tensor<2x5xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
