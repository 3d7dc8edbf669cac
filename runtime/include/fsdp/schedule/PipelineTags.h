//===- PipelineTags.h - MPI tags of pipeline transfers ---------*- C++ -*-===//
//
// The tags of fsdp.send / fsdp.recv that both sides of the format read
// (runtime/docs/schedule-format.md, "Pipeline parallelism"): the compiler
// writes them (lib/Transforms/PipelineSchedule.cpp, kPPTiedTagBase and
// kPPBoundaryTagBase, checked equal in lib/Target/ScheduleJSON.cpp), the
// watchdog decodes them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_PIPELINETAGS_H
#define FSDP_SCHEDULE_PIPELINETAGS_H

#include <cstdint>

namespace fsdp::schedule {

/// The MPI tags of a pipeline's transfers (each boundary is its own rank
/// pair, and MPI matches on communicator, source and tag, so a tag needs
/// only to be unique within one boundary). Tags kPipelineTiedTagBase + i,
/// below kPipelineBoundaryTagBase, exchange the gradient of tied parameter i
/// of the two stages (by FQN; GPT-2's token embedding and LM head on the
/// first and the last stage), once per step; a boundary transfer's tag is
/// kPipelineBoundaryTagBase + ((i * m + j) * 2 + backward) * v + chunk for
/// value i of its boundary, micro-batch j of m, chunk of v.
inline constexpr int64_t kPipelineTiedTagBase = 0;
inline constexpr int64_t kPipelineBoundaryTagBase = 1024;

/// The tag of boundary value `index` of micro-batch `j` of `m`, forward (the
/// activation) or `backward` (its gradient), sent by chunk `chunk` of `v`
/// per rank; sender and receiver compute it alike.
constexpr int64_t pipelineBoundaryTag(int64_t index, int64_t j, int64_t m,
                                      bool backward, int64_t v = 1,
                                      int64_t chunk = 0) {
  return kPipelineBoundaryTagBase +
         ((index * m + j) * 2 + (backward ? 1 : 0)) * v + chunk;
}

/// pipelineBoundaryTag inverted, for a boundary tag (>=
/// kPipelineBoundaryTagBase) of a pipeline with `v` chunks per rank: the
/// direction, the sending chunk and the micro-batch (of `m`).
constexpr bool pipelineTagIsBackward(int64_t tag, int64_t v) {
  return ((tag - kPipelineBoundaryTagBase) / v) % 2 == 1;
}
constexpr int64_t pipelineTagChunk(int64_t tag, int64_t v) {
  return (tag - kPipelineBoundaryTagBase) % v;
}
constexpr int64_t pipelineTagMicroBatch(int64_t tag, int64_t v, int64_t m) {
  return ((tag - kPipelineBoundaryTagBase) / v / 2) % m;
}

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_PIPELINETAGS_H
