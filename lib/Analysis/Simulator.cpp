//===- Simulator.cpp - predicted step time of the current schedule --------===//
//
// The model:
//
// * Two streams per rank, as the runtime runs a step: compute executes the
//   step's ops one after another in program order; communication executes
//   collectives one after another, in the order they are issued (one FIFO
//   stream, as one NCCL communicator / one MPI progress engine). A
//   collective is issued at its place in program order: it starts at
//   max(compute time at issue, communication stream free, its input ready).
//   An `async` collective (fsdp-schedule) is completed by its fsdp.wait: the
//   compute stream blocks there until the transfer is done — the only
//   synchronisation. A collective that is not async is waited at the first
//   op that reads its result (directly or through fsdp.param_view), as the
//   runtime does.
// * Compute op time, roofline (Williams, Waterman & Patterson, CACM 2009):
//   max(FLOPs / (peak[dtype] · efficiency[kind]), bytes / (memory bandwidth ·
//   efficiency.memory)), FLOPs and bytes from nn::CostOpInterface. Kinds:
//   matmul (linear, matmul) and attention use the tensor-core peak of their
//   operand dtype, a matmul at efficiency.matmul · K / (K +
//   efficiency.matmul_half_k) for its reduction length K (ClusterSpec::
//   matmulHalfK: the tile pipeline's fixed cost per output tile); every other
//   op the f32 peak at efficiency elementwise, bytes × elementwise_traffic
//   (ClusterSpec::elementwiseTraffic). fsdp.flatten etc. are copies.
// * Collective time, ring algorithms (Thakur, Rabenseifner & Gropp, IJHPCA
//   2005; NCCL's bus bandwidth, nccl-tests doc/PERFORMANCE.md): all-gather or
//   reduce-scatter of S bytes (the full, gathered size) over G ranks
//   (G−1)·α + (G−1)/G · S/B; all-reduce twice that. α, B are the intra-node
//   link's if the group's ranks lie in one node, else the inter-node
//   link's (per GPU, or with nics_per_node the node's NICs shared by the
//   group's members there, ClusterSpec::nicsPerNode), plus collective_sync_s
//   (the ranks' skew at a collective, measured on this machine; absent for the
//   GPU specs). A link with measured curves (intra_node.collectives /
//   inter_node.collectives: time by message size per kind, nccl-tests
//   style; CollectiveCurves, docs/collective-model.md) prices a kind it has
//   a curve for by the curve instead: the measurement at n ranks read as
//   the time of one ring step by chunk, (G−1)·τ(S/G) (2(G−1) steps for
//   all-reduce). Ranks are laid out r = (replica·S + shard)·T + t (T the
//   tensor-parallel degree, S the shard size): a tensor-parallel group is T
//   adjacent ranks, the shard group's ranks lie T apart and the replicate
//   group's S·T apart, so a group's members per node follow from its stride.
//   HSDP's replicate group is hierarchical
//   when a node holds k > 1 of its members: a ring over the G/k nodes on the
//   inter-node link plus a ring over k on the intra-node link with S/(G/k)
//   bytes.
// * The training stack (the spec's optional "stack", docs/collective-model.md
//   "Stacks"; priced by SimStack.cpp, which states that model): with
//   per_param_collectives a unit's all-gather and reduce-scatter are priced
//   as one collective per parameter of its share of the bytes (the
//   all-gathers leave out parameters under persistence_threshold, which
//   stay gathered), each with the ranks' skew; with regather_for_recompute
//   the all-gather before a recompute also gathers again what the recompute
//   releases before the backward; the stack's per-rank host loops
//   (host_calls_per_rank) are host work on the compute stream before each
//   collective starts; with persistent_gather the persistent parameters are
//   gathered after the step's last op; with sync_at_gather_wait the wait
//   for an all-gather also waits for every collective issued before it
//   (DeepSpeed ZeRO-3 v0.3's torch.cuda.synchronize() at each fetch).
// * Tensor-parallel collectives (tensorCollectiveOf: nn.tp_all_reduce, and
//   sequence parallelism's all-gather / reduce-scatter as they are added to
//   its table) block the compute stream: Megatron's f/g all-reduces sit
//   between a block's GEMMs, whose next op reads the sum (Shoeybi et al.
//   2019, Sec. 3; the runtime waits at that first use). They are not
//   overlapped here, except sequence parallelism's backward re-gather
//   (nn.sp_regather), issued before the grad-input GEMMs and waited at the
//   weight gradient, as Megatron-LM overlaps it (LinearWithGradAccumulation-
//   AndAsyncCommunication). Each is timed by the same ring model on the link
//   its T adjacent ranks span: the intra-node link when T <= devices_per_node,
//   else the inter-node link (NICs shared by the group's members in a
//   node). A sequence-parallel op's calls (one per row before its dim)
//   are priced each, and the ranks' skew (collective_sync_s) once per op:
//   the runtime issues them back to back with nothing between. They run on
//   their own FIFO (a separate communicator: Megatron's
//   and torchtitan's TP process group), not behind the FSDP stream's
//   prefetches; the links' contention between the two is not modelled.
// * Per-op efficiencies ("op_efficiency", measured by fsdp-calibrate on the
//   cpu backend): an op kind whose kernel's rate differs from its class's
//   (GELU's tanh, cross-entropy's exp, AdamW's streaming loop) gets its own
//   efficiency in the same roofline.
// * Host work (optional spec terms, absent for GPUs): dispatch_overhead_s
//   per op of the step (the host issues one instruction per op: interpreter
//   dispatch, binding, frees; a kernel launch), the step's host inputs and
//   outputs (data and step in, loss out: the training state is resident) at
//   step_io_bandwidth before the first and after the last op,
//   and for each collective (1 − comm_overlap) · its time on the compute
//   stream at its issue: the part of the transfer the host's cores must do
//   themselves (MPI over shared memory copies on the ranks' own cores; on a
//   GPU NCCL's kernels contend for SMs and memory bandwidth, Rashidi et al.,
//   "Enabling Compute-Communication Overlap in Distributed Deep Learning
//   Training Platforms", ISCA 2021, section 3). The trace shows them on the
//   compute track (category "host").
// * Oversubscription (cores_per_node, optional): with more ranks on a node
//   than cores the OS time-slices them, so every time of a rank (compute,
//   host work, collectives, the skew) is ranks / cores times longer
//   (ClusterSpec::oversubscription); the spec's rates are a rank's with a
//   core to itself. There Open MPI yields the core in every progress call
//   that moves nothing (mpi_yield_when_idle; opal_progress.c), and the
//   runtime tests its requests after every instruction: each op issued
//   while an async FSDP collective or a transfer between stages is in
//   flight (issued, not yet waited) costs progress_yield_s of host work, a
//   hand-over of the core and back (progressYields;
//   docs/compute-model.md, "Ranks sharing cores").
// * Per-call costs (op_call_s, optional): an op's kernel call costs that
//   many seconds beside its roofline (Simulator::opTime).
// * Contention (comm_contention c, optional): the part of a compute op that
//   overlaps an FSDP collective in flight runs at 1 / (1 + c) of its rate
//   (contendedEnd); the extra is contention_s, outside compute and exposed
//   communication.
// * Results: step time = when both streams are done (plus the outputs);
//   compute = sum of op times; host = dispatch + step input/output; comm =
//   sum of FSDP collective times; TP = sum of tensor-parallel collective
//   times (all exposed: they block); exposed comm = step − compute − host −
//   TP (the time compute waits for FSDP collectives or does their copies,
//   plus a communication tail); lower bound (the issue's definition, with
//   host work and TP) = max(compute + TP + max(host + (1 − overlap) · comm,
//   first all-gather − ops beside it + last reduction), comm) — host work,
//   collectives' shares and (the first) ops not reading the first unit may
//   fill the two waits: compute needs the first unit gathered, the last unit's
//   update cannot run before its gradient is reduced (its reduction starts
//   after the last gradient op; fsdp-optimizer updates units in wrap order, so
//   for the models here the last-reduced unit — the one holding the embedding —
//   is updated first and the remaining compute cannot hide its reduction); MFU
//   = FLOPs per rank / (step time · peak of the dtype with most
//   matmul/attention FLOPs).
// * Pipeline stages (fsdp.send / fsdp.recv) are simulated against each
//   other by simulatePipeline (PipelineSim.cpp, which states that model);
//   alone (Simulator::run on one stage) their transfers take no time.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Analysis/Contention.h"
#include "fsdp/Analysis/SimStack.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/ClusterSpec.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Sharding.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::json;

static double ring(int64_t g, double bytes, double alpha, double bw) {
  if (g <= 1)
    return 0;
  return (g - 1) * alpha + double(g - 1) / double(g) * bytes / bw;
}

/// One ring leg over `g` ranks on a link: its measured curve for the kind
/// when the spec has one (CollectiveCurves::time), else the α-β ring, twice
/// for an all-reduce.
static double leg(const std::optional<CollectiveCurves> &curves,
                  CollectiveKind kind, int64_t g, double bytes, double alpha,
                  double bw) {
  if (g <= 1)
    return 0;
  if (curves && curves->has(kind))
    return curves->time(kind, bytes, g);
  double t = ring(g, bytes, alpha, bw);
  return kind == CollectiveKind::AllReduce ? 2 * t : t;
}

double Simulator::collectiveTime(CollectiveKind kind, int64_t bytes, int64_t g,
                                 int64_t stride, bool hierarchical) const {
  if (g <= 1)
    return 0;
  int64_t dpn = spec.devicesPerNode;
  // Members of the group in one node (groups are aligned to nodes).
  int64_t k =
      stride >= dpn ? 1 : std::min(g, dpn / std::max<int64_t>(stride, 1));
  // A ring that leaves the node: with nics_per_node, NCCL runs one ring per
  // NIC and splits the collective over them through NVLink, so the k
  // members of a node share its NICs (one NIC's share per member at
  // least), and NVLink caps the sum (ClusterSpec::nicsPerNode). A measured
  // inter-node curve already includes how its ranks shared the NICs.
  double interBw = spec.interBandwidth;
  if (spec.nicsPerNode > 0) {
    double nics = std::min<double>(
        spec.nicsPerNode,
        std::max(1.0, double(k) * spec.nicsPerNode / double(dpn)));
    interBw = std::min(spec.intraBandwidth, nics * spec.interBandwidth);
  }
  if (k >= g)
    return leg(spec.intraCurves, kind, g, bytes, spec.intraLatency,
               spec.intraBandwidth);
  if (hierarchical && k > 1) {
    int64_t nodes = (g + k - 1) / k;
    return leg(spec.interCurves, kind, nodes, bytes, spec.interLatency,
               interBw) +
           leg(spec.intraCurves, kind, k, double(bytes) / nodes,
               spec.intraLatency, spec.intraBandwidth);
  }
  return leg(spec.interCurves, kind, g, bytes, spec.interLatency, interBw);
}

/// The job's ranks: a pipeline stage's module gives its own world size, the
/// job runs the stages' ranks side by side.
static int64_t jobWorld(ModuleOp module, int64_t world) {
  auto stages = module->getAttrOfType<IntegerAttr>(kPipelineStagesAttr);
  return stages ? world * std::max<int64_t>(1, stages.getInt()) : world;
}

namespace {
/// One simulated step: the two streams' clocks and what each op adds to the
/// result, op by op in program order (the model: the file's first comment).
class StepSimulation {
public:
  StepSimulation(const Simulator &sim, const ClusterSpec &spec, ModuleOp module)
      : sim(sim), spec(spec), module(module),
        world(groupSize(module, Group::World).value_or(1)),
        shardSize(groupSize(module, Group::Shard).value_or(world)),
        tp(groupSize(module, Group::Tensor).value_or(1)),
        slowdown(spec.oversubscription(jobWorld(module, world))) {}

  FailureOr<SimResult> run(func::FuncOp fn) {
    begin(fn);
    FailureOr<bool> done = advance();
    if (failed(done))
      return failure();
    if (!*done) // a stage's transfer simulated alone (no peers)
      return position()->emitError()
             << "a point-to-point transfer can only be simulated with the "
                "other pipeline stages";
    return end();
  }

  /// Starts the step: the clock after the step's inputs.
  void begin(func::FuncOp f) {
    ioOut = stepInputsAndOutputs(f);
    next = f.getBody().front().begin();
  }
  Operation *position() const {
    return next->hasTrait<OpTrait::IsTerminator>() ? nullptr : &*next;
  }
  FailureOr<SimResult> end() {
    gatherPersistent();
    if (failed(finish(ioOut)))
      return failure();
    return std::move(r);
  }

  /// Simulates ops until the end of the step (true) or a wait on a
  /// transfer the peer stage has not issued yet (false).
  FailureOr<bool> advance() {
    for (; !next->hasTrait<OpTrait::IsTerminator>(); ++next) {
      Operation &op = *next;
      std::optional<std::pair<double, double>> transfer;
      // Every op is one instruction the host issues (dispatch_overhead_s).
      double dispatch = stretch(tc, spec.dispatchOverhead);
      if (auto wait = dyn_cast<WaitOp>(op); wait && peers)
        if (Operation *p2p = wait.getToken().getDefiningOp();
            isa_and_nonnull<SendOp, RecvOp>(p2p)) {
          transfer = peers->completion(p2p, tc + dispatch);
          if (!transfer)
            return false;
        }
      work(tc, dispatch);
      tc += dispatch;
      r.hostTime += dispatch;
      double operandsReady = 0;
      for (Value v : op.getOperands())
        operandsReady = std::max(operandsReady, ready.lookup(v));
      if (isa<AllGatherOp, ReduceScatterOp, AllReduceOp>(&op))
        collective(&op, operandsReady);
      else if (std::optional<TensorCollective> c = tensorCollectiveOf(&op))
        tensorCollective(&op, *c, operandsReady);
      else if (transfer) {
        inFlight.erase(cast<WaitOp>(op).getToken().getDefiningOp());
        waitForTransfer(cast<WaitOp>(op), *transfer);
      } else if (auto wait = dyn_cast<WaitOp>(op)) {
        inFlight.erase(wait.getToken().getDefiningOp());
        waitFor(wait, operandsReady);
      } else if (peers && isa<SendOp, RecvOp>(op)) {
        peers->issued(&op, std::max(tc, operandsReady));
        inFlight.insert(&op);
        if (auto send = dyn_cast<SendOp>(op))
          r.p2pBytes += bufferBytes(send.getInput());
      } else if (failed(compute(&op, operandsReady)))
        return failure();
      progressYields(op);
    }
    return true;
  }

  /// A wait on a transfer between stages that ends at `transfer.first`
  /// after `transfer.second` seconds: up to its duration the stall is the
  /// transfer's (exposed p2p), the rest is waiting for the peer stage.
  void waitForTransfer(WaitOp wait, std::pair<double, double> transfer) {
    auto [done, dur] = transfer;
    Operation *p2p = wait.getToken().getDefiningOp();
    if (isa<RecvOp>(p2p)) {
      r.p2pTime += dur;
      r.events.push_back({nameWithUnit(p2p), 3, done - dur, dur, 0,
                          bufferBytes(wait.getResult())});
    }
    double stall = std::max(0.0, done - tc);
    if (stall > 0)
      r.events.push_back({"wait " + nameWithUnit(p2p), 0, tc, stall, 0, 0});
    r.p2pExposed += std::min(stall, dur);
    r.p2pStall += stall - std::min(stall, dur);
    tc += stall;
    ready[wait.getResult()] = tc;
  }

  P2PPeers *peers = nullptr;
  const CoreShare *cores = nullptr;

private:
  /// Seconds that `work` seconds of a rank with a core to itself take from
  /// `start` on: the node's cores as the other stages leave them (cores),
  /// else the constant oversubscription slowdown.
  double stretch(double start, double work) const {
    if (work <= 0)
      return 0;
    return cores ? cores->end(start, work) - start : work * slowdown;
  }
  /// After an instruction, the runtime's progress test of the requests in
  /// flight: on an oversubscribed node a test that moves nothing yields the
  /// core (ClusterSpec::progressYield), once per instruction issued while an
  /// async FSDP collective or a transfer between stages is in flight
  /// (issued, not yet waited: what the step plan's progress actions test).
  void progressYields(Operation &op) {
    if (spec.progressYield <= 0 || slowdown <= 1 ||
        op.hasTrait<OpTrait::ConstantLike>())
      return;
    if (inFlight.empty())
      return;
    double y = stretch(tc, spec.progressYield);
    r.events.push_back({"host: progress yield", 0, tc, y, 0, 0});
    work(tc, y);
    tc += y;
    r.hostTime += y;
    r.yieldTime += y;
  }

  /// The compute stream works (takes a core) for `dur` seconds from `start`.
  void work(double start, double dur) {
    if (dur <= 0)
      return;
    if (!r.busy.empty() && r.busy.back().second >= start)
      r.busy.back().second = std::max(r.busy.back().second, start + dur);
    else
      r.busy.push_back({start, start + dur});
  }

  /// The step's host inputs enter the runtime before its first instruction
  /// and its host outputs leave after the last (step_io_bandwidth): the data
  /// and the step number in, the loss (and any other output that is not
  /// training state) out. The training state stays resident on the device.
  /// Starts the clock after the inputs; returns the outputs' time.
  /// Starts the clock after the inputs; returns the outputs' time (with
  /// `cores`: their work, stretched when the step ends, finish).
  double stepInputsAndOutputs(func::FuncOp fn) {
    double ioIn = 0, ioOut = 0, k = cores ? 1.0 : slowdown;
    if (spec.stepIoBandwidth > 0) {
      for (BlockArgument a : fn.getArguments())
        if (fn.getArgAttr(a.getArgNumber(), nn::kDataAttr) ||
            fn.getArgAttr(a.getArgNumber(), nn::kStepAttr) ||
            fn.getArgAttr(a.getArgNumber(), nn::kTotalStepsAttr))
          ioIn += k * bufferBytes(a) / spec.stepIoBandwidth;
      for (auto [i, v] :
           llvm::enumerate(fn.getBody().front().getTerminator()->getOperands()))
        if (!fn.getResultAttr(i, kRoleAttr))
          ioOut += k * bufferBytes(v) / spec.stepIoBandwidth;
    }
    if (cores)
      ioIn = stretch(0, ioIn);
    if (ioIn > 0)
      r.events.push_back({"host: step inputs", 0, 0, ioIn, 0, 0});
    work(0, ioIn);
    tc = ioIn;
    r.hostTime = cores ? ioIn : ioIn + ioOut;
    return ioOut;
  }

  /// The op's name, and its unit's (`fsdp.all_gather @h.0`).
  static std::string nameWithUnit(Operation *op) {
    std::string name = op->getName().getStringRef().str();
    if (auto unit = op->getAttrOfType<FlatSymbolRefAttr>("unit"))
      name += " @" + unit.getValue().str();
    return name;
  }

  /// The element counts and FQNs of the parameters of `op`'s FSDP unit (its
  /// fsdp.unit's shapes and params) when the spec's stack prices a unit's
  /// collectives by its parameters; empty otherwise or without a unit.
  std::pair<SmallVector<int64_t>, SmallVector<StringRef>>
  unitParams(Operation *op) const {
    std::pair<SmallVector<int64_t>, SmallVector<StringRef>> out;
    auto ref = op->getAttrOfType<FlatSymbolRefAttr>("unit");
    if (!(spec.stack.perParamCollectives || spec.stack.regatherForRecompute) ||
        !ref)
      return out;
    auto unit = SymbolTable::lookupNearestSymbolFrom<UnitOp>(op, ref);
    if (!unit)
      return out;
    for (Attribute a : unit.getShapes()) {
      int64_t n = 1;
      for (int64_t d : cast<DenseI64ArrayAttr>(a).asArrayRef())
        n *= d;
      out.first.push_back(n);
    }
    for (Attribute a : unit.getParams())
      out.second.push_back(cast<StringAttr>(a).getValue());
    return out;
  }

  /// SimStack.h's recomputeOrder of `region` in the module holding `op`'s
  /// units, computed once per region.
  const RecomputeOrder &recomputeOrderOf(Operation *op, StringAttr region) {
    auto it = recomputeOrderMap.find(region);
    if (it == recomputeOrderMap.end())
      it = recomputeOrderMap
               .try_emplace(region,
                            recomputeOrder(SymbolTable::getNearestSymbolTable(
                                               op->getParentOp()),
                                           region.getValue()))
               .first;
    return it->second;
  }

  /// Host work on the compute stream from its clock on (`what` in the
  /// trace): `seconds` of a rank with a core to itself; device work that
  /// blocks the stream when `host` is false (not counted as host time).
  void hostWork(const std::string &what, double seconds, bool host = true) {
    double h = stretch(tc, seconds);
    if (h <= 0)
      return;
    r.events.push_back({what, 0, tc, h, 0, 0});
    work(tc, h);
    tc += h;
    r.hostTime += host ? h : 0.0;
  }

  /// A unit's parameters under the stack's persistence threshold, counted
  /// once per unit at its first all-gather, for the gather after the step
  /// (stack.persistent_gather): their number and full bytes, and the group.
  void notePersistent(Operation *op, ArrayRef<int64_t> numels, int64_t bytes,
                      int64_t g, int64_t stride, bool hierarchical) {
    auto ref = op->getAttrOfType<FlatSymbolRefAttr>("unit");
    if (!spec.stack.persistentGather || !isa<AllGatherOp>(op) || !ref ||
        !persistentSeen.insert(ref.getAttr()).second)
      return;
    double total = 0, kept = 0;
    for (int64_t n : numels) {
      total += double(n);
      if (double(n) < spec.stack.persistenceThreshold) {
        kept += double(n);
        ++persistent.params;
      }
    }
    if (total > 0)
      persistent.bytes += std::llround(double(bytes) * kept / total);
    persistent.g = g;
    persistent.stride = stride;
    persistent.hierarchical = hierarchical;
  }

  /// A collective on the communication stream, issued at its place.
  void collective(Operation *op, double operandsReady) {
    Value in = op->getOperand(0), out = op->getResult(0);
    Group group = collectiveGroup(op);
    int64_t g = groupSize(op, group).value_or(world);
    // r = (replica·S + shard)·T + t: the shard group's ranks lie T apart,
    // the replicate group's S·T.
    int64_t stride = group == Group::Replicate ? shardSize * tp
                     : group == Group::Shard   ? tp
                                               : 1;
    int64_t bytes = isa<AllGatherOp>(op) ? bufferBytes(out) : bufferBytes(in);
    CollectiveKind kind = isa<AllGatherOp>(op) ? CollectiveKind::AllGather
                          : isa<ReduceScatterOp>(op)
                              ? CollectiveKind::ReduceScatter
                              : CollectiveKind::AllReduce;
    auto [numels, fqns] = unitParams(op);
    bool hierarchical = group == Group::Replicate;
    StringAttr region;
    if (spec.stack.regatherForRecompute && isa<AllGatherOp>(op))
      region = recomputeRegionFed(op);
    StackCollective price =
        priceUnitCollective(sim, spec.stack, kind, bytes, numels, fqns, g,
                            stride, hierarchical, static_cast<bool>(region),
                            region ? &recomputeOrderOf(op, region) : nullptr);
    notePersistent(op, numels, bytes, g, stride, hierarchical);
    // The stack's per-rank loops run on the host before the collective.
    if (price.hostSeconds > 0)
      hostWork("host: stack loops " + nameWithUnit(op), price.hostSeconds);
    // Its serial buffer passes, then the collective (SimStack.h).
    hostWork("stack passes " + nameWithUnit(op), price.serialSeconds, false);
    double dur = price.seconds;
    if (g > 1)
      dur += spec.collectiveSync * double(price.calls);
    double start = std::max({tc, tm, operandsReady});
    dur = stretch(start, dur);
    tm = start + dur;
    // The share of the transfer that cannot overlap occupies the compute
    // stream from its issue (comm_overlap).
    if (double c = (1 - spec.commOverlap) * dur; c > 0) {
      r.events.push_back({"host: " + nameWithUnit(op), 0, tc, c, 0, 0});
      work(tc, c);
      tc += c;
    }
    r.commTime += dur;
    if (op->hasAttr("async")) // else waited where its result is read
      inFlight.insert(op);
    if (spec.commContention > 0 && dur > 0)
      commBusy.push_back({start, tm});
    ready[out] = tm;
    durationOf[op] = dur;
    if (isa<AllGatherOp>(op) && firstGather < 0)
      std::tie(firstGather, firstSpan) = std::tuple(dur, std::pair(start, tm));
    if (isa<ReduceScatterOp, AllReduceOp>(op)) {
      // HSDP's replicate all-reduce continues the same unit's reduce-scatter.
      auto chainedFrom =
          skipWait(op->getOperand(0)).getDefiningOp<ReduceScatterOp>();
      lastReduce = dur + (chainedFrom ? durationOf.lookup(chainedFrom) : 0.0);
    }
    r.events.push_back({nameWithUnit(op), 1, start, dur, 0, bytes});
  }

  /// The stack's gather of the persistent parameters after the optimizer
  /// step (stack.persistent_gather; persistentGatherCost): its host loops on
  /// the compute stream after the step's last op, then the collective.
  void gatherPersistent() {
    StackCollective c = persistentGatherCost(
        sim, spec.stack, persistent.params, persistent.bytes, persistent.g,
        persistent.stride, persistent.hierarchical);
    if (c.calls == 0)
      return;
    hostWork("host: stack loops persistent gather", c.hostSeconds);
    double start = std::max(tc, tm);
    double dur = stretch(start, c.seconds + spec.collectiveSync);
    tm = start + dur;
    r.commTime += dur;
    r.events.push_back(
        {"fsdp.all_gather persistent", 1, start, dur, 0, persistent.bytes});
  }

  /// A tensor-parallel collective: T adjacent ranks (stride 1), on its own
  /// FIFO, and the compute stream blocks until it is done (the model: the
  /// file's first comment).
  void tensorCollective(Operation *op, const TensorCollective &c,
                        double operandsReady) {
    CollectiveKind kind = c.kind == TensorCollective::AllGather
                              ? CollectiveKind::AllGather
                          : c.kind == TensorCollective::ReduceScatter
                              ? CollectiveKind::ReduceScatter
                              : CollectiveKind::AllReduce;
    double dur = c.calls * sim.collectiveTime(kind, c.bytes / c.calls,
                                              c.groupSize, /*stride=*/1,
                                              /*hierarchical=*/false);
    // The op's calls are issued back to back with nothing between them
    // (the runtime's lowerSp), so the ranks' skew is met once per op.
    if (c.groupSize > 1)
      dur += spec.collectiveSync;
    double start = std::max({tc, tt, operandsReady});
    dur = stretch(start, dur);
    tt = start + dur;
    r.tpTime += dur;
    r.tpBytes += c.bytesPerRank();
    ready[op->getResult(0)] = tt;
    r.events.push_back(
        {op->getName().getStringRef().str(), 2, start, dur, 0, c.bytes});
    if (op->hasAttr(nn::kSpRegatherAttr)) {
      // Sequence parallelism's backward re-gather is issued before the
      // grad-input GEMMs and waited at the weight gradient that reads it
      // (Megatron-LM's async all-gather in
      // LinearWithGradAccumulationAndAsyncCommunication.backward; the
      // runtime waits at the first reader): compute() stalls there. The
      // share that cannot overlap (comm_overlap) occupies the compute
      // stream from its issue, as an FSDP collective's does.
      overlappedTp.insert(op->getResult(0));
      if (double h = (1 - spec.commOverlap) * dur; h > 0) {
        r.events.push_back({"host: " + nameWithUnit(op), 0, tc, h, 0, 0});
        work(tc, h);
        tc += h;
        r.tpExposed += h;
        tpBlocking += h;
      }
      return;
    }
    work(start, dur);
    r.tpExposed += tt - tc;
    tc = tt;
    tpBlocking += dur;
  }

  /// The compute stream blocks until the transfer is complete; the trace
  /// shows the stall on the compute track.
  void waitFor(WaitOp wait, double operandsReady) {
    // A device-wide synchronize at each fetch (stack.sync_at_gather_wait):
    // every collective issued so far, not only this all-gather.
    if (spec.stack.syncAtGatherWait &&
        isa_and_nonnull<AllGatherOp>(wait.getToken().getDefiningOp()))
      operandsReady = std::max(operandsReady, tm);
    if (operandsReady > tc)
      r.events.push_back(
          {"wait " + nameWithUnit(wait.getToken().getDefiningOp()), 0, tc,
           operandsReady - tc, 0, 0});
    tc = std::max(tc, operandsReady);
    ready[wait.getResult()] = operandsReady;
  }

  /// The roofline time of an op with a cost (nn::CostOpInterface):
  /// Simulator::opTime, with the matmul FLOPs counted by dtype for the MFU.
  FailureOr<double> costTime(Operation *op, int64_t &flops, int64_t &bytes) {
    std::string matmulDtype;
    FailureOr<double> t = sim.opTime(op, &flops, &bytes, &matmulDtype);
    if (succeeded(t) && !matmulDtype.empty())
      matmulFlopsByDtype[matmulDtype] += flops;
    return t;
  }

  /// An op on the compute stream: an nn op (roofline), a copy (flatten,
  /// local_shard, pack, unpack: bytes only), or bookkeeping (no time).
  LogicalResult compute(Operation *op, double operandsReady) {
    double dur = 0;
    int64_t flops = 0, bytes = 0;
    if (isa<nn::CostOpInterface>(op)) {
      FailureOr<double> t = costTime(op, flops, bytes);
      if (failed(t))
        return failure();
      dur = *t;
    } else if (isa<FlattenOp, LocalShardOp, PackOp, UnpackOp>(op)) {
      for (Value v : op->getOperands())
        bytes += bufferBytes(v);
      for (Value v : op->getResults())
        bytes += bufferBytes(v);
      std::string name = op->getName().getStringRef().str();
      auto it = spec.opEfficiency.find(name);
      auto call = spec.opCallSeconds.find(name);
      dur = (call != spec.opCallSeconds.end() ? call->second : 0.0) +
            bytes /
                (spec.memoryBandwidth *
                 (it != spec.opEfficiency.end() ? it->second : spec.effMemory));
    } else {
      // Views and bookkeeping (param_view, free, constants): no time; a view
      // of a collective's result is ready when the collective is.
      for (Value v : op->getResults())
        if (operandsReady > 0)
          ready[v] = operandsReady;
      return success();
    }
    // The wait for an overlapped tensor-parallel collective is its exposed
    // time.
    double tpReady = 0;
    for (Value v : op->getOperands())
      if (overlappedTp.contains(v))
        tpReady = std::max(tpReady, ready.lookup(v));
    r.tpExposed += std::max(0.0, tpReady - tc);
    double start = std::max(tc, operandsReady);
    dur = stretch(start, dur);
    // Slower while a collective is in flight (comm_contention).
    llvm::erase_if(commBusy, [&](auto &b) { return b.second <= start; });
    double end = contendedEnd(commBusy, start, dur, spec.commContention);
    firstFilled += std::max(0.0, std::min(end, firstSpan.second) -
                                     std::max(start, firstSpan.first));
    if (spec.commContention > 0)
      r.contentionTime += end - start - dur;
    work(start, end - start);
    tc = end;
    r.computeTime += dur;
    r.flops += flops;
    bool recompute = op->hasAttr(nn::kRecomputeAttr);
    if (recompute) {
      r.recomputeFlops += flops;
      r.recomputeTime += dur;
    }
    r.events.push_back(
        {(recompute ? "recompute " : "") + op->getName().getStringRef().str(),
         0, start, end - start, flops, bytes});
    return success();
  }

  /// The step time, exposed communication, lower bound and MFU.
  LogicalResult finish(double ioOut) {
    r.stepTime = std::max(tc, tm);
    if (cores) {
      ioOut = stretch(r.stepTime, ioOut);
      r.hostTime += ioOut;
    }
    work(r.stepTime, ioOut);
    if (ioOut > 0)
      r.events.push_back({"host: step outputs", 0, r.stepTime, ioOut, 0, 0});
    r.stepTime += ioOut;
    if (!std::isfinite(r.stepTime))
      return module.emitError()
             << "the cluster spec's values make the predicted step time "
                "overflow (check its rates, efficiencies and overheads)";
    r.exposedComm =
        std::max(0.0, r.stepTime - r.computeTime - r.contentionTime -
                          r.hostTime - r.tpExposed - r.p2pExposed - r.p2pStall);
    r.firstGatherTime = std::max(firstGather, 0.0);
    r.lastReduceTime = lastReduce;
    // Besides the ops, the compute stream must do the host work and the
    // collectives' non-overlappable share, and it cannot run an op before the
    // first gather is done nor the last update before the last reduction;
    // only host work and other collectives' shares can fill those waits.
    double o = spec.commOverlap;
    r.lowerBound = std::max(
        r.computeTime + tpBlocking +
            std::max(r.hostTime + (1 - o) * r.commTime,
                     r.firstGatherTime - firstFilled + r.lastReduceTime),
        r.commTime);
    r.mfuDtype = "f32";
    int64_t most = -1;
    for (auto &[dtype, f] : matmulFlopsByDtype)
      if (f > most) {
        most = f;
        r.mfuDtype = dtype;
      }
    r.peakFlops = spec.peakFlops.at(r.mfuDtype);
    r.mfu = r.stepTime > 0
                ? (r.flops - r.recomputeFlops) / (r.stepTime * r.peakFlops)
                : 0;
    return success();
  }

  const Simulator &sim;
  const ClusterSpec &spec;
  ModuleOp module;
  int64_t world, shardSize, tp;
  /// Every time of a rank is this many times longer when its node's ranks
  /// outnumber the cores (ClusterSpec::oversubscription), unless `cores`
  /// says how the node's cores are shared at each instant.
  double slowdown;
  SimResult r;
  double tc = 0, tm = 0; // the compute and communication streams' clocks
  double tt = 0;         // the tensor-parallel collectives' clock
  /// The tensor-parallel seconds the compute stream cannot overlap (the
  /// lower bound's): all of a blocking one's, the host share of another's.
  double tpBlocking = 0;
  llvm::DenseSet<Value> overlappedTp; // results waited at their reader
  double firstGather = -1, lastReduce = 0, firstFilled = 0;
  std::pair<double, double> firstSpan{0, 0};       // the first all-gather's
  std::vector<std::pair<double, double>> commBusy; // collectives in flight
  /// Async FSDP collectives and transfers between stages issued and not yet
  /// waited: what the runtime's progress tests test.
  llvm::SmallPtrSet<Operation *, 8> inFlight;
  double ioOut = 0;
  Block::iterator next;                // the next op advance() simulates
  llvm::DenseMap<Value, double> ready; // when a collective's result is
  llvm::DenseMap<Operation *, double> durationOf;
  /// The stack's persistent parameters (notePersistent) and the units
  /// counted.
  struct {
    int64_t params = 0, bytes = 0, g = 1, stride = 1;
    bool hierarchical = false;
  } persistent;
  llvm::DenseSet<Attribute> persistentSeen;
  /// recomputeOrderOf's regions.
  llvm::DenseMap<StringAttr, RecomputeOrder> recomputeOrderMap;
  std::map<std::string, int64_t> matmulFlopsByDtype;
};
} // namespace

FailureOr<SimResult> Simulator::run(ModuleOp module) const {
  FailureOr<func::FuncOp> fn = getStepFunction(module);
  if (failed(fn))
    return failure();
  return StepSimulation(*this, spec, module).run(*fn);
}

struct StageSimulation::Impl {
  Impl(const Simulator &sim, const ClusterSpec &spec, ModuleOp module)
      : step(sim, spec, module) {}
  StepSimulation step;
};
StageSimulation::StageSimulation(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}
StageSimulation::~StageSimulation() = default;
FailureOr<bool> StageSimulation::advance() { return impl->step.advance(); }
Operation *StageSimulation::position() const { return impl->step.position(); }
FailureOr<SimResult> StageSimulation::finish() { return impl->step.end(); }

FailureOr<std::unique_ptr<StageSimulation>>
Simulator::start(ModuleOp stage, P2PPeers &peers,
                 const CoreShare *cores) const {
  FailureOr<func::FuncOp> fn = getStepFunction(stage);
  if (failed(fn))
    return failure();
  auto impl = std::make_unique<StageSimulation::Impl>(*this, spec, stage);
  impl->step.peers = &peers;
  impl->step.cores = cores;
  impl->step.begin(*fn);
  return std::unique_ptr<StageSimulation>(new StageSimulation(std::move(impl)));
}
