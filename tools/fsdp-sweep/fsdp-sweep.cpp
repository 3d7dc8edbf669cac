//===- fsdp-sweep.cpp - an architect's table: strategy x world size x bucket
//===//
//
//   fsdp-sweep CONFIG.json --cluster SPEC.json [--world-sizes
//   8,64,512,4096,16384]
//              [--strategies full-shard,...] [--seq T] [--micro-batch b]
//              [--param-dtype bf16] [--unit-numel X,Y] [--bucket-bytes A,B]
//              [--pipeline "..."] [--json PATH]
//
// For one Hugging Face model config, plans every combination of strategy,
// world size, wrap policy and bucket limit with fsdp-pipeline in-process (the
// model is imported once per world size, because the global batch b·N changes,
// and cloned for each plan), then builds the planner's report and simulates the
// step on the cluster through the analysis APIs (buildPlanReport, Simulator):
// exactly what `fsdp-opt --fsdp-pipeline="... cluster=SPEC report=PATH"`
// writes for the same options. Prints one row per plan: peak memory per rank
// and whether it fits the device, predicted step time, tokens/s, MFU,
// exposed communication and the step's distance from its lower bound.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/PlanReport.h"
#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Analysis/StepFunction.h"
#include "fsdp/Import/Import.h"
#include "fsdp/Import/Options.h"
#include "fsdp/InitAll.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::ordered_json;
namespace cl = llvm::cl;

static const char *const kOverview =
    R"(fsdp-sweep: predicted step time, peak memory and MFU of every FSDP strategy, world size
and bucket size for one model on one cluster (an architect's table)

  fsdp-sweep CONFIG.json --cluster SPEC.json [options]

For each world size N the model is imported with global batch b x N (b =
--micro-batch sequences per rank) and planned, for each strategy and wrap
policy, with fsdp-pipeline in-process:
  world-size=N strategy=S policy=block|size [min-unit-numel=X] param-dtype=D
  [shard-size=<devices_per_node> for hybrid-shard] <--pipeline options>
  cluster=SPEC
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

Columns: strategy, world size, shard group size, policy, units, bucket,
peak GiB per rank (the memory plan's peak), fits (peak <= the spec's
memory_bytes: yes or NO), predicted step time (s), tokens/s (global tokens
per step / step time), MFU, exposed communication (s), step / lower bound
(1 is perfect overlap) and the schedule fsdp-schedule applied; all of them
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
static cl::opt<std::string> strategiesOpt(
    "strategies",
    cl::desc("Comma-separated strategies: full-shard, shard-grad-op, "
             "shard-optimizer, no-shard, hybrid-shard (default: all)"),
    cl::value_desc("list"),
    cl::init("full-shard,shard-grad-op,shard-optimizer,no-shard,hybrid-shard"),
    cl::cat(mainCat));
static cl::opt<int64_t>
    seqOpt("seq",
           cl::desc("Sequence length T in tokens (default: fsdp-import's, "
                    "min(1024, max positions))"),
           cl::value_desc("T"), cl::cat(mainCat));
static cl::opt<int64_t>
    microBatchOpt("micro-batch",
                  cl::desc("Sequences per rank b; the global batch is "
                           "b x world size (default 1)"),
                  cl::value_desc("b"), cl::init(1), cl::cat(mainCat));
static cl::opt<std::string>
    paramDtypeOpt("param-dtype",
                  cl::desc("Dtype of gathered parameters and compute: "
                           "f32, bf16 (default) or f16"),
                  cl::init("bf16"), cl::cat(mainCat));
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

static cl::OptionCategory overrideCat("Model overrides (as fsdp-import's)");
static const fsdp_import::ArchitectureOptions archOpts(overrideCat);

static int error(const std::string &msg) {
  llvm::errs() << "fsdp-sweep: error: " << msg << "\n";
  return 1;
}

static constexpr llvm::StringLiteral kStrategies[] = {
    "full-shard", "shard-grad-op", "shard-optimizer", "no-shard",
    "hybrid-shard"};

/// The pipeline options the sweep sets itself (or that would write files per
/// plan).
static constexpr llvm::StringLiteral kReservedOptions[] = {
    "world-size",  "strategy", "shard-size", "policy", "min-unit-numel",
    "param-dtype", "report",   "cluster",    "trace"};

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
    values.push_back(v);
  }
  return values;
}

/// One plan of the sweep: its options and, after it ran, its report or error.
struct Plan {
  int64_t worldSize = 0;
  std::string strategy;
  int64_t shardSize = 0;    // hybrid-shard: ranks per shard group; 0 otherwise
  int64_t minUnitNumel = 0; // policy=size: elements; 0 for policy=block
  int64_t bucketBytes = -1; // fsdp-schedule bucket-bytes (0: off); -1: not set
  std::unique_ptr<PipelineOptions> options;
  std::string optionString; // as fsdp-opt --fsdp-pipeline="..." takes it

  // Results.
  std::string error; // why the plan failed; empty on success
  json report;       // buildPlanReport + addSimulationToReport
  int64_t units = 0;
  int64_t bucketMaxBytes = 0, bucketMeanBytes = 0;
  double planSeconds = 0; // pipeline + report + simulation, wall clock

  /// "block", or "size>=X" with X in short form (3e9 for 3000000000).
  std::string policy() const {
    if (!minUnitNumel)
      return "block";
    int64_t mantissa = minUnitNumel, exponent = 0;
    while (mantissa % 10 == 0) {
      mantissa /= 10;
      ++exponent;
    }
    return "size>=" + (exponent >= 3 ? std::to_string(mantissa) + "e" +
                                           std::to_string(exponent)
                                     : std::to_string(minUnitNumel));
  }
};

/// Largest and mean bytes one all-gather of the planned step function moves
/// (its gathered buffer: a unit's flat parameter, or a bucket of units); for a
/// step without all-gathers (no-shard), one all-reduce (its flat gradient).
static void measureBuckets(ModuleOp module, func::FuncOp fn, Plan &plan) {
  std::vector<int64_t> gathers, allReduces;
  fn.walk([&](Operation *op) {
    if (auto ag = dyn_cast<AllGatherOp>(op))
      gathers.push_back(bufferBytes(ag.getResult()));
    else if (auto ar = dyn_cast<AllReduceOp>(op))
      allReduces.push_back(bufferBytes(ar.getInput()));
  });
  plan.units = llvm::range_size(module.getOps<UnitOp>());
  const std::vector<int64_t> &sizes = gathers.empty() ? allReduces : gathers;
  int64_t total = 0;
  for (int64_t bytes : sizes) {
    plan.bucketMaxBytes = std::max(plan.bucketMaxBytes, bytes);
    total += bytes;
  }
  if (!sizes.empty())
    plan.bucketMeanBytes = total / static_cast<int64_t>(sizes.size());
}

/// Plans `plan` on a clone of `model` in `ctx`; on failure sets plan.error
/// to the first error diagnostic.
static void runPlan(MLIRContext &ctx, ModuleOp model, const ClusterSpec &spec,
                    Plan &plan) {
  auto start = std::chrono::steady_clock::now();
  std::string firstError;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && firstError.empty())
      firstError = diag.str();
    return success();
  });
  auto fail = [&](const char *what) {
    plan.error = firstError.empty() ? std::string(what) : firstError;
  };
  OwningOpRef<ModuleOp> module = model.clone();
  PassManager pm(&ctx);
  buildFSDPPipeline(pm, *plan.options);
  if (failed(pm.run(*module)))
    return fail("the pipeline failed");
  FailureOr<json> report = buildPlanReport(*module);
  if (failed(report))
    return fail("the report could not be built");
  FailureOr<SimResult> sim = Simulator(spec).run(*module);
  if (failed(sim))
    return fail("the simulation failed");
  addSimulationToReport(*report, *sim, spec.name);
  plan.report = std::move(*report);
  measureBuckets(*module, *getStepFunction(*module), plan);
  plan.planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}

/// The `nn.data = "tokens"` argument of the model's forward function
/// (tensor<B x T x i32>), or null.
static Value tokensArgument(ModuleOp model) {
  FailureOr<func::FuncOp> fn = getStepFunction(model);
  if (failed(fn))
    return nullptr;
  for (unsigned a = 0; a < fn->getNumArguments(); ++a)
    if (auto data = fn->getArgAttrOfType<StringAttr>(a, nn::kDataAttr);
        data && data.getValue() == "tokens")
      return fn->getArgument(a);
  return nullptr;
}

/// A worker: one MLIR context, the model of the world size it is on, and the
/// next plan taken from `next` until none is left (plans are ordered by world
/// size, so a worker imports a model about once per world size). `base` has
/// the per-rank batch in `batch`; the model gets batch × world size.
static void worker(std::vector<Plan> &plans, std::atomic<size_t> &next,
                   const fsdp_import::Overrides &base,
                   const ClusterSpec &spec) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext ctx(registry, MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  int64_t worldSize = 0;
  OwningOpRef<ModuleOp> model;
  std::string importError;
  for (size_t i = next++; i < plans.size(); i = next++) {
    Plan &plan = plans[i];
    if (!plan.error.empty()) // its options did not parse
      continue;
    if (plan.worldSize != worldSize) {
      worldSize = plan.worldSize;
      fsdp_import::Overrides ov = base;
      ov.batch = *base.batch * worldSize;
      importError.clear();
      model = fsdp_import::importConfig(&ctx, configPath, ov, importError);
      std::string overflow;
      if (model && failed(fsdp_import::checkSizes(*model, overflow))) {
        importError = configPath + ": " + overflow;
        model = nullptr;
      }
    }
    if (!model) {
      plan.error = "import: " + importError;
      continue;
    }
    runPlan(ctx, *model, spec, plan);
  }
}

static std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

static std::string format(const char *fmt, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

/// Prints the rows as a table with every column padded to its widest cell.
static void printTable(llvm::raw_ostream &os, const std::vector<Plan> &plans,
                       const ClusterSpec &spec, bool bucketLimits) {
  std::vector<std::string> header = {
      "strategy",   "world",           "shard",         "policy",
      "units",      "bucket max/mean", "peak GiB/rank", "fits",
      "step s",     "tokens/s",        "MFU",           "exposed comm s",
      "step/bound", "schedule"};
  std::vector<bool> rightAligned = {false, true, true,  false, true,
                                    true,  true, false, true,  true,
                                    true,  true, true,  false};
  if (bucketLimits) {
    header.insert(header.begin() + 4, "bucket limit");
    rightAligned.insert(rightAligned.begin() + 4, true);
  }
  // A failed plan's reason runs from this column to the end of the line.
  const size_t reasonColumn = bucketLimits ? 5 : 4;
  std::vector<std::vector<std::string>> rows;
  for (const Plan &p : plans) {
    std::vector<std::string> row = {p.strategy, std::to_string(p.worldSize),
                                    p.shardSize ? std::to_string(p.shardSize)
                                                : std::to_string(p.worldSize),
                                    p.policy()};
    if (bucketLimits)
      row.push_back(p.bucketBytes > 0 ? humanBytes(p.bucketBytes)
                                      : std::string("off"));
    if (!p.error.empty()) {
      row.push_back("failed: " + p.error);
      rows.push_back(std::move(row));
      continue;
    }
    const json &r = p.report;
    int64_t peak = r["per_rank"]["peak_bytes"];
    row[2] = std::to_string(r["grid"]["shard_size"].get<int64_t>());
    row.push_back(std::to_string(p.units));
    row.push_back(humanBytes(p.bucketMaxBytes) + " / " +
                  humanBytes(p.bucketMeanBytes));
    double gib = peak / double(int64_t(1) << 30);
    row.push_back(format(gib >= 0.01 ? "%.2f" : "%.2g", gib));
    row.push_back(peak <= spec.memoryBytes ? "yes" : "NO");
    row.push_back(format("%.4g", r["predicted_step_time_s"].get<double>()));
    row.push_back(format("%.0f", r.value("predicted_tokens_per_s", 0.0)));
    row.push_back(format("%.3f", r["mfu"].get<double>()));
    row.push_back(format("%.4g", r["exposed_comm_s"].get<double>()));
    row.push_back(format("%.3f", r.value("step_over_lower_bound", 0.0)));
    row.push_back(r.value("schedule", std::string("-")));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c)
    width[c] = header[c].size();
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size() && c < header.size(); ++c)
      if (!(row.size() == reasonColumn + 1 && c == reasonColumn))
        width[c] = std::max(width[c], row[c].size());
  auto print = [&](const std::vector<std::string> &row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c)
        line += "  ";
      bool last = c + 1 == row.size();
      size_t pad = width[c] > row[c].size() ? width[c] - row[c].size() : 0;
      if (rightAligned[c] &&
          !(row.size() == reasonColumn + 1 && c == reasonColumn))
        line += std::string(pad, ' ') + row[c];
      else
        line += last ? row[c] : row[c] + std::string(pad, ' ');
    }
    os << line << "\n";
  };
  print(header);
  for (const auto &row : rows)
    print(row);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&mainCat, &overrideCat});
  cl::ParseCommandLineOptions(argc, argv, kOverview);
  auto wallStart = std::chrono::steady_clock::now();

  // Model overrides, as fsdp-import validates them.
  fsdp_import::Overrides ov;
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

  // The dimensions of the sweep.
  auto worldSizes = parseIntList("world-sizes", worldSizesOpt,
                                 fsdp_import::kMaxOverride / microBatchOpt);
  if (!worldSizes)
    return 1;
  std::vector<std::string> strategies;
  llvm::SmallVector<llvm::StringRef> items;
  llvm::StringRef(strategiesOpt).split(items, ',');
  for (llvm::StringRef s : items) {
    s = s.trim();
    if (!llvm::is_contained(kStrategies, s))
      return error(
          "--strategies: unknown strategy '" + s.str() +
          "' (known: full-shard, shard-grad-op, shard-optimizer, no-shard, "
          "hybrid-shard)");
    strategies.push_back(s.str());
  }
  std::vector<int64_t> unitNumels = {0}; // 0: policy=block
  if (!unitNumelOpt.empty()) {
    auto sizes = parseIntList("unit-numel", unitNumelOpt, int64_t(1) << 56);
    if (!sizes)
      return 1;
    unitNumels.insert(unitNumels.end(), sizes->begin(), sizes->end());
  }

  std::vector<int64_t> bucketLimits = {-1}; // -1: bucket-bytes not set
  if (!bucketBytesOpt.empty()) {
    bucketLimits.clear();
    llvm::SmallVector<llvm::StringRef> limits;
    llvm::StringRef(bucketBytesOpt).split(limits, ',');
    for (llvm::StringRef item : limits) {
      std::optional<int64_t> bytes = parseByteSize(item.trim());
      if (!bytes)
        return error(
            "--bucket-bytes: '" + item.trim().str() +
            "' is not a byte count (expected a comma-separated list such as "
            "0,500MB,2GiB)");
      bucketLimits.push_back(*bytes);
    }
  }

  // Extra pipeline options: not one the sweep sets, and parseable.
  llvm::SmallVector<llvm::StringRef> words;
  llvm::SplitString(pipelineOpt, words);
  for (llvm::StringRef w : words) {
    llvm::StringRef key = w.split('=').first;
    if (w.contains('=') && (llvm::is_contained(kReservedOptions, key) ||
                            (key == "bucket-bytes" && !bucketBytesOpt.empty())))
      return error(
          "--pipeline: '" + key.str() +
          "' is set by the sweep (world sizes, "
          "strategies, --unit-numel, --bucket-bytes, --param-dtype, --cluster, "
          "--json)");
  }
  {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    PipelineOptions probe;
    if (failed(probe.parseFromString(pipelineOpt, os)))
      return error("--pipeline: not valid fsdp-pipeline options: '" +
                   pipelineOpt + "': " + llvm::StringRef(msg).trim().str());
  }

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
  int64_t params = 0, seq = 0;
  {
    MLIRContext ctx;
    OwningOpRef<ModuleOp> model =
        fsdp_import::importConfig(&ctx, configPath, ov, err);
    if (!model)
      return error(err);
    params = fsdp_import::countParams(*model);
    Value tokens = tokensArgument(*model);
    if (!tokens)
      return error(configPath + ": the imported model has no tokens argument");
    seq = cast<RankedTensorType>(tokens.getType()).getDimSize(1);
  }

  std::unique_ptr<llvm::ToolOutputFile> jsonOut;
  if (!jsonPath.empty()) {
    jsonOut = openOutputFile(jsonPath, &err);
    if (!jsonOut)
      return error(err);
  }

  // Every plan, ordered by world size.
  std::vector<Plan> plans;
  auto addPlan = [&](int64_t n, const std::string &strategy, int64_t minNumel,
                     int64_t bucket) {
    Plan p;
    p.worldSize = n;
    p.strategy = strategy;
    p.minUnitNumel = minNumel;
    p.bucketBytes = bucket;
    std::string o = "world-size=" + std::to_string(n) + " strategy=" + strategy;
    if (strategy == "hybrid-shard") {
      p.shardSize = spec->devicesPerNode;
      o += " shard-size=" + std::to_string(p.shardSize);
    }
    o += minNumel ? " policy=size min-unit-numel=" + std::to_string(minNumel)
                  : std::string(" policy=block");
    if (bucket >= 0)
      o += " bucket-bytes=" + std::to_string(bucket);
    o += " param-dtype=" + paramDtypeOpt;
    if (!pipelineOpt.empty())
      o += " " + pipelineOpt;
    p.options = std::make_unique<PipelineOptions>();
    std::string msg;
    llvm::raw_string_ostream os(msg);
    if (failed(p.options->parseFromString(o, os)))
      p.error = "options: " + llvm::StringRef(msg).trim().str();
    // fsdp-schedule's prefetch=auto picks its schedule with the cost model on
    // the cluster (and within its device memory) as fsdp-opt's cluster= does;
    // the path is set directly, so that any file name works.
    p.options->cluster = clusterPath.getValue();
    p.optionString = o + " cluster=" + clusterPath;
    plans.push_back(std::move(p));
  };
  int64_t skippedHybrid = 0;
  for (int64_t n : *worldSizes)
    for (const std::string &s : strategies) {
      if (s == "hybrid-shard" && n <= spec->devicesPerNode) {
        ++skippedHybrid;
        continue;
      }
      for (int64_t minNumel : unitNumels)
        for (int64_t bucket : bucketLimits)
          addPlan(n, s, minNumel, bucket);
    }

  unsigned jobs =
      jobsOpt ? jobsOpt : std::max(1u, std::thread::hardware_concurrency());
  jobs = std::max<unsigned>(1, std::min<size_t>(jobs, plans.size()));
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t)
    threads.emplace_back(worker, std::ref(plans), std::ref(next), std::cref(ov),
                         std::cref(*spec));
  worker(plans, next, ov, *spec);
  for (std::thread &t : threads)
    t.join();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              wallStart)
                    .count();

  // The table.
  llvm::raw_ostream &os = llvm::outs();
  os << "fsdp-sweep: " << configPath << ": " << params << " parameters, seq "
     << seq << ", " << microBatchOpt
     << (microBatchOpt == 1 ? " sequence" : " sequences")
     << " per rank, param-dtype " << paramDtypeOpt;
  if (!pipelineOpt.empty())
    os << ", pipeline options \"" << pipelineOpt << "\"";
  os << "\n";
  os << "cluster: " << spec->name << ": " << humanBytes(spec->memoryBytes)
     << " (" << format("%.0f", spec->memoryBytes) << " bytes) per device, "
     << spec->devicesPerNode << " devices per node\n\n";
  printTable(os, plans, *spec, !bucketBytesOpt.empty());
  os << "\n";
  if (skippedHybrid)
    os << "hybrid-shard (shard groups of " << spec->devicesPerNode
       << " ranks, one node) left out at world sizes <= "
       << spec->devicesPerNode << "\n";
  double planSum = 0;
  for (const Plan &p : plans)
    planSum += p.planSeconds;
  os << format("%.2f", wall) << " s wall for " << plans.size()
     << (plans.size() == 1 ? " plan (" : " plans (") << jobs
     << (jobs == 1 ? " job" : " jobs") << "; " << format("%.2f", planSum)
     << " s planning and simulating in all)\n";

  if (jsonOut) {
    json rows = json::array();
    for (const Plan &p : plans) {
      json row{{"strategy", p.strategy},
               {"world_size", p.worldSize},
               {"policy", p.minUnitNumel ? "size" : "block"},
               {"min_unit_numel",
                p.minUnitNumel ? json(p.minUnitNumel) : json(nullptr)},
               {"bucket_bytes",
                p.bucketBytes >= 0 ? json(p.bucketBytes) : json(nullptr)},
               {"pipeline", p.optionString}};
      if (!p.error.empty()) {
        row["error"] = p.error;
      } else {
        const json &r = p.report;
        int64_t peak = r["per_rank"]["peak_bytes"];
        row["shard_size"] = r["grid"]["shard_size"];
        row["units"] = p.units;
        row["bucket_max_bytes"] = p.bucketMaxBytes;
        row["bucket_mean_bytes"] = p.bucketMeanBytes;
        row["peak_bytes"] = peak;
        row["fits"] = peak <= spec->memoryBytes;
        row["predicted_step_time_s"] = r["predicted_step_time_s"];
        row["tokens_per_step"] = r.value("tokens_per_step", int64_t(0));
        row["predicted_tokens_per_s"] = r.value("predicted_tokens_per_s", 0.0);
        row["mfu"] = r["mfu"];
        row["exposed_comm_s"] = r["exposed_comm_s"];
        row["lower_bound_s"] = r["lower_bound_s"];
        row["step_over_lower_bound"] = r.value("step_over_lower_bound", 0.0);
        row["schedule"] = r.value("schedule", std::string());
        row["plan_s"] = p.planSeconds;
        row["report"] = r;
      }
      rows.push_back(std::move(row));
    }
    json doc{{"model", configPath.getValue()},
             {"params", params},
             {"cluster", spec->name},
             {"memory_bytes", spec->memoryBytes},
             {"devices_per_node", spec->devicesPerNode},
             {"seq", seq},
             {"micro_batch", microBatchOpt.getValue()},
             {"param_dtype", paramDtypeOpt.getValue()},
             {"pipeline", pipelineOpt.getValue()},
             {"jobs", jobs},
             {"wall_time_s", wall},
             {"rows", std::move(rows)}};
    jsonOut->os() << doc.dump(1) << "\n";
    jsonOut->keep();
  }
  return 0;
}
