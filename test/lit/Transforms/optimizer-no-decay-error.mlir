// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="no-decay=*.bias,norm.*" -split-input-file -verify-diagnostics
// A no-decay glob that matches no parameter is an error (a misspelt group
// would silently decay everything); every glob must match.

// expected-error @+1 {{fsdp-optimizer: no-decay pattern 'norm.*' matches no trainable parameter}}
module {
  func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
               %w: tensor<3x4xf32> {nn.param = "fc.weight"}, %b: tensor<3xf32> {nn.param = "fc.bias"})
      -> (tensor<f32> {nn.loss}) {
    %h = nn.linear %x, %w, %b : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
