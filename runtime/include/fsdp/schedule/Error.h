//===- Error.h - the error of the runtime side ------------------*- C++ -*-===//
//
// One exception type for everything on the runtime side of fsdp-opt: the
// schedule library (a file that does not parse or validate, a step that
// cannot be planned), the executor and the runtime's tooling. Messages name
// the file, the instruction and its source location. The compiler, built
// without exceptions, reaches the schedule library through its try*
// functions, which return the message instead (Program.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SCHEDULE_ERROR_H
#define FSDP_SCHEDULE_ERROR_H

#include <stdexcept>

namespace fsdp {

/// Every error the runtime side reports.
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An Error that every rank detects alike, from data they exchanged (ranks
/// that disagree on the schedule or the options): one rank reporting it is
/// enough, and the others should let it (fsdp-run has rank 0 report, so
/// that the message is never lost to the abort of another rank).
class CollectiveError : public Error {
public:
  using Error::Error;
};

} // namespace fsdp

#endif // FSDP_SCHEDULE_ERROR_H
