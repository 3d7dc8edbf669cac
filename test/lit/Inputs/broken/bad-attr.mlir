func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"}, %w: tensor<5x5xf32> {nn.param = "w", nn.init = 42}) -> (tensor<f32> {nn.loss}) {
  %h = nn.gelu %x {approximate = "sideways"} : tensor<4x5xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
