// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --mlir-print-debuginfo | fsdp-translate --fsdp-to-schedule | FileCheck %s
// The resident training state (version 2): no state input is ever freed;
// each carried output the AdamW update writes in place aliases its input and
// shares its arena slot; the plan's peak with the cpu kernels' scratch.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" | fsdp-translate --fsdp-to-schedule | %python -c "import json,sys; \
// RUN: s=json.load(sys.stdin); b={x['id']: x for x in s['buffers']}; \
// RUN: root=lambda i: root(b[i]['view_of']) if 'view_of' in b[i] else i; \
// RUN: state={i['buffer'] for i in s['inputs'] if i['role'] in ('param','exp_avg','exp_avg_sq')}; \
// RUN: freed={f for x in s['instructions'] for f in x.get('frees', [])}; \
// RUN: print('state inputs freed:', len(state & freed)); \
// RUN: [print('alias', o['role'], o['unit'], b[root(o['buffer'])]['arena_offset'] == b[o['aliases']]['arena_offset'], \
// RUN:        [i['role'] for i in s['inputs'] if i['buffer'] == o['aliases']]) for o in s['outputs'] if 'aliases' in o]; \
// RUN: m=s['memory_plan']; print('scratch', m['peak_bytes_with_scratch'] >= m['peak_bytes'])" | FileCheck %s --check-prefix=STATE
// STATE: state inputs freed: 0
// STATE: alias param fc1 True ['param']
// STATE: alias exp_avg fc1 True ['exp_avg']
// STATE: alias exp_avg_sq fc1 True ['exp_avg_sq']
// STATE: scratch True

// CHECK: "format": "fsdp-schedule",
// CHECK: "version": 2,
// CHECK: "function": "f",
// CHECK: "world_size": 2,
// CHECK: "global_batch": 4,
// CHECK: "optimizer": {
// CHECK: "kind": "adamw"
// CHECK: "units": [
// CHECK: "name": "fc1",
// CHECK: "numel": 15,
// CHECK: "padded_numel": 16,
// CHECK: "shard_numel": 8,
// CHECK: "fqn": "fc1.weight",
// CHECK: "offset": 0,
// CHECK: "init": "uniform(0.5)",
// CHECK: "fqn": "fc1.bias",
// CHECK: "offset": 12,
// CHECK: "init": "zeros",
// CHECK: "inputs": [
// CHECK: "role": "features",
// CHECK: "global_shape": [
// CHECK-NEXT: 4,
// CHECK-NEXT: 4
// CHECK: "role": "labels",
// CHECK: "role": "step"
// CHECK: "role": "param",
// CHECK-NEXT: "unit": "fc1"
// CHECK: "role": "exp_avg",
// CHECK: "role": "exp_avg_sq",
// CHECK: "outputs": [
// CHECK: "role": "loss"
// CHECK: "instructions": [
// CHECK: "op": "fsdp.all_gather",
// CHECK: "op": "fsdp.param_view",
// Locations of the source survive into the schedule (fsdp-run's errors name them).
// CHECK: "op": "nn.linear",
// CHECK: "loc": "{{.*}}schedule.mlir:[[@LINE+11]]:8"
// CHECK: "op": "fsdp.free",
// CHECK: "op": "nn.cross_entropy",
// CHECK: "op": "fsdp.reduce_scatter",
// CHECK: "op": "avg",
// CHECK: "op": "nn.adamw_update",


func.func @f(%x: tensor<4x4xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %w1: tensor<3x4xf32> {nn.param = "fc1.weight"}, %b1: tensor<3xf32> {nn.param = "fc1.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<4x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
