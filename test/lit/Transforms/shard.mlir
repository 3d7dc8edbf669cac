// The pass under test runs alone in the second fsdp-opt; the first prepares its input.
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap | fsdp-opt --fsdp-shard="world-size=3" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap | not fsdp-opt --fsdp-shard="world-size=4" 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap | not fsdp-opt --fsdp-shard="world-size=0" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: not fsdp-opt %s --fsdp-shard="world-size=3" 2>&1 | FileCheck %s --check-prefix=ORDER

// fc1: 4*3 + 4 = 16 elements -> padded 18, shards of 6; fc2: 2*4 = 8 -> padded 9, shards of 3.
// CHECK: module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 3 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 3 : i64}
// CHECK: fsdp.unit @fc1 params ["fc1.weight", "fc1.bias"] {{.*}}numel = 16 : i64, offsets = array<i64: 0, 12>, padded_numel = 18 : i64{{.*}}shard_numel = 6 : i64
// CHECK: fsdp.unit @fc2 params ["fc2.weight"] {{.*}}numel = 8 : i64, offsets = array<i64: 0>, padded_numel = 9 : i64{{.*}}shard_numel = 3 : i64
// The batch of 6 becomes 2 per rank; parameters and AdamW state become shards.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32> {fsdp.global_shape = array<i64: 6, 3>, nn.data = "features"}
// CHECK-SAME: tensor<2xi32> {fsdp.global_shape = array<i64: 6>, nn.data = "labels"}
// CHECK-SAME: %[[STEP:.*]]: tensor<i64> {nn.step}
// CHECK-SAME: %[[P1:.*]]: tensor<6xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1}
// CHECK-SAME: %[[M1:.*]]: tensor<6xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc1}
// CHECK-SAME: %[[V1:.*]]: tensor<6xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc1}
// CHECK-SAME: %[[P2:.*]]: tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2}
// CHECK-SAME: -> (tensor<f32> {nn.loss}, tensor<6xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1}, tensor<6xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc1}, tensor<6xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc1}, tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2}
// CHECK-DAG: %[[G1:.*]] = fsdp.all_gather @fc1 %[[P1]] : tensor<6xf32> -> tensor<18xf32>
// CHECK-DAG: %[[W1:.*]] = fsdp.param_view %[[G1]] "fc1.weight" at 0 : tensor<18xf32> -> tensor<4x3xf32>
// CHECK-DAG: %[[B1:.*]] = fsdp.param_view %[[G1]] "fc1.bias" at 12 : tensor<18xf32> -> tensor<4xf32>
// CHECK: nn.linear %[[X]], %[[W1]], %[[B1]] : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK: %[[F1:.*]] = fsdp.flatten @fc1(%{{.*}}, %{{.*}}) {offsets = array<i64: 0, 12>} : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<18xf32>
// CHECK: %[[R1:.*]] = fsdp.reduce_scatter @fc1 %[[F1]] : tensor<18xf32> -> tensor<6xf32>
// CHECK: nn.adamw_update %[[P1]], %[[R1]], %[[M1]], %[[V1]], %[[STEP]]

// BATCH: global batch 6 (dimension 0 of data argument #0) is not divisible by world size 4
// WS: fsdp-shard: world-size must be >= 1, got 0
// ORDER: fsdp-shard: no fsdp.unit declared (run fsdp-wrap first)

func.func @f(%x: tensor<6x3xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
             %w1: tensor<4x3xf32> {nn.param = "fc1.weight"}, %b1: tensor<4xf32> {nn.param = "fc1.bias"},
             %w2: tensor<2x4xf32> {nn.param = "fc2.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<6x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %a = nn.relu %h : tensor<6x4xf32>
  %o = nn.linear %a, %w2 : (tensor<6x4xf32>, tensor<2x4xf32>) -> tensor<6x2xf32>
  %l = nn.cross_entropy %o, %y : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
