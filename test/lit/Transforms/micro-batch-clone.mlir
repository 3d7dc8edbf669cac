// fsdp-micro-batch alone on hand-written input in the form it expects (the
// output of fsdp-autodiff): a loss, its seed (nn.loss_seed) and one gradient.
// RUN: fsdp-opt %s --fsdp-micro-batch="micro-batches=2" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-micro-batch="micro-batches=1" | FileCheck %s --check-prefix=ONE

// Each data argument (8 rows) is cut into 2 contiguous micro-batches of 4;
// the body is cloned per micro-batch on its slices (ops marked
// nn.micro_batch = j, the loss op nn.micro_batch_loss, shapes re-inferred),
// the seed of each clone is 1/2; the gradients are summed (nn.accumulate),
// the losses summed and halved. The original body is gone.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:arg0]]: tensor<8x3xf32> {nn.data = "features"}, %[[Y:arg1]]: tensor<8xi32> {nn.data = "labels"}, %[[W:arg2]]: tensor<2x3xf32> {nn.param = "fc.weight"})
// CHECK-SAME: -> (tensor<f32> {nn.loss}, tensor<2x3xf32> {nn.grad_of = "fc.weight"})
// CHECK-NEXT: %[[X0:.*]] = nn.micro_batch %[[X]] {count = 2 : i64, index = 0 : i64} : tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT: %[[Y0:.*]] = nn.micro_batch %[[Y]] {count = 2 : i64, index = 0 : i64} : tensor<8xi32> -> tensor<4xi32>
// CHECK-NEXT: %[[H0:.*]] = nn.linear %[[X0]], %[[W]] {nn.micro_batch = 0 : i64} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
// CHECK-NEXT: %[[L0:.*]] = nn.cross_entropy %[[H0]], %[[Y0]] {nn.micro_batch = 0 : i64, nn.micro_batch_loss} : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
// CHECK-NEXT: %[[S0:.*]] = arith.constant {nn.micro_batch = 0 : i64} dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[D0:.*]] = nn.cross_entropy_grad %[[H0]], %[[Y0]], %[[S0]] {nn.micro_batch = 0 : i64} : (tensor<4x2xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x2xf32>
// CHECK-NEXT: %[[G0:.*]] = nn.matmul %[[D0]], %[[X0]] {nn.micro_batch = 0 : i64, transpose_a = true} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[X1:.*]] = nn.micro_batch %[[X]] {count = 2 : i64, index = 1 : i64}
// CHECK-NEXT: %[[Y1:.*]] = nn.micro_batch %[[Y]] {count = 2 : i64, index = 1 : i64}
// CHECK-NEXT: %[[H1:.*]] = nn.linear %[[X1]], %[[W]] {nn.micro_batch = 1 : i64}
// CHECK-NEXT: %[[L1:.*]] = nn.cross_entropy %[[H1]], %[[Y1]] {nn.micro_batch = 1 : i64, nn.micro_batch_loss}
// CHECK-NEXT: %[[S1:.*]] = arith.constant {nn.micro_batch = 1 : i64} dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[D1:.*]] = nn.cross_entropy_grad %[[H1]], %[[Y1]], %[[S1]] {nn.micro_batch = 1 : i64}
// CHECK-NEXT: %[[G1:.*]] = nn.matmul %[[D1]], %[[X1]] {nn.micro_batch = 1 : i64, transpose_a = true}
// CHECK-NEXT: %[[LS:.*]] = nn.add %[[L0]], %[[L1]] : tensor<f32>
// CHECK-NEXT: %[[G:.*]] = nn.add %[[G0]], %[[G1]] {nn.accumulate} : tensor<2x3xf32>
// CHECK-NEXT: %[[HALF:.*]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[L:.*]] = nn.mul %[[LS]], %[[HALF]] : tensor<f32>
// CHECK-NEXT: return %[[L]], %[[G]] : tensor<f32>, tensor<2x3xf32>
// CHECK-NOT: nn.loss_seed

// One micro-batch: nothing to do.
// ONE-LABEL: func.func @step(
// ONE-NOT: nn.micro_batch
// ONE: arith.constant {nn.loss_seed} dense<1.000000e+00>
// ONE-NOT: nn.micro_batch

func.func @step(%x: tensor<8x3xf32> {nn.data = "features"}, %y: tensor<8xi32> {nn.data = "labels"},
                %w: tensor<2x3xf32> {nn.param = "fc.weight"})
    -> (tensor<f32> {nn.loss}, tensor<2x3xf32> {nn.grad_of = "fc.weight"}) {
  %h = nn.linear %x, %w : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<8x2xf32>
  %loss = nn.cross_entropy %h, %y : (tensor<8x2xf32>, tensor<8xi32>) -> tensor<f32>
  %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
  %dh = nn.cross_entropy_grad %h, %y, %seed : (tensor<8x2xf32>, tensor<8xi32>, tensor<f32>) -> tensor<8x2xf32>
  %dw = nn.matmul %dh, %x {transpose_a = true} : (tensor<8x2xf32>, tensor<8x3xf32>) -> tensor<2x3xf32>
  return %loss, %dw : tensor<f32>, tensor<2x3xf32>
}
