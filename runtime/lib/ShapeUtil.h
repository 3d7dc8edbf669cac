//===- ShapeUtil.h - shape helpers shared by the interpreter's sources ----===//
#ifndef FSDP_RUNTIME_SHAPEUTIL_H
#define FSDP_RUNTIME_SHAPEUTIL_H

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::rt {

/// Number of elements of a shape (1 for a scalar []).
inline int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// "[a, b, c]" for messages.
inline std::string shapeStr(const std::vector<int64_t> &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

} // namespace fsdp::rt

#endif // FSDP_RUNTIME_SHAPEUTIL_H
