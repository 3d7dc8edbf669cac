// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2" -split-input-file -verify-diagnostics
// The diagnostics of fsdp-tensor-parallel: heads T does not divide, a graph
// without a tensor-parallel region, dropout (not supported yet); sequence
// parallelism without a sequence, or with one T does not divide.

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

// expected-error @+1 {{tp=2: no tensor-parallel region in this graph}}
func.func @forward(%x: tensor<4x8xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %w: tensor<10x8xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %logits = nn.linear %x, %w : (tensor<4x8xf32>, tensor<10x8xf32>) -> tensor<4x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
