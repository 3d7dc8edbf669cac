// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch="micro-batches=2" --fsdp-optimizer | FileCheck %s
// nn.dropout through the passes that must keep its mask: the VJP applies
// the forward's dropout (same seed, rate and step) to the gradient;
// fsdp-micro-batch sets `micro_batch` on every clone (clone 0 keeps the
// default 0), so that each micro-batch draws the mask of its own rows; and
// fsdp-optimizer takes the forward's step input instead of adding a second.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {nn.step}
// CHECK-NOT: nn.step
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 0 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64} : tensor<2x5xf64>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {nn.micro_batch = 0 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64} : tensor<2x5xf64>
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {micro_batch = 1 : i64, nn.micro_batch = 1 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64}
// CHECK: nn.dropout %{{.*}}, %[[STEP]] {micro_batch = 1 : i64, nn.micro_batch = 1 : i64, rate = 5.000000e-01 : f64, seed = 3 : i64}
// CHECK: nn.adamw_update %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[STEP]]
func.func @forward(%x: tensor<4x3xf64> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %step: tensor<i64> {nn.step},
                   %w: tensor<5x3xf64> {nn.param = "l.weight"}) -> (tensor<f64> {nn.loss}) {
  %h = nn.linear %x, %w : (tensor<4x3xf64>, tensor<5x3xf64>) -> tensor<4x5xf64>
  %d = nn.dropout %h, %step {rate = 0.5, seed = 3} : tensor<4x5xf64>, tensor<i64>
  %l = nn.cross_entropy %d, %y : (tensor<4x5xf64>, tensor<4xi32>) -> tensor<f64>
  return %l : tensor<f64>
}
