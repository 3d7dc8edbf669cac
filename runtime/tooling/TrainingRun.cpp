//===- TrainingRun.cpp - One fsdp-run training run ------------------------===//
//
// The run in the order it happens, one method of TrainingRun per phase: the
// set-up (schedule, data, checkpoint headers, device, executor), the initial
// state (init specs, --init-from, --load), the step's inputs and outputs,
// the learning rate's total steps, the step loop, and the end (--dump-params,
// --save, --export, the summary). The order is what users see: every check
// that can fail without the device runs before the device is set up.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/TrainingRun.h"
#include "PipelineStages.h"
#include "fsdp/tooling/Checkpoint.h"
#include "fsdp/tooling/Data.h"
#include "fsdp/tooling/NonFinite.h"
#include "fsdp/tooling/Preflight.h"
#include "fsdp/tooling/Report.h"
#include "fsdp/tooling/SafeTensors.h"
#include "fsdp/tooling/Watchdog.h"

#include "fsdp/CompiledStep.h"
#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

using fsdp::Error;
using fsdp::rt::AllocMode;
using fsdp::rt::Executor;
using fsdp::rt::HostValues;
using fsdp::schedule::IoDesc;
using fsdp::schedule::Program;

namespace fsdp::tooling {

namespace {

/// Every rank's bytes sent per channel over the steps (`mine`: this rank's),
/// gathered to rank 0 in world rank order (MPI_Gather of the lengths, then
/// MPI_Gatherv of each rank's map as JSON text); empty on the other ranks.
/// Under pipeline parallelism or hybrid layouts the ranks send different
/// bytes (each stage its own units and transfers).
std::vector<std::map<std::string, int64_t>>
gatherChannelBytes(const std::map<std::string, int64_t> &mine, int rank) {
  std::vector<std::map<std::string, int64_t>> byRank;
  for (const std::string &text :
       gatherOnRoot(nlohmann::json(mine).dump(), /*contribute=*/true, rank,
                    "the ranks' channel byte counts"))
    byRank.push_back(
        nlohmann::json::parse(text).get<std::map<std::string, int64_t>>());
  return byRank;
}

/// --compiled: the shared object, whose descriptor stands for the JSON file
/// (its version and world size checked before anything else).
std::optional<rt::CompiledStep> openCompiled(const Options &opt) {
  if (opt.compiled.empty())
    return std::nullopt;
  return rt::CompiledStep::open(opt.compiled, fsdp_world_size(), fsdp_rank());
}

/// `p` once every rank agrees on the stage layout (before any channel).
Program agreedJob(Program p) {
  rt::checkSameJobOnAllRanks(p);
  return p;
}

/// `p` once the node's memory holds its ranks' plans (checkNodeMemory),
/// before the device allocates the arena.
Program fitsNode(Program p, const Options &opt) {
  checkNodeMemory(p, opt);
  return p;
}

/// --init-from: the archive, its headers checked before the device is set
/// up.
std::optional<SafeTensorsArchive> openInitFrom(const Options &opt) {
  if (opt.initFrom.empty())
    return std::nullopt;
  return SafeTensorsArchive::open(opt.initFrom);
}

/// One run of fsdp-run. The constructor sets up; runTraining calls the
/// phases in their order.
class TrainingRun {
public:
  /// `watchdog` names this run's executor from here until the destructor.
  TrainingRun(const Options &opt, const AgreedInputs &agreed,
              Watchdog &watchdog);
  ~TrainingRun() { watchdog.watch(nullptr); }
  TrainingRun(const TrainingRun &) = delete;
  TrainingRun &operator=(const TrainingRun &) = delete;

  /// Parameters from their init specs, then --init-from or --load.
  void initialiseState();
  /// Finds the step's inputs and outputs by role; throws without a loss.
  void bindIo();
  /// The total a total_steps input gets (--total-steps, the checkpoint's,
  /// this run's last step); throws if it ends before this run.
  void resolveTotalSteps();
  /// The step loop, with --save-every's saves.
  void train();
  /// --dump-params, --save, --export and the summary.
  void finish();

private:
  void initialiseShards();
  void load();
  /// Runs `step` and returns its loss, the mean over ranks.
  double runStep(int64_t step, bool timed, HostValues &in);
  /// After `step`: a non-finite loss or gradient norm stops the run
  /// (--on-nonfinite stop) or is skipped; the dynamic loss scale backs off
  /// or grows (torch.amp.GradScaler.update). Returns whether the step's
  /// update was skipped. Every rank decides alike (the loss and the norm
  /// are reduced over all ranks).
  bool afterStep(int64_t step, double loss);
  void printStep(int64_t step, double loss, bool skipped) const;
  void savePeriodic(int64_t step);
  /// The figures over ranks after the last step (collective).
  RunTotals measureTotals();
  void writeOutputs();
  int64_t lastStep() const { return startStep + opt.steps; }

  const Options &opt;
  const int rank;
  std::optional<rt::CompiledStep> compiled;
  Program prog;
  /// The rank in this rank's pipeline stage (the rank without pipeline
  /// parallelism): what the stage's program, its data and its shards see.
  const int stageRank;
  DataSource data;
  std::optional<SafeTensorsArchive> init;
  rt::Device device;
  Executor ex;
  RunMeta meta;
  int64_t startStep = 0, savedTotal = 0;
  int64_t initRss = 0; ///< the resident set's peak after initialisation
  /// The allocator's bytes in use when the steps begin (the resident state
  /// and whatever the host holds), which device_step_peak_bytes counts from.
  int64_t stepStartBytes = 0;
  /// The channels' bytes sent when the steps begin (channelBytesSent).
  std::map<std::string, int64_t> channelStart;
  /// Buffers of the step's inputs and outputs by role; -1: none.
  int64_t lossId = -1, stepId = -1, totalId = -1, lrId = -1, gradNormId = -1,
          lossScaleId = -1;
  bool hasUpdate = false; ///< the step runs an optimizer
  /// Every update skips itself on a non-finite gradient norm (its
  /// skip_if_nonfinite operand).
  bool updatesSkip = false;
  /// The largest loss scale the loss's dtype holds (the scale multiplies
  /// the backward seed in that dtype: 2^127 for f32, the loss of bf16/f16
  /// compute; 2^15 for a hand-written f16 loss).
  double lossScaleCap = 0;
  StepLog log;
  /// Times every phase of the run (runTraining's, from before MPI's start).
  Watchdog &watchdog;
};

// Data first (a bad file fails before the device is set up), then the
// checkpoint's headers, then the device, its channels and the resident
// state.
TrainingRun::TrainingRun(const Options &opt, const AgreedInputs &agreed,
                         Watchdog &watchdog)
    : opt(opt), rank(fsdp_rank()), compiled(openCompiled(opt)),
      prog(fitsNode(agreedJob(compiled ? compiled->program()
                                       : Program::fromFile(opt.schedule,
                                                           fsdp_world_size(),
                                                           fsdp_rank())),
                    opt)),
      stageRank(rank % static_cast<int>(prog.worldSize())),
      data(prog, opt.data, opt.seed, stageRank,
           opt.dataOrder == "sequential" ? DataOrder::Sequential
                                         : DataOrder::Random),
      init(openInitFrom(opt)), device(opt.device, collectivesOf(opt)),
      ex(prog, device.get(), opt.alloc),
      meta{opt.seed, opt.data, opt.dataOrder.empty() ? "random" : opt.dataOrder,
           0, agreed.dataSha256},
      watchdog(watchdog) {
  watchdog.watch(&ex);
  if (compiled)
    ex.useCompiledStep(*compiled);
  fsdp_blas_info blas{};
  if (rank == 0 && fsdp_device_blas(device.get(), &blas) == FSDP_OK) {
    if (*blas.note)
      std::fprintf(stderr, "fsdp-run: note: %s\n", blas.note);
    if (*blas.warning)
      std::fprintf(stderr, "fsdp-run: warning: %s\n", blas.warning);
  }
  if (rank == 0 && opt.alloc == AllocMode::Arena && !ex.usesArena())
    std::fprintf(stderr,
                 "fsdp-run: note: %s has no complete memory plan "
                 "(arena_bytes and every buffer's arena_offset): "
                 "allocating per buffer\n",
                 prog.name().c_str());
}

void TrainingRun::initialiseState() {
  initialiseShards();
  if (init)
    initFromSafeTensors(*init, ex, rank);
  if (!opt.load.empty())
    load();
  // The resident set's high-water mark once the state is in place (Linux
  // reports ru_maxrss in KiB): what initialisation cost on the host.
  initRss = peakRssBytes();
}

// Parameter shards (layout "shard": this rank's shard at its index r mod S
// in the shard group; "full": the whole padded buffer, the same on every
// rank) and zero optimizer moments, initialised where they live
// (initUnitOnDevice: on the device, --init-threads host threads on cpu). A
// `master` starts from the same values as `param`, both written from one
// evaluation; a bf16/f16 `param` gets them rounded (through f32), i.e.
// cast(master).
void TrainingRun::initialiseShards() {
  struct Target {
    const fsdp::schedule::UnitDesc *unit = nullptr;
    bool full = false;
    int64_t param = -1, master = -1;
  };
  std::vector<Target> targets;
  for (const IoDesc &io : prog.inputs()) {
    if (!fsdp::schedule::isStateRole(io.role))
      continue;
    const fsdp::schedule::UnitDesc *unit = prog.findUnit(io.unit);
    if (!unit)
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "'" +
                  (io.fqn.empty() ? std::string() : ", fqn '" + io.fqn + "'") +
                  ") is a whole unsharded parameter with no 'unit': fsdp-run "
                  "needs per-unit shards, i.e. a schedule from the FSDP "
                  "pipeline (fsdp-opt --fsdp-pipeline), not from "
                  "fsdp-autodiff alone");
    if (io.role != "param" && io.role != "master")
      continue; // moments stay as the executor zeroed them
    bool full = io.layout == "full";
    int64_t want = full ? unit->paddedNumel : unit->shardNumel;
    if (prog.buffer(io.buffer).numel != want)
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "', unit '" + unit->name + "') has " +
                  std::to_string(prog.buffer(io.buffer).numel) +
                  " elements; its unit's " + (full ? "padded" : "shard") +
                  " numel is " + std::to_string(want));
    auto same = [&](const Target &t) {
      return t.unit == unit && t.full == full &&
             (io.role == "param" ? t.param : t.master) < 0;
    };
    auto it = std::find_if(targets.begin(), targets.end(), same);
    if (it == targets.end())
      it = targets.insert(targets.end(), Target{unit, full, -1, -1});
    (io.role == "param" ? it->param : it->master) = io.buffer;
    if (!ex.stateMemory(io.buffer))
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "') has no device memory");
  }
  fsdp_stream s = fsdp_device_stream(device.get(), FSDP_STREAM_COMPUTE);
  for (const Target &t : targets) {
    int64_t first = t.param >= 0 ? t.param : t.master;
    int64_t second = t.param >= 0 ? t.master : -1;
    auto dtypeOf = [&](int64_t b) {
      return fsdp::schedule::toC(prog.buffer(b).dtype);
    };
    initUnitOnDevice(s, *t.unit, opt.seed,
                     t.full ? -1 : prog.shardIndex(stageRank),
                     ex.stateMemory(first), dtypeOf(first),
                     second >= 0 ? ex.stateMemory(second) : nullptr,
                     second >= 0 ? dtypeOf(second) : FSDP_F32, opt.initThreads,
                     prog.tensorRank(stageRank), prog.tensorParallel());
  }
}

void TrainingRun::load() {
  std::string from = resolveCheckpoint(opt.load);
  if (rank == 0 && from != opt.load)
    std::fprintf(stderr, "fsdp-run: --load: resuming from %s\n", from.c_str());
  LoadedCheckpoint ck = loadCheckpoint(from, ex, rank);
  startStep = ck.step;
  savedTotal = ck.meta.totalSteps;
  meta.skippedSteps = ck.meta.skippedSteps;
  meta.lossScale = ck.meta.lossScale;
  meta.growthTracker = ck.meta.growthTracker;
  // The data stream is a function of these and the step: a resumed run
  // that changes them trains on other data (allowed, but said).
  if (rank == 0 && ck.hasMeta &&
      (ck.meta.seed != meta.seed || ck.meta.dataOrder != meta.dataOrder))
    std::fprintf(
        stderr,
        "fsdp-run: warning: --load: the checkpoint's run had --seed %llu "
        "--data-order %s; this run has --seed %llu --data-order %s, so its "
        "data and initialisation differ from the saved run's\n",
        static_cast<unsigned long long>(ck.meta.seed),
        ck.meta.dataOrder.c_str(), static_cast<unsigned long long>(meta.seed),
        meta.dataOrder.c_str());
  warnIfOtherData(ck.meta, meta, rank);
}

void TrainingRun::bindIo() {
  for (const IoDesc &out : prog.outputs())
    if (out.role == "loss")
      lossId = out.buffer;
  if (lossId < 0)
    throw Error(prog.name() + ": the schedule has no output with role 'loss'");
  for (const IoDesc &io : prog.inputs()) {
    if (io.role == "step")
      stepId = io.buffer;
    if (io.role == "total_steps")
      totalId = io.buffer;
    if (io.role == "loss_scale")
      lossScaleId = io.buffer;
  }
  // The step's learning rate (a scheduled one is an output; a constant one
  // is the optimizer's) and the gradient norm (an output when compiled with
  // max-grad-norm or report-grad-norm).
  for (const IoDesc &out : prog.outputs()) {
    if (out.role == "lr")
      lrId = out.buffer;
    if (out.role == "grad_norm")
      gradNormId = out.buffer;
  }
  updatesSkip = true;
  for (const fsdp::schedule::Instruction &in : prog.instructions())
    if (in.kind == fsdp::schedule::OpKind::SgdUpdate ||
        in.kind == fsdp::schedule::OpKind::AdamwUpdate) {
      hasUpdate = true;
      updatesSkip &= in.flag("skip_if_nonfinite");
    }
  updatesSkip &= hasUpdate && gradNormId >= 0;
  if ((opt.skipNonfinite || lossScaleId >= 0) && !updatesSkip)
    throw Error(prog.name() + ": " +
                (lossScaleId >= 0 ? std::string("a loss_scale input")
                                  : std::string("--on-nonfinite skip")) +
                " needs a step whose updates skip themselves on a non-finite "
                "gradient norm (recompile with max-grad-norm, "
                "report-grad-norm=true or loss-scaling=true)");
  if (lossScaleId < 0)
    meta.lossScale = 0; // a checkpoint's scale is not this schedule's
  if (lossScaleId >= 0) {
    // 2^15 for an f16 loss (max 65504); 2^127 for f32 (the loss of bf16/f16
    // compute: nn.cross_entropy of 16-bit logits is f32) and bf16.
    bool f16 = prog.buffer(lossId).dtype == fsdp::schedule::DType::F16;
    lossScaleCap = std::ldexp(1.0, f16 ? 15 : 127);
    if (meta.lossScale <= 0) // not resumed from a checkpoint that has one
      meta.lossScale = std::min(opt.lossScaleInit, lossScaleCap);
    if (rank == 0 && opt.lossScaleInit > lossScaleCap)
      std::fprintf(stderr,
                   "fsdp-run: note: the loss is f16, whose largest power of "
                   "two is 2^15: the loss scale starts at %g and never "
                   "grows above it\n",
                   lossScaleCap);
  }
}

// A schedule compiled without decay-steps decays over the run's total
// optimizer steps: --total-steps, else the total a --load checkpoint's run
// used (so that every job of a split run sees the same rate at the same
// step), else this run's last step (a run resumed at step 51 for 50 steps
// has total 100, as the uninterrupted 100-step run). The schedule never
// reaches its end before the run does.
void TrainingRun::resolveTotalSteps() {
  if (totalId < 0) {
    if (opt.totalSteps && rank == 0)
      std::fprintf(stderr,
                   "fsdp-run: warning: --total-steps is ignored: the schedule "
                   "has no total_steps input (compile lr-schedule=linear|"
                   "cosine without decay-steps)\n");
    return;
  }
  meta.totalSteps = opt.totalSteps   ? opt.totalSteps
                    : savedTotal > 0 ? savedTotal
                                     : lastStep();
  if (meta.totalSteps < lastStep())
    throw Error(std::string(opt.totalSteps
                                ? "--total-steps"
                                : "--load: the checkpoint's run.total_steps") +
                " is " + std::to_string(meta.totalSteps) +
                ", but this run ends at step " + std::to_string(lastStep()) +
                (opt.totalSteps
                     ? ""
                     : " (the saved steps decayed over " +
                           std::to_string(savedTotal) +
                           "; pass --total-steps to decay over another "
                           "total)"));
  if (rank == 0 && !opt.totalSteps && savedTotal > 0 &&
      savedTotal != lastStep())
    std::fprintf(stderr,
                 "fsdp-run: --load: the learning rate decays over the "
                 "checkpoint's run total of %lld steps\n",
                 static_cast<long long>(savedTotal));
}

void TrainingRun::train() {
  // The interpreter's step plan (host memory it keeps) is built first, so
  // that what the allocator measures from here is the steps' own.
  if (!ex.isCompiled())
    ex.plan();
  // Statistics from here: the device's allocator peak covers the steps.
  fsdp_device_reset_stats(device.get());
  fsdp_device_stats start{};
  fsdp_device_get_stats(device.get(), &start);
  stepStartBytes = start.memory_in_use_bytes;
  channelStart = ex.channelBytesSent();
  HostValues in; // this step's data, reused every step
  for (int64_t step = startStep + 1; step <= lastStep(); ++step) {
    bool timed = step > startStep + opt.warmup;
    if (opt.profile) {
      fsdp_profile_enable(timed);
      if (step == startStep + opt.warmup + 1)
        fsdp_profile_reset();
    }
    watchdog.begin("step " + std::to_string(step));
    double scale = meta.lossScale;
    double loss = runStep(step, timed, in);
    if (lossScaleId >= 0)
      log.lossScales.push_back(scale);
    bool skipped = afterStep(step, loss); // collective: still the step's
    watchdog.end();
    if (rank == 0)
      printStep(step, loss, skipped);
    if (opt.saveEvery && (step % opt.saveEvery == 0 || step == lastStep()))
      savePeriodic(step);
  }
}

double TrainingRun::runStep(int64_t step, bool timed, HostValues &in) {
  data.fill(step, in);
  // The optimizer step: skipped steps do not count (torch's fused AdamW
  // takes back its step increment on found_inf, and transformers' Trainer
  // steps its LR scheduler only when the optimizer stepped).
  if (stepId >= 0)
    in[stepId] = {static_cast<double>(step - meta.skippedSteps)};
  if (lossScaleId >= 0)
    in[lossScaleId] = {meta.lossScale};
  if (totalId >= 0)
    in[totalId] = {static_cast<double>(meta.totalSteps)};
  fsdp_device_stats s0{}, s1{};
  fsdp_device_get_stats(device.get(), &s0);
  double w0 = ex.pipelineWaitSeconds();
  double t0 = fsdp_now();
  // Only the data and the step number travel to the device.
  for (auto &[id, values] : in)
    ex.write(id, values);
  ex.step();
  // Pipeline parallelism: the last stage computes the loss (the others'
  // is zero); the sum over every rank below is then its data-parallel
  // ranks' and reaches every rank.
  double local = ex.readScalar(lossId);
  double t1 = fsdp_now();
  // Every rank computes the same rate and norm (the norm is all-reduced
  // inside the step); rank 0's are reported.
  if (lrId >= 0 || hasUpdate)
    log.lrs.push_back(lrId >= 0 ? ex.readScalar(lrId) : prog.optimizer().lr);
  if (gradNormId >= 0)
    log.gradNorms.push_back(ex.readScalar(gradNormId));
  fsdp_device_get_stats(device.get(), &s1);
  // Per step, max over ranks: wall time of the step, kernel time, wait time.
  double times[3] = {t1 - t0, s1.compute_seconds - s0.compute_seconds,
                     s1.comm_wait_seconds - s0.comm_wait_seconds};
  log.peak = std::max(log.peak, ex.lastPeakBytes());
  double sum = 0, maxTimes[3];
  if (MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) !=
          MPI_SUCCESS ||
      MPI_Allreduce(times, maxTimes, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD) !=
          MPI_SUCCESS)
    throw Error("MPI_Allreduce of the loss failed");
  double loss = sum / static_cast<double>(prog.worldSize());
  log.losses.push_back(loss);
  if (timed) {
    log.stepTimes.push_back(maxTimes[0]);
    log.computeTimes.push_back(maxTimes[1]);
    log.commTimes.push_back(maxTimes[2]);
    log.profiledSeconds += times[0];
    double waits = ex.pipelineWaitSeconds() - w0;
    log.pipelineWaits.push_back(waits);
    log.idleTimes.push_back(waits + (maxTimes[0] - times[0]));
  }
  return loss;
}

bool TrainingRun::afterStep(int64_t step, double loss) {
  double norm = gradNormId >= 0 ? log.gradNorms.back() : 0.0;
  bool badLoss = !std::isfinite(loss), badNorm = !std::isfinite(norm);
  // A non-finite norm skipped every update inside the step.
  bool skipped = badNorm && updatesSkip;
  if (skipped) {
    ++meta.skippedSteps;
    log.skippedSteps.push_back(step);
  }
  if (lossScaleId >= 0) {
    // torch.amp.GradScaler.update: halve on inf/nan (backoff 0.5), double
    // after growth-interval clean steps (growth 2), capped by the loss's
    // dtype. An overflow of the scaled gradients is the scaler's business,
    // not an error: only a non-finite loss (the forward) stops the run.
    if (skipped) {
      meta.lossScale *= 0.5;
      meta.growthTracker = 0;
    } else if (++meta.growthTracker >= opt.lossScaleGrowthInterval) {
      meta.lossScale = std::min(meta.lossScale * 2, lossScaleCap);
      meta.growthTracker = 0;
    }
    badNorm = false;
  }
  if (!(badLoss || badNorm) || opt.skipNonfinite)
    return skipped;
  if (rank == 0)
    printStep(step, loss, skipped);
  std::string bad = firstNonFiniteState(ex, rank, {"param", "master"});
  char what[96];
  if (gradNormId >= 0)
    std::snprintf(what, sizeof what, "the loss is %g, the gradient norm %g",
                  loss, norm);
  else
    std::snprintf(what, sizeof what, "the loss is %g", loss);
  throw fsdp::CollectiveError(
      "step " + std::to_string(step) + ": " + what +
      ": stopping (--on-nonfinite stop; skip would skip such steps and go "
      "on); " +
      (bad.empty() ? std::string("every parameter is finite") +
                         (skipped ? " (the step's update was skipped)" : "")
                   : "the first non-finite parameter: " + bad) +
      "; nothing of this step was saved");
}

void TrainingRun::printStep(int64_t step, double loss, bool skipped) const {
  std::string extra;
  char buf[64];
  if (!log.lrs.empty()) {
    std::snprintf(buf, sizeof buf, " lr %.6g", log.lrs.back());
    extra += buf;
  }
  if (!log.gradNorms.empty()) {
    std::snprintf(buf, sizeof buf, " grad_norm %.6g", log.gradNorms.back());
    extra += buf;
  }
  if (!log.lossScales.empty()) {
    std::snprintf(buf, sizeof buf, " loss_scale %.6g", log.lossScales.back());
    extra += buf;
  }
  if (skipped)
    extra += " skipped";
  std::printf("step %lld loss %.6f%s\n", static_cast<long long>(step), loss,
              extra.c_str());
  std::fflush(stdout);
}

void TrainingRun::savePeriodic(int64_t step) {
  watchdog.begin("the save of step " + std::to_string(step));
  saveCheckpoint(periodicCheckpointDir(opt.save, step), ex, step, rank, meta);
  watchdog.end();
  if (rank == 0 && opt.keep)
    pruneCheckpoints(opt.save, opt.keep);
}

void TrainingRun::finish() {
  watchdog.begin("the end of the run (the figures over the ranks)");
  RunTotals totals = measureTotals();
  writeOutputs();
  watchdog.begin("the end of the run (the summary)");
  long long rss[2] = {initRss, peakRssBytes()};
  MPI_Allreduce(rss, totals.maxRss, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf(
        "%s\n",
        summaryJson(opt, prog, ex, device.get(), log, totals).dump().c_str());
    std::fflush(stdout);
  }
  watchdog.end();
}

RunTotals TrainingRun::measureTotals() {
  RunTotals totals;
  totals.startStep = startStep;
  totals.globalBatch =
      prog.globalBatch() > 0 ? prog.globalBatch() : data.globalBatch;
  totals.globalTokens = data.globalTokens;
  fsdp_device_get_stats(device.get(), &totals.stats);
  for (auto &[group, bytes] : ex.channelBytesSent())
    totals.channelBytes[group] = bytes - channelStart[group];
  totals.channelBytesByRank = gatherChannelBytes(totals.channelBytes, rank);

  fsdp_profile_enable(0);
  totals.profile =
      gatherProfile(opt.profile, log, prog.worldSize() * prog.pipelineStages());
  if (prog.pipelineStages() > 1 && !log.idleTimes.empty()) {
    // Every rank's medians, in world rank order (MPI_Allgather: each rank
    // has them, rank 0 prints them).
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      size_t n = v.size();
      return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    };
    double mine[2] = {median(log.idleTimes), median(log.pipelineWaits)};
    std::vector<double> all(
        2 * static_cast<size_t>(prog.worldSize() * prog.pipelineStages()));
    if (MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
      throw Error("MPI_Allgather of the ranks' idle times failed");
    for (size_t r = 0; r < all.size() / 2; ++r) {
      totals.rankIdle.push_back(all[2 * r]);
      totals.rankPipelineWait.push_back(all[2 * r + 1]);
    }
  }

  // Max over ranks: the plan's bookkeeping peak, the arena, the allocator's
  // peak, the memory outside its pool, and the allocator's peak over what
  // was in use when the steps began.
  long long mine[6] = {log.peak,
                       ex.arenaBytes(),
                       totals.stats.memory_peak_bytes,
                       totals.stats.workspace_bytes,
                       totals.stats.comm_buffer_bytes,
                       totals.stats.memory_peak_bytes - stepStartBytes};
  MPI_Allreduce(mine, totals.most, 6, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  // The same per pipeline stage, max over the stage's ranks: each rank fills
  // its stage's slots, every other slot is the least value.
  if (const int64_t stages = prog.pipelineStages(); stages > 1) {
    const int64_t k = RunTotals::kStageFigures;
    std::vector<long long> local(static_cast<size_t>(stages * k), LLONG_MIN);
    const long long figures[RunTotals::kStageFigures] = {
        log.peak, totals.stats.memory_peak_bytes,
        totals.stats.memory_peak_bytes - stepStartBytes,
        prog.plannedPeakBytes(), prog.plannedPeakBytesWithScratch()};
    std::copy(figures, figures + k,
              local.begin() +
                  static_cast<std::ptrdiff_t>(prog.pipelineStage() * k));
    totals.byStage.resize(local.size());
    MPI_Allreduce(local.data(), totals.byStage.data(),
                  static_cast<int>(local.size()), MPI_LONG_LONG, MPI_MAX,
                  MPI_COMM_WORLD);
  }
  return totals;
}

void TrainingRun::writeOutputs() {
  if (!opt.dumpParams.empty()) {
    watchdog.begin("--dump-params");
    dumpParams(opt.dumpParams, ex, rank);
  }
  if (!opt.save.empty() && !opt.saveEvery) {
    watchdog.begin("the save of step " + std::to_string(lastStep()));
    saveCheckpoint(opt.save, ex, lastStep(), rank, meta);
  }
  if (!opt.exportPath.empty()) {
    watchdog.begin("--export");
    exportSafeTensors(opt.exportPath, ex, lastStep(), rank);
  }
}

} // namespace

void runTraining(const Options &opt, Watchdog &watchdog) {
  watchdog.begin("the start-up (the ranks' agreement on their options, "
                 "inputs and schedule; the device and its channels)");
  AgreedInputs agreed = checkSameWorkOnAllRanks(opt);
  checkOutputPaths(opt);
  TrainingRun run(opt, agreed, watchdog);
  watchdog.begin("the initialisation of the state (--init-from, --load)");
  run.initialiseState();
  run.bindIo();
  run.resolveTotalSteps();
  watchdog.end();
  run.train();
  run.finish();
}

} // namespace fsdp::tooling
