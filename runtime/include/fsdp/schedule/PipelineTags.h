//===- PipelineTags.h - MPI tags of pipeline transfers ---------*- C++ -*-===//
//
// The tags of fsdp.send / fsdp.recv that both sides of the format read
// (runtime/docs/schedule-format.md, "Pipeline parallelism"): the compiler
// writes them (lib/Transforms/PipelineSchedule.cpp, kPPTiedTagBase, checked
// equal in lib/Target/ScheduleJSON.cpp), the watchdog decodes them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_PIPELINETAGS_H
#define FSDP_SCHEDULE_PIPELINETAGS_H

#include <cstdint>

namespace fsdp::schedule {

/// The first MPI tag of the tied weights' gradient exchange between two
/// pipeline stages (GPT-2's token embedding and LM head on the first and
/// the last stage): tag kPipelineTiedTagBase + i exchanges the gradient of
/// tied parameter i of the two stages (by FQN), once per step. The boundary
/// transfers' tags stay below it; 2^15 - 2^10 leaves them most of
/// MPI_TAG_UB's guaranteed 0..32767 and 1024 tied parameters the rest.
inline constexpr int64_t kPipelineTiedTagBase = (1 << 15) - (1 << 10);

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_PIPELINETAGS_H
