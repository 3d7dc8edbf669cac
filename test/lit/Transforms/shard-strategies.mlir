// fsdp-shard alone, once per strategy, on hand-written input in the form it
// expects (the output of fsdp-autodiff, fsdp-optimizer and fsdp-wrap): one
// unit @fc of fc.weight [2, 3] and fc.bias [2], 8 elements, and a global
// batch of 12. Over a shard group of 3 ranks the flat buffer is right-padded
// to 9 and split into shards of 3.
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 strategy=full-shard" -split-input-file | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 strategy=shard-grad-op" -split-input-file | FileCheck %s --check-prefix=GRADOP
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 strategy=shard-optimizer" -split-input-file | FileCheck %s --check-prefix=ZERO1
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 strategy=no-shard" -split-input-file | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %s --fsdp-shard="world-size=6 strategy=hybrid-shard shard-size=3" -split-input-file | FileCheck %s --check-prefix=HSDP

// full-shard (ZeRO-3): the step takes and returns this rank's 3-element
// shard; the unit is gathered at the top (the default group: the shard
// group), its packed gradient reduce-scattered (the default reduction: avg)
// and the SGD update applies to the shard.
// FULL: module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 3 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 3 : i64}
// FULL: fsdp.unit @fc params ["fc.weight", "fc.bias"] {{.*}}numel = 8 : i64, offsets = array<i64: 0, 6>, padded_numel = 9 : i64, {{.*}}shard_numel = 3 : i64
// FULL-LABEL: func.func @sgd_step(
// FULL-SAME: %[[X:arg[0-9]+]]: tensor<4x3xf32> {fsdp.global_shape = array<i64: 12, 3>, nn.data = "features"}
// FULL-SAME: %[[Y:arg[0-9]+]]: tensor<4xi32> {fsdp.global_shape = array<i64: 12>, nn.data = "labels"}
// FULL-SAME: %[[P:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// FULL-SAME: -> (tensor<f32> {nn.loss}, tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// FULL-NEXT: %[[G:.*]] = fsdp.all_gather @fc %[[P]] : tensor<3xf32> -> tensor<9xf32>
// FULL-NEXT: %[[W:.*]] = fsdp.param_view %[[G]] "fc.weight" at 0 : tensor<9xf32> -> tensor<2x3xf32>
// FULL-NEXT: %[[B:.*]] = fsdp.param_view %[[G]] "fc.bias" at 6 : tensor<9xf32> -> tensor<2xf32>
// FULL-NEXT: %[[H:.*]] = nn.linear %[[X]], %[[W]], %[[B]] : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
// FULL-NEXT: %[[L:.*]] = nn.cross_entropy %[[H]], %[[Y]] : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
// FULL: %[[DW:.*]] = nn.matmul %{{.*}}, %[[X]] {transpose_a = true} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// FULL-NEXT: %[[DB:.*]] = nn.reduce_sum %{{.*}} {axes = array<i64: 0>} : tensor<4x2xf32> -> tensor<2xf32>
// FULL-NEXT: %[[F:.*]] = fsdp.flatten @fc(%[[DW]], %[[DB]]) {offsets = array<i64: 0, 6>} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<9xf32>
// FULL-NEXT: %[[R:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<9xf32> -> tensor<3xf32>
// FULL-NEXT: %[[U:.*]] = nn.sgd_update %[[P]], %[[R]] {lr = 1.000000e-01 : f64} : tensor<3xf32>
// FULL-NEXT: return %[[L]], %[[U]] : tensor<f32>, tensor<3xf32>
// AdamW: both moments become shards of the unit, the step stays a scalar.
// FULL-LABEL: func.func @adamw_step(
// FULL-SAME: %[[STEP:arg[0-9]+]]: tensor<i64> {nn.step}
// FULL-SAME: %[[AP:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}
// FULL-SAME: %[[AM:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc}
// FULL-SAME: %[[AV:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc})
// FULL-SAME: -> (tensor<f32> {nn.loss}, tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}, tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc}, tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc})
// FULL: %[[AR:.*]] = fsdp.reduce_scatter @fc %{{.*}} : tensor<9xf32> -> tensor<3xf32>
// FULL-NEXT: nn.adamw_update %[[AP]], %[[AR]], %[[AM]], %[[AV]], %[[STEP]] {{.*}} : tensor<3xf32>, tensor<i64>
// FULL-NOT: fsdp.

// shard-grad-op (ZeRO-2) shards as full-shard at this level; only the module's
// strategy differs (fsdp-collectives then keeps the gather to backward).
// GRADOP: module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 3 : i64, fsdp.strategy = #fsdp.strategy<"shard-grad-op">, fsdp.world_size = 3 : i64}
// GRADOP-LABEL: func.func @sgd_step(
// GRADOP-SAME: %[[P:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// GRADOP-SAME: -> (tensor<f32> {nn.loss}, tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// GRADOP-NEXT: fsdp.all_gather @fc %[[P]] : tensor<3xf32> -> tensor<9xf32>
// GRADOP: %[[R:.*]] = fsdp.reduce_scatter @fc %{{.*}} : tensor<9xf32> -> tensor<3xf32>
// GRADOP-NEXT: nn.sgd_update %[[P]], %[[R]] {{.*}} : tensor<3xf32>

// shard-optimizer (ZeRO-1): parameters stay replicated (the whole padded flat
// buffer, fsdp.layout = full) and are viewed without a gather; the gradient
// is reduce-scattered, this rank's slice of the parameters taken with
// fsdp.local_shard, updated, and all-gathered back. The moments are shards.
// ZERO1: module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 3 : i64, fsdp.strategy = #fsdp.strategy<"shard-optimizer">, fsdp.world_size = 3 : i64}
// ZERO1-LABEL: func.func @sgd_step(
// ZERO1-SAME: %[[P:arg[0-9]+]]: tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// ZERO1-SAME: -> (tensor<f32> {nn.loss}, tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// ZERO1-NEXT: fsdp.param_view %[[P]] "fc.weight" at 0 : tensor<9xf32> -> tensor<2x3xf32>
// ZERO1-NEXT: fsdp.param_view %[[P]] "fc.bias" at 6 : tensor<9xf32> -> tensor<2xf32>
// ZERO1-NOT: fsdp.all_gather
// ZERO1: %[[F:.*]] = fsdp.flatten @fc
// ZERO1-NEXT: %[[R:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<9xf32> -> tensor<3xf32>
// ZERO1-NEXT: %[[S:.*]] = fsdp.local_shard @fc %[[P]] : tensor<9xf32> -> tensor<3xf32>
// ZERO1-NEXT: %[[U:.*]] = nn.sgd_update %[[S]], %[[R]] {{.*}} : tensor<3xf32>
// ZERO1-NEXT: %[[NEW:.*]] = fsdp.all_gather @fc %[[U]] : tensor<3xf32> -> tensor<9xf32>
// ZERO1-NEXT: return %{{.*}}, %[[NEW]] : tensor<f32>, tensor<9xf32>
// ZERO1-LABEL: func.func @adamw_step(
// ZERO1-SAME: tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}
// ZERO1-SAME: tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc}
// ZERO1-SAME: tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc})
// ZERO1: %[[AS:.*]] = fsdp.local_shard @fc
// ZERO1-NEXT: %[[AU:.*]], %{{.*}}, %{{.*}} = nn.adamw_update %[[AS]], {{.*}} : tensor<3xf32>, tensor<i64>
// ZERO1-NEXT: fsdp.all_gather @fc %[[AU]] : tensor<3xf32> -> tensor<9xf32>

// no-shard (DDP): everything replicated (fsdp.layout = full), no gather, the
// whole gradient all-reduced over the world (the default group).
// DDP: module attributes {fsdp.replicas = 1 : i64, fsdp.shard_size = 3 : i64, fsdp.strategy = #fsdp.strategy<"no-shard">, fsdp.world_size = 3 : i64}
// DDP-LABEL: func.func @sgd_step(
// DDP-SAME: %[[P:arg[0-9]+]]: tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// DDP-SAME: -> (tensor<f32> {nn.loss}, tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// DDP-NOT: fsdp.all_gather
// DDP-NOT: fsdp.reduce_scatter
// DDP: %[[F:.*]] = fsdp.flatten @fc
// DDP-NEXT: %[[R:.*]] = fsdp.all_reduce @fc %[[F]] : tensor<9xf32> -> tensor<9xf32>
// DDP-NEXT: %[[U:.*]] = nn.sgd_update %[[P]], %[[R]] {{.*}} : tensor<9xf32>
// DDP-NEXT: return %{{.*}}, %[[U]] : tensor<f32>, tensor<9xf32>
// DDP-LABEL: func.func @adamw_step(
// DDP-SAME: tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc}
// DDP-SAME: tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc}
// DDP-SAME: tensor<9xf32> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc})
// DDP: fsdp.all_reduce @fc %{{.*}} : tensor<9xf32> -> tensor<9xf32>
// DDP-NEXT: nn.adamw_update {{.*}} : tensor<9xf32>, tensor<i64>

// hybrid-shard (HSDP) over 6 ranks, 2 replicas x shard groups of 3: padding
// and shards follow the shard group (9 and 3, not 12 and 2 as over 6 ranks),
// the batch the world (2 of 12 per rank); the gradient shard is
// reduce-scattered in the shard group, then all-reduced across replicas.
// HSDP: module attributes {fsdp.replicas = 2 : i64, fsdp.shard_size = 3 : i64, fsdp.strategy = #fsdp.strategy<"hybrid-shard">, fsdp.world_size = 6 : i64}
// HSDP: fsdp.unit @fc {{.*}}padded_numel = 9 : i64, {{.*}}shard_numel = 3 : i64
// HSDP-LABEL: func.func @sgd_step(
// HSDP-SAME: tensor<2x3xf32> {fsdp.global_shape = array<i64: 12, 3>, nn.data = "features"}
// HSDP-SAME: %[[P:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// HSDP-NEXT: fsdp.all_gather @fc %[[P]] : tensor<3xf32> -> tensor<9xf32>
// HSDP: %[[F:.*]] = fsdp.flatten @fc
// HSDP-NEXT: %[[RS:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<9xf32> -> tensor<3xf32>
// HSDP-NEXT: %[[AR:.*]] = fsdp.all_reduce @fc %[[RS]] {group = #fsdp.group<replicate>} : tensor<3xf32> -> tensor<3xf32>
// HSDP-NEXT: nn.sgd_update %[[P]], %[[AR]] {{.*}} : tensor<3xf32>
// HSDP-LABEL: func.func @adamw_step(
// HSDP-SAME: tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc}
// HSDP-SAME: tensor<3xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc})
// HSDP: fsdp.all_reduce @fc %{{.*}} {group = #fsdp.group<replicate>} : tensor<3xf32> -> tensor<3xf32>
// HSDP-NEXT: nn.adamw_update {{.*}} : tensor<3xf32>, tensor<i64>

// SGD: the parameters and their updates are per-parameter before fsdp-shard.
module {
  fsdp.unit @fc params ["fc.weight", "fc.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], shapes = [array<i64: 2, 3>, array<i64: 2>], trainable = array<i1: true, true>}
  func.func @sgd_step(%x: tensor<12x3xf32> {nn.data = "features"}, %y: tensor<12xi32> {nn.data = "labels"},
                      %w: tensor<2x3xf32> {nn.param = "fc.weight"}, %b: tensor<2xf32> {nn.param = "fc.bias"})
      -> (tensor<f32> {nn.loss}, tensor<2x3xf32> {nn.param = "fc.weight"}, tensor<2xf32> {nn.param = "fc.bias"}) {
    %h = nn.linear %x, %w, %b : (tensor<12x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<12x2xf32>
    %loss = nn.cross_entropy %h, %y : (tensor<12x2xf32>, tensor<12xi32>) -> tensor<f32>
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %dh = nn.cross_entropy_grad %h, %y, %seed : (tensor<12x2xf32>, tensor<12xi32>, tensor<f32>) -> tensor<12x2xf32>
    %dw = nn.matmul %dh, %x {transpose_a = true} : (tensor<12x2xf32>, tensor<12x3xf32>) -> tensor<2x3xf32>
    %db = nn.reduce_sum %dh {axes = array<i64: 0>} : tensor<12x2xf32> -> tensor<2xf32>
    %w_new = nn.sgd_update %w, %dw {lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<2x3xf32>
    %b_new = nn.sgd_update %b, %db {lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<2xf32>
    return %loss, %w_new, %b_new : tensor<f32>, tensor<2x3xf32>, tensor<2xf32>
  }
}

// -----

// AdamW: two moments per parameter and the step, as fsdp-optimizer appends them.
module {
  fsdp.unit @fc params ["fc.weight", "fc.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], shapes = [array<i64: 2, 3>, array<i64: 2>], trainable = array<i1: true, true>}
  func.func @adamw_step(%x: tensor<12x3xf32> {nn.data = "features"}, %y: tensor<12xi32> {nn.data = "labels"},
                        %w: tensor<2x3xf32> {nn.param = "fc.weight"}, %b: tensor<2xf32> {nn.param = "fc.bias"},
                        %w_m: tensor<2x3xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.weight"},
                        %b_m: tensor<2xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.bias"},
                        %w_v: tensor<2x3xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.weight"},
                        %b_v: tensor<2xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.bias"},
                        %step: tensor<i64> {nn.step})
      -> (tensor<f32> {nn.loss}, tensor<2x3xf32> {nn.param = "fc.weight"}, tensor<2xf32> {nn.param = "fc.bias"},
          tensor<2x3xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.weight"}, tensor<2xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.bias"},
          tensor<2x3xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.weight"}, tensor<2xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.bias"}) {
    %h = nn.linear %x, %w, %b : (tensor<12x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<12x2xf32>
    %loss = nn.cross_entropy %h, %y : (tensor<12x2xf32>, tensor<12xi32>) -> tensor<f32>
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %dh = nn.cross_entropy_grad %h, %y, %seed : (tensor<12x2xf32>, tensor<12xi32>, tensor<f32>) -> tensor<12x2xf32>
    %dw = nn.matmul %dh, %x {transpose_a = true} : (tensor<12x2xf32>, tensor<12x3xf32>) -> tensor<2x3xf32>
    %db = nn.reduce_sum %dh {axes = array<i64: 0>} : tensor<12x2xf32> -> tensor<2xf32>
    %w_new, %w_m_new, %w_v_new = nn.adamw_update %w, %dw, %w_m, %w_v, %step {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64} : tensor<2x3xf32>, tensor<i64>
    %b_new, %b_m_new, %b_v_new = nn.adamw_update %b, %db, %b_m, %b_v, %step {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64} : tensor<2xf32>, tensor<i64>
    return %loss, %w_new, %b_new, %w_m_new, %b_m_new, %w_v_new, %b_v_new
        : tensor<f32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<2xf32>
  }
}
