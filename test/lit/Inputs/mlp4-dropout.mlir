// A 4-block MLP with dropout in blocks 0, 1 and 2 (blocks 0 and 2 are the
// two chunks of rank 0 under interleaved 1F1B at P = 2, v = 2: both read
// the one step input), in f64: 13 -> 32 -> 32 -> 32 -> 10, global batch 12.
func.func @forward(%x: tensor<12x13xf64> {nn.data = "features"},
                   %y: tensor<12xi32> {nn.data = "labels"},
                   %step: tensor<i64> {nn.step},
                   %w1: tensor<32x13xf64> {nn.param = "net.h.0.weight"},
                   %w2: tensor<32x32xf64> {nn.param = "net.h.1.weight"},
                   %w3: tensor<32x32xf64> {nn.param = "net.h.2.weight"},
                   %w4: tensor<10x32xf64> {nn.param = "net.h.3.weight"})
    -> (tensor<f64> {nn.loss}) {
  %h1 = nn.linear %x, %w1 : (tensor<12x13xf64>, tensor<32x13xf64>) -> tensor<12x32xf64>
  %a1 = nn.relu %h1 : tensor<12x32xf64>
  %d1 = nn.dropout %a1, %step {rate = 2.500000e-01, seed = 1} : tensor<12x32xf64>, tensor<i64>
  %h2 = nn.linear %d1, %w2 : (tensor<12x32xf64>, tensor<32x32xf64>) -> tensor<12x32xf64>
  %a2 = nn.gelu %h2 : tensor<12x32xf64>
  %d2 = nn.dropout %a2, %step {rate = 1.000000e-01, seed = 2} : tensor<12x32xf64>, tensor<i64>
  %h3 = nn.linear %d2, %w3 : (tensor<12x32xf64>, tensor<32x32xf64>) -> tensor<12x32xf64>
  %a3 = nn.relu %h3 : tensor<12x32xf64>
  %d3 = nn.dropout %a3, %step {rate = 2.000000e-01, seed = 3} : tensor<12x32xf64>, tensor<i64>
  %logits = nn.linear %d3, %w4 : (tensor<12x32xf64>, tensor<10x32xf64>) -> tensor<12x10xf64>
  %loss = nn.cross_entropy %logits, %y : (tensor<12x10xf64>, tensor<12xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
