// fsdp-collectives alone on hand-written fsdp-shard output for the other
// strategies, mixed precision and micro-batches: one unit @fc (fc.weight
// [3, 3], used twice, so backward needs it too), 2 ranks, shards of 5. The
// one unit is the root (its forward ends the forward, its backward begins
// the backward), so reshard-root=true makes it reshard as any unit; the
// default keeps it gathered into each micro-batch's backward (ROOT).
// RUN: fsdp-opt %s --fsdp-collectives="reshard-root=true" -split-input-file | FileCheck %s
// RUN: fsdp-opt %s --fsdp-collectives -split-input-file | FileCheck %s --check-prefix=ROOT

// shard-grad-op (the module's strategy): one gather serves forward and
// backward, freed after the last backward use, whatever reshard-after-forward.
// CHECK-LABEL: func.func @zero2(
// CHECK-NEXT: %[[G:.*]] = fsdp.all_gather @fc %arg2 : tensor<5xf32> -> tensor<10xf32>
// CHECK-NEXT: %[[W:.*]] = fsdp.param_view %[[G]] "fc.weight" at 0
// CHECK-NEXT: nn.linear %arg0, %[[W]]
// CHECK-NEXT: nn.linear %{{.*}}, %[[W]]
// CHECK-NEXT: nn.cross_entropy
// CHECK-NEXT: arith.constant
// CHECK-NEXT: nn.cross_entropy_grad
// CHECK-NEXT: nn.matmul %{{.*}}, %[[W]] :
// CHECK-NEXT: fsdp.free %[[G]] : tensor<10xf32>
// CHECK-NOT: fsdp.all_gather
// CHECK: %[[F:.*]] = fsdp.flatten @fc
// CHECK-NEXT: fsdp.reduce_scatter @fc %[[F]]
// CHECK-NEXT: fsdp.free %[[F]]
module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"shard-grad-op">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 9 : i64, offsets = array<i64: 0>, padded_numel = 10 : i64, shapes = [array<i64: 3, 3>], shard_numel = 5 : i64, trainable = array<i1: true>}
  func.func @zero2(%x: tensor<2x3xf32> {fsdp.global_shape = array<i64: 4, 3>, nn.data = "features"}, %y: tensor<2xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                   %p: tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
      -> (tensor<f32> {nn.loss}, tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}) {
    %full = fsdp.all_gather @fc %p : tensor<5xf32> -> tensor<10xf32>
    %w = fsdp.param_view %full "fc.weight" at 0 : tensor<10xf32> -> tensor<3x3xf32>
    %h = nn.linear %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %o = nn.linear %h, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %loss = nn.cross_entropy %o, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %do = nn.cross_entropy_grad %o, %y, %seed : (tensor<2x3xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x3xf32>
    %dh = nn.matmul %do, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %dw_o = nn.matmul %do, %h {transpose_a = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %dw_h = nn.matmul %dh, %x {transpose_a = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %dw = nn.add %dw_o, %dw_h : tensor<3x3xf32>
    %g = fsdp.flatten @fc(%dw) {offsets = array<i64: 0>} : (tensor<3x3xf32>) -> tensor<10xf32>
    %r = fsdp.reduce_scatter @fc %g : tensor<10xf32> -> tensor<5xf32>
    %p_new = nn.sgd_update %p, %r {lr = 1.000000e-01 : f64} : tensor<5xf32>
    return %loss, %p_new : tensor<f32>, tensor<5xf32>
  }
}

// -----

// shard-optimizer (ZeRO-1): replicated parameters are viewed, not gathered,
// so no gather or free of parameters is placed; the whole gradient stays
// where fsdp-shard put it (DeepSpeed stage 1 reduces at the end of backward)
// and is freed after its reduce-scatter; the all-gather of the updated slice
// stays as it is.
// CHECK-LABEL: func.func @zero1(
// CHECK-NOT: fsdp.free
// CHECK: nn.cross_entropy_grad
// CHECK-NOT: fsdp.free
// CHECK: %[[DW:.*]] = nn.add
// CHECK-NEXT: %[[S:.*]] = fsdp.local_shard @fc %arg2
// CHECK-NEXT: %[[F:.*]] = fsdp.flatten @fc(%[[DW]])
// CHECK-NEXT: %[[R:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<10xf32> -> tensor<5xf32>
// CHECK-NEXT: fsdp.free %[[F]] : tensor<10xf32>
// CHECK-NEXT: %[[U:.*]] = nn.sgd_update %[[S]], %[[R]]
// CHECK-NEXT: %[[NEW:.*]] = fsdp.all_gather @fc %[[U]] : tensor<5xf32> -> tensor<10xf32>
// CHECK-NEXT: return %{{.*}}, %[[NEW]]
module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"shard-optimizer">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 9 : i64, offsets = array<i64: 0>, padded_numel = 10 : i64, shapes = [array<i64: 3, 3>], shard_numel = 5 : i64, trainable = array<i1: true>}
  func.func @zero1(%x: tensor<2x3xf32> {fsdp.global_shape = array<i64: 4, 3>, nn.data = "features"}, %y: tensor<2xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                   %p: tensor<10xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
      -> (tensor<f32> {nn.loss}, tensor<10xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}) {
    %w = fsdp.param_view %p "fc.weight" at 0 : tensor<10xf32> -> tensor<3x3xf32>
    %h = nn.linear %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %o = nn.linear %h, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %loss = nn.cross_entropy %o, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %do = nn.cross_entropy_grad %o, %y, %seed : (tensor<2x3xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x3xf32>
    %dh = nn.matmul %do, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %dw_o = nn.matmul %do, %h {transpose_a = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %dw_h = nn.matmul %dh, %x {transpose_a = true} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %dw = nn.add %dw_o, %dw_h : tensor<3x3xf32>
    // The slice is taken before the gradient is packed, so that moving the
    // packed gradient up to its last gradient (other strategies) would show.
    %slice = fsdp.local_shard @fc %p : tensor<10xf32> -> tensor<5xf32>
    %g = fsdp.flatten @fc(%dw) {offsets = array<i64: 0>} : (tensor<3x3xf32>) -> tensor<10xf32>
    %r = fsdp.reduce_scatter @fc %g : tensor<10xf32> -> tensor<5xf32>
    %slice_new = nn.sgd_update %slice, %r {lr = 1.000000e-01 : f64} : tensor<5xf32>
    %p_new = fsdp.all_gather @fc %slice_new : tensor<5xf32> -> tensor<10xf32>
    return %loss, %p_new : tensor<f32>, tensor<10xf32>
  }
}

// -----

// hybrid-shard with cast-on-gather bf16 (4 ranks, shard groups of 2): each
// placed gather (forward, then backward) gets its own cast of the f32 shard
// right before it; the reduction chain (reduce-scatter in the shard group,
// all-reduce across replicas, cast to f32) follows the packed gradient, which
// is freed after the reduce-scatter.
// CHECK-LABEL: func.func @hsdp_bf16(
// CHECK-NEXT: nn.cast %arg0
// CHECK-NEXT: %[[C:.*]] = nn.cast %arg2 : tensor<5xf32> -> tensor<5xbf16>
// CHECK-NEXT: %[[G:.*]] = fsdp.all_gather @fc %[[C]] : tensor<5xbf16> -> tensor<10xbf16>
// CHECK-NEXT: fsdp.param_view %[[G]]
// CHECK-NEXT: nn.linear
// CHECK-NEXT: nn.linear
// CHECK-NEXT: fsdp.free %[[G]] : tensor<10xbf16>
// CHECK-NEXT: nn.cross_entropy
// CHECK-NEXT: arith.constant
// CHECK-NEXT: nn.cross_entropy_grad
// CHECK-NEXT: %[[CB:.*]] = nn.cast %arg2 : tensor<5xf32> -> tensor<5xbf16>
// CHECK-NEXT: %[[GB:.*]] = fsdp.all_gather @fc %[[CB]] : tensor<5xbf16> -> tensor<10xbf16>
// CHECK-NEXT: fsdp.param_view %[[GB]]
// CHECK-NEXT: nn.matmul
// CHECK-NEXT: fsdp.free %[[GB]] : tensor<10xbf16>
// CHECK: %[[F:.*]] = fsdp.flatten @fc
// CHECK-NEXT: %[[RS:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<10xbf16> -> tensor<5xbf16>
// CHECK-NEXT: fsdp.free %[[F]] : tensor<10xbf16>
// CHECK-NEXT: %[[AR:.*]] = fsdp.all_reduce @fc %[[RS]] {group = #fsdp.group<replicate>}
// CHECK-NEXT: %[[R32:.*]] = nn.cast %[[AR]] : tensor<5xbf16> -> tensor<5xf32>
// CHECK-NEXT: nn.sgd_update %arg2, %[[R32]]
module attributes {fsdp.replicas = 2 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"hybrid-shard">, fsdp.world_size = 4 : i64} {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 9 : i64, offsets = array<i64: 0>, padded_numel = 10 : i64, shapes = [array<i64: 3, 3>], shard_numel = 5 : i64, trainable = array<i1: true>}
  func.func @hsdp_bf16(%x: tensor<1x3xf32> {fsdp.global_shape = array<i64: 4, 3>, nn.data = "features"}, %y: tensor<1xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                       %p: tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
      -> (tensor<f32> {nn.loss}, tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}) {
    %p_bf16 = nn.cast %p : tensor<5xf32> -> tensor<5xbf16>
    %full = fsdp.all_gather @fc %p_bf16 : tensor<5xbf16> -> tensor<10xbf16>
    %w = fsdp.param_view %full "fc.weight" at 0 : tensor<10xbf16> -> tensor<3x3xbf16>
    %x_bf16 = nn.cast %x : tensor<1x3xf32> -> tensor<1x3xbf16>
    %h = nn.linear %x_bf16, %w : (tensor<1x3xbf16>, tensor<3x3xbf16>) -> tensor<1x3xbf16>
    %o = nn.linear %h, %w : (tensor<1x3xbf16>, tensor<3x3xbf16>) -> tensor<1x3xbf16>
    %loss = nn.cross_entropy %o, %y : (tensor<1x3xbf16>, tensor<1xi32>) -> tensor<f32>
    %seed = arith.constant dense<1.000000e+00> : tensor<f32>
    %do = nn.cross_entropy_grad %o, %y, %seed : (tensor<1x3xbf16>, tensor<1xi32>, tensor<f32>) -> tensor<1x3xbf16>
    %dh = nn.matmul %do, %w : (tensor<1x3xbf16>, tensor<3x3xbf16>) -> tensor<1x3xbf16>
    %dw_o = nn.matmul %do, %h {transpose_a = true} : (tensor<1x3xbf16>, tensor<1x3xbf16>) -> tensor<3x3xbf16>
    %dw_h = nn.matmul %dh, %x_bf16 {transpose_a = true} : (tensor<1x3xbf16>, tensor<1x3xbf16>) -> tensor<3x3xbf16>
    %dw = nn.add %dw_o, %dw_h : tensor<3x3xbf16>
    %g = fsdp.flatten @fc(%dw) {offsets = array<i64: 0>} : (tensor<3x3xbf16>) -> tensor<10xbf16>
    %rs = fsdp.reduce_scatter @fc %g : tensor<10xbf16> -> tensor<5xbf16>
    %ar = fsdp.all_reduce @fc %rs {group = #fsdp.group<replicate>} : tensor<5xbf16> -> tensor<5xbf16>
    %r = nn.cast %ar : tensor<5xbf16> -> tensor<5xf32>
    %p_new = nn.sgd_update %p, %r {lr = 1.000000e-01 : f64} : tensor<5xf32>
    return %loss, %p_new : tensor<f32>, tensor<5xf32>
  }
}

// -----

// Two micro-batches (accumulate=sharded): forward ends at each micro-batch's
// own loss (nn.micro_batch_loss), so each micro-batch gathers for its forward
// and again for its backward, and its reduce-scatter moves up into it.
// The root by default: one gather per micro-batch serves its forward and its
// backward, freed after that micro-batch's last backward use.
// ROOT-LABEL: func.func @micro(
// ROOT: %[[G0:.*]] = fsdp.all_gather @fc
// ROOT-NOT: fsdp.free %[[G0]]
// ROOT: nn.cross_entropy {{.*}}nn.micro_batch = 0
// ROOT-NOT: fsdp.all_gather
// ROOT: nn.matmul {{.*}}nn.micro_batch = 0
// ROOT-NEXT: fsdp.free %[[G0]]
// ROOT: %[[G1:.*]] = fsdp.all_gather @fc
// ROOT-NOT: fsdp.free %[[G1]]
// ROOT: nn.cross_entropy {{.*}}nn.micro_batch = 1
// ROOT-NOT: fsdp.all_gather
// ROOT: nn.matmul {{.*}}nn.micro_batch = 1
// ROOT-NEXT: fsdp.free %[[G1]]
// ROOT-NOT: fsdp.all_gather
// CHECK-LABEL: func.func @micro(
// CHECK: %[[G0:.*]] = fsdp.all_gather @fc
// CHECK: nn.linear {{.*}}nn.micro_batch = 0
// CHECK-NEXT: nn.linear {{.*}}nn.micro_batch = 0
// CHECK-NEXT: fsdp.free %[[G0]]
// CHECK-NEXT: nn.cross_entropy {{.*}}nn.micro_batch = 0
// CHECK: %[[G0B:.*]] = fsdp.all_gather @fc
// CHECK: nn.matmul {{.*}}nn.micro_batch = 0
// CHECK-NEXT: fsdp.free %[[G0B]]
// CHECK: %[[F0:.*]] = fsdp.flatten @fc(%[[DW0:[a-z0-9_]+]])
// CHECK-NEXT: fsdp.reduce_scatter @fc %[[F0]]
// CHECK-NEXT: fsdp.free %[[F0]]
// CHECK-NEXT: nn.micro_batch %arg0 {count = 2 : i64, index = 1 : i64}
// CHECK: %[[G1:.*]] = fsdp.all_gather @fc
// CHECK: nn.linear {{.*}}nn.micro_batch = 1
// CHECK-NEXT: nn.linear {{.*}}nn.micro_batch = 1
// CHECK-NEXT: fsdp.free %[[G1]]
// CHECK-NEXT: nn.cross_entropy {{.*}}nn.micro_batch = 1
// CHECK: %[[G1B:.*]] = fsdp.all_gather @fc
// CHECK: nn.matmul {{.*}}nn.micro_batch = 1
// CHECK-NEXT: fsdp.free %[[G1B]]
// CHECK: %[[F1:.*]] = fsdp.flatten @fc
// CHECK-NEXT: fsdp.reduce_scatter @fc %[[F1]]
// CHECK-NEXT: fsdp.free %[[F1]]
// CHECK-NOT: fsdp.all_gather
module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc params ["fc.weight"] {element_type = f32, inits = ["uniform(0.5)"], numel = 9 : i64, offsets = array<i64: 0>, padded_numel = 10 : i64, shapes = [array<i64: 3, 3>], shard_numel = 5 : i64, trainable = array<i1: true>}
  func.func @micro(%x: tensor<2x3xf32> {fsdp.global_shape = array<i64: 4, 3>, nn.data = "features"}, %y: tensor<2xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                   %p: tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
      -> (tensor<f32> {nn.loss}, tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}) {
    %full = fsdp.all_gather @fc %p : tensor<5xf32> -> tensor<10xf32>
    %w = fsdp.param_view %full "fc.weight" at 0 : tensor<10xf32> -> tensor<3x3xf32>
    // Micro-batch 0.
    %x0 = nn.micro_batch %x {count = 2 : i64, index = 0 : i64} : tensor<2x3xf32> -> tensor<1x3xf32>
    %y0 = nn.micro_batch %y {count = 2 : i64, index = 0 : i64} : tensor<2xi32> -> tensor<1xi32>
    %h0 = nn.linear %x0, %w {nn.micro_batch = 0 : i64} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %o0 = nn.linear %h0, %w {nn.micro_batch = 0 : i64} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %l0 = nn.cross_entropy %o0, %y0 {nn.micro_batch = 0 : i64, nn.micro_batch_loss} : (tensor<1x3xf32>, tensor<1xi32>) -> tensor<f32>
    %s0 = arith.constant {nn.micro_batch = 0 : i64} dense<5.000000e-01> : tensor<f32>
    %do0 = nn.cross_entropy_grad %o0, %y0, %s0 {nn.micro_batch = 0 : i64} : (tensor<1x3xf32>, tensor<1xi32>, tensor<f32>) -> tensor<1x3xf32>
    %dh0 = nn.matmul %do0, %w {nn.micro_batch = 0 : i64} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %dwo0 = nn.matmul %do0, %h0 {nn.micro_batch = 0 : i64, transpose_a = true} : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
    %dwh0 = nn.matmul %dh0, %x0 {nn.micro_batch = 0 : i64, transpose_a = true} : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
    %dw0 = nn.add %dwo0, %dwh0 {nn.micro_batch = 0 : i64} : tensor<3x3xf32>
    // Micro-batch 1.
    %x1 = nn.micro_batch %x {count = 2 : i64, index = 1 : i64} : tensor<2x3xf32> -> tensor<1x3xf32>
    %y1 = nn.micro_batch %y {count = 2 : i64, index = 1 : i64} : tensor<2xi32> -> tensor<1xi32>
    %h1 = nn.linear %x1, %w {nn.micro_batch = 1 : i64} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %o1 = nn.linear %h1, %w {nn.micro_batch = 1 : i64} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %l1 = nn.cross_entropy %o1, %y1 {nn.micro_batch = 1 : i64, nn.micro_batch_loss} : (tensor<1x3xf32>, tensor<1xi32>) -> tensor<f32>
    %s1 = arith.constant {nn.micro_batch = 1 : i64} dense<5.000000e-01> : tensor<f32>
    %do1 = nn.cross_entropy_grad %o1, %y1, %s1 {nn.micro_batch = 1 : i64} : (tensor<1x3xf32>, tensor<1xi32>, tensor<f32>) -> tensor<1x3xf32>
    %dh1 = nn.matmul %do1, %w {nn.micro_batch = 1 : i64} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %dwo1 = nn.matmul %do1, %h1 {nn.micro_batch = 1 : i64, transpose_a = true} : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
    %dwh1 = nn.matmul %dh1, %x1 {nn.micro_batch = 1 : i64, transpose_a = true} : (tensor<1x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
    %dw1 = nn.add %dwo1, %dwh1 {nn.micro_batch = 1 : i64} : tensor<3x3xf32>
    // The mean loss; each micro-batch's gradient reduce-scattered, shards summed.
    %lsum = nn.add %l0, %l1 : tensor<f32>
    %half = arith.constant dense<5.000000e-01> : tensor<f32>
    %loss = nn.mul %lsum, %half : tensor<f32>
    %g0 = fsdp.flatten @fc(%dw0) {offsets = array<i64: 0>} : (tensor<3x3xf32>) -> tensor<10xf32>
    %r0 = fsdp.reduce_scatter @fc %g0 : tensor<10xf32> -> tensor<5xf32>
    %g1 = fsdp.flatten @fc(%dw1) {offsets = array<i64: 0>} : (tensor<3x3xf32>) -> tensor<10xf32>
    %r1 = fsdp.reduce_scatter @fc %g1 : tensor<10xf32> -> tensor<5xf32>
    %r = nn.add %r0, %r1 : tensor<5xf32>
    %p_new = nn.sgd_update %p, %r {lr = 1.000000e-01 : f64} : tensor<5xf32>
    return %loss, %p_new : tensor<f32>, tensor<5xf32>
  }
}
