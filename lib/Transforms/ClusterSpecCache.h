//===- ClusterSpecCache.h - one read of cluster= for the passes that take it =//
//
// fsdp-schedule (its cost model) and fsdp-memory-plan (the simulated step in
// the report) both take cluster=SPEC.json. The spec is read in the passes'
// initialize(), into a cache that fsdp-pipeline gives to both, so that a
// pipeline reads and validates the file once; a pass run alone has a cache of
// its own. A tool that has read the spec already (fsdp-sweep) hands it to
// fsdp-pipeline, and the given spec then stands for cluster=.
//
// Errors are reported by the pass, where it needs the spec, with its own
// prefix: the same messages, in the same order, as when each pass read the
// file itself.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_TRANSFORMS_CLUSTERSPECCACHE_H
#define FSDP_LIB_TRANSFORMS_CLUSTERSPECCACHE_H

#include "fsdp/Analysis/Simulator.h"
#include "fsdp/Transforms/Passes.h"

#include <memory>
#include <string>

namespace mlir::fsdp {

class ClusterSpecCache {
public:
  ClusterSpecCache() = default;
  /// A cache holding `given` (if not null) in place of any cluster= file.
  explicit ClusterSpecCache(std::shared_ptr<const ClusterSpec> given)
      : given(given != nullptr), spec(std::move(given)) {}

  /// Reads and validates the spec at `path` (op names against `ctx`), unless
  /// it is read already or a spec was given.
  void load(llvm::StringRef path, MLIRContext *ctx) {
    if (given || (loaded && path == loadedPath))
      return;
    loaded = true;
    loadedPath = path.str();
    error.clear();
    std::optional<ClusterSpec> s = ClusterSpec::load(path, error, ctx);
    spec = s ? std::make_shared<const ClusterSpec>(std::move(*s)) : nullptr;
  }

  /// Whether the pass has a cluster: cluster=`path` or a given spec.
  bool hasCluster(llvm::StringRef path) const { return given || !path.empty(); }

  /// The spec, or null with getError() saying why it could not be read.
  const ClusterSpec *get() const { return spec.get(); }
  llvm::StringRef getError() const { return error; }

private:
  bool given = false, loaded = false;
  std::string loadedPath, error;
  std::shared_ptr<const ClusterSpec> spec;
};

/// What fsdp-schedule and fsdp-memory-plan share around cluster=: the cache
/// (fsdp-pipeline's, or the pass's own) and its one read in initialize().
/// `PassBase` is the pass's generated base, `Options` its options struct.
template <typename PassBase, typename Options>
struct ClusterSpecPass : PassBase {
  using PassBase::PassBase;
  ClusterSpecPass(Options options, std::shared_ptr<ClusterSpecCache> specs)
      : PassBase(std::move(options)), clusterSpecs(std::move(specs)) {}

protected:
  /// The spec is read here, once; a bad one is reported where it is needed.
  LogicalResult initialize(MLIRContext *ctx) override {
    if (!this->cluster.empty())
      clusterSpecs->load(this->cluster, ctx);
    return success();
  }

  std::shared_ptr<ClusterSpecCache> clusterSpecs =
      std::make_shared<ClusterSpecCache>();
};

/// fsdp-schedule and fsdp-memory-plan reading cluster= into `specs` (which
/// fsdp-pipeline shares between the two).
std::unique_ptr<Pass>
createFSDPSchedule(FSDPScheduleOptions options,
                   std::shared_ptr<ClusterSpecCache> specs);
std::unique_ptr<Pass>
createFSDPMemoryPlan(FSDPMemoryPlanOptions options,
                     std::shared_ptr<ClusterSpecCache> specs);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_CLUSTERSPECCACHE_H
