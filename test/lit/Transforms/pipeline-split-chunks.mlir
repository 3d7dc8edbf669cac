// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=2 pp-stage=2" | FileCheck %s --check-prefix=V2
// RUN: fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=2 pp-stage=3" | FileCheck %s --check-prefix=V3
// RUN: not fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=2 pp-stage=1 pp-split=2" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not fsdp-opt %s --fsdp-pipeline-split="pp=2 pp-chunks=3 pp-stage=0" 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: not fsdp-opt %s --fsdp-pipeline-split="pp=1 pp-chunks=2" 2>&1 | FileCheck %s --check-prefix=PP1
// fsdp-pipeline-split with pp-chunks = v (interleaved 1F1B): the 4 layers are
// cut into P·v = 4 chunks (one layer each, the only such cut; the head and
// the loss go with layer 3), and pp-stage
// names the virtual stage; virtual stage c runs on rank c mod P as its chunk
// c / P.

func.func @forward(%x: tensor<6x4xf32> {nn.data = "features"}, %y: tensor<6xi32> {nn.data = "labels"},
                   %w0: tensor<4x4xf32> {nn.param = "m.h.0.weight"},
                   %w1: tensor<4x4xf32> {nn.param = "m.h.1.weight"},
                   %w2: tensor<4x4xf32> {nn.param = "m.h.2.weight"},
                   %w3: tensor<4x4xf32> {nn.param = "m.h.3.weight"},
                   %hd: tensor<4x4xf32> {nn.param = "head.weight"}) -> (tensor<f32> {nn.loss}) {
  %0 = nn.linear %x, %w0 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %1 = nn.linear %0, %w1 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %2 = nn.linear %1, %w2 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %3 = nn.linear %2, %w3 : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %4 = nn.linear %3, %hd : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
  %l = nn.cross_entropy %4, %y : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Virtual stage 2 = rank 0's chunk 1: layer 2, receiving layer 1's output
// (boundary 1) and sending its own (boundary 2).
// V2: module attributes {fsdp.pipeline_chunks = 2 : i64, fsdp.pipeline_stage = 0 : i64, fsdp.pipeline_stages = 2 : i64, fsdp.pp_chunk = 1 : i64}
// V2: func.func @forward(%{{.*}}: tensor<4x4xf32> {nn.param = "m.h.2.weight"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_input = 1 : i64, nn.data = "features"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_output_grad = 2 : i64, nn.data = "features"}) -> (tensor<6x4xf32> {fsdp.pp_output = 2 : i64})
// V2-COUNT-1: nn.linear
// V2-NOT: nn.linear

// Virtual stage 3 = rank 1's chunk 1, the last: layer 3, the head and the
// loss.
// V3: module attributes {fsdp.pipeline_chunks = 2 : i64, fsdp.pipeline_stage = 1 : i64, fsdp.pipeline_stages = 2 : i64, fsdp.pp_chunk = 1 : i64}
// V3: func.func @forward(%{{.*}}: tensor<6xi32> {nn.data = "labels"}, %{{.*}}: tensor<4x4xf32> {nn.param = "m.h.3.weight"}, %{{.*}}: tensor<4x4xf32> {nn.param = "head.weight"}, %{{.*}}: tensor<6x4xf32> {fsdp.pp_input = 2 : i64, nn.data = "features"}) -> (tensor<f32> {nn.loss})

// pp-split then takes P·v - 1 boundaries; more chunks than layers, and
// chunks without stages, are refused.
// COUNT: error: fsdp-pipeline-split: pp-split has 1 layer boundaries; pp x pp-chunks=4 virtual stages needs 3
// LAYERS: error: fsdp-pipeline-split: pp x pp-chunks=6 virtual stages exceeds the 4 layers of the model (each stage needs at least one layer)
// PP1: error: fsdp-pipeline-split: pp-chunks needs pp > 1
