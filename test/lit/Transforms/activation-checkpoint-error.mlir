// RUN: fsdp-opt %s --fsdp-activation-checkpoint="activation-checkpoint=full ac-units=h.*" -split-input-file -verify-diagnostics
// The option errors that need no IR:
// RUN: not fsdp-opt %s --fsdp-activation-checkpoint="ac-units=h.*" -split-input-file 2>&1 | FileCheck %s --check-prefix=NOMODE
// RUN: not fsdp-opt %s --fsdp-activation-checkpoint="activation-checkpoint=full ac-units=h.[" -split-input-file 2>&1 | FileCheck %s --check-prefix=GLOB
// RUN: not fsdp-opt %s --fsdp-activation-checkpoint="activation-checkpoint=partial" 2>&1 | FileCheck %s --check-prefix=ENUM
// RUN: not fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="activation-checkpoint=selective ac-units=transformer.h.*" 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: not fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="policy=block activation-checkpoint=full" 2>&1 | FileCheck %s --check-prefix=ROOT

// NOMODE: error: fsdp-activation-checkpoint: ac-units needs activation-checkpoint=full, selective or selective-op
// GLOB: error: fsdp-activation-checkpoint: ac-units pattern 'h.[' is not a valid glob
// ENUM: for the --activation-checkpoint option: Cannot find option named 'partial'!
// PIPE: error: fsdp-activation-checkpoint: ac-units pattern 'transformer.h.*' matches no FSDP unit (units: fc1, fc2, fc3)
// The MLP's parameters have no block index: policy=block puts them all in root.
// ROOT: error: fsdp-activation-checkpoint: no unit to checkpoint: the only unit is 'root' (name it with ac-units=root)
// RUN: not fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="activation-checkpoint=full ac-regions=block" 2>&1 | FileCheck %s --check-prefix=NOBLOCK
// RUN: not fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="activation-checkpoint=full ac-regions=block ac-units=fc1" 2>&1 | FileCheck %s --check-prefix=BLOCKGLOB
// RUN: fsdp-opt %S/../../examples/mlp.mlir -o /dev/null --fsdp-pipeline="ac-regions=block" 2>&1 | FileCheck %s --check-prefix=NOMODEBLOCK
// NOMODEBLOCK: warning: fsdp-pipeline: ac-regions=block has no effect with activation-checkpoint=none (nothing is checkpointed): ignored
// NOBLOCK: error: fsdp-activation-checkpoint: no transformer block to checkpoint (ac-regions=block): no parameter's FQN has a block index (name the rest with ac-units=root)
// BLOCKGLOB: error: fsdp-activation-checkpoint: ac-units pattern 'fc1' matches no transformer block (blocks: root)

// Before fsdp-wrap: no unit.
// expected-error @+1 {{fsdp-activation-checkpoint: the module declares no FSDP unit (run fsdp-wrap first)}}
module {
  func.func @f(%w: tensor<2xf32> {nn.param = "h.0.w"}) -> (tensor<f32> {nn.loss}) {
    %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// expected-error @+1 {{fsdp-activation-checkpoint: ac-units pattern 'h.*' matches no FSDP unit (units: fc, root)}}
module {
  fsdp.unit @fc params ["fc.w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
  fsdp.unit @root params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
  func.func @f(%w: tensor<2xf32> {nn.param = "fc.w"}, %v: tensor<2xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
    %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A unit the pattern names: no diagnostic.
module {
  fsdp.unit @h.0 params ["h.0.w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 2>], trainable = array<i1: true>}
  func.func @f(%w: tensor<2xf32> {nn.param = "h.0.w"}) -> (tensor<f32> {nn.loss}) {
    %l = nn.reduce_sum %w {axes = array<i64: 0>} : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
