// fsdp-shard alone on a micro-batched step (hand-written in the form of
// fsdp-autodiff + fsdp-micro-batch="micro-batches=2" + fsdp-optimizer +
// fsdp-wrap): the gradient of fc.weight is the sum (nn.accumulate) of the
// two micro-batches' gradients %dw0 and %dw1. One unit @fc of 6 elements,
// shards of 2 over 3 ranks; the global batch of 12 is 4 per rank, 2 per
// micro-batch.
// RUN: fsdp-opt %s --fsdp-shard="world-size=3" | FileCheck %s --check-prefix=SHARDED
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 accumulate=sharded" | FileCheck %s --check-prefix=SHARDED
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 accumulate=unsharded" | FileCheck %s --check-prefix=UNSHARDED
// RUN: fsdp-opt %s --fsdp-shard="world-size=6 strategy=hybrid-shard shard-size=3 accumulate=unsharded" | FileCheck %s --check-prefix=HSDP
// The same step without its accumulation (no micro-batches):
// accumulate=unsharded would do nothing, and is refused (issue 25).
// RUN: sed 's/ {nn.accumulate}//' %s | not fsdp-opt --fsdp-shard="world-size=3 accumulate=unsharded" 2>&1 | FileCheck %s --check-prefix=NOACC
// NOACC: error: fsdp-shard: accumulate=unsharded needs micro-batches (fsdp-micro-batch with micro-batches > 1); this step accumulates no gradients

// accumulate=sharded (the default): each micro-batch's gradient is packed and
// reduce-scattered on its own, and the two reduced shards are summed (marked
// nn.accumulate: fsdp-schedule adds each to the running sum at its wait).
// SHARDED-LABEL: func.func @micro_step(
// SHARDED-SAME: %[[P:arg[0-9]+]]: tensor<2xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// SHARDED: nn.micro_batch %{{.*}} {count = 2 : i64, index = 0 : i64} : tensor<4x3xf32> -> tensor<2x3xf32>
// SHARDED: %[[DW0:.*]] = nn.matmul {{.*}}nn.micro_batch = 0 : i64{{.*}} -> tensor<2x3xf32>
// SHARDED: %[[DW1:.*]] = nn.matmul {{.*}}nn.micro_batch = 1 : i64{{.*}} -> tensor<2x3xf32>
// SHARDED: %[[F0:.*]] = fsdp.flatten @fc(%[[DW0]]) {offsets = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<6xf32>
// SHARDED-NEXT: %[[R0:.*]] = fsdp.reduce_scatter @fc %[[F0]] : tensor<6xf32> -> tensor<2xf32>
// SHARDED-NEXT: %[[F1:.*]] = fsdp.flatten @fc(%[[DW1]]) {offsets = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<6xf32>
// SHARDED-NEXT: %[[R1:.*]] = fsdp.reduce_scatter @fc %[[F1]] : tensor<6xf32> -> tensor<2xf32>
// SHARDED-NEXT: %[[SUM:.*]] = nn.add %[[R0]], %[[R1]] {nn.accumulate} : tensor<2xf32>
// SHARDED-NEXT: %[[U:.*]] = nn.sgd_update %[[P]], %[[SUM]] {{.*}} : tensor<2xf32>
// SHARDED-NEXT: return %{{.*}}, %[[U]]

// accumulate=unsharded (FSDP's no_sync): the accumulated full gradient is
// packed and reduce-scattered once.
// UNSHARDED-LABEL: func.func @micro_step(
// UNSHARDED-SAME: %[[P:arg[0-9]+]]: tensor<2xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// UNSHARDED: %[[ACC:.*]] = nn.add %{{.*}}, %{{.*}} {nn.accumulate} : tensor<2x3xf32>
// UNSHARDED-NOT: fsdp.reduce_scatter
// UNSHARDED: %[[F:.*]] = fsdp.flatten @fc(%[[ACC]]) {offsets = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<6xf32>
// UNSHARDED-NEXT: %[[R:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<6xf32> -> tensor<2xf32>
// UNSHARDED-NEXT: %[[U:.*]] = nn.sgd_update %[[P]], %[[R]] {{.*}} : tensor<2xf32>
// UNSHARDED-NOT: fsdp.reduce_scatter
// UNSHARDED-NOT: fsdp.flatten

// HSDP with no_sync: one reduce-scatter in the shard group and one all-reduce
// across the replicas, of the accumulated gradient (1 row per micro-batch).
// HSDP-LABEL: func.func @micro_step(
// HSDP: nn.micro_batch %{{.*}} {count = 2 : i64, index = 0 : i64} : tensor<2x3xf32> -> tensor<1x3xf32>
// HSDP: %[[ACC:.*]] = nn.add %{{.*}}, %{{.*}} {nn.accumulate} : tensor<2x3xf32>
// HSDP-NOT: fsdp.reduce_scatter
// HSDP: %[[F:.*]] = fsdp.flatten @fc(%[[ACC]])
// HSDP-NEXT: %[[RS:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<6xf32> -> tensor<2xf32>
// HSDP-NEXT: %[[AR:.*]] = fsdp.all_reduce @fc %[[RS]] {group = #fsdp.group<replicate>} : tensor<2xf32> -> tensor<2xf32>
// HSDP-NEXT: nn.sgd_update %{{.*}}, %[[AR]] {{.*}} : tensor<2xf32>
// HSDP-NOT: fsdp.reduce_scatter
// HSDP-NOT: fsdp.all_reduce

module {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["uniform(0.5)"], shapes = [array<i64: 2, 3>], trainable = array<i1: true>}
  func.func @micro_step(%x: tensor<12x3xf32> {nn.data = "features"}, %y: tensor<12xi32> {nn.data = "labels"},
                        %w: tensor<2x3xf32> {nn.param = "fc.weight"})
      -> (tensor<f32> {nn.loss}, tensor<2x3xf32> {nn.param = "fc.weight"}) {
    // Micro-batch 0: forward, then backward seeded with 1/2.
    %x0 = nn.micro_batch %x {count = 2 : i64, index = 0 : i64} : tensor<12x3xf32> -> tensor<6x3xf32>
    %y0 = nn.micro_batch %y {count = 2 : i64, index = 0 : i64} : tensor<12xi32> -> tensor<6xi32>
    %h0 = nn.linear %x0, %w {nn.micro_batch = 0 : i64} : (tensor<6x3xf32>, tensor<2x3xf32>) -> tensor<6x2xf32>
    %l0 = nn.cross_entropy %h0, %y0 {nn.micro_batch = 0 : i64, nn.micro_batch_loss} : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<f32>
    %s0 = arith.constant {nn.micro_batch = 0 : i64} dense<5.000000e-01> : tensor<f32>
    %dh0 = nn.cross_entropy_grad %h0, %y0, %s0 {nn.micro_batch = 0 : i64} : (tensor<6x2xf32>, tensor<6xi32>, tensor<f32>) -> tensor<6x2xf32>
    %dw0 = nn.matmul %dh0, %x0 {nn.micro_batch = 0 : i64, transpose_a = true} : (tensor<6x2xf32>, tensor<6x3xf32>) -> tensor<2x3xf32>
    // Micro-batch 1.
    %x1 = nn.micro_batch %x {count = 2 : i64, index = 1 : i64} : tensor<12x3xf32> -> tensor<6x3xf32>
    %y1 = nn.micro_batch %y {count = 2 : i64, index = 1 : i64} : tensor<12xi32> -> tensor<6xi32>
    %h1 = nn.linear %x1, %w {nn.micro_batch = 1 : i64} : (tensor<6x3xf32>, tensor<2x3xf32>) -> tensor<6x2xf32>
    %l1 = nn.cross_entropy %h1, %y1 {nn.micro_batch = 1 : i64, nn.micro_batch_loss} : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<f32>
    %s1 = arith.constant {nn.micro_batch = 1 : i64} dense<5.000000e-01> : tensor<f32>
    %dh1 = nn.cross_entropy_grad %h1, %y1, %s1 {nn.micro_batch = 1 : i64} : (tensor<6x2xf32>, tensor<6xi32>, tensor<f32>) -> tensor<6x2xf32>
    %dw1 = nn.matmul %dh1, %x1 {nn.micro_batch = 1 : i64, transpose_a = true} : (tensor<6x2xf32>, tensor<6x3xf32>) -> tensor<2x3xf32>
    // The mean loss and the accumulated gradient.
    %lsum = nn.add %l0, %l1 : tensor<f32>
    %dw = nn.add %dw0, %dw1 {nn.accumulate} : tensor<2x3xf32>
    %half = arith.constant dense<5.000000e-01> : tensor<f32>
    %loss = nn.mul %lsum, %half : tensor<f32>
    %w_new = nn.sgd_update %w, %dw {lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<2x3xf32>
    return %loss, %w_new : tensor<f32>, tensor<2x3xf32>
  }
}
