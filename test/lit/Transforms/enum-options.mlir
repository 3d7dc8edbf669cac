// Options with a closed set of values take exactly the cases of their enum
// (the strategy's is the fsdp dialect's, FSDPEnums.td; the others' are in
// PassEnums.td): --help lists them and the option parser rejects any other.
// RUN: fsdp-opt --help | FileCheck %s --check-prefix=HELP
// HELP-LABEL: --fsdp-shard
// HELP:         --strategy=<value>
// HELP-NEXT:      =full-shard
// HELP-NEXT:      =shard-grad-op
// HELP-NEXT:      =shard-optimizer
// HELP-NEXT:      =no-shard
// HELP-NEXT:      =hybrid-shard
// HELP-LABEL: --fsdp-wrap
// HELP:         --policy=<value>
// HELP-NEXT:      =module
// HELP-NEXT:      =block
// HELP-NEXT:      =size

// RUN: not fsdp-opt %s --fsdp-shard="strategy=zero-3" 2>&1 | FileCheck %s --check-prefix=STRATEGY
// STRATEGY: for the --strategy option: Cannot find option named 'zero-3'!
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 param-dtype=fp8" 2>&1 | FileCheck %s --check-prefix=DTYPE
// DTYPE: for the --param-dtype option: Cannot find option named 'fp8'!
// An empty param-dtype is the default, as before.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 param-dtype=" | FileCheck %s --check-prefix=EMPTY
// EMPTY: func.func @f(%arg0: tensor<2x3xf32>

func.func @f(%x: tensor<4x3xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %w: tensor<2x3xf32> {nn.param = "fc.weight"}) -> (tensor<f32> {nn.loss}) {
  %o = nn.linear %x, %w : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %l = nn.cross_entropy %o, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
