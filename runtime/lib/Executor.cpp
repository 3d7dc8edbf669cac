//===- Executor.cpp - runs a validated schedule on one device -------------===//
//
// fsdp::rt::Executor: the schedule interpreter. It decodes instructions and
// calls the runtime's C API only (runtime.h, kernels.h), so the same code
// drives every driver. Per step (a Frame): inputs are bound (the resident
// state where it lives; other inputs copied from their host staging),
// results are bound when their instruction runs -- to their slot of the
// planned arena (checked against the live buffers' slots) or to one device
// allocation each -- views to base + offset, and buffers end at `frees` and
// fsdp.free. A collective starts at its instruction and the compute stream
// waits on its event before the first later instruction that touches
// either of its buffers (its fsdp.wait in a schedule from fsdp-schedule),
// before either is freed, and at the end of the step. At the end the
// carried state outputs replace the state (in place when they alias it).
// The bookkeeping of live schedule bytes gives lastPeakBytes, the figure the
// memory plan predicts exactly; the device's allocator statistics give the
// independent measure.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Interpreter.h"

#include "fsdp/Half.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace fsdp::rt {

namespace {

fsdp_dtype toC(DType t) {
  switch (t) {
  case DType::F32:
    return FSDP_F32;
  case DType::F64:
    return FSDP_F64;
  case DType::I32:
    return FSDP_I32;
  case DType::I64:
    return FSDP_I64;
  case DType::BF16:
    return FSDP_BF16;
  case DType::F16:
    return FSDP_F16;
  }
  return FSDP_F32;
}

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

// [outer, axis, inner] factorisation of `shape` around `axis`.
void aroundAxis(const std::vector<int64_t> &shape, int64_t axis, int64_t &outer,
                int64_t &inner) {
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  for (int64_t i = axis + 1; i < static_cast<int64_t>(shape.size()); ++i)
    inner *= shape[i];
}

} // namespace

//===--- Device
//-------------------------------------------------------------===//

Device::Device(const std::string &name, fsdp_collectives collectives) {
  fsdp_device_options o{collectives};
  if (fsdp_device_create(name.c_str(), &o, &dev) != FSDP_OK)
    throw Error(fsdp_last_error());
}

Device::~Device() { fsdp_device_destroy(dev); }

//===--- One step
//-------------------------------------------------------------===//

/// The state of one step: live buffers by root id, their arena slots and
/// the collectives in flight. The destructor completes every collective
/// and releases the step's own allocations, also on errors.
class Frame {
public:
  explicit Frame(Executor &e) : ex(e), prog(e.prog), aliasOf(e.aliasOf) {}
  ~Frame() {
    for (Pending &q : pending)
      fsdp_wait(q.event);
    for (auto &[id, p] : live)
      if (!kept.count(id) && !ex.state.count(id))
        unbind(id, p);
  }

  /// Binds the inputs: the state where it lives, other inputs from their
  /// staging.
  void bindInputs() {
    for (const IoDesc &io : prog.inputs()) {
      const BufferDesc &b = prog.buffer(io.buffer);
      try {
        if (isStateRole(io.role)) {
          // The state is checked like any binding: two inputs planned over
          // each other would silently corrupt training.
          if (ex.arena) {
            checkSlotFree(b);
            if (b.bytes > 0)
              slots[b.arenaOffset] = {b.id, -1};
          }
          live[b.id] = ex.state.at(b.id);
          account(b.bytes);
          continue;
        }
        auto st = ex.staged.find(b.id);
        if (st == ex.staged.end())
          throw Error("was not written (Executor::write before step)");
        allocate(b.id, /*overwritten=*/true);
        check(fsdp_memcpy(ex.compute, live.at(b.id), st->second.bytes.data(),
                          static_cast<size_t>(b.bytes)));
      } catch (const Error &e) {
        throw Error(prog.name() + ": input buffer " +
                    std::to_string(io.buffer) + " (role '" + io.role +
                    "'): " + e.what());
      }
    }
  }

  /// Makes owned buffer `rootId` live: its arena slot (after checking that
  /// no live buffer overlaps it) or one device allocation, zero-filled
  /// unless `overwritten` (its instruction writes every element).
  void allocate(int64_t rootId, bool overwritten) {
    if (live.count(rootId))
      throw Error("buffer " + std::to_string(rootId) +
                  " is defined while still live");
    const BufferDesc &b = prog.buffer(rootId);
    void *p;
    if (ex.arena) {
      checkSlotFree(b);
      p = ex.arena + b.arenaOffset;
      if (b.bytes > 0)
        slots[b.arenaOffset] = {rootId, curInst};
    } else {
      check(fsdp_device_alloc(ex.dev, static_cast<size_t>(b.bytes), &p));
    }
    if (!overwritten)
      check(fsdp_memset_zero(ex.compute, p, static_cast<size_t>(b.bytes)));
    account(b.bytes);
    live[rootId] = p;
  }

  /// Ends the life of owned buffer `id` at `p` (not erased from `live`).
  void unbind(int64_t id, void *p) {
    if (aliasOf.count(id))
      return; // the state's memory
    const BufferDesc &b = prog.buffer(id);
    account(-b.bytes);
    if (ex.arena) {
      if (b.bytes > 0)
        slots.erase(b.arenaOffset);
    } else {
      fsdp_device_free(ex.dev, p);
    }
  }

  /// Throws the planner-bug error if a live buffer's arena bytes overlap
  /// those of `b`. Live slots are disjoint, so only the last one starting
  /// before b's end can overlap.
  void checkSlotFree(const BufferDesc &b) const {
    if (b.bytes == 0)
      return;
    int64_t lo = b.arenaOffset, hi = lo + b.bytes;
    auto it = slots.lower_bound(hi);
    if (it == slots.begin())
      return;
    --it;
    const BufferDesc &o = prog.buffer(it->second.id);
    if (it->first + o.bytes <= lo)
      return;
    std::string since =
        it->second.inst >= 0
            ? prog.instructionName(static_cast<size_t>(it->second.inst))
            : "the step start (an input)";
    throw Error("memory plan error: buffer " + std::to_string(b.id) +
                " at arena bytes [" + std::to_string(lo) + ", " +
                std::to_string(hi) + ") overlaps live buffer " +
                std::to_string(o.id) + " at arena bytes [" +
                std::to_string(it->first) + ", " +
                std::to_string(it->first + o.bytes) + "), live since " + since);
  }

  /// Makes result `id` usable: an aliased state output takes over the
  /// state's memory; a view binds to its root (allocated, zero-filled, if
  /// not live yet); any other result is allocated.
  void define(int64_t id, bool overwritten) {
    const BufferDesc &b = prog.buffer(id);
    if (b.viewOf >= 0) {
      if (!live.count(b.rootId))
        define(b.rootId, false);
      return;
    }
    auto alias = aliasOf.find(id);
    if (alias != aliasOf.end()) {
      // Every collective still reading the old state completes first.
      waitTouching(alias->second);
      live[id] = ex.state.at(alias->second);
      return;
    }
    allocate(id, overwritten);
  }

  void release(int64_t id) {
    const BufferDesc &b = prog.buffer(id);
    if (b.viewOf >= 0)
      return; // a view lives as long as its base
    waitTouching(id);
    auto it = live.find(id);
    if (it == live.end())
      throw Error("buffer " + std::to_string(id) + " freed but not live");
    unbind(id, it->second);
    live.erase(it);
  }

  /// The device memory of buffer `id` (root + offset).
  void *ptr(int64_t id) const {
    const BufferDesc &b = prog.buffer(id);
    auto it = live.find(b.rootId);
    if (it == live.end())
      throw Error("buffer " + std::to_string(id) +
                  (b.viewOf >= 0
                       ? " (a view of buffer " + std::to_string(b.rootId) + ")"
                       : std::string()) +
                  " is used but not live (never defined, or already freed)");
    return static_cast<char *>(it->second) +
           b.rootOffset * dtypeSize(prog.buffer(b.rootId).dtype);
  }

  /// The compute stream waits on every collective reading or writing the
  /// root of `id`.
  void waitTouching(int64_t id) {
    int64_t root = prog.buffer(id).rootId;
    for (size_t i = 0; i < pending.size();) {
      if (pending[i].sendRoot == root || pending[i].recvRoot == root) {
        fsdp_event e = pending[i].event;
        pending.erase(pending.begin() + i);
        wait(e);
      } else {
        ++i;
      }
    }
  }
  void waitAll() {
    while (!pending.empty()) {
      fsdp_event e = pending.front().event;
      pending.erase(pending.begin());
      wait(e);
    }
  }
  /// fsdp.wait, its host time added to waitSeconds (the profile's comm wait).
  void wait(fsdp_event e) {
    double t0 = fsdp_now();
    int rc = fsdp_wait(e);
    waitSeconds += fsdp_now() - t0;
    check(rc);
  }
  /// FSDP_PROGRESS_TEST: lets MPI progress the collectives in flight between
  /// instructions (Open MPI advances a non-blocking collective one round per
  /// call, so a test after each kernel moves the transfers along while the
  /// next kernel runs on other ranks' cores).
  void poke() {
    if (pending.empty() || fsdp_get_progress() != FSDP_PROGRESS_TEST)
      return;
    for (Pending &q : pending) {
      int done = 0;
      fsdp_event_query(q.event, &done);
    }
  }

  void account(int64_t delta) {
    liveBytes += delta;
    peakBytes = std::max(peakBytes, liveBytes);
  }

  fsdp_channel channel(Group g) const {
    return g == Group::World   ? ex.world
           : g == Group::Shard ? ex.shard
                               : ex.replicate;
  }

  /// Whether `in` writes every element of its results (then their memory
  /// is not zero-filled first). Every kernel does, except an all-gather
  /// over a channel smaller at run time than the schedule's group (a
  /// schedule loaded without the world-size check): only the gathered
  /// shards are written and the rest must read as zeros.
  bool overwritesResults(const Instruction &in) const {
    if (in.kind != OpKind::AllGather)
      return true;
    return fsdp_channel_size(channel(in.group)) == prog.groupSize(in.group);
  }

  void execute(const Instruction &in);

  struct Slot {
    int64_t id, inst; ///< the buffer, the instruction that bound it (-1: input)
  };
  struct Pending {
    fsdp_event event;
    int64_t sendRoot, recvRoot;
  };

  Executor &ex;
  const Program &prog;
  int64_t curInst = -1;
  std::map<int64_t, Slot> slots; ///< live arena slots by byte offset
  std::unordered_map<int64_t, void *> live;
  std::set<int64_t> kept; ///< live at the end, kept past the step
  const std::map<int64_t, int64_t> &aliasOf; ///< output root -> state input
  std::vector<Pending> pending;
  int64_t liveBytes = 0, peakBytes = 0;
  double waitSeconds = 0;
};

void Frame::execute(const Instruction &in) {
  const auto &o = in.operands;
  const auto &r = in.results;
  auto B = [&](int64_t id) -> const BufferDesc & { return prog.buffer(id); };
  fsdp_stream s = ex.compute;
  fsdp_dtype t = toC(B(r.empty() ? o[0] : r[0]).dtype);
  auto shapeOf = [&](int64_t id) { return B(id).shape; };
  switch (in.kind) {
  case OpKind::Constant:
    check(fsdp_fill(s, t, ptr(r[0]), B(r[0]).numel, in.value));
    return;
  case OpKind::ZerosLike:
    check(fsdp_memset_zero(s, ptr(r[0]), static_cast<size_t>(B(r[0]).bytes)));
    return;
  case OpKind::AllGather:
  case OpKind::ReduceScatter: {
    bool ag = in.kind == OpKind::AllGather;
    int64_t src = o[0], dst = r[0];
    const BufferDesc &sb = B(ag ? src : dst);
    fsdp_event e = nullptr;
    fsdp_reduce_op op = in.average ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM;
    check(ag ? fsdp_all_gather_start(channel(in.group), ptr(src), ptr(dst),
                                     sb.numel, toC(sb.dtype), &e)
             : fsdp_reduce_scatter_start(channel(in.group), ptr(src), ptr(dst),
                                         sb.numel, toC(sb.dtype), op, &e));
    pending.push_back({e, B(src).rootId, B(dst).rootId});
    return;
  }
  case OpKind::AllReduce: {
    fsdp_event e = nullptr;
    check(fsdp_all_reduce_start(
        channel(in.group), ptr(o[0]), ptr(r[0]), B(r[0]).numel, t,
        in.average ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM, &e));
    pending.push_back({e, B(o[0]).rootId, B(r[0]).rootId});
    return;
  }
  case OpKind::LocalShard: {
    // This rank's slice [i*s, (i+1)*s) of the full buffer.
    const BufferDesc &b = B(r[0]);
    int64_t i = fsdp_channel_rank(channel(in.group));
    check(fsdp_memcpy(s, ptr(r[0]),
                      static_cast<const char *>(ptr(o[0])) + i * b.bytes,
                      static_cast<size_t>(b.bytes)));
    return;
  }
  case OpKind::MicroBatch: {
    // Micro-batch `index` is the contiguous block of rows [index·m,
    // (index+1)·m).
    int64_t bytes = B(r[0]).bytes;
    check(fsdp_memcpy(s, ptr(r[0]),
                      static_cast<const char *>(ptr(o[0])) + in.index * bytes,
                      static_cast<size_t>(bytes)));
    return;
  }
  case OpKind::Pack:
  case OpKind::Unpack: {
    // Block b of the bucket is block b of each unit buffer in turn (FSDP2's
    // all-gather copy-in / copy-out): one strided copy per unit.
    bool pack = in.kind == OpKind::Pack;
    const std::vector<int64_t> &parts = pack ? o : r;
    int64_t bucket = pack ? r[0] : o[0];
    int64_t es = dtypeSize(B(bucket).dtype), row = 0;
    for (int64_t id : parts)
      row += B(id).numel / in.blocks * es;
    char *bp = static_cast<char *>(ptr(bucket));
    int64_t at = 0;
    for (int64_t id : parts) {
      size_t width = static_cast<size_t>(B(id).numel / in.blocks * es);
      if (pack)
        check(fsdp_memcpy_2d(s, bp + at, static_cast<size_t>(row), ptr(id),
                             width, width, static_cast<size_t>(in.blocks)));
      else
        check(fsdp_memcpy_2d(s, ptr(id), width, bp + at,
                             static_cast<size_t>(row), width,
                             static_cast<size_t>(in.blocks)));
      at += static_cast<int64_t>(width);
    }
    return;
  }
  case OpKind::Free:
    release(o[0]);
    return;
  case OpKind::ParamView:
  case OpKind::Wait:
    return; // bound by define; the wait happened in waitTouching
  case OpKind::Cast:
    check(fsdp_cast(s, toC(B(o[0]).dtype), ptr(o[0]), t, ptr(r[0]),
                    B(r[0]).numel));
    return;
  case OpKind::Linear: {
    int64_t k = B(o[0]).shape.back();
    int64_t n = B(o[1]).shape[in.transposeWeight ? 1 : 0];
    check(fsdp_linear(s, t, ptr(o[0]), ptr(o[1]),
                      o.size() == 3 ? ptr(o[2]) : nullptr, ptr(r[0]),
                      k ? B(o[0]).numel / k : 0, k, n, in.transposeWeight));
    return;
  }
  case OpKind::Matmul: {
    int64_t ac = B(o[0]).shape.back(), bc = B(o[1]).shape.back();
    check(fsdp_matmul(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]),
                      ac ? B(o[0]).numel / ac : 0, ac,
                      bc ? B(o[1]).numel / bc : 0, bc, in.transA, in.transB));
    return;
  }
  case OpKind::Add:
    check(fsdp_add(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::Mul:
    check(fsdp_mul(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::Relu:
    check(fsdp_relu(s, t, ptr(o[0]), ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::ReluGrad:
    check(fsdp_relu_grad(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::Gelu:
    check(fsdp_gelu(s, t, ptr(o[0]), ptr(r[0]), B(r[0]).numel, in.approxTanh));
    return;
  case OpKind::GeluGrad:
    check(fsdp_gelu_grad(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), B(r[0]).numel,
                         in.approxTanh));
    return;
  case OpKind::Silu:
    check(fsdp_silu(s, t, ptr(o[0]), ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::SiluGrad:
    check(fsdp_silu_grad(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::ReduceSum: {
    std::vector<int64_t> xs = shapeOf(o[0]);
    check(fsdp_reduce_sum(s, t, ptr(o[0]), xs.data(),
                          static_cast<int>(xs.size()), in.axes.data(),
                          static_cast<int>(in.axes.size()), ptr(r[0])));
    return;
  }
  case OpKind::Broadcast: {
    std::vector<int64_t> ys = shapeOf(r[0]);
    check(fsdp_broadcast(s, t, ptr(o[0]), ys.data(),
                         static_cast<int>(ys.size()), in.axes.data(),
                         static_cast<int>(in.axes.size()), ptr(r[0])));
    return;
  }
  case OpKind::CrossEntropy:
    check(fsdp_cross_entropy(s, t, ptr(o[0]), ptr(o[1]), toC(B(o[1]).dtype),
                             B(o[1]).numel, B(o[0]).shape.back(), ptr(r[0])));
    return;
  case OpKind::CrossEntropyGrad:
    check(fsdp_cross_entropy_grad(s, t, ptr(o[0]), ptr(o[1]),
                                  toC(B(o[1]).dtype), ptr(o[2]), ptr(r[0]),
                                  B(o[1]).numel, B(o[0]).shape.back()));
    return;
  case OpKind::SgdUpdate:
  case OpKind::AdamwUpdate: {
    // Weight-decay groups: `no_decay` ranges of the unit's flat buffer,
    // taken at this rank's shard offset where the operands are a shard.
    bool adam = in.kind == OpKind::AdamwUpdate;
    size_t lrAt = adam ? 5 : 2;
    const double *lr =
        o.size() > lrAt ? static_cast<const double *>(ptr(o[lrAt])) : nullptr;
    int64_t n = B(r[0]).numel;
    int64_t base = in.sharded && !in.noDecay.empty()
                       ? int64_t{fsdp_channel_rank(channel(Group::Shard))} * n
                       : 0;
    auto opt = [&](size_t i, const std::vector<int64_t> &ids) {
      return adam ? ptr(ids[i]) : nullptr;
    };
    check(fsdp_optimizer_update(
        s, t, adam, ptr(o[0]), ptr(o[1]), opt(2, o), opt(3, o), opt(4, o),
        adam ? toC(B(o[4]).dtype) : FSDP_I64, ptr(r[0]), opt(1, r), opt(2, r),
        n, lr, in.lr, in.beta1, in.beta2, in.eps, in.weightDecay,
        in.noDecay.data(), static_cast<int64_t>(in.noDecay.size()), base));
    return;
  }
  case OpKind::LrSchedule:
    check(fsdp_lr_schedule(
        s, ptr(o[0]), toC(B(o[0]).dtype), static_cast<double *>(ptr(r[0])),
        in.lrKind, in.lr, in.warmupSteps,
        o.size() > 1 ? static_cast<const int64_t *>(ptr(o[1])) : nullptr,
        in.decaySteps, in.minLr));
    return;
  case OpKind::SumSquares:
    check(fsdp_sum_squares(s, toC(B(o[0]).dtype), ptr(o[0]), B(o[0]).numel,
                           static_cast<double *>(ptr(r[0]))));
    return;
  case OpKind::GradNorm:
    check(fsdp_grad_norm(s, static_cast<const double *>(ptr(o[0])), in.maxNorm,
                         static_cast<double *>(ptr(r[0])),
                         static_cast<double *>(ptr(r[1]))));
    return;
  case OpKind::Scale:
    check(fsdp_scale(s, t, ptr(o[0]), static_cast<const double *>(ptr(o[1])),
                     ptr(r[0]), B(r[0]).numel));
    return;
  case OpKind::Flatten: {
    std::vector<const void *> parts;
    std::vector<int64_t> numels;
    for (int64_t id : o) {
      parts.push_back(ptr(id));
      numels.push_back(B(id).numel);
    }
    check(fsdp_flatten(s, t, parts.data(), numels.data(), in.offsets.data(),
                       static_cast<int>(o.size()), ptr(r[0]), B(r[0]).numel));
    return;
  }
  case OpKind::Embedding: {
    const auto &ts = B(o[1]).shape;
    check(fsdp_embedding(s, t, ptr(o[0]), toC(B(o[0]).dtype), ptr(o[1]),
                         ptr(r[0]), B(o[0]).numel, ts[0], ts[1]));
    return;
  }
  case OpKind::EmbeddingGrad: {
    const auto &ts = B(r[0]).shape;
    check(fsdp_embedding_grad(s, t, ptr(o[0]), toC(B(o[0]).dtype), ptr(o[1]),
                              ptr(r[0]), B(o[0]).numel, ts[0], ts[1]));
    return;
  }
  case OpKind::PositionEmbedding: {
    const auto &xs = B(o[0]).shape;
    check(fsdp_position_embedding(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), xs[0],
                                  xs[1], xs[2]));
    return;
  }
  case OpKind::PositionEmbeddingGrad: {
    const auto &xs = B(o[0]).shape;
    check(fsdp_position_embedding_grad(s, t, ptr(o[0]), ptr(r[0]), xs[0], xs[1],
                                       xs[2], B(r[0]).shape[0]));
    return;
  }
  case OpKind::LayerNorm:
  case OpKind::LayerNormGrad:
  case OpKind::RmsNorm:
  case OpKind::RmsNormGrad: {
    int64_t c = B(o[0]).shape.back(), rows = c ? B(o[0]).numel / c : 0;
    if (in.kind == OpKind::LayerNorm)
      check(fsdp_layer_norm(s, t, ptr(o[0]), ptr(o[1]), ptr(o[2]), ptr(r[0]),
                            rows, c, in.eps));
    else if (in.kind == OpKind::LayerNormGrad)
      check(fsdp_layer_norm_grad(s, t, ptr(o[0]), ptr(o[1]), ptr(o[2]),
                                 ptr(r[0]), ptr(r[1]), ptr(r[2]), rows, c,
                                 in.eps));
    else if (in.kind == OpKind::RmsNorm)
      check(fsdp_rms_norm(s, t, ptr(o[0]), ptr(o[1]), ptr(r[0]), rows, c,
                          in.eps));
    else
      check(fsdp_rms_norm_grad(s, t, ptr(o[0]), ptr(o[1]), ptr(o[2]), ptr(r[0]),
                               ptr(r[1]), rows, c, in.eps));
    return;
  }
  case OpKind::Rope: {
    const auto &xs = B(o[0]).shape;
    check(fsdp_rope(s, t, ptr(o[0]), ptr(r[0]), xs[0], xs[1],
                    xs[2] / in.headDim, in.headDim, in.theta, in.inverse));
    return;
  }
  case OpKind::Attention:
  case OpKind::AttentionGrad: {
    const auto &qs = B(o[0]).shape;
    int64_t d = qs[2] / in.numHeads;
    if (in.kind == OpKind::Attention)
      check(fsdp_attention(s, t, ptr(o[0]), ptr(o[1]), ptr(o[2]), ptr(r[0]),
                           qs[0], qs[1], in.numHeads, in.numKvHeads, d));
    else
      check(fsdp_attention_grad(s, t, ptr(o[0]), ptr(o[1]), ptr(o[2]),
                                ptr(o[3]), ptr(r[0]), ptr(r[1]), ptr(r[2]),
                                qs[0], qs[1], in.numHeads, in.numKvHeads, d));
    return;
  }
  case OpKind::Split:
  case OpKind::Concat: {
    bool sp = in.kind == OpKind::Split;
    const BufferDesc &whole = B(sp ? o[0] : r[0]);
    int64_t rank = static_cast<int64_t>(whole.shape.size());
    int64_t axis = in.axis < 0 ? in.axis + rank : in.axis;
    int64_t outer, inner;
    aroundAxis(whole.shape, axis, outer, inner);
    const std::vector<int64_t> &parts = sp ? r : o;
    std::vector<int64_t> sizes;
    std::vector<void *> ptrs;
    for (int64_t id : parts) {
      sizes.push_back(B(id).shape[axis]);
      ptrs.push_back(ptr(id));
    }
    int n = static_cast<int>(parts.size());
    if (sp)
      check(fsdp_split(s, t, ptr(o[0]), ptrs.data(), sizes.data(), n, outer,
                       inner));
    else
      check(fsdp_concat(s, t, const_cast<const void *const *>(ptrs.data()),
                        ptr(r[0]), sizes.data(), n, outer, inner));
    return;
  }
  }
  throw Error("internal error: no kernel for '" + in.op + "'");
}

//===--- Executor
//-------------------------------------------------------------===//

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
  if (fsdp_channel_create(dev, &world) != FSDP_OK)
    fail("creating the world channel");
  int r = fsdp_channel_rank(world), n = fsdp_channel_size(world);
  int S = static_cast<int>(prog.shardSize());
  bool grid = prog.worldSize() == n && S != n;
  if (fsdp_channel_split(world, grid ? r / S : 0, grid ? r % S : r, &shard) !=
          FSDP_OK ||
      fsdp_channel_split(world, grid ? r % S : r, grid ? r / S : 0,
                         &replicate) != FSDP_OK)
    fail("creating the shard and replicate channels");
  prog.checkSameCollectivesOnAllRanks();

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
    if (o.aliases >= 0)
      aliasOf[prog.buffer(o.buffer).rootId] = o.aliases;
  for (const IoDesc &in : prog.inputs())
    if (const IoDesc *o = prog.carriedOutput(in.buffer); o && o->aliases < 0)
      copies.push_back({in.buffer, o->buffer});
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
  fsdp_channel_destroy(replicate);
  fsdp_channel_destroy(shard);
  fsdp_channel_destroy(world);
  ownedOutputs.clear();
  state.clear();
  arenaAlloc = nullptr;
  arena = nullptr;
  replicate = shard = world = nullptr;
}

void *Executor::stateAt(int64_t buffer) const {
  auto it = state.find(buffer);
  return it == state.end() ? nullptr : it->second;
}

void Executor::write(int64_t buffer, const double *values, int64_t n) {
  const BufferDesc &b = prog.buffer(buffer);
  bool isInput = false;
  for (const IoDesc &io : prog.inputs())
    isInput = isInput || io.buffer == buffer;
  if (!isInput)
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
  staged[buffer].bytes = std::move(bytes);
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
  if (compiledFn) {
    compiledStep(); // CompiledStep.cpp
    return;
  }
  // The last step's outputs are read by now.
  outputs.clear();
  for (void *p : ownedOutputs)
    fsdp_device_free(dev, p);
  ownedOutputs.clear();

  Frame f(*this);
  f.bindInputs();
  const std::vector<Instruction> &program = prog.instructions();
  for (size_t idx = 0; idx < program.size(); ++idx) {
    const Instruction &in = program[idx];
    f.curInst = static_cast<int64_t>(idx);
    running.store(f.curInst, std::memory_order_relaxed);
    // fsdp_profile_enabled: kernel seconds under the op name, time blocked
    // on collectives and the interpreter's own work (binding and, where
    // needed, zeroing buffers, frees, progress tests) under "(comm wait)" /
    // "(interpreter)".
    bool profiling = fsdp_profile_enabled();
    double pt0 = 0, pk0 = 0, pk1 = 0, pw0 = f.waitSeconds;
    if (profiling)
      pt0 = fsdp_now();
    try {
      for (int64_t id : in.operands)
        f.waitTouching(id);
      for (int64_t id : in.results) {
        f.waitTouching(id);
        f.define(id, f.overwritesResults(in));
      }
      if (profiling)
        pk0 = fsdp_now();
      f.execute(in);
      if (profiling)
        pk1 = fsdp_now();
      for (int64_t id : in.frees)
        f.release(id);
      f.poke();
      if (profiling) {
        double wait = f.waitSeconds - pw0;
        fsdp_profile_add(in.op.c_str(), pk1 - pk0);
        fsdp_profile_add("(comm wait)", wait);
        fsdp_profile_add("(interpreter)",
                         (fsdp_now() - pt0) - (pk1 - pk0) - wait);
      }
    } catch (const std::exception &e) {
      running.store(kIdle, std::memory_order_relaxed);
      throw Error(prog.where(idx) + ": " + e.what());
    }
  }
  running.store(kStepEnd, std::memory_order_relaxed);
  double pw0 = f.waitSeconds;
  f.waitAll();
  if (fsdp_profile_enabled())
    fsdp_profile_add("(comm wait)", f.waitSeconds - pw0);
  // Outputs stay readable until the next step; the state takes the
  // carried ones (copied unless written in place). The state's memory is
  // the Executor's, not the step's.
  for (auto &[id, mem] : state)
    f.kept.insert(id);
  for (const IoDesc &o : prog.outputs()) {
    try {
      outputs[o.buffer] = f.ptr(o.buffer);
    } catch (const Error &e) {
      throw Error(prog.name() + ": output (role '" + o.role +
                  "'): " + e.what());
    }
    int64_t root = prog.buffer(o.buffer).rootId;
    if (!f.aliasOf.count(root) && f.kept.insert(root).second && !arena)
      ownedOutputs.push_back(f.live.at(root));
  }
  finishStep(f.peakBytes);
}

void Executor::finishStep(int64_t peak) {
  for (auto [in, out] : copies)
    check(fsdp_memcpy(compute, state.at(in), outputs.at(out),
                      static_cast<size_t>(prog.buffer(in).bytes)));
  running.store(kIdle, std::memory_order_relaxed);
  if (fsdp_stream_synchronize(compute) != FSDP_OK)
    throw Error(prog.name() + ": " + fsdp_last_error());
  lastPeak = peak;
}

//===--- The in-process convenience
//-------------------------------------------===//

HostValues Program::run(const HostValues &inputs) {
  HostValues out;
  run(inputs, out);
  return out;
}

void Program::run(const HostValues &inputs, HostValues &out) {
  Device dev("cpu");
  Executor ex(*this, dev.get());
  for (const IoDesc &io : inputList) {
    auto it = inputs.find(io.buffer);
    if (it == inputs.end())
      throw Error(sourceName + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "') was not provided");
    ex.write(io.buffer, it->second);
  }
  ex.step();
  for (const IoDesc &o : outputList)
    ex.read(o.buffer, out[o.buffer]);
  lastPeak = ex.lastPeakBytes();
}

bool Program::tryRun(const HostValues &inputs, HostValues &outputs,
                     std::string &error) {
  try {
    outputs = run(inputs);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

bool Program::tryFromFile(const std::string &path, Program &out,
                          std::string &error, bool checkWorldSize) {
  try {
    out = fromFile(path, checkWorldSize);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

bool Program::tryFromString(const std::string &text, Program &out,
                            std::string &error, bool checkWorldSize,
                            const std::string &name) {
  try {
    out = fromString(text, checkWorldSize, name);
    return true;
  } catch (const std::exception &e) {
    error = e.what();
    return false;
  }
}

} // namespace fsdp::rt
