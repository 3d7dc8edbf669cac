// fsdp-memory-plan alone on hand-written input in the form it expects (the
// output of fsdp-schedule): one full-shard AdamW unit @fc of 9 elements
// (fc.weight [3, 2], fc.bias [3]) at 2 ranks, padded to 10, shards of 5.
// RUN: fsdp-opt %s --fsdp-memory-plan="report=%t.json" -o /dev/null
// RUN: FileCheck %s --check-prefix=JSON < %t.json
// RUN: fsdp-opt %s --fsdp-memory-plan="report=-" -o /dev/null | FileCheck %s --check-prefix=TEXT
// A budget of exactly the peak fits (the over-budget error: memory-plan-error.mlir).
// RUN: fsdp-opt %s --fsdp-memory-plan="memory-budget=160B" -o /dev/null
// The plan is recorded on the step (fsdp.memory_plan), with or without
// report, budget or cluster; the ops are left as they are.
// RUN: fsdp-opt %s --fsdp-memory-plan | FileCheck %s --check-prefix=IR
// The JSON schedule takes the recorded plan (a changed total shows it is read,
// not planned again), and is the same as that of the step never planned,
// whose plan the translation computes itself.
// RUN: fsdp-opt %s --fsdp-memory-plan | sed -e 's/arena_bytes = 640/arena_bytes = 4096/' | fsdp-translate --fsdp-to-schedule | FileCheck %s --check-prefix=READ
// RUN: fsdp-opt %s --fsdp-memory-plan --mlir-print-debuginfo | fsdp-translate --fsdp-to-schedule -o %t.planned.json
// RUN: fsdp-translate %s --fsdp-to-schedule -o %t.unplanned.json
// RUN: diff %t.planned.json %t.unplanned.json
// arena-offsets=false (fsdp-sweep's) plans the same peaks, classes and frees
// without the arena: arena_bytes -1 and every offset -1 on the step, null in
// the report, which is otherwise the same; the step cannot be translated.
// RUN: fsdp-opt %s --fsdp-memory-plan="arena-offsets=false" | FileCheck %s --check-prefix=NOARENA
// RUN: fsdp-opt %s --fsdp-memory-plan="arena-offsets=false report=%t.noarena.json" -o /dev/null
// RUN: %python -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); print(a['per_rank'].pop('arena_bytes'), b['per_rank'].pop('arena_bytes'), a == b)" %t.json %t.noarena.json | FileCheck %s --check-prefix=NOARENA-REPORT
// RUN: fsdp-opt %s --fsdp-memory-plan="arena-offsets=false" | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=NOARENA-TRANSLATE
// NOARENA: alignment = 64 : i64, arena_bytes = -1 : i64
// NOARENA-SAME: arena_offsets = array<i64: -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1>
// NOARENA-SAME: frees = array<i64: 6, 7, 8, 1, 8, 6, 8, 11, 9, 0, 10, 13, 11, 14, 11, 15, 15, 2, 15, 17>
// NOARENA-SAME: peak_bytes = 160 : i64
// NOARENA-REPORT: 640 None True
// NOARENA-TRANSLATE: error: the step was memory-planned without arena offsets (arena-offsets=false, for planning only); plan it again without that option (fsdp-pipeline, or fsdp-memory-plan on a step without pipeline stages) to translate it

// The peak is at the forward nn.linear (instruction #5): param shard 20 B,
// the gathered unit 40 B, moments 2 x 20 B, the activation h (2x3 f32) 24 B,
// the seed constant 4 B, data x (2x2 f32) + y (2 i32) 24 B and the i64 step
// 8 B: 160 B. Model state: shards of parameters, gradients and the two
// moments, 20 + 20 + 40 = 80 B. Ring volume, (N-1)/N of the 40 B buffer per
// collective: one all-gather (fc is not gathered for backward), one
// reduce-scatter.
// JSON: "params": 9,
// JSON: "trainable_params": 9,
// JSON: "world_size": 2,
// JSON: "strategy": "full-shard",
// JSON: "replicas": 1,
// JSON: "shard_size": 2
// JSON: "peak_bytes": 160,
// JSON: "peak_instruction": 5,
// JSON: "peak_at": "'nn.linear' at
// JSON: "param_shard": 20,
// JSON-NEXT: "gathered_param": 40,
// JSON-NEXT: "opt_state": 40,
// JSON-NEXT: "grad": 0,
// JSON-NEXT: "grad_shard": 0,
// JSON-NEXT: "comm_buffer": 0,
// JSON-NEXT: "activation": 24,
// JSON-NEXT: "temporary": 4,
// JSON-NEXT: "data": 24,
// JSON-NEXT: "scalar": 8
// Each class's own maximum over the step (max_bytes_by_class), which the
// peak's snapshot above cannot show: the gradients dh, dw, db (24 + 24 + 12
// B) are live together at nn.reduce_sum, the packed gradient g (40 B) from
// flatten to its free, the reduced shard (20 B) from its reduce-scatter, and
// h with the loss (24 + 4 B) at nn.cross_entropy.
// JSON: "max_bytes_by_class": {
// JSON-NEXT: "param_shard": 20,
// JSON-NEXT: "gathered_param": 40,
// JSON-NEXT: "opt_state": 40,
// JSON-NEXT: "grad": 60,
// JSON-NEXT: "grad_shard": 20,
// JSON-NEXT: "comm_buffer": 40,
// JSON-NEXT: "activation": 28,
// JSON-NEXT: "temporary": 4,
// JSON-NEXT: "data": 24,
// JSON-NEXT: "scalar": 8
// JSON: "model_state_bytes": 80,
// JSON: "params": 20,
// JSON-NEXT: "grads": 20,
// JSON-NEXT: "optimizer_state": 40
// JSON: "comm_bytes_per_step": 40,
// JSON: "all_gather": 20,
// JSON-NEXT: "reduce_scatter": 20,
// JSON-NEXT: "all_reduce": 0
// JSON: "name": "fc",
// JSON-NEXT: "params": 2,
// JSON-NEXT: "numel": 9,
// JSON-NEXT: "padded_numel": 10,
// JSON-NEXT: "padding": 1,
// JSON-NEXT: "shard_numel": 5
// JSON: "schedule": "none"

// TEXT: fsdp-opt plan: 9 parameters, strategy full-shard, world size 2 (1 x 2)
// TEXT: peak bytes 160
// TEXT: at instruction #5 'nn.linear'
// TEXT: most of each class at any point of the step:
// TEXT: grad 60
// TEXT: comm_buffer 40
// TEXT: model-state bytes 80
// TEXT: comm bytes per step 40
// TEXT: fc params 2 numel 9 padded 10 shard 5

// Buffers are numbered as the plan numbers them: the arguments x, y, step,
// p, m, v (0-5), then the results in op order: seed (6), the all-gather's
// future (7), its wait (8), the views w and b (9, 10), h (11), loss (12), dh,
// dw, db (13-15), the packed gradient g (16), the reduce-scatter's future
// (17), its wait (18), and the updated p, m, v (19-21). Instructions are the
// 16 ops before the return.
// IR: fsdp.schedule = "none"
// IR-LABEL: func.func @step
// IR-SAME: attributes {fsdp.memory_plan = {
// The updated shard and moments are written over their inputs (arguments
// 3-5), and share their arena offsets.
// IR-SAME: aliases = array<i64: 19, 3, 20, 4, 21, 5>
// IR-SAME: alignment = 64 : i64, arena_bytes = 640 : i64
// IR-SAME: arena_offsets = array<i64: {{([0-9]+, ){3}()}}[[P:[0-9]+]], [[M:[0-9]+]], [[V:[0-9]+]], {{([0-9]+, ){2}()}}-1, -1, -1, {{([0-9]+, ){7}()}}-1, [[P]], [[M]], [[V]]>
// IR-SAME: classes = ["data", "data", "scalar", "param_shard", "opt_state", "opt_state", "temporary", "gathered_param", "gathered_param", "gathered_param", "gathered_param", "activation", "activation", "grad", "grad", "grad", "comm_buffer", "grad_shard", "grad_shard", "param_shard", "opt_state", "opt_state"]
// IR-SAME: fingerprint = {{-?[0-9]+}} : i64
// (instruction, buffer freed after it): the gathered unit after its
// fsdp.free (6), y, the seed and h after the loss gradient (8), x after dw
// (9), dh after db (10), dw and db once packed (11), the step and the
// reduced shard after the update (15).
// IR-SAME: frees = array<i64: 6, 7, 8, 1, 8, 6, 8, 11, 9, 0, 10, 13, 11, 14, 11, 15, 15, 2, 15, 17>
// IR-SAME: instructions = 16 : i64
// IR-SAME: max_bytes_by_class = {activation = 28 : i64, comm_buffer = 40 : i64, data = 24 : i64, gathered_param = 40 : i64, grad = 60 : i64, grad_shard = 20 : i64, opt_state = 40 : i64, param_shard = 20 : i64, scalar = 8 : i64, temporary = 4 : i64}
// IR-SAME: peak_bytes = 160 : i64
// IR-SAME: peak_bytes_by_class = {activation = 24 : i64, comm_buffer = 0 : i64, data = 24 : i64, gathered_param = 40 : i64, grad = 0 : i64, grad_shard = 0 : i64, opt_state = 40 : i64, param_shard = 20 : i64, scalar = 8 : i64, temporary = 4 : i64}
// IR-SAME: peak_bytes_with_scratch = {{[0-9]+}} : i64, peak_instruction = 5 : i64
// comm_buffer is the packed gradient g alone, the reduce-scatter's input.
// IR-SAME: send_buffer_bytes = {gather_at_peak = 0 : i64, gather_max = 0 : i64, reduce_at_peak = 0 : i64, reduce_max = 40 : i64}
// The wait and the two parameter views are views of the gathered buffer
// (the future, 7); the reduce-scatter's wait of its future.
// IR-SAME: views = array<i64: 8, 7, 9, 7, 10, 7, 18, 17>
// IR: fsdp.all_gather @fc %arg3 async :

// READ: "memory_plan": {
// READ: "peak_bytes": 160,
// READ: "arena_bytes": 4096,

module attributes {fsdp.replicas = 1 : i64, fsdp.schedule = "none", fsdp.shard_size = 2 : i64, fsdp.strategy = #fsdp.strategy<"full-shard">, fsdp.world_size = 2 : i64} {
  fsdp.unit @fc params ["fc.weight", "fc.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], numel = 9 : i64, offsets = array<i64: 0, 6>, padded_numel = 10 : i64, shapes = [array<i64: 3, 2>, array<i64: 3>], shard_numel = 5 : i64, trainable = array<i1: true, true>}
  func.func @step(%x: tensor<2x2xf32> {fsdp.global_shape = array<i64: 4, 2>, nn.data = "features"},
                  %y: tensor<2xi32> {fsdp.global_shape = array<i64: 4>, nn.data = "labels"},
                  %step: tensor<i64> {nn.step},
                  %p: tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc},
                  %m: tensor<5xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc},
                  %v: tensor<5xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc})
      -> (tensor<f32> {nn.loss}, tensor<5xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc},
          tensor<5xf32> {fsdp.role = #fsdp.role<exp_avg>, fsdp.unit = @fc}, tensor<5xf32> {fsdp.role = #fsdp.role<exp_avg_sq>, fsdp.unit = @fc}) {
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    // Forward: the gathered unit (10 floats) lives from its wait to its free.
    %t = fsdp.all_gather @fc %p async : tensor<5xf32> -> !fsdp.future<tensor<10xf32>>
    %full = fsdp.wait %t : tensor<10xf32>
    %w = fsdp.param_view %full "fc.weight" at 0 : tensor<10xf32> -> tensor<3x2xf32>
    %b = fsdp.param_view %full "fc.bias" at 6 : tensor<10xf32> -> tensor<3xf32>
    %h = nn.linear %x, %w, %b : (tensor<2x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    fsdp.free %full : tensor<10xf32>
    %loss = nn.cross_entropy %h, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    // Backward: the packed gradient (10 floats) is reduce-scattered to 5.
    %dh = nn.cross_entropy_grad %h, %y, %seed : (tensor<2x3xf32>, tensor<2xi32>, tensor<f32>) -> tensor<2x3xf32>
    %dw = nn.matmul %dh, %x {transpose_a = true} : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    %db = nn.reduce_sum %dh {axes = array<i64: 0>} : tensor<2x3xf32> -> tensor<3xf32>
    %g = fsdp.flatten @fc(%dw, %db) {offsets = array<i64: 0, 6>} : (tensor<3x2xf32>, tensor<3xf32>) -> tensor<10xf32>
    %r = fsdp.reduce_scatter @fc %g async : tensor<10xf32> -> !fsdp.future<tensor<5xf32>>
    %gs = fsdp.wait %r : tensor<5xf32>
    fsdp.free %g : tensor<10xf32>
    %p_new, %m_new, %v_new = nn.adamw_update %p, %gs, %m, %v, %step {beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, eps = 1.000000e-08 : f64, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64} : tensor<5xf32>, tensor<i64>
    return %loss, %p_new, %m_new, %v_new : tensor<f32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
  }
}
