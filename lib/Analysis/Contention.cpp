//===- Contention.cpp - compute slowed by overlapped communication --------===//
//
// contendedEnd (fsdp/Analysis/Contention.h): a compute op's end when it runs
// at 1 / (1 + c) of its rate while a collective is in flight.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Analysis/Contention.h"

#include <algorithm>

double mlir::fsdp::contendedEnd(llvm::ArrayRef<std::pair<double, double>> busy,
                                double start, double work, double c) {
  double t = start;
  if (c <= 0)
    return t + work;
  for (auto [begin, end] : busy) {
    if (end <= t)
      continue;
    // Uncontended until the interval begins.
    if (begin > t) {
      if (work <= begin - t)
        return t + work;
      work -= begin - t;
      t = begin;
    }
    // Contended until it ends: (end − t) seconds do (end − t) / (1 + c) work.
    double doable = (end - t) / (1 + c);
    if (work <= doable)
      return t + work * (1 + c);
    work -= doable;
    t = end;
  }
  return t + work;
}
