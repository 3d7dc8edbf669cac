//===- fsdp-import.cpp - HF config.json to an nn forward graph ------------===//
//
//   fsdp-import CONFIG.json -o model.mlir [--layers N] [--hidden N] ...
//   fsdp-import --count-params CONFIG.json [overrides]
//   fsdp-import --count-params model.mlir
//
// Only the graph is built (no weights), so even a 405B-parameter config
// imports in well under a second: nothing is allocated per element.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Import/Import.h"
#include "fsdp/Import/Options.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace fsdp_import;
namespace cl = llvm::cl;

static const char *const kOverview =
    R"(fsdp-import: builds the nn-dialect forward graph of a Hugging Face model config

  fsdp-import CONFIG.json -o model.mlir [overrides]
  fsdp-import --count-params CONFIG.json [overrides]   (prints the parameter count)
  fsdp-import --count-params model.mlir                (counts an imported module)

The output is one function, ready for `fsdp-opt --fsdp-pipeline="world-size=N"`:
  func.func @forward(%tokens: tensor<BxTxi32> {nn.data = "tokens"},
                     %targets: tensor<BxTxi32> {nn.data = "targets"},
                     <parameters, f32, in Hugging Face state_dict order, with
                      nn.param = "<checkpoint FQN>" and nn.init>) -> (tensor<f32> {nn.loss})
returning the mean next-token cross-entropy over the B x T positions (targets
are the tokens already shifted by one). Each op is located at
NameLoc("<module FQN>", CONFIG:1:1); locations are printed (#loc aliases).

Supported model_type values:
  gpt2     keys vocab_size, n_positions, n_embd, n_layer, n_head (required);
           layer_norm_epsilon (1e-5), activation_function ("gelu_new" = tanh
           GELU, default, or "gelu" = erf GELU), n_inner (4 * n_embd),
           tie_word_embeddings (true). Conv1D weights stay [in, out] and are
           used through nn.linear transpose_weight.
  llama, mistral, qwen2
           keys vocab_size, hidden_size, intermediate_size, num_hidden_layers,
           num_attention_heads, max_position_embeddings (required);
           num_key_value_heads (= heads), head_dim (hidden / heads; derived
           also when --hidden or --heads is given), hidden_act (only "silu"),
           rms_norm_eps (1e-6), rope_theta (10000; transformers >= 5 writes
           rope_parameters.rope_theta), tie_word_embeddings (false),
           attention_bias (false; qwen2 always has q/k/v biases and no o_proj
           bias), mlp_bias (false), initializer_range (0.02).
           mistral (and qwen2 with use_sliding_window): sliding_window is not
           modelled (full causal attention),
           which is exact while --seq <= sliding_window; a larger --seq is an
           error. RoPE scaling (rope_scaling, or transformers >= 5's
           rope_parameters): rope_type "linear" (factor), "llama3" (factor,
           low_freq_factor, high_freq_factor, original_max_position_embeddings)
           and "yarn" (factor, original_max_position_embeddings, beta_fast 32,
           beta_slow 1, truncate true, attention_factor or mscale /
           mscale_all_dim) as transformers computes them; any other rope_type
           (dynamic, longrope, ...) is an error.

Overrides replace the config's values before validation. Defaults: --batch 1,
--seq min(1024, n_positions / max_position_embeddings). Errors (missing or
non-JSON file, unknown model_type, missing or non-integer key, indivisible
heads, unsupported activation, an override < 1) name the file and the key,
exit with status 1 and write nothing.
)";

static cl::OptionCategory mainCat("fsdp-import options");
static cl::opt<std::string> inputPath(cl::Positional, cl::Required,
                                      cl::desc("<config.json | model.mlir>"),
                                      cl::cat(mainCat));
static cl::opt<std::string>
    outputPath("o", cl::desc("Output file (default: stdout)"),
               cl::value_desc("file"), cl::init("-"), cl::cat(mainCat));
static cl::opt<bool>
    countOnly("count-params",
              cl::desc("Print the number of parameters (sum of the numel of "
                       "the nn.param arguments) and nothing else; the input "
                       "may also be an imported .mlir module"),
              cl::cat(mainCat));

static cl::OptionCategory overrideCat("Overrides (applied before validation)");
static const fsdp_import::ArchitectureOptions archOpts(overrideCat);
static cl::opt<int64_t> batchOpt("batch",
                                 cl::desc("Global batch size B (default 1)"),
                                 cl::value_desc("N"), cl::cat(overrideCat));
static cl::opt<int64_t>
    seqOpt("seq",
           cl::desc("Sequence length T (default min(1024, max "
                    "positions))"),
           cl::value_desc("N"), cl::cat(overrideCat));

static cl::opt<std::string>
    dtypeOpt("dtype",
             cl::desc("Element type of parameters and activations: "
                      "f32 (default) or f64"),
             cl::init("f32"), cl::cat(overrideCat));

static cl::opt<std::string> lossDtypeOpt(
    "loss-dtype",
    cl::desc("Precision of the loss: \"compute\" (default: nn.cross_entropy "
             "reads the logits in the compute dtype, param-dtype) or f32 (the "
             "logits are cast to f32 first, as torchtitan's "
             "cross_entropy(pred.float()); with a 16-bit param-dtype the f32 "
             "logits and their f32 gradient are planned buffers)"),
    cl::init("compute"), cl::cat(overrideCat));

static int error(const std::string &msg) {
  llvm::errs() << "fsdp-import: error: " << msg << "\n";
  return 1;
}

/// Collects the given overrides; false (with a message) if one is < 1.
static bool readOverrides(Overrides &ov) {
  std::string message;
  if (!archOpts.read(ov, message) ||
      !readOverride(batchOpt, ov.batch, message) ||
      !readOverride(seqOpt, ov.seq, message)) {
    error(message);
    return false;
  }
  if (dtypeOpt != "f32" && dtypeOpt != "f64") {
    error("--dtype must be f32 or f64, got " + dtypeOpt);
    return false;
  }
  ov.f64 = dtypeOpt == "f64";
  if (lossDtypeOpt != "compute" && lossDtypeOpt != "f32") {
    error("--loss-dtype must be compute or f32, got " + lossDtypeOpt);
    return false;
  }
  if (lossDtypeOpt == "f32" && ov.f64) {
    error("--loss-dtype f32 would round the f64 logits; use it with --dtype "
          "f32");
    return false;
  }
  ov.lossF32 = lossDtypeOpt == "f32";
  return true;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions({&mainCat, &overrideCat});
  cl::ParseCommandLineOptions(argc, argv, kOverview);

  DialectRegistry registry;
  registry.insert<nn::NNDialect, func::FuncDialect>();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  OwningOpRef<ModuleOp> module;
  if (countOnly && llvm::StringRef(inputPath).ends_with(".mlir")) {
    llvm::SourceMgr sm;
    SourceMgrDiagnosticHandler handler(sm, &ctx);
    module = parseSourceFile<ModuleOp>(inputPath, sm, ParserConfig(&ctx));
    if (!module)
      return error(inputPath + ": cannot parse the module");
  } else {
    Overrides ov;
    if (!readOverrides(ov))
      return 1;
    std::string err;
    module = importConfig(&ctx, inputPath, ov, err);
    if (!module)
      return error(err);
  }

  // Sizes must stay far from 64-bit overflow: the planner counts bytes of
  // every tensor and of all parameters together (limit 2^56 elements).
  std::string overflow;
  if (failed(checkSizes(*module, overflow)))
    return error(inputPath + ": " + overflow);

  if (countOnly) {
    llvm::outs() << countParams(*module) << "\n";
    return 0;
  }

  std::string errorMessage;
  auto out = openOutputFile(outputPath, &errorMessage);
  if (!out)
    return error(errorMessage);
  OpPrintingFlags flags;
  flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  module->print(out->os(), flags);
  out->keep();
  return 0;
}
