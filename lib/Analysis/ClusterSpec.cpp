//===- ClusterSpec.cpp - reading and validating a cluster spec ------------===//
//
// ClusterSpec::load (Simulator.h): the spec's JSON (bench/clusters/*.json,
// keys in fsdp/ClusterSpec.h) read into a ClusterSpec, every value checked;
// a problem is an error naming the file and the field.
//
//===----------------------------------------------------------------------===//
#include "fsdp/ClusterSpec.h"
#include "fsdp/Analysis/CollectiveCurve.h"
#include "fsdp/Analysis/Simulator.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

using namespace mlir;
using namespace mlir::fsdp;
using json = nlohmann::json;
namespace key = ::fsdp::cluster_spec;

namespace {
/// nlohmann's DOM builder that keeps the parse error's message (line,
/// column, what was read) instead of throwing: this library is built
/// without exceptions.
struct RecordingParser : nlohmann::detail::json_sax_dom_parser<json> {
  std::string message;
  explicit RecordingParser(json &out)
      : json_sax_dom_parser(out, /*allow_exceptions=*/false) {}
  template <class Exception>
  bool parse_error(std::size_t position, const std::string &lastToken,
                   const Exception &ex) {
    message = ex.what();
    return json_sax_dom_parser::parse_error(position, lastToken, ex);
  }
};
} // namespace

namespace {
/// Reads the values of a parsed spec into a ClusterSpec, each checked, in the
/// order below; the first problem is kept in `error`, prefixed with the file.
/// Typed reads only: with exceptions off a mistyped value() aborts
/// (nlohmann's JSON_NOEXCEPTION), found by fuzzing (test/fuzz).
class SpecReader {
public:
  SpecReader(const json &j, StringRef path, std::string &error)
      : j(j), path(path), where("cluster spec '" + path.str() + "': "),
        error(error) {}

  bool read(ClusterSpec &s, MLIRContext *ctx) {
    return readName(s) && checkObjects() && readPeaks(s) &&
           readMemoryAndLinks(s) && readCurves(s) && readEfficiencies(s) &&
           readOpEfficiencies(s, ctx) && readHostTerms(s) && readAllocator(s) &&
           readStack(s);
  }

private:
  bool fail(const std::string &what) {
    error = where + what;
    return false;
  }

  /// The key's path in messages: intra_node.latency_s.
  static std::string field(const char *object, const char *k) {
    return std::string(object) + "." + k;
  }

  /// obj[k] as a finite number, positive (or non-negative); `name` is what
  /// messages call it.
  bool number(const json &obj, const char *k, const std::string &name,
              double &out, bool positive = true) {
    if (!obj.is_object() || !obj.contains(k) || !obj[k].is_number())
      return fail("missing or non-numeric '" + name + "'");
    out = obj[k].get<double>();
    if (!(out >= 0) || (positive && !(out > 0)) || !std::isfinite(out))
      return fail("'" + name + "' must be " +
                  (positive ? "positive" : "non-negative"));
    return true;
  }

  bool readName(ClusterSpec &s) {
    if (j.contains(key::kName) && !j[key::kName].is_string())
      return fail(std::string("'") + key::kName + "' must be a string");
    s.name =
        j.contains(key::kName) ? j[key::kName].get<std::string>() : path.str();
    return true;
  }

  /// Every key of `obj` (named `where` in messages, "" at the top level) is
  /// one of `known`: a misspelt key would otherwise leave its value at the
  /// default and change the predictions silently.
  bool onlyKnownKeys(const json &obj, const std::string &where,
                     std::initializer_list<const char *> known) {
    for (const auto &item : obj.items()) {
      const std::string &k = item.key();
      if (llvm::is_contained(known, llvm::StringRef(k)))
        continue;
      std::string list;
      for (const char *e : known)
        list += (list.empty() ? "" : ", ") + std::string(e);
      return fail("'" + (where.empty() ? k : field(where.c_str(), k.c_str())) +
                  "' is not " +
                  (where.empty() ? "a cluster spec" : "an '" + where + "'") +
                  " key (" + list + ")");
    }
    return true;
  }

  bool checkObjects() {
    for (const char *k : {key::kIntraNode, key::kInterNode, key::kEfficiency})
      if (j.contains(k) && !j[k].is_object())
        return fail(std::string("'") + k + "' must be an object");
    if (!onlyKnownKeys(j, "", {key::kName,           key::kPeakFlops,
                               key::kMemoryBytes,    key::kMemoryBandwidth,
                               key::kDevicesPerNode, key::kIntraNode,
                               key::kInterNode,      key::kNicsPerNode,
                               key::kCoresPerNode,   key::kWaitingRankShare,
                               key::kEfficiency,     key::kOpEfficiency,
                               key::kOpCallSeconds,  key::kDispatchOverhead,
                               key::kProgressYield,  key::kStepIoBandwidth,
                               key::kCommOverlap,    key::kCommContention,
                               key::kCollectiveSync, key::kAllocator,
                               key::kStack,          key::kSources,
                               key::kMeasured}))
      return false;
    for (const char *k : {key::kIntraNode, key::kInterNode})
      if (j.contains(k) && !onlyKnownKeys(j[k], k,
                                          {key::kBusBandwidth, key::kLatency,
                                           key::kCollectives, key::kLink}))
        return false;
    if (j.contains(key::kAllocator) && j[key::kAllocator].is_object() &&
        !onlyKnownKeys(j[key::kAllocator], key::kAllocator,
                       {key::kPerStreamPools, key::kWorkspaceBytes,
                        key::kAllocatorSource}))
      return false;
    return !j.contains(key::kEfficiency) ||
           onlyKnownKeys(j[key::kEfficiency], key::kEfficiency,
                         {key::kEffMatmul, key::kEffMatmulHalfK,
                          key::kEffAttention, key::kEffElementwise,
                          key::kEffMemory, key::kEffElementwiseTraffic});
  }

  bool readPeaks(ClusterSpec &s) {
    if (!j.contains(key::kPeakFlops) || !j[key::kPeakFlops].is_object())
      return fail(std::string("missing object '") + key::kPeakFlops +
                  "' (FLOP/s by dtype)");
    const json &peaks = j[key::kPeakFlops];
    for (auto &[dtype, v] : peaks.items()) {
      double x;
      if (!number(peaks, dtype.c_str(), field(key::kPeakFlops, dtype.c_str()),
                  x))
        return false;
      s.peakFlops[dtype] = x;
    }
    if (!s.peakFlops.count(key::kRequiredPeakDtype))
      return fail("missing '" +
                  field(key::kPeakFlops, key::kRequiredPeakDtype) + "'");
    return true;
  }

  bool readMemoryAndLinks(ClusterSpec &s) {
    double dpn;
    const json &intra = j.value(key::kIntraNode, json::object());
    const json &inter = j.value(key::kInterNode, json::object());
    if (!number(j, key::kMemoryBytes, key::kMemoryBytes, s.memoryBytes) ||
        !number(j, key::kMemoryBandwidth, key::kMemoryBandwidth,
                s.memoryBandwidth) ||
        !number(j, key::kDevicesPerNode, key::kDevicesPerNode, dpn) ||
        !number(intra, key::kBusBandwidth,
                field(key::kIntraNode, key::kBusBandwidth), s.intraBandwidth) ||
        !number(intra, key::kLatency, field(key::kIntraNode, key::kLatency),
                s.intraLatency, false) ||
        !number(inter, key::kBusBandwidth,
                field(key::kInterNode, key::kBusBandwidth), s.interBandwidth) ||
        !number(inter, key::kLatency, field(key::kInterNode, key::kLatency),
                s.interLatency, false))
      return false;
    if (dpn != std::floor(dpn) || dpn > double(int64_t(1) << 30))
      return fail(std::string("'") + key::kDevicesPerNode +
                  "' must be an integer in [1, 2^30]");
    s.devicesPerNode = std::max<int64_t>(1, (int64_t)dpn);
    return optionalCount(key::kNicsPerNode, s.nicsPerNode) &&
           optionalCount(key::kCoresPerNode, s.coresPerNode);
  }

  /// The optional top-level integer `k` in [1, 2^30] (left as is when
  /// absent).
  bool optionalCount(const char *k, int64_t &out) {
    if (!j.contains(k))
      return true;
    double x;
    if (!number(j, k, k, x))
      return false;
    if (x != std::floor(x) || x > double(int64_t(1) << 30))
      return fail(std::string("'") + k + "' must be an integer in [1, 2^30]");
    out = (int64_t)x;
    return true;
  }

  /// The links' optional measured curves (CollectiveCurves::parse).
  bool readCurves(ClusterSpec &s) {
    for (auto [link, out] :
         {std::pair<const char *, std::optional<CollectiveCurves> *>{
              key::kIntraNode, &s.intraCurves},
          {key::kInterNode, &s.interCurves}}) {
      if (!j.contains(link) || !j[link].contains(key::kCollectives))
        continue;
      std::string what;
      *out = CollectiveCurves::parse(j[link][key::kCollectives],
                                     field(link, key::kCollectives), what);
      if (!*out)
        return fail(what);
    }
    return true;
  }

  bool readEfficiencies(ClusterSpec &s) {
    const json &eff = j.value(key::kEfficiency, json::object());
    for (auto [k, out] :
         {std::pair<const char *, double *>{key::kEffMatmul, &s.effMatmul},
          {key::kEffAttention, &s.effAttention},
          {key::kEffElementwise, &s.effElementwise},
          {key::kEffMemory, &s.effMemory}}) {
      if (!eff.contains(k))
        continue;
      if (!number(eff, k, field(key::kEfficiency, k), *out))
        return false;
      if (*out > 1)
        return fail("'" + field(key::kEfficiency, k) + "' must be in (0, 1]");
    }
    std::string traffic = field(key::kEfficiency, key::kEffElementwiseTraffic);
    if (eff.contains(key::kEffElementwiseTraffic) &&
        (!number(eff, key::kEffElementwiseTraffic, traffic,
                 s.elementwiseTraffic) ||
         (s.elementwiseTraffic < 1 && !fail("'" + traffic + "' must be >= 1"))))
      return false;
    return !eff.contains(key::kEffMatmulHalfK) ||
           number(eff, key::kEffMatmulHalfK,
                  field(key::kEfficiency, key::kEffMatmulHalfK), s.matmulHalfK,
                  /*positive=*/false);
  }

  /// The optional object `k` of op names -> numbers into `out`: each a
  /// number (> 0 when `positive`, else >= 0) at most `max`; `what` names the
  /// value in the message. With `ctx`, every key must name an op registered
  /// there (a misspelt op would otherwise fall back to its class silently).
  bool readOpMap(const char *k, const char *what, bool positive, double max,
                 std::map<std::string, double> &out, MLIRContext *ctx) {
    if (!j.contains(k))
      return true;
    const json &m = j[k];
    if (!m.is_object())
      return fail(std::string("'") + k + "' must be an object (op name -> " +
                  what + ")");
    for (auto &[op, v] : m.items()) {
      double x;
      std::string name = field(k, op.c_str());
      if (!number(m, op.c_str(), name, x, positive))
        return false;
      if (x > max)
        return fail("'" + name + "' must be in (0, 1]");
      if (ctx && !RegisteredOperationName::lookup(op, ctx))
        return fail("'" + name + "' names no known op");
      out[op] = x;
    }
    return true;
  }

  /// op_call_s (seconds per call, >= 0) and op_efficiency (in (0, 1]).
  bool readOpEfficiencies(ClusterSpec &s, MLIRContext *ctx) {
    return readOpMap(key::kOpCallSeconds, "seconds per call",
                     /*positive=*/false,
                     std::numeric_limits<double>::infinity(), s.opCallSeconds,
                     ctx) &&
           readOpMap(key::kOpEfficiency, "efficiency", /*positive=*/true, 1,
                     s.opEfficiency, ctx);
  }

  /// The optional host terms: absent is 0 (the GPU specs leave them out),
  /// comm_overlap 1.
  bool readHostTerms(ClusterSpec &s) {
    for (auto [k, out, positive] :
         {std::tuple<const char *, double *, bool>{key::kDispatchOverhead,
                                                   &s.dispatchOverhead, false},
          {key::kStepIoBandwidth, &s.stepIoBandwidth, true},
          {key::kProgressYield, &s.progressYield, false},
          {key::kCollectiveSync, &s.collectiveSync, false},
          {key::kCommContention, &s.commContention, false}})
      if (j.contains(k) && !number(j, k, k, *out, positive))
        return false;
    if (j.contains(key::kWaitingRankShare) &&
        !number(j, key::kWaitingRankShare, key::kWaitingRankShare,
                s.waitingRankShare, false))
      return false;
    if (s.waitingRankShare > 1)
      return fail(std::string("'") + key::kWaitingRankShare +
                  "' must be in [0, 1] (a waiting rank's share of a core)");
    if (!j.contains(key::kCommOverlap))
      return true;
    if (!number(j, key::kCommOverlap, key::kCommOverlap, s.commOverlap, false))
      return false;
    if (s.commOverlap > 1)
      return fail(std::string("'") + key::kCommOverlap + "' must be in [0, 1]");
    return true;
  }

  /// The optional allocator object: per_stream_pools (bool, default
  /// false), workspace_bytes (>= 0, default 0), source (a string).
  bool readAllocator(ClusterSpec &s) {
    if (!j.contains(key::kAllocator))
      return true;
    const json &a = j[key::kAllocator];
    if (!a.is_object())
      return fail(std::string("'") + key::kAllocator + "' must be an object");
    s.hasAllocator = true;
    if (a.contains(key::kPerStreamPools)) {
      if (!a[key::kPerStreamPools].is_boolean())
        return fail("'" + field(key::kAllocator, key::kPerStreamPools) +
                    "' must be true or false");
      s.perStreamPools = a[key::kPerStreamPools].get<bool>();
    }
    if (a.contains(key::kAllocatorSource) &&
        !a[key::kAllocatorSource].is_string())
      return fail("'" + field(key::kAllocator, key::kAllocatorSource) +
                  "' must be a string");
    return !a.contains(key::kWorkspaceBytes) ||
           number(a, key::kWorkspaceBytes,
                  field(key::kAllocator, key::kWorkspaceBytes),
                  s.workspaceBytes, /*positive=*/false);
  }

  /// The optional stack object (StackProfile): its bools (default false),
  /// its numbers (each >= 0) and its strings name and source; any other key
  /// is refused (a misspelt one would silently be ignored).
  bool readStack(ClusterSpec &s) {
    if (!j.contains(key::kStack))
      return true;
    const json &st = j[key::kStack];
    if (!st.is_object())
      return fail(std::string("'") + key::kStack + "' must be an object");
    StackProfile &p = s.stack;
    const std::pair<const char *, bool *> bools[] = {
        {key::kStackPerParam, &p.perParamCollectives},
        {key::kStackSyncAtWait, &p.syncAtGatherWait},
        {key::kStackRegather, &p.regatherForRecompute},
        {key::kStackPersistentGather, &p.persistentGather}};
    const std::pair<const char *, double *> numbers[] = {
        {key::kStackPersistence, &p.persistenceThreshold},
        {key::kStackMaxReuse, &p.maxReuseDistance},
        {key::kStackHostCall, &p.hostCallSeconds},
        {key::kStackHostCalls, &p.hostCallsPerRank},
        {key::kStackPersistentCalls, &p.persistentGatherCallsPerRank},
        {key::kStackGatherSerialPasses, &p.gatherSerialPasses},
        {key::kStackGatherCopyPasses, &p.gatherCopyPasses},
        {key::kStackReduceCopyPasses, &p.reduceCopyPasses}};
    for (const auto &item : st.items()) {
      const std::string &k = item.key();
      const json &v = item.value();
      std::string name = field(key::kStack, k.c_str());
      if (k == key::kStackName || k == key::kStackSource) {
        if (!v.is_string())
          return fail("'" + name + "' must be a string");
        continue;
      }
      const auto *b =
          llvm::find_if(bools, [&](auto &e) { return k == e.first; });
      if (b != std::end(bools)) {
        if (!v.is_boolean())
          return fail("'" + name + "' must be true or false");
        *b->second = v.get<bool>();
        continue;
      }
      const auto *n =
          llvm::find_if(numbers, [&](auto &e) { return k == e.first; });
      if (n == std::end(numbers)) {
        std::string known = key::kStackName;
        for (auto &e : bools)
          known += std::string(", ") + e.first;
        for (auto &e : numbers)
          known += std::string(", ") + e.first;
        return fail("'" + name + "' is not a stack key (" + known + ", " +
                    key::kStackSource + ")");
      }
      if (!number(st, n->first, name, *n->second, /*positive=*/false))
        return false;
    }
    return true;
  }

  const json &j;
  StringRef path;
  std::string where;
  std::string &error;
};
} // namespace

std::optional<ClusterSpec> ClusterSpec::load(StringRef path, std::string &error,
                                             MLIRContext *ctx) {
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) {
    error = "cannot read cluster spec '" + path.str() +
            "': " + buf.getError().message();
    return std::nullopt;
  }
  json j;
  RecordingParser parser(j);
  if (!json::sax_parse((*buf)->getBuffer().begin(), (*buf)->getBuffer().end(),
                       &parser) ||
      !parser.message.empty()) {
    error = "cluster spec '" + path.str() +
            "' is not valid JSON: " + parser.message;
    return std::nullopt;
  }
  if (!j.is_object()) {
    error = "cluster spec '" + path.str() + "' is not a JSON object";
    return std::nullopt;
  }
  ClusterSpec s;
  if (!SpecReader(j, path, error).read(s, ctx))
    return std::nullopt;
  return s;
}

double ClusterSpec::oversubscription(int64_t world) const {
  if (coresPerNode <= 0)
    return 1;
  int64_t ranksOnNode = std::min(std::max<int64_t>(world, 1), devicesPerNode);
  return std::max(1.0, double(ranksOnNode) / double(coresPerNode));
}
