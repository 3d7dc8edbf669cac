//===- PipelineReport.h - fsdp-pipeline's report and trace for pp > 1 -----===//
#ifndef FSDP_LIB_TRANSFORMS_PIPELINEREPORT_H
#define FSDP_LIB_TRANSFORMS_PIPELINEREPORT_H

#include "ClusterSpecCache.h"

namespace mlir::fsdp {

/// After every stage of a pipeline-parallel module is planned: writes the
/// pipeline's report (buildPipelineReport, PipelineSim.h) to `report` (JSON;
/// "-": the table of its busiest stage's report on stdout, then one line
/// per stage) and, with a cluster (`specs`: a given spec, else the file
/// `cluster`), the simulated pipeline's Chrome trace to `trace`. Nothing to
/// write: success. Errors (trace= without a cluster, an unreadable spec, a file
/// that cannot be written, a deadlock) are diagnostics at the module.
LogicalResult writePipelineOutputs(ModuleOp module, ClusterSpecCache &specs,
                                   llvm::StringRef cluster,
                                   llvm::StringRef report,
                                   llvm::StringRef trace);

} // namespace mlir::fsdp

#endif // FSDP_LIB_TRANSFORMS_PIPELINEREPORT_H
