// 5 -> 3 -> 2 classifier; fc2.bias (2 elements) wrapped alone, so that at
// 4 ranks two ranks hold a shard that is all padding.
func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %w1: tensor<3x5xf32> {nn.param = "fc1.weight"}, %b1: tensor<3xf32> {nn.param = "fc1.bias", nn.init = "uniform(0.4)"},
                   %w2: tensor<2x3xf32> {nn.param = "fc2.weight"}, %b2: tensor<2xf32> {nn.param = "fc2.bias", nn.init = "uniform(0.5)"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<4x5xf32>, tensor<3x5xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %a = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<4x3xf32>
  %o = nn.linear %a, %w2, %b2 : (tensor<4x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %l = nn.cross_entropy %o, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
