//===- CollectiveCurve.h - measured collective time by message size -------===//
//
// A link's collectives priced from measured (bytes, seconds) points per
// kind, nccl-tests style (NVIDIA/nccl-tests doc/PERFORMANCE.md: time by
// size at a fixed rank count), instead of one α-β line: on shared-memory MPI
// and on NCCL the cost per byte of a 64 B message and of a 4 MiB one differ
// by orders of magnitude (protocol switches: eager/rendezvous, LL/LL128/
// Simple), which one α and B cannot fit (fsdp-calibrate's α-β fit over
// 8 KiB..4 MiB was off by up to 68 %). The spec format is in
// docs/collective-model.md; the reader is ClusterSpec::load.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_COLLECTIVECURVE_H
#define FSDP_ANALYSIS_COLLECTIVECURVE_H

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::fsdp {

/// The kinds a curve can be given for, in the spec's key order.
enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, SendRecv };
inline constexpr int kNumCollectiveKinds = 4;
/// The spec's key of a kind: all_gather, reduce_scatter, all_reduce,
/// send_recv.
const char *collectiveKindKey(CollectiveKind k);

/// One link's measured curves: per kind, points (S bytes, t seconds) of one
/// collective over `ranks` ranks (S the full buffer: an all-gather's result,
/// a reduce-scatter's or all-reduce's input; for send_recv one message
/// between two ranks, `ranks` unused), sorted by S, S > 0 strictly
/// increasing, t > 0.
struct CollectiveCurves {
  int64_t ranks = 0;
  std::array<std::vector<std::pair<double, double>>, kNumCollectiveKinds>
      points;

  bool has(CollectiveKind k) const {
    return !points[static_cast<int>(k)].empty();
  }

  /// Seconds of one collective of kind `k` on `bytes` (S) over `groupSize`
  /// (G >= 2) ranks; requires has(k). The measured curve at n = `ranks` is
  /// read as the time of one ring step by the chunk it moves, c = S / n:
  /// τ(c) = t(S) / (n − 1) for all-gather and reduce-scatter, t(S) / (2(n −
  /// 1)) for all-reduce (a ring all-reduce is a reduce-scatter then an
  /// all-gather, 2(n − 1) steps of S / n: Thakur, Rabenseifner & Gropp,
  /// IJHPCA 2005, Sec. 4), and the collective over G ranks is (G − 1)·τ(S /
  /// G), twice that for all-reduce; at G = n this is the measurement
  /// itself. send_recv is t(S) directly. τ is interpolated linearly in
  /// (log c, log τ) between points; below the smallest point it is the
  /// smallest point's τ (the latency floor); beyond the largest it grows
  /// with the last band's marginal seconds per byte (the bandwidth term).
  double time(CollectiveKind k, double bytes, int64_t groupSize) const;

  /// Reads the optional "collectives" object of a link (intra_node or
  /// inter_node; `name` is its key path in messages, e.g.
  /// "intra_node.collectives"). Returns nullopt and sets `error` (naming the
  /// field) when it is malformed: ranks not an integer >= 2 while a
  /// collective kind is given, a kind not an array of >= 2 [bytes, seconds]
  /// pairs, bytes not strictly increasing or not positive, seconds not
  /// positive and finite, an unknown key (a misspelt kind would silently
  /// fall back to α-β).
  static std::optional<CollectiveCurves>
  parse(const nlohmann::json &j, const std::string &name, std::string &error);
};

/// Piecewise log-log interpolation of y(x) through `pts` (sorted by x,
/// x > 0, y > 0): the rules of CollectiveCurves::time for τ(c). Exposed for
/// the unit tests.
double interpolateCurve(const std::vector<std::pair<double, double>> &pts,
                        double x);

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_COLLECTIVECURVE_H
