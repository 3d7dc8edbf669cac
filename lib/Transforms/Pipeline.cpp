//===- Pipeline.cpp - fsdp-pipeline and pass registration -----------------===//
//
// fsdp-pipeline runs the planning passes as a nested pipeline. Its options
// are the passes' own declarations (Passes.td), and each option it is given
// is handed on as the text it was given, `key=value` element by element, to
// every pass that declares it: each pass parses the very string the user
// wrote, with the same parser, so a value arrives exactly (a double printed
// back from the pipeline's parsed value would be rounded to 7 digits).
//
//===----------------------------------------------------------------------===//
#include "ClusterSpecCache.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/ErrorHandling.h"

#define DEBUG_TYPE "fsdp-pipeline"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPIPELINE
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

/// The `key[=value]` elements of a pass option string, split where
/// detail::PassOptions::parseFromString splits them (parseNextArg in
/// mlir/lib/Pass/PassRegistry.cpp): at spaces outside quotes and braces, so
/// that every element parses alone as it did in the whole string.
static SmallVector<StringRef> splitOptions(StringRef text) {
  SmallVector<StringRef> elements;
  const size_t n = text.size();
  // A quote skips to its closing quote, if there is one.
  auto skipQuoted = [&](size_t &i) {
    if (text[i] != '\'' && text[i] != '"')
      return false;
    size_t close = text.find(text[i], i + 1);
    if (close != StringRef::npos)
      i = close;
    return true;
  };
  size_t i = 0;
  while (i < n) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    size_t begin = i;
    while (i < n && text[i] != ' ' && text[i] != '=')
      ++i;
    if (i < n && text[i] == '=') {
      for (++i; i < n && text[i] != ' '; ++i) {
        if (skipQuoted(i) || text[i] != '{')
          continue;
        for (int depth = 1; ++i < n;) {
          if (skipQuoted(i))
            continue;
          if (text[i] == '{')
            ++depth;
          else if (text[i] == '}' && --depth == 0)
            break;
        }
        if (i == n)
          break;
      }
    }
    elements.push_back(text.slice(begin, i));
  }
  return elements;
}

namespace {
struct FSDPPipelinePass : mlir::fsdp::impl::FSDPPipelineBase<FSDPPipelinePass> {
  FSDPPipelinePass() = default;
  explicit FSDPPipelinePass(std::shared_ptr<const ClusterSpec> cluster)
      : givenCluster(std::move(cluster)) {}

  /// Parses `options` into this pass's options, which checks them (unknown
  /// options, bad values: the messages of any pass), and keeps the text to
  /// hand on.
  LogicalResult initializeOptions(
      StringRef options,
      function_ref<LogicalResult(const Twine &)> errorHandler) override {
    if (failed(Base::initializeOptions(options, errorHandler)))
      return failure();
    if (!optionText.empty())
      optionText += ' ';
    optionText += options;
    return success();
  }

  /// The nested pipeline, each FSDP pass given the elements of the option
  /// text that it declares. Every element is some pass's (the pipeline's
  /// options are the passes' declarations), else Passes.td and this list
  /// disagree.
  void buildPipeline(OpPassManager &pm) const {
    auto clusterSpecs = std::make_shared<ClusterSpecCache>(givenCluster);
    pm.addPass(createFSDPAutodiff());
    pm.addPass(createFSDPMicroBatch());
    pm.addPass(createFSDPOptimizer());
    pm.addPass(createFSDPWrap());
    pm.addPass(createFSDPActivationCheckpoint());
    pm.addPass(createFSDPShard());
    pm.addPass(createFSDPCollectives());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createFSDPSchedule({}, clusterSpecs));
    pm.addPass(createFSDPMemoryPlan({}, clusterSpecs));
    for (StringRef element : splitOptions(optionText)) {
      bool taken = false;
      for (Pass &pass : pm.getPasses())
        // A pass without this option says so; a bad value cannot reach here
        // (this pass parsed the same element with the same declaration).
        if (pass.getArgument().starts_with("fsdp-"))
          taken |= succeeded(pass.initializeOptions(
              element, [](const Twine &) { return failure(); }));
      if (!taken)
        llvm::report_fatal_error("fsdp-pipeline: no pass takes option '" +
                                 element + "'");
    }
  }

  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    buildPipeline(pm);
    pm.getDependentDialects(registry);
  }

  void runOnOperation() override {
    OpPassManager pm(ModuleOp::getOperationName());
    buildPipeline(pm);
    LLVM_DEBUG({
      llvm::dbgs() << "fsdp-pipeline runs ";
      pm.printAsTextualPipeline(llvm::dbgs());
      llvm::dbgs() << "\n";
    });
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }

  /// The options as given, in order (later elements override earlier ones,
  /// as in any option string).
  std::string optionText;
  std::shared_ptr<const ClusterSpec> givenCluster;
};
} // namespace

std::unique_ptr<Pass> mlir::fsdp::createFSDPPipeline() {
  return std::make_unique<FSDPPipelinePass>();
}

std::unique_ptr<Pass>
mlir::fsdp::createFSDPPipeline(StringRef options, std::string &error,
                               std::shared_ptr<const ClusterSpec> cluster) {
  auto pass = std::make_unique<FSDPPipelinePass>(std::move(cluster));
  if (failed(pass->initializeOptions(options, [&](const Twine &message) {
        error = message.str();
        return failure();
      })))
    return nullptr;
  return pass;
}

void mlir::fsdp::registerAllFSDPPasses() { registerFSDPPasses(); }
