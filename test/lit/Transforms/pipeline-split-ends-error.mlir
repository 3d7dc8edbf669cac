// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-stage=0 pp-split-embedding=true pp-split-loss=true" -split-input-file -verify-diagnostics
// The ends fsdp-pipeline-split counts as layers (pp-split-embedding,
// pp-split-loss) must exist: a parameter used before layer 0's (the
// embedding's stage is an FSDP step of its own, with an optimizer), and a
// parameter outside the layers used after the last layer's block (the final
// norm or the head).

// expected-error @+1 {{fsdp-pipeline-split: pp-split-embedding: no op before layer 0's uses a parameter (no embedding to count as a layer)}}
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %wh: tensor<4x4xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %x0 = nn.relu %x : tensor<6x4xf32>
  %0 = nn.linear %x0, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %1, %wh : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %2, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{fsdp-pipeline-split: pp-split-loss: no parameter outside the layers is used after the last layer's (no final norm or head to count as a layer)}}
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %we: tensor<4x4xf32> {nn.param = "embed.weight"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"}) -> (tensor<f32> {nn.loss}) {
  %e = nn.linear %x, %we : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %0 = nn.linear %e, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %1, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
