// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-stage=0" | FileCheck %s --check-prefix=S0
// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-stage=1" | FileCheck %s --check-prefix=S1
// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=3 pp-stage=1" | FileCheck %s --check-prefix=MID
// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-stage=0 pp-split=1" | FileCheck %s --check-prefix=SPLIT
// fsdp-pipeline-split on a 3-layer model (`.h.<i>.` FQNs): an embedding-like
// first op, layers of one, four and one linear (each 2·6·4·4 FLOPs), a
// residual from the embedding to layer 2, a head and the loss. Balanced by
// FLOPs, 2 stages split before layer 2 (embedding + layers 0, 1 = 6 linears
// against 2 linears + the loss; before layer 1 would give 2 against 6).

func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %e: tensor<4x4xf32> {nn.param = "embed.weight"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %w2: tensor<4x4xf32> {nn.param = "m.h.2.weight"},
                   %hd: tensor<4x4xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %c = arith.constant dense<2.0> : tensor<6x4xf32>
  %0 = nn.linear %x, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %1, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %3 = nn.linear %2, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %4 = nn.linear %3, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %5 = nn.linear %4, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %6 = nn.linear %5, %w2 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %7 = nn.add %6, %0 : tensor<6x4xf32>
  %8 = nn.mul %7, %c : tensor<6x4xf32>
  %9 = nn.linear %8, %hd : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %9, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Stage 0 of 2 (layers 0, 1): the features and its parameters; it sends the
// embedding output %0 (the residual, used on stage 1) and layer 1's output,
// each with an argument for its gradient; the labels, layer 2 and the head
// are gone.
// S0: module attributes {fsdp.pipeline_stage = 0 : i64, fsdp.pipeline_stages = 2 : i64}
// S0: func.func @forward(%{{.*}}: tensor<6x4xf32> {nn.data = "features"}, %{{.*}}: tensor<4x4xf32> {nn.param = "embed.weight"}, %{{.*}}: tensor<4x4xf32> {nn.param = "m.h.0.weight"}, %{{.*}}: tensor<4x4xf32> {nn.param = "m.h.1.weight"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_output_grad = 0 : i64, nn.data = "features"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_output_grad = 1 : i64, nn.data = "features"}) -> (tensor<6x4xf32> {fsdp.pp_output = 0 : i64}, tensor<6x4xf32> {fsdp.pp_output = 1 : i64})
// S0-COUNT-6: nn.linear
// S0-NOT: nn.linear
// S0: return %0, %5

// Stage 1 of 2: the two received activations, layer 2 and the head; the
// constant is cloned, not sent.
// S1: module attributes {fsdp.pipeline_stage = 1 : i64, fsdp.pipeline_stages = 2 : i64}
// S1: func.func @forward(%{{.*}}: tensor<6xi32> {nn.data = "labels"}, %{{.*}}: tensor<4x4xf32> {nn.param = "m.h.2.weight"}, %{{.*}}: tensor<4x4xf32> {nn.param = "head.weight"}, %[[A0:.*]]: tensor<6x4xf32> {fsdp.pp_input = 0 : i64, nn.data = "features"}, %[[A1:.*]]: tensor<6x4xf32> {fsdp.pp_input = 1 : i64, nn.data = "features"}) -> (tensor<f32> {nn.loss})
// S1: arith.constant dense<2.000000e+00>
// S1: %[[L2:.*]] = nn.linear %[[A1]]
// S1: nn.add %[[L2]], %[[A0]]
// S1: nn.cross_entropy
// S1: return

// The middle stage of 3 (layer 1) receives %0 and passes it on to stage 2
// (an argument returned as it is), beside its own output.
// MID: func.func @forward(%{{.*}}: tensor<4x4xf32> {nn.param = "m.h.1.weight"}, %[[R:.*]]: tensor<6x4xf32> {fsdp.pp_input = 0 : i64, nn.data = "features"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_input = 1 : i64, nn.data = "features"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_output_grad = 0 : i64, nn.data = "features"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_output_grad = 2 : i64, nn.data = "features"}) -> (tensor<6x4xf32> {fsdp.pp_output = 0 : i64}, tensor<6x4xf32> {fsdp.pp_output = 2 : i64})
// MID-COUNT-4: nn.linear
// MID: return %[[R]], %{{.*}} : tensor<6x4xf32>, tensor<6x4xf32>

// pp-split=1 moves layer 1 to stage 1.
// SPLIT: func.func @forward(%{{.*}}: tensor<6x4xf32> {nn.data = "features"}, %{{.*}}: tensor<4x4xf32> {nn.param = "embed.weight"}, %{{.*}}: tensor<4x4xf32> {nn.param = "m.h.0.weight"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_output_grad
