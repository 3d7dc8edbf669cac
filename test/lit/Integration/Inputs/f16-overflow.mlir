// One linear layer, 4 -> 10, zero-initialised, global batch 12: with every
// row (x, 0, 0, 0) of label 0 each rank's gradient of fc.weight[0][0] is
// (softmax_0 - 1) · x = -0.9 x, whatever its share of the batch
// (f16-overflow.test).
func.func @forward(%x: tensor<12x4xf32> {nn.data = "features"},
                   %y: tensor<12xi32> {nn.data = "labels"},
                   %w: tensor<10x4xf32> {nn.param = "fc.weight", nn.init = "zeros"},
                   %b: tensor<10xf32> {nn.param = "fc.bias", nn.init = "zeros"})
    -> (tensor<f32> {nn.loss}) {
  %logits = nn.linear %x, %w, %b : (tensor<12x4xf32>, tensor<10x4xf32>, tensor<10xf32>) -> tensor<12x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<12x10xf32>, tensor<12xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
