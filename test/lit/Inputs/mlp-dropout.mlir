// The MLP with dropout (nn.dropout) after its hidden activations and on the
// weight of its second layer (DropConnect: a tensor whose rows are not the
// batch's, the same mask on every rank), in f64: 13 -> 64 -> 37 -> 10,
// global batch 12. The step input feeds the masks (and the optimizer, which
// reuses it).
func.func @forward(%x: tensor<12x13xf64> {nn.data = "features"},
                   %y: tensor<12xi32> {nn.data = "labels"},
                   %step: tensor<i64> {nn.step},
                   %w1: tensor<64x13xf64> {nn.param = "fc1.weight"},
                   %b1: tensor<64xf64> {nn.param = "fc1.bias", nn.init = "uniform(0.2773501)"},
                   %w2: tensor<37x64xf64> {nn.param = "fc2.weight"},
                   %b2: tensor<37xf64> {nn.param = "fc2.bias", nn.init = "uniform(0.125)"},
                   %w3: tensor<10x37xf64> {nn.param = "fc3.weight"},
                   %b3: tensor<10xf64> {nn.param = "fc3.bias", nn.init = "uniform(0.1643990)"})
    -> (tensor<f64> {nn.loss}) {
  %h1 = nn.linear %x, %w1, %b1 : (tensor<12x13xf64>, tensor<64x13xf64>, tensor<64xf64>) -> tensor<12x64xf64>
  %a1 = nn.relu %h1 : tensor<12x64xf64>
  %d1 = nn.dropout %a1, %step {rate = 2.500000e-01, seed = 1} : tensor<12x64xf64>, tensor<i64>
  %w2d = nn.dropout %w2, %step {rate = 1.000000e-01, seed = 3} : tensor<37x64xf64>, tensor<i64>
  %h2 = nn.linear %d1, %w2d, %b2 : (tensor<12x64xf64>, tensor<37x64xf64>, tensor<37xf64>) -> tensor<12x37xf64>
  %a2 = nn.gelu %h2 : tensor<12x37xf64>
  %d2 = nn.dropout %a2, %step {rate = 1.000000e-01, seed = 2} : tensor<12x37xf64>, tensor<i64>
  %logits = nn.linear %d2, %w3, %b3 : (tensor<12x37xf64>, tensor<10x37xf64>, tensor<10xf64>) -> tensor<12x10xf64>
  %loss = nn.cross_entropy %logits, %y : (tensor<12x10xf64>, tensor<12xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
