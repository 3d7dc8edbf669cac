//===- ModelBuilder.h - builds an nn-dialect forward function ------------===//
//
// The architecture files declare parameters (FQN, shape, nn.init) in
// checkpoint order, then emit the forward graph through the op helpers here,
// which compute result types and give every op the location
// NameLoc(<module FQN>, FileLineColLoc(<config path>, 1, 1)).
//
// The function is
//   func.func @forward(%tokens: tensor<BxTxi32> {nn.data = "tokens"},
//                      %targets: tensor<BxTxi32> {nn.data = "targets"},
//                      <parameters> {nn.param = FQN, nn.init = ...})
//       -> (tensor<f32> {nn.loss})
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_MODELBUILDER_H
#define FSDP_IMPORT_MODELBUILDER_H

#include "fsdp/Dialect/NN/NN.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"

#include <string>

namespace fsdp_import {

/// A config's RoPE frequency transform: nn.rope's rope_type and the
/// parameters that type reads (the others keep nn.rope's defaults).
struct RopeScaling {
  std::string type = "default"; ///< default, linear, llama3 or yarn
  double factor = 1.0;
  double lowFreqFactor = 1.0, highFreqFactor = 4.0; ///< llama3
  int64_t originalMaxPositions = 8192;              ///< llama3, yarn
  double betaFast = 32.0, betaSlow = 1.0;           ///< yarn
  bool truncate = true;                             ///< yarn
  double attentionFactor = 1.0;                     ///< yarn
};

/// Formats an `nn.init` normal(std) spec.
std::string normalInit(double stddev);

class ModelBuilder {
public:
  ModelBuilder(mlir::MLIRContext *ctx, llvm::StringRef configPath,
               int64_t batch, int64_t seq, bool f64 = false);

  /// Declares a parameter; only before begin(). Order = argument order.
  void addParam(llvm::StringRef fqn, llvm::ArrayRef<int64_t> shape,
                llvm::StringRef init);
  /// Creates the module and @forward and moves the insertion point into its
  /// body.
  void begin();
  /// Returns `loss`, verifies the module and hands it over.
  mlir::OwningOpRef<mlir::ModuleOp> finish(mlir::Value loss);

  mlir::Value tokens() const { return tokensArg; }
  mlir::Value targets() const { return targetsArg; }
  /// Records that `alias` (a checkpoint FQN, e.g. lm_head.weight) is tied to
  /// the declared parameter `fqn` (nn.tied): one parameter, two names.
  void tie(llvm::StringRef fqn, llvm::StringRef alias);
  /// The argument of a declared parameter (asserts it exists).
  mlir::Value param(llvm::StringRef fqn) const;
  mlir::Location loc(llvm::StringRef module) const;

  // Op helpers; `m` is the FQN of the module the op belongs to.
  mlir::Value embedding(llvm::StringRef m, mlir::Value ids, mlir::Value table);
  mlir::Value positionEmbedding(llvm::StringRef m, mlir::Value x,
                                mlir::Value table);
  mlir::Value linear(llvm::StringRef m, mlir::Value x, mlir::Value w,
                     mlir::Value b = {}, bool transposeWeight = false);
  mlir::Value layerNorm(llvm::StringRef m, mlir::Value x, mlir::Value w,
                        mlir::Value b, double eps);
  mlir::Value rmsNorm(llvm::StringRef m, mlir::Value x, mlir::Value w,
                      double eps);
  mlir::Value rope(llvm::StringRef m, mlir::Value x, int64_t headDim,
                   double theta, const RopeScaling &scaling = {});
  mlir::Value attention(llvm::StringRef m, mlir::Value q, mlir::Value k,
                        mlir::Value v, int64_t heads, int64_t kvHeads);
  llvm::SmallVector<mlir::Value> split(llvm::StringRef m, mlir::Value x,
                                       int64_t axis,
                                       llvm::ArrayRef<int64_t> sizes);
  mlir::Value gelu(llvm::StringRef m, mlir::Value x,
                   mlir::nn::GeluApproximation approximate);
  mlir::Value silu(llvm::StringRef m, mlir::Value x);
  mlir::Value add(llvm::StringRef m, mlir::Value x, mlir::Value y);
  mlir::Value mul(llvm::StringRef m, mlir::Value x, mlir::Value y);
  /// Mean cross-entropy of `logits` [..., V] against `labels`; with
  /// `upcastF32` the logits are first cast to f32 (nn.cast), so that
  /// fsdp-shard's 16-bit compute keeps an f32 copy of them and of their
  /// gradient (torchtitan's loss, pred.float()).
  mlir::Value crossEntropy(llvm::StringRef m, mlir::Value logits,
                           mlir::Value labels, bool upcastF32 = false);

private:
  struct ParamDecl {
    std::string fqn, init;
    llvm::SmallVector<int64_t> shape;
  };

  mlir::MLIRContext *ctx;
  mlir::OpBuilder b;
  mlir::Location fileLoc;
  int64_t batch, seq;
  bool f64;
  llvm::SmallVector<ParamDecl> decls;
  llvm::StringMap<unsigned> argIndex;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  mlir::Value tokensArg, targetsArg;
};

} // namespace fsdp_import

#endif // FSDP_IMPORT_MODELBUILDER_H
