//===- KernelScratch.h - the cpu driver's kernel scratch per op -*- C++ -*-===//
//
// The bytes a kernel of the reference (cpu) driver allocates for itself
// while it runs, beyond the schedule's buffers: the memory planner adds them
// to the live bytes of their instruction (memory_plan.peak_bytes_with_scratch)
// and fsdp-run's allocator measurement (device_peak_bytes, --alloc
// per-buffer) checks the sum (test/lit/Integration/device-peak.test).
// From runtime/lib/cpu: on bf16/f16 every float kernel computes on f32
// working copies of its 2-byte operands (each distinct tensor once) and
// results (CpuDevice.cpp, Stage); attention keeps one seq×seq probability
// matrix per (batch, head) in the compute type, its VJP two; the norm VJPs
// accumulate the weight (and bias) gradients in double; RoPE tabulates
// cos and sin of seq × head_dim/2 angles in double; reduce_sum accumulates
// its output in double; flatten sorts its parts' ranges. Header-only, no
// dependencies. The cuda driver differs: on bf16/f16 it widens only
// attention's operands (and a biased linear's accumulator), and it keeps
// per-row statistics (8-16 bytes per row) for the norm VJPs and
// cross-entropy, the sorted (token, position) pairs of the embedding
// gradient (16 bytes per position and the radix sort's storage) and the
// partial sums of its two-stage column sums (at most 32 MiB); its pool
// statistics measure its own. And the temporaries
// the cpu driver's MPI reductions hold while in flight
// (cpuCollectiveScratchBytes), which NCCL does not take from the pool.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_KERNELSCRATCH_H
#define FSDP_SCHEDULE_KERNELSCRATCH_H

#include "fsdp/schedule/Format.h"

#include <cstdint>
#include <set>
#include <vector>

namespace fsdp::schedule {

/// One operand or result: its identity (the same tensor passed twice is
/// staged once), shape, element size in bytes and whether it is bf16/f16.
struct ScratchTensor {
  const void *id;
  std::vector<int64_t> shape;
  int64_t elementBytes;
  bool half;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// Scratch bytes of one instruction on the cpu driver. `headDim` is
/// nn.rope's head_dim (unused by other ops).
inline int64_t cpuKernelScratchBytes(OpKind op,
                                     const std::vector<ScratchTensor> &operands,
                                     const std::vector<ScratchTensor> &results,
                                     int64_t headDim = 0) {
  switch (op) {
  // No float kernel of its own: copies, collectives, casts, f32/f64-only
  // optimizer updates.
  case OpKind::Constant:
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::AllReduce:
  case OpKind::Free:
  case OpKind::ParamView:
  case OpKind::Wait:
  case OpKind::LocalShard:
  case OpKind::Pack:
  case OpKind::Unpack:
  case OpKind::Split:
  case OpKind::Concat:
  case OpKind::ZerosLike:
  case OpKind::Cast:
  case OpKind::MicroBatch:
  case OpKind::SgdUpdate:
  case OpKind::AdamwUpdate:
    return 0;
  default:
    break;
  }
  if (results.empty())
    return 0;
  const ScratchTensor &r0 = results[0];
  // The kernel's dtype is its result's, except for cross_entropy and the
  // vocab-parallel statistics, whose f32 results of 2-byte logits are
  // written as is (no working copy); the vocab-parallel loss reads only its
  // f32 statistics.
  bool half = op == OpKind::CrossEntropy || op == OpKind::VocabParallelCeStats
                  ? operands[0].half
                  : r0.half;
  int64_t bytes = 0;
  if (half) { // the f32 working copies (Stage)
    std::set<const void *> seen;
    for (const ScratchTensor &t : operands)
      if (t.half && seen.insert(t.id).second)
        bytes += 4 * t.numel();
    for (const ScratchTensor &t : results)
      if (t.half)
        bytes += 4 * t.numel();
  }
  int64_t compute = half ? 4 : r0.elementBytes; // the kernel's element type
  auto dim = [](const ScratchTensor &t, size_t i) {
    return i < t.shape.size() ? t.shape[i] : 1;
  };
  switch (op) {
  case OpKind::Attention:
  case OpKind::AttentionGrad: {
    int64_t seq = dim(operands[0], 1);
    bytes += (op == OpKind::Attention ? 1 : 2) * seq * seq * compute;
    break;
  }
  case OpKind::LayerNormGrad:
    bytes += 2 * 8 * operands[0].shape.back();
    break;
  case OpKind::RmsNormGrad:
    bytes += 8 * operands[0].shape.back();
    break;
  case OpKind::Rope:
    bytes += 8 * dim(operands[0], 1) * headDim;
    break;
  case OpKind::ReduceSum:
    bytes += 8 * r0.numel();
    break;
  case OpKind::SumSquares: // an f64 result: the 2-byte input's f32 copy
    if (operands[0].half)
      bytes += 4 * operands[0].numel();
    break;
  case OpKind::Flatten: // the parts' [offset, end) ranges
    bytes += 16 * static_cast<int64_t>(operands.size());
    break;
  default:
    break;
  }
  return bytes;
}

/// Heap bytes the cpu driver's MPI collective holds beyond its send and
/// receive buffers while it is in flight, for a send buffer of `sendBytes`
/// over a group of `groupSize` ranks. Open MPI 4.1's coll/libnbc, which
/// serves MPI_Ireduce_scatter_block and MPI_Iallreduce, allocates them when
/// the collective starts and frees them when it completes: two temporaries
/// of the whole send buffer for a reduce-scatter (nbc_ireduce_scatter_block.c:
/// one malloc of span_align + span, span the p·recvcount elements) and one
/// for an all-reduce (nbc_iallreduce.c: tmpbuf of span); measured +1.6 MB for
/// a 0.8 MB reduce-scatter and +0.8 MB for a 0.8 MB all-reduce. A group of
/// one rank needs none (measured: one rank is within 0.1 MB of the plan).
/// The memory plan counts them from the collective's start to its wait (an
/// upper bound: a progress test may complete it earlier). All-gathers need
/// none (libnbc gathers into the receive buffer).
inline int64_t cpuCollectiveScratchBytes(OpKind op, int64_t sendBytes,
                                         int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  if (op == OpKind::ReduceScatter)
    return 2 * sendBytes;
  if (op == OpKind::AllReduce)
    return sendBytes;
  return 0;
}

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_KERNELSCRATCH_H
