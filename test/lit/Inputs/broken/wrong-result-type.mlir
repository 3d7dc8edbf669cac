func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"}, %w: tensor<3x5xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x9xf64>
  %l = nn.cross_entropy %h, %y : (tensor<4x9xf64>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
