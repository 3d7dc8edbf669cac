//===- SpecFile.h - cluster specs for the unit tests ------------*- C++ -*-===//
//
// A minimal valid cluster spec (bench/clusters' format, ClusterSpec::load)
// with a test's keys merged in, written to a temporary file: shared by the
// tests of the spec's reader and of the simulator's terms.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TEST_UNIT_SPECFILE_H
#define FSDP_TEST_UNIT_SPECFILE_H

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace fsdp_test {

/// The spec {f32 peak 1e12 FLOP/s, 1e9 bytes of memory at 1e11 B/s, 4
/// devices per node, both links 1e9 B/s and α 1e-6 s} with `extra` merged
/// in (RFC 7386 merge patch), written to the temporary directory as
/// fsdp-curve-NAME.json; returns its path.
inline std::string writeSpec(const std::string &name,
                             const nlohmann::json &extra) {
  nlohmann::json j = nlohmann::json::parse(
      R"({"peak_flops": {"f32": 1e12}, "memory_bytes": 1e9,
      "memory_bandwidth": 1e11, "devices_per_node": 4,
      "intra_node": {"bus_bandwidth": 1e9, "latency_s": 1e-6},
      "inter_node": {"bus_bandwidth": 1e9, "latency_s": 1e-6}})");
  j.merge_patch(extra);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("fsdp-curve-" + name + ".json"))
                         .string();
  std::ofstream(path) << j.dump();
  return path;
}

} // namespace fsdp_test

#endif // FSDP_TEST_UNIT_SPECFILE_H
