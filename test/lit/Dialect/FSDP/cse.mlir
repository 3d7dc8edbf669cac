// RUN: fsdp-opt %s --cse | FileCheck %s
// Collectives are not Pure: CSE must keep both all-gathers of the same unit
// (the backward re-gather after a reshard) and both reduce-scatters; it may
// merge the Pure views.

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.unit @u params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 4>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 2 : i64}
  // CHECK-LABEL: func.func @regather
  func.func @regather(%s: tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    // CHECK: %[[A:.*]] = fsdp.all_gather @u
    // CHECK: %[[B:.*]] = fsdp.all_gather @u
    %a = fsdp.all_gather @u %s : tensor<2xf32> -> tensor<4xf32>
    %b = fsdp.all_gather @u %s : tensor<2xf32> -> tensor<4xf32>
    // CHECK: %[[V:.*]] = fsdp.param_view %[[A]] "w" at 0
    // CHECK-NOT: fsdp.param_view %[[A]]
    %v1 = fsdp.param_view %a "w" at 0 : tensor<4xf32> -> tensor<4xf32>
    %v2 = fsdp.param_view %a "w" at 0 : tensor<4xf32> -> tensor<4xf32>
    // CHECK: fsdp.reduce_scatter @u %[[V]]
    // CHECK: fsdp.reduce_scatter @u %[[V]]
    %r1 = fsdp.reduce_scatter @u %v1 : tensor<4xf32> -> tensor<2xf32>
    %r2 = fsdp.reduce_scatter @u %v2 : tensor<4xf32> -> tensor<2xf32>
    // CHECK: return %[[A]], %[[B]], %[[V]], %[[V]]
    return %a, %b, %v1, %v2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
