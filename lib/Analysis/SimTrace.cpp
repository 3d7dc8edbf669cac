//===- SimTrace.cpp - the simulated step as a Chrome trace ----------------===//
#include "fsdp/Analysis/Simulator.h"

using namespace mlir;
using namespace mlir::fsdp;

nlohmann::ordered_json mlir::fsdp::chromeTrace(const SimResult &r,
                                               StringRef clusterName) {
  using ojson = nlohmann::ordered_json;
  ojson events = ojson::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"tid", 0},
                    {"args", {{"name", "rank 0 on " + clusterName.str()}}}});
  const char *streams[] = {"compute", "communication",
                           "tensor-parallel communication (blocking)",
                           "pipeline transfers received"};
  int numStreams = 2;
  for (const SimEvent &e : r.events)
    numStreams = std::max(numStreams, e.stream + 1);
  for (int s = 0; s < numStreams; ++s) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", s},
                      {"args", {{"name", streams[s]}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", s},
                      {"args", {{"sort_index", s}}}});
  }
  for (const SimEvent &e : r.events)
    events.push_back({{"name", e.name},
                      {"cat", e.stream == 3                        ? "p2p"
                              : e.stream == 2                      ? "tp_comm"
                              : e.stream                           ? "comm"
                              : e.name.rfind("wait ", 0) == 0      ? "stall"
                              : e.name.rfind("host: ", 0) == 0     ? "host"
                              : e.name.rfind("recompute ", 0) == 0 ? "recompute"
                                                                   : "compute"},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", e.stream},
                      {"ts", e.start * 1e6},
                      {"dur", e.duration * 1e6},
                      {"args", {{"flops", e.flops}, {"bytes", e.bytes}}}});
  return ojson{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}
