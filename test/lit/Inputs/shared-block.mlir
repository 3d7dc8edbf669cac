// A block applied twice (one module, its parameters read by two forwards
// before one backward), then a head: fsdp-activation-checkpoint recomputes
// each use of `blk` before its own VJP. Global batch 8.
func.func @forward(%x: tensor<8x8xf32> {nn.data = "features"}, %y: tensor<8xi32> {nn.data = "labels"},
                   %g: tensor<8xf32> {nn.param = "blk.ln.weight", nn.init = "ones"},
                   %bt: tensor<8xf32> {nn.param = "blk.ln.bias"},
                   %w1: tensor<16x8xf32> {nn.param = "blk.fc1.weight"},
                   %w2: tensor<8x16xf32> {nn.param = "blk.fc2.weight"},
                   %head: tensor<5x8xf32> {nn.param = "head.weight"})
    -> (tensor<f32> {nn.loss}) {
  %n = nn.layer_norm %x, %g, %bt {eps = 1.0e-5 : f64} : (tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %h = nn.linear %n, %w1 : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
  %a = nn.gelu %h : tensor<8x16xf32>
  %o = nn.linear %a, %w2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  %r = nn.add %x, %o : tensor<8x8xf32>
  %n2 = nn.layer_norm %r, %g, %bt {eps = 1.0e-5 : f64} : (tensor<8x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %h2 = nn.linear %n2, %w1 : (tensor<8x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
  %a2 = nn.gelu %h2 : tensor<8x16xf32>
  %o2 = nn.linear %a2, %w2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  %r2 = nn.add %r, %o2 : tensor<8x8xf32>
  %logits = nn.linear %r2, %head : (tensor<8x8xf32>, tensor<5x8xf32>) -> tensor<8x5xf32>
  %l = nn.cross_entropy %logits, %y : (tensor<8x5xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
