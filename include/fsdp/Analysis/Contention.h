//===- Contention.h - compute slowed by overlapped communication -*- C++
//-*-===//
//
// The simulator's contention model (ClusterSpec::commContention): while a
// collective is in flight on the communication stream, compute on the same
// GPU runs at 1 / (1 + c) of its rate (NCCL's kernels occupy SMs and take
// memory bandwidth; Rashidi et al., "Enabling Compute-Communication Overlap
// in Distributed Deep Learning Training Platforms", ISCA 2021, section 3).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_CONTENTION_H
#define FSDP_ANALYSIS_CONTENTION_H

#include "llvm/ADT/ArrayRef.h"

#include <utility>

namespace mlir::fsdp {

/// When a compute op that starts at `start` (s) and needs `work` seconds of
/// uncontended time ends, given the communication stream's busy intervals
/// `busy` ([begin, end) in s, sorted by begin, not overlapping) and the
/// slowdown `c` >= 0: outside the intervals it progresses at rate 1, inside
/// them at 1 / (1 + c). The result is start + work + B·c/(1 + c), B the busy
/// time within [start, result). c = 0 or no interval: start + work.
double contendedEnd(llvm::ArrayRef<std::pair<double, double>> busy,
                    double start, double work, double c);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_CONTENTION_H
