//===- Config.cpp - reading a Hugging Face config.json for fsdp-import ----===//
#include "fsdp/Import/Config.h"

#include "llvm/Support/MemoryBuffer.h"

using nlohmann::json;

namespace fsdp_import {

/// Integers larger than this are rejected as dimensions (keeps every numel in
/// int64).
static constexpr int64_t kMaxDim = (int64_t(1) << 31) - 1;

bool ConfigReader::load() {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf) {
    fail("cannot read the config: " + buf.getError().message());
    return false;
  }
  llvm::StringRef text = (*buf)->getBuffer();
  root = json::parse(text.begin(), text.end(), /*cb=*/nullptr,
                     /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    fail("not valid JSON");
    return false;
  }
  if (!root.is_object()) {
    fail("expected a JSON object at the top level");
    return false;
  }
  return true;
}

void ConfigReader::fail(const std::string &msg) {
  if (error.empty())
    error = path + ": " + msg;
}

bool ConfigReader::has(const std::string &key) const {
  auto it = root.find(key);
  return it != root.end() && !it->is_null();
}

const json *ConfigReader::find(const std::string &key) const {
  auto it = root.find(key);
  return it == root.end() || it->is_null() ? nullptr : &*it;
}

std::optional<int64_t> ConfigReader::checkInt(const std::string &key,
                                              const json &v) {
  if (!v.is_number_integer()) {
    fail("key '" + key + "' must be an integer, got " + v.dump());
    return std::nullopt;
  }
  bool tooLarge = v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kMaxDim)
                                         : v.get<int64_t>() > kMaxDim;
  if (tooLarge) {
    fail("key '" + key + "' is too large (at most " + std::to_string(kMaxDim) +
         "), got " + v.dump());
    return std::nullopt;
  }
  if (v.get<int64_t>() < 1) {
    fail("key '" + key + "' must be >= 1, got " + v.dump());
    return std::nullopt;
  }
  return v.get<int64_t>();
}

std::optional<int64_t>
ConfigReader::requireInt(const std::string &key,
                         std::optional<int64_t> override) {
  if (override)
    return override;
  if (!has(key)) {
    fail("missing required key '" + key + "'");
    return std::nullopt;
  }
  return checkInt(key, root[key]);
}

std::optional<int64_t>
ConfigReader::optionalInt(const std::string &key, int64_t dflt,
                          std::optional<int64_t> override) {
  if (override)
    return override;
  if (!has(key))
    return dflt;
  return checkInt(key, root[key]);
}

std::optional<double> ConfigReader::optionalNumber(const std::string &key,
                                                   double dflt, bool positive) {
  if (!has(key))
    return dflt;
  const json &v = root[key];
  if (!v.is_number()) {
    fail("key '" + key + "' must be a number, got " + v.dump());
    return std::nullopt;
  }
  double d = v.get<double>();
  if (positive && !(d > 0)) {
    fail("key '" + key + "' must be > 0, got " + v.dump());
    return std::nullopt;
  }
  return d;
}

std::optional<bool> ConfigReader::optionalBool(const std::string &key,
                                               bool dflt) {
  if (!has(key))
    return dflt;
  const json &v = root[key];
  if (!v.is_boolean()) {
    fail("key '" + key + "' must be true or false, got " + v.dump());
    return std::nullopt;
  }
  return v.get<bool>();
}

std::optional<std::string> ConfigReader::requireString(const std::string &key) {
  if (!has(key)) {
    fail("missing required key '" + key + "'");
    return std::nullopt;
  }
  return optionalString(key, "");
}

std::optional<std::string>
ConfigReader::optionalString(const std::string &key, const std::string &dflt) {
  if (!has(key))
    return dflt;
  const json &v = root[key];
  if (!v.is_string()) {
    fail("key '" + key + "' must be a string, got " + v.dump());
    return std::nullopt;
  }
  return v.get<std::string>();
}

} // namespace fsdp_import
