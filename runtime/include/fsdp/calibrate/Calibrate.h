//===- Calibrate.h - Measures this machine as a cluster spec ----*- C++ -*-===//
//
// The library behind fsdp-calibrate: every rank of an MPI job measures the
// runtime's kernels, collectives and interpreter on a "cpu" device at once,
// the measurements are fitted to the simulator's model (lib/Analysis/
// Simulator.cpp: a roofline per op, a ring per collective, host terms), and
// rank 0 writes the result as a cluster spec in the format of
// bench/clusters/*.json. No MLIR dependency.
//
//   Measure.h     timing and rank-reduction primitives, one measured kernel
//   Benchmarks.h  the micro-benchmarks (kernels, collectives, host, overlap)
//   Fit.h         the fits (efficiencies, ring model)
//   Spec.h        the cluster spec JSON written from a Calibration
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CALIBRATE_CALIBRATE_H
#define FSDP_CALIBRATE_CALIBRATE_H

#include <cstdint>
#include <string>

namespace fsdp::calibrate {

/// What to measure: the per-rank shapes of one GPT-2 block of the main job
/// (tools/scripts/run-main.sh at 4 ranks by default) and the time budget.
struct Options {
  std::string out = "-"; ///< where to write the spec; "-": stdout
  double seconds = 0.3;  ///< time budget per measured kernel, seconds
  /// Token rows per rank (batch × seq), hidden size (MLP 4H), sequence
  /// length, attention heads and vocabulary, in elements.
  int64_t rows = 256, hidden = 128, seq = 64, heads = 4, vocab = 256;
  /// Blocks per step: the once-per-step ops count 1/layers in the fits.
  int64_t layers = 4;
  std::string name; ///< the spec's name; empty: one describing the machine
  /// The spec's devices_per_node (the ranks one node runs); 0: max(ranks,
  /// online cores).
  int64_t devicesPerNode = 0;
};

/// Measures this machine with every rank of the job at once and, on rank 0,
/// writes the spec to `o.out` (and a summary to stderr). Call between
/// fsdp_init and fsdp_finalize on every rank. A runtime error aborts every
/// rank (fsdp_abort) with its message.
void runCalibration(const Options &o);

} // namespace fsdp::calibrate

#endif // FSDP_CALIBRATE_CALIBRATE_H
