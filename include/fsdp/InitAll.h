//===- InitAll.h - one place that registers every dialect and pass --------===//
//
// Shared by fsdp-opt, fsdp-sweep and the unit tests (as Triton's
// RegisterTritonDialects.h), so that every tool sees the same IR
// (fsdp-translate's translation registers the dialects it reads itself, in
// lib/Target). The passes: those of Passes.td, fsdp-pipeline among them, and
// upstream canonicalize and cse.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITALL_H
#define FSDP_INITALL_H

#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::fsdp {

inline void registerAllDialects(DialectRegistry &registry) {
  registry.insert<nn::NNDialect, FSDPDialect, func::FuncDialect,
                  arith::ArithDialect, tensor::TensorDialect>();
}

inline void registerAllPasses() {
  registerAllFSDPPasses();
  registerCanonicalizerPass();
  registerCSEPass();
}

} // namespace mlir::fsdp

#endif // FSDP_INITALL_H
