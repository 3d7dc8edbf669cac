// `fsdp-compile --emit-plan`: the step plan that both the executor and the
// compiled step run, as text, for a small scheduled step (one linear unit, 2
// ranks): the inputs bound and copied in, the all-gather started into event
// slot 0 and given progress calls while in flight, its wait before the linear
// reads the gathered weight and bias (views at +0 and +48 bytes), the
// gathered buffer released at its free, the reduce-scatter into slot 1, and
// the AdamW update writing the state in place.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" -o %t.mlir
// RUN: fsdp-compile %t.mlir --emit-plan -o - | FileCheck %s

// CHECK: step plan: {{[0-9]+}} actions, 10 calls, {{[0-9]+}} slots, 2 events, peak {{[0-9]+}} bytes
// CHECK-NEXT: inputs
// CHECK-NEXT:   bind buffer 0 @[[X:[0-9]+]]
// CHECK-NEXT:   copy input #0 to buffer 0 @[[X]]
// CHECK: instruction #0 'fsdp.all_gather'
// CHECK-NEXT:   bind buffer [[G:[0-9]+]] @[[GO:[0-9]+]]
// CHECK-NEXT:   fsdp_all_gather_start(shard, buffer [[S:[0-9]+]] @{{[0-9]+}}, buffer [[G]] @[[GO]], 8, 0, &event0)
// CHECK-NEXT:   progress event0
// CHECK: instruction #2 'fsdp.wait'
// CHECK-NEXT:   wait event0
// CHECK: instruction #5 'nn.linear'
// CHECK-NEXT:   bind buffer [[Y:[0-9]+]]
// CHECK-NEXT:   fsdp_linear(stream, 0, buffer 0 @[[X]], buffer [[G]] @[[GO]], buffer [[G]] @[[GO]]+48, buffer [[Y]] @{{[0-9]+}}, 2, 4, 3, 0)
// CHECK: instruction #6 'fsdp.free'
// CHECK-NEXT:   release buffer [[G]] @[[GO]]
// CHECK: fsdp_reduce_scatter_start(shard, {{.*}}, 8, 0, 1, &event1)
// CHECK: wait event1
// CHECK: instruction #15 'nn.adamw_update'
// CHECK-NEXT:   bind buffer {{[0-9]+}} @{{[0-9]+}} = buffer [[S]] @{{[0-9]+}} (in place)
// CHECK: fsdp_optimizer_update(stream, 0, 1, buffer [[S]]
// CHECK: end
func.func @f(%x: tensor<4x4xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %w1: tensor<3x4xf32> {nn.param = "fc1.weight"}, %b1: tensor<3xf32> {nn.param = "fc1.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<4x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
