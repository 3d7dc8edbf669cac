// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2" -split-input-file -verify-diagnostics
// The diagnostics of fsdp-tensor-parallel: heads T does not divide, a graph
// without a tensor-parallel region, dropout of a fused q/k/v output before its
// split (its slice is three pieces); sequence parallelism without a sequence,
// or with one T does not divide.

func.func @forward(%x: tensor<2x4x6xf32> {nn.data = "features"}, %y: tensor<2x4xi32> {nn.data = "labels"},
                   %wq: tensor<6x6xf32> {nn.param = "q.weight"}, %wk: tensor<6x6xf32> {nn.param = "k.weight"},
                   %wv: tensor<6x6xf32> {nn.param = "v.weight"}, %wo: tensor<6x6xf32> {nn.param = "o.weight"}) -> (tensor<f32> {nn.loss}) {
  %q = nn.linear %x, %wq : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %k = nn.linear %x, %wk : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %v = nn.linear %x, %wv : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  // expected-error @+1 {{'nn.attention' op tp=2 must divide the attention heads (3) and the key/value heads (3)}}
  %a, %lse = nn.attention %q, %k, %v {num_heads = 3 : i64, num_kv_heads = 3 : i64} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> (tensor<2x4x6xf32>, tensor<2x3x4xf32>)
  %o = nn.linear %a, %wo : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %loss = nn.cross_entropy %o, %y : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Neither a block's region nor a vocab-parallel embedding or head (the
// linear's output is not read by the loss alone). A chunk of only the head
// is split by the vocab-parallel layout alone (pipeline-split-ends.test).
// expected-error @+1 {{tp=2: no tensor-parallel region in this graph (a linear whose input comes from other linears through attention, rope, split, activations or products, or a vocab-parallel embedding or LM head)}}
func.func @forward(%x: tensor<4x8xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %w: tensor<10x8xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  %logits = nn.gelu %h : tensor<4x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Sequence parallelism (the default) needs [batch, seq, hidden] activations.
func.func @forward(%x: tensor<4x8xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %w2: tensor<8x16xf32> {nn.param = "down.weight"}) -> (tensor<f32> {nn.loss}) {
  // expected-error @+1 {{tp=2 with sequence-parallel: the tensor-parallel region's input and output must be [batch, seq, hidden] activations to split along the sequence, got 'tensor<4x8xf32>' (pass sequence-parallel=false)}}
  %h = nn.linear %x, %w1 : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %a = nn.gelu %h : tensor<4x16xf32>
  %o = nn.linear %a, %w2 : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %loss = nn.cross_entropy %o, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A sequence of 3 does not split over tp=2: named at the op whose result
// enters the split.
func.func @forward(%t: tensor<2x3xi32> {nn.data = "tokens"}, %y: tensor<2x3xi32> {nn.data = "targets"},
                   %e: tensor<10x8xf32> {nn.param = "wte.weight"},
                   %w1: tensor<16x8xf32> {nn.param = "up.weight"}, %w2: tensor<8x16xf32> {nn.param = "down.weight"}) -> (tensor<f32> {nn.loss}) {
  // expected-error @+1 {{'nn.embedding' op tp=2 with sequence-parallel: the sequence length 3 (dimension 1 of 'tensor<2x3x8xf32>') is not divisible by tp}}
  %x = nn.embedding %t, %e : (tensor<2x3xi32>, tensor<10x8xf32>) -> tensor<2x3x8xf32>
  %h = nn.linear %x, %w1 : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
  %a = nn.gelu %h : tensor<2x3x16xf32>
  %o = nn.linear %a, %w2 : (tensor<2x3x16xf32>, tensor<8x16xf32>) -> tensor<2x3x8xf32>
  %r = nn.add %x, %o : tensor<2x3x8xf32>
  %logits = nn.linear %r, %e : (tensor<2x3x8xf32>, tensor<10x8xf32>) -> tensor<2x3x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<2x3x10xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Dropout of the fused q/k/v before its split: each rank's slice is three
// pieces of the global tensor (blocks = 3), not one.
func.func @forward(%x: tensor<2x4x6xf32> {nn.data = "features"}, %y: tensor<2x4xi32> {nn.data = "labels"},
                   %step: tensor<i64> {nn.step},
                   %wqkv: tensor<18x6xf32> {nn.param = "qkv.weight"}, %wo: tensor<6x6xf32> {nn.param = "o.weight"}) -> (tensor<f32> {nn.loss}) {
  %qkv = nn.linear %x, %wqkv : (tensor<2x4x6xf32>, tensor<18x6xf32>) -> tensor<2x4x18xf32>
  // expected-error @+1 {{'nn.dropout' op tp=2: dropout of a column-parallel linear's output is supported after its split (per q, k, v), not before}}
  %d = nn.dropout %qkv, %step {rate = 1.000000e-01, seed = 1} : tensor<2x4x18xf32>, tensor<i64>
  %p:3 = nn.split %d {axis = 2 : i64, sizes = array<i64: 6, 6, 6>} : tensor<2x4x18xf32> -> tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>
  %a, %lse = nn.attention %p#0, %p#1, %p#2 {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x6xf32>, tensor<2x4x6xf32>, tensor<2x4x6xf32>) -> (tensor<2x4x6xf32>, tensor<2x2x4xf32>)
  %o = nn.linear %a, %wo : (tensor<2x4x6xf32>, tensor<6x6xf32>) -> tensor<2x4x6xf32>
  %loss = nn.cross_entropy %o, %y : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
