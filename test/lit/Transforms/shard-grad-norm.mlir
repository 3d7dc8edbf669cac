// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="weight-decay=0.1 no-decay=*.bias" --fsdp-wrap --fsdp-shard="world-size=2 max-grad-norm=1.0" | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="weight-decay=0.1 no-decay=*.bias" --fsdp-wrap --fsdp-shard="world-size=2 strategy=no-shard report-grad-norm=true" | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=4 strategy=hybrid-shard shard-size=2 max-grad-norm=2.0" | FileCheck %s --check-prefix=HSDP
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="weight-decay=0.1 no-decay=*.bias" --fsdp-wrap --fsdp-shard="world-size=2 strategy=shard-optimizer max-grad-norm=1.0" | FileCheck %s --check-prefix=ZERO1
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" | FileCheck %s --check-prefix=OFF
// RUN: fsdp-opt %s --fsdp-autodiff="loss-scaling=true" --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" | FileCheck %s --check-prefix=LS
// RUN: fsdp-opt %s --fsdp-autodiff="loss-scaling=true" | FileCheck %s --check-prefix=SEED
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="max-grad-norm=-2" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="max-grad-norm=inf" 2>&1 | FileCheck %s --check-prefix=INF
// INF: fsdp-shard: max-grad-norm must be finite and > 0, got INF

// fsdp-shard's global gradient-norm clipping and a unit's weight-decay
// groups. Unit fc is fc.weight (12 elements at 0) and fc.bias (3 at 12): 15
// elements, padded to 16 on 2 ranks. The squared norm of each reduced shard
// is summed over the shard group only; the coefficient scales the shard
// before the update; the bias's elements [12, 15) of the flat buffer take
// weight decay 0 on whichever rank holds them.

// FULL-LABEL: func.func @f
// FULL-SAME: -> (tensor<f32> {nn.loss}, {{.*}}, tensor<f64> {nn.grad_norm})
// FULL: %[[G:.*]] = fsdp.reduce_scatter @fc %{{.*}} : tensor<16xf32> -> tensor<8xf32>
// FULL: %[[SS:.*]] = nn.sum_squares %[[G]] : tensor<8xf32> -> tensor<1xf64>
// FULL: %[[TOT:.*]] = fsdp.all_reduce @fc %[[SS]] {group = #fsdp.group<shard>, op = #fsdp.reduction<sum>} : tensor<1xf64> -> tensor<1xf64>
// FULL: %[[NORM:.*]], %[[COEF:.*]] = nn.grad_norm %[[TOT]] {max_norm = 1.000000e+00 : f64} : tensor<1xf64>
// FULL: %[[GS:.*]] = nn.scale %[[G]], %[[COEF]] : tensor<8xf32>, tensor<f64>
// FULL: nn.adamw_update %arg3, %[[GS]], {{.*}} skip_if_nonfinite(%[[NORM]] : tensor<f64>) {{{.*}}no_decay = array<i64: 12, 15>, sharded, weight_decay = 1.000000e-01 : f64}
// FULL: return {{.*}}, %[[NORM]] :

// DDP's all-reduced gradient is whole on every rank: no sum over ranks, and
// no scaling when the norm is only reported. Its update is of the whole
// buffer (no `sharded`).
// DDP: %[[G:.*]] = fsdp.all_reduce @fc %{{.*}} : tensor<16xf32> -> tensor<16xf32>
// DDP: %[[SS:.*]] = nn.sum_squares %[[G]] : tensor<16xf32> -> tensor<1xf64>
// DDP-NOT: fsdp.all_reduce
// DDP: %[[NORM:.*]], %{{.*}} = nn.grad_norm %[[SS]] : tensor<1xf64>
// DDP-NOT: nn.scale
// DDP: nn.adamw_update %arg3, %[[G]], {{.*}}no_decay = array<i64: 12, 15>, weight_decay = 1.000000e-01 : f64}
// DDP: return {{.*}}, %[[NORM]] :

// Under HSDP replicas hold the same shard, so the norm is summed over the shard
// group, not the replicate group nor the world.
// HSDP: fsdp.all_reduce @fc %{{.*}} {group = #fsdp.group<replicate>} : tensor<8xf32> -> tensor<8xf32>
// HSDP: %[[SS:.*]] = nn.sum_squares
// HSDP: fsdp.all_reduce @fc %[[SS]] {group = #fsdp.group<shard>, op = #fsdp.reduction<sum>} : tensor<1xf64>
// HSDP: nn.grad_norm {{.*}}max_norm = 2.000000e+00

// ZeRO-1 updates the local slice of the whole parameters: `sharded`.
// ZERO1: %[[G:.*]] = fsdp.reduce_scatter
// ZERO1: nn.sum_squares %[[G]]
// ZERO1: fsdp.local_shard
// ZERO1: nn.adamw_update {{.*}}no_decay = array<i64: 12, 15>, sharded,

// Dynamic loss scaling (fsdp-autodiff's loss-scaling): the backward's seed
// is multiplied by the nn.loss_scale argument; fsdp-shard computes the norm
// without being asked (no max-grad-norm, no report-grad-norm), divides the
// scale out of the norm and the coefficient, scales every gradient shard by
// the coefficient, and every update skips on a non-finite norm.
// SEED: func.func @f({{.*}}, %[[S:.*]]: tensor<f64> {nn.loss_scale})
// SEED: %[[ONE:.*]] = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
// SEED: %[[SEED:.*]] = nn.scale %[[ONE]], %[[S]] : tensor<f32>, tensor<f64>
// SEED: nn.cross_entropy_grad %{{.*}}, %{{.*}}, %[[SEED]]
// LS-LABEL: func.func @f
// LS-SAME: %[[S:arg[0-9]+]]: tensor<f64> {nn.loss_scale}
// LS-SAME: -> (tensor<f32> {nn.loss}, {{.*}}, tensor<f64> {nn.grad_norm})
// LS: %[[G:.*]] = fsdp.reduce_scatter @fc
// LS: %[[TOT:.*]] = fsdp.all_reduce @fc
// LS: %[[NORM:.*]], %[[COEF:.*]] = nn.grad_norm %[[TOT]] loss_scale(%[[S]] : tensor<f64>) : tensor<1xf64>
// LS: %[[GS:.*]] = nn.scale %[[G]], %[[COEF]] : tensor<8xf32>, tensor<f64>
// LS: nn.adamw_update %{{.*}}, %[[GS]], {{.*}} skip_if_nonfinite(%[[NORM]] : tensor<f64>)
// LS: return {{.*}}, %[[NORM]] :

// OFF-NOT: nn.sum_squares
// OFF-NOT: nn.grad_norm
// OFF-NOT: no_decay

// NEG: fsdp-shard: max-grad-norm must be finite and > 0, got -2

func.func @f(%x: tensor<4x4xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %w: tensor<3x4xf32> {nn.param = "fc.weight"}, %b: tensor<3xf32> {nn.param = "fc.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w, %b : (tensor<4x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
