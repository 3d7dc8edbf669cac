// fsdp-schedule alone on hand-written input in the form it expects (the
// output of fsdp-collectives, world size 2, full-shard): three units fc1
// (gathered 48 B), fc2 (64 B), fc3 (32 B); fc1 is not needed in backward.
// RUN: fsdp-opt %s --fsdp-schedule="prefetch=none" | FileCheck %s --check-prefix=NONE
// The order of collective starts, waits and compute under each mode, the
// output filtered to those lines so that CHECK-NEXT pins the whole order.
// RUN: fsdp-opt %s --fsdp-schedule="prefetch=fsdp1" | grep -E "fsdp.(all_gather|reduce_scatter|wait)|nn.(linear|matmul|cross_entropy )|fsdp.schedule" | FileCheck %s --check-prefix=FSDP1
// RUN: fsdp-opt %s --fsdp-schedule="prefetch=fsdp2" | grep -E "fsdp.(all_gather|reduce_scatter|wait)|nn.(linear|matmul|cross_entropy )|fsdp.schedule" | FileCheck %s --check-prefix=FSDP2
// RUN: fsdp-opt %s --fsdp-schedule | grep -E "fsdp.(all_gather|reduce_scatter|wait|free)|nn.(linear|matmul|cross_entropy )|fsdp.schedule" | FileCheck %s --check-prefix=AUTO
// RUN: fsdp-opt %s --fsdp-schedule="max-in-flight=1" | grep -E "fsdp.(all_gather|reduce_scatter|wait|free)|nn.(linear|matmul|cross_entropy )|fsdp.schedule" | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s --fsdp-schedule="prefetch=none bucket-bytes=96" | FileCheck %s --check-prefix=BUCKET

// none, the whole output: every collective an async start returning an
// !fsdp.future and an fsdp.wait; all-gathers start right before their wait,
// the views read the waited buffer. A reduce-scatter's wait (and the free of
// its packed gradient) sinks to the next reduce-scatter's start: one in flight.
// NONE: module attributes {{{.*}}fsdp.schedule = "none"
// NONE-LABEL: func.func @step(
// NONE-NEXT: %[[T1:.*]] = fsdp.all_gather @fc1 %arg2 async : tensor<6xf32> -> !fsdp.future<tensor<12xf32>>
// NONE-NEXT: %[[G1:.*]] = fsdp.wait %[[T1]] : tensor<12xf32>
// NONE-NEXT: %[[W1:.*]] = fsdp.param_view %[[G1]] "fc1.weight" at 0
// NONE-NEXT: nn.linear %arg0, %[[W1]]
// NONE-NEXT: fsdp.free %[[G1]] : tensor<12xf32>
// NONE-NEXT: nn.relu
// NONE-NEXT: %[[T2:.*]] = fsdp.all_gather @fc2 %arg3 async : tensor<8xf32> -> !fsdp.future<tensor<16xf32>>
// NONE-NEXT: %[[G2:.*]] = fsdp.wait %[[T2]] : tensor<16xf32>
// NONE: %[[T3:.*]] = fsdp.all_gather @fc3 %arg4 async
// NONE-NEXT: fsdp.wait %[[T3]]
// NONE: nn.cross_entropy_grad
// NONE-NEXT: %[[T3B:.*]] = fsdp.all_gather @fc3 %arg4 async
// NONE-NEXT: fsdp.wait %[[T3B]]
// NONE: %[[F3:.*]] = fsdp.flatten @fc3
// NONE-NEXT: %[[R3:.*]] = fsdp.reduce_scatter @fc3 %[[F3]] async : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
// NONE-NEXT: nn.relu_grad
// NONE-NEXT: %[[T2B:.*]] = fsdp.all_gather @fc2 %arg3 async
// NONE-NEXT: fsdp.wait %[[T2B]]
// NONE: %[[F2:.*]] = fsdp.flatten @fc2
// NONE-NEXT: %[[S3:.*]] = fsdp.wait %[[R3]] : tensor<4xf32>
// NONE-NEXT: fsdp.free %[[F3]] : tensor<8xf32>
// NONE-NEXT: %[[R2:.*]] = fsdp.reduce_scatter @fc2 %[[F2]] async
// NONE: %[[F1:.*]] = fsdp.flatten @fc1
// NONE-NEXT: %[[S2:.*]] = fsdp.wait %[[R2]] : tensor<8xf32>
// NONE-NEXT: fsdp.free %[[F2]] : tensor<16xf32>
// NONE-NEXT: %[[R1:.*]] = fsdp.reduce_scatter @fc1 %[[F1]] async
// NONE-NEXT: %[[S1:.*]] = fsdp.wait %[[R1]] : tensor<6xf32>
// NONE-NEXT: fsdp.free %[[F1]] : tensor<12xf32>
// NONE-NEXT: nn.sgd_update %arg2, %[[S1]]
// NONE-NEXT: nn.sgd_update %arg3, %[[S2]]
// NONE-NEXT: nn.sgd_update %arg4, %[[S3]]

// fsdp1 (BACKWARD_PRE): forward as none; in backward fc2's gather is issued
// right after fc3's wait, before fc3's gradient matmuls.
// FSDP1: fsdp.schedule = "fsdp1"
// FSDP1-NEXT: [[AG1:%[0-9]+]] = fsdp.all_gather @fc1
// FSDP1-NEXT: fsdp.wait [[AG1]]
// FSDP1-NEXT: nn.linear
// FSDP1-NEXT: [[AG2:%[0-9]+]] = fsdp.all_gather @fc2
// FSDP1-NEXT: fsdp.wait [[AG2]]
// FSDP1-NEXT: nn.linear
// FSDP1-NEXT: [[AG3:%[0-9]+]] = fsdp.all_gather @fc3
// FSDP1-NEXT: fsdp.wait [[AG3]]
// FSDP1-NEXT: nn.linear
// FSDP1-NEXT: nn.cross_entropy
// FSDP1-NEXT: [[AG3B:%[0-9]+]] = fsdp.all_gather @fc3
// FSDP1-NEXT: fsdp.wait [[AG3B]]
// FSDP1-NEXT: [[AG2B:%[0-9]+]] = fsdp.all_gather @fc2
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: [[RS3:%[0-9]+]] = fsdp.reduce_scatter @fc3
// FSDP1-NEXT: fsdp.wait [[AG2B]]
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: fsdp.wait [[RS3]]
// FSDP1-NEXT: [[RS2:%[0-9]+]] = fsdp.reduce_scatter @fc2
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: fsdp.wait [[RS2]]
// FSDP1-NEXT: [[RS1:%[0-9]+]] = fsdp.reduce_scatter @fc1
// FSDP1-NEXT: fsdp.wait [[RS1]]

// fsdp2: one unit ahead in forward too: fc2's gather issued right after
// fc1's wait, fc3's right after fc2's.
// FSDP2: fsdp.schedule = "fsdp2"
// FSDP2-NEXT: [[AG1:%[0-9]+]] = fsdp.all_gather @fc1
// FSDP2-NEXT: fsdp.wait [[AG1]]
// FSDP2-NEXT: [[AG2:%[0-9]+]] = fsdp.all_gather @fc2
// FSDP2-NEXT: nn.linear
// FSDP2-NEXT: fsdp.wait [[AG2]]
// FSDP2-NEXT: [[AG3:%[0-9]+]] = fsdp.all_gather @fc3
// FSDP2-NEXT: nn.linear
// FSDP2-NEXT: fsdp.wait [[AG3]]
// FSDP2-NEXT: nn.linear
// FSDP2-NEXT: nn.cross_entropy
// FSDP2-NEXT: [[AG3B:%[0-9]+]] = fsdp.all_gather @fc3
// FSDP2-NEXT: fsdp.wait [[AG3B]]
// FSDP2-NEXT: [[AG2B:%[0-9]+]] = fsdp.all_gather @fc2
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: [[RS3:%[0-9]+]] = fsdp.reduce_scatter @fc3
// FSDP2-NEXT: fsdp.wait [[AG2B]]

// auto (no cluster, no budget): the list scheduler with two gathers in
// flight, across the forward/backward boundary, but never gathering a unit
// while its previous copy is still gathered: fc3's backward gather waits for
// the free of its forward copy (after fc3's forward linear), and fc2's
// backward gather, in order after it, too.
// AUTO: fsdp.schedule = "auto: list(max-in-flight=2)"
// AUTO-NEXT: [[AG1:%[0-9]+]] = fsdp.all_gather @fc1
// AUTO-NEXT: [[AG2:%[0-9]+]] = fsdp.all_gather @fc2
// AUTO-NEXT: fsdp.wait [[AG1]]
// AUTO-NEXT: [[AG3:%[0-9]+]] = fsdp.all_gather @fc3
// AUTO-NEXT: nn.linear
// AUTO-NEXT: fsdp.free
// AUTO-NEXT: fsdp.wait [[AG2]]
// AUTO-NEXT: nn.linear
// AUTO-NEXT: fsdp.free
// AUTO-NEXT: [[W3:%[0-9]+]] = fsdp.wait [[AG3]]
// AUTO-NEXT: nn.linear
// AUTO-NEXT: fsdp.free [[W3]]
// AUTO-NEXT: [[AG3B:%[0-9]+]] = fsdp.all_gather @fc3
// AUTO-NEXT: [[AG2B:%[0-9]+]] = fsdp.all_gather @fc2
// AUTO-NEXT: nn.cross_entropy
// AUTO-NEXT: fsdp.wait [[AG3B]]
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: fsdp.free
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: [[RS3:%[0-9]+]] = fsdp.reduce_scatter @fc3
// AUTO-NEXT: fsdp.wait [[AG2B]]

// max-in-flight=1: each gather issued right after the previous wait, fc3's
// backward gather after its forward copy's free.
// ONE: fsdp.schedule = "auto: list(max-in-flight=1)"
// ONE-NEXT: [[AG1:%[0-9]+]] = fsdp.all_gather @fc1
// ONE-NEXT: fsdp.wait [[AG1]]
// ONE-NEXT: [[AG2:%[0-9]+]] = fsdp.all_gather @fc2
// ONE-NEXT: nn.linear
// ONE-NEXT: fsdp.free
// ONE-NEXT: fsdp.wait [[AG2]]
// ONE-NEXT: [[AG3:%[0-9]+]] = fsdp.all_gather @fc3
// ONE-NEXT: nn.linear
// ONE-NEXT: fsdp.free
// ONE-NEXT: [[W3:%[0-9]+]] = fsdp.wait [[AG3]]
// ONE-NEXT: nn.linear
// ONE-NEXT: fsdp.free [[W3]]
// ONE-NEXT: [[AG3B:%[0-9]+]] = fsdp.all_gather @fc3
// ONE-NEXT: nn.cross_entropy
// ONE-NEXT: fsdp.wait [[AG3B]]
// ONE-NEXT: [[AG2B:%[0-9]+]] = fsdp.all_gather @fc2

// bucket-bytes=96: fc2 and fc3 (64 + 32 B) gathered as one packed buffer in
// forward and in backward (fc1 alone: 48 + 64 > 96), unpacked by rank block;
// their gradients packed (two rank blocks) and reduce-scattered as one.
// BUCKET-LABEL: func.func @step(
// BUCKET: fsdp.all_gather @fc1 %arg2 async : tensor<6xf32> -> !fsdp.future<tensor<12xf32>>
// BUCKET: %[[P:.*]] = fsdp.pack(%arg3, %arg4) {blocks = 1 : i64} : (tensor<8xf32>, tensor<4xf32>) -> tensor<12xf32>
// BUCKET-NEXT: %[[T:.*]] = fsdp.all_gather @fc2 %[[P]] async {bucket = [@fc2, @fc3]} : tensor<12xf32> -> !fsdp.future<tensor<24xf32>>
// BUCKET-NEXT: %[[G:.*]] = fsdp.wait %[[T]] : tensor<24xf32>
// BUCKET-NEXT: %[[U:.*]]:2 = fsdp.unpack %[[G]] {blocks = 2 : i64} : (tensor<24xf32>) -> (tensor<16xf32>, tensor<8xf32>)
// BUCKET-NEXT: fsdp.param_view %[[U]]#0 "fc2.weight"
// BUCKET: fsdp.param_view %[[U]]#1 "fc3.weight"
// BUCKET: nn.cross_entropy_grad
// BUCKET-NEXT: fsdp.pack(%arg4, %arg3) {blocks = 1 : i64}
// BUCKET-NEXT: fsdp.all_gather @fc3 %{{.*}} async {bucket = [@fc3, @fc2]}
// BUCKET: %[[RP:.*]] = fsdp.pack(%{{.*}}, %{{.*}}) {blocks = 2 : i64} : (tensor<8xf32>, tensor<16xf32>) -> tensor<24xf32>
// BUCKET: %[[RT:.*]] = fsdp.reduce_scatter @fc3 %[[RP]] async {bucket = [@fc3, @fc2]} : tensor<24xf32> -> !fsdp.future<tensor<12xf32>>
// BUCKET: %[[RW:.*]] = fsdp.wait %[[RT]] : tensor<12xf32>
// BUCKET-NEXT: fsdp.unpack %[[RW]] {blocks = 1 : i64} : (tensor<12xf32>) -> (tensor<4xf32>, tensor<8xf32>)
// BUCKET: fsdp.reduce_scatter @fc1 %{{.*}} async : tensor<12xf32>

module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc1 params ["fc1.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 12 : i64, offsets = array<i64: 0>, padded_numel = 12 : i64, shapes = [array<i64: 4, 3>], shard_numel = 6 : i64, trainable = array<i1: true>}
  fsdp.unit @fc2 params ["fc2.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 16 : i64, offsets = array<i64: 0>, padded_numel = 16 : i64, shapes = [array<i64: 4, 4>], shard_numel = 8 : i64, trainable = array<i1: true>}
  fsdp.unit @fc3 params ["fc3.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 8 : i64, offsets = array<i64: 0>, padded_numel = 8 : i64, shapes = [array<i64: 2, 4>], shard_numel = 4 : i64, trainable = array<i1: true>}
  func.func @step(%x: tensor<2x3xf32> {fsdp.global_shape = array<i64: 4, 3>, nn.data = "features"}, %y: tensor<2xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                  %p1: tensor<6xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1},
                  %p2: tensor<8xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2},
                  %p3: tensor<4xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc3})
      -> (tensor<f32> {nn.loss}, tensor<6xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc1},
          tensor<8xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc2}, tensor<4xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc3}) {
    // Forward: each unit gathered right before its layer, freed right after.
    %full1 = fsdp.all_gather @fc1 %p1 : tensor<6xf32> -> tensor<12xf32>
    %w1 = fsdp.param_view %full1 "fc1.weight" at 0 : tensor<12xf32> -> tensor<4x3xf32>
    %h1 = nn.linear %x, %w1 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
    fsdp.free %full1 : tensor<12xf32>
    %a1 = nn.relu %h1 : tensor<2x4xf32>
    %full2 = fsdp.all_gather @fc2 %p2 : tensor<8xf32> -> tensor<16xf32>
    %w2 = fsdp.param_view %full2 "fc2.weight" at 0 : tensor<16xf32> -> tensor<4x4xf32>
    %h2 = nn.linear %a1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    fsdp.free %full2 : tensor<16xf32>
    %a2 = nn.relu %h2 : tensor<2x4xf32>
    %full3 = fsdp.all_gather @fc3 %p3 : tensor<4xf32> -> tensor<8xf32>
    %w3 = fsdp.param_view %full3 "fc3.weight" at 0 : tensor<8xf32> -> tensor<2x4xf32>
    %o = nn.linear %a2, %w3 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x2xf32>
    fsdp.free %full3 : tensor<8xf32>
    %loss = nn.cross_entropy %o, %y : (tensor<2x2xf32>, tensor<2xi32>) -> tensor<f32>
    // Backward: fc3 and fc2 gathered again (fc1 is not needed: x is data);
    // each reduce-scatter right after the unit's gradient.
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %do = nn.cross_entropy_grad %o, %y, %seed : (tensor<2x2xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x2xf32>
    %full3b = fsdp.all_gather @fc3 %p3 : tensor<4xf32> -> tensor<8xf32>
    %w3b = fsdp.param_view %full3b "fc3.weight" at 0 : tensor<8xf32> -> tensor<2x4xf32>
    %da2 = nn.matmul %do, %w3b : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    fsdp.free %full3b : tensor<8xf32>
    %dw3 = nn.matmul %do, %a2 {transpose_a = true} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %g3 = fsdp.flatten @fc3(%dw3) {offsets = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<8xf32>
    %r3 = fsdp.reduce_scatter @fc3 %g3 : tensor<8xf32> -> tensor<4xf32>
    fsdp.free %g3 : tensor<8xf32>
    %dh2 = nn.relu_grad %h2, %da2 : tensor<2x4xf32>
    %full2b = fsdp.all_gather @fc2 %p2 : tensor<8xf32> -> tensor<16xf32>
    %w2b = fsdp.param_view %full2b "fc2.weight" at 0 : tensor<16xf32> -> tensor<4x4xf32>
    %da1 = nn.matmul %dh2, %w2b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    fsdp.free %full2b : tensor<16xf32>
    %dw2 = nn.matmul %dh2, %a1 {transpose_a = true} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %g2 = fsdp.flatten @fc2(%dw2) {offsets = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<16xf32>
    %r2 = fsdp.reduce_scatter @fc2 %g2 : tensor<16xf32> -> tensor<8xf32>
    fsdp.free %g2 : tensor<16xf32>
    %dh1 = nn.relu_grad %h1, %da1 : tensor<2x4xf32>
    %dw1 = nn.matmul %dh1, %x {transpose_a = true} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %g1 = fsdp.flatten @fc1(%dw1) {offsets = array<i64: 0>} : (tensor<4x3xf32>) -> tensor<12xf32>
    %r1 = fsdp.reduce_scatter @fc1 %g1 : tensor<12xf32> -> tensor<6xf32>
    fsdp.free %g1 : tensor<12xf32>
    %p1_new = nn.sgd_update %p1, %r1 {lr = 1.000000e-01 : f64} : tensor<6xf32>
    %p2_new = nn.sgd_update %p2, %r2 {lr = 1.000000e-01 : f64} : tensor<8xf32>
    %p3_new = nn.sgd_update %p3, %r3 {lr = 1.000000e-01 : f64} : tensor<4xf32>
    return %loss, %p1_new, %p2_new, %p3_new : tensor<f32>, tensor<6xf32>, tensor<8xf32>, tensor<4xf32>
  }
}
