//===- Spec.h - The cluster spec fsdp-calibrate writes ----------*- C++ -*-===//
//
// The JSON of bench/clusters/*.json (read by ClusterSpec::load,
// lib/Analysis/ClusterSpec.cpp) for one node of `world` ranks:
// devices_per_node = --devices-per-node or max(world, cores), cores_per_node
// = the online cores (rates normalised to a rank with a core to itself),
// the links' measured curves (intra_node.collectives), inter_node =
// intra_node, memory_bytes = physical memory / world,
// plus "sources" (how each value was measured, with the methods' sources)
// and "measured" (every raw measurement).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CALIBRATE_SPEC_H
#define FSDP_CALIBRATE_SPEC_H

#include "fsdp/calibrate/Fit.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace fsdp::calibrate {

/// Everything one run measured and fitted: what the spec is written from.
struct Calibration {
  Kernels kernels; ///< median of the passes, weighted
  KernelFit fit;
  /// op_call_s (fitCallCosts), from the kernels at smallRows rows.
  std::map<std::string, double> callCost;
  int64_t smallRows = 0;
  std::vector<CollPoint> collectives; ///< empty with one rank
  /// α = 0 and B = memory_bandwidth with one rank (no collective).
  RingFit ring;
  Host host;
  Overlap overlap;
  Sync sync;
  Share share;
  Handover handover;
  std::string loadBefore, loadAfter; ///< /proc/loadavg's three averages
  nlohmann::ordered_json blas;       ///< the device's BLAS (fsdp/BlasRecord.h)
};

/// The 1, 5 and 15 minute load averages of /proc/loadavg, or "unknown".
std::string loadAverage();

/// The spec of this machine (rank 0's view: host name, cores, memory).
nlohmann::ordered_json buildSpec(const Options &o, const Machine &mc,
                                 const Calibration &c);

/// The values of `spec` that cannot be right, one line each naming the key,
/// its value and the measurements it came from: a rate (peak_flops,
/// memory_bandwidth, bus_bandwidth, step_io_bandwidth) that is not a
/// positive finite number, an efficiency outside (0, 1], a latency or an
/// overhead below 0, comm_overlap outside [0, 1], a collective time that is
/// not positive. Most are differences or fits of timings, which load can
/// make negative. Empty: the spec is plausible.
std::vector<std::string> implausibleValues(const nlohmann::ordered_json &spec,
                                           const Calibration &c);

/// Writes the spec to `o.out` ("-": stdout; a file: "wrote PATH" on stderr,
/// and an abort of every rank if it cannot be written), then one line of the
/// fitted values on stderr. A spec with implausibleValues is not written:
/// every rank aborts (exit status 1) with each value named.
void writeSpec(const Options &o, const nlohmann::ordered_json &spec,
               const Calibration &c);

} // namespace fsdp::calibrate

#endif // FSDP_CALIBRATE_SPEC_H
