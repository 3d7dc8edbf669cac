// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch="micro-batches=2" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff | not fsdp-opt --fsdp-micro-batch="micro-batches=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 micro-batches=2" | FileCheck %s --check-prefix=SHARDED
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 micro-batches=2 accumulate=unsharded" | FileCheck %s --check-prefix=NOSYNC

// Two micro-batches of 4 rows: each clone computes forward and backward on its
// micro-batch with the autodiff seed 1/2; gradients are summed (nn.accumulate)
// and the loss is the mean of the micro-batch losses.
// CHECK: %[[X0:.*]] = nn.micro_batch %arg0 {count = 2 : i64, index = 0 : i64} : tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK: nn.linear %[[X0]], %arg2 {nn.micro_batch = 0 : i64}
// CHECK: %[[L0:.*]] = nn.cross_entropy {{.*}}nn.micro_batch = 0 : i64, nn.micro_batch_loss
// CHECK: arith.constant {nn.micro_batch = 0 : i64} dense<5.000000e-01> : tensor<f32>
// CHECK: %[[G0:.*]] = nn.matmul {{.*}}nn.micro_batch = 0 : i64, transpose_a = true
// CHECK: %[[X1:.*]] = nn.micro_batch %arg0 {count = 2 : i64, index = 1 : i64}
// CHECK: %[[L1:.*]] = nn.cross_entropy {{.*}}nn.micro_batch = 1 : i64, nn.micro_batch_loss
// CHECK: %[[G1:.*]] = nn.matmul {{.*}}nn.micro_batch = 1 : i64, transpose_a = true
// CHECK: %[[S:.*]] = nn.add %[[L0]], %[[L1]] : tensor<f32>
// CHECK: %[[G:.*]] = nn.add %[[G0]], %[[G1]] {nn.accumulate}
// CHECK: %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[L:.*]] = nn.mul %[[S]], %[[HALF]]
// CHECK: return %[[L]], %[[G]]

// DIVIDE: error: the batch of data argument #0 does not divide into 3 micro-batches

// Sharded accumulation: a reduce-scatter per micro-batch, shards summed.
// SHARDED: fsdp.reduce_scatter @fc
// SHARDED: fsdp.reduce_scatter @fc
// SHARDED: %[[SUM:.*]] = nn.add %{{.*}}, %{{.*}} : tensor<5xf32>
// SHARDED: nn.adamw_update %{{.*}}, %[[SUM]]
// no_sync: the full gradients are accumulated and reduced once.
// NOSYNC: nn.add {{.*}} {nn.accumulate} : tensor<3x3xf32>
// NOSYNC: fsdp.reduce_scatter @fc
// NOSYNC-NOT: fsdp.reduce_scatter

func.func @f(%x: tensor<8x3xf32> {nn.data = "features"}, %y: tensor<8xi32> {nn.data = "labels"},
             %w: tensor<3x3xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w : (tensor<8x3xf32>, tensor<3x3xf32>) -> tensor<8x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
