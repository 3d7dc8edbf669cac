// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr=0.01 lr-schedule=cosine warmup-steps=5 decay-steps=100 min-lr=0.001" | FileCheck %s --check-prefix=COSINE
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="optimizer=sgd lr=0.5 lr-schedule=linear decay-steps=10" | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=constant warmup-steps=3" | FileCheck %s --check-prefix=WARMUP
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="weight-decay=0.1 no-decay=*.bias" | FileCheck %s --check-prefix=NODECAY
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=constant" | FileCheck %s --check-prefix=CONSTANT
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=cosine warmup-steps=2" | FileCheck %s --check-prefix=TOT
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="optimizer=sgd lr-schedule=linear" | FileCheck %s --check-prefix=SGDT
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=cosine decay-steps=100" | FileCheck %s --check-prefix=FIXED
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=constant warmup-steps=3" | FileCheck %s --check-prefix=FIXED
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=step" 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr=0.01 min-lr=0.1" 2>&1 | FileCheck %s --check-prefix=MINLR
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="no-decay=[" 2>&1 | FileCheck %s --check-prefix=GLOB
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=cosine warmup-steps=6 decay-steps=3" 2>&1 | FileCheck %s --check-prefix=WARMDECAY
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="decay-steps=10" 2>&1 | FileCheck %s --check-prefix=CONSTDECAY
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="min-lr=1e-5" 2>&1 | FileCheck %s --check-prefix=NOSCHED
// The warm-up starts at 0, so a constant schedule has no floor to reach.
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=constant warmup-steps=3 min-lr=1e-5" 2>&1 | FileCheck %s --check-prefix=NOSCHED
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr=inf" 2>&1 | FileCheck %s --check-prefix=INF
// RUN: not fsdp-opt %s --fsdp-autodiff="frozen=fc.bias" --fsdp-optimizer="no-decay=*.bias" 2>&1 | FileCheck %s --check-prefix=FROZEN
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="weight-decay=1e400" 2>&1 | FileCheck %s --check-prefix=INF
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="optimizer=sgd beta1=0.5" 2>&1 | FileCheck %s --check-prefix=SGDBETA
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="optimizer=sgd eps=1e-6" 2>&1 | FileCheck %s --check-prefix=SGDEPS

// fsdp-optimizer's learning-rate schedules and weight-decay groups. A
// schedule is one nn.lr_schedule of the step argument, read by every update
// as its `lr` operand and returned (nn.lr).

// COSINE-LABEL: func.func @f
// COSINE-SAME: %[[STEP:arg8]]: tensor<i64> {nn.step}
// COSINE-SAME: -> (tensor<f32> {nn.loss}, {{.*}}, tensor<f64> {nn.lr})
// COSINE: %[[LR:.*]] = nn.lr_schedule %[[STEP]] {decay_steps = 100 : i64, kind = "cosine", lr = 1.000000e-02 : f64, min_lr = 1.000000e-03 : f64, warmup_steps = 5 : i64} : tensor<i64> -> tensor<f64>
// COSINE: nn.adamw_update %arg2, %{{.*}}, %arg4, %arg6, %[[STEP]] lr(%[[LR]] : tensor<f64>) {{{.*}}lr = 1.000000e-02 : f64, weight_decay = 1.000000e-02 : f64}
// COSINE: nn.adamw_update %arg3, %{{.*}}, %arg5, %arg7, %[[STEP]] lr(%[[LR]] : tensor<f64>)
// COSINE: return {{.*}}, %[[LR]] : {{.*}}, tensor<f64>

// SGD takes a step argument only for a schedule.
// SGD-LABEL: func.func @f
// SGD-SAME: %[[STEP:arg4]]: tensor<i64> {nn.step}
// SGD: %[[LR:.*]] = nn.lr_schedule %[[STEP]] {decay_steps = 10 : i64, kind = "linear", lr = 5.000000e-01 : f64, min_lr = 0.000000e+00 : f64, warmup_steps = 0 : i64}
// SGD: nn.sgd_update %arg2, %{{.*}} lr(%[[LR]] : tensor<f64>)
// SGD: nn.sgd_update %arg3, %{{.*}} lr(%[[LR]] : tensor<f64>)
// SGD: return {{.*}}, %[[LR]] :

// WARMUP: nn.lr_schedule %arg8 {decay_steps = 0 : i64, kind = "constant", lr = 1.000000e-03 : f64, min_lr = 0.000000e+00 : f64, warmup_steps = 3 : i64}

// NODECAY-LABEL: func.func @f
// NODECAY-NOT: nn.lr_schedule
// NODECAY: nn.adamw_update %arg2, {{.*}}weight_decay = 1.000000e-01 : f64}
// NODECAY: nn.adamw_update %arg3, {{.*}}weight_decay = 0.000000e+00 : f64}
// NODECAY-NOT: nn.lr

// A constant rate without warm-up is the attribute, as without the option.
// CONSTANT-NOT: nn.lr_schedule
// CONSTANT-NOT: lr(
// CONSTANT-NOT: nn.lr}

// Without decay-steps a decaying schedule reads the run's total optimizer
// steps from a scalar input after the step (nn.total_steps), its second
// operand; with decay-steps, or for a constant schedule, there is none.
// TOT-LABEL: func.func @f
// TOT-SAME: %[[STEP:arg8]]: tensor<i64> {nn.step}, %[[TOTAL:arg9]]: tensor<i64> {nn.total_steps}
// TOT: %[[LR:.*]] = nn.lr_schedule %[[STEP]] total(%[[TOTAL]] : tensor<i64>) {decay_steps = 0 : i64, kind = "cosine", lr = 1.000000e-03 : f64, min_lr = 0.000000e+00 : f64, warmup_steps = 2 : i64} : tensor<i64> -> tensor<f64>
// TOT: nn.adamw_update %arg2, %{{.*}}, %arg4, %arg6, %[[STEP]] lr(%[[LR]] : tensor<f64>)
// TOT: return {{.*}}, %[[LR]] : {{.*}}, tensor<f64>
// SGDT-LABEL: func.func @f
// SGDT-SAME: %[[STEP:arg4]]: tensor<i64> {nn.step}, %[[TOTAL:arg5]]: tensor<i64> {nn.total_steps}
// SGDT: nn.lr_schedule %[[STEP]] total(%[[TOTAL]] : tensor<i64>) {decay_steps = 0 : i64, kind = "linear"
// FIXED-NOT: total_steps
// FIXED-NOT: total(
// KIND: for the --lr-schedule option: Cannot find option named 'step'!
// MINLR: fsdp-optimizer: min-lr must be in [0, lr], got 1.000000e-01
// GLOB: fsdp-optimizer: no-decay pattern '[' is not a valid glob
// WARMDECAY: fsdp-optimizer: warmup-steps (6) must be less than decay-steps (3)
// CONSTDECAY: fsdp-optimizer: decay-steps needs lr-schedule=linear or cosine
// NOSCHED: fsdp-optimizer: min-lr needs a decaying schedule (lr-schedule=linear or cosine)
// INF: fsdp-optimizer: expects finite lr > 0
// SGDBETA: fsdp-optimizer: beta1 is an AdamW option; optimizer=sgd has no moments
// SGDEPS: fsdp-optimizer: eps is an AdamW option; optimizer=sgd has no moments
// FROZEN: fsdp-optimizer: no-decay pattern '*.bias' matches no trainable parameter

func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
             %w: tensor<3x4xf32> {nn.param = "fc.weight"}, %b: tensor<3xf32> {nn.param = "fc.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
