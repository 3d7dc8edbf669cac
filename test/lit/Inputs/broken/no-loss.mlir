func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}, %w: tensor<3x5xf32> {nn.param = "w"}) -> tensor<4x3xf32> {
  %h = nn.linear %x, %w : (tensor<4x5xf32>, tensor<3x5xf32>) -> tensor<4x3xf32>
  return %h : tensor<4x3xf32>
}
