func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}, %w: tensor<3x5xf32> {nn.param = "w"}) -> (tensor<f32> {nn.loss}) {
  %y = nn.frobnicate %x, %w : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
