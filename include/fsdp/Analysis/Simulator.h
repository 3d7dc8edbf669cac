//===- Simulator.h - cluster spec and step-time simulator -----------------===//
//
// Predicts the time of one training step of the scheduled step function on a
// cluster described by a JSON spec (bench/clusters/*.json). The schedule is
// simulated as it is, in program order, on two streams per rank: compute
// (every nn op, roofline time from CostOpInterface) and communication (every
// FSDP collective, ring time); tensor-parallel collectives block the compute
// stream. See lib/Analysis/Simulator.cpp for the model.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_SIMULATOR_H
#define FSDP_ANALYSIS_SIMULATOR_H

#include "fsdp/Analysis/CollectiveCurve.h"
#include "fsdp/Analysis/SimStack.h"
#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace mlir::fsdp {

/// A cluster: one kind of device, `devicesPerNode` per node, links within a
/// node (NVLink) and between nodes (InfiniBand, per GPU).
struct ClusterSpec {
  std::string name;
  std::map<std::string, double>
      peakFlops; // dense FLOP/s by dtype: f32, tf32, bf16, f16, f64
  double memoryBytes = 0, memoryBandwidth = 0; // HBM bytes and bytes/s
  int64_t devicesPerNode = 1;
  double intraBandwidth = 0,
         intraLatency = 0; // bus bandwidth (bytes/s), α (s) per ring step
  double interBandwidth = 0, interLatency = 0;
  /// "nics_per_node" (optional, 0 when absent): network interfaces per node.
  /// With it, inter_node.bus_bandwidth is one NIC's, and a ring that spans
  /// nodes runs at min(intra-node, k' NICs) where k' = min(nics_per_node,
  /// max(1, k · nics_per_node / devices_per_node)) for k group members per
  /// node: NCCL builds one ring per NIC and, with the GPUs joined by
  /// NVLink, splits each collective over them (NVIDIA/nccl issue #601,
  /// the maintainer: "creates 4 rings, each using a different NIC";
  /// "we can use NVLink to split the operations in N parts then balance the
  /// traffic onto the N NICs"). Without it, one NIC carries the ring.
  int64_t nicsPerNode = 0;
  /// "intra_node.collectives" / "inter_node.collectives" (optional):
  /// measured time by message size per collective kind on the link
  /// (CollectiveCurves); a kind with a curve is priced by it instead of the
  /// α-β ring of latency_s and bus_bandwidth (docs/collective-model.md).
  std::optional<CollectiveCurves> intraCurves, interCurves;
  /// "cores_per_node" (optional, 0 when absent): the processors a node's
  /// ranks share. The spec's rates are one rank's with a processor to
  /// itself; with R = min(world, devices_per_node) ranks on a node and R >
  /// cores_per_node, the OS time-slices them (Linux CFS shares a core
  /// equally among runnable tasks), so every time of a rank, compute,
  /// host work, collectives and transfers, is R / cores_per_node times
  /// longer (oversubscription(), the simulator's slowdown).
  int64_t coresPerNode = 0;
  /// "stack" (optional): how the training stack issues its FSDP
  /// collectives (StackProfile, fsdp/Analysis/SimStack.h;
  /// docs/collective-model.md, "Stacks"). All off when absent.
  StackProfile stack;
  /// The slowdown of every rank's times at `world` ranks: max(1, R /
  /// cores_per_node), R = min(world, devices_per_node); 1 without
  /// cores_per_node.
  double oversubscription(int64_t world) const;
  /// "waiting_rank_share" (optional, in [0, 1], default 1): the share of a
  /// core a rank takes while it waits on another rank (MPI_Wait /
  /// MPI_Recv: Open MPI's progress loop polls and, oversubscribed,
  /// sched_yield()s between polls), relative to a working rank's. The
  /// pipeline simulator shares a node's cores among its ranks at each
  /// instant (processor sharing, Kleinrock 1967, as Linux CFS / EEVDF
  /// approximate it): with k working ranks and w waiting ones, a working
  /// rank runs at min(1, cores_per_node / (k + share · w)) of its rate
  /// (simulatePipeline, PipelineSim.h). 1 (the default) is the constant
  /// oversubscription() slowdown; fsdp-calibrate measures it.
  double waitingRankShare = 1;
  double effMatmul = 1, effAttention = 1, effElementwise = 1, effMemory = 1;
  /// "efficiency.matmul_half_k" (optional, 0 when absent): a GEMM's
  /// efficiency grows with its reduction length K as effMatmul · K / (K +
  /// matmulHalfK): each output tile's main loop over K is preceded by its
  /// pipeline's prologue and followed by its epilogue, a cost of about
  /// matmulHalfK steps of K whatever K is (a pipelined main loop over K
  /// tiles, as CUTLASS's). The GPU specs in bench/clusters take 293, fitted
  /// to XLA's measured H100 bf16 GEMM table (xla/service/gpu/model/
  /// matmul_interpolator_data.h, sm_90, 4096 x 4096 x K: within 2% for K =
  /// 256..4096).
  double matmulHalfK = 0;
  /// "efficiency.elementwise_traffic" (optional, >= 1, default 1): the bytes
  /// a model's elementwise-class op moves, as a multiple of its single-pass
  /// bytes (nn::CostOpInterface::getBytesAccessed: read each operand, write
  /// each result once). PyTorch eager runs a norm, rope or activation as a
  /// chain of kernels, each reading and writing the whole tensor (torchtitan's
  /// RMSNorm: float(), pow, mean, add, rsqrt, mul, type_as, mul weight);
  /// torch.compile's Inductor fuses the chain into one pass (Ansel et al.,
  /// "PyTorch 2", ASPLOS 2024, section 4), so a compiled stack's spec takes 1.
  /// Ops that are one kernel either way keep their bytes: nn.cast (FSDP's
  /// mixed-precision casts of flat parameters and gradients, a logits
  /// upcast) and the optimizer's updates (nn.adamw_update, nn.sgd_update:
  /// foreach or fused kernels). The GPU specs in
  /// bench/clusters take PyTorch eager's 2.3 (calibrated on torchtitan's
  /// eager against compiled runs, bench/README.md "Fidelity").
  double elementwiseTraffic = 1;
  /// A GEMM's efficiency for reduction length `k` (elements, >= 1):
  /// effMatmul · k / (k + matmulHalfK), effMatmul without matmul_half_k.
  /// A fraction of the dtype's peak FLOP/s, in (0, effMatmul].
  double matmulEfficiency(int64_t k) const {
    if (matmulHalfK <= 0)
      return effMatmul;
    double kk = double(k < 1 ? 1 : k);
    return effMatmul * kk / (kk + matmulHalfK);
  }
  /// "op_efficiency": per op name (nn.gelu, fsdp.flatten, ...) an efficiency
  /// in (0, 1] that replaces its class's: the FLOP term's for an op with
  /// FLOPs, efficiency.memory for a pure data-movement op.
  std::map<std::string, double> opEfficiency;
  /// "op_call_s" (optional): per op name, seconds a call of its kernel costs
  /// whatever its size (a rank's with a core to itself): the loops' and
  /// BLAS's set-up, a small shape's tail, which a roofline fitted at one
  /// shape folds into its efficiency and misprices at others (a pipeline's
  /// micro-batches run the same FLOPs in m times the calls). The simulator
  /// adds it to the op's roofline time (Simulator::opTime); fsdp-calibrate
  /// measures it from each kernel at two row counts and fits op_efficiency
  /// to the rest (runtime/calibrate/Fit.cpp, fitCallCosts).
  std::map<std::string, double> opCallSeconds;
  /// Host costs (optional, 0 when absent; the GPU specs leave them out: a
  /// GPU step's launches run ahead of the device and its state stays on
  /// it): "dispatch_overhead_s", seconds the host spends issuing one
  /// instruction (one op of the step function, a view or free included);
  /// "step_io_bandwidth", bytes per second at which the step's inputs and
  /// outputs enter and leave the runtime (0: free).
  double dispatchOverhead = 0, stepIoBandwidth = 0;
  /// "progress_yield_s" (optional, 0 when absent; seconds of a rank's time
  /// with a core to itself): what one hand-over of a core costs on a node
  /// with more ranks than cores. There Open MPI yields the core in every
  /// progress call that moves nothing (mpi_yield_when_idle, on by default
  /// when oversubscribing; opal/runtime/opal_progress.c: sched_yield() when
  /// no event progressed), and the runtime's default progress mode tests
  /// the requests in flight after every instruction (FSDP_PROGRESS_TEST), so
  /// each instruction issued while an FSDP collective or a point-to-point
  /// transfer is in flight hands the core to the node's other rank and back:
  /// the switch and the caches refilled with the rank's working set. The
  /// simulator charges it as host work after each such instruction when
  /// oversubscription() > 1; fsdp-calibrate measures it (measureHandover).
  double progressYield = 0;
  /// "comm_overlap" in [0, 1] (default 1): the fraction of a collective's
  /// time that can run concurrently with compute. The rest, (1 − overlap) ·
  /// its time, occupies the compute stream at its issue (the host's cores
  /// do the copies: MPI over shared memory with no spare core; SM
  /// contention under NCCL, Rashidi et al., ISCA 2021, section 3).
  double commOverlap = 1;
  /// "comm_contention" (optional, 0 when absent), c >= 0: compute that
  /// overlaps an FSDP collective runs at 1 / (1 + c) of its rate, as NCCL's
  /// kernels take SMs, L2 and HBM bandwidth from the GEMMs beside them
  /// (Rashidi et al., ISCA 2021, section 3); a compute op of time d that
  /// overlaps the communication stream's busy time B for part of its run
  /// takes d + B·c/(1 + c) (contendedEnd, fsdp/Analysis/Contention.h).
  /// Tensor-parallel collectives block compute and do not contend.
  double commContention = 0;
  /// "collective_sync_s" (optional, 0 when absent): seconds a collective
  /// over more than one rank costs beyond its ring time because its ranks
  /// arrive from compute skewed (time-slicing, OS noise; Petrini, Kerbyson
  /// & Pakin, SC 2003); part of the collective's time.
  double collectiveSync = 0;

  /// "allocator" (optional object; absent: the runtime's own arena, no
  /// overhead): what the device's allocator reserves beyond the memory plan's
  /// peak, reported as its own line (addAllocatorToReport, PlanReport.h) and
  /// counted when a plan is checked against memory_bytes.
  /// "per_stream_pools" (bool): each stream keeps its own pool of freed
  /// blocks, as PyTorch's CUDA caching allocator does ("aware of only the
  /// stream where a tensor was allocated", torch.Tensor.record_stream docs;
  /// FSDP's all-gather / reduce-scatter streams, pytorch/pytorch #86836,
  /// #147168), so the most bytes the communication streams ever hold stay
  /// reserved beside the compute stream's peak (addAllocatorToReport: the
  /// gathered parameters and the all-gathers' send buffers; a reduction's
  /// input is on the compute stream). "workspace_bytes" (bytes,
  /// >= 0): workspaces the framework allocates through the allocator and
  /// keeps (cuBLAS's per handle and stream: 32 MiB recommended on Hopper,
  /// 4 MiB before, cuBLAS docs, cublasSetWorkspace).
  bool hasAllocator = false, perStreamPools = false;
  double workspaceBytes = 0;

  /// Reads and validates a spec; on failure `error` says what is wrong (a
  /// JSON syntax error with its line and column). With `ctx`, every
  /// op_efficiency key must name an op registered there (a misspelt op
  /// would otherwise fall back to its class silently).
  static std::optional<ClusterSpec>
  load(llvm::StringRef path, std::string &error, MLIRContext *ctx = nullptr);
};

/// A collective that an nn op performs over the tensor-parallel group
/// (`#fsdp.group<tensor>`, docs/tensor-parallel.md): Megatron's g,
/// nn.tp_all_reduce (forward, and as nn.tp_copy's VJP in backward), and
/// sequence parallelism's all-gather / reduce-scatter along the sequence.
/// `bytes` is the full buffer S of the ring formulas (an all-reduce's input,
/// an all-gather's result, a reduce-scatter's input), `groupSize` the
/// module's tensor-parallel degree T, `calls` the collectives the runtime
/// issues for it (a sequence-parallel op: one per row before its `dim`, of
/// bytes / calls each).
struct TensorCollective {
  enum Kind { AllReduce, AllGather, ReduceScatter } kind = AllReduce;
  int64_t bytes = 0, groupSize = 1, calls = 1;
  /// Bytes one rank sends: 2·(T−1)/T·S for an all-reduce, (T−1)/T·S
  /// otherwise (ring algorithms, fsdp/Sharding.h).
  int64_t bytesPerRank() const;
};
/// The tensor-parallel collective `op` performs, or nullopt. Ops are
/// recognised by name and kind in one table (Simulator.cpp,
/// kTensorCollectiveOps): a new TP collective op is one entry there, and the
/// simulator, the plan report's `tp_bytes_per_step` and the sweep price it.
std::optional<TensorCollective> tensorCollectiveOf(Operation *op);

struct SimEvent {
  std::string name; // op name, collective name and unit, or "wait ..." (a
                    // compute stall)
  int stream = 0;   // 0 compute (host work included), 1 communication, 2
                    // tensor-parallel communication (blocking compute), 3
                    // a pipeline transfer received from another stage
  double start = 0, duration = 0;
  int64_t flops = 0, bytes = 0;
};

struct SimResult {
  /// Seconds: the predicted step, the sums of compute and collective times,
  /// step − compute − host, and the lower bound max(compute + max(host +
  /// (1 − overlap) · comm, first all-gather + last reduction), comm) with
  /// its two collective terms.
  /// commTime and exposedComm are the FSDP collectives' (the data-parallel
  /// groups): exposedComm = step − compute − host − tpExposed.
  double stepTime = 0, computeTime = 0, commTime = 0, exposedComm = 0,
         lowerBound = 0;
  /// Tensor parallelism: bytes each rank sends in TP collectives per step
  /// (TensorCollective::bytesPerRank summed; Megatron's 8·b·s·h·(t−1)/t
  /// elements per layer per micro-batch without sequence parallelism,
  /// Narayanan et al., SC'21, Sec. 3.2), their seconds, and the seconds the
  /// compute stream waits for them (all of it for those that block; for
  /// sequence parallelism's backward re-gather, overlapped, the wait at its
  /// reader and its share that cannot overlap).
  int64_t tpBytes = 0;
  double tpTime = 0, tpExposed = 0;
  /// Seconds of host work on the compute stream: instruction dispatch and
  /// the step's input/output (the collectives' share that cannot overlap,
  /// (1 − comm_overlap) · their time, counts as exposed communication).
  double hostTime = 0;
  /// Of hostTime, the progress tests' hand-overs of the core on an
  /// oversubscribed node (ClusterSpec::progressYield).
  double yieldTime = 0;
  double firstGatherTime = 0, lastReduceTime = 0;
  double mfu = 0, peakFlops = 0;
  int64_t flops = 0; // per rank per step, from the cost model
  /// Of those, the FLOPs and compute-stream seconds of the ops
  /// fsdp-activation-checkpoint recomputes (`nn.recompute`). MFU counts
  /// model FLOPs only, without them (Chowdhery et al., PaLM, 2022, App. B).
  int64_t recomputeFlops = 0;
  double recomputeTime = 0;
  /// Seconds compute ops took beyond their roofline time because an FSDP
  /// collective was in flight (comm_contention); part of no other term, so
  /// exposedComm = step − compute − contention − host − tpExposed.
  double contentionTime = 0;
  std::string mfuDtype;
  /// Pipeline parallelism, a stage simulated against the others
  /// (simulatePipeline, PipelineSim.h; 0 for a step simulated alone): bytes
  /// this rank sends to other stages per step (fsdp.send), the seconds of
  /// the transfers it receives, the part of its waits on them that is the
  /// transfer itself (at most each transfer's time: exposed p2p) and the
  /// rest, waiting for the peer stage to compute (the bubble inside the
  /// step).
  int64_t p2pBytes = 0;
  double p2pTime = 0, p2pExposed = 0, p2pStall = 0;
  std::vector<SimEvent> events;
  /// The intervals [begin, end) (s, in order, not overlapping) in which the
  /// rank works on its compute stream (ops, host work, the collectives'
  /// host share, blocking tensor-parallel collectives), not waiting: what
  /// takes a core on an oversubscribed node (CoreShare).
  std::vector<std::pair<double, double>> busy;
};

/// The cores of a rank's node as the other ranks there leave them
/// (simulatePipeline implements it): a rank's times stretch while more
/// ranks than cores run. Without one a rank's times are
/// ClusterSpec::oversubscription times longer throughout.
class CoreShare {
public:
  virtual ~CoreShare() = default;
  /// When `work` seconds of a rank with a core to itself, started at
  /// `start` (s), end.
  virtual double end(double start, double work) const = 0;
};

/// The other pipeline stages, as a stage's simulation sees them
/// (simulatePipeline implements it): it reports when it issues a transfer
/// and asks when one completes.
class P2PPeers {
public:
  virtual ~P2PPeers() = default;
  /// `op` (fsdp.send or fsdp.recv) is issued at `time` seconds.
  virtual void issued(Operation *op, double time) = 0;
  /// The transfer of `op` (fsdp.send or fsdp.recv), waited from `waitTime`
  /// on: its end and its duration (seconds), or nullopt while the other
  /// stage has not issued its side (the wait cannot be simulated yet).
  virtual std::optional<std::pair<double, double>>
  completion(Operation *op, double waitTime) = 0;
};

/// One stage's step simulated op by op against the other stages (the model
/// of Simulator::run, with fsdp.send / fsdp.recv timed by `peers`).
class StageSimulation {
public:
  ~StageSimulation();
  /// Simulates ops until the step's end (true) or a wait on a transfer whose
  /// peer has not issued its side yet (false: call again once it has).
  /// Fails as Simulator::run does.
  FailureOr<bool> advance();
  /// The op the simulation stopped at (null at the end).
  Operation *position() const;
  /// The step's result, after advance() returned true.
  FailureOr<SimResult> finish();

private:
  friend class Simulator;
  struct Impl;
  explicit StageSimulation(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

class Simulator {
public:
  explicit Simulator(const ClusterSpec &spec) : spec(spec) {}
  /// Simulates the module's step function. Fails with a diagnostic when an
  /// op's dtype has no peak in the spec, or when the spec's values make the
  /// predicted step time overflow (not finite).
  FailureOr<SimResult> run(ModuleOp module) const;
  /// A pipeline stage's module, to be advanced against the other stages
  /// (simulatePipeline), its times stretched by `cores` when given (else by
  /// ClusterSpec::oversubscription); fails as run() does.
  FailureOr<std::unique_ptr<StageSimulation>>
  start(ModuleOp stage, P2PPeers &peers,
        const CoreShare *cores = nullptr) const;
  /// Seconds `op` takes on the compute stream when it has a cost
  /// (nn::CostOpInterface; 0 otherwise): the roofline max(FLOPs / (peak ·
  /// efficiency), bytes / (memory bandwidth · efficiency.memory)) of the
  /// model above (lib/Analysis/Simulator.cpp), its FLOPs and bytes out when
  /// asked; `matmulDtype` receives the dtype of a matmul or attention op's
  /// tensor-core peak (empty for other ops). Fails with a diagnostic at `op`
  /// when the spec has no peak for that dtype.
  FailureOr<double> opTime(Operation *op, int64_t *flops = nullptr,
                           int64_t *bytes = nullptr,
                           std::string *matmulDtype = nullptr) const;
  /// Seconds of one collective of `kind` on `bytes` (S, the full buffer)
  /// over `groupSize` ranks spaced `stride` apart, on the link the group
  /// spans: the link's measured curve for the kind when the spec has one
  /// (CollectiveCurves::time), else the ring (Thakur, Rabenseifner & Gropp
  /// 2005): (G−1)·α + (G−1)/G·S/B, twice for an all-reduce. `hierarchical`
  /// splits a group spanning nodes into an inter-node leg over the nodes
  /// and an intra-node leg over the rest. Without the ranks' skew
  /// (collective_sync_s) and oversubscription, which the step adds.
  double collectiveTime(CollectiveKind kind, int64_t bytes, int64_t groupSize,
                        int64_t stride, bool hierarchical) const;
  /// Seconds of a unit's all-gather or reduce-scatter of `bytes` (the
  /// unit's full flat buffer) whose parameters have `paramNumels` elements:
  /// collectiveTime of the whole buffer, or with the spec's
  /// stack.per_param_collectives one collectiveTime per parameter of its
  /// share of the bytes, summed (each pays its ring's latency): the
  /// all-gathers of the parameters with fewer than
  /// stack.persistence_threshold elements are left out (they stay
  /// gathered); a reduce-scatter covers every parameter. A kind other than
  /// these two, or no parameters, is one collective (defined in
  /// SimStack.cpp; the step prices a unit's collectives with
  /// priceUnitCollective, which adds the stack's other terms).
  double unitCollectiveTime(CollectiveKind kind, int64_t bytes,
                            llvm::ArrayRef<int64_t> paramNumels,
                            int64_t groupSize, int64_t stride,
                            bool hierarchical) const;
  /// The spec the simulator prices with.
  const ClusterSpec &getSpec() const { return spec; }

private:
  const ClusterSpec &spec;
};

/// The Chrome trace ("traceEvents", loads in Perfetto / chrome://tracing):
/// one track per stream (compute, communication, and tensor-parallel
/// communication when the step has any), each op a complete event with args
/// flops/bytes.
nlohmann::ordered_json chromeTrace(const SimResult &result,
                                   llvm::StringRef clusterName);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_SIMULATOR_H
