// fsdp-pipeline hands each option, as written, to the passes that declare it:
// every run below gives the same IR (and report and trace) as the passes run
// one by one with the same options. Together the runs set every option of
// fsdp-pipeline to a value that changes the result (so that an option the
// pipeline does not hand on fails a diff); the doubles have 17
// significant digits (a value printed back would be rounded to 7).
// RUN: fsdp-opt %s --fsdp-pipeline="frozen=head.bias micro-batches=2 lr=0.00030000000000000003 beta1=0.85 beta2=0.99912345678 eps=1.234567891e-9 weight-decay=0.125 unit-depth=1 world-size=4 strategy=hybrid-shard shard-size=2 param-dtype=bf16 reduce-dtype=f32 accumulate=unsharded master-weights=separate keep-gathered=head reshard-root=true max-in-flight=1 bucket-bytes=64 cluster=%fsdp_src/bench/clusters/h100-sxm-8.json report=%t.a1.json trace=%t.a1.trace.json" -o %t.a1.mlir
// RUN: fsdp-opt %s --fsdp-autodiff="frozen=head.bias" --fsdp-micro-batch="micro-batches=2" \
// RUN:   --fsdp-optimizer="lr=0.00030000000000000003 beta1=0.85 beta2=0.99912345678 eps=1.234567891e-9 weight-decay=0.125" \
// RUN:   --fsdp-wrap="unit-depth=1" \
// RUN:   --fsdp-shard="world-size=4 strategy=hybrid-shard shard-size=2 param-dtype=bf16 reduce-dtype=f32 accumulate=unsharded master-weights=separate" \
// RUN:   --fsdp-collectives="keep-gathered=head reshard-root=true" --canonicalize \
// RUN:   --fsdp-schedule="max-in-flight=1 bucket-bytes=64 cluster=%fsdp_src/bench/clusters/h100-sxm-8.json" \
// RUN:   --fsdp-memory-plan="cluster=%fsdp_src/bench/clusters/h100-sxm-8.json report=%t.a2.json trace=%t.a2.trace.json" -o %t.a2.mlir
// RUN: diff %t.a1.mlir %t.a2.mlir
// RUN: diff %t.a1.json %t.a2.json
// RUN: diff %t.a1.trace.json %t.a2.trace.json
// RUN: FileCheck %s --check-prefix=EXACT < %t.a1.mlir
// EXACT: beta1 = 8.500000e-01 : f64, beta2 = 0.99912345678000002 : f64, eps = 1.2345678910000001E-9 : f64, lr = 3.0000000000000003E-4 : f64, weight_decay = 1.250000e-01 : f64

// RUN: fsdp-opt %s --fsdp-pipeline="optimizer=sgd lr=0.5 weight-decay=0 policy=size min-unit-numel=40 world-size=2 strategy=shard-optimizer" -o %t.b1.mlir
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch --fsdp-optimizer="optimizer=sgd lr=0.5 weight-decay=0" \
// RUN:   --fsdp-wrap="policy=size min-unit-numel=40" --fsdp-shard="world-size=2 strategy=shard-optimizer" \
// RUN:   --fsdp-collectives --canonicalize --fsdp-schedule --fsdp-memory-plan -o %t.b2.mlir
// RUN: diff %t.b1.mlir %t.b2.mlir

// RUN: fsdp-opt %s --fsdp-pipeline="units=enc.fc1 activation-checkpoint=full ac-units=enc.* world-size=2 reshard-after-forward=false prefetch=fsdp1" -o %t.c1.mlir
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch --fsdp-optimizer --fsdp-wrap="units=enc.fc1" \
// RUN:   --fsdp-activation-checkpoint="activation-checkpoint=full ac-units=enc.*" --fsdp-shard="world-size=2" \
// RUN:   --fsdp-collectives="reshard-after-forward=false" --canonicalize --fsdp-schedule="prefetch=fsdp1" --fsdp-memory-plan -o %t.c2.mlir
// RUN: diff %t.c1.mlir %t.c2.mlir
// RUN: FileCheck %s --check-prefix=AC < %t.c1.mlir
// AC: nn.linear {{.*}}nn.recompute = "enc.fc1"

// The learning-rate schedule, weight-decay groups and gradient clipping.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 lr-schedule=cosine warmup-steps=1 decay-steps=10 min-lr=0.00001 no-decay=*.bias max-grad-norm=0.30000000000000004" -o %t.e1.mlir
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch --fsdp-optimizer="lr-schedule=cosine warmup-steps=1 decay-steps=10 min-lr=0.00001 no-decay=*.bias" \
// RUN:   --fsdp-wrap --fsdp-shard="world-size=2 max-grad-norm=0.30000000000000004" --fsdp-collectives --canonicalize --fsdp-schedule --fsdp-memory-plan -o %t.e2.mlir
// RUN: diff %t.e1.mlir %t.e2.mlir
// RUN: FileCheck %s --check-prefix=CLIP < %t.e1.mlir
// CLIP: nn.lr_schedule {{.*}}kind = "cosine"
// CLIP: nn.grad_norm {{.*}}max_norm = 0.30000000000000004
// CLIP: nn.adamw_update {{.*}}no_decay = array<i64: 24, 30>
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 report-grad-norm=true" -o %t.f1.mlir
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2 report-grad-norm=true" \
// RUN:   --fsdp-collectives --canonicalize --fsdp-schedule --fsdp-memory-plan -o %t.f2.mlir
// RUN: diff %t.f1.mlir %t.f2.mlir
// RUN: FileCheck %s --check-prefix=REPORT < %t.f1.mlir
// REPORT: {nn.grad_norm}

// tp, sequence-parallel and vocab-parallel reach fsdp-tensor-parallel and fsdp-shard (fc1
// column-parallel, fc2 row-parallel; the grad norm summed over the tensor
// group). This MLP's [batch, features] activations have no sequence: the
// default sequence-parallel=true is refused, false runs; the head's 3 classes
// do not divide by 2, so vocab-parallel=false (with the default the pass
// refuses them).
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=4 tp=2 vocab-parallel=false" 2>&1 | FileCheck %s --check-prefix=SP
// SP: error: tp=2 with sequence-parallel: the tensor-parallel region's input and output must be [batch, seq, hidden] activations
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=4 tp=2 sequence-parallel=false vocab-parallel=false max-grad-norm=1.0" -o %t.t1.mlir
// RUN: fsdp-opt %s --fsdp-tensor-parallel="tp=2 sequence-parallel=false vocab-parallel=false" --fsdp-autodiff --fsdp-micro-batch --fsdp-optimizer --fsdp-wrap \
// RUN:   --fsdp-shard="world-size=4 tp=2 sequence-parallel=false max-grad-norm=1.0" --fsdp-collectives --canonicalize --fsdp-schedule --fsdp-memory-plan -o %t.t2.mlir
// RUN: diff %t.t1.mlir %t.t2.mlir
// RUN: FileCheck %s --check-prefix=TP < %t.t1.mlir
// TP: fsdp.tensor_parallel = 2
// TP: group = #fsdp.group<tensor>

// The pipeline as MLIR prints it (--dump-pass-pipeline) parses back: an
// unset max-grad-norm prints as None.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" --dump-pass-pipeline -o %t.g2.mlir 2>&1 | FileCheck %s --check-prefix=DUMP
// DUMP: fsdp-pipeline{{.*}} max-grad-norm=None
// RUN: fsdp-opt %s --pass-pipeline="builtin.module(fsdp-pipeline{world-size=2 max-grad-norm=None})" -o %t.g1.mlir
// RUN: diff %t.g1.mlir %t.g2.mlir

// A bad option is the option parser's error, and fsdp-opt fails.
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 no-such-option=1" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: no such option no-such-option
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 lr=fast" 2>&1 | FileCheck %s --check-prefix=VALUE
// VALUE: for the --lr option: 'fast' value invalid for floating point argument!
// VALUE: error: fsdp-pipeline: option 'lr': 'fast' is not a valid value (lr: learning rate)
// The error itself names the option and the value (it was empty, after
// llvm::cl's line), wherever the refused pair sits; a key that needs a
// value and has none is named too.
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=4 tp=abc sequence-parallel=false" 2>&1 | FileCheck %s --check-prefix=TPVALUE
// TPVALUE: error: fsdp-pipeline: option 'tp': 'abc' is not a valid value (tp: tensor-parallel degree T
// RUN: not fsdp-opt %s --fsdp-pipeline="tp=2 world-size=4 pp=two" 2>&1 | FileCheck %s --check-prefix=PPVALUE
// PPVALUE: error: fsdp-pipeline: option 'pp': 'two' is not a valid value (pp:
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 tp=" 2>&1 | FileCheck %s --check-prefix=TPEMPTY
// TPEMPTY: error: fsdp-pipeline: option 'tp': '' is not a valid value (tp:
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 tp" 2>&1 | FileCheck %s --check-prefix=TPNOVALUE
// TPNOVALUE: error: fsdp-pipeline: option 'tp' needs a value (tp=...)
// An empty pp-split is refused, not taken for the default split.
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 pp=2 micro-batches=2 pp-split=" 2>&1 | FileCheck %s --check-prefix=SPLITEMPTY
// SPLITEMPTY: error: fsdp-pipeline: pp-split is empty: give P-1 increasing layer indices, or leave the option out for the default split

// memory-budget reaches both passes: fsdp-schedule holds gathers back to
// stay under 1275 bytes (1276 without), fsdp-memory-plan checks the peak.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=1275 report=%t.d1.json" -o %t.d1.mlir
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-micro-batch --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" \
// RUN:   --fsdp-collectives --canonicalize --fsdp-schedule="memory-budget=1275" --fsdp-memory-plan="memory-budget=1275 report=%t.d2.json" -o %t.d2.mlir
// RUN: diff %t.d1.mlir %t.d2.mlir
// RUN: diff %t.d1.json %t.d2.json
// RUN: FileCheck %s --check-prefix=HELD < %t.d1.json
// HELD: "peak_bytes": 1264,
// RUN: not fsdp-opt %s --fsdp-pipeline="world-size=2 memory-budget=1000" 2>&1 | FileCheck %s --check-prefix=BUDGET
// BUDGET: error: the plan needs 1276 bytes per rank at its peak, 276 bytes (27.6%) over the memory budget of 1000 bytes

func.func @forward(%x: tensor<8x4xf32> {nn.data = "features"}, %y: tensor<8xi32> {nn.data = "labels"},
                   %w1: tensor<6x4xf32> {nn.param = "enc.fc1.weight"}, %b1: tensor<6xf32> {nn.param = "enc.fc1.bias"},
                   %w2: tensor<5x6xf32> {nn.param = "enc.fc2.weight"}, %b2: tensor<5xf32> {nn.param = "enc.fc2.bias"},
                   %w3: tensor<3x5xf32> {nn.param = "head.weight"}, %b3: tensor<3xf32> {nn.param = "head.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h1 = nn.linear %x, %w1, %b1 : (tensor<8x4xf32>, tensor<6x4xf32>, tensor<6xf32>) -> tensor<8x6xf32>
  %a1 = nn.relu %h1 : tensor<8x6xf32>
  %h2 = nn.linear %a1, %w2, %b2 : (tensor<8x6xf32>, tensor<5x6xf32>, tensor<5xf32>) -> tensor<8x5xf32>
  %a2 = nn.relu %h2 : tensor<8x5xf32>
  %o = nn.linear %a2, %w3, %b3 : (tensor<8x5xf32>, tensor<3x5xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %l = nn.cross_entropy %o, %y : (tensor<8x3xf32>, tensor<8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
