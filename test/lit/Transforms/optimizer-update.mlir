// fsdp-optimizer alone on hand-written input in the form it expects (the
// output of fsdp-autodiff): the loss and the gradients of fc.weight and
// fc.bias (nn.grad_of), returned in that order.
// RUN: fsdp-opt %s --fsdp-optimizer="lr=0.01 beta1=0.8 beta2=0.5 eps=1e-6 weight-decay=0.1" | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.5 weight-decay=0" | FileCheck %s --check-prefix=SGD

// With AdamW, exp_avg of every parameter, then exp_avg_sq, then the step are
// appended as arguments; one nn.adamw_update per parameter with the options;
// the loss, the new parameters, the new exp_avg and the new exp_avg_sq are
// returned. The gradients are no longer results.
// ADAMW-LABEL: func.func @step(
// ADAMW-SAME: %[[X:arg0]]: tensor<2x4xf32> {nn.data = "features"}, %[[Y:arg1]]: tensor<2xi32> {nn.data = "labels"},
// ADAMW-SAME: %[[W:arg2]]: tensor<3x4xf32> {nn.param = "fc.weight"}, %[[B:arg3]]: tensor<3xf32> {nn.param = "fc.bias"},
// ADAMW-SAME: %[[WM:arg4]]: tensor<3x4xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.weight"},
// ADAMW-SAME: %[[BM:arg5]]: tensor<3xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.bias"},
// ADAMW-SAME: %[[WV:arg6]]: tensor<3x4xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.weight"},
// ADAMW-SAME: %[[BV:arg7]]: tensor<3xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.bias"},
// ADAMW-SAME: %[[STEP:arg8]]: tensor<i64> {nn.step})
// ADAMW-SAME: -> (tensor<f32> {nn.loss}, tensor<3x4xf32> {nn.param = "fc.weight"}, tensor<3xf32> {nn.param = "fc.bias"},
// ADAMW-SAME: tensor<3x4xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.weight"}, tensor<3xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.bias"},
// ADAMW-SAME: tensor<3x4xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.weight"}, tensor<3xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.bias"})
// ADAMW: %[[DW:.*]] = nn.matmul
// ADAMW-NEXT: %[[DB:.*]] = nn.reduce_sum
// ADAMW-NEXT: %[[NW:.*]], %[[NWM:.*]], %[[NWV:.*]] = nn.adamw_update %[[W]], %[[DW]], %[[WM]], %[[WV]], %[[STEP]] {beta1 = 8.000000e-01 : f64, beta2 = 5.000000e-01 : f64, eps = 9.9999999999999995E-7 : f64, lr = 1.000000e-02 : f64, weight_decay = 1.000000e-01 : f64} : tensor<3x4xf32>, tensor<i64>
// ADAMW-NEXT: %[[NB:.*]], %[[NBM:.*]], %[[NBV:.*]] = nn.adamw_update %[[B]], %[[DB]], %[[BM]], %[[BV]], %[[STEP]] {{.*}} : tensor<3xf32>, tensor<i64>
// ADAMW-NEXT: return %[[L:.*]], %[[NW]], %[[NB]], %[[NWM]], %[[NBM]], %[[NWV]], %[[NBV]] :

// With SGD there are no state arguments, and one nn.sgd_update per parameter.
// SGD-LABEL: func.func @step(
// SGD-SAME: %[[W:arg2]]: tensor<3x4xf32> {nn.param = "fc.weight"}, %[[B:arg3]]: tensor<3xf32> {nn.param = "fc.bias"})
// SGD-SAME: -> (tensor<f32> {nn.loss}, tensor<3x4xf32> {nn.param = "fc.weight"}, tensor<3xf32> {nn.param = "fc.bias"})
// SGD: %[[DW:.*]] = nn.matmul
// SGD-NEXT: %[[DB:.*]] = nn.reduce_sum
// SGD-NEXT: %[[NW:.*]] = nn.sgd_update %[[W]], %[[DW]] {lr = 5.000000e-01 : f64} : tensor<3x4xf32>
// SGD-NEXT: %[[NB:.*]] = nn.sgd_update %[[B]], %[[DB]] {lr = 5.000000e-01 : f64} : tensor<3xf32>
// SGD-NEXT: return %{{.*}}, %[[NW]], %[[NB]] : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>

func.func @step(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
                %w: tensor<3x4xf32> {nn.param = "fc.weight"}, %b: tensor<3xf32> {nn.param = "fc.bias"})
    -> (tensor<f32> {nn.loss}, tensor<3x4xf32> {nn.grad_of = "fc.weight"}, tensor<3xf32> {nn.grad_of = "fc.bias"}) {
  %h = nn.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %loss = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
  %dh = nn.cross_entropy_grad %h, %y, %seed : (tensor<2x3xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x3xf32>
  %dw = nn.matmul %dh, %x {transpose_a = true} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %db = nn.reduce_sum %dh {axes = array<i64: 0>} : tensor<2x3xf32> -> tensor<3xf32>
  return %loss, %dw, %db : tensor<f32>, tensor<3x4xf32>, tensor<3xf32>
}
