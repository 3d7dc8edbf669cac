// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=2 pp-stage=0 pp-split=1,2,3" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=V0
// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=2 pp-stage=3 pp-split=1,2,3" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=V3
// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=2 pp-stage=1 pp-split=1,2,3" -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=V1
// Tied weights under interleaving (pp-chunks = v): the embedding, used by
// the first layer and the head, sits on virtual stages 0 and P·v - 1 =
// 3, i.e. rank 0's chunk 0 and rank 1's chunk 1; each copy is marked with
// the *rank* that holds the other (the exchange pairs ranks), not the
// virtual stage. Split 0 | 1 | 2 | 3, 4 + head (pp-split=1,2,3).

func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %e: tensor<4x4xf32> {nn.param = "wte"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %w2: tensor<4x4xf32> {nn.param = "m.h.2.weight"},
                   %w3: tensor<4x4xf32> {nn.param = "m.h.3.weight"},
                   %w4: tensor<4x4xf32> {nn.param = "m.h.4.weight"}) -> (tensor<f32> {nn.loss}) {
  %e0 = nn.linear %x, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %0 = nn.linear %e0, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %1, %w2 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %3 = nn.linear %2, %w3 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %4 = nn.linear %3, %w4 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %5 = nn.linear %4, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %5, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Virtual stage 0 (rank 0, chunk 0): its copy's peer is rank 1.
// V0: fsdp.pipeline_stage = 0 : i64
// V0-SAME: fsdp.pp_chunk = 0 : i64
// V0: {fsdp.pp_tied_peer = 1 : i64, nn.param = "wte"}
// Virtual stage 3 (rank 1, chunk 1): its copy's peer is rank 0.
// V3: fsdp.pipeline_stage = 1 : i64
// V3-SAME: fsdp.pp_chunk = 1 : i64
// V3: {fsdp.pp_tied_peer = 0 : i64, nn.param = "wte"}
// Virtual stage 1 (rank 1, chunk 0) does not use it.
// V1: fsdp.pipeline_stage = 1 : i64
// V1-NOT: wte
// V1: return

// -----

// A weight tied across virtual stages 0 and 2 (layers 0 and 2), both on
// rank 0 (chunks 0 and 1 of pp = 2): two copies in one program, refused.
func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   // expected-error @+1 {{fsdp-pipeline-split: parameter 'wte' is tied across virtual stages 0 and 2 of the same rank: tied weights must sit on two ranks}}
                   %e: tensor<4x4xf32> {nn.param = "wte"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %w2: tensor<4x4xf32> {nn.param = "m.h.2.weight"},
                   %w3: tensor<4x4xf32> {nn.param = "m.h.3.weight"},
                   %w4: tensor<4x4xf32> {nn.param = "m.h.4.weight"}) -> (tensor<f32> {nn.loss}) {
  %e0 = nn.linear %x, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %0 = nn.linear %e0, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %1, %w2 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %t = nn.linear %2, %e : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %3 = nn.linear %t, %w3 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %4 = nn.linear %3, %w4 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %4, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
