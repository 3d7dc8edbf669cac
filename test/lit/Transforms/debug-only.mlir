// The decisions of fsdp-wrap, fsdp-shard and fsdp-schedule, explained under
// -debug-only (an LLVM built with assertions; elsewhere this is UNSUPPORTED).
// REQUIRES: asserts
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 policy=block" -debug-only=fsdp-wrap,fsdp-shard -o /dev/null 2>&1 | FileCheck %s --check-prefix=WRAP
// WRAP: 'emb.weight' -> root: no numeric FQN component: not in a block
// WRAP: 'h.0.fc.weight' -> h.0: the FQN up to its block index
// WRAP: unit @h.0: numel 12, padded to 12 (+0) for a shard group of 2, shard 6
// WRAP: unit @h.0: parameters sharded, optimizer state sharded; gradients reduce-scattered over the shard group

// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 policy=block cluster=%fsdp_src/bench/clusters/h100-sxm-8.json" -debug-only=fsdp-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHED
// SCHED: schedule list(max-in-flight=2):
// SCHED: list: the all-gather of @{{.*}} starts {{[0-9]+}} instruction
// SCHED: cost model: list(max-in-flight=2) predicts {{.*}} s, peak {{[0-9]+}} bytes
// SCHED: cost model: none predicts
// SCHED: cost model picks

func.func @f(%x: tensor<4x3xi32> {nn.data = "tokens"}, %y: tensor<4x3xi32> {nn.data = "targets"},
             %e: tensor<8x4xf32> {nn.param = "emb.weight"},
             %w: tensor<3x4xf32> {nn.param = "h.0.fc.weight"},
             %o: tensor<8x3xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.embedding %x, %e : (tensor<4x3xi32>, tensor<8x4xf32>) -> tensor<4x3x4xf32>
  %a = nn.linear %h, %w : (tensor<4x3x4xf32>, tensor<3x4xf32>) -> tensor<4x3x3xf32>
  %l = nn.linear %a, %o : (tensor<4x3x3xf32>, tensor<8x3xf32>) -> tensor<4x3x8xf32>
  %c = nn.cross_entropy %l, %y : (tensor<4x3x8xf32>, tensor<4x3xi32>) -> tensor<f32>
  return %c : tensor<f32>
}
