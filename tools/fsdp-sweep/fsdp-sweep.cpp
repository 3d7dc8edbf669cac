//===- fsdp-sweep.cpp - strategy x world size x bucket, planned ----------===//
//
//   fsdp-sweep CONFIG.json --cluster SPEC.json [--world-sizes
//   8,64,512,4096,16384]
//              [--strategies full-shard,...] [--seq T] [--micro-batch b]
//              [--param-dtype bf16] [--attention flash]
//              [--unit-numel X,Y] [--bucket-bytes A,B]
//              [--activation-checkpoint none,full,selective,selective-op]
//              [--pipeline "..."] [--json PATH]
//
// For one Hugging Face model config, plans every combination of strategy,
// world size, wrap policy and bucket limit and simulates each on the cluster
// (the FSDPSweep library, fsdp/Sweep/Sweep.h). Prints one row per plan: peak
// memory per rank and whether it fits the device, predicted step time,
// tokens/s, MFU, exposed communication and the step's distance from its lower
// bound. The command line and its checks are here.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Import/Import.h"
#include "fsdp/Import/Options.h"
#include "fsdp/InitAll.h"
#include "fsdp/Sweep/Advisor.h"
#include "fsdp/Sweep/Sweep.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::fsdp;
namespace cl = llvm::cl;

static const char *const kOverview =
    R"(fsdp-sweep: predicted step time, peak memory and MFU of every FSDP strategy, world size
and bucket size for one model on one cluster (an architect's table)

  fsdp-sweep CONFIG.json --cluster SPEC.json [options]

For each world size N and tensor-parallel degree T (--tp, default 1) the
model is imported with global batch b x N / T (b = --micro-batch sequences
per data-parallel rank; the T ranks of a TP group share theirs) and planned,
for each strategy and wrap policy, with fsdp-pipeline in-process:
  world-size=N [tp=T] strategy=S policy=block|size [min-unit-numel=X]
  param-dtype=D [attention=A] [shard-size=<devices_per_node> for hybrid-shard]
  <--pipeline options> cluster=SPEC
then simulated on the cluster: the same report as fsdp-opt's report= with
these options. hybrid-shard takes one node per shard group and is left
out where N <= devices_per_node.

The bucket dimension: in FSDP a unit's flat parameter is what one
all-gather moves, so the wrap policy sets it. `block` is one unit per
transformer block (plus root); each --unit-numel X adds policy=size
min-unit-numel=X. --bucket-bytes A,B (0: off) also plans each policy with
fsdp-schedule's bucket-bytes=A, ... (consecutive units' collectives merged
into one packed collective of at most that many bytes). The table's bucket
column is the largest / mean bytes one all-gather of the planned step moves
(its gathered buffer; for no-shard, which has none, one gradient all-reduce).

--activation-checkpoint none,full,selective,selective-op plans every row once
per mode (fsdp-pipeline's activation-checkpoint=X, column AC); the fits
column says `yes (AC only)` where a row fits and the same row with none does
not.

--pp 1,2,4 plans every row once per pipeline-parallel degree P (and, for
P > 1, per --pp-schedule, default 1f1b): pp=P pp-schedule=S and, unless
--pipeline sets micro-batches=, micro-batches=b x P (the global batch stays
b x N / T: the P stages of a pipeline share b x P sequences); the stages are
simulated against each other (column bubble: the pipeline's bubble
fraction; bound `bubble` when its busiest stage waits on the others longest).

Columns: strategy, world size, shard group size, policy, units, bucket,
peak GiB per rank (the memory plan's peak), fits (peak <= the spec's
memory_bytes: yes or NO), predicted step time (s), tokens/s (global tokens
per step / step time), MFU, exposed communication (s), step / lower bound
(1 is perfect overlap), what bounds the step (memory: it does not fit;
FSDP comm, TP comm or compute: sweep::stepBound) and the schedule
fsdp-schedule applied; with --tp a column tp after the world size (with
--pp, pp "P schedule" after it, and bubble before the bound); all of them
are the report's keys (README.md, "The planner's report"), and --json writes
each row with that whole report. A plan that fails (for example a batch that
does not divide) is a row with the reason. Bad input (missing file,
malformed list, unknown strategy) is an error with exit status 1.
)";

static cl::OptionCategory mainCat("fsdp-sweep options");
static cl::opt<std::string> configPath(cl::Positional, cl::Required,
                                       cl::desc("<Hugging Face config.json>"),
                                       cl::cat(mainCat));
static cl::opt<std::string>
    clusterPath("cluster", cl::Required,
                cl::desc("Cluster spec JSON (bench/clusters/*.json)"),
                cl::value_desc("spec.json"), cl::cat(mainCat));
static cl::opt<std::string>
    worldSizesOpt("world-sizes",
                  cl::desc("Comma-separated world sizes (ranks; default "
                           "8,64,512,4096,16384)"),
                  cl::value_desc("list"), cl::init("8,64,512,4096,16384"),
                  cl::cat(mainCat));
/// "full-shard, shard-grad-op, ...": the fsdp dialect's Strategy cases.
static std::string strategyList(llvm::StringRef sep) {
  std::string s;
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForStrategy(); ++i)
    s += (i ? sep.str() : "") +
         mlir::fsdp::stringifyStrategy(static_cast<mlir::fsdp::Strategy>(i))
             .str();
  return s;
}

static cl::opt<std::string> tpOpt(
    "tp",
    cl::desc("Comma-separated tensor-parallel degrees T (fsdp-pipeline's "
             "tp=T; T adjacent ranks per group; default: not set, T = 1)"),
    cl::value_desc("list"), cl::cat(mainCat));
static cl::opt<std::string> ppOpt(
    "pp",
    cl::desc("Comma-separated pipeline-parallel degrees P (fsdp-pipeline's "
             "pp=P, stages outermost; default: not set, P = 1)"),
    cl::value_desc("list"), cl::cat(mainCat));
static cl::opt<std::string> ppScheduleOpt(
    "pp-schedule",
    cl::desc("Comma-separated pipeline schedules planned for each P > 1: "
             "gpipe, 1f1b, interleaved-1f1b (alone, with --pipeline "
             "\"pp-chunks=v\"; default 1f1b)"),
    cl::value_desc("list"), cl::cat(mainCat));
static cl::opt<std::string> strategiesOpt(
    "strategies",
    cl::desc("Comma-separated strategies: full-shard, shard-grad-op, "
             "shard-optimizer, no-shard, hybrid-shard (default: all)"),
    cl::value_desc("list"), cl::init(strategyList(",")), cl::cat(mainCat));
static cl::opt<int64_t>
    seqOpt("seq",
           cl::desc("Sequence length T in tokens (default: fsdp-import's, "
                    "min(1024, max positions))"),
           cl::value_desc("T"), cl::cat(mainCat));
static cl::opt<int64_t>
    microBatchOpt("micro-batch",
                  cl::desc("Sequences per data-parallel rank b; the global "
                           "batch is b x world size / T (default 1)"),
                  cl::value_desc("b"), cl::init(1), cl::cat(mainCat));
static cl::opt<std::string>
    paramDtypeOpt("param-dtype",
                  cl::desc("Dtype of gathered parameters and compute: "
                           "f32, bf16 (default) or f16"),
                  cl::init("bf16"), cl::cat(mainCat));
static cl::opt<std::string> attentionOpt(
    "attention",
    cl::desc("fsdp-pipeline's attention: the implementation every plan is "
             "priced and its memory planned for: flash (the planner's "
             "default), unfused or unfused-no-dropout"),
    cl::value_desc("impl"), cl::cat(mainCat));
static cl::opt<std::string> unitNumelOpt(
    "unit-numel",
    cl::desc(
        "Comma-separated minimum unit sizes in elements (e.g. 1e9): each adds "
        "policy=size min-unit-numel=X beside policy=block"),
    cl::value_desc("list"), cl::cat(mainCat));
static cl::opt<std::string> bucketBytesOpt(
    "bucket-bytes",
    cl::desc(
        "Comma-separated bucket limits in bytes (0: off; suffixes as "
        "memory-budget's, e.g. 0,500MB,2GiB): each plans every policy with "
        "bucket-bytes=X"),
    cl::value_desc("list"), cl::cat(mainCat));
static cl::opt<std::string> activationCheckpointOpt(
    "activation-checkpoint",
    cl::desc("Comma-separated activation checkpointing modes: none, full, "
             "selective, selective-op (each plans every row with "
             "activation-checkpoint=X; "
             "the fits column marks rows that fit only with it)"),
    cl::value_desc("list"), cl::cat(mainCat));
static cl::opt<std::string> pipelineOpt(
    "pipeline",
    cl::desc(
        "More fsdp-pipeline options, passed through verbatim (e.g. "
        "\"prefetch=fsdp2 max-in-flight=1\"); not the ones the sweep sets"),
    cl::value_desc("options"), cl::cat(mainCat));
static cl::opt<std::string>
    jsonPath("json",
             cl::desc("Also write every row, with the planner's full "
                      "report, as JSON"),
             cl::value_desc("path"), cl::cat(mainCat));
static cl::opt<unsigned>
    jobsOpt("jobs",
            cl::desc("Plans run in parallel, one MLIR context each "
                     "(default: the number of hardware threads)"),
            cl::value_desc("N"), cl::init(0), cl::cat(mainCat));

static cl::OptionCategory advisorCat(
    "The advisor (--gpus with --global-batch-tokens): ranks every layout");
static cl::opt<std::string> gpusOpt(
    "gpus",
    cl::desc("GPU counts to advise on: a comma-separated list, or A..B (the "
             "powers of two from A to B, e.g. 8..16384); needs "
             "--global-batch-tokens"),
    cl::value_desc("list|A..B"), cl::cat(advisorCat));
static cl::opt<int64_t> globalBatchTokensOpt(
    "global-batch-tokens",
    cl::desc("Tokens per optimizer step over all ranks (a multiple of the "
             "sequence length); every layout keeps it"),
    cl::value_desc("tokens"), cl::init(0), cl::cat(advisorCat));
static cl::opt<unsigned>
    topOpt("top", cl::desc("Ranked layouts printed per GPU count (default 3)"),
           cl::value_desc("K"), cl::init(3), cl::cat(advisorCat));
static cl::opt<int64_t> maxMicroBatchesOpt(
    "max-micro-batches",
    cl::desc("The most micro-batches a layout may take (default 16; a plan's "
             "time grows with them)"),
    cl::value_desc("k"), cl::init(16), cl::cat(advisorCat));
static cl::opt<bool>
    pruneOpt("prune",
             cl::desc("Leave out the layouts that proven lower bounds on their "
                      "memory and step time rule out of the ranked top + 1 "
                      "(include/fsdp/Sweep/AdvisorBounds.h; default true, "
                      "--prune=false plans every layout)"),
             cl::init(true), cl::cat(advisorCat));
static cl::opt<std::string> extrapolateDepthsOpt(
    "extrapolate-depths",
    cl::desc("Blocks per pipeline stage d1,d2 of the two reduced depths each "
             "layout is planned at, its report extrapolated to the model's "
             "depth (include/fsdp/Sweep/AdvisorDepth.h; the top + 1 rows of "
             "each GPU count are planned at full depth); 'none' plans every "
             "layout at full depth (default 3,4)"),
    cl::value_desc("d1,d2|none"), cl::init("3,4"), cl::cat(advisorCat));
static cl::opt<bool> planLogOpt(
    "plan-log",
    cl::desc("Print one line per plan to stderr as it finishes: the layout, "
             "the depth planned (at full depth: why not extrapolated), its "
             "wall and thread CPU seconds, device bytes and whether it fits "
             "(where the advisor's time goes)"),
    cl::init(false), cl::cat(advisorCat));
static cl::opt<std::string>
    csvPath("csv", cl::desc("Write every layout (ranked or why not) as CSV"),
            cl::value_desc("path"), cl::cat(advisorCat));

static cl::OptionCategory overrideCat("Model overrides (as fsdp-import's)");
static const fsdp_import::ArchitectureOptions archOpts(overrideCat);

static int error(const std::string &msg) {
  llvm::errs() << "fsdp-sweep: error: " << msg << "\n";
  return 1;
}

/// The pipeline options the sweep sets itself (or that would write files per
/// plan).
static constexpr llvm::StringLiteral kReservedOptions[] = {
    "world-size",     "strategy",    "shard-size", "policy",
    "min-unit-numel", "param-dtype", "report",     "cluster",
    "trace",          "tp",          "pp",         "pp-schedule"};

/// Splits a comma-separated list of positive integers (decimal, or a whole
/// number in exponent form such as 1e9) no larger than `max`.
static std::optional<std::vector<int64_t>>
parseIntList(llvm::StringRef option, llvm::StringRef text, int64_t max) {
  std::vector<int64_t> values;
  llvm::SmallVector<llvm::StringRef> items;
  text.split(items, ',');
  for (llvm::StringRef item : items) {
    item = item.trim();
    int64_t v = 0;
    double d = 0;
    bool ok = !item.empty() && !item.getAsInteger(10, v);
    if (!ok && !item.empty() && !item.getAsDouble(d) && d >= 1 && d <= 9.2e18 &&
        d == std::floor(d)) {
      v = static_cast<int64_t>(d);
      ok = true;
    }
    if (!ok || v < 1 || v > max) {
      error("--" + option.str() + ": '" + item.str() +
            "' is not an integer in [1, " + std::to_string(max) +
            "] (expected a comma-separated list such as " +
            (option == "unit-numel" ? "1e8,1e9" : "8,64,512") + ")");
      return std::nullopt;
    }
    // A repeated value would plan the same layout twice and print it as
    // two rows of the ranking.
    if (llvm::is_contained(values, v)) {
      error("--" + option.str() + ": '" + item.str() + "' is listed twice");
      return std::nullopt;
    }
    values.push_back(v);
  }
  return values;
}

static std::vector<int64_t> advisorGpus;

/// --gpus: "8,64,512" or "A..B", the powers of two A, 2A, ... up to B.
static std::optional<std::vector<int64_t>> parseGpus(llvm::StringRef text) {
  auto [lo, hi] = text.split("..");
  if (text.contains("..")) {
    int64_t a = 0, b = 0;
    if (lo.trim().getAsInteger(10, a) || hi.trim().getAsInteger(10, b) ||
        a < 1 || b < a || b > fsdp_import::kMaxOverride) {
      error("--gpus: '" + text.str() +
            "' is not a range A..B with 1 <= A <= B <= 2^31 - 1 (e.g. "
            "8..16384)");
      return std::nullopt;
    }
    std::vector<int64_t> values;
    for (int64_t n = a; n <= b; n *= 2)
      values.push_back(n);
    return values;
  }
  return parseIntList("gpus", text, fsdp_import::kMaxOverride);
}

/// The advisor's run (fsdp/Sweep/Advisor.h): the table, --json and --csv.
static int runAdvisorMode(const sweep::SweepOptions &so,
                          const ClusterSpec &spec,
                          const sweep::SweepResult &inspected,
                          std::unique_ptr<llvm::ToolOutputFile> jsonOut) {
  sweep::AdvisorOptions o;
  o.sweep = so;
  o.gpus = advisorGpus;
  o.tpDegrees = so.tensorParallel; // --tp, {1} by default
  o.globalBatchTokens = globalBatchTokensOpt;
  o.seq = inspected.seq;
  o.top = topOpt;
  o.maxMicroBatches = maxMicroBatchesOpt;
  o.prune = pruneOpt;
  if (planLogOpt)
    o.planLog = &llvm::errs();
  if (extrapolateDepthsOpt == "none") {
    o.extrapolateDepths.clear();
  } else {
    auto depths = parseIntList("extrapolate-depths", extrapolateDepthsOpt,
                               fsdp_import::kMaxOverride);
    if (!depths)
      return 1;
    if (depths->size() != 2 || (*depths)[0] >= (*depths)[1])
      return error("--extrapolate-depths expects two block counts per stage "
                   "d1 < d2 (such as 3,4) or 'none', got '" +
                   extrapolateDepthsOpt + "'");
    o.extrapolateDepths = *depths;
  }
  if (o.maxMicroBatches < 1)
    return error("--max-micro-batches must be >= 1, got " +
                 std::to_string(o.maxMicroBatches));
  // 0 printed an empty table after planning every layout (minutes for a
  // large model).
  if (o.top < 1)
    return error("--top must be >= 1 (the ranked layouts printed per GPU "
                 "count), got 0");
  if (o.globalBatchTokens % o.seq)
    return error(
        "--global-batch-tokens " + std::to_string(o.globalBatchTokens) +
        " is not a multiple of the sequence length " + std::to_string(o.seq));
  std::string err;
  std::unique_ptr<llvm::ToolOutputFile> csvOut;
  if (!csvPath.empty()) {
    csvOut = openOutputFile(csvPath, &err);
    if (!csvOut)
      return error(err);
  }
  sweep::AdvisorResult r = sweep::runAdvisor(o, spec, jobsOpt);
  r.params = inspected.params;
  sweep::printAdvisor(llvm::outs(), o, spec, r);
  if (jsonOut) {
    jsonOut->os() << sweep::advisorJson(o, spec, r).dump(1) << "\n";
    jsonOut->keep();
  }
  if (csvOut) {
    sweep::writeAdvisorCsv(csvOut->os(), r);
    csvOut->keep();
  }
  if (llvm::none_of(r.layouts,
                    [](const sweep::AdvisedLayout &l) { return l.fits; }))
    return error("no layout fits at any of the GPU counts");
  return 0;
}

/// --activation-checkpoint's modes into o.activationCheckpoints; false after
/// printing the error (an unknown or repeated mode).
static bool readActivationCheckpointModes(sweep::SweepOptions &o) {
  if (!activationCheckpointOpt.getNumOccurrences())
    return true;
  llvm::SmallVector<llvm::StringRef> modes;
  llvm::StringRef(activationCheckpointOpt).split(modes, ',');
  for (llvm::StringRef m : modes) {
    m = m.trim();
    if (!mlir::fsdp::symbolizeActivationCheckpoint(m)) {
      error("--activation-checkpoint: unknown mode '" + m.str() +
            "' (known: none, full, selective, selective-op)");
      return false;
    }
    if (llvm::is_contained(o.activationCheckpoints, m.str())) {
      error("--activation-checkpoint: '" + m.str() + "' is listed twice");
      return false;
    }
    o.activationCheckpoints.push_back(m.str());
  }
  return true;
}

/// The advisor's options: --gpus and --global-batch-tokens together, none of
/// the sweep's own grid options (it searches micro-batches itself); --csv
/// only with them. Sets advisorGpus; false after printing the error.
static bool checkAdvisorOptions(bool advisor) {
  if (!advisor) {
    if (csvPath.getNumOccurrences()) {
      error("--csv is the advisor's (--gpus, --global-batch-tokens)");
      return false;
    }
    return true;
  }
  if (!gpusOpt.getNumOccurrences() || globalBatchTokensOpt <= 0) {
    error("the advisor needs both --gpus and --global-batch-tokens (a "
          "positive number of tokens)");
    return false;
  }
  const cl::Option *sweepOnly[] = {&worldSizesOpt, &microBatchOpt,
                                   &unitNumelOpt};
  for (const cl::Option *opt : sweepOnly)
    if (opt->getNumOccurrences()) {
      error("--" + opt->ArgStr.str() +
            " is a sweep option; the advisor takes --gpus and searches the "
            "micro-batch size for --global-batch-tokens");
      return false;
    }
  auto gpus = parseGpus(gpusOpt);
  if (!gpus)
    return false;
  advisorGpus = *gpus;
  return true;
}

/// --world-sizes, --tp, --pp and --pp-schedule into `o` (each error
/// printed). A list option is read when it is given, so an empty one
/// (--tp "") is refused as any malformed list, not taken for "not set".
static bool parseSizes(sweep::SweepOptions &o) {
  auto worldSizes = parseIntList("world-sizes", worldSizesOpt,
                                 fsdp_import::kMaxOverride / microBatchOpt);
  if (!worldSizes)
    return false;
  o.worldSizes = *worldSizes;
  if (tpOpt.getNumOccurrences()) {
    auto degrees = parseIntList("tp", tpOpt, int64_t(1) << 20);
    if (!degrees)
      return false;
    o.tensorParallel = *degrees;
    o.tensorParallelGiven = true;
  }
  if (ppOpt.getNumOccurrences()) {
    auto degrees = parseIntList("pp", ppOpt, int64_t(1) << 20);
    if (!degrees)
      return false;
    o.pipelineParallel = *degrees;
    o.pipelineParallelGiven = true;
  }
  if (ppScheduleOpt.getNumOccurrences()) {
    if (!ppOpt.getNumOccurrences()) {
      error("--pp-schedule needs --pp");
      return false;
    }
    o.ppSchedules.clear();
    llvm::SmallVector<llvm::StringRef> names;
    llvm::StringRef(ppScheduleOpt).split(names, ',');
    for (llvm::StringRef n : names) {
      n = n.trim();
      if (n != "gpipe" && n != "1f1b" && n != "interleaved-1f1b") {
        error("--pp-schedule: unknown schedule '" + n.str() +
              "' (known: gpipe, 1f1b, interleaved-1f1b)");
        return false;
      }
      if (llvm::is_contained(o.ppSchedules, n.str())) {
        error("--pp-schedule: '" + n.str() + "' is listed twice");
        return false;
      }
      o.ppSchedules.push_back(n.str());
    }
    // Interleaving's virtual stages per rank come with --pipeline
    // "pp-chunks=v", which every plan gets: so it is the only schedule
    // and every degree is a pipeline.
    bool interleaved = llvm::is_contained(o.ppSchedules, "interleaved-1f1b");
    bool chunks = llvm::StringRef(" " + pipelineOpt).contains(" pp-chunks=");
    if (interleaved && (!chunks || o.ppSchedules.size() > 1 ||
                        llvm::is_contained(o.pipelineParallel, int64_t(1)))) {
      error("--pp-schedule interleaved-1f1b needs --pipeline "
            "\"pp-chunks=v\" (virtual stages per rank), no other "
            "schedule beside it and every --pp > 1 (pp-chunks applies to "
            "every plan)");
      return false;
    }
  }
  return true;
}

/// --pipeline's extra options: not one the sweep sets (nor, for the
/// advisor, one it chooses per layout), and parseable; false after an error.
static bool checkPipelineOptions(bool advisor) {
  auto refuse = [](const std::string &msg) {
    error(msg);
    return false;
  };
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(pipelineOpt, words);
  for (llvm::StringRef w : words) {
    if (!w.contains('='))
      continue; // parsePipeline below says what is wrong with it
    llvm::StringRef key = w.split('=').first;
    if (llvm::is_contained(kReservedOptions, key) ||
        (key == "bucket-bytes" && !bucketBytesOpt.empty()) ||
        (key == "activation-checkpoint" && !activationCheckpointOpt.empty()) ||
        (key == "attention" && attentionOpt.getNumOccurrences()))
      return refuse(
          "--pipeline: '" + key.str() +
          "' is set by the sweep (world sizes, --tp, --pp, --pp-schedule, "
          "strategies, --unit-numel, --bucket-bytes, --activation-checkpoint, "
          "--param-dtype, --cluster, --json)");
    // A sweep's plans are whole pipelines (their reports rank them).
    if (key == "pp-plan")
      return refuse("--pipeline: 'pp-plan' is the sweep's: every row is a "
                    "whole pipeline (the advisor screens with pp-plan itself)");
    // The advisor chooses each layout's micro-batches (its search and its
    // bounds assume its own k and accumulation) and split (a pp-split
    // names P - 1 boundaries of one pp degree and one depth).
    if (advisor &&
        (key == "micro-batches" || key == "accumulate" || key == "pp-split"))
      return refuse("--pipeline: '" + key.str() +
                    "' is chosen by the advisor for each layout (--gpus with "
                    "--global-batch-tokens; --max-micro-batches bounds the "
                    "micro-batches)");
  }
  {
    std::string msg;
    if (failed(sweep::parsePipeline(pipelineOpt, /*cluster=*/nullptr, msg)))
      return refuse("--pipeline: not valid fsdp-pipeline options: '" +
                    pipelineOpt + "': " + msg);
  }
  return true;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&mainCat, &advisorCat, &overrideCat});
  cl::ParseCommandLineOptions(argc, argv, kOverview);
  auto wallStart = std::chrono::steady_clock::now();
  sweep::SweepOptions o;
  o.configPath = configPath;
  o.clusterPath = clusterPath;
  o.microBatch = microBatchOpt;
  o.paramDtype = paramDtypeOpt;
  o.attention = attentionOpt;
  o.pipeline = pipelineOpt;

  // Model overrides, as fsdp-import validates them.
  fsdp_import::Overrides &ov = o.overrides;
  std::string message;
  if (!archOpts.read(ov, message) ||
      !fsdp_import::readOverride(seqOpt, ov.seq, message) ||
      !fsdp_import::readOverride(microBatchOpt, ov.batch, message,
                                 /*always=*/true))
    return error(message);
  if (paramDtypeOpt != "f32" && paramDtypeOpt != "bf16" &&
      paramDtypeOpt != "f16")
    return error("--param-dtype must be f32, bf16 or f16, got " +
                 paramDtypeOpt);
  if (attentionOpt.getNumOccurrences() &&
      !mlir::fsdp::symbolizeAttentionImpl(attentionOpt))
    return error("--attention must be flash, unfused or unfused-no-dropout, "
                 "got '" +
                 attentionOpt + "'");

  // The dimensions of the sweep.
  if (!parseSizes(o))
    return 1;
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(strategiesOpt).split(items, ',');
  for (llvm::StringRef s : items) {
    s = s.trim();
    if (!mlir::fsdp::symbolizeStrategy(s))
      return error("--strategies: unknown strategy '" + s.str() +
                   "' (known: " + strategyList(", ") + ")");
    if (llvm::is_contained(o.strategies, s.str()))
      return error("--strategies: '" + s.str() + "' is listed twice");
    o.strategies.push_back(s.str());
  }
  if (unitNumelOpt.getNumOccurrences()) {
    auto sizes = parseIntList("unit-numel", unitNumelOpt, int64_t(1) << 56);
    if (!sizes)
      return 1;
    o.unitNumels.insert(o.unitNumels.end(), sizes->begin(), sizes->end());
  }

  if (bucketBytesOpt.getNumOccurrences()) {
    o.bucketLimitsGiven = true;
    o.bucketLimits.clear();
    llvm::SmallVector<llvm::StringRef> limits;
    llvm::StringRef(bucketBytesOpt).split(limits, ',');
    for (llvm::StringRef item : limits) {
      std::optional<int64_t> bytes = parseByteSize(item.trim());
      if (!bytes)
        return error(
            "--bucket-bytes: '" + item.trim().str() +
            "' is not a byte count (expected a comma-separated list such as "
            "0,500MB,2GiB)");
      o.bucketLimits.push_back(*bytes);
    }
  }

  if (!readActivationCheckpointModes(o))
    return 1;

  // The advisor: --gpus and --global-batch-tokens together.
  const bool advisor =
      gpusOpt.getNumOccurrences() || globalBatchTokensOpt.getNumOccurrences();
  if (!checkAdvisorOptions(advisor))
    return 1;

  if (!checkPipelineOptions(advisor))
    return 1;

  std::string err;
  std::optional<ClusterSpec> spec;
  {
    DialectRegistry registry; // to check the spec's op names
    registerAllDialects(registry);
    MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
    ctx.loadAllAvailableDialects();
    spec = ClusterSpec::load(clusterPath, err, &ctx);
  }
  if (!spec)
    return error(err);

  // Fail early on a bad config (and count its parameters for the title).
  sweep::SweepResult result;
  if (failed(sweep::inspectModel(o, result.params, result.seq, err)))
    return error(err);

  std::unique_ptr<llvm::ToolOutputFile> jsonOut;
  if (!jsonPath.empty()) {
    jsonOut = openOutputFile(jsonPath, &err);
    if (!jsonOut)
      return error(err);
  }

  if (advisor)
    return runAdvisorMode(o, *spec, result, std::move(jsonOut));

  result.plans = sweep::makePlans(o, *spec, result.skippedHybrid);
  result.jobs = sweep::runPlans(result.plans, jobsOpt, o, *spec);
  result.wallSeconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - wallStart)
                           .count();

  sweep::printSweep(llvm::outs(), o, *spec, result);
  if (jsonOut) {
    jsonOut->os() << sweep::sweepJson(o, *spec, result).dump(1) << "\n";
    jsonOut->keep();
  }
  // A row may fail on its own (a configuration that cannot be planned), but
  // when every one does the options are wrong (e.g. a --pipeline value that
  // every pass refuses), not the configurations.
  if (!result.plans.empty() &&
      llvm::all_of(result.plans,
                   [](const sweep::Plan &p) { return !p.error.empty(); }))
    return error("every plan failed; the first: " + result.plans.front().error);
  return 0;
}
