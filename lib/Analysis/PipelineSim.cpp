//===- PipelineSim.cpp - the pipeline stages simulated against each other -===//
//
// The model (issue 23; docs/pipeline-parallel.md, "Simulator and sweep"):
//
// * One rank per stage stands for the stage's N/P ranks (a stage is one SPMD
//   program). Each stage's program runs on its own streams exactly as
//   Simulator::run simulates one step; the stages run at once.
// * A transfer (fsdp.send on stage s, fsdp.recv with the same tag on its
//   peer) starts when both sides have issued it — a rendezvous: MPI's for
//   messages above the eager limit, and ncclSend / ncclRecv, which match in
//   their group — and takes p2pTransferTime on the link the two stages span.
//   Both sides' waits complete when it ends. With comm_overlap < 1 (the
//   host's cores copy: MPI over shared memory with no progress thread) the
//   (1 − comm_overlap) share of the transfer cannot happen before the
//   receiver is in its wait, so it ends no earlier than the receiver's wait
//   plus that share. Transfers do not contend with each other or with the
//   stage's collectives (a separate communicator; within one direction of a
//   link, the GPipe / 1F1B schedules send one micro-batch per forward or
//   backward, so two transfers rarely overlap).
// * The stages are advanced in turn, each until it waits on a transfer whose
//   peer has not issued its side, so any order of a stage's ops simulates
//   (GPipe, 1F1B, interleaved); when no stage can advance, the programs
//   deadlock, which is an error.
// * The step ends when the last stage is done. A stage's idle time is the
//   time its compute stream waits on transfers between stages (for the
//   other stages to compute, and for the transfers themselves: what a
//   runtime profile sees as idle) plus its tail; its bubble fraction is
//   idle / (step − idle) (Narayanan et al., SC'21, §2.2: t_pb / t_id =
//   (P−1)/m for GPipe and 1F1B with equal stages and free transfers; slow
//   transfers lengthen the ramp and are exposed in steady state, so the
//   bubble grows). Nothing of that formula is used here: it is what a test
//   compares against. The exposed p2p time (the part of the waits that is
//   the transfers' own) is reported beside it, part of it.
// * Oversubscribed CPU nodes (more ranks on a node than cores_per_node,
//   waiting_rank_share φ < 1): a node's C cores are shared at each instant
//   among its ranks (processor sharing, Kleinrock 1967; Linux's fair
//   scheduler gives runnable tasks equal shares): with k ranks working
//   (ops, host work, collective copies: SimResult::busy) and w waiting
//   (in a bubble or on a transfer; Open MPI's progress loop polls and
//   yields), a working rank runs at min(1, C / (k + φ·w)) of its rate with
//   a core to itself. A stage's ranks work and wait together (SPMD). Which
//   ranks work when is what the simulation computes, so it is iterated to
//   a fixed point: the first pass takes the constant slowdown
//   (ClusterSpec::oversubscription, what φ = 1 gives throughout), each
//   next pass times every stage against the other stages' busy intervals
//   of the pass before (NodeCores), until the step moves by less than
//   1e-6 of itself (at most kSharingPasses passes; the last is taken).
//   Transfers between stages keep the constant slowdown (a rendezvous of
//   two ranks, microseconds here). fsdp-calibrate writes φ, measured with
//   two ranks pinned to one core beside the hand-over of the core at a
//   progress test (ClusterSpec::progressYield) that comes with it.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/PipelineSim.h"
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Dialect/FSDP/FSDP.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;

SmallVector<ModuleOp> mlir::fsdp::pipelineStages(ModuleOp module) {
  SmallVector<ModuleOp> stages;
  if (!module->hasAttr(kPipelineStagesAttr))
    return stages;
  for (ModuleOp stage : module.getOps<ModuleOp>())
    stages.push_back(stage);
  llvm::sort(stages, [](ModuleOp a, ModuleOp b) {
    auto index = [](ModuleOp m) {
      auto s = m->getAttrOfType<IntegerAttr>(kPipelineStageAttr);
      return s ? s.getInt() : int64_t(0);
    };
    return index(a) < index(b);
  });
  return stages;
}

bool mlir::fsdp::p2pCrossesNodes(const ClusterSpec &spec, int64_t world,
                                 int64_t stages, int64_t from, int64_t to) {
  int64_t n = std::max<int64_t>(1, world / std::max<int64_t>(1, stages));
  int64_t dpn = std::max<int64_t>(1, spec.devicesPerNode);
  for (int64_t r = from * n; r < (from + 1) * n; ++r)
    if (r / dpn != (r + (to - from) * n) / dpn)
      return true;
  return false;
}

double mlir::fsdp::p2pTransferTime(const ClusterSpec &spec, int64_t bytes,
                                   int64_t world, int64_t stages, int64_t from,
                                   int64_t to) {
  double slowdown = spec.oversubscription(world);
  if (!p2pCrossesNodes(spec, world, stages, from, to)) {
    if (spec.intraCurves && spec.intraCurves->has(CollectiveKind::SendRecv))
      return slowdown *
             spec.intraCurves->time(CollectiveKind::SendRecv, bytes, 2);
    return slowdown * (spec.intraLatency + double(bytes) / spec.intraBandwidth);
  }
  if (spec.interCurves && spec.interCurves->has(CollectiveKind::SendRecv))
    return slowdown *
           spec.interCurves->time(CollectiveKind::SendRecv, bytes, 2);
  double bw = spec.interBandwidth;
  if (spec.nicsPerNode > 0) {
    // The node's senders at once: the stage's ranks in it.
    double k = double(std::min<int64_t>(
        std::max<int64_t>(1, world / std::max<int64_t>(1, stages)),
        std::max<int64_t>(1, spec.devicesPerNode)));
    bw *= std::min(1.0, double(spec.nicsPerNode) / k);
  }
  return slowdown * (spec.interLatency + double(bytes) / bw);
}

namespace {
/// The transfers of one simulated pipeline step, by (sender stage, receiver
/// stage, tag): when each side issued it and when the receiver waits.
class Transfers {
public:
  Transfers(const ClusterSpec &spec, int64_t world, int64_t stages)
      : spec(spec), world(world), stages(stages) {}

  /// The view of stage `s` (P2PPeers).
  class Peers : public P2PPeers {
  public:
    Peers(Transfers &t, int64_t stage) : t(t), stage(stage) {}
    void issued(Operation *op, double time) override {
      Side &side = t.sideOf(op, stage);
      (isa<SendOp>(op) ? side.sendAt : side.recvAt) = time;
      if (auto send = dyn_cast<SendOp>(op))
        side.bytes = bufferBytes(send.getInput());
    }
    std::optional<std::pair<double, double>>
    completion(Operation *op, double waitTime) override {
      Side &side = t.sideOf(op, stage);
      if (isa<RecvOp>(op) && !side.recvWaitAt)
        side.recvWaitAt = waitTime;
      double hostShare = 1 - t.spec.commOverlap;
      if (!side.sendAt || !side.recvAt || (hostShare > 0 && !side.recvWaitAt))
        return std::nullopt;
      double dur = p2pTransferTime(t.spec, side.bytes, t.world, t.stages,
                                   side.from, side.to);
      double done = std::max(*side.sendAt, *side.recvAt) + dur;
      if (hostShare > 0)
        done = std::max(done, *side.recvWaitAt + hostShare * dur);
      return std::make_pair(done, dur);
    }

  private:
    Transfers &t;
    int64_t stage;
  };

private:
  struct Side {
    int64_t from = 0, to = 0, bytes = 0;
    std::optional<double> sendAt, recvAt, recvWaitAt;
  };
  Side &sideOf(Operation *op, int64_t stage) {
    int64_t peer, tag;
    if (auto send = dyn_cast<SendOp>(op)) {
      peer = send.getPeer();
      tag = send.getTag();
    } else {
      auto recv = cast<RecvOp>(op);
      peer = recv.getPeer();
      tag = recv.getTag();
    }
    bool sending = isa<SendOp>(op);
    int64_t from = sending ? stage : peer, to = sending ? peer : stage;
    Side &side = sides[{from, to, tag}];
    side.from = from;
    side.to = to;
    return side;
  }

  const ClusterSpec &spec;
  int64_t world, stages;
  std::map<std::tuple<int64_t, int64_t, int64_t>, Side> sides;
};

int64_t intAttr(Operation *op, StringRef name, int64_t otherwise) {
  auto a = op->getAttrOfType<IntegerAttr>(name);
  return a ? a.getInt() : otherwise;
}

/// Passes of the fixed point at most (the model: the file's first comment).
constexpr int kSharingPasses = 50;

/// The cores of the node of stage `self`'s first rank as the other stages'
/// ranks there use them (the busy intervals of the pass before): a
/// piecewise-constant rate, min(1, C / (k + φ·w)) for k working ranks (the
/// stage's own, working when it asks, and the other stages' busy ones) and w
/// = ranks on the node − k waiting.
class NodeCores : public CoreShare {
public:
  NodeCores(const ClusterSpec &spec, int64_t world, int64_t stages,
            int64_t self, ArrayRef<SimResult> others) {
    int64_t n = std::max<int64_t>(1, world / std::max<int64_t>(1, stages));
    int64_t dpn = std::max<int64_t>(1, spec.devicesPerNode);
    int64_t node = self * n / dpn, lo = node * dpn, hi = lo + dpn;
    auto onNode = [&](int64_t s) {
      return std::max<int64_t>(0,
                               std::min(hi, (s + 1) * n) - std::max(lo, s * n));
    };
    int64_t ranks = std::min(world, hi) - lo;
    // Other stages' working ranks on the node: +m at a busy interval's
    // begin, -m at its end.
    std::vector<std::pair<double, int64_t>> edges;
    for (auto [s, sim] : llvm::enumerate(others))
      if (int64_t m = onNode(s); m > 0 && int64_t(s) != self)
        for (auto [b, e] : sim.busy) {
          edges.push_back({b, m});
          edges.push_back({e, -m});
        }
    llvm::sort(edges);
    double cores = double(spec.coresPerNode), phi = spec.waitingRankShare;
    auto rate = [&](int64_t working) {
      double k = double(onNode(self) + working);
      return std::min(1.0, cores / (k + phi * double(ranks - k)));
    };
    int64_t working = 0;
    segments.push_back({-INFINITY, rate(0)});
    for (auto [t, d] : edges) {
      working += d;
      if (segments.back().first == t)
        segments.back().second = rate(working);
      else
        segments.push_back({t, rate(working)});
    }
  }

  double end(double start, double work) const override {
    // The segment holding `start`, then rate by rate until the work is done.
    auto it = std::prev(llvm::upper_bound(
        segments, start, [](double t, const std::pair<double, double> &s) {
          return t < s.first;
        }));
    double t = start;
    for (; std::next(it) != segments.end(); ++it) {
      double until = std::next(it)->first, doable = (until - t) * it->second;
      if (work <= doable)
        return t + work / it->second;
      work -= doable;
      t = until;
    }
    return t + work / it->second;
  }

private:
  /// (from, rate): the rate from `from` (s) to the next segment's.
  std::vector<std::pair<double, double>> segments;
};
} // namespace

/// One pass: the stage programs advanced against each other, each stage's
/// times stretched by cores[s] (none: the constant slowdown).
static FailureOr<std::vector<SimResult>>
simulateStages(const Simulator &sim, const ClusterSpec &spec, ModuleOp module,
               ArrayRef<ModuleOp> stageModules, int64_t world,
               ArrayRef<NodeCores> cores) {
  const int64_t p = static_cast<int64_t>(stageModules.size());
  Transfers transfers(spec, world, p);
  std::vector<std::unique_ptr<Transfers::Peers>> peers;
  std::vector<std::unique_ptr<StageSimulation>> runs;
  for (auto [s, stage] : llvm::enumerate(stageModules)) {
    peers.push_back(std::make_unique<Transfers::Peers>(transfers, s));
    FailureOr<std::unique_ptr<StageSimulation>> run =
        sim.start(stage, *peers.back(), cores.empty() ? nullptr : &cores[s]);
    if (failed(run))
      return failure();
    runs.push_back(std::move(*run));
  }
  // Each stage in turn until it blocks; a round without progress is a
  // deadlock.
  std::vector<bool> done(p, false);
  for (int64_t left = p; left > 0;) {
    bool progress = false;
    for (int64_t s = 0; s < p; ++s) {
      if (done[s])
        continue;
      Operation *before = runs[s]->position();
      FailureOr<bool> finished = runs[s]->advance();
      if (failed(finished))
        return failure();
      if (*finished) {
        done[s] = true;
        --left;
      }
      progress |= *finished || runs[s]->position() != before;
    }
    if (left > 0 && !progress) {
      InFlightDiagnostic diag =
          module.emitError()
          << "the pipeline stages' programs deadlock: every unfinished stage "
             "waits on a transfer its peer never issues";
      for (int64_t s = 0; s < p; ++s)
        if (!done[s]) {
          Operation *at = runs[s]->position();
          Diagnostic &note = diag.attachNote(at->getLoc());
          note << "stage " << s << " waits here";
          if (auto wait = dyn_cast<WaitOp>(at)) {
            Operation *p2p = wait.getToken().getDefiningOp();
            if (auto send = dyn_cast_or_null<SendOp>(p2p))
              note << " on its send to stage " << send.getPeer() << " tag "
                   << send.getTag();
            else if (auto recv = dyn_cast_or_null<RecvOp>(p2p))
              note << " on its receive from stage " << recv.getPeer() << " tag "
                   << recv.getTag();
          }
        }
      return diag;
    }
  }
  std::vector<SimResult> results;
  for (auto &run : runs) {
    FailureOr<SimResult> res = run->finish();
    if (failed(res))
      return failure();
    results.push_back(std::move(*res));
  }
  return results;
}

FailureOr<PipelineSimResult>
mlir::fsdp::simulatePipeline(const ClusterSpec &spec, ModuleOp module) {
  SmallVector<ModuleOp> stageModules = pipelineStages(module);
  if (stageModules.empty())
    return module.emitError() << "expects a pipeline-parallel module (nested "
                                 "@stage modules, fsdp-pipeline pp > 1)";
  if (failed(checkEveryStagePlanned(module)))
    return failure();
  const int64_t p = static_cast<int64_t>(stageModules.size());
  PipelineSimResult r;
  r.worldSize = intAttr(module, kWorldSizeAttr, p);
  r.microBatches = intAttr(stageModules.front(), kPipelineMicroBatchesAttr, 1);
  if (auto s = stageModules.front()->getAttrOfType<StringAttr>(
          kPipelineScheduleAttr))
    r.schedule = s.getValue().str();
  Simulator sim(spec);
  // Processor sharing on oversubscribed nodes (the model: the file's first
  // comment): passes to a fixed point; else one pass.
  bool sharing = spec.coresPerNode > 0 && spec.waitingRankShare != 1 &&
                 spec.oversubscription(r.worldSize) > 1;
  std::vector<SimResult> before;
  for (int pass = 0;; ++pass) {
    std::vector<NodeCores> cores;
    if (!before.empty())
      for (int64_t s = 0; s < p; ++s)
        cores.emplace_back(spec, r.worldSize, p, s, before);
    FailureOr<std::vector<SimResult>> stages =
        simulateStages(sim, spec, module, stageModules, r.worldSize, cores);
    if (failed(stages))
      return failure();
    auto stepOf = [](ArrayRef<SimResult> v) {
      double t = 0;
      for (const SimResult &x : v)
        t = std::max(t, x.stepTime);
      return t;
    };
    bool settled =
        !before.empty() &&
        std::abs(stepOf(*stages) - stepOf(before)) <= 1e-6 * stepOf(before);
    before = std::move(*stages);
    if (!sharing || settled || pass + 1 >= kSharingPasses)
      break;
  }
  for (SimResult &res : before) {
    r.stepTime = std::max(r.stepTime, res.stepTime);
    r.stages.push_back({std::move(res), 0, 0});
  }
  double idle = 0, busy = 0;
  for (StageSimResult &st : r.stages) {
    st.idle =
        st.sim.p2pExposed + st.sim.p2pStall + (r.stepTime - st.sim.stepTime);
    double ideal = r.stepTime - st.idle;
    st.bubble = ideal > 0 ? st.idle / ideal : 0;
    idle += st.idle;
    busy += ideal;
  }
  r.bubble = busy > 0 ? idle / busy : 0;
  return r;
}

FailureOr<json> mlir::fsdp::buildPipelineReport(ModuleOp module,
                                                const ClusterSpec *spec,
                                                PipelineSimResult *simOut) {
  SmallVector<ModuleOp> stageModules = pipelineStages(module);
  if (stageModules.empty())
    return module.emitError() << "expects a pipeline-parallel module";
  if (failed(checkEveryStagePlanned(module)))
    return failure();
  std::optional<PipelineSimResult> sim;
  if (spec) {
    FailureOr<PipelineSimResult> s = simulatePipeline(*spec, module);
    if (failed(s))
      return failure();
    sim = std::move(*s);
  }
  json stages = json::array();
  int64_t params = 0, trainable = 0, tokens = 0;
  size_t busiest = 0;
  for (auto [s, stage] : llvm::enumerate(stageModules)) {
    FailureOr<json> rep = buildPlanReport(stage);
    if (failed(rep))
      return failure();
    json &r = *rep;
    r["stage"] = s;
    params += r.value("params", int64_t(0));
    trainable += r.value("trainable_params", int64_t(0));
    tokens = std::max(tokens, r.value("tokens_per_step", int64_t(0)));
    if (sim) {
      const StageSimResult &st = sim->stages[s];
      addSimulationToReport(r, st.sim, spec->name);
      addAllocatorToReport(r, *spec);
      r["bubble_fraction"] = st.bubble;
      r["idle_s"] = st.idle;
      r["p2p_bytes"] = st.sim.p2pBytes;
      r["p2p_s"] = st.sim.p2pTime;
      r["p2p_exposed_s"] = st.sim.p2pExposed;
      if (st.idle < sim->stages[busiest].idle)
        busiest = s;
    }
    stages.push_back(std::move(r));
  }
  const size_t fattest = fattestStage(stages);
  json top = stages[fattest];
  top.erase("stage");
  int64_t p = static_cast<int64_t>(stageModules.size());
  int64_t world = intAttr(module, kWorldSizeAttr, p);
  top["params"] = params;
  top["trainable_params"] = trainable;
  top["world_size"] = world;
  if (tokens > 0)
    top["tokens_per_step"] = tokens;
  json pipeline = {
      {"stages", p},
      {"schedule", stageModules.front()
                       ->getAttrOfType<StringAttr>(kPipelineScheduleAttr)
                       .getValue()
                       .str()},
      {"micro_batches",
       intAttr(stageModules.front(), kPipelineMicroBatchesAttr, 1)},
      {"peak_stage", fattest}};
  if (sim) {
    const StageSimResult &st = sim->stages[busiest];
    for (const char *k :
         {"bubble_fraction", "idle_s", "p2p_bytes", "p2p_s", "p2p_exposed_s"})
      top.erase(k);
    // The busiest stage's recomputation, which its recompute_s times, not
    // the fattest stage's (they differ when the stages checkpoint
    // differently).
    for (const char *k : {"activation_checkpoint", "recompute_ops",
                          "recompute_flops", "recompute_s"}) {
      top.erase(k);
      if (stages[busiest].contains(k))
        top[k] = stages[busiest][k];
    }
    addSimulationToReport(top, st.sim, spec->name);
    // The pipeline's step; MFU over the mean FLOPs of a rank.
    double flops = 0;
    int64_t p2pBytes = 0;
    double p2pTime = 0, p2pExposed = 0;
    for (const StageSimResult &s : sim->stages) {
      flops += double(s.sim.flops - s.sim.recomputeFlops) / double(p);
      p2pBytes = std::max(p2pBytes, s.sim.p2pBytes);
      p2pTime = std::max(p2pTime, s.sim.p2pTime);
      p2pExposed = std::max(p2pExposed, s.sim.p2pExposed);
    }
    top["predicted_step_time_s"] = sim->stepTime;
    top["step_over_lower_bound"] =
        st.sim.lowerBound > 0 ? sim->stepTime / st.sim.lowerBound : 0.0;
    if (tokens > 0 && sim->stepTime > 0)
      top["predicted_tokens_per_s"] = double(tokens) / sim->stepTime;
    top["mfu"] =
        sim->stepTime > 0 ? flops / (sim->stepTime * st.sim.peakFlops) : 0.0;
    top["bubble_fraction"] = sim->bubble;
    top["bubble_s"] = st.idle;
    top["p2p_bytes"] = p2pBytes;
    top["p2p_s"] = p2pTime;
    top["p2p_exposed_s"] = p2pExposed;
    pipeline["bubble_fraction"] = sim->bubble;
    pipeline["busiest_stage"] = busiest;
    pipeline["p2p_link"] = p > 1 && p2pCrossesNodes(*spec, world, p, 0, 1)
                               ? "inter-node"
                               : "intra-node";
    if (simOut)
      *simOut = std::move(*sim);
  }
  if (json split = pipelineSplitReport(module); !split.is_null())
    pipeline["split"] = std::move(split);
  top["pipeline"] = std::move(pipeline);
  // Each stage's peak (bytes per rank of that stage) and pp-gather decision.
  json peaks = json::array(), gather = json::array();
  for (const json &r : stages) {
    peaks.push_back(r["per_rank"]["peak_bytes"]);
    const json *pp = r.contains("pipeline") ? &r["pipeline"] : nullptr;
    gather.push_back(pp && pp->contains("gather") ? (*pp)["gather"]
                                                  : json(nullptr));
  }
  top["pipeline_stages"] = p;
  top["stage_peak_bytes"] = std::move(peaks);
  top["stage_gather"] = std::move(gather);
  top["stages"] = std::move(stages);
  return top;
}

json mlir::fsdp::pipelineSplitReport(ModuleOp module) {
  auto split = module->getAttrOfType<DictionaryAttr>(kPipelineSplitAttr);
  if (!split)
    return nullptr;
  json j = json::object();
  for (NamedAttribute a : split) {
    std::string k = a.getName().str();
    if (auto v = dyn_cast<DenseI64ArrayAttr>(a.getValue()))
      j[k] = v.asArrayRef().vec();
    else if (auto v = dyn_cast<DenseF64ArrayAttr>(a.getValue()))
      j[k] = v.asArrayRef().vec();
    else if (auto v = dyn_cast<StringAttr>(a.getValue()))
      j[k] = v.str();
    else if (auto v = dyn_cast<IntegerAttr>(a.getValue()))
      j[k] = v.getInt();
  }
  return j;
}

json mlir::fsdp::pipelineChromeTrace(const PipelineSimResult &r,
                                     StringRef clusterName) {
  json events = json::array();
  int64_t n = r.worldSize / std::max<int64_t>(1, r.stages.size());
  for (auto [s, st] : llvm::enumerate(r.stages)) {
    json t = chromeTrace(st.sim, clusterName);
    for (json &e : t["traceEvents"]) {
      e["pid"] = s;
      if (e["name"] == "process_name")
        e["args"]["name"] = "stage " + std::to_string(s) + " (rank " +
                            std::to_string(s * n) + ") on " + clusterName.str();
      events.push_back(std::move(e));
    }
  }
  return json{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}
