//===- CompiledStep.cpp - binds and runs a compiled step (STEP.so) --------===//
//
// fsdp::rt::CompiledStep loads fsdp-compile's shared object (fsdp/compiled.h)
// and checks it before the first step; Executor::compiledStep runs one step
// through its fsdp_step: the Executor keeps what it does for an interpreted
// step around the plan (the resident state, staged inputs, carried outputs,
// the final synchronisation), so data, checkpoints, summaries and errors
// are the same on both paths.
//
//===----------------------------------------------------------------------===//
#include "fsdp/CompiledStep.h"
#include "fsdp/Executor.h"
#include "fsdp/compiled.h"
#include "fsdp/runtime.h"
#include "fsdp/schedule/StepPlan.h"

#include <dlfcn.h>
#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace fsdp::rt {

using namespace fsdp::schedule;

namespace {

/// Why `path` is not a whole ELF shared object, or "" if it is one: dlopen
/// maps a truncated file's segments past its end, and the first touch of
/// them is a SIGBUS, so the extents are checked first (<elf.h>, ELF-64).
std::string elfProblem(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "cannot open the file";
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  uint64_t size = bytes.size();
  Elf64_Ehdr eh;
  if (size < sizeof eh)
    return "not an ELF file (" + std::to_string(size) + " bytes)";
  std::memcpy(&eh, bytes.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    return "not an ELF file";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN)
    return "not a 64-bit ELF shared object";
  auto fits = [&](uint64_t off, uint64_t len) {
    return off <= size && len <= size - off;
  };
  if (eh.e_phentsize != sizeof(Elf64_Phdr) ||
      !fits(eh.e_phoff, uint64_t(eh.e_phnum) * eh.e_phentsize) ||
      !fits(eh.e_shoff, uint64_t(eh.e_shnum) * eh.e_shentsize))
    return "truncated (its headers end past the file's " +
           std::to_string(size) + " bytes)";
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && !fits(ph.p_offset, ph.p_filesz))
      return "truncated (a segment ends at byte " +
             std::to_string(ph.p_offset + ph.p_filesz) + " of " +
             std::to_string(size) + ")";
  }
  return "";
}

} // namespace

namespace {

/// The ABI and format versions of a descriptor `d` of `path`.
void checkVersions(const std::string &path, const fsdp_step_descriptor &d) {
  if (d.abi_version != FSDP_STEP_ABI_VERSION)
    throw Error(path + ": compiled step ABI version " +
                std::to_string(d.abi_version) + ", this runtime supports " +
                std::to_string(FSDP_STEP_ABI_VERSION) +
                " (recompile it with this fsdp-compile)");
  if (d.format_version != kVersion)
    throw Error(path + ": the compiled step has schedule format version " +
                std::to_string(d.format_version) + "; this runtime supports " +
                "version " + std::to_string(kVersion) +
                " (recompile it with this fsdp-compile)");
  if (!d.schedule || d.schedule_bytes < 0)
    throw Error(path + ": the compiled step has no schedule document");
}

std::string documentOf(const fsdp_step_descriptor &d) {
  return std::string(d.schedule, static_cast<size_t>(d.schedule_bytes));
}

} // namespace

CompiledStep CompiledStep::open(const std::string &path,
                                int64_t expectedWorldSize, int64_t worldRank) {
  CompiledStep c;
  c.file = path;
  if (std::string why = elfProblem(path); !why.empty())
    throw Error(path + ": cannot load the compiled step: " + why +
                " (a shared object from fsdp-compile is expected)");
  // RTLD_NOW: an unresolved runtime symbol fails here, not mid-step. The
  // handle is never closed: its code may run until the process ends.
  // A bare name is a file here, not a library to search the loader's path
  // for.
  std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void *h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    throw Error(
        path + ": cannot load the compiled step: " + (e ? e : "dlopen failed") +
        " (a shared object from fsdp-compile is expected)");
  }
  auto sym = [&](const std::string &name) {
    dlerror();
    void *p = dlsym(h, name.c_str());
    if (!p)
      throw Error(path + ": not a compiled step: it has no symbol '" + name +
                  "' (fsdp/compiled.h; build it with fsdp-compile)");
    return p;
  };
  auto describe =
      reinterpret_cast<fsdp_step_describe_fn>(sym(FSDP_STEP_DESCRIBE_SYMBOL));
  c.desc = describe();
  checkVersions(path, *c.desc);
  if (expectedWorldSize > 0 && c.desc->world_size != expectedWorldSize)
    throw Error(path + ": the step was compiled for world_size " +
                std::to_string(c.desc->world_size) + " but " +
                std::to_string(expectedWorldSize) +
                " rank(s) are running (mpirun -np " +
                std::to_string(expectedWorldSize) + ")");
  // The job's document gives this rank's stage program, as the JSON file
  // does (Program::fromString); a pipeline's stage then binds its own
  // symbols, whose descriptor must carry the same program.
  c.prog = std::make_shared<Program>(Program::fromString(
      documentOf(*c.desc), expectedWorldSize, path, worldRank));
  std::string suffix;
  if (c.desc->pipeline_stages > 1) {
    int64_t s = c.prog->pipelineStage();
    if (c.desc->pipeline_stage != -1 ||
        c.prog->pipelineStages() != c.desc->pipeline_stages)
      throw Error(path + ": the compiled step's job descriptor disagrees "
                         "with its pipeline document");
    suffix = FSDP_STEP_STAGE_SUFFIX + std::to_string(s);
    c.desc = reinterpret_cast<fsdp_step_describe_fn>(
        sym(FSDP_STEP_DESCRIBE_SYMBOL + suffix))();
    checkVersions(path, *c.desc);
    Program stage = Program::fromString(
        documentOf(*c.desc), 0,
        path + " (" + FSDP_STEP_DESCRIBE_SYMBOL + suffix + ")");
    if (c.desc->pipeline_stages != c.prog->pipelineStages() ||
        c.desc->pipeline_stage != s ||
        c.desc->world_size != c.prog->worldSize() ||
        stage.scheduleFingerprint() != c.prog->scheduleFingerprint())
      throw Error(path + ": the compiled step of pipeline stage " +
                  std::to_string(s) +
                  " is not the stage's program of its job document");
  }
  c.fn = reinterpret_cast<fsdp_step_fn>(sym(FSDP_STEP_SYMBOL + suffix));
  const fsdp_step_descriptor &d = *c.desc;
  const Program &p = *c.prog;
  if (static_cast<int64_t>(p.inputs().size()) != d.num_inputs ||
      static_cast<int64_t>(p.outputs().size()) != d.num_outputs ||
      static_cast<int64_t>(p.instructions().size()) != d.num_instructions ||
      p.plannedArenaBytes() != d.arena_bytes || !p.usesArena())
    throw Error(path + ": the compiled step's descriptor disagrees with its " +
                "schedule (inputs, outputs, instructions or arena)");
  return c;
}

void Executor::useCompiledStep(const CompiledStep &c) {
  const fsdp_step_descriptor &d = c.descriptor();
  if (!arena)
    throw Error(c.path() +
                ": a compiled step runs in arena mode only (--alloc arena)");
  if (d.arena_bytes != arenaSize ||
      d.arena_alignment != prog.arenaAlignment() ||
      d.num_inputs != static_cast<int64_t>(prog.inputs().size()) ||
      d.num_outputs != static_cast<int64_t>(prog.outputs().size()) ||
      d.num_instructions != static_cast<int64_t>(prog.instructions().size()))
    throw Error(c.path() + ": the compiled step is not the Executor's program");
  compiledFn = c.function();
  compiledDesc = &d;
  events.assign(static_cast<size_t>(d.num_events), nullptr);
}

void Executor::compiledStep() {
  std::vector<const void *> in(prog.inputs().size(), nullptr);
  for (size_t i = 0; i < prog.inputs().size(); ++i) {
    const IoDesc &io = prog.inputs()[i];
    if (isStateRole(io.role))
      continue; // at its arena slot already
    if (!written[i])
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role +
                  "'): was not written (Executor::write before step)");
    in[i] = staged[i].data();
  }
  std::vector<void *> out(prog.outputs().size(), nullptr);
  std::fill(events.begin(), events.end(), nullptr);
  stepContext = {dev,       compute,       arena, world,  shard,
                 replicate, events.data(), -1,    tensor, pipeline};
  running.store(kCompiledStep, std::memory_order_relaxed);
  double t0 = fsdp_profile_enabled() ? fsdp_now() : 0;
  int rc = compiledFn(&stepContext, in.data(), out.data());
  if (rc != FSDP_OK) {
    std::string msg = fsdp_last_error();
    int64_t at = stepContext.instruction;
    // Complete what is still in flight, as an interpreted step does.
    for (fsdp_event &e : events)
      if (e) {
        fsdp_wait(e);
        e = nullptr;
      }
    running.store(kIdle, std::memory_order_relaxed);
    throw Error(
        (at >= 0 && at < static_cast<int64_t>(prog.instructions().size())
             ? prog.where(static_cast<size_t>(at))
             : prog.name()) +
        ": " + msg);
  }
  if (fsdp_profile_enabled())
    fsdp_profile_add("(compiled step)", fsdp_now() - t0);
  running.store(kStepEnd, std::memory_order_relaxed);
  lastCollective = -1; // the program's last collective, for the watchdog
  for (size_t i = prog.instructions().size(); i-- > 0 && lastCollective < 0;) {
    const std::string &op = prog.instructions()[i].op;
    if (op == "fsdp.all_gather" || op == "fsdp.reduce_scatter" ||
        op == "fsdp.all_reduce")
      lastCollective = static_cast<int64_t>(i);
  }
  for (size_t j = 0; j < prog.outputs().size(); ++j)
    outputs[prog.outputs()[j].buffer] = out[j];
  finishStep(compiledDesc->peak_bytes);
}

} // namespace fsdp::rt
