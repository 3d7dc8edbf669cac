//===- JsonFields.h - Checked integer fields of fsdp-run's JSON inputs ----===//
//
// A checkpoint index is untrusted input (it is fuzzed): its integers are
// read only through these, because nlohmann's get<int64_t>() of a float that
// does not fit is undefined behaviour (found by fuzzing).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TOOLING_JSONFIELDS_H
#define FSDP_TOOLING_JSONFIELDS_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp::tooling {

/// A field of the index with the wrong type or range (parseIndex adds the
/// file's name). nlohmann's get<int64_t>() of a float is undefined
/// behaviour when the float does not fit (found by fuzzing): integers are
/// read only through these.
struct BadField : std::runtime_error {
  using std::runtime_error::runtime_error;
};
inline int64_t intOf(const nlohmann::json &v, const char *what) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)))
    throw BadField(std::string(what) + " must be an integer, got " + v.dump());
  return v.get<int64_t>();
}
inline uint64_t uintOf(const nlohmann::json &v, const char *what) {
  if (!v.is_number_unsigned())
    throw BadField(std::string(what) + " must be a non-negative integer, got " +
                   v.dump());
  return v.get<uint64_t>();
}
inline std::vector<int64_t> intsOf(const nlohmann::json &v, const char *what) {
  if (!v.is_array())
    throw BadField(std::string(what) + " must be a list of integers, got " +
                   v.dump());
  std::vector<int64_t> out;
  for (const nlohmann::json &d : v)
    out.push_back(intOf(d, what));
  return out;
}

} // namespace fsdp::tooling

#endif // FSDP_TOOLING_JSONFIELDS_H
