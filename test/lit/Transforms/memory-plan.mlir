// The pass under test runs alone in the second fsdp-opt; the first prepares its input.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 reshard-root=true" | fsdp-opt --fsdp-memory-plan="report=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 reshard-root=true" | fsdp-opt --fsdp-memory-plan="report=-" -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 reshard-root=true" | not fsdp-opt --fsdp-memory-plan="memory-budget=300B" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 reshard-root=true" | fsdp-opt --fsdp-memory-plan="memory-budget=1GiB" -o /dev/null
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 reshard-root=true" | not fsdp-opt --fsdp-memory-plan="memory-budget=lots" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PARSE

// A 4 -> 3 -> 2 MLP (15 + 6 = 21 parameters) at 2 ranks: units of 15 (padded
// to 16, shards of 8) and 6 (shards of 3). Model state per rank, f32 AdamW:
// param shards 44 B + gradient shards 44 B + moments 88 B = 176 B = 16 B x 11
// padded elements per rank (ZeRO-3: 16 Psi / N plus padding).
// JSON: "params": 21,
// JSON: "world_size": 2,
// JSON: "strategy": "full-shard",
// JSON: "per_rank": {
// JSON: "peak_bytes": {{[0-9]+}},
// JSON: "peak_bytes_by_class": {
// JSON: "param_shard": 44,
// JSON: "opt_state": 88,
// JSON: "model_state_bytes": 176,
// JSON: "params": 44,
// JSON: "grads": 44,
// JSON: "optimizer_state": 88
// Ring volume per rank, (N-1)/N of each full buffer: forward all-gathers of
// fc1 (64 B) and fc2 (24 B), a backward all-gather of fc2 only (fc1's weight
// is not needed: its input is data; fc2, the root, is gathered again because
// of reshard-root=true), reduce-scatters of both.
// JSON: "comm_bytes_per_step": 100,
// JSON: "all_gather": 56,
// JSON: "reduce_scatter": 44,
// JSON: "all_reduce": 0
// JSON: "units": [
// JSON: "name": "fc1",
// JSON: "numel": 15,
// JSON: "padded_numel": 16,
// JSON: "padding": 1,
// JSON: "shard_numel": 8

// TEXT: fsdp-opt plan: 21 parameters, strategy full-shard, world size 2 (1 x 2)
// TEXT: peak bytes
// TEXT: model-state bytes 176
// TEXT: fc1 params 2 numel 15 padded 16 shard 8

// BUDGET: error: the plan needs {{[0-9]+}} bytes per rank at its peak, {{[0-9]+}} bytes ({{[0-9.]+}}%) over the memory budget of 300 bytes (at instruction #{{[0-9]+}} '{{.*}}' at {{.*}}); the largest class there is {{[a-z_]+}} with {{[0-9]+}} bytes; to fit:
// PARSE: error: fsdp-memory-plan: memory-budget must be a byte count such as 80GiB, 1.5GB or 1000000, got 'lots'

func.func @f(%x: tensor<8x4xf32> {nn.data = "features"}, %y: tensor<8xi32> {nn.data = "labels"},
             %w1: tensor<3x4xf32> {nn.param = "fc1.weight"}, %b1: tensor<3xf32> {nn.param = "fc1.bias"},
             %w2: tensor<2x3xf32> {nn.param = "fc2.weight"}) -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<8x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %a = nn.relu %h : tensor<8x3xf32>
  %p = nn.linear %a, %w2 : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<8x2xf32>
  %l = nn.cross_entropy %p, %y : (tensor<8x2xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
