// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr=0.01 weight-decay=0.1" | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="optimizer=sgd lr=0.5" | FileCheck %s --check-prefix=SGD
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not fsdp-opt %s --fsdp-optimizer 2>&1 | FileCheck %s --check-prefix=ORDER

// ADAMW-LABEL: func.func @f
// ADAMW-SAME: %arg4: tensor<3x4xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.weight"}
// ADAMW-SAME: %arg5: tensor<3xf32> {nn.opt_state = "exp_avg", nn.param_of = "fc.bias"}
// ADAMW-SAME: %arg6: tensor<3x4xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.weight"}
// ADAMW-SAME: %arg7: tensor<3xf32> {nn.opt_state = "exp_avg_sq", nn.param_of = "fc.bias"}
// ADAMW-SAME: %arg8: tensor<i64> {nn.step}
// ADAMW-SAME: -> (tensor<f32> {nn.loss}, tensor<3x4xf32> {nn.param = "fc.weight"}, tensor<3xf32> {nn.param = "fc.bias"},
// ADAMW: %[[W:.*]], %[[WM:.*]], %[[WV:.*]] = nn.adamw_update %arg2, %{{.*}}, %arg4, %arg6, %arg8 {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-02 : f64, weight_decay = 1.000000e-01 : f64}
// ADAMW: %[[B:.*]], %[[BM:.*]], %[[BV:.*]] = nn.adamw_update %arg3
// ADAMW: return %{{.*}}, %[[W]], %[[B]], %[[WM]], %[[BM]], %[[WV]], %[[BV]]

// SGD-LABEL: func.func @f
// SGD-NOT: nn.step
// SGD: %[[W:.*]] = nn.sgd_update %arg2, %{{.*}} {lr = 5.000000e-01 : f64, weight_decay = 1.000000e-02 : f64}
// SGD: %[[B:.*]] = nn.sgd_update %arg3
// SGD: return %{{.*}}, %[[W]], %[[B]] :

// BAD: for the --optimizer option: Cannot find option named 'lion'!
// ORDER: expects a loss and gradients marked 'nn.grad_of' (run fsdp-autodiff first)

func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
             %w: tensor<3x4xf32> {nn.param = "fc.weight"}, %b: tensor<3xf32> {nn.param = "fc.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
