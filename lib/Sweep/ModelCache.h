//===- ModelCache.h - a sweep thread's MLIR context and models -*- C++ -*-===//
//
// fsdp-sweep's advisor (Advisor.cpp) plans on several threads, each in its
// own MLIR context (the pass manager runs a context single-threaded), with
// the model imported once per global batch and depth.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_SWEEP_MODELCACHE_H
#define FSDP_LIB_SWEEP_MODELCACHE_H

#include "fsdp/Import/Import.h"
#include "fsdp/InitAll.h"
#include "fsdp/Sweep/Sweep.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace mlir::fsdp::sweep {

/// A thread's MLIR context and the models it imported, by global batch
/// (sequences) and depth: the only layout-independent step, done once each
/// per context. A context keeps every attribute and type a plan creates
/// (MLIR's uniquer never frees them: each stage's fsdp.memory_plan arrays,
/// its FQN and location strings), so the context and its models are made
/// anew every kPlansPerContext plans. The 405B advisor command's 6,142 plans
/// held 16.4 GB resident with one context per thread, 2.2 GB with renewal.
class ModelCache {
public:
  ModelCache(const SweepOptions &o) : o(o) { renew(); }
  MLIRContext &context() { return *ctx; }
  /// Counts a plan about to be made in this context, first making a new
  /// context (and dropping the models imported into the old one) when the
  /// old one has served kPlansPerContext plans. No op of the old context
  /// may be held across this call.
  void beginPlan() {
    if (plans == kPlansPerContext)
      renew();
    ++plans;
  }
  /// The model of global batch `batch` with `layers` blocks (0: the
  /// config's), or null with `error` set.
  ModuleOp get(int64_t batch, std::string &error, int64_t layers = 0) {
    auto it = models.find({batch, layers});
    if (it == models.end()) {
      fsdp_import::Overrides ov = o.overrides;
      ov.batch = batch;
      if (layers > 0)
        ov.layers = layers;
      std::string err;
      OwningOpRef<ModuleOp> m =
          fsdp_import::importConfig(ctx.get(), o.configPath, ov, err);
      std::string overflow;
      if (m && failed(fsdp_import::checkSizes(*m, overflow))) {
        err = o.configPath + ": " + overflow;
        m = nullptr;
      }
      it = models
               .emplace(std::make_pair(batch, layers),
                        std::make_pair(std::move(m), err))
               .first;
    }
    error = it->second.second;
    return it->second.first ? *it->second.first : ModuleOp();
  }

private:
  static constexpr int64_t kPlansPerContext = 64;
  void renew() {
    models.clear(); // before the context they live in
    DialectRegistry registry;
    registerAllDialects(registry);
    ctx = std::make_unique<MLIRContext>(registry,
                                        MLIRContext::Threading::DISABLED);
    ctx->loadAllAvailableDialects();
    plans = 0;
  }

  const SweepOptions &o;
  std::unique_ptr<MLIRContext> ctx;
  std::map<std::pair<int64_t, int64_t>,
           std::pair<OwningOpRef<ModuleOp>, std::string>>
      models;
  int64_t plans = 0;
};

} // namespace mlir::fsdp::sweep

#endif // FSDP_LIB_SWEEP_MODELCACHE_H
