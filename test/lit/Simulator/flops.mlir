// FLOPs of the cost model (nn::CostOpInterface), exactly:
//   linear [2,8,16] x [32,16]ᵀ + bias: 2*16*16*32 + 16*32 = 16896
//   causal attention B=2, T=8, Hq*D=32: half of 4*B*T^2*Hq*D = 8192
// Time on Inputs/round-cluster.json: 16896 / (1e9 * 0.5) + 8192 / 1e9 = 41.984 us.
// RUN: fsdp-opt %s --fsdp-memory-plan="cluster=%fsdp_src/test/lit/Inputs/round-cluster.json report=-" -o /dev/null | FileCheck %s
// CHECK: flops per rank{{ +}}25088
// CHECK: predicted step time{{ +}}4.1984e-05 s
func.func @forward(%x: tensor<2x8x16xf32> {nn.data = "features"}, %w: tensor<32x16xf32> {nn.param = "w"},
                   %b: tensor<32xf32> {nn.param = "b"}, %k: tensor<2x8x8xf32>) -> tensor<2x8x32xf32> {
  %y = nn.linear %x, %w, %b : (tensor<2x8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %a, %lse = nn.attention %y, %k, %k {num_heads = 4 : i64, num_kv_heads = 1 : i64} : (tensor<2x8x32xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> (tensor<2x8x32xf32>, tensor<2x4x8xf32>)
  return %a : tensor<2x8x32xf32>
}
