// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer="lr-schedule=cosine decay-steps=-1" -split-input-file -verify-diagnostics
// A negative decay-steps is an error (0 is not: the run's total optimizer
// steps, optimizer-schedule.mlir's TOT).

// expected-error @+1 {{fsdp-optimizer: decay-steps must be >= 0 (0: the run's total optimizer steps), got -1}}
module {
  func.func @f(%x: tensor<2x4xf32> {nn.data = "features"}, %y: tensor<2xi32> {nn.data = "labels"},
               %w: tensor<3x4xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}) {
    %h = nn.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %l = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
