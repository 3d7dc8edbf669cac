// The recorded plan's fingerprint is of the step, not of how the reading
// tool prints it: fsdp-translate given MLIR's printing flags (elided or hex
// elements) still finds the plan made for this step, and refuses what it
// refuses for its own reason (here a non-splat constant), not as "made for
// another step" (which it said with --mlir-elide-elementsattrs-if-larger;
// found by a helper). The second input is memory-plan-report.mlir's step,
// which translates with either flag.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 strategy=full-shard policy=block" -o %t.mlir
// RUN: not fsdp-translate %t.mlir --fsdp-to-schedule 2>&1 | FileCheck %s
// RUN: not fsdp-translate %t.mlir --fsdp-to-schedule --mlir-elide-elementsattrs-if-larger=2 2>&1 | FileCheck %s
// RUN: not fsdp-translate %t.mlir --fsdp-to-schedule --mlir-print-elementsattrs-with-hex-if-larger=1 2>&1 | FileCheck %s
// CHECK-NOT: made for another step
// CHECK: error: 'arith.constant' op must be a splat float tensor constant for the JSON schedule
// RUN: fsdp-opt %S/../Transforms/memory-plan-report.mlir --fsdp-memory-plan -o %t.report.mlir
// RUN: fsdp-translate %t.report.mlir --fsdp-to-schedule -o %t.plain.json
// RUN: fsdp-translate %t.report.mlir --fsdp-to-schedule --mlir-print-elementsattrs-with-hex-if-larger=0 --mlir-elide-elementsattrs-if-larger=0 -o %t.flags.json
// RUN: diff %t.plain.json %t.flags.json

func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"}, %hd: tensor<4x4xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %c = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>
  %ws = nn.mul %w0, %c : tensor<4x4xf32>
  %1 = nn.linear %x, %ws : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %3 = nn.linear %1, %hd : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %3, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
