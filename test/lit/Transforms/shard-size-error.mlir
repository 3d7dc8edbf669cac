// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=4 strategy=hybrid-shard shard-size=-2" 2>&1 | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=4 shard-size=-1" 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=4 strategy=hybrid-shard shard-size=-4" -o %t.mlir 2>&1 | FileCheck %s --check-prefix=PIPE
// RUN: not test -e %t.mlir
// A negative shard-size is an error: it was taken as 0 (one shard group of
// every rank) and planned without a word, whatever HSDP grouping was asked.

// CHECK: error: fsdp-shard: shard-size must be >= 0 (0: the data-parallel size), got -2
// FULL: error: fsdp-shard: shard-size must be >= 0 (0: the data-parallel size), got -1
// PIPE: error: fsdp-shard: shard-size must be >= 0 (0: the data-parallel size), got -4
module {
  func.func @f(%x: tensor<4x4xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
               %w: tensor<3x4xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}) {
    %h = nn.linear %x, %w : (tensor<4x4xf32>, tensor<3x4xf32>) -> tensor<4x3xf32>
    %l = nn.cross_entropy %h, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
