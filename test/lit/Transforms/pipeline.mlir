// RUN: fsdp-opt %s --fsdp-pipeline="world-size=4 optimizer=sgd lr=0.1" | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=0" 2>&1 | FileCheck %s --check-prefix=WS
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=5" 2>&1 | FileCheck %s --check-prefix=BATCH
// Options that would do nothing are refused (issue 25), also when given
// their default value: AdamW's betas and eps with SGD, accumulate without
// micro-batches.
// RUN: not fsdp-opt %s --fsdp-pipeline="optimizer=sgd beta1=0.5" 2>&1 | FileCheck %s --check-prefix=BETA1
// RUN: not fsdp-opt %s --fsdp-pipeline="optimizer=sgd beta2=0.999" 2>&1 | FileCheck %s --check-prefix=BETA2
// RUN: not fsdp-opt %s --fsdp-pipeline="optimizer=sgd eps=1e-8" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 accumulate=unsharded" 2>&1 | FileCheck %s --check-prefix=ACC
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 accumulate=sharded micro-batches=1" 2>&1 | FileCheck %s --check-prefix=ACC1
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 accumulate=unsharded micro-batches=2 beta1=0.5" -o /dev/null

// The whole pipeline on a 2-layer MLP at 4 ranks: units of 16 and 8
// elements become shards of 4 and 2; SGD keeps no state.
// CHECK: module attributes {fsdp.replicas = 1 : i64, fsdp.schedule = "auto: list(max-in-flight=2)", fsdp.shard_size = 4 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 4 : i64}
// CHECK-LABEL: func.func @f(%arg0: tensor<2x3xf32> {{.*}}, %arg1: tensor<2xi32> {{.*}}, %arg2: tensor<4xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1}, %arg3: tensor<2xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2})
// CHECK: %[[G1:.*]] = fsdp.all_gather @fc1 %arg2 async : tensor<4xf32> -> !fsdp.future<tensor<16xf32>>
// CHECK: fsdp.all_gather @fc2 %arg3 async : tensor<2xf32> -> !fsdp.future<tensor<8xf32>>
// CHECK: fsdp.wait %[[G1]] : tensor<16xf32>
// CHECK: fsdp.reduce_scatter @fc2 %{{.*}} async
// CHECK: fsdp.reduce_scatter @fc1 %{{.*}} async
// CHECK: nn.sgd_update %arg2
// CHECK: nn.sgd_update %arg3

// WS: fsdp-shard: world-size must be >= 1, got 0
// BETA1: error: fsdp-pipeline: beta1 is an AdamW option; optimizer=sgd has no moments
// BETA2: error: fsdp-pipeline: beta2 is an AdamW option; optimizer=sgd has no moments
// EPS: error: fsdp-pipeline: eps is an AdamW option; optimizer=sgd has no moments
// ACC: error: fsdp-pipeline: accumulate=unsharded needs micro-batches > 1 (one micro-batch has nothing to accumulate)
// ACC1: error: fsdp-pipeline: accumulate=sharded needs micro-batches > 1
// BATCH: error: global batch 8 (dimension 0 of data argument #0) is not divisible by world size 5

func.func @f(%x: tensor<8x3xf32> {nn.data = "features"}, %y: tensor<8xi32> {nn.data = "labels"},
             %w1: tensor<4x3xf32> {nn.param = "fc1.weight"}, %b1: tensor<4xf32> {nn.param = "fc1.bias"},
             %w2: tensor<2x4xf32> {nn.param = "fc2.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %a = nn.relu %h : tensor<8x4xf32>
  %o = nn.linear %a, %w2 : (tensor<8x4xf32>, tensor<2x4xf32>) -> tensor<8x2xf32>
  %l = nn.cross_entropy %o, %y : (tensor<8x2xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
