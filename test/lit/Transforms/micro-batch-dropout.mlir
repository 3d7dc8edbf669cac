// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch="micro-batches=2" --fsdp-optimizer | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" | FileCheck %s --check-prefix=SPLIT
// nn.dropout through the passes that must keep its mask: the VJP applies
// the forward's dropout (same seed, rate and step) to the gradient;
// fsdp-micro-batch sets `micro_batch` on every clone whose rows are the
// micro-batch's (clone 0 keeps the default 0; a weight's dropout keeps it
// everywhere: its rows are not the batch's); fsdp-optimizer takes the
// forward's step input instead of adding a second; and fsdp-shard marks
// `batch_split` where it split the rows across the ranks.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {nn.step}
// CHECK-NOT: nn.step
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 0 : i64, rate = 5.000000e-01 : f64, seed = 1 : i64} : tensor<5x3xf32>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 0 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64} : tensor<2x5xf32>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 0 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64} : tensor<2x5xf32>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 0 : i64, rate = 5.000000e-01 : f64, seed = 1 : i64} : tensor<5x3xf32>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 1 : i64, rate = 5.000000e-01 : f64, seed = 1 : i64} : tensor<5x3xf32>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {micro_batch = 1 : i64, nn.micro_batch = 1 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64}
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {micro_batch = 1 : i64, nn.micro_batch = 1 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64}
// CHECK: nn.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]]

// SPLIT: nn.dropout %{{.*}}, %{{.*}} {rate = 5.000000e-01 : f64, seed = 1 : i64} : tensor<5x3xf32>
// SPLIT: nn.dropout %{{.*}}, %{{.*}} {batch_split = true, rate = 5.000000e-01 : f64, seed = 3 : i64} : tensor<2x5xf32>
func.func @forward(%x: tensor<4x3xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %step: tensor<i64> {nn.step},
                   %w: tensor<5x3xf32> {nn.param = "l.weight"}) -> (tensor<f32> {nn.loss}) {
  %wd = nn.dropout %w, %step {rate = 0.5, seed = 1} : tensor<5x3xf32>, tensor<i64>
  %h = nn.linear %x, %wd : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %d = nn.dropout %h, %step {rate = 0.5, seed = 3} : tensor<4x5xf32>, tensor<i64>
  %l = nn.cross_entropy %d, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
