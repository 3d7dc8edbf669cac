//===- ClusterSpec.h - the key names of the cluster spec JSON -------------===//
//
// Header-only: the one spelling of every key of a cluster spec
// (bench/clusters/*.json), shared by its writer (fsdp-calibrate,
// lib/Calibrate/Spec.cpp) and its reader (ClusterSpec::load,
// lib/Analysis/ClusterSpec.cpp), so that the two cannot drift apart. Each
// docstring gives the value's type and unit; the reader's validation (which
// keys are required, which ranges hold) is in ClusterSpec::load.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CLUSTERSPEC_H
#define FSDP_CLUSTERSPEC_H

namespace fsdp::cluster_spec {

//===----------------------------------------------------------------------===//
// Top-level keys
//===----------------------------------------------------------------------===//

/// String: the cluster's name in reports and traces (default: the file path).
inline constexpr const char *kName = "name";
/// Object: dense peak FLOP/s of one device by dtype name (f64, f32, tf32,
/// bf16, f16); `f32` is required.
inline constexpr const char *kPeakFlops = "peak_flops";
/// The dtype whose peak every spec must give (the CUDA-core peak of
/// elementwise ops).
inline constexpr const char *kRequiredPeakDtype = "f32";
/// Number: device memory of one device (one rank), bytes.
inline constexpr const char *kMemoryBytes = "memory_bytes";
/// Number: device memory bandwidth, bytes/s.
inline constexpr const char *kMemoryBandwidth = "memory_bandwidth";
/// Integer: devices (ranks) per node.
inline constexpr const char *kDevicesPerNode = "devices_per_node";
/// Object: the link between devices of one node (kBusBandwidth, kLatency,
/// kLink).
inline constexpr const char *kIntraNode = "intra_node";
/// Object: the link between nodes, per device, or per NIC when
/// kNicsPerNode is given (kBusBandwidth, kLatency, kLink).
inline constexpr const char *kInterNode = "inter_node";
/// Integer (optional): network interfaces per node; a collective spanning
/// nodes then uses up to all of them (ClusterSpec::nicsPerNode).
inline constexpr const char *kNicsPerNode = "nics_per_node";
/// Integer (optional): the processors a node's ranks share (a CPU host's
/// cores). When a node runs more ranks than this, the OS time-slices them
/// and every rate of a rank is divided by ranks / cores_per_node
/// (ClusterSpec::coresPerNode). Absent: each rank has its device.
inline constexpr const char *kCoresPerNode = "cores_per_node";
/// Number (optional, default 1): fraction in [0, 1] of a core's share that
/// a rank waiting on another rank (in MPI_Wait / MPI_Recv) takes from the
/// working ranks of its node when they outnumber cores_per_node
/// (ClusterSpec::waitingRankShare).
inline constexpr const char *kWaitingRankShare = "waiting_rank_share";
/// Object: roofline efficiencies in (0, 1] by op class (kEffMatmul,
/// kEffAttention, kEffElementwise, kEffMemory); each defaults to 1.
inline constexpr const char *kEfficiency = "efficiency";
/// Object (optional): op name (nn.gelu, fsdp.flatten, ...) -> efficiency in
/// (0, 1] that replaces its class's.
inline constexpr const char *kOpEfficiency = "op_efficiency";
/// Object (optional): op name -> seconds per call of its kernel beyond its
/// roofline time (ClusterSpec::opCallSeconds).
inline constexpr const char *kOpCallSeconds = "op_call_s";
/// Number (optional, default 0): host seconds to issue one instruction of
/// the step.
inline constexpr const char *kDispatchOverhead = "dispatch_overhead_s";
/// Number (optional, default 0): seconds per hand-over of a core at a
/// progress test on an oversubscribed node (ClusterSpec::progressYield).
inline constexpr const char *kProgressYield = "progress_yield_s";
/// Number (optional, default 0: free): bytes/s at which the step's inputs
/// and outputs enter and leave the runtime.
inline constexpr const char *kStepIoBandwidth = "step_io_bandwidth";
/// Number (optional, default 1): fraction in [0, 1] of a collective's time
/// that can overlap compute.
inline constexpr const char *kCommOverlap = "comm_overlap";
/// Number (optional, default 0), >= 0: how much slower compute runs while
/// an FSDP collective is in flight on the communication stream: the
/// overlapped part of a compute op takes (1 + this) times as long
/// (ClusterSpec::commContention).
inline constexpr const char *kCommContention = "comm_contention";
/// Number (optional, default 0): seconds a collective over more than one
/// rank costs beyond its ring time (the ranks' skew).
inline constexpr const char *kCollectiveSync = "collective_sync_s";
/// Object (optional): the device allocator's overheads beside the memory
/// plan's peak (kPerStreamPools, kWorkspaceBytes, kAllocatorSource;
/// ClusterSpec::hasAllocator).
inline constexpr const char *kAllocator = "allocator";
/// Bool (of kAllocator): each stream keeps its own pool of freed blocks.
inline constexpr const char *kPerStreamPools = "per_stream_pools";
/// Number (of kAllocator), bytes >= 0: workspaces allocated and kept
/// through the allocator (cuBLAS's per handle and stream).
inline constexpr const char *kWorkspaceBytes = "workspace_bytes";
/// String (of kAllocator, informational): where the model comes from.
inline constexpr const char *kAllocatorSource = "source";
/// Object (optional): how the training stack issues and waits for its FSDP
/// collectives, where that differs from one collective per unit overlapped
/// up to its wait (the kStack* keys below; ClusterSpec::stack, StackProfile
/// in fsdp/Analysis/SimStack.h, docs/collective-model.md "Stacks").
/// bench/fidelity/stacks.json holds the profiles, each with its source;
/// fidelity.py adds a row's to a copy of its cluster's spec.
inline constexpr const char *kStack = "stack";
/// String (of kStack, informational): the stack's name.
inline constexpr const char *kStackName = "name";
/// Bool (of kStack, default false): a unit's all-gather and reduce-scatter
/// are issued as one collective per parameter (DeepSpeed ZeRO-3 v0.3).
inline constexpr const char *kStackPerParam = "per_param_collectives";
/// Number >= 0 (of kStack, default 0), elements: with kStackPerParam, a
/// parameter with fewer elements is not all-gathered per use (kept
/// gathered: DeepSpeed's stage3_param_persistence_threshold).
inline constexpr const char *kStackPersistence = "persistence_threshold";
/// Bool (of kStack, default false): the wait for an all-gather also waits
/// for every collective issued before it (a device-wide synchronize at
/// each fetch).
inline constexpr const char *kStackSyncAtWait = "sync_at_gather_wait";
/// Bool (of kStack, default false): with activation checkpointing, the
/// backward all-gathers again the parameters the recompute released
/// (DeepSpeed ZeRO-3 v0.3 releases each sub-module's after every use).
inline constexpr const char *kStackRegather = "regather_for_recompute";
/// Number >= 0 (of kStack, default 1e9), elements: with kStackRegather, a
/// sub-module's parameters stay gathered from the recompute to the backward
/// when fewer elements are used in between (stage3_max_reuse_distance); 0:
/// never.
inline constexpr const char *kStackMaxReuse = "max_reuse_distance";
/// Number >= 0 (of kStack, default 0), seconds: host time of one call of
/// the stack's per-rank loops.
inline constexpr const char *kStackHostCall = "host_call_s";
/// Number >= 0 (of kStack, default 0): host calls per rank of the group for
/// each collective the stack issues (each costs this · G · kStackHostCall).
inline constexpr const char *kStackHostCalls = "host_calls_per_rank";
/// Bool (of kStack, default false): the parameters under kStackPersistence
/// are all-gathered once per step after the optimizer.
inline constexpr const char *kStackPersistentGather = "persistent_gather";
/// Number >= 0 (of kStack, default 0): host calls per rank per persistent
/// parameter in that gather.
inline constexpr const char *kStackPersistentCalls =
    "persistent_gather_calls_per_rank";
/// Number >= 0 (of kStack, default 0): passes over each all-gather's bytes
/// at kMemoryBandwidth serial with it, before it starts (not overlapped).
inline constexpr const char *kStackGatherSerialPasses = "gather_serial_passes";
/// Number >= 0 (of kStack, default 0): passes over each all-gather's bytes
/// at kMemoryBandwidth on the communication stream, added to its time.
inline constexpr const char *kStackGatherCopyPasses = "gather_copy_passes";
/// Number >= 0 (of kStack, default 0): passes over each reduce-scatter's
/// bytes at kMemoryBandwidth on the communication stream, added to its time.
inline constexpr const char *kStackReduceCopyPasses = "reduce_copy_passes";
/// String (of kStack, informational): where the profile comes from.
inline constexpr const char *kStackSource = "source";
/// Array of strings (informational): where the numbers come from.
inline constexpr const char *kSources = "sources";
/// Object (informational): fsdp-calibrate's raw measurements.
inline constexpr const char *kMeasured = "measured";

//===----------------------------------------------------------------------===//
// Keys of kIntraNode and kInterNode
//===----------------------------------------------------------------------===//

/// Number: the ring's bus bandwidth per device, bytes/s (nccl-tests' busbw).
inline constexpr const char *kBusBandwidth = "bus_bandwidth";
/// Number: latency of one ring step, seconds.
inline constexpr const char *kLatency = "latency_s";
/// Object (optional): measured collective times by message size on this
/// link (CollectiveCurves, fsdp/Analysis/CollectiveCurve.h; format in
/// docs/collective-model.md): "ranks" (integer >= 2), and per kind
/// ("all_gather", "reduce_scatter", "all_reduce", "send_recv") an array of
/// [bytes, seconds] pairs; a kind without a curve uses the α-β ring.
inline constexpr const char *kCollectives = "collectives";
/// String (informational): what the link is.
inline constexpr const char *kLink = "link";

//===----------------------------------------------------------------------===//
// Keys of kEfficiency
//===----------------------------------------------------------------------===//

/// Number in (0, 1]: of the dtype's peak FLOP/s, for nn.linear and nn.matmul.
inline constexpr const char *kEffMatmul = "matmul";
/// Number (optional, default 0: none), elements: the GEMM reduction length
/// K at which a matmul reaches half of kEffMatmul; a matmul's efficiency is
/// kEffMatmul · K / (K + this) (ClusterSpec::matmulHalfK).
inline constexpr const char *kEffMatmulHalfK = "matmul_half_k";
/// Number in (0, 1]: of the dtype's peak FLOP/s, for nn.attention.
inline constexpr const char *kEffAttention = "attention";
/// Number in (0, 1]: of the f32 peak FLOP/s, for every other op.
inline constexpr const char *kEffElementwise = "elementwise";
/// Number in (0, 1]: of kMemoryBandwidth, for the memory term of every op.
inline constexpr const char *kEffMemory = "memory";
/// Number >= 1 (optional, default 1): the memory traffic of a model's
/// elementwise-class op (norm, activation, rope, add, loss; not a cast nor
/// the optimizer's update) as a multiple of its single-pass bytes, the
/// framework's unfused kernels (ClusterSpec::elementwiseTraffic).
inline constexpr const char *kEffElementwiseTraffic = "elementwise_traffic";

} // namespace fsdp::cluster_spec

#endif // FSDP_CLUSTERSPEC_H
