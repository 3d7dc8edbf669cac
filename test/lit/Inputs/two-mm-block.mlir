// One block `blk` with four matmuls in forward order (q, k with a bias, up,
// gate, down) and a head: fsdp-activation-checkpoint's selective-op keeps
// the 1st and 3rd aten.mm (q, gate), recomputes the 2nd (up) and the biased
// k (aten.addmm in PyTorch, in neither torchtitan's mm count nor its save
// list); the 4th (down) is the block's output, kept anyway. Global batch 4.
func.func @f(%x: tensor<4x8xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %g: tensor<8xf32> {nn.param = "blk.ln.weight", nn.init = "ones"},
             %bt: tensor<8xf32> {nn.param = "blk.ln.bias"},
             %wq: tensor<8x8xf32> {nn.param = "blk.q.weight"},
             %wk: tensor<8x8xf32> {nn.param = "blk.k.weight"},
             %bk: tensor<8xf32> {nn.param = "blk.k.bias"},
             %wu: tensor<16x8xf32> {nn.param = "blk.up.weight"},
             %wg: tensor<16x8xf32> {nn.param = "blk.gate.weight"},
             %wd: tensor<8x16xf32> {nn.param = "blk.down.weight"},
             %head: tensor<5x8xf32> {nn.param = "head.weight"})
    -> (tensor<f32> {nn.loss}) {
  %n = nn.layer_norm %x, %g, %bt {eps = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %q = nn.linear %n, %wq : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %k = nn.linear %n, %wk, %bk : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s = nn.mul %q, %k : tensor<4x8xf32>
  %u = nn.linear %s, %wu : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %gt = nn.linear %s, %wg : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %a = nn.gelu %gt : tensor<4x16xf32>
  %m = nn.mul %a, %u : tensor<4x16xf32>
  %o = nn.linear %m, %wd : (tensor<4x16xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  %r = nn.add %x, %o : tensor<4x8xf32>
  %logits = nn.linear %r, %head : (tensor<4x8xf32>, tensor<5x8xf32>) -> tensor<4x5xf32>
  %l = nn.cross_entropy %logits, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
