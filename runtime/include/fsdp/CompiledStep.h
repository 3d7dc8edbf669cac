//===- CompiledStep.h - a compiled training step, loaded ------------------===//
//
// fsdp::rt::CompiledStep dlopens `fsdp-compile`'s STEP.so (fsdp/compiled.h)
// and checks it before any step; Executor::useCompiledStep runs it. Its
// symbols resolve against the process's runtime (fsdp-run exports the C
// API), so the step's calls reach the same devices and channels.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_COMPILEDSTEP_H
#define FSDP_COMPILEDSTEP_H

#include "fsdp/compiled.h"
#include "fsdp/schedule/Program.h"

#include <memory>
#include <string>

namespace fsdp::rt {

class CompiledStep {
public:
  /// Loads `path` and checks it before any step: a file dlopen refuses (not
  /// a shared object, truncated), a missing fsdp_step or fsdp_step_describe,
  /// another ABI or schedule format version, and another world size than
  /// `expectedWorldSize` (when >= 1) are each an fsdp::Error naming the
  /// file. A pipeline-parallel object binds the step of world rank
  /// `worldRank`'s stage (fsdp_step_stage<s>, fsdp/compiled.h), whose
  /// program must be the job document's stage s. The library stays loaded
  /// for the process's life (a compiled step may be bound to several
  /// Executors).
  static CompiledStep open(const std::string &path,
                           int64_t expectedWorldSize = 0,
                           int64_t worldRank = 0);
  /// The step's schedule (the descriptor's document, validated as a JSON
  /// schedule is; messages name `path`).
  const schedule::Program &program() const { return *prog; }
  const fsdp_step_descriptor &descriptor() const { return *desc; }
  fsdp_step_fn function() const { return fn; }
  const std::string &path() const { return file; }

private:
  std::string file;
  const fsdp_step_descriptor *desc = nullptr;
  fsdp_step_fn fn = nullptr;
  std::shared_ptr<schedule::Program> prog;
};

} // namespace fsdp::rt

#endif // FSDP_COMPILEDSTEP_H
