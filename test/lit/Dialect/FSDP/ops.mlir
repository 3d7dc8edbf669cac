// RUN: fsdp-opt %s -split-input-file | fsdp-opt -split-input-file | FileCheck %s
// Round trip of every fsdp op on a sharded unit of 10 elements over 4 ranks
// (padded to 12, shards of 3).

module attributes {fsdp.world_size = 4 : i64} {
  // CHECK: fsdp.unit @l params ["l.weight", "l.bias"]
  fsdp.unit @l params ["l.weight", "l.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], shapes = [array<i64: 2, 4>, array<i64: 2>], trainable = array<i1: true, true>, offsets = array<i64: 0, 8>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  // CHECK-LABEL: func.func @step
  func.func @step(%shard: tensor<3xf32> {fsdp.unit = @l, fsdp.role = #fsdp.role<param>}) -> tensor<3xf32> {
    // CHECK: %[[FULL:.*]] = fsdp.all_gather @l %{{.*}} : tensor<3xf32> -> tensor<12xf32>
    %full = fsdp.all_gather @l %shard : tensor<3xf32> -> tensor<12xf32>
    // CHECK: fsdp.param_view %[[FULL]] "l.weight" at 0 : tensor<12xf32> -> tensor<2x4xf32>
    %w = fsdp.param_view %full "l.weight" at 0 : tensor<12xf32> -> tensor<2x4xf32>
    %b = fsdp.param_view %full "l.bias" at 8 : tensor<12xf32> -> tensor<2xf32>
    // CHECK: fsdp.free %[[FULL]] : tensor<12xf32>
    fsdp.free %full : tensor<12xf32>
    // CHECK: fsdp.flatten @l(%{{.*}}, %{{.*}}) {offsets = array<i64: 0, 8>} : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<12xf32>
    %g = fsdp.flatten @l(%w, %b) {offsets = array<i64: 0, 8>} : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<12xf32>
    // CHECK: fsdp.reduce_scatter @l %{{.*}} {op = #fsdp.reduction<sum>} : tensor<12xf32> -> tensor<3xf32>
    %gs = fsdp.reduce_scatter @l %g {op = #fsdp.reduction<sum>} : tensor<12xf32> -> tensor<3xf32>
    return %gs : tensor<3xf32>
  }
}

// -----
// Async collectives: a start and its fsdp.wait.
module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["l.weight", "l.bias"] {element_type = f32, inits = ["uniform(0.5)", "zeros"], shapes = [array<i64: 2, 4>, array<i64: 2>], trainable = array<i1: true, true>, offsets = array<i64: 0, 8>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  // CHECK-LABEL: func.func @async_step
  func.func @async_step(%shard: tensor<3xf32> {fsdp.unit = @l, fsdp.role = #fsdp.role<param>}, %g: tensor<12xf32>) -> (tensor<12xf32>, tensor<3xf32>, tensor<3xf32>) {
    // CHECK: %[[T:.*]] = fsdp.all_gather @l %{{.*}} async : tensor<3xf32> -> !fsdp.future<tensor<12xf32>>
    %t = fsdp.all_gather @l %shard async : tensor<3xf32> -> !fsdp.future<tensor<12xf32>>
    // CHECK: %[[R:.*]] = fsdp.reduce_scatter @l %{{.*}} async {op = #fsdp.reduction<sum>} : tensor<12xf32> -> !fsdp.future<tensor<3xf32>>
    %r = fsdp.reduce_scatter @l %g async {op = #fsdp.reduction<sum>} : tensor<12xf32> -> !fsdp.future<tensor<3xf32>>
    // CHECK: fsdp.wait %[[T]] : tensor<12xf32>
    %full = fsdp.wait %t : tensor<12xf32>
    // CHECK: fsdp.wait %[[R]] : tensor<3xf32>
    %gs = fsdp.wait %r : tensor<3xf32>
    // CHECK: fsdp.all_reduce @l %{{.*}} async {group = #fsdp.group<replicate>} : tensor<3xf32> -> !fsdp.future<tensor<3xf32>>
    %a = fsdp.all_reduce @l %gs async {group = #fsdp.group<replicate>} : tensor<3xf32> -> !fsdp.future<tensor<3xf32>>
    %aw = fsdp.wait %a : tensor<3xf32>
    return %full, %gs, %aw : tensor<12xf32>, tensor<3xf32>, tensor<3xf32>
  }
}

// -----
// Buckets: two units' shards packed, gathered as one, unpacked by rank block;
// two full gradients interleaved by rank block, reduce-scattered as one.
module attributes {fsdp.world_size = 2 : i64} {
  fsdp.unit @a params ["a"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 4>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 2 : i64}
  fsdp.unit @b params ["b"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 6>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 6 : i64, padded_numel = 6 : i64, shard_numel = 3 : i64}
  // CHECK-LABEL: func.func @bucket
  func.func @bucket(%sa: tensor<2xf32>, %sb: tensor<3xf32>, %ga: tensor<4xf32>, %gb: tensor<6xf32>) -> (tensor<4xf32>, tensor<6xf32>, tensor<2xf32>, tensor<3xf32>) {
    // CHECK: %[[P:.*]] = fsdp.pack(%{{.*}}, %{{.*}}) {blocks = 1 : i64} : (tensor<2xf32>, tensor<3xf32>) -> tensor<5xf32>
    %p = fsdp.pack(%sa, %sb) {blocks = 1 : i64} : (tensor<2xf32>, tensor<3xf32>) -> tensor<5xf32>
    // CHECK: fsdp.all_gather @a %[[P]] async {bucket = [@a, @b]} : tensor<5xf32> -> !fsdp.future<tensor<10xf32>>
    %t = fsdp.all_gather @a %p async {bucket = [@a, @b]} : tensor<5xf32> -> !fsdp.future<tensor<10xf32>>
    %w = fsdp.wait %t : tensor<10xf32>
    // CHECK: fsdp.unpack %{{.*}} {blocks = 2 : i64} : (tensor<10xf32>) -> (tensor<4xf32>, tensor<6xf32>)
    %fa, %fb = fsdp.unpack %w {blocks = 2 : i64} : (tensor<10xf32>) -> (tensor<4xf32>, tensor<6xf32>)
    %q = fsdp.pack(%ga, %gb) {blocks = 2 : i64} : (tensor<4xf32>, tensor<6xf32>) -> tensor<10xf32>
    // CHECK: fsdp.reduce_scatter @a %{{.*}} async {bucket = [@a, @b]} : tensor<10xf32> -> !fsdp.future<tensor<5xf32>>
    %r = fsdp.reduce_scatter @a %q async {bucket = [@a, @b]} : tensor<10xf32> -> !fsdp.future<tensor<5xf32>>
    %rw = fsdp.wait %r : tensor<5xf32>
    %ra, %rb = fsdp.unpack %rw {blocks = 1 : i64} : (tensor<5xf32>) -> (tensor<2xf32>, tensor<3xf32>)
    return %fa, %fb, %ra, %rb : tensor<4xf32>, tensor<6xf32>, tensor<2xf32>, tensor<3xf32>
  }
}


// Pipeline parallelism: a placeholder send (no result), an async send with
// its completion future, and a receive of an activation of any rank.
// CHECK-LABEL: func.func @point_to_point
func.func @point_to_point(%x: tensor<2x3xf64>) -> tensor<2x3xf64> {
  // CHECK: fsdp.send %{{.*}} to 1 tag 4 : tensor<2x3xf64>
  fsdp.send %x to 1 tag 4 : tensor<2x3xf64>
  // CHECK: %[[S:.*]] = fsdp.send %{{.*}} to 1 tag 6 async : tensor<2x3xf64> -> !fsdp.future<tensor<1xf32>>
  %s = fsdp.send %x to 1 tag 6 async : tensor<2x3xf64> -> !fsdp.future<tensor<1xf32>>
  // CHECK: %[[R:.*]] = fsdp.recv from 1 tag 5 async : <tensor<2x3xf64>>
  %r = fsdp.recv from 1 tag 5 async : !fsdp.future<tensor<2x3xf64>>
  // CHECK: fsdp.wait %[[R]] : tensor<2x3xf64>
  %g = fsdp.wait %r : tensor<2x3xf64>
  // CHECK: fsdp.wait %[[S]] : tensor<1xf32>
  %d = fsdp.wait %s : tensor<1xf32>
  return %g : tensor<2x3xf64>
}
