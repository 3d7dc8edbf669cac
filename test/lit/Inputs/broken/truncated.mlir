func.func @forward(%x: tensor<4x5xf32> {nn.data = "features"}) -> tensor<f32> {
  %l = nn.linear %x,
