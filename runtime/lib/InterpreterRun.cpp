//===- InterpreterRun.cpp - Executes a validated fsdp schedule ------------===//
//
// Program::run: allocation of inputs and results through fsdp_alloc, or,
// with a memory plan, binding to their slots of one planned arena (checked
// against the live buffers' slots; views are bound to base + offset, never
// allocated), kernel dispatch on dtype,
// asynchronous collectives whose wait is deferred until an instruction
// touches one of their buffers (see runtime/docs/schedule-format.md, "Runtime
// decisions"), over the grid's process groups (fsdp_set_grid), the local
// slice of fsdp.local_shard, `frees` and fsdp.free, compute/comm timing and
// peak bytes. Mixed precision: nn.cast, and nn ops on bf16/f16 buffers run
// the f32 kernels on widened scratch copies (runtime-owned, not counted in
// peak bytes) and round the results back.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Interpreter.h"

#include "fsdp/Half.h"
#include "fsdp/Kernels.h"
#include "fsdp/TransformerKernels.h"
#include "fsdp/runtime.h"

#include <cstring>
#include <map>
#include <unordered_map>

namespace fsdp::rt {

namespace {

fsdp_dtype toC(DType t) {
  switch (t) {
  case DType::F32: return FSDP_F32;
  case DType::F64: return FSDP_F64;
  case DType::I32: return FSDP_I32;
  case DType::I64: return FSDP_I64;
  case DType::BF16: return FSDP_BF16;
  case DType::F16: return FSDP_F16;
  }
  return FSDP_F32;
}

fsdp_group toC(Group g) {
  switch (g) {
  case Group::World: return FSDP_GROUP_WORLD;
  case Group::Shard: return FSDP_GROUP_SHARD;
  case Group::Replicate: return FSDP_GROUP_REPLICATE;
  }
  return FSDP_GROUP_WORLD;
}

// Reads element i of a buffer of dtype t as double / int64.
double loadAsDouble(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F32: return static_cast<const float *>(p)[i];
  case DType::F64: return static_cast<const double *>(p)[i];
  case DType::I32: return static_cast<const int32_t *>(p)[i];
  case DType::I64: return static_cast<double>(static_cast<const int64_t *>(p)[i]);
  case DType::BF16: return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case DType::F16: return f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}
int64_t loadAsInt(const void *p, DType t, int64_t i) {
  return t == DType::I32 ? static_cast<const int32_t *>(p)[i]
                         : static_cast<const int64_t *>(p)[i];
}
// Stores n host values into a buffer of dtype t, the dtype switch outside
// the loop (the step's inputs and outputs are converted every step: the
// carried parameter shards and optimizer moments).
void storeFromDoubles(void *p, DType t, const double *v, int64_t n) {
  switch (t) {
  case DType::F32: {
    float *d = static_cast<float *>(p);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<float>(v[i]);
    break;
  }
  case DType::F64: std::memcpy(p, v, static_cast<size_t>(n) * sizeof(double)); break;
  case DType::I32: {
    int32_t *d = static_cast<int32_t *>(p);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<int32_t>(v[i]);
    break;
  }
  case DType::I64: {
    int64_t *d = static_cast<int64_t *>(p);
    for (int64_t i = 0; i < n; ++i)
      d[i] = static_cast<int64_t>(v[i]);
    break;
  }
  // Through f32, so that a host value equals nn.cast of its f32 rounding.
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(p)[i] = floatToBf16(static_cast<float>(v[i]));
    break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint16_t *>(p)[i] = floatToF16(static_cast<float>(v[i]));
    break;
  }
}

// Reads n elements of a buffer of dtype t as host values (the inverse).
void loadAsDoubles(const void *p, DType t, double *v, int64_t n) {
  switch (t) {
  case DType::F32: {
    const float *s = static_cast<const float *>(p);
    for (int64_t i = 0; i < n; ++i)
      v[i] = s[i];
    break;
  }
  case DType::F64: std::memcpy(v, p, static_cast<size_t>(n) * sizeof(double)); break;
  default:
    for (int64_t i = 0; i < n; ++i)
      v[i] = loadAsDouble(p, t, i);
  }
}

// Widens n elements of float dtype t at src into f32.
void widenToFloat(const void *src, DType t, float *dst, int64_t n) {
  switch (t) {
  case DType::BF16: bf16ToFloatN(static_cast<const uint16_t *>(src), dst, n); break;
  case DType::F16: f16ToFloatN(static_cast<const uint16_t *>(src), dst, n); break;
  case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); break;
  default:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<float>(static_cast<const double *>(src)[i]);
  }
}
// Rounds n f32 values into the 2-byte dtype t at dst.
void roundFromFloat(const float *src, DType t, void *dst, int64_t n) {
  if (t == DType::BF16)
    floatToBf16N(src, static_cast<uint16_t *>(dst), n);
  else
    floatToF16N(src, static_cast<uint16_t *>(dst), n);
}

// nn.cast: n elements from float dtype st at src to float dtype dt at dst;
// narrowing rounds to nearest even once (f64 -> bf16/f16 included).
void castElements(const void *src, DType st, void *dst, DType dt, int64_t n) {
  if (st == dt) {
    std::memmove(dst, src, static_cast<size_t>(n * dtypeSize(st)));
    return;
  }
  if (st == DType::F64 && isHalfDType(dt)) {
    const double *s = static_cast<const double *>(src);
    uint16_t *d = static_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = dt == DType::BF16 ? doubleToBf16(s[i]) : doubleToF16(s[i]);
    return;
  }
  if (dt == DType::F64) { // widening (f32 -> f64 and 2-byte -> f64 are exact)
    double *d = static_cast<double *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] = loadAsDouble(src, st, i);
    return;
  }
  // st is f32 or 2-byte, dt is f32 or 2-byte (different), or f64 -> f32.
  for (int64_t i = 0; i < n; ++i) {
    float v = st == DType::F64 ? static_cast<float>(static_cast<const double *>(src)[i])
                               : static_cast<float>(loadAsDouble(src, st, i));
    if (dt == DType::F32)
      static_cast<float *>(dst)[i] = v;
    else
      static_cast<uint16_t *>(dst)[i] =
          dt == DType::BF16 ? floatToBf16(v) : floatToF16(v);
  }
}

struct Pending {
  fsdp_handle handle;
  int64_t sendRoot, recvRoot;
};

// The state of one run(): live buffers by root id and pending collectives.
// Buffers are fsdp_alloc'd, or, with an arena (Program::usesArena), bound to
// arena + arena_offset and accounted with fsdp_mem_account. The destructor
// releases everything, also on errors.
class Frame {
public:
  Frame(const Program &p, char *arenaBase) : prog(p), arena(arenaBase) {}
  ~Frame() {
    for (Pending &q : pending)
      fsdp_wait(q.handle); // never leave MPI requests dangling
    for (auto &[id, ptr] : live)
      unbind(id, ptr);
  }

  /// Makes the owned buffer `rootId` live: fsdp_alloc (zero-filled), or its
  /// arena slot after checking that no live buffer overlaps it, zero-filled
  /// unless `overwritten` (the instruction defining it writes every element).
  void allocate(int64_t rootId, bool overwritten = false) {
    if (live.count(rootId))
      throw Error("buffer " + std::to_string(rootId) +
                  " is defined while still live");
    const BufferDesc &b = prog.buffer(rootId);
    void *p;
    if (arena) {
      checkSlotFree(b);
      p = arena + b.arenaOffset;
      if (!overwritten)
        std::memset(p, 0, static_cast<size_t>(b.bytes));
      fsdp_mem_account(b.bytes);
      if (b.bytes > 0)
        slots[b.arenaOffset] = {rootId, curInst};
    } else {
      p = fsdp_alloc(static_cast<size_t>(b.bytes));
      if (!p)
        throw Error(std::string(fsdp_last_error()));
    }
    live[rootId] = p;
  }
  /// Ends the life of owned buffer `id` at `p` (not erased from `live`).
  void unbind(int64_t id, void *p) {
    if (!arena) {
      fsdp_free(p);
      return;
    }
    const BufferDesc &b = prog.buffer(id);
    fsdp_mem_account(-b.bytes);
    if (b.bytes > 0)
      slots.erase(b.arenaOffset);
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
    std::string since = "the step start (an input)";
    if (it->second.inst >= 0) {
      const Instruction &d = prog.instructions()[it->second.inst];
      since = "instruction #" + std::to_string(it->second.inst) + " '" +
              d.op + "'" + (d.loc.empty() ? "" : " (" + d.loc + ")");
    }
    throw Error("memory plan error: buffer " + std::to_string(b.id) +
                " at arena bytes [" + std::to_string(lo) + ", " +
                std::to_string(hi) + ") overlaps live buffer " +
                std::to_string(o.id) + " at arena bytes [" +
                std::to_string(it->first) + ", " +
                std::to_string(it->first + o.bytes) + "), live since " +
                since);
  }
  // Makes result `id` usable: allocates it, or for a view its root if the
  // root is not live yet (zero-filled: the view covers part of it).
  // `overwritten`: the instruction writes every element of its own results.
  void define(int64_t id, bool overwritten) {
    const BufferDesc &b = prog.buffer(id);
    if (b.viewOf >= 0) {
      if (!live.count(b.rootId))
        allocate(b.rootId);
    } else {
      allocate(id, overwritten);
    }
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
  // The memory of `id`: its f32 scratch copy while a bf16/f16 op runs
  // (see execHalf), else the schedule buffer.
  void *ptr(int64_t id) {
    if (!scratch.empty()) {
      auto s = scratch.find(id);
      if (s != scratch.end())
        return s->second;
    }
    return bufferPtr(id);
  }
  // The schedule buffer of `id` (root + offset), ignoring scratch copies.
  void *bufferPtr(int64_t id) {
    const BufferDesc &b = prog.buffer(id);
    auto it = live.find(b.rootId);
    if (it == live.end())
      throw Error("buffer " + std::to_string(id) +
                  (b.viewOf >= 0 ? " (a view of buffer " +
                                       std::to_string(b.rootId) + ")"
                                 : std::string()) +
                  " is used but not live (never defined, or already freed)");
    return static_cast<char *>(it->second) +
           b.rootOffset * dtypeSize(prog.buffer(b.rootId).dtype);
  }
  template <typename T> T *as(int64_t id) { return static_cast<T *>(ptr(id)); }

  // Completes every pending collective reading or writing root of `id`.
  void waitTouching(int64_t id) {
    int64_t root = prog.buffer(id).rootId;
    for (size_t i = 0; i < pending.size();) {
      if (pending[i].sendRoot == root || pending[i].recvRoot == root) {
        fsdp_handle h = pending[i].handle;
        pending.erase(pending.begin() + i);
        if (fsdp_wait(h) != FSDP_OK)
          throw Error(fsdp_last_error());
      } else {
        ++i;
      }
    }
  }
  void waitAll() {
    while (!pending.empty()) {
      fsdp_handle h = pending.front().handle;
      pending.erase(pending.begin());
      if (fsdp_wait(h) != FSDP_OK)
        throw Error(fsdp_last_error());
    }
  }
  // Lets MPI progress the pending collectives between instructions in
  // FSDP_PROGRESS_TEST mode (runtime.h, fsdp_progress): Open MPI advances a
  // non-blocking collective one round per call, so a test after each kernel
  // moves the transfers along while the next kernel runs (on other ranks'
  // cores). FSDP_PROGRESS_THREAD: the runtime's thread tests them;
  // FSDP_PROGRESS_NONE: they progress only inside fsdp_wait.
  void poke() {
    if (pending.empty() || fsdp_get_progress() != FSDP_PROGRESS_TEST)
      return;
    for (Pending &q : pending) {
      int done = 0;
      fsdp_test(q.handle, &done);
    }
  }

  /// An arena slot in use: its buffer and the instruction that bound it
  /// (-1: an input, bound at the step start).
  struct Slot {
    int64_t id, inst;
  };

  const Program &prog;
  char *arena; ///< the planned arena, or null (fsdp_alloc per buffer)
  int64_t curInst = -1; ///< the instruction being executed (-1: inputs)
  std::map<int64_t, Slot> slots; ///< live arena slots by byte offset
  std::unordered_map<int64_t, void *> live;
  std::vector<Pending> pending;
  /// f32 stand-ins of bf16/f16 buffers during one op (execHalf).
  std::unordered_map<int64_t, void *> scratch;
};

// [outer, axis, inner] factorisation of `shape` around `axis` (may be
// negative, counted from the end).
void aroundAxis(const std::vector<int64_t> &shape, int64_t axis,
                int64_t &outer, int64_t &inner) {
  int64_t rank = static_cast<int64_t>(shape.size());
  if (axis < 0)
    axis += rank;
  outer = inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= shape[i];
  for (int64_t i = axis + 1; i < rank; ++i)
    inner *= shape[i];
}

// The transformer ops of runtime/docs/schedule-format.md ("Transformer ops").
template <typename T>
void execTransformer(const Instruction &in, Frame &f) {
  const Program &p = f.prog;
  const auto &o = in.operands;
  const auto &r = in.results;
  auto B = [&](int64_t id) -> const BufferDesc & { return p.buffer(id); };
  switch (in.kind) {
  case OpKind::Embedding:
  case OpKind::EmbeddingGrad: {
    bool grad = in.kind == OpKind::EmbeddingGrad;
    const auto &ts = B(grad ? r[0] : o[1]).shape;
    int64_t n = B(o[0]).numel, vocab = ts[0], dim = ts[1];
    bool i32 = B(o[0]).dtype == DType::I32;
    if (grad && i32)
      cpu::embeddingGrad<T, int32_t>(f.as<int32_t>(o[0]), f.as<T>(o[1]),
                                     f.as<T>(r[0]), n, vocab, dim);
    else if (grad)
      cpu::embeddingGrad<T, int64_t>(f.as<int64_t>(o[0]), f.as<T>(o[1]),
                                     f.as<T>(r[0]), n, vocab, dim);
    else if (i32)
      cpu::embedding<T, int32_t>(f.as<int32_t>(o[0]), f.as<T>(o[1]),
                                 f.as<T>(r[0]), n, vocab, dim);
    else
      cpu::embedding<T, int64_t>(f.as<int64_t>(o[0]), f.as<T>(o[1]),
                                 f.as<T>(r[0]), n, vocab, dim);
    break;
  }
  case OpKind::PositionEmbedding: {
    const auto &xs = B(o[0]).shape;
    cpu::positionEmbedding<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]),
                              xs[0], xs[1], xs[2]);
    break;
  }
  case OpKind::PositionEmbeddingGrad: {
    const auto &xs = B(o[0]).shape;
    cpu::positionEmbeddingGrad<T>(f.as<T>(o[0]), f.as<T>(r[0]), xs[0], xs[1],
                                  xs[2], B(r[0]).shape[0]);
    break;
  }
  case OpKind::LayerNorm:
  case OpKind::LayerNormGrad:
  case OpKind::RmsNorm:
  case OpKind::RmsNormGrad: {
    int64_t c = B(o[0]).shape.back(), rows = c ? B(o[0]).numel / c : 0;
    if (in.kind == OpKind::LayerNorm)
      cpu::layerNorm<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(o[2]),
                        f.as<T>(r[0]), rows, c, in.eps);
    else if (in.kind == OpKind::LayerNormGrad)
      cpu::layerNormGrad<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(o[2]),
                            f.as<T>(r[0]), f.as<T>(r[1]), f.as<T>(r[2]), rows,
                            c, in.eps);
    else if (in.kind == OpKind::RmsNorm)
      cpu::rmsNorm<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]), rows, c,
                      in.eps);
    else
      cpu::rmsNormGrad<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(o[2]),
                          f.as<T>(r[0]), f.as<T>(r[1]), rows, c, in.eps);
    break;
  }
  case OpKind::Rope: {
    const auto &xs = B(o[0]).shape;
    cpu::rope<T>(f.as<T>(o[0]), f.as<T>(r[0]), xs[0], xs[1],
                 xs[2] / in.headDim, in.headDim, in.theta, in.inverse);
    break;
  }
  case OpKind::Attention:
  case OpKind::AttentionGrad: {
    const auto &qs = B(o[0]).shape;
    int64_t d = qs[2] / in.numHeads;
    if (in.kind == OpKind::Attention)
      cpu::attention<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(o[2]),
                        f.as<T>(r[0]), qs[0], qs[1], in.numHeads,
                        in.numKvHeads, d);
    else
      cpu::attentionGrad<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(o[2]),
                            f.as<T>(o[3]), f.as<T>(r[0]), f.as<T>(r[1]),
                            f.as<T>(r[2]), qs[0], qs[1], in.numHeads,
                            in.numKvHeads, d);
    break;
  }
  case OpKind::Silu:
    cpu::silu<T>(f.as<T>(o[0]), f.as<T>(r[0]), B(r[0]).numel);
    break;
  case OpKind::SiluGrad:
    cpu::siluGrad<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]),
                     B(r[0]).numel);
    break;
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
    for (int64_t id : parts)
      sizes.push_back(B(id).shape[axis]);
    if (sp) {
      std::vector<T *> outs;
      for (int64_t id : r)
        outs.push_back(f.as<T>(id));
      cpu::split<T>(f.as<T>(o[0]), outs, sizes, outer, inner);
    } else {
      std::vector<const T *> ins;
      for (int64_t id : o)
        ins.push_back(f.as<T>(id));
      cpu::concat<T>(ins, f.as<T>(r[0]), sizes, outer, inner);
    }
    break;
  }
  case OpKind::ZerosLike:
    cpu::fill<T>(f.as<T>(r[0]), B(r[0]).numel, 0.0);
    break;
  default:
    throw Error("internal error: op is not a float kernel");
  }
}

template <typename T>
void execFloat(const Instruction &in, Frame &f) {
  const Program &p = f.prog;
  const auto &o = in.operands;
  const auto &r = in.results;
  auto B = [&](int64_t id) -> const BufferDesc & { return p.buffer(id); };
  switch (in.kind) {
  case OpKind::Linear: {
    int64_t k = B(o[0]).shape.back();
    int64_t n = B(o[1]).shape[in.transposeWeight ? 1 : 0];
    int64_t m = k ? B(o[0]).numel / k : 0;
    cpu::linear<T>(f.as<T>(o[0]), f.as<T>(o[1]),
                   o.size() == 3 ? f.as<T>(o[2]) : nullptr, f.as<T>(r[0]), m, k,
                   n, in.transposeWeight);
    break;
  }
  case OpKind::Matmul: {
    int64_t ac = B(o[0]).shape.back(), bc = B(o[1]).shape.back();
    cpu::matmul<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]),
                   ac ? B(o[0]).numel / ac : 0, ac, bc ? B(o[1]).numel / bc : 0,
                   bc, in.transA, in.transB);
    break;
  }
  case OpKind::Add:
    cpu::add<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]), B(r[0]).numel);
    break;
  case OpKind::Mul:
    cpu::mul<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]), B(r[0]).numel);
    break;
  case OpKind::Relu:
    cpu::relu<T>(f.as<T>(o[0]), f.as<T>(r[0]), B(r[0]).numel);
    break;
  case OpKind::ReluGrad:
    cpu::reluGrad<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]),
                     B(r[0]).numel);
    break;
  case OpKind::Gelu:
    cpu::gelu<T>(f.as<T>(o[0]), f.as<T>(r[0]), B(r[0]).numel, in.approxTanh);
    break;
  case OpKind::GeluGrad:
    cpu::geluGrad<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]),
                     B(r[0]).numel, in.approxTanh);
    break;
  case OpKind::ReduceSum:
    cpu::reduceSum<T>(f.as<T>(o[0]), B(o[0]).shape, in.axes, f.as<T>(r[0]));
    break;
  case OpKind::Broadcast:
    cpu::broadcast<T>(f.as<T>(o[0]), B(r[0]).shape, in.axes, f.as<T>(r[0]));
    break;
  case OpKind::CrossEntropy: {
    int64_t c = B(o[0]).shape.back(), pos = B(o[1]).numel;
    T loss = B(o[1]).dtype == DType::I32
                 ? cpu::crossEntropy<T, int32_t>(f.as<T>(o[0]),
                                                 f.as<int32_t>(o[1]), pos, c)
                 : cpu::crossEntropy<T, int64_t>(f.as<T>(o[0]),
                                                 f.as<int64_t>(o[1]), pos, c);
    *f.as<T>(r[0]) = loss;
    break;
  }
  case OpKind::CrossEntropyGrad: {
    int64_t c = B(o[0]).shape.back(), pos = B(o[1]).numel;
    T dloss = *f.as<T>(o[2]);
    if (B(o[1]).dtype == DType::I32)
      cpu::crossEntropyGrad<T, int32_t>(f.as<T>(o[0]), f.as<int32_t>(o[1]),
                                        dloss, f.as<T>(r[0]), pos, c);
    else
      cpu::crossEntropyGrad<T, int64_t>(f.as<T>(o[0]), f.as<int64_t>(o[1]),
                                        dloss, f.as<T>(r[0]), pos, c);
    break;
  }
  case OpKind::SgdUpdate:
    cpu::sgdUpdate<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(r[0]),
                      B(r[0]).numel, in.lr, in.weightDecay);
    break;
  case OpKind::AdamwUpdate: {
    int64_t step = loadAsInt(f.ptr(o[4]), B(o[4]).dtype, 0);
    cpu::adamwUpdate<T>(f.as<T>(o[0]), f.as<T>(o[1]), f.as<T>(o[2]),
                        f.as<T>(o[3]), step, f.as<T>(r[0]), f.as<T>(r[1]),
                        f.as<T>(r[2]), B(r[0]).numel, in.lr, in.beta1,
                        in.beta2, in.eps, in.weightDecay);
    break;
  }
  case OpKind::Flatten: {
    std::vector<const T *> parts;
    std::vector<int64_t> sizes;
    for (int64_t id : o) {
      parts.push_back(f.as<T>(id));
      sizes.push_back(B(id).numel);
    }
    cpu::flatten<T>(parts, sizes, in.offsets, f.as<T>(r[0]), B(r[0]).numel);
    break;
  }
  default:
    execTransformer<T>(in, f);
  }
}

// An nn op whose float buffers are bf16/f16 ("Mixed precision"): widens
// every 2-byte operand (and result, in case a kernel reads it) into f32
// scratch owned by the runtime (std::vector: not fsdp_alloc, so not in peak
// bytes), runs the f32 kernel on the scratch, and rounds the results back.
void execHalf(const Instruction &in, Frame &f) {
  const Program &p = f.prog;
  std::vector<std::vector<float>> store;
  struct Clear {
    Frame &f;
    ~Clear() { f.scratch.clear(); }
  } clear{f};
  auto stage = [&](int64_t id) {
    const BufferDesc &b = p.buffer(id);
    if (!isHalfDType(b.dtype) || f.scratch.count(id))
      return;
    store.emplace_back(static_cast<size_t>(b.numel));
    widenToFloat(f.bufferPtr(id), b.dtype, store.back().data(), b.numel);
    f.scratch[id] = store.back().data();
  };
  for (int64_t id : in.operands)
    stage(id);
  for (int64_t id : in.results)
    stage(id);
  execFloat<float>(in, f);
  for (int64_t id : in.results) {
    const BufferDesc &b = p.buffer(id);
    if (isHalfDType(b.dtype))
      roundFromFloat(static_cast<const float *>(f.scratch.at(id)), b.dtype,
                     f.bufferPtr(id), b.numel);
  }
}

void execute(const Instruction &in, Frame &f) {
  const Program &p = f.prog;
  switch (in.kind) {
  case OpKind::Constant: {
    const BufferDesc &b = p.buffer(in.results[0]);
    std::vector<double> v(static_cast<size_t>(b.numel), in.value);
    storeFromDoubles(f.ptr(b.id), b.dtype, v.data(), b.numel);
    return;
  }
  case OpKind::AllGather:
  case OpKind::ReduceScatter: {
    bool ag = in.kind == OpKind::AllGather;
    int64_t src = in.operands[0], dst = in.results[0];
    int64_t shard = ag ? src : dst;
    const BufferDesc &sb = p.buffer(shard);
    fsdp_handle h = nullptr;
    fsdp_reduce_op op = in.average ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM;
    int rc = ag ? fsdp_all_gather_start_in(toC(in.group), f.ptr(src),
                                           f.ptr(dst), sb.numel, toC(sb.dtype),
                                           &h)
                : fsdp_reduce_scatter_start_in(toC(in.group), f.ptr(src),
                                               f.ptr(dst), sb.numel,
                                               toC(sb.dtype), op, &h);
    if (rc != FSDP_OK)
      throw Error(fsdp_last_error());
    f.pending.push_back(
        {h, p.buffer(src).rootId, p.buffer(dst).rootId});
    return;
  }
  case OpKind::AllReduce: {
    int64_t src = in.operands[0], dst = in.results[0];
    const BufferDesc &b = p.buffer(dst);
    fsdp_handle h = nullptr;
    if (fsdp_all_reduce_start(toC(in.group), f.ptr(src), f.ptr(dst), b.numel,
                              toC(b.dtype),
                              in.average ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM,
                              &h) != FSDP_OK)
      throw Error(fsdp_last_error());
    f.pending.push_back({h, p.buffer(src).rootId, b.rootId});
    return;
  }
  case OpKind::LocalShard: {
    // A compute op: copy this rank's slice [i*s, (i+1)*s) of the full buffer.
    const BufferDesc &b = p.buffer(in.results[0]);
    int64_t i = fsdp_group_rank(toC(in.group));
    int64_t es = dtypeSize(b.dtype);
    double t0 = fsdp_now();
    std::memcpy(f.ptr(b.id),
                static_cast<const char *>(f.ptr(in.operands[0])) +
                    i * b.numel * es,
                static_cast<size_t>(b.numel * es));
    fsdp_add_compute_seconds(fsdp_now() - t0);
    return;
  }
  case OpKind::Free:
    f.release(in.operands[0]);
    return;
  case OpKind::ParamView:
    return; // the result was bound by Frame::define
  case OpKind::Wait:
    return; // the operand's collective was completed before execute (waitTouching)
  case OpKind::Pack:
  case OpKind::Unpack: {
    // Block b of the bucket is block b of each unit buffer in turn
    // (FSDP2's all-gather copy-in / copy-out).
    bool pack = in.kind == OpKind::Pack;
    const std::vector<int64_t> &parts = pack ? in.operands : in.results;
    int64_t bucket = pack ? in.results[0] : in.operands[0];
    int64_t es = dtypeSize(p.buffer(bucket).dtype);
    char *bucketPtr = static_cast<char *>(f.ptr(bucket));
    double t0 = fsdp_now();
    int64_t at = 0;
    for (int64_t b = 0; b < in.blocks; ++b)
      for (int64_t id : parts) {
        int64_t n = p.buffer(id).numel / in.blocks;
        char *unit = static_cast<char *>(f.ptr(id)) + b * n * es;
        if (pack)
          std::memcpy(bucketPtr + at * es, unit, static_cast<size_t>(n * es));
        else
          std::memcpy(unit, bucketPtr + at * es, static_cast<size_t>(n * es));
        at += n;
      }
    fsdp_add_compute_seconds(fsdp_now() - t0);
    return;
  }
  case OpKind::MicroBatch: {
    // Micro-batch `index` is the contiguous block of rows [index·m, (index+1)·m).
    const BufferDesc &x = p.buffer(in.operands[0]), &y = p.buffer(in.results[0]);
    int64_t bytes = y.numel * dtypeSize(y.dtype);
    double t0 = fsdp_now();
    std::memcpy(f.ptr(y.id), static_cast<const char *>(f.ptr(x.id)) + in.index * bytes, bytes);
    fsdp_add_compute_seconds(fsdp_now() - t0);
    return;
  }
  case OpKind::Cast: {
    const BufferDesc &x = p.buffer(in.operands[0]), &y = p.buffer(in.results[0]);
    double t0 = fsdp_now();
    castElements(f.ptr(x.id), x.dtype, f.ptr(y.id), y.dtype, y.numel);
    fsdp_add_compute_seconds(fsdp_now() - t0);
    return;
  }
  default:
    break;
  }
  DType t = p.buffer(in.results[0]).dtype;
  double t0 = fsdp_now();
  if (t == DType::F32)
    execFloat<float>(in, f);
  else if (isHalfDType(t))
    execHalf(in, f);
  else
    execFloat<double>(in, f);
  fsdp_add_compute_seconds(fsdp_now() - t0);
}

} // namespace

// Whether `in`'s kernel writes every element of each of its results, so
// that their memory need not be zero-filled first. Every kernel does (the
// accumulating ones, embedding_grad, attention_grad, flatten, zero-fill
// their results themselves; shapes are validated to cover the results),
// except an all-gather when the runtime's group is smaller than the
// schedule's (a schedule loaded without the world-size check): only the
// gathered shards are written and the rest must read as zeros.
bool Program::overwritesResults(const Instruction &in) const {
  if (in.kind != OpKind::AllGather)
    return true;
  fsdp_group g = toC(in.group);
  return fsdp_group_size(g) == groupSize(in.group);
}

HostValues Program::run(const HostValues &inputs) {
  HostValues out;
  run(inputs, out);
  return out;
}

void Program::run(const HostValues &inputs, HostValues &out) {
  // The grid's process groups (built once; a no-op when unchanged). A
  // schedule loaded without the world-size check for another world size
  // keeps the current grid: its collectives then only copy locally.
  if (worldSizeValue == fsdp_world_size() &&
      fsdp_set_grid(static_cast<int>(shardSizeValue)) != FSDP_OK)
    throw Error(sourceName + ": " + fsdp_last_error());
  checkSameCollectivesOnAllRanks();
  int64_t base = fsdp_mem_current_bytes();
  fsdp_mem_reset_peak();
  char *arenaBase = nullptr;
  if (arenaPlanned) {
    if (!arena) { // once per Program (shared by its copies), reused per step
      void *a = fsdp_arena_alloc(static_cast<size_t>(arenaSize),
                                 static_cast<size_t>(arenaAlignment));
      if (!a)
        throw Error(sourceName + ": " + fsdp_last_error());
      arena = std::shared_ptr<void>(a, fsdp_arena_free);
    }
    arenaBase = static_cast<char *>(arena.get());
  }
  {
    Frame f(*this, arenaBase);
    for (const IoDesc &io : inputList) {
      const BufferDesc &b = buffer(io.buffer);
      auto it = inputs.find(io.buffer);
      if (it == inputs.end())
        throw Error(sourceName + ": input buffer " + std::to_string(io.buffer) +
                    " (role '" + io.role + "') was not provided");
      if (static_cast<int64_t>(it->second.size()) != b.numel)
        throw Error(sourceName + ": input buffer " + std::to_string(io.buffer) +
                    " (role '" + io.role + "') needs " +
                    std::to_string(b.numel) + " values, got " +
                    std::to_string(it->second.size()));
      try {
        f.allocate(io.buffer, /*overwritten=*/true); // filled below
      } catch (const Error &e) {
        throw Error(sourceName + ": input buffer " + std::to_string(io.buffer) +
                    " (role '" + io.role + "'): " + e.what());
      }
      storeFromDoubles(f.ptr(io.buffer), b.dtype, it->second.data(), b.numel);
    }
    for (size_t idx = 0; idx < program.size(); ++idx) {
      const Instruction &in = program[idx];
      f.curInst = static_cast<int64_t>(idx);
      // fsdp_profile_enabled: kernel seconds under the op name, time blocked
      // on collectives and the interpreter's own work (binding and, where
      // needed, zeroing buffers, frees, progress tests) under "(comm wait)" /
      // "(interpreter)".
      bool profiling = fsdp_profile_enabled();
      double pt0 = 0, pw0 = 0, pk0 = 0, pk1 = 0;
      if (profiling) {
        pt0 = fsdp_now();
        pw0 = fsdp_comm_wait_seconds();
      }
      try {
        for (int64_t id : in.operands)
          f.waitTouching(id);
        for (int64_t id : in.results) {
          f.waitTouching(id);
          f.define(id, overwritesResults(in));
        }
        if (profiling)
          pk0 = fsdp_now();
        execute(in, f);
        if (profiling)
          pk1 = fsdp_now();
        for (int64_t id : in.frees)
          f.release(id);
        f.poke();
        if (profiling) {
          double wait = fsdp_comm_wait_seconds() - pw0;
          fsdp_profile_add(in.op.c_str(), pk1 - pk0);
          fsdp_profile_add("(comm wait)", wait);
          fsdp_profile_add("(interpreter)",
                           (fsdp_now() - pt0) - (pk1 - pk0) - wait);
        }
      } catch (const Error &e) {
        throw Error(where(idx) + ": " + e.what());
      } catch (const std::exception &e) {
        throw Error(where(idx) + ": " + e.what());
      }
    }
    double pw0 = fsdp_comm_wait_seconds();
    f.waitAll();
    if (fsdp_profile_enabled())
      fsdp_profile_add("(comm wait)", fsdp_comm_wait_seconds() - pw0);
    for (const IoDesc &io : outputList) {
      const BufferDesc &b = buffer(io.buffer);
      void *ptr;
      try {
        ptr = f.ptr(io.buffer);
      } catch (const Error &e) {
        throw Error(sourceName + ": output (role '" + io.role + "'): " +
                    e.what());
      }
      std::vector<double> &v = out[io.buffer];
      v.resize(static_cast<size_t>(b.numel));
      loadAsDoubles(ptr, b.dtype, v.data(), b.numel);
    }
    lastPeak = fsdp_mem_peak_bytes() - base;
  }
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
