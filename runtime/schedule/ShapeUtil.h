//===- ShapeUtil.h - shape helpers of the schedule library -----*- C++ -*-===//
#ifndef FSDP_SCHEDULE_SHAPEUTIL_H
#define FSDP_SCHEDULE_SHAPEUTIL_H

#include "fsdp/schedule/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp::schedule {

/// Largest element or byte count a schedule may describe (2^62: sums of a
/// few such counts still fit in int64).
inline constexpr int64_t kMaxCount = int64_t(1) << 62;

/// Number of elements of a shape (1 for a scalar []). Throws Error if a
/// dimension is negative or the product exceeds kMaxCount (a hand-written
/// or corrupted schedule must not overflow into a small size).
inline int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || (d && n > kMaxCount / d))
      throw Error("shape with " + std::string(d < 0
                                                  ? "a negative dimension"
                                                  : "more than 2^62 elements"));
    else
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

} // namespace fsdp::schedule

#endif // FSDP_SCHEDULE_SHAPEUTIL_H
