// The pass under test runs alone in the second fsdp-opt; the first prepares its input.
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" | fsdp-opt --fsdp-collectives="reshard-root=true" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" | fsdp-opt --fsdp-collectives="reshard-after-forward=false" | FileCheck %s --check-prefix=NORESHARD

// FULL_SHARD: gather before first forward use, free after last forward use,
// gather again for backward, reduce-scatter once the gradient is complete.
// CHECK-LABEL: func.func @f(
// CHECK: %[[G1:.*]] = fsdp.all_gather @fc1
// CHECK: nn.linear
// CHECK-NEXT: fsdp.free %[[G1]]
// CHECK: %[[G2:.*]] = fsdp.all_gather @fc2
// CHECK: nn.linear
// CHECK-NEXT: fsdp.free %[[G2]]
// CHECK: nn.cross_entropy
// CHECK: %[[G2B:.*]] = fsdp.all_gather @fc2
// CHECK: %[[W2:.*]] = fsdp.param_view %[[G2B]] "fc2.weight"
// CHECK: nn.matmul %{{.*}}, %[[W2]]
// CHECK-NEXT: fsdp.free %[[G2B]]
// CHECK: %[[F2:.*]] = fsdp.flatten @fc2
// CHECK-NEXT: fsdp.reduce_scatter @fc2 %[[F2]]
// CHECK-NEXT: fsdp.free %[[F2]]
// fc1's weight is not needed in backward (its input is data): no backward gather.
// CHECK-NOT: fsdp.all_gather @fc1
// CHECK: %[[F1:.*]] = fsdp.flatten @fc1
// CHECK-NEXT: fsdp.reduce_scatter @fc1 %[[F1]]
// CHECK-NEXT: fsdp.free %[[F1]]
// CHECK-NOT: fsdp.all_gather

// SHARD_GRAD_OP-like: one gather per unit that lives until its last backward use.
// NORESHARD-LABEL: func.func @f(
// NORESHARD: %[[G2:.*]] = fsdp.all_gather @fc2
// NORESHARD-NOT: fsdp.free %[[G2]]
// NORESHARD: nn.cross_entropy
// NORESHARD-NOT: fsdp.all_gather @fc2
// NORESHARD: nn.matmul
// NORESHARD-NEXT: fsdp.free %[[G2]]

func.func @f(%x: tensor<6x3xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
             %w1: tensor<4x3xf32> {nn.param = "fc1.weight"}, %b1: tensor<4xf32> {nn.param = "fc1.bias"},
             %w2: tensor<2x4xf32> {nn.param = "fc2.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<6x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<6x4xf32>
  %a = nn.relu %h : tensor<6x4xf32>
  %o = nn.linear %a, %w2 : (tensor<6x4xf32>, tensor<2x4xf32>) -> tensor<6x2xf32>
  %l = nn.cross_entropy %o, %y : (tensor<6x2xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" | fsdp-opt --fsdp-collectives="keep-gathered=fc2" | FileCheck %s --check-prefix=KEEP
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" | not fsdp-opt --fsdp-collectives="keep-gathered=fc9" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// Per-unit reshard_after_forward: fc2 stays gathered from forward to backward.
// KEEP-LABEL: func.func @f(
// KEEP: %[[G2:.*]] = fsdp.all_gather @fc2
// KEEP-NOT: fsdp.all_gather @fc2
// KEEP: nn.cross_entropy
// KEEP: nn.matmul %{{.*}}, %{{.*}} :
// KEEP-NEXT: fsdp.free %[[G2]]
// UNKNOWN: error: fsdp-collectives: keep-gathered names unknown unit 'fc9'

// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch="micro-batches=2" --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=3 accumulate=unsharded" | fsdp-opt --fsdp-collectives="gather-once-per-step=true" | FileCheck %s --check-prefix=ONCE
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch="micro-batches=2" --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=3 accumulate=unsharded" | fsdp-opt --fsdp-collectives | FileCheck %s --check-prefix=PERMB
// gather-once-per-step: across 2 micro-batches each unit is gathered once, at
// its first use (micro-batch 0's forward), and freed after its last (micro-batch
// 1's backward); with accumulate=unsharded its summed gradient is
// reduce-scattered once. Without it, each micro-batch gathers again.
// (fc1's backward reads no parameter: the input's gradient is not needed;
// fc2 is each micro-batch's root, kept from its forward to its backward.)
// ONCE-LABEL: func.func @f(
// ONCE: %[[G1:.*]] = fsdp.all_gather @fc1
// ONCE-NOT: fsdp.all_gather @fc1
// ONCE: fsdp.all_gather @fc2
// ONCE-NOT: fsdp.all_gather
// ONCE: nn.micro_batch {{.*}}index = 1
// ONCE: fsdp.free %[[G1]]
// ONCE: fsdp.reduce_scatter @fc2
// ONCE-NOT: fsdp.reduce_scatter @fc2
// ONCE: return
// PERMB-LABEL: func.func @f(
// PERMB-COUNT-2: fsdp.all_gather @fc1
// PERMB-NOT: fsdp.all_gather @fc1
// PERMB: return
