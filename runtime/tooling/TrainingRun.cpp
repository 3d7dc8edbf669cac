//===- fsdp-run.cpp - Runs an fsdp schedule for K training steps ----------===//
//
//   mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]
//          [--device cpu|cuda|cuda:N] [--collectives auto|mpi|nccl]
//          [--alloc arena|per-buffer]
//          [--data FILE] [--data-order random|sequential]
//          [--init-from SAFETENSORS] [--export PATH.safetensors]
//          [--dump-params PATH] [--save DIR [--save-every K [--keep N]]]
//          [--load DIR]
//          [--progress none|test|thread] [--progress-interval MIN[:MAX]]
//          [--warmup W] [--profile] [--timeout S]
//   mpirun -np N fsdp-run --compiled STEP.so [the same options]
//
// Loads the schedule (world_size must be N; with --compiled, the step
// fsdp-compile built, whose descriptor carries the schedule: the Executor
// then runs its machine code instead of interpreting the instructions), creates
// the device, and initialises every rank's shards or full (replicated) buffers
// deterministically (the full parameters do not depend on N or the
// strategy), reads them from a Hugging Face safetensors checkpoint
// (SafeTensors.h) or loads a checkpoint (Checkpoint.h) into the executor's
// device-resident state. Feeds synthetic, CSV, byte-level text or uint16
// token data (Data.h), runs K optimizer steps (the state stays on the device;
// the host sees the data in, the loss out), prints "step s loss x" per step on
// rank 0 and, as the last line, one JSON summary. Any error on any rank
// aborts all ranks (MPI_Abort) with a message; bad arguments print the usage
// and exit 2. --progress picks how MPI collectives progress while kernels
// run (runtime.h, fsdp_progress; results are bit-identical across modes);
// --profile adds per-op seconds per step (mean over ranks) to the summary.
//
// This file is the run itself (set-up, the step loop, the end); the command
// line is Options.h, the checks before step 1 Preflight.h, the hang
// detector Watchdog.h, the summary and --dump-params Report.h.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/Checkpoint.h"
#include "fsdp/tooling/Data.h"
#include "fsdp/tooling/Options.h"
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
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using fsdp::Error;
using fsdp::rt::AllocMode;
using fsdp::rt::Executor;
using fsdp::rt::HostValues;
using fsdp::schedule::IoDesc;
using fsdp::schedule::Program;
using namespace fsdp::tooling;

namespace {

int runMain(const Options &opt) {
  int rank = fsdp_rank();
  checkSameWorkOnAllRanks(opt);
  checkOutputPaths(opt);
  // --compiled: the shared object's descriptor stands for the JSON file
  // (its version and world size checked before anything else).
  std::optional<fsdp::rt::CompiledStep> compiled;
  if (!opt.compiled.empty())
    compiled = fsdp::rt::CompiledStep::open(opt.compiled, fsdp_world_size());
  Program prog = compiled ? compiled->program()
                          : Program::fromFile(opt.schedule, fsdp_world_size());
  int64_t n = prog.worldSize();
  // Data first (a bad file fails before the device is set up), then the
  // device, its channels and the resident state.
  fsdp::tooling::DataSource data(prog, opt.data, opt.seed, rank,
                                 opt.dataOrder == "sequential"
                                     ? fsdp::tooling::DataOrder::Sequential
                                     : fsdp::tooling::DataOrder::Random);
  // A checkpoint's headers are checked before the device is set up too.
  std::optional<fsdp::tooling::SafeTensorsArchive> init;
  if (!opt.initFrom.empty())
    init = fsdp::tooling::SafeTensorsArchive::open(opt.initFrom);
  fsdp::rt::Device device(opt.device, collectivesOf(opt));
  Executor ex(prog, device.get(), opt.alloc);
  if (compiled)
    ex.useCompiledStep(*compiled);
  if (rank == 0 && opt.alloc == AllocMode::Arena && !ex.usesArena())
    std::fprintf(stderr,
                 "fsdp-run: note: %s has no complete memory plan "
                 "(arena_bytes and every buffer's arena_offset): "
                 "allocating per buffer\n",
                 prog.name().c_str());

  // Initial state: parameter shards (layout "shard": this rank's shard at
  // its index r mod S in the shard group; "full": the whole padded buffer,
  // the same on every rank) and zero optimizer moments, or a checkpoint's.
  // A `master` starts from the same values as `param`; a bf16/f16 `param`
  // gets them rounded (through f32), i.e. cast(master).
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
    if (io.role == "param" || io.role == "master")
      ex.write(io.buffer, io.layout == "full"
                              ? fsdp::tooling::initFull(*unit, opt.seed)
                              : fsdp::tooling::initShard(
                                    *unit, opt.seed, rank % prog.shardSize()));
    // Moments stay as the executor zeroed them.
  }
  if (init)
    fsdp::tooling::initFromSafeTensors(*init, ex, rank);
  int64_t startStep = 0, savedTotal = 0;
  fsdp::tooling::RunMeta meta{opt.seed, opt.data,
                              opt.dataOrder.empty() ? "random" : opt.dataOrder};
  if (!opt.load.empty()) {
    std::string from = fsdp::tooling::resolveCheckpoint(opt.load);
    if (rank == 0 && from != opt.load)
      std::fprintf(stderr, "fsdp-run: --load: resuming from %s\n",
                   from.c_str());
    fsdp::tooling::LoadedCheckpoint ck =
        fsdp::tooling::loadCheckpoint(from, ex, rank);
    startStep = ck.step;
    savedTotal = ck.meta.totalSteps;
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
  }
  // The resident set's high-water mark once the state is in place (Linux
  // reports ru_maxrss in KiB): what initialisation cost on the host.
  int64_t initRss = peakRssBytes();
  int64_t lossId = -1, stepId = -1;
  for (const IoDesc &out : prog.outputs())
    if (out.role == "loss")
      lossId = out.buffer;
  if (lossId < 0)
    throw Error(prog.name() + ": the schedule has no output with role 'loss'");
  int64_t totalId = -1;
  for (const IoDesc &io : prog.inputs()) {
    if (io.role == "step")
      stepId = io.buffer;
    if (io.role == "total_steps")
      totalId = io.buffer;
  }
  // A schedule compiled without decay-steps decays over the run's total
  // optimizer steps: --total-steps, else the total a --load checkpoint's run
  // used (so that every job of a split run sees the same rate at the same
  // step), else this run's last step (a run resumed at step 51 for 50 steps
  // has total 100, as the uninterrupted 100-step run). The schedule never
  // reaches its end before the run does.
  int64_t lastStep = startStep + opt.steps;
  if (totalId >= 0) {
    meta.totalSteps = opt.totalSteps   ? opt.totalSteps
                      : savedTotal > 0 ? savedTotal
                                       : lastStep;
    if (meta.totalSteps < lastStep)
      throw Error(
          std::string(opt.totalSteps
                          ? "--total-steps"
                          : "--load: the checkpoint's run.total_steps") +
          " is " + std::to_string(meta.totalSteps) +
          ", but this run ends at step " + std::to_string(lastStep) +
          (opt.totalSteps ? ""
                          : " (the saved steps decayed over " +
                                std::to_string(savedTotal) +
                                "; pass --total-steps to decay over another "
                                "total)"));
    if (rank == 0 && !opt.totalSteps && savedTotal > 0 &&
        savedTotal != lastStep)
      std::fprintf(stderr,
                   "fsdp-run: --load: the learning rate decays over the "
                   "checkpoint's run total of %lld steps\n",
                   static_cast<long long>(savedTotal));
  } else if (opt.totalSteps && rank == 0) {
    std::fprintf(
        stderr, "fsdp-run: warning: --total-steps is ignored: the schedule has "
                "no total_steps input (compile lr-schedule=linear|cosine "
                "without decay-steps)\n");
  }
  // The step's learning rate (a scheduled one is an output; a constant one
  // is the optimizer's) and the gradient norm (an output when compiled with
  // max-grad-norm or report-grad-norm).
  int64_t lrId = -1, gradNormId = -1;
  for (const IoDesc &out : prog.outputs()) {
    if (out.role == "lr")
      lrId = out.buffer;
    if (out.role == "grad_norm")
      gradNormId = out.buffer;
  }
  bool hasUpdate = false;
  for (const fsdp::schedule::Instruction &in : prog.instructions())
    hasUpdate |= in.kind == fsdp::schedule::OpKind::SgdUpdate ||
                 in.kind == fsdp::schedule::OpKind::AdamwUpdate;

  int64_t globalBatch =
      prog.globalBatch() > 0 ? prog.globalBatch() : data.globalBatch;
  Watchdog watchdog(opt.timeout, ex, rank);
  // Statistics from here: the device's allocator peak covers the steps.
  fsdp_device_reset_stats(device.get());
  // Per step, max over ranks: wall time of the step, kernel time, wait time.
  StepLog log;
  HostValues in; // this step's data, reused every step
  for (int64_t step = startStep + 1; step <= startStep + opt.steps; ++step) {
    bool timed = step > startStep + opt.warmup;
    if (opt.profile) {
      fsdp_profile_enable(timed);
      if (step == startStep + opt.warmup + 1)
        fsdp_profile_reset();
    }
    watchdog.begin("step " + std::to_string(step));
    data.fill(step, in);
    if (stepId >= 0)
      in[stepId] = {static_cast<double>(step)};
    if (totalId >= 0)
      in[totalId] = {static_cast<double>(meta.totalSteps)};
    fsdp_device_stats s0{}, s1{};
    fsdp_device_get_stats(device.get(), &s0);
    double t0 = fsdp_now();
    // Only the data and the step number travel to the device.
    for (auto &[id, values] : in)
      ex.write(id, values);
    ex.step();
    double local = ex.readScalar(lossId);
    double t1 = fsdp_now();
    // Every rank computes the same rate and norm (the norm is all-reduced
    // inside the step); rank 0's are reported.
    if (lrId >= 0 || hasUpdate)
      log.lrs.push_back(lrId >= 0 ? ex.readScalar(lrId) : prog.optimizer().lr);
    if (gradNormId >= 0)
      log.gradNorms.push_back(ex.readScalar(gradNormId));
    fsdp_device_get_stats(device.get(), &s1);
    double times[3] = {t1 - t0, s1.compute_seconds - s0.compute_seconds,
                       s1.comm_wait_seconds - s0.comm_wait_seconds};
    log.peak = std::max(log.peak, ex.lastPeakBytes());
    double sum = 0, maxTimes[3];
    if (MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Allreduce(times, maxTimes, 3, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
      throw Error("MPI_Allreduce of the loss failed");
    double loss = sum / static_cast<double>(n);
    log.losses.push_back(loss);
    if (timed) {
      log.stepTimes.push_back(maxTimes[0]);
      log.computeTimes.push_back(maxTimes[1]);
      log.commTimes.push_back(maxTimes[2]);
      log.profiledSeconds += times[0];
    }
    watchdog.end();
    if (rank == 0) {
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
      std::printf("step %lld loss %.6f%s\n", static_cast<long long>(step), loss,
                  extra.c_str());
      std::fflush(stdout);
    }
    if (opt.saveEvery &&
        (step % opt.saveEvery == 0 || step == startStep + opt.steps)) {
      watchdog.begin("the save of step " + std::to_string(step));
      fsdp::tooling::saveCheckpoint(
          fsdp::tooling::periodicCheckpointDir(opt.save, step), ex, step, rank,
          meta);
      watchdog.end();
      if (rank == 0 && opt.keep)
        fsdp::tooling::pruneCheckpoints(opt.save, opt.keep);
    }
  }
  RunTotals totals;
  totals.startStep = startStep;
  totals.globalBatch = globalBatch;
  totals.globalTokens = data.globalTokens;
  fsdp_device_get_stats(device.get(), &totals.stats);

  fsdp_profile_enable(0);
  totals.profile = gatherProfile(opt.profile, log, n);

  // Max over ranks: the plan's bookkeeping peak, the arena, the allocator's
  // peak and the memory outside its pool.
  long long mine[5] = {
      log.peak, ex.arenaBytes(), totals.stats.memory_peak_bytes,
      totals.stats.workspace_bytes, totals.stats.comm_buffer_bytes};
  MPI_Allreduce(mine, totals.most, 5, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (!opt.dumpParams.empty())
    dumpParams(opt.dumpParams, ex, rank);
  if (!opt.save.empty() && !opt.saveEvery) {
    watchdog.begin("the save of step " + std::to_string(startStep + opt.steps));
    fsdp::tooling::saveCheckpoint(opt.save, ex, startStep + opt.steps, rank,
                                  meta);
    watchdog.end();
  }
  if (!opt.exportPath.empty())
    fsdp::tooling::exportSafeTensors(opt.exportPath, ex, startStep + opt.steps,
                                     rank);
  long long rss[2] = {initRss, peakRssBytes()};
  MPI_Allreduce(rss, totals.maxRss, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (rank == 0) {
    std::printf(
        "%s\n",
        summaryJson(opt, prog, ex, device.get(), log, totals).dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options opt = parseArgs(argc, argv);
  if (fsdp_set_progress(static_cast<fsdp_progress>(opt.progress)) != FSDP_OK ||
      (opt.intervalMin > 0 &&
       fsdp_set_progress_interval(opt.intervalMin, opt.intervalMax) !=
           FSDP_OK)) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 2;
  }
  if (fsdp_init(&argc, &argv) != FSDP_OK) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 1;
  }
  try {
    runMain(opt);
  } catch (const fsdp::CollectiveError &e) {
    // Every rank found it; rank 0 reports, the others give its abort time
    // to arrive (then abort themselves, should rank 0 be gone).
    if (fsdp_rank() != 0)
      std::this_thread::sleep_for(std::chrono::seconds(10));
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  }
  fsdp_finalize();
  return 0;
}
