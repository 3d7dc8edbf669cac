//===- Executor.cpp - the executor's state, inputs and outputs ------------===//
//
// fsdp::rt::Executor around its steps: the grid's channels, the arena, the
// resident training state, host values in and out of device memory, and the
// end of a step (the carried state, the final synchronisation). The step
// itself -- the plan interpreted -- is in ExecutorStep.cpp; a compiled one
// in CompiledStep.cpp.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Executor.h"
#include "Driver.h"
#include "EntryPoints.h"
#include "fsdp/Device.h"

#include "fsdp/Half.h"
#include "fsdp/runtime.h"

#include <cstring>

namespace fsdp::rt {

using namespace fsdp::schedule;

namespace {

void check(int rc) {
  if (rc != FSDP_OK)
    throw Error(fsdp_last_error());
}

// Host values (double) to n elements of dtype t at dst, the dtype switch
// outside the loop; bf16/f16 through f32, so that a host value equals
// nn.cast of its f32 rounding.
void toBytes(const double *v, int64_t n, DType t, void *dst) {
  switch (t) {
  case DType::F32: {
    float *d = static_cast<float *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<float>(v[i]);
    break;
  }
  case DType::F64:
    std::memcpy(dst, v, static_cast<size_t>(n) * sizeof(double));
    break;
  case DType::I32: {
    int32_t *d = static_cast<int32_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<int32_t>(v[i]);
    break;
  }
  case DType::I64: {
    int64_t *d = static_cast<int64_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<int64_t>(v[i]);
    break;
  }
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(dst)[i] = floatToBf16(static_cast<float>(v[i]));
    break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(dst)[i] = floatToF16(static_cast<float>(v[i]));
    break;
  }
}

// n elements of dtype t at src to host values (exact widening).
void fromBytes(const void *src, int64_t n, DType t, double *v) {
  switch (t) {
  case DType::F32: {
    const float *s = static_cast<const float *>(src);
    for (int64_t i = 0; i < n; ++i)
      v[i] = s[i];
    break;
  }
  case DType::F64:
    std::memcpy(v, src, static_cast<size_t>(n) * sizeof(double));
    break;
  case DType::I32:
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<const int32_t *>(src)[i];
    break;
  case DType::I64:
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<double>(static_cast<const int64_t *>(src)[i]);
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      v[i] = bf16ToFloat(static_cast<const uint16_t *>(src)[i]);
    break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      v[i] = f16ToFloat(static_cast<const uint16_t *>(src)[i]);
    break;
  }
}

} // namespace

//===--- Device -----------------------------------------------------------===//

Device::Device(const std::string &name, fsdp_collectives collectives) {
  fsdp_device_options o{collectives};
  if (fsdp_device_create(name.c_str(), &o, &dev) != FSDP_OK)
    throw Error(fsdp_last_error());
}

Device::~Device() { fsdp_device_destroy(dev); }

//===--- Executor ---------------------------------------------------------===//

Executor::Executor(const Program &p, fsdp_device device, AllocMode alloc)
    : prog(p), dev(device) {
  if (!dev)
    throw Error(prog.name() + ": no device");
  compute = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  try {
    init(alloc);
  } catch (...) {
    release();
    throw;
  }
}

void Executor::init(AllocMode alloc) {
  auto fail = [&](const std::string &what) {
    throw Error(prog.name() + ": " + what + ": " + fsdp_last_error());
  };
  // Channels of the grid R x S. A schedule loaded without the world-size
  // check for another world size runs its groups over the world (whose
  // collectives then cover fewer ranks).
  if (prog.pipelineStages() > 1) {
    // A stage's program runs its groups over its stage's ranks (the stage
    // outermost: job rank = stage · (N / P) + rank in the stage).
    if (fsdp_channel_create(dev, &job) != FSDP_OK)
      fail("creating the job's channel");
    int jr = fsdp_channel_rank(job);
    int per = fsdp_channel_size(job) / static_cast<int>(prog.pipelineStages());
    if (fsdp_channel_split(job, jr / per, jr % per, &world) != FSDP_OK ||
        fsdp_channel_split(job, jr % per, jr / per, &pipeline) != FSDP_OK)
      fail("creating the stage and pipeline channels");
  } else if (fsdp_channel_create(dev, &world) != FSDP_OK) {
    fail("creating the world channel");
  }
  int r = fsdp_channel_rank(world), n = fsdp_channel_size(world);
  int S = static_cast<int>(prog.shardSize());
  // World rank r = d·T + t: tensor-parallel rank t = r mod T (the T ranks
  // of a group adjacent, as Megatron-LM places them), data-parallel rank d,
  // the grid R x S over d (shard index d mod S, replica d / S).
  int T = static_cast<int>(prog.tensorParallel());
  bool full = prog.worldSize() == n;
  bool grid = full && (S != n || T > 1);
  int t = full ? r % T : 0, d = full ? r / T : r;
  if (fsdp_channel_split(world, grid ? (d / S) * T + t : 0, grid ? d % S : r,
                         &shard) != FSDP_OK ||
      fsdp_channel_split(world, grid ? (d % S) * T + t : r, grid ? d / S : 0,
                         &replicate) != FSDP_OK ||
      fsdp_channel_split(world, full ? d : r, full ? t : 0, &tensor) != FSDP_OK)
    fail("creating the shard, replicate and tensor channels");
  checkSameScheduleOnAllRanks(prog);

  if (alloc == AllocMode::Arena && prog.usesArena()) {
    // Over-allocated by the plan's alignment, so that base + offset keeps
    // it whatever the device's own alignment.
    arenaSize = prog.plannedArenaBytes();
    size_t align = static_cast<size_t>(prog.arenaAlignment());
    if (fsdp_device_alloc(dev, static_cast<size_t>(arenaSize) + align,
                          &arenaAlloc) != FSDP_OK)
      fail("allocating the arena of " + std::to_string(arenaSize) + " bytes");
    uintptr_t a = reinterpret_cast<uintptr_t>(arenaAlloc);
    arena = reinterpret_cast<char *>((a + align - 1) / align * align);
  }
  // The resident state, zero until written.
  for (const IoDesc &io : prog.inputs()) {
    if (!isStateRole(io.role))
      continue;
    const BufferDesc &b = prog.buffer(io.buffer);
    void *mem;
    if (arena) {
      mem = arena + b.arenaOffset;
    } else if (fsdp_device_alloc(dev, static_cast<size_t>(b.bytes), &mem) !=
               FSDP_OK) {
      fail("allocating the state buffer " + std::to_string(b.id));
    }
    check(fsdp_memset_zero(compute, mem, static_cast<size_t>(b.bytes)));
    state[b.id] = mem;
  }
  // A state input never ends during the step (the planner keeps it live),
  // so its memory is never freed or re-bound.
  for (size_t i = 0; i < prog.instructions().size(); ++i) {
    const Instruction &in = prog.instructions()[i];
    std::vector<int64_t> freed = in.frees;
    if (in.kind == OpKind::Free)
      freed.push_back(in.operands[0]);
    for (int64_t id : freed)
      if (state.count(prog.buffer(id).rootId) && prog.buffer(id).viewOf < 0)
        throw Error(prog.where(i) + ": frees state input buffer " +
                    std::to_string(id) +
                    ", but the training state is resident for the whole step "
                    "(schedule version 2)");
  }
  for (const IoDesc &o : prog.outputs())
    inPlace += o.aliases >= 0;
  for (const IoDesc &in : prog.inputs())
    if (const IoDesc *o = prog.carriedOutput(in.buffer); o && o->aliases < 0)
      copies.push_back({in.buffer, o->buffer});
  staged.resize(prog.inputs().size());
  written.assign(prog.inputs().size(), false);
}

Executor::~Executor() { release(); }

void Executor::release() {
  fsdp_stream_synchronize(compute);
  for (void *p : ownedOutputs)
    fsdp_device_free(dev, p);
  if (!arena)
    for (auto &[id, mem] : state)
      fsdp_device_free(dev, mem);
  fsdp_device_free(dev, arenaAlloc);
  fsdp_channel_destroy(tensor);
  fsdp_channel_destroy(replicate);
  fsdp_channel_destroy(shard);
  fsdp_channel_destroy(world);
  fsdp_channel_destroy(pipeline);
  fsdp_channel_destroy(job);
  ownedOutputs.clear();
  state.clear();
  arenaAlloc = nullptr;
  arena = nullptr;
  tensor = replicate = shard = world = pipeline = job = nullptr;
}

fsdp_channel Executor::channel(Group g) const {
  switch (g) {
  case Group::World:
    return world;
  case Group::Shard:
    return shard;
  case Group::Replicate:
    return replicate;
  case Group::Tensor:
    return tensor;
  case Group::Pipeline:
    return pipeline;
  }
  return world;
}

std::map<std::string, int64_t> Executor::channelBytesSent() const {
  std::map<std::string, int64_t> out;
  for (auto [name, c] : {std::pair<const char *, fsdp_channel>{"world", world},
                         {"shard", shard},
                         {"replicate", replicate},
                         {"tensor", tensor},
                         {"pipeline", pipeline},
                         {"job", job}})
    if (c)
      out[name] = c->bytesSent.load();
  return out;
}

void *Executor::stateAt(int64_t buffer) const {
  auto it = state.find(buffer);
  return it == state.end() ? nullptr : it->second;
}

void Executor::write(int64_t buffer, const double *values, int64_t n) {
  const BufferDesc &b = prog.buffer(buffer);
  size_t input = prog.inputs().size();
  for (size_t i = 0; i < prog.inputs().size(); ++i)
    if (prog.inputs()[i].buffer == buffer)
      input = i;
  if (input == prog.inputs().size())
    throw Error(prog.name() + ": buffer " + std::to_string(buffer) +
                " is not an input");
  if (n != b.numel)
    throw Error(prog.name() + ": input buffer " + std::to_string(buffer) +
                " needs " + std::to_string(b.numel) + " values, got " +
                std::to_string(n));
  std::vector<unsigned char> bytes(static_cast<size_t>(b.bytes));
  toBytes(values, n, b.dtype, bytes.data());
  if (void *mem = stateAt(buffer)) {
    check(fsdp_memcpy(compute, mem, bytes.data(), bytes.size()));
    check(fsdp_stream_synchronize(compute)); // `bytes` ends here
    return;
  }
  staged[input] = std::move(bytes);
  written[input] = true;
}

void Executor::read(int64_t buffer, std::vector<double> &out) const {
  const BufferDesc &b = prog.buffer(buffer);
  void *mem = stateAt(buffer);
  if (!mem) {
    auto it = outputs.find(buffer);
    if (it == outputs.end())
      throw Error(prog.name() + ": buffer " + std::to_string(buffer) +
                  " is neither a state input nor an output of the last step");
    mem = it->second;
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(b.bytes));
  check(fsdp_memcpy(compute, bytes.data(), mem, bytes.size()));
  check(fsdp_stream_synchronize(compute));
  out.resize(static_cast<size_t>(b.numel));
  fromBytes(bytes.data(), b.numel, b.dtype, out.data());
}

double Executor::readScalar(int64_t buffer) const {
  std::vector<double> v;
  read(buffer, v);
  if (v.empty())
    throw Error(prog.name() + ": buffer " + std::to_string(buffer) +
                " is empty");
  return v[0];
}

void Executor::step() {
  // The last step's outputs are read by now.
  outputs.clear();
  for (void *p : ownedOutputs)
    fsdp_device_free(dev, p);
  ownedOutputs.clear();
  if (compiledFn)
    compiledStep(); // CompiledStep.cpp
  else
    interpretedStep(); // ExecutorStep.cpp
}

void Executor::finishStep(int64_t peak) {
  for (auto [in, out] : copies)
    check(fsdp_memcpy(compute, state.at(in), outputs.at(out),
                      static_cast<size_t>(prog.buffer(in).bytes)));
  // Still the step's end while the host waits here: on cuda this is where a
  // collective that never completes (a dead peer) holds the host, and the
  // watchdog names the step's last collective.
  running.store(kStepEnd, std::memory_order_relaxed);
  awaited.store(lastCollective, std::memory_order_relaxed);
  int rc = fsdp_stream_synchronize(compute);
  awaited.store(-1, std::memory_order_relaxed);
  running.store(kIdle, std::memory_order_relaxed);
  if (rc != FSDP_OK)
    throw Error(prog.name() + ": " +
                (lastCollective >= 0
                     ? "at the step's end, its last collective " +
                           prog.where(static_cast<size_t>(lastCollective)) +
                           ": "
                     : std::string()) +
                fsdp_last_error());
  lastPeak = peak;
}

//===--- The in-process convenience ---------------------------------------===//

HostValues runStep(const Program &prog, const HostValues &inputs,
                   int64_t *peakBytes) {
  Device dev("cpu");
  Executor ex(prog, dev.get());
  for (const IoDesc &io : prog.inputs()) {
    auto it = inputs.find(io.buffer);
    if (it == inputs.end())
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "') was not provided");
    ex.write(io.buffer, it->second);
  }
  ex.step();
  HostValues out;
  for (const IoDesc &o : prog.outputs())
    ex.read(o.buffer, out[o.buffer]);
  if (peakBytes)
    *peakBytes = ex.lastPeakBytes();
  return out;
}

bool tryRunStep(const Program &prog, const HostValues &inputs,
                HostValues &outputs, std::string &error) {
  try {
    outputs = runStep(prog, inputs);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

} // namespace fsdp::rt
