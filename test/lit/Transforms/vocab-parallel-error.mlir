// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=4" -split-input-file -verify-diagnostics
// The diagnostics of the vocab-parallel layout (lib/Transforms/VocabParallel.cpp):
// a vocabulary tp does not divide (no padding: refused, naming the size), a
// tied table the head stores [in, out], a split table read by another op.

func.func @forward(%tok: tensor<2x4xi32> {nn.data = "tokens"}, %y: tensor<2x4xi32> {nn.data = "targets"},
                   %wte: tensor<10x8xf32> {nn.param = "wte.weight"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %w2: tensor<8x16xf32> {nn.param = "down.weight"},
                   %wh: tensor<12x8xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  // expected-error @+1 {{'nn.embedding' op tp=4: the vocabulary of parameter 'wte.weight' (10, dimension 0) is not divisible by tp; pad the vocabulary to a multiple of tp}}
  %e = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
  %h = nn.linear %e, %w1 : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %a = nn.gelu %h : tensor<2x4x16xf32>
  %o = nn.linear %a, %w2 : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %logits = nn.linear %o, %wh : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<2x4x12xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @forward(%tok: tensor<2x4xi32> {nn.data = "tokens"}, %y: tensor<2x4xi32> {nn.data = "targets"},
                   %wte: tensor<8x8xf32> {nn.param = "wte.weight"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %w2: tensor<8x16xf32> {nn.param = "down.weight"}) -> (tensor<f32> {nn.loss}) {
  %e = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h = nn.linear %e, %w1 : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %a = nn.gelu %h : tensor<2x4x16xf32>
  %o = nn.linear %a, %w2 : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'nn.linear' op tp=4: parameter 'wte.weight' is tied between the embedding and an LM head that stores it [in, out]}}
  %logits = nn.linear %o, %wte {transpose_weight = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @forward(%tok: tensor<2x4xi32> {nn.data = "tokens"}, %y: tensor<2x4xi32> {nn.data = "targets"},
                   %wte: tensor<8x8xf32> {nn.param = "wte.weight"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %w2: tensor<8x16xf32> {nn.param = "down.weight"}) -> (tensor<f32> {nn.loss}) {
  %e = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'nn.relu' op tp=4: uses parameter 'wte.weight', which the vocab-parallel embedding or LM head splits by vocabulary rows}}
  %r = nn.relu %wte : tensor<8x8xf32>
  %h = nn.linear %e, %w1 : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %a = nn.gelu %h : tensor<2x4x16xf32>
  %o = nn.linear %a, %w2 : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
  %logits = nn.linear %o, %r : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
