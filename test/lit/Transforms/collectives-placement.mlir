// fsdp-collectives alone on hand-written input in the form it expects (the
// output of fsdp-shard, world size 2, full-shard): every unit gathered once
// at the top, views of the gathered buffer, and all packed gradients and
// reduce-scatters at the end. Units: fc1 (fc1.weight [4, 3], fc1.bias [4];
// shards of 8) and fc2 (fc2.weight [2, 4]; shards of 4).
// RUN: fsdp-opt %s --fsdp-collectives="reshard-root=true" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-collectives | FileCheck %s --check-prefix=KEEP
// RUN: fsdp-opt %s --fsdp-collectives="reshard-after-forward=false" | FileCheck %s --check-prefix=NORESHARD
// RUN: fsdp-opt %s --fsdp-collectives="keep-gathered=fc2" | FileCheck %s --check-prefix=KEEP

// FULL_SHARD with reshard-root=true: a gather right before the first forward
// use, a free right after the last forward use; fc2 gathered again right
// before its backward use
// (fc1 is not used in backward: its input is data). Each unit's packed
// gradient and reduce-scatter move up to right after the unit's last
// gradient (fc2's before fc1's backward), the packed gradient freed after.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x3xf32>
// CHECK-SAME: %[[P1:arg[0-9]+]]: tensor<8xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1}
// CHECK-SAME: %[[P2:arg[0-9]+]]: tensor<4xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2}
// CHECK-NEXT: %[[G1:.*]] = fsdp.all_gather @fc1 %[[P1]] : tensor<8xf32> -> tensor<16xf32>
// CHECK-DAG: %[[W1:.*]] = fsdp.param_view %[[G1]] "fc1.weight" at 0
// CHECK-DAG: %[[B1:.*]] = fsdp.param_view %[[G1]] "fc1.bias" at 12
// CHECK-NEXT: %[[H:.*]] = nn.linear %[[X]], %[[W1]], %[[B1]]
// CHECK-NEXT: fsdp.free %[[G1]] : tensor<16xf32>
// CHECK-NEXT: %[[A:.*]] = nn.relu %[[H]]
// CHECK-NEXT: %[[G2:.*]] = fsdp.all_gather @fc2 %[[P2]] : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[W2:.*]] = fsdp.param_view %[[G2]] "fc2.weight" at 0
// CHECK-NEXT: nn.linear %[[A]], %[[W2]]
// CHECK-NEXT: fsdp.free %[[G2]] : tensor<8xf32>
// CHECK-NEXT: nn.cross_entropy
// CHECK-NEXT: arith.constant
// CHECK-NEXT: nn.cross_entropy_grad
// CHECK-NEXT: %[[G2B:.*]] = fsdp.all_gather @fc2 %[[P2]] : tensor<4xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[W2B:.*]] = fsdp.param_view %[[G2B]] "fc2.weight" at 0
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W2B]]
// CHECK-NEXT: fsdp.free %[[G2B]] : tensor<8xf32>
// CHECK-NEXT: %[[DW2:.*]] = nn.matmul %{{.*}}, %[[A]] {transpose_a = true}
// CHECK-NEXT: %[[F2:.*]] = fsdp.flatten @fc2(%[[DW2]])
// CHECK-NEXT: %[[R2:.*]] = fsdp.reduce_scatter @fc2 %[[F2]] : tensor<8xf32> -> tensor<4xf32>
// CHECK-NEXT: fsdp.free %[[F2]] : tensor<8xf32>
// CHECK-NEXT: nn.relu_grad
// CHECK-NEXT: %[[DW1:.*]] = nn.matmul
// CHECK-NEXT: %[[DB1:.*]] = nn.reduce_sum
// CHECK-NEXT: %[[F1:.*]] = fsdp.flatten @fc1(%[[DW1]], %[[DB1]])
// CHECK-NEXT: %[[R1:.*]] = fsdp.reduce_scatter @fc1 %[[F1]] : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT: fsdp.free %[[F1]] : tensor<16xf32>
// CHECK-NEXT: nn.sgd_update %[[P1]], %[[R1]]
// CHECK-NEXT: nn.sgd_update %[[P2]], %[[R2]]
// CHECK-NEXT: return

// reshard-after-forward=false (SHARD_GRAD_OP-like): fc2's one gather serves
// forward and backward and is freed after its last backward use.
// NORESHARD-LABEL: func.func @step(
// NORESHARD: %[[G1:.*]] = fsdp.all_gather @fc1
// NORESHARD: nn.linear
// NORESHARD-NEXT: fsdp.free %[[G1]]
// NORESHARD: %[[G2:.*]] = fsdp.all_gather @fc2
// NORESHARD-NOT: fsdp.free %[[G2]]
// NORESHARD-NOT: fsdp.all_gather
// NORESHARD: nn.matmul %{{.*}}, %{{.*}} :
// NORESHARD-NEXT: fsdp.free %[[G2]] : tensor<8xf32>
// NORESHARD-NOT: fsdp.all_gather

// keep-gathered=fc2: as above for fc2 only. So is the default: fc2 is the
// root unit (its forward ends the forward, its backward begins the
// backward), which stays gathered unless reshard-root=true.
// KEEP-LABEL: func.func @step(
// KEEP: %[[G2:.*]] = fsdp.all_gather @fc2
// KEEP-NOT: fsdp.free %[[G2]]
// KEEP-NOT: fsdp.all_gather
// KEEP: nn.matmul %{{.*}}, %{{.*}} :
// KEEP-NEXT: fsdp.free %[[G2]] : tensor<8xf32>
// KEEP-NOT: fsdp.all_gather

module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc1 params ["fc1.weight", "fc1.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], numel = 16 : i64, offsets = array<i64: 0, 12>, padded_numel = 16 : i64, shapes = [array<i64: 4, 3>, array<i64: 4>], shard_numel = 8 : i64, trainable = array<i1: true, true>}
  fsdp.unit @fc2 params ["fc2.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 8 : i64, offsets = array<i64: 0>, padded_numel = 8 : i64, shapes = [array<i64: 2, 4>], shard_numel = 4 : i64, trainable = array<i1: true>}
  func.func @step(%x: tensor<2x3xf32> {fsdp.global_shape = array<i64: 4, 3>, nn.data = "features"},
                  %y: tensor<2xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                  %p1: tensor<8xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1},
                  %p2: tensor<4xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2})
      -> (tensor<f32> {nn.loss}, tensor<8xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1}, tensor<4xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2}) {
    // fsdp-shard's placeholder gathers: one per unit, at the top.
    %full1 = fsdp.all_gather @fc1 %p1 : tensor<8xf32> -> tensor<16xf32>
    %w1 = fsdp.param_view %full1 "fc1.weight" at 0 : tensor<16xf32> -> tensor<4x3xf32>
    %b1 = fsdp.param_view %full1 "fc1.bias" at 12 : tensor<16xf32> -> tensor<4xf32>
    %full2 = fsdp.all_gather @fc2 %p2 : tensor<4xf32> -> tensor<8xf32>
    %w2 = fsdp.param_view %full2 "fc2.weight" at 0 : tensor<8xf32> -> tensor<2x4xf32>
    // Forward.
    %h = nn.linear %x, %w1, %b1 : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %a = nn.relu %h : tensor<2x4xf32>
    %o = nn.linear %a, %w2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
    %loss = nn.cross_entropy %o, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
    // Backward: fc2 needs its weight (for da), fc1 does not (x is data).
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %do = nn.cross_entropy_grad %o, %y, %seed : (tensor<2x2xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x2xf32>
    %da = nn.matmul %do, %w2 : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dw2 = nn.matmul %do, %a {transpose_a = true} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dh = nn.relu_grad %h, %da : tensor<2x4xf32>
    %dw1 = nn.matmul %dh, %x {transpose_a = true} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %db1 = nn.reduce_sum %dh {axes = array<i64: 0>} : tensor<2x4xf32> -> tensor<4xf32>
    // fsdp-shard's gradient reductions, all at the end.
    %g2 = fsdp.flatten @fc2(%dw2) {offsets = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<8xf32>
    %r2 = fsdp.reduce_scatter @fc2 %g2 : tensor<8xf32> -> tensor<4xf32>
    %g1 = fsdp.flatten @fc1(%dw1, %db1) {offsets = array<i64: 0, 12>} : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<16xf32>
    %r1 = fsdp.reduce_scatter @fc1 %g1 : tensor<16xf32> -> tensor<8xf32>
    %p1_new = nn.sgd_update %p1, %r1 {lr = 1.000000e-01 : f64} : tensor<8xf32>
    %p2_new = nn.sgd_update %p2, %r2 {lr = 1.000000e-01 : f64} : tensor<4xf32>
    return %loss, %p1_new, %p2_new : tensor<f32>, tensor<8xf32>, tensor<4xf32>
  }
}
