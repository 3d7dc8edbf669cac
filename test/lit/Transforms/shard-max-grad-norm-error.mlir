// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2 max-grad-norm=0" -split-input-file -verify-diagnostics
// max-grad-norm must be finite and > 0 (0 would zero every gradient; a clipping that
// is not wanted is left unset).

// expected-error @+1 {{fsdp-shard: max-grad-norm must be finite and > 0, got 0.000000e+00}}
module {
  func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
               %w: tensor<3x4xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}) {
    %h = nn.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %l = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
