//===- Program.cpp - queries of a parsed schedule -------------------------===//
//
// fsdp::schedule::Program's lookups, the fingerprints ranks compare before
// they run a schedule together, and the load-time check that an output
// written in place into a state input ("aliases") is safe: nothing reads
// the old state after the instruction that writes the new one.
//
//===----------------------------------------------------------------------===//
#include "fsdp/schedule/Program.h"

#include <algorithm>
#include <unordered_map>

namespace fsdp::schedule {

const AttrValue &Instruction::attr(const char *name) const {
  for (const auto &[key, value] : attrs)
    if (key == name)
      return value;
  throw Error("internal error: op '" + op + "' reads attribute '" + name +
              "', which its definition does not declare");
}

const BufferDesc &Program::buffer(int64_t id) const {
  auto it = bufferMap.find(id);
  if (it == bufferMap.end())
    throw Error(sourceName + ": unknown buffer id " + std::to_string(id));
  return it->second;
}

const UnitDesc *Program::findUnit(const std::string &name) const {
  for (const UnitDesc &u : unitList)
    if (u.name == name)
      return &u;
  return nullptr;
}

const IoDesc *Program::findUnitInput(const std::string &role,
                                     const std::string &unit) const {
  for (const IoDesc &io : inputList)
    if (io.role == role && io.unit == unit)
      return &io;
  return nullptr;
}

int64_t Program::groupSize(Group g) const {
  switch (g) {
  case Group::World:
    return worldSizeValue;
  case Group::Shard:
    return shardSizeValue;
  case Group::Replicate:
    return replicasValue;
  case Group::Tensor:
    return tensorParallelValue;
  case Group::Pipeline:
    return pipelineStagesValue;
  }
  return 1;
}

int64_t Program::numClasses() const {
  for (const Instruction &i : program)
    if (i.kind == OpKind::CrossEntropy ||
        i.kind == OpKind::VocabParallelCeStats) {
      const BufferDesc &l = buffer(i.operands[0]);
      int64_t c = l.shape.empty() ? 1 : l.shape.back();
      // A vocab-parallel head's logits are 1/T of the vocabulary.
      return i.kind == OpKind::CrossEntropy ? c : c * tensorParallelValue;
    }
  // A pipeline stage without the loss (the first): the token embedding's
  // rows, the same vocabulary, so that its synthetic tokens are the ones
  // the last stage's synthetic targets follow.
  for (const Instruction &i : program)
    if (i.kind == OpKind::Embedding && pipelineStagesValue > 1) {
      int64_t rows = buffer(i.operands[1]).shape.front();
      return i.flag("vocab_parallel") ? rows * tensorParallelValue : rows;
    }
  return -1;
}

std::string Program::instructionName(size_t index) const {
  const Instruction &i = program[index];
  return "instruction #" + std::to_string(index) + " '" + i.op + "'" +
         (i.loc.empty() ? "" : " (" + i.loc + ")");
}

std::string Program::where(size_t index) const {
  return sourceName + ": " + instructionName(index);
}

const IoDesc *Program::carriedOutput(int64_t inputBuffer) const {
  const IoDesc *in = nullptr;
  for (const IoDesc &i : inputList)
    if (i.buffer == inputBuffer)
      in = &i;
  if (!in || in->unit.empty() || !isStateRole(in->role))
    return nullptr;
  for (const IoDesc &o : outputList)
    if (o.role == in->role && o.unit == in->unit)
      return &o;
  return nullptr;
}

uint64_t Program::collectiveFingerprint() const {
  uint64_t h = 1469598103934665603ull; // FNV-1a, 64-bit
  auto mix = [&h](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint64_t>(v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const Instruction &in : program) {
    if (in.kind != OpKind::AllGather && in.kind != OpKind::ReduceScatter &&
        in.kind != OpKind::AllReduce)
      continue;
    mix(static_cast<int64_t>(in.kind));
    mix(static_cast<int64_t>(in.group()));
    mix(in.average() ? 1 : 0);
    for (int64_t id : in.operands) {
      mix(static_cast<int64_t>(buffer(id).dtype));
      mix(buffer(id).numel);
    }
    for (int64_t id : in.results)
      mix(buffer(id).numel);
  }
  return h;
}

namespace {

/// Whether operand `j` of the update `ins` is the old value of the state its
/// result `root` replaces: the update reads it element by element before it
/// writes the new one (kernels.h: outputs may alias).
bool updateReadsItsOwnState(const Instruction &ins, size_t j, int64_t root) {
  if (ins.kind != OpKind::AdamwUpdate && ins.kind != OpKind::SgdUpdate)
    return false;
  static const int kAdamwPair[] = {0, -1, 1, 2, -1};
  int pair = ins.kind == OpKind::SgdUpdate ? (j == 0 ? 0 : -1)
                                           : (j < 5 ? kAdamwPair[j] : -1);
  return pair >= 0 && static_cast<size_t>(pair) < ins.results.size() &&
         ins.results[pair] == root;
}

} // namespace

void Program::validateAliases() const {
  for (const IoDesc &o : outputList) {
    // A carried output planned into its state input's slot must be written
    // in place: without `aliases` the two would be live at once.
    if (o.aliases < 0) {
      const IoDesc *in = nullptr;
      for (const IoDesc &i : inputList)
        if (carriedOutput(i.buffer) == &o)
          in = &i;
      if (in && arenaPlanned &&
          buffer(buffer(o.buffer).rootId).arenaOffset ==
              buffer(in->buffer).arenaOffset &&
          buffer(in->buffer).bytes > 0)
        throw Error(
            sourceName + ": output buffer " + std::to_string(o.buffer) +
            " (role '" + o.role + "', unit '" + o.unit +
            "') has the arena_offset of the state input buffer " +
            std::to_string(in->buffer) +
            " it replaces but no \"aliases\": " + std::to_string(in->buffer) +
            " (the memory plan writes it in place)");
      continue;
    }
    std::string ctx = sourceName + ": output buffer " +
                      std::to_string(o.buffer) + " (role '" + o.role + "'" +
                      (o.unit.empty() ? "" : ", unit '" + o.unit + "'") +
                      ") aliases input buffer " + std::to_string(o.aliases);
    const IoDesc *in = nullptr;
    for (const IoDesc &i : inputList)
      if (i.buffer == o.aliases)
        in = &i;
    if (!in || !isStateRole(in->role) || carriedOutput(in->buffer) != &o)
      throw Error(ctx + ", which is not the state input it replaces (an "
                        "input of the same role, unit and layout)");
    const BufferDesc &out = buffer(o.buffer), &root = buffer(out.rootId),
                     &state = buffer(in->buffer);
    if (out.rootOffset != 0 || out.numel != root.numel ||
        root.bytes != state.bytes || root.dtype != state.dtype)
      throw Error(ctx + ", but its memory (buffer " + std::to_string(root.id) +
                  ", " + std::to_string(root.bytes) + " bytes of " +
                  dtypeName(root.dtype) + ") is not exactly the input's (" +
                  std::to_string(state.bytes) + " bytes of " +
                  dtypeName(state.dtype) + ")");
    if (arenaPlanned && root.arenaOffset != state.arenaOffset)
      throw Error(ctx + ", but its arena_offset " +
                  std::to_string(root.arenaOffset) + " differs from the " +
                  "input's " + std::to_string(state.arenaOffset));
    // The instruction that defines the output's memory, and every read of
    // the state input (through views) at or after it.
    int64_t def = -1;
    for (size_t i = 0; i < program.size() && def < 0; ++i)
      for (int64_t r : program[i].results)
        if (r == root.id)
          def = static_cast<int64_t>(i);
    if (def < 0)
      throw Error(ctx + ", but no instruction defines buffer " +
                  std::to_string(root.id));
    for (size_t i = static_cast<size_t>(def); i < program.size(); ++i) {
      const Instruction &ins = program[i];
      for (size_t j = 0; j < ins.operands.size(); ++j) {
        if (buffer(ins.operands[j]).rootId != in->buffer)
          continue;
        if (static_cast<int64_t>(i) == def &&
            updateReadsItsOwnState(ins, j, root.id))
          continue;
        throw Error(ctx + ", but " + instructionName(i) + " reads the input " +
                    (static_cast<int64_t>(i) == def ? "while " : "after ") +
                    instructionName(static_cast<size_t>(def)) +
                    " writes the output");
      }
    }
  }
}

void Program::validateInPlace() const {
  // Each result's defining instruction and each root buffer's last reader,
  // found in one pass over the program rather than two per in_place_of
  // buffer (the scans were quadratic: an interleaved pipeline's 24 MB
  // schedule, pipeline-tag-bound.test's, took fsdp-run minutes to load).
  if (std::none_of(bufferMap.begin(), bufferMap.end(),
                   [](const auto &e) { return e.second.inPlaceOf >= 0; }))
    return;
  std::unordered_map<int64_t, int64_t> definedAt, lastReadAt;
  for (size_t i = 0; i < program.size(); ++i) {
    auto at = static_cast<int64_t>(i);
    for (int64_t r : program[i].results)
      definedAt.try_emplace(r, at);
    for (int64_t o : program[i].operands)
      if (auto it = bufferMap.find(o); it != bufferMap.end())
        lastReadAt[it->second.rootId] = at;
  }
  std::unordered_map<int64_t, const IoDesc *> inputOf; // the first, as listed
  for (const IoDesc &in : inputList)
    inputOf.try_emplace(in.buffer, &in);
  for (const auto &[id, b] : bufferMap) {
    if (b.inPlaceOf < 0)
      continue;
    std::string ctx = sourceName + ": buffer " + std::to_string(id) +
                      " is in_place_of buffer " + std::to_string(b.inPlaceOf);
    auto it = bufferMap.find(b.inPlaceOf);
    if (it == bufferMap.end())
      throw Error(ctx + ", which does not exist");
    const BufferDesc &sum = it->second;
    if (b.viewOf >= 0 || sum.viewOf >= 0 || sum.id == id)
      throw Error(ctx + ": both must be distinct whole buffers (no view_of)");
    if (auto in = inputOf.find(sum.id); in != inputOf.end())
      throw Error(ctx + ", which is an input (role '" + in->second->role +
                  "'): only a buffer the step defines can be written over");
    if (sum.dtype != b.dtype || sum.numel != b.numel)
      throw Error(ctx + ", but that is " + std::to_string(sum.numel) + " " +
                  dtypeName(sum.dtype) + " elements, this " +
                  std::to_string(b.numel) + " " + dtypeName(b.dtype));
    if (arenaPlanned && sum.arenaOffset != b.arenaOffset)
      throw Error(ctx + ", but its arena_offset " +
                  std::to_string(b.arenaOffset) + " differs from that one's " +
                  std::to_string(sum.arenaOffset));
    // The defining nn.add reads it (or a view of it) as operand 0; nothing
    // reads it after.
    auto defined = definedAt.find(id);
    int64_t def = defined == definedAt.end() ? -1 : defined->second;
    const Instruction *add =
        def < 0 ? nullptr : &program[static_cast<size_t>(def)];
    if (!add || add->kind != OpKind::Add || add->operands.empty() ||
        buffer(add->operands[0]).rootId != sum.id ||
        buffer(add->operands[0]).rootOffset != 0 ||
        buffer(add->operands[0]).numel != sum.numel)
      throw Error(ctx + ", but it is not the result of an nn.add whose "
                        "first operand is all of that buffer");
    auto last = lastReadAt.find(sum.id);
    if (last == lastReadAt.end() || last->second <= def)
      continue;
    // A read after the add: the first one, named.
    for (size_t i = static_cast<size_t>(def) + 1; i < program.size(); ++i)
      for (int64_t o : program[i].operands)
        if (buffer(o).rootId == sum.id)
          throw Error(ctx + ", but " + instructionName(i) +
                      " reads that buffer after " +
                      instructionName(static_cast<size_t>(def)) +
                      " writes over it");
  }
}

} // namespace fsdp::schedule
