// fsdp-shard alone with mixed precision (param-dtype, reduce-dtype,
// master-weights), on hand-written input in the form it expects (after
// fsdp-autodiff, fsdp-optimizer and fsdp-wrap): one f32 unit @fc of 8
// elements, padded to 9 and split into shards of 3 over 3 ranks.
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 param-dtype=bf16" | FileCheck %s --check-prefix=CAST
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 param-dtype=bf16 reduce-dtype=f32" | FileCheck %s --check-prefix=RDT
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 param-dtype=bf16 master-weights=separate" | FileCheck %s --check-prefix=SEP
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 param-dtype=bf16 master-weights=separate strategy=shard-grad-op" | FileCheck %s --check-prefix=SEP2
// RUN: fsdp-opt %s --fsdp-shard="world-size=3 param-dtype=f16 master-weights=separate strategy=shard-optimizer" | FileCheck %s --check-prefix=SEP1

// cast-on-gather (the default, FSDP2): the f32 shard is the only copy; it is
// cast to bf16 before the gather, so the gather moves bf16. Float data is cast
// at the top, compute is bf16; the loss and the constant seed stay f32
// (nn.cross_entropy of bf16 logits is f32, as under torch.autocast).
// The packed bf16 gradient is reduce-scattered in bf16 (reduce-dtype
// defaults to param-dtype) and cast back to f32 for the update of the shard.
// CAST-LABEL: func.func @step(
// CAST-SAME: %[[X:arg[0-9]+]]: tensor<4x3xf32> {fsdp.global_shape = array<i64: 12, 3>, nn.data = "features"}
// CAST-SAME: %[[P:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// CAST-SAME: -> (tensor<f32> {nn.loss}, tensor<3xf32> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// CAST-NEXT: %[[C:.*]] = nn.cast %[[P]] : tensor<3xf32> -> tensor<3xbf16>
// CAST-NEXT: %[[G:.*]] = fsdp.all_gather @fc %[[C]] : tensor<3xbf16> -> tensor<9xbf16>
// CAST-NEXT: %[[W:.*]] = fsdp.param_view %[[G]] "fc.weight" at 0 : tensor<9xbf16> -> tensor<2x3xbf16>
// CAST-NEXT: %[[B:.*]] = fsdp.param_view %[[G]] "fc.bias" at 6 : tensor<9xbf16> -> tensor<2xbf16>
// CAST-NEXT: %[[XL:.*]] = nn.cast %[[X]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CAST-NEXT: nn.linear %[[XL]], %[[W]], %[[B]] : (tensor<4x3xbf16>, tensor<2x3xbf16>, tensor<2xbf16>) -> tensor<4x2xbf16>
// CAST-NEXT: nn.cross_entropy {{.*}} -> tensor<f32>
// CAST-NEXT: arith.constant {{.*}}dense<1.000000e+00> : tensor<f32>
// CAST: %[[F:.*]] = fsdp.flatten @fc({{.*}}) {offsets = array<i64: 0, 6>} : (tensor<2x3xbf16>, tensor<2xbf16>) -> tensor<9xbf16>
// CAST-NEXT: %[[R:.*]] = fsdp.reduce_scatter @fc %[[F]] : tensor<9xbf16> -> tensor<3xbf16>
// CAST-NEXT: %[[R32:.*]] = nn.cast %[[R]] : tensor<3xbf16> -> tensor<3xf32>
// CAST-NEXT: %[[U:.*]] = nn.sgd_update %[[P]], %[[R32]] {{.*}} : tensor<3xf32>
// CAST-NEXT: return %{{.*}}, %[[U]] : tensor<f32>, tensor<3xf32>

// reduce-dtype=f32: the bf16 gradient is cast to f32 before the
// reduce-scatter, which then moves f32; no cast after it.
// RDT-LABEL: func.func @step(
// RDT: %[[F:.*]] = fsdp.flatten @fc({{.*}}) {{.*}} -> tensor<9xbf16>
// RDT-NEXT: %[[F32:.*]] = nn.cast %[[F]] : tensor<9xbf16> -> tensor<9xf32>
// RDT-NEXT: %[[R:.*]] = fsdp.reduce_scatter @fc %[[F32]] : tensor<9xf32> -> tensor<3xf32>
// RDT-NEXT: nn.sgd_update %{{.*}}, %[[R]] {{.*}} : tensor<3xf32>

// master-weights=separate (ZeRO): a sharded f32 master (fsdp.role = master)
// beside a persistent bf16 shard (fsdp.role = param) that is gathered
// directly (no cast before the gather); the update applies to the master and
// the new bf16 shard is its cast. Both are returned.
// SEP-LABEL: func.func @step(
// SEP-SAME: %[[M:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<master>, fsdp.unit = @fc}
// SEP-SAME: %[[P:arg[0-9]+]]: tensor<3xbf16> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// SEP-SAME: -> (tensor<f32> {nn.loss}, tensor<3xf32> {fsdp.role = #fsdp.role<master>, fsdp.unit = @fc}, tensor<3xbf16> {fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// SEP-NEXT: %[[G:.*]] = fsdp.all_gather @fc %[[P]] : tensor<3xbf16> -> tensor<9xbf16>
// SEP: %[[R:.*]] = fsdp.reduce_scatter @fc %{{.*}} : tensor<9xbf16> -> tensor<3xbf16>
// SEP-NEXT: %[[R32:.*]] = nn.cast %[[R]] : tensor<3xbf16> -> tensor<3xf32>
// SEP-NEXT: %[[U:.*]] = nn.sgd_update %[[M]], %[[R32]] {{.*}} : tensor<3xf32>
// SEP-NEXT: %[[UL:.*]] = nn.cast %[[U]] : tensor<3xf32> -> tensor<3xbf16>
// SEP-NEXT: return %{{.*}}, %[[U]], %[[UL]] : tensor<f32>, tensor<3xf32>, tensor<3xbf16>

// separate with shard-grad-op (ZeRO-2 keeps 16-bit parameters whole): the
// bf16 copy is the whole padded buffer (fsdp.layout = full), viewed without a
// gather; the sharded master's update is cast and all-gathered back into it.
// SEP2-LABEL: func.func @step(
// SEP2-SAME: %[[M:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<master>, fsdp.unit = @fc}
// SEP2-SAME: %[[P:arg[0-9]+]]: tensor<9xbf16> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// SEP2-SAME: -> (tensor<f32> {nn.loss}, tensor<3xf32> {fsdp.role = #fsdp.role<master>, fsdp.unit = @fc}, tensor<9xbf16> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// SEP2-NEXT: fsdp.param_view %[[P]] "fc.weight" at 0 : tensor<9xbf16> -> tensor<2x3xbf16>
// SEP2: %[[U:.*]] = nn.sgd_update %[[M]], %{{.*}} : tensor<3xf32>
// SEP2-NEXT: %[[UL:.*]] = nn.cast %[[U]] : tensor<3xf32> -> tensor<3xbf16>
// SEP2-NEXT: %[[NEW:.*]] = fsdp.all_gather @fc %[[UL]] : tensor<3xbf16> -> tensor<9xbf16>
// SEP2-NEXT: return %{{.*}}, %[[U]], %[[NEW]] : tensor<f32>, tensor<3xf32>, tensor<9xbf16>

// separate with shard-optimizer and f16: the master is sharded (it is
// optimizer state), so its update needs no fsdp.local_shard; the whole f16
// copy is all-gathered back from the cast update.
// SEP1-LABEL: func.func @step(
// SEP1-SAME: %[[M:arg[0-9]+]]: tensor<3xf32> {fsdp.role = #fsdp.role<master>, fsdp.unit = @fc}
// SEP1-SAME: %[[P:arg[0-9]+]]: tensor<9xf16> {fsdp.layout = #fsdp.layout<full>, fsdp.role = #fsdp.role<param>, fsdp.unit = @fc})
// SEP1-SAME: -> (tensor<f32> {nn.loss}
// SEP1-NOT: fsdp.local_shard
// SEP1: %[[R:.*]] = fsdp.reduce_scatter @fc %{{.*}} : tensor<9xf16> -> tensor<3xf16>
// SEP1-NEXT: %[[R32:.*]] = nn.cast %[[R]] : tensor<3xf16> -> tensor<3xf32>
// SEP1-NEXT: %[[U:.*]] = nn.sgd_update %[[M]], %[[R32]] {{.*}} : tensor<3xf32>
// SEP1-NEXT: %[[UL:.*]] = nn.cast %[[U]] : tensor<3xf32> -> tensor<3xf16>
// SEP1-NEXT: %[[NEW:.*]] = fsdp.all_gather @fc %[[UL]] : tensor<3xf16> -> tensor<9xf16>
// SEP1-NEXT: return %{{.*}}, %[[U]], %[[NEW]] : tensor<f32>, tensor<3xf32>, tensor<9xf16>

module {
  fsdp.unit @fc params ["fc.weight", "fc.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], shapes = [array<i64: 2, 3>, array<i64: 2>], trainable = array<i1: true, true>}
  func.func @step(%x: tensor<12x3xf32> {nn.data = "features"}, %y: tensor<12xi32> {nn.data = "labels"},
                  %w: tensor<2x3xf32> {nn.param = "fc.weight"}, %b: tensor<2xf32> {nn.param = "fc.bias"})
      -> (tensor<f32> {nn.loss}, tensor<2x3xf32> {nn.param = "fc.weight"}, tensor<2xf32> {nn.param = "fc.bias"}) {
    %h = nn.linear %x, %w, %b : (tensor<12x3xf32>, tensor<2x3xf32>, tensor<2xf32>) -> tensor<12x2xf32>
    %loss = nn.cross_entropy %h, %y : (tensor<12x2xf32>, tensor<12xi32>) -> tensor<f32>
    %seed = arith.constant {nn.loss_seed} dense<1.000000e+00> : tensor<f32>
    %dh = nn.cross_entropy_grad %h, %y, %seed : (tensor<12x2xf32>, tensor<12xi32>, tensor<f32>) -> tensor<12x2xf32>
    %dw = nn.matmul %dh, %x {transpose_a = true} : (tensor<12x2xf32>, tensor<12x3xf32>) -> tensor<2x3xf32>
    %db = nn.reduce_sum %dh {axes = array<i64: 0>} : tensor<12x2xf32> -> tensor<2xf32>
    %w_new = nn.sgd_update %w, %dw {lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<2x3xf32>
    %b_new = nn.sgd_update %b, %db {lr = 1.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} : tensor<2xf32>
    return %loss, %w_new, %b_new : tensor<f32>, tensor<2x3xf32>, tensor<2xf32>
  }
}
