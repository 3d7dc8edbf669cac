//===- Config.h - reading a Hugging Face config.json for fsdp-import ------===//
//
// A thin layer over nlohmann::json that reads the keys an architecture needs,
// applies command-line overrides first, and records the first error as
// "<file>: <message naming the key>". Built without exceptions: nothing here
// throws (parse errors and type mismatches are checked before any access).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_IMPORT_CONFIG_H
#define FSDP_IMPORT_CONFIG_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace fsdp_import {

/// Command-line overrides; each is set only when its option was given.
struct Overrides {
  std::optional<int64_t> layers, hidden, heads, kvHeads, intermediate, vocab,
      batch, seq;
  /// Element type of parameters and activations: false f32 (default), true f64
  /// (used by tests that check sharded runs to tighter tolerances).
  bool f64 = false;
  /// The loss's precision (fsdp-import --loss-dtype f32): the logits pass an
  /// nn.cast to f32 before nn.cross_entropy, as torchtitan's
  /// cross_entropy(pred.flatten(0, 1).float(), ...) upcasts them; false (the
  /// default): nn.cross_entropy reads the logits in the compute dtype.
  bool lossF32 = false;
};

class ConfigReader {
public:
  explicit ConfigReader(std::string path) : path(std::move(path)) {}

  /// Reads and parses the file; false (with error()) if missing, not JSON or
  /// not an object.
  bool load();

  const std::string &getPath() const { return path; }
  bool has(const std::string &key) const;
  /// The value of `key` if present and not null, else nullptr.
  const nlohmann::json *find(const std::string &key) const;

  /// An integer >= 1: `override` if set, else the key (required).
  std::optional<int64_t>
  requireInt(const std::string &key,
             std::optional<int64_t> override = std::nullopt);
  /// As requireInt, but an absent or null key gives `dflt`.
  std::optional<int64_t>
  optionalInt(const std::string &key, int64_t dflt,
              std::optional<int64_t> override = std::nullopt);
  /// A number (integer or floating point); absent or null gives `dflt`.
  std::optional<double> optionalNumber(const std::string &key, double dflt,
                                       bool positive);
  std::optional<bool> optionalBool(const std::string &key, bool dflt);
  std::optional<std::string> requireString(const std::string &key);
  std::optional<std::string> optionalString(const std::string &key,
                                            const std::string &dflt);

  /// Records `msg` (prefixed with the file name) unless an error is already
  /// recorded.
  void fail(const std::string &msg);
  bool failed() const { return !error.empty(); }
  const std::string &getError() const { return error; }

private:
  std::optional<int64_t> checkInt(const std::string &key,
                                  const nlohmann::json &v);

  std::string path;
  nlohmann::json root;
  std::string error;
};

} // namespace fsdp_import

#endif // FSDP_IMPORT_CONFIG_H
