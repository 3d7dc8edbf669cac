//===- Options.cpp - fsdp-run's command line ------------------------------===//
#include "fsdp/tooling/Options.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

using fsdp::rt::AllocMode;

namespace fsdp::tooling {

namespace {

const char *kUsage =
    "usage: mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]\n"
    "                [--total-steps T]\n"
    "       mpirun -np N fsdp-run --compiled STEP.so [options as above]\n"
    "                [--data FILE] [--data-order O] [--init-from PATH]\n"
    "                [--export PATH] [--dump-params PATH] [--save DIR]\n"
    "                [--save-every K] [--keep N] [--load DIR] [--device D]\n"
    "                [--collectives C] [--alloc A]\n"
    "  --compiled STEP.so run the step fsdp-compile built (machine code\n"
    "                     calling the runtime) instead of interpreting a\n"
    "                     schedule: the same numbers, data, checkpoints\n"
    "                     and summary (needs --alloc arena)\n"
    "  --steps K          optimizer steps to run (default 1, K >= 1)\n"
    "  --total-steps T    the run's total optimizer steps, over which a\n"
    "                     schedule compiled without decay-steps decays\n"
    "                     (default: a --load checkpoint's total, else the\n"
    "                     last step of this run; T >= that last step): give\n"
    "                     every job of a run split into several the same T\n"
    "  --device D         cpu (default), cuda (the local rank's GPU) or "
    "cuda:N\n"
    "  --collectives C    auto (default: MPI on cpu, NCCL on cuda), mpi (on\n"
    "                     cuda: staged through host memory, so that several\n"
    "                     ranks may share one GPU) or nccl\n"
    "  --alloc A          arena (default: one arena, the memory plan's "
    "offsets)\n"
    "                     or per-buffer (one device allocation per buffer, so\n"
    "                     that device_peak_bytes measures the step)\n"
    "  --seed S           seed of parameter init and synthetic data (default "
    "0)\n"
    "  --init-threads N   host threads that initialise the parameters on the\n"
    "                     cpu device (default 0: all hardware threads; the\n"
    "                     values do not depend on N; cuda initialises on the\n"
    "                     GPU)\n"
    "  --data FILE        instead of synthetic data: for a features/labels\n"
    "                     schedule a CSV (lines f0,...,fF-1,label); for a\n"
    "                     tokens/targets schedule a .bin file of uint16 token\n"
    "                     ids (nanoGPT / llm.c) or a text file read as bytes\n"
    "                     (vocabulary 256), windows of T+1 tokens\n"
    "  --data-order O     random (default) or sequential token windows: "
    "window\n"
    "                     g of step s reads tokens [((s-1)*B + g)*T, ... + "
    "T+1)\n"
    "                     of the file, wrapping (B the global batch)\n"
    "  --init-from PATH   initial parameters from a Hugging Face safetensors\n"
    "                     file, or a directory with "
    "model.safetensors(.index.json)\n"
    "                     and its shards; names = the schedule's FQNs; each "
    "rank\n"
    "                     reads only its shards' bytes\n"
    "  --export PATH      after training, write the full parameters as one\n"
    "                     safetensors file (Hugging Face names; each rank "
    "writes\n"
    "                     its shards' bytes)\n"
    "  --dump-params PATH write the final unpadded parameters (the f32\n"
    "                     master where a unit has one) and AdamW moments as\n"
    "                     JSON on rank 0\n"
    "  --save DIR         write the final sharded parameters and optimizer\n"
    "                     state to DIR (rank<r>.bin per rank, index.json)\n"
    "  --save-every K     with --save DIR: also save every K global steps, as\n"
    "                     DIR/step_<step> (and the last step at the end)\n"
    "  --keep N           with --save-every: keep the newest N checkpoints\n"
    "                     (default: all)\n"
    "  --load DIR         resume from a --save directory (or the newest\n"
    "                     step_<step> checkpoint under it): its step count\n"
    "                     continues (the next step is saved step + 1)\n"
    "  --progress MODE    how collectives progress while kernels run: none\n"
    "                     (only when waited), test (MPI_Test after every\n"
    "                     instruction; default), thread (a progress thread,\n"
    "                     MPI_THREAD_MULTIPLE). Results are identical.\n"
    "  --progress-interval MIN[:MAX]\n"
    "                     the progress thread's back-off in microseconds\n"
    "                     (default 20:1000)\n"
    "  --timeout S        watchdog: a phase (the start-up, the state's\n"
    "                     initialisation, a step, a save, the outputs at the\n"
    "                     end) that has not finished after S seconds stops\n"
    "                     the job, naming it (a step: the instruction it is\n"
    "                     in) (default 600)\n"
    "  --warmup W         leave the first W steps out of the timings\n"
    "                     (default 0)\n"
    "  --profile          add \"profile\" to the summary: seconds and calls\n"
    "                     per step by op name (mean over ranks), plus comm\n"
    "                     wait, interpreter work and step set-up (on a GPU\n"
    "                     each op waits for its kernels: no overlap)\n"
    "  --on-nonfinite M   stop (default): a step whose loss or gradient norm\n"
    "                     is inf or nan stops the run (exit 1), naming the\n"
    "                     step and the first non-finite parameter; skip: its\n"
    "                     update is skipped and the run goes on (needs a\n"
    "                     schedule with a gradient norm: max-grad-norm,\n"
    "                     report-grad-norm or loss-scaling)\n"
    "  --loss-scale-init S the first dynamic loss scale of a schedule\n"
    "                     compiled with loss-scaling (default 65536, a power\n"
    "                     of two, as torch.amp.GradScaler's init_scale)\n"
    "  --loss-scale-growth-interval K\n"
    "                     double the loss scale after K steps without an\n"
    "                     inf/nan gradient; halve it and skip the step on one\n"
    "                     (default 2000; torch.amp.GradScaler)\n";

[[noreturn]] void usageError(const std::string &msg) {
  const char *r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!r || std::string(r) == "0") {
    std::fprintf(stderr, "fsdp-run: %s\n%s", msg.c_str(), kUsage);
    std::fflush(stderr);
  } else {
    // The other ranks exit after rank 0 has printed: mpirun stops every
    // rank when the first one exits.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::exit(2);
}

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end)
    return false;
  out = v;
  return true;
}

/// The options that exclude or need each other, after every one is read.
void checkCombinations(const Options &o) {
  if (!o.compiled.empty() && !o.schedule.empty())
    usageError("give a schedule file or --compiled STEP.so, not both");
  if (!o.compiled.empty() && o.alloc != AllocMode::Arena)
    usageError("--compiled runs in arena mode only (its buffers are the "
               "arena's slots): drop --alloc per-buffer");
  if (o.schedule.empty() && o.compiled.empty())
    usageError("no schedule file given");
  if (o.warmup >= o.steps)
    usageError("--warmup must be smaller than --steps");
  if (!o.initFrom.empty() && !o.load.empty())
    usageError("--init-from and --load both set the parameters; give one");
  if ((o.saveEvery || o.keep) && o.save.empty())
    usageError("--save-every and --keep need --save DIR");
  if (o.keep && !o.saveEvery)
    usageError("--keep needs --save-every");
  if (!o.dataOrder.empty() && o.data.empty())
    usageError("--data-order needs --data (a token file)");
}

} // namespace

Options parseArgs(int argc, char **argv) {
  Options o;
  // Every option is given at most once: a repeated one (a script that
  // appends "--steps 100" to a command that already has it) would keep
  // its last value silently.
  std::set<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0 && !seen.insert(a).second)
      usageError(a + " given twice");
    auto value = [&]() -> std::string {
      if (i + 1 >= argc || std::strncmp(argv[i + 1], "--", 2) == 0)
        usageError("missing value after " + a);
      // An empty value (an unset shell variable) must not mean "not given".
      if (!*argv[i + 1])
        usageError("empty value after " + a);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (a == "--steps") {
      if (!parseInt(value(), o.steps) || o.steps < 1)
        usageError("--steps needs an integer >= 1");
    } else if (a == "--total-steps") {
      if (!parseInt(value(), o.totalSteps) || o.totalSteps < 1)
        usageError("--total-steps needs an integer >= 1");
    } else if (a == "--seed") {
      int64_t s;
      if (!parseInt(value(), s) || s < 0)
        usageError("--seed needs a non-negative integer");
      o.seed = static_cast<uint64_t>(s);
    } else if (a == "--init-threads") {
      int64_t t;
      if (!parseInt(value(), t) || t < 0 || t > 4096)
        usageError("--init-threads needs an integer in [0, 4096]");
      o.initThreads = static_cast<int>(t);
    } else if (a == "--compiled") {
      o.compiled = value();
    } else if (a == "--dump-params") {
      o.dumpParams = value();
    } else if (a == "--data") {
      o.data = value();
    } else if (a == "--data-order") {
      o.dataOrder = value();
      if (o.dataOrder != "random" && o.dataOrder != "sequential")
        usageError("--data-order needs random or sequential, got '" +
                   o.dataOrder + "'");
    } else if (a == "--init-from") {
      o.initFrom = value();
    } else if (a == "--export") {
      o.exportPath = value();
    } else if (a == "--save") {
      o.save = value();
    } else if (a == "--load") {
      o.load = value();
    } else if (a == "--save-every") {
      if (!parseInt(value(), o.saveEvery) || o.saveEvery < 1)
        usageError("--save-every needs an integer >= 1");
    } else if (a == "--keep") {
      if (!parseInt(value(), o.keep) || o.keep < 1)
        usageError("--keep needs an integer >= 1");
    } else if (a == "--progress") {
      std::string v = value();
      o.progress = fsdp_parse_progress(v.c_str());
      if (o.progress < 0)
        usageError("--progress needs none, test or thread, got '" + v + "'");
    } else if (a == "--progress-interval") {
      std::string v = value();
      size_t colon = v.find(':');
      int64_t lo = 0, hi = 0;
      if (!parseInt(v.substr(0, colon), lo) ||
          (colon != std::string::npos && !parseInt(v.substr(colon + 1), hi)))
        usageError("--progress-interval needs MIN or MIN:MAX microseconds");
      if (colon == std::string::npos)
        hi = std::max<int64_t>(lo, 1000);
      if (lo < 1 || hi < lo || hi > 10000000)
        usageError("--progress-interval needs 1 <= MIN <= MAX <= 1e7 us");
      o.intervalMin = lo * 1e-6;
      o.intervalMax = hi * 1e-6;
    } else if (a == "--timeout") {
      std::string v = value();
      char *end = nullptr;
      o.timeout = std::strtod(v.c_str(), &end);
      if (*end || !(o.timeout > 0) || o.timeout > 1e7)
        usageError("--timeout needs seconds in (0, 1e7], got '" + v + "'");
    } else if (a == "--warmup") {
      if (!parseInt(value(), o.warmup) || o.warmup < 0)
        usageError("--warmup needs an integer >= 0");
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--on-nonfinite") {
      std::string v = value();
      if (v != "stop" && v != "skip")
        usageError("--on-nonfinite needs stop or skip, got '" + v + "'");
      o.skipNonfinite = v == "skip";
    } else if (a == "--loss-scale-init") {
      std::string v = value();
      char *end = nullptr;
      o.lossScaleInit = std::strtod(v.c_str(), &end);
      int exp = 0;
      if (*end || !(o.lossScaleInit > 0) || o.lossScaleInit > 1e300 ||
          std::frexp(o.lossScaleInit, &exp) != 0.5)
        usageError("--loss-scale-init needs a power of two > 0, got '" + v +
                   "'");
    } else if (a == "--loss-scale-growth-interval") {
      if (!parseInt(value(), o.lossScaleGrowthInterval) ||
          o.lossScaleGrowthInterval < 1)
        usageError("--loss-scale-growth-interval needs an integer >= 1");
    } else if (a == "--device") {
      o.device = value();
    } else if (a == "--collectives") {
      o.collectives = value();
      if (o.collectives != "auto" && o.collectives != "mpi" &&
          o.collectives != "nccl")
        usageError("--collectives needs auto, mpi or nccl, got '" +
                   o.collectives + "'");
    } else if (a == "--alloc") {
      std::string v = value();
      if (v == "arena")
        o.alloc = AllocMode::Arena;
      else if (v == "per-buffer")
        o.alloc = AllocMode::PerBuffer;
      else
        usageError("--alloc needs arena or per-buffer, got '" + v + "'");
    } else if (a.size() > 1 && a[0] == '-') {
      usageError("unknown option " + a);
    } else if (o.schedule.empty()) {
      o.schedule = a;
    } else {
      usageError("more than one schedule file given ('" + o.schedule +
                 "' and '" + a + "')");
    }
  }
  checkCombinations(o);
  return o;
}

} // namespace fsdp::tooling
