// fsdp-schedule on a 3-unit MLP (fc1, fc2, fc3; 2 ranks): the order of
// collective starts, waits and compute under each prefetch mode. The output
// is filtered to starts, waits and the compute ops (views, frees, flatten and
// element-wise ops left out) so that CHECK-NEXT pins the whole order.
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2" --fsdp-collectives="reshard-root=true" --canonicalize > %t.mlir
// RUN: fsdp-opt %t.mlir --fsdp-schedule="prefetch=none" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %t.mlir --fsdp-schedule="prefetch=fsdp1" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=FSDP1
// RUN: fsdp-opt %t.mlir --fsdp-schedule="prefetch=fsdp2" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=FSDP2
// RUN: fsdp-opt %t.mlir --fsdp-schedule | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=AUTO
// RUN: fsdp-opt %t.mlir --fsdp-schedule="max-in-flight=1" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=4 strategy=hybrid-shard shard-size=2" --fsdp-collectives="reshard-root=true" --canonicalize \
// RUN:   | fsdp-opt --fsdp-schedule="prefetch=none" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=HSDP
// Buckets: the shard dtype's units' all-gathers (and reduce-scatters) merged
// up to bucket-bytes.
// RUN: fsdp-opt %t.mlir --fsdp-schedule="prefetch=none bucket-bytes=16000" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait|pack|unpack)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=BUCKET
// RUN: fsdp-opt %t.mlir --fsdp-schedule="bucket-bytes=12000" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait|pack|unpack)|nn.(linear|matmul|cross_entropy )" | FileCheck %s --check-prefix=BUCKETAUTO
// RUN: not fsdp-opt %t.mlir --fsdp-schedule="bucket-bytes=-1" 2>&1 | FileCheck %s --check-prefix=BADBUCKET
// HSDP's reduce-scatters and ZeRO-1's reduce-scatters and all-gathers of
// the updated shards bucket too (their readers, the replicate all-reduces
// and the updates, move after the bucket's unpack).
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=4 strategy=hybrid-shard shard-size=2" --fsdp-collectives="reshard-root=true" --canonicalize \
// RUN:   | fsdp-opt --fsdp-schedule="prefetch=none bucket-bytes=16000" | grep -E "fsdp.(reduce_scatter|all_reduce|wait|pack|unpack)|nn.adamw_update" | FileCheck %s --check-prefix=HSDPBUCKET
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-optimizer --fsdp-wrap --fsdp-shard="world-size=2 strategy=shard-optimizer" --fsdp-collectives --canonicalize \
// RUN:   | fsdp-opt --fsdp-schedule="prefetch=none bucket-bytes=16000" | grep -E "fsdp.(all_gather|reduce_scatter|all_reduce|wait|pack|unpack)|nn.adamw_update|return" | FileCheck %s --check-prefix=ZERO1BUCKET
// HSDPBUCKET: fsdp.pack(%{{.*}}, %{{.*}}, %{{.*}}) {blocks = 2 : i64}
// HSDPBUCKET-NEXT: [[RS:%[0-9]+]] = fsdp.reduce_scatter @fc3 %{{[0-9]+}} async {bucket = [@fc3, @fc2, @fc1]}
// HSDPBUCKET-NEXT: [[W:%[0-9]+]] = fsdp.wait [[RS]]
// HSDPBUCKET-NEXT: [[U:%[0-9]+]]:3 = fsdp.unpack [[W]] {blocks = 1 : i64}
// HSDPBUCKET-NEXT: fsdp.all_reduce @fc3 [[U]]#0 async {group = #fsdp.group<replicate>}
// HSDPBUCKET-NEXT: fsdp.wait
// HSDPBUCKET-NEXT: fsdp.all_reduce @fc2 [[U]]#1 async {group = #fsdp.group<replicate>}
// HSDPBUCKET-NEXT: fsdp.wait
// HSDPBUCKET-NEXT: fsdp.all_reduce @fc1 [[U]]#2 async {group = #fsdp.group<replicate>}
// HSDPBUCKET-NEXT: fsdp.wait
// HSDPBUCKET-NEXT: nn.adamw_update
// ZERO1BUCKET: fsdp.pack(%{{.*}}, %{{.*}}, %{{.*}}) {blocks = 2 : i64}
// ZERO1BUCKET-NEXT: [[RS:%[0-9]+]] = fsdp.reduce_scatter @fc1 %{{[0-9]+}} async {bucket = [@fc1, @fc2, @fc3]}
// ZERO1BUCKET-NEXT: [[W:%[0-9]+]] = fsdp.wait [[RS]]
// ZERO1BUCKET-NEXT: [[U:%[0-9]+]]:3 = fsdp.unpack [[W]] {blocks = 1 : i64}
// ZERO1BUCKET-NEXT: %[[P1:new_param[_0-9]*]], {{.*}} = nn.adamw_update %{{[0-9]+}}, [[U]]#0,
// ZERO1BUCKET-NEXT: %[[P2:new_param[_0-9]*]], {{.*}} = nn.adamw_update %{{[0-9]+}}, [[U]]#1,
// ZERO1BUCKET-NEXT: %[[P3:new_param[_0-9]*]], {{.*}} = nn.adamw_update %{{[0-9]+}}, [[U]]#2,
// ZERO1BUCKET-NEXT: fsdp.pack(%[[P1]], %[[P2]], %[[P3]]) {blocks = 1 : i64}
// ZERO1BUCKET-NEXT: [[AG:%[0-9]+]] = fsdp.all_gather @fc1 %{{[0-9]+}} async {bucket = [@fc1, @fc2, @fc3]}
// ZERO1BUCKET-NEXT: [[AW:%[0-9]+]] = fsdp.wait [[AG]]
// ZERO1BUCKET-NEXT: [[AU:%[0-9]+]]:3 = fsdp.unpack [[AW]] {blocks = 2 : i64}
// ZERO1BUCKET-NEXT: return %{{[0-9]+}}, [[AU]]#0, {{.*}}, [[AU]]#1, {{.*}}, [[AU]]#2,
// BADBUCKET: error: fsdp-schedule: bucket-bytes must be >= 0, got -1
// The module records the schedule applied.
// RUN: fsdp-opt %t.mlir --fsdp-schedule | FileCheck %s --check-prefix=ATTR
// ATTR: module attributes {{.*}}fsdp.schedule = "auto: list(max-in-flight=2)"
// RUN: fsdp-opt %t.mlir --fsdp-schedule="prefetch=fsdp2" | FileCheck %s --check-prefix=ATTR2
// ATTR2: module attributes {{.*}}fsdp.schedule = "fsdp2"
// Bad options.
// RUN: not fsdp-opt %t.mlir --fsdp-schedule="prefetch=next" 2>&1 | FileCheck %s --check-prefix=BADMODE
// BADMODE: error: fsdp-schedule: prefetch must be auto, none, fsdp1 or fsdp2, got 'next'
// RUN: not fsdp-opt %t.mlir --fsdp-schedule="max-in-flight=0" 2>&1 | FileCheck %s --check-prefix=BADLIMIT
// BADLIMIT: error: fsdp-schedule: max-in-flight must be >= 1, got 0
// RUN: not fsdp-opt %t.mlir --fsdp-schedule="memory-budget=lots" 2>&1 | FileCheck %s --check-prefix=BADBUDGET
// BADBUDGET: error: fsdp-schedule: memory-budget must be a byte count such as 80GiB, got 'lots'
// RUN: not fsdp-opt %t.mlir --fsdp-schedule="cluster=%t.missing.json" 2>&1 | FileCheck %s --check-prefix=BADSPEC
// BADSPEC: error: fsdp-schedule: cannot read cluster spec

func.func @forward(%x: tensor<8x13xf32> {nn.data = "features"},
                   %y: tensor<8xi32> {nn.data = "labels"},
                   %w1: tensor<64x13xf32> {nn.param = "fc1.weight"},
                   %b1: tensor<64xf32> {nn.param = "fc1.bias", nn.init = "uniform(0.2773501)"},
                   %w2: tensor<37x64xf32> {nn.param = "fc2.weight"},
                   %b2: tensor<37xf32> {nn.param = "fc2.bias", nn.init = "uniform(0.125)"},
                   %w3: tensor<10x37xf32> {nn.param = "fc3.weight"},
                   %b3: tensor<10xf32> {nn.param = "fc3.bias", nn.init = "uniform(0.1643990)"})
    -> (tensor<f32> {nn.loss}) {
  %h1 = nn.linear %x, %w1, %b1 : (tensor<8x13xf32>, tensor<64x13xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %a1 = nn.relu %h1 : tensor<8x64xf32>
  %h2 = nn.linear %a1, %w2, %b2 : (tensor<8x64xf32>, tensor<37x64xf32>, tensor<37xf32>) -> tensor<8x37xf32>
  %a2 = nn.gelu %h2 : tensor<8x37xf32>
  %logits = nn.linear %a2, %w3, %b3 : (tensor<8x37xf32>, tensor<10x37xf32>, tensor<10xf32>) -> tensor<8x10xf32>
  %loss = nn.cross_entropy %logits, %y : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// none: every gather starts right before its wait (no overlap of gathers).
// Reduce-scatters start as soon as a unit's gradient is complete and are
// waited before the next reduce-scatter starts (one in flight, FSDP2's
// reduce_scatter_state), so they overlap the next unit's backward.
// NONE: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 {{.*}} async
// NONE-NEXT: fsdp.wait [[AG_FC1]]
// NONE-NEXT: nn.linear
// NONE-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// NONE-NEXT: fsdp.wait [[AG_FC2]]
// NONE-NEXT: nn.linear
// NONE-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// NONE-NEXT: fsdp.wait [[AG_FC3]]
// NONE-NEXT: nn.linear
// NONE-NEXT: nn.cross_entropy
// NONE-NEXT: [[AG_FC3_B:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// NONE-NEXT: fsdp.wait [[AG_FC3_B]]
// NONE-NEXT: nn.matmul
// NONE-NEXT: nn.matmul
// NONE-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 {{.*}} async
// NONE-NEXT: [[AG_FC2_B:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// NONE-NEXT: fsdp.wait [[AG_FC2_B]]
// NONE-NEXT: nn.matmul
// NONE-NEXT: nn.matmul
// NONE-NEXT: fsdp.wait [[RS_FC3]]
// NONE-NEXT: [[RS_FC2:%[0-9]+]] = fsdp.reduce_scatter @fc2 {{.*}} async
// NONE-NEXT: nn.matmul
// NONE-NEXT: fsdp.wait [[RS_FC2]]
// NONE-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 {{.*}} async
// NONE-NEXT: fsdp.wait [[RS_FC1]]

// fsdp1 (BACKWARD_PRE): forward as none; in backward the next unit's gather
// (fc2) is issued right after fc3's wait, before fc3's gradient matmuls.
// FSDP1: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 {{.*}} async
// FSDP1-NEXT: fsdp.wait [[AG_FC1]]
// FSDP1-NEXT: nn.linear
// FSDP1-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// FSDP1-NEXT: fsdp.wait [[AG_FC2]]
// FSDP1-NEXT: nn.linear
// FSDP1-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// FSDP1-NEXT: fsdp.wait [[AG_FC3]]
// FSDP1-NEXT: nn.linear
// FSDP1-NEXT: nn.cross_entropy
// FSDP1-NEXT: [[AG_FC3_B:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// FSDP1-NEXT: fsdp.wait [[AG_FC3_B]]
// FSDP1-NEXT: [[AG_FC2_B:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 {{.*}} async
// FSDP1-NEXT: fsdp.wait [[AG_FC2_B]]
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: fsdp.wait [[RS_FC3]]
// FSDP1-NEXT: [[RS_FC2:%[0-9]+]] = fsdp.reduce_scatter @fc2 {{.*}} async
// FSDP1-NEXT: nn.matmul
// FSDP1-NEXT: fsdp.wait [[RS_FC2]]
// FSDP1-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 {{.*}} async
// FSDP1-NEXT: fsdp.wait [[RS_FC1]]

// fsdp2: one unit ahead in forward and in backward.
// FSDP2: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 {{.*}} async
// FSDP2-NEXT: fsdp.wait [[AG_FC1]]
// FSDP2-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// FSDP2-NEXT: nn.linear
// FSDP2-NEXT: fsdp.wait [[AG_FC2]]
// FSDP2-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// FSDP2-NEXT: nn.linear
// FSDP2-NEXT: fsdp.wait [[AG_FC3]]
// FSDP2-NEXT: nn.linear
// FSDP2-NEXT: nn.cross_entropy
// FSDP2-NEXT: [[AG_FC3_B:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// FSDP2-NEXT: fsdp.wait [[AG_FC3_B]]
// FSDP2-NEXT: [[AG_FC2_B:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 {{.*}} async
// FSDP2-NEXT: fsdp.wait [[AG_FC2_B]]
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: fsdp.wait [[RS_FC3]]
// FSDP2-NEXT: [[RS_FC2:%[0-9]+]] = fsdp.reduce_scatter @fc2 {{.*}} async
// FSDP2-NEXT: nn.matmul
// FSDP2-NEXT: fsdp.wait [[RS_FC2]]
// FSDP2-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 {{.*}} async
// FSDP2-NEXT: fsdp.wait [[RS_FC1]]

// auto without a cluster spec: the list scheduler issues each gather as early
// as two gathers in flight allow, across the forward/backward boundary, but
// not while the unit is still gathered: fc1 and fc2 at the start, fc3 after
// fc1's wait, fc3's backward gather after its forward copy is freed (after
// fc3's forward linear), fc2's backward gather in order after it.
// AUTO: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 {{.*}} async
// AUTO-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// AUTO-NEXT: fsdp.wait [[AG_FC1]]
// AUTO-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// AUTO-NEXT: nn.linear
// AUTO-NEXT: fsdp.wait [[AG_FC2]]
// AUTO-NEXT: nn.linear
// AUTO-NEXT: fsdp.wait [[AG_FC3]]
// AUTO-NEXT: nn.linear
// AUTO-NEXT: [[AG_FC3_B:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// AUTO-NEXT: [[AG_FC2_B:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// AUTO-NEXT: nn.cross_entropy
// AUTO-NEXT: fsdp.wait [[AG_FC3_B]]
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 {{.*}} async
// AUTO-NEXT: fsdp.wait [[AG_FC2_B]]
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: fsdp.wait [[RS_FC3]]
// AUTO-NEXT: [[RS_FC2:%[0-9]+]] = fsdp.reduce_scatter @fc2 {{.*}} async
// AUTO-NEXT: nn.matmul
// AUTO-NEXT: fsdp.wait [[RS_FC2]]
// AUTO-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 {{.*}} async
// AUTO-NEXT: fsdp.wait [[RS_FC1]]

// max-in-flight=1: one gather in flight, issued right after the previous wait.
// ONE: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 {{.*}} async
// ONE-NEXT: fsdp.wait [[AG_FC1]]
// ONE-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// ONE-NEXT: nn.linear
// ONE-NEXT: fsdp.wait [[AG_FC2]]
// ONE-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// ONE-NEXT: nn.linear
// ONE-NEXT: fsdp.wait [[AG_FC3]]
// ONE-NEXT: nn.linear
// ONE-NEXT: [[AG_FC3_B:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// ONE-NEXT: nn.cross_entropy
// ONE-NEXT: fsdp.wait [[AG_FC3_B]]
// ONE-NEXT: [[AG_FC2_B:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// ONE-NEXT: nn.matmul
// ONE-NEXT: nn.matmul
// ONE-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 {{.*}} async
// ONE-NEXT: fsdp.wait [[AG_FC2_B]]
// ONE-NEXT: nn.matmul
// ONE-NEXT: nn.matmul
// ONE-NEXT: fsdp.wait [[RS_FC3]]
// ONE-NEXT: [[RS_FC2:%[0-9]+]] = fsdp.reduce_scatter @fc2 {{.*}} async
// ONE-NEXT: nn.matmul
// ONE-NEXT: fsdp.wait [[RS_FC2]]
// ONE-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 {{.*}} async
// ONE-NEXT: fsdp.wait [[RS_FC1]]

// HSDP (2 replicas x 2): each reduce-scatter's wait and its replicate
// all-reduce start move to the next reduce-scatter; each all-reduce is
// waited before the next all-reduce starts.
// HSDP: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 {{.*}} async
// HSDP-NEXT: fsdp.wait [[AG_FC1]]
// HSDP-NEXT: nn.linear
// HSDP-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// HSDP-NEXT: fsdp.wait [[AG_FC2]]
// HSDP-NEXT: nn.linear
// HSDP-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// HSDP-NEXT: fsdp.wait [[AG_FC3]]
// HSDP-NEXT: nn.linear
// HSDP-NEXT: nn.cross_entropy
// HSDP-NEXT: [[AG_FC3_B:%[0-9]+]] = fsdp.all_gather @fc3 {{.*}} async
// HSDP-NEXT: fsdp.wait [[AG_FC3_B]]
// HSDP-NEXT: nn.matmul
// HSDP-NEXT: nn.matmul
// HSDP-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 {{.*}} async
// HSDP-NEXT: [[AG_FC2_B:%[0-9]+]] = fsdp.all_gather @fc2 {{.*}} async
// HSDP-NEXT: fsdp.wait [[AG_FC2_B]]
// HSDP-NEXT: nn.matmul
// HSDP-NEXT: nn.matmul
// HSDP-NEXT: fsdp.wait [[RS_FC3]]
// HSDP-NEXT: [[AR_FC3:%[0-9]+]] = fsdp.all_reduce @fc3 {{.*}} async
// HSDP-NEXT: [[RS_FC2:%[0-9]+]] = fsdp.reduce_scatter @fc2 {{.*}} async
// HSDP-NEXT: nn.matmul
// HSDP-NEXT: fsdp.wait [[RS_FC2]]
// HSDP-NEXT: fsdp.wait [[AR_FC3]]
// HSDP-NEXT: [[AR_FC2:%[0-9]+]] = fsdp.all_reduce @fc2 {{.*}} async
// HSDP-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 {{.*}} async
// HSDP-NEXT: fsdp.wait [[RS_FC1]]
// HSDP-NEXT: fsdp.wait [[AR_FC2]]
// HSDP-NEXT: [[AR_FC1:%[0-9]+]] = fsdp.all_reduce @fc1 {{.*}} async
// HSDP-NEXT: fsdp.wait [[AR_FC1]]

// bucket-bytes=16000 (fc1 3584 B, fc2 9624 B, fc3 1520 B gathered at 2 ranks):
// one all-gather of the three units' shards packed (fsdp.pack, one block) and
// unpacked by rank block into the three full buffers before fc1's forward;
// fc3 and fc2 in one for backward; one reduce-scatter of the three packed
// gradients (two rank blocks each) once fc1's gradient is complete.
// BUCKET: fsdp.pack(%arg3, %arg6, %arg9) {blocks = 1 : i64}
// BUCKET-NEXT: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 %{{[0-9]+}} async {bucket = [@fc1, @fc2, @fc3]}
// BUCKET-NEXT: fsdp.wait [[AG_FC1]]
// BUCKET-NEXT: fsdp.unpack %{{[0-9]+}} {blocks = 2 : i64}
// BUCKET-NEXT: nn.linear
// BUCKET-NEXT: nn.linear
// BUCKET-NEXT: nn.linear
// BUCKET-NEXT: nn.cross_entropy
// BUCKET-NEXT: fsdp.pack(%arg9, %arg6) {blocks = 1 : i64}
// BUCKET-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 %{{[0-9]+}} async {bucket = [@fc3, @fc2]}
// BUCKET-NEXT: fsdp.wait [[AG_FC3]]
// BUCKET-NEXT: fsdp.unpack %{{[0-9]+}} {blocks = 2 : i64}
// BUCKET-NEXT: nn.matmul
// BUCKET-NEXT: nn.matmul
// BUCKET-NEXT: nn.matmul
// BUCKET-NEXT: nn.matmul
// BUCKET-NEXT: nn.matmul
// BUCKET-NEXT: fsdp.pack(%{{.*}}, %{{.*}}, %{{.*}}) {blocks = 2 : i64}
// BUCKET-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 %{{[0-9]+}} async {bucket = [@fc3, @fc2, @fc1]}
// BUCKET-NEXT: fsdp.wait [[RS_FC3]]
// BUCKET-NEXT: fsdp.unpack %{{[0-9]+}} {blocks = 1 : i64}

// bucket-bytes=12000 with the list scheduler: fc1 alone (fc1 + fc2 > 12000),
// [fc2, fc3] hoisted as a bucket; the backward [fc3, fc2] not before the
// forward bucket's copies are freed (after fc3's forward linear); the
// reduce-scatter bucket [fc3, fc2] starts when fc2's gradient is complete,
// fc1's alone.
// BUCKETAUTO: [[AG_FC1:%[0-9]+]] = fsdp.all_gather @fc1 %{{.*}} async
// BUCKETAUTO-NEXT: fsdp.pack(%arg6, %arg9) {blocks = 1 : i64}
// BUCKETAUTO-NEXT: [[AG_FC2:%[0-9]+]] = fsdp.all_gather @fc2 %{{[0-9]+}} async {bucket = [@fc2, @fc3]}
// BUCKETAUTO-NEXT: fsdp.wait [[AG_FC1]]
// BUCKETAUTO-NEXT: nn.linear
// BUCKETAUTO-NEXT: fsdp.wait [[AG_FC2]]
// BUCKETAUTO-NEXT: fsdp.unpack %{{[0-9]+}} {blocks = 2 : i64}
// BUCKETAUTO-NEXT: nn.linear
// BUCKETAUTO-NEXT: nn.linear
// BUCKETAUTO-NEXT: fsdp.pack(%arg9, %arg6) {blocks = 1 : i64}
// BUCKETAUTO-NEXT: [[AG_FC3:%[0-9]+]] = fsdp.all_gather @fc3 %{{[0-9]+}} async {bucket = [@fc3, @fc2]}
// BUCKETAUTO-NEXT: nn.cross_entropy
// BUCKETAUTO-NEXT: fsdp.wait [[AG_FC3]]
// BUCKETAUTO-NEXT: fsdp.unpack %{{[0-9]+}} {blocks = 2 : i64}
// BUCKETAUTO-NEXT: nn.matmul
// BUCKETAUTO-NEXT: nn.matmul
// BUCKETAUTO-NEXT: nn.matmul
// BUCKETAUTO-NEXT: nn.matmul
// BUCKETAUTO-NEXT: fsdp.pack(%{{.*}}, %{{.*}}) {blocks = 2 : i64}
// BUCKETAUTO-NEXT: [[RS_FC3:%[0-9]+]] = fsdp.reduce_scatter @fc3 %{{[0-9]+}} async {bucket = [@fc3, @fc2]}
// BUCKETAUTO-NEXT: nn.matmul
// BUCKETAUTO-NEXT: fsdp.wait [[RS_FC3]]
// BUCKETAUTO-NEXT: fsdp.unpack %{{[0-9]+}} {blocks = 1 : i64}
// BUCKETAUTO-NEXT: [[RS_FC1:%[0-9]+]] = fsdp.reduce_scatter @fc1 %{{.*}} async
// BUCKETAUTO-NEXT: fsdp.wait [[RS_FC1]]
