func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}) -> (tensor<f32> {nn.loss}) {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
