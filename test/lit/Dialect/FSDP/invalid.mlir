// RUN: fsdp-opt %s -split-input-file -verify-diagnostics
// Every verifier message of the fsdp dialect.

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @gather_size(%s: tensor<3xf32>) -> tensor<10xf32> {
    // expected-error @+1 {{'fsdp.all_gather' op expects a shard of 3 and a full buffer of 12 elements for unit @l, got 3 and 10}}
    %0 = fsdp.all_gather @l %s : tensor<3xf32> -> tensor<10xf32>
    return %0 : tensor<10xf32>
  }
}

// -----

func.func @unknown_unit(%s: tensor<3xf32>) -> tensor<12xf32> {
  // expected-error @+1 {{'fsdp.all_gather' op refers to unknown fsdp.unit @nope}}
  %0 = fsdp.all_gather @nope %s : tensor<3xf32> -> tensor<12xf32>
  return %0 : tensor<12xf32>
}

// -----

module {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>}
  func.func @unsharded(%s: tensor<3xf32>) -> tensor<12xf32> {
    // expected-error @+1 {{'fsdp.all_gather' op expects unit @l to be sharded (run fsdp-shard first)}}
    %0 = fsdp.all_gather @l %s : tensor<3xf32> -> tensor<12xf32>
    return %0 : tensor<12xf32>
  }
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @rs_op(%g: tensor<12xf32>) -> tensor<3xf32> {
    // expected-error @+2 {{expected ::mlir::fsdp::Reduction to be one of: avg, sum}}
    // expected-error @+1 {{failed to parse FSDP_ReductionAttr parameter 'value'}}
    %0 = fsdp.reduce_scatter @l %g {op = #fsdp.reduction<max>} : tensor<12xf32> -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @rs_dtype(%g: tensor<12xf64>) -> tensor<3xf32> {
    // expected-error @+1 {{'fsdp.reduce_scatter' op expects operand and result of the same element type, got 'tensor<3xf32>' and 'tensor<12xf64>'}}
    %0 = fsdp.reduce_scatter @l %g : tensor<12xf64> -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  // expected-error @+1 {{'fsdp.unit' op expects padded_numel 12 and shard_numel 3 for numel 10 on shard groups of 4 ranks, got 10 and 3}}
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 10 : i64, shard_numel = 3 : i64}
}

// -----

// expected-error @+1 {{'fsdp.unit' op expects shapes, inits and trainable to have one entry per parameter (2), got 1, 2, 2}}
fsdp.unit @l params ["a", "b"] {element_type = f32, inits = ["zeros", "zeros"], shapes = [array<i64: 10>], trainable = array<i1: true, true>}

// -----

// expected-error @+1 {{'fsdp.unit' op expects parameter 'b' at offset 10 (parameters are packed in order), got 12}}
fsdp.unit @l params ["a", "b"] {element_type = f32, inits = ["zeros", "zeros"], shapes = [array<i64: 10>, array<i64: 2>], trainable = array<i1: true, true>, offsets = array<i64: 0, 12>, numel = 12 : i64, padded_numel = 12 : i64, shard_numel = 12 : i64}

// -----

// expected-error @+1 {{'fsdp.unit' op expects at least one parameter}}
fsdp.unit @l params [] {element_type = f32, inits = [], shapes = [], trainable = array<i1>}

// -----

func.func @view(%f: tensor<12xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'fsdp.param_view' op expects the view [8, 16) inside the flat buffer of 12 elements}}
  %0 = fsdp.param_view %f "w" at 8 : tensor<12xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @flatten(%a: tensor<8xf32>, %b: tensor<2xf32>) -> tensor<12xf32> {
    // expected-error @+1 {{'fsdp.flatten' op expects input #1 at a non-overlapping offset inside 12 elements, got offset 4}}
    %0 = fsdp.flatten @l(%a, %b) {offsets = array<i64: 0, 4>} : (tensor<8xf32>, tensor<2xf32>) -> tensor<12xf32>
    return %0 : tensor<12xf32>
  }
}

// -----

// expected-error @+1 {{'fsdp.world_size' must be an integer >= 1 on the module, got 0 : i64}}
module attributes {fsdp.world_size = 0 : i64} {
}

// -----

// expected-error @+1 {{'fsdp.role' must be #fsdp.role<...> of "param", "master", "exp_avg" or "exp_avg_sq", got "momentum"}}
func.func @role(%s: tensor<3xf32> {fsdp.role = "momentum"}) {
  return
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @wait_on_sync(%s: tensor<3xf32>) -> tensor<12xf32> {
    // expected-note @+1 {{prior use here}}
    %0 = fsdp.all_gather @l %s : tensor<3xf32> -> tensor<12xf32>
    // A synchronous collective's tensor is not a future: a type error.
    // expected-error @+1 {{use of value '%0' expects different type than prior uses: '!fsdp.future<tensor<12xf32>>' vs 'tensor<12xf32>'}}
    %1 = fsdp.wait %0 : tensor<12xf32>
    return %1 : tensor<12xf32>
  }
}

// -----

func.func @wait_on_argument(%s: !fsdp.future<tensor<12xf32>>) -> tensor<12xf32> {
  // expected-error @+1 {{'fsdp.wait' op expects the result of an async fsdp.all_gather}}
  %1 = fsdp.wait %s : tensor<12xf32>
  return %1 : tensor<12xf32>
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @read_in_flight(%s: tensor<3xf32>) -> !fsdp.future<tensor<12xf32>> {
    // expected-error @+1 {{'fsdp.all_gather' op is async: expects its result to be used by exactly one fsdp.wait and nothing else}}
    %0 = fsdp.all_gather @l %s async : tensor<3xf32> -> !fsdp.future<tensor<12xf32>>
    %1 = fsdp.wait %0 : tensor<12xf32>
    return %0 : !fsdp.future<tensor<12xf32>>
  }
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @wait_type(%s: tensor<3xf32>) -> tensor<12xf64> {
    %0 = fsdp.all_gather @l %s async : tensor<3xf32> -> !fsdp.future<tensor<12xf32>>
    // expected-error @+1 {{'fsdp.wait' op failed to verify that token is a future of the result type}}
    %1 = "fsdp.wait"(%0) : (!fsdp.future<tensor<12xf32>>) -> tensor<12xf64>
    return %1 : tensor<12xf64>
  }
}

// -----

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.unit @a params ["a"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 4>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 2 : i64}
  fsdp.unit @b params ["b"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 6>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 6 : i64, padded_numel = 6 : i64, shard_numel = 3 : i64}
  func.func @bucket_size(%p: tensor<5xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{'fsdp.all_gather' op expects a shard of 5 and a full buffer of 10 elements for the bucket of @a, got 5 and 8}}
    %0 = fsdp.all_gather @a %p {bucket = [@a, @b]} : tensor<5xf32> -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {fsdp.world_size = 2 : i64} {
  fsdp.unit @a params ["a"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 4>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 4 : i64, padded_numel = 4 : i64, shard_numel = 2 : i64}
  fsdp.unit @b params ["b"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 6>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 6 : i64, padded_numel = 6 : i64, shard_numel = 3 : i64}
  func.func @bucket_first(%p: tensor<5xf32>) -> tensor<10xf32> {
    // expected-error @+1 {{'fsdp.all_gather' op expects a bucket of at least two units starting with @a}}
    %0 = fsdp.all_gather @a %p {bucket = [@b, @a]} : tensor<5xf32> -> tensor<10xf32>
    return %0 : tensor<10xf32>
  }
}

// -----

func.func @pack_total(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'fsdp.pack' op expects the bucket to hold the 5 elements of its units, got 6}}
  %0 = fsdp.pack(%a, %b) {blocks = 1 : i64} : (tensor<2xf32>, tensor<3xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

func.func @unpack_blocks(%x: tensor<10xf32>) -> (tensor<4xf32>, tensor<6xf32>) {
  // expected-error @+1 {{'fsdp.unpack' op expects every unit buffer to hold 4 blocks, got 6 elements}}
  %a, %b = fsdp.unpack %x {blocks = 4 : i64} : (tensor<10xf32>) -> (tensor<4xf32>, tensor<6xf32>)
  return %a, %b : tensor<4xf32>, tensor<6xf32>
}

// -----

func.func @pack_one(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'fsdp.pack' op expects at least two unit buffers, got 1}}
  %0 = fsdp.pack(%a) {blocks = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @async_without_future(%s: tensor<3xf32>) -> tensor<12xf32> {
    // expected-error @+1 {{'fsdp.all_gather' op is async: expects an !fsdp.future result}}
    %0 = fsdp.all_gather @l %s async : tensor<3xf32> -> tensor<12xf32>
    return %0 : tensor<12xf32>
  }
}

// -----

module attributes {fsdp.world_size = 4 : i64} {
  fsdp.unit @l params ["w"] {element_type = f32, inits = ["zeros"], shapes = [array<i64: 10>], trainable = array<i1: true>, offsets = array<i64: 0>, numel = 10 : i64, padded_numel = 12 : i64, shard_numel = 3 : i64}
  func.func @future_without_async(%s: tensor<3xf32>) -> tensor<12xf32> {
    // expected-error @+1 {{'fsdp.all_gather' op is not async: expects a tensor result, got '!fsdp.future<tensor<12xf32>>'}}
    %0 = fsdp.all_gather @l %s : tensor<3xf32> -> !fsdp.future<tensor<12xf32>>
    %1 = fsdp.wait %0 : tensor<12xf32>
    return %1 : tensor<12xf32>
  }
}

// -----

// expected-error @+1 {{'fsdp.strategy' must be #fsdp.strategy<...> of "full-shard", "shard-grad-op", "shard-optimizer", "no-shard" or "hybrid-shard" on the module, got "zero-3"}}
module attributes {fsdp.strategy = "zero-3"} {
}

// -----

// expected-error @+1 {{'fsdp.memory_plan' must be on a function, not on 'builtin.module'}}
module attributes {fsdp.memory_plan = {}} {
}

// -----

// expected-error @+1 {{'fsdp.memory_plan' must be a dictionary, got "planned"}}
func.func @f() attributes {fsdp.memory_plan = "planned"} {
  return
}

// -----

// Pipeline parallelism's point-to-point ops.
func.func @recv_not_async() -> tensor<2xf32> {
  // expected-error @+1 {{'fsdp.recv' op is always async (its result is a future)}}
  %f = fsdp.recv from 1 tag 0 : !fsdp.future<tensor<2xf32>>
  %x = fsdp.wait %f : tensor<2xf32>
  return %x : tensor<2xf32>
}

// -----

func.func @send_negative_tag(%x: tensor<2xf32>) {
  // expected-error @+1 {{'fsdp.send' op expects a peer stage and a tag >= 0, got 1 and -1}}
  fsdp.send %x to 1 tag -1 : tensor<2xf32>
  return
}

// -----

func.func @send_future_unwaited(%x: tensor<2xf32>) {
  // expected-error @+1 {{'fsdp.send' op expects its future to be used by exactly one fsdp.wait and nothing else}}
  %f = fsdp.send %x to 1 tag 0 async : tensor<2xf32> -> !fsdp.future<tensor<1xf32>>
  return
}

// -----

func.func @send_completion_size(%x: tensor<2xf32>) {
  // expected-error @+1 {{'fsdp.send' op expects a future of a one-element completion buffer, got 'tensor<2xf32>'}}
  %f = fsdp.send %x to 1 tag 0 async : tensor<2xf32> -> !fsdp.future<tensor<2xf32>>
  %d = fsdp.wait %f : tensor<2xf32>
  return
}

// -----

func.func @send_async_without_future(%x: tensor<2xf32>) {
  // expected-error @+1 {{'fsdp.send' op has a future result exactly when it is async}}
  fsdp.send %x to 1 tag 0 async : tensor<2xf32>
  return
}

// -----

// expected-error @+1 {{'fsdp.pp_gather' must be "once-per-step" or "per-micro-batch" on the module, got "always"}}
module attributes {fsdp.pp_gather = "always"} {
}

// -----

// expected-error @+1 {{'fsdp.pp_split' must be a dictionary on the module, got [1, 2]}}
module attributes {fsdp.pp_split = [1, 2]} {
}

// -----

// Interleaved 1F1B: the chunks per rank on a stage's module, a chunk index
// on its ops and arguments.
// expected-error @+1 {{'fsdp.pipeline_chunks' must be an integer >= 1 on the module, got 0 : i64}}
module attributes {fsdp.pipeline_chunks = 0 : i64} {
}

// -----

// expected-error @+1 {{'fsdp.pp_chunk' must be a chunk index (integer >= 0)}}
func.func @chunk_arg(%x: tensor<2xf32> {fsdp.pp_chunk = -1 : i64}) {
  return
}

// -----

func.func @chunk_op(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'fsdp.pp_chunk' must be a chunk index (integer >= 0), got "a"}}
  %0 = arith.addf %x, %x {fsdp.pp_chunk = "a"} : tensor<2xf32>
  return %0 : tensor<2xf32>
}
