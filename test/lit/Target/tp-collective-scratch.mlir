// The cpu driver's temporaries of a tensor-parallel all-reduce in the memory
// plan: nn.tp_all_reduce runs as MPI_Iallreduce on the tensor channel
// (runtime/schedule/ops/Distributed.cpp), whose libnbc schedule holds one
// copy of its send buffer until the wait at the result's first use, as an
// fsdp.all_reduce's (fsdp/schedule/KernelScratch.h,
// cpuCollectiveScratchBytes). Here: the 16x32 f32 input (2048 B) and the sum
// (2048 B) are the buffers, 4096 B; with the temporary 6144 B. At tp=1 the
// group of one needs none.
// RUN: fsdp-translate %s --fsdp-to-schedule | FileCheck %s
// RUN: sed -e 's/tensor_parallel = 2/tensor_parallel = 1/' %s | fsdp-translate --fsdp-to-schedule | FileCheck %s --check-prefix=ONE
// CHECK: "peak_bytes": 4096,
// CHECK-NEXT: "peak_bytes_with_scratch": 6144,
// ONE: "peak_bytes": 4096,
// ONE-NEXT: "peak_bytes_with_scratch": 4096,
module attributes {fsdp.world_size = 2 : i64, fsdp.tensor_parallel = 2 : i64} {
  func.func @step(%x: tensor<16x32xf32> {nn.data = "features"}) -> (tensor<f32> {nn.loss}) {
    %y = nn.tp_all_reduce %x : tensor<16x32xf32>
    %l = nn.reduce_sum %y {axes = array<i64: 0, 1>} : tensor<16x32xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
