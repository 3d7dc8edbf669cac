// A 3-layer MLP classifier, 13 -> 64 -> 37 -> 10, global batch 12: the walking
// skeleton's model. No layer's size divides evenly by 3 or 4 ranks.
func.func @forward(%x: tensor<12x13xf32> {nn.data = "features"},
                   %y: tensor<12xi32> {nn.data = "labels"},
                   %w1: tensor<64x13xf32> {nn.param = "fc1.weight"},
                   %b1: tensor<64xf32> {nn.param = "fc1.bias", nn.init = "uniform(0.2773501)"},
                   %w2: tensor<37x64xf32> {nn.param = "fc2.weight"},
                   %b2: tensor<37xf32> {nn.param = "fc2.bias", nn.init = "uniform(0.125)"},
                   %w3: tensor<10x37xf32> {nn.param = "fc3.weight"},
                   %b3: tensor<10xf32> {nn.param = "fc3.bias", nn.init = "uniform(0.1643990)"})
    -> (tensor<f32> {nn.loss}) {
  %h1 = nn.linear %x, %w1, %b1 : (tensor<12x13xf32>, tensor<64x13xf32>, tensor<64xf32>) -> tensor<12x64xf32>
  %a1 = nn.relu %h1 : tensor<12x64xf32>
  %h2 = nn.linear %a1, %w2, %b2 : (tensor<12x64xf32>, tensor<37x64xf32>, tensor<37xf32>) -> tensor<12x37xf32>
  %a2 = nn.gelu %h2 : tensor<12x37xf32>
  %logits = nn.linear %a2, %w3, %b3 : (tensor<12x37xf32>, tensor<10x37xf32>, tensor<10xf32>) -> tensor<12x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<12x10xf32>, tensor<12xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
