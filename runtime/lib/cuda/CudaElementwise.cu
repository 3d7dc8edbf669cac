//===- CudaElementwise.cu - elementwise kernels of the cuda driver --------===//
//
// fill, cast, init_values (fsdp/InitValues.h), add/mul, the activations and
// their gradients, the average after an NCCL sum (launchDivide), flatten, split
// and concat on the GPU: one thread per element over a grid-stride loop
// (CudaKernelUtil.cuh), or per 16-byte pack (cast, add/mul, activations)
// where the pointers are aligned to one. launchCast also serves the embedding
// gradient and attention (their f32 working copies).
//
//===----------------------------------------------------------------------===//
#include "CudaKernelUtil.cuh"

#include "fsdp/ElementMath.h"
#include "fsdp/InitValues.h"

#include <cstdint>
#include <initializer_list>

namespace fsdp::hal::cuda {

namespace {

//===--- Elementwise ------------------------------------------------------===//

// fsdp_init_values: element j from its index alone (fsdp/InitValues.h, the
// cpu driver's code), param and master from one evaluation.
__global__ void initValuesK(fsdp_dtype t, void *y, fsdp_dtype mt, void *master,
                            int64_t n, uint64_t seed, uint64_t fqnHash,
                            uint64_t first, int kind, double value) {
  FSDP_GRID_LOOP(j, n)
  init::initRange(t, y, mt, master, j, j + 1, seed, fqnHash, first, kind,
                  value);
}

template <typename T> __global__ void fillK(T *y, int64_t n, T v) {
  FSDP_GRID_LOOP(i, n) y[i] = v;
}

__device__ double loadAny(const void *p, int t, int64_t i) {
  switch (t) {
  case FSDP_F32:
    return static_cast<const float *>(p)[i];
  case FSDP_F64:
    return static_cast<const double *>(p)[i];
  case FSDP_BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDP_F16:
    return f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  }
  return 0;
}

// The cpu driver's nn.cast: f64 -> 2-byte rounds once; widening is exact;
// otherwise through f32.
__global__ void castK(const void *src, int st, void *dst, int dt, int64_t n) {
  FSDP_GRID_LOOP(i, n) {
    if (st == FSDP_F64 && (dt == FSDP_BF16 || dt == FSDP_F16)) {
      double d = static_cast<const double *>(src)[i];
      static_cast<uint16_t *>(dst)[i] =
          dt == FSDP_BF16 ? doubleToBf16(d) : doubleToF16(d);
    } else if (dt == FSDP_F64) {
      static_cast<double *>(dst)[i] = loadAny(src, st, i);
    } else {
      float v = static_cast<float>(loadAny(src, st, i));
      if (dt == FSDP_F32)
        static_cast<float *>(dst)[i] = v;
      else
        static_cast<uint16_t *>(dst)[i] =
            dt == FSDP_BF16 ? floatToBf16(v) : floatToF16(v);
    }
  }
}

/// kN elements of S in one aligned access: a streaming kernel's loads and
/// stores in 64- or 128-bit transactions rather than one per 2-byte element
/// (on the H200 a bf16 add one element per thread moved 2.5 TB/s, a
/// device-to-device copy 4.2: bench/README.md, "The cuda driver on an H200").
template <typename S, int kN> struct alignas(sizeof(S) * kN) Pack {
  S v[kN];
};

bool alignedTo(const void *p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

/// castK between two of f32, bf16 and f16, kCastVec elements per access: each
/// element through f32 as castK's last branch, so the bits are castK's.
constexpr int kCastVec = 8;
template <int ST, int DT>
__global__ void castPackK(const Pack<typename Elt<ST>::S, kCastVec> *src,
                          Pack<typename Elt<DT>::S, kCastVec> *dst,
                          int64_t packs) {
  FSDP_GRID_LOOP(i, packs) {
    auto in = src[i];
    Pack<typename Elt<DT>::S, kCastVec> out;
#pragma unroll
    for (int j = 0; j < kCastVec; ++j)
      out.v[j] = Elt<DT>::st(static_cast<float>(Elt<ST>::ld(in.v, j)));
    dst[i] = out;
  }
}

/// Launches castPackK<ST, DT> on n / kCastVec packs; false (nothing launched)
/// unless both dtypes are f32, bf16 or f16 and both pointers are aligned to a
/// pack.
template <int ST, int DT>
bool castPacked(const void *src, void *dst, int64_t packs, cudaStream_t s) {
  using SS = typename Elt<ST>::S;
  using DS = typename Elt<DT>::S;
  if (!alignedTo(src, sizeof(SS) * kCastVec) ||
      !alignedTo(dst, sizeof(DS) * kCastVec))
    return false;
  castPackK<ST, DT><<<blocksFor(packs), kThreads, 0, s>>>(
      static_cast<const Pack<SS, kCastVec> *>(src),
      static_cast<Pack<DS, kCastVec> *>(dst), packs);
  return true;
}

bool castPacked(const void *src, fsdp_dtype st, void *dst, fsdp_dtype dt,
                int64_t packs, cudaStream_t s) {
  auto toDst = [&](auto srcTag) {
    constexpr int ST = decltype(srcTag)::value;
    if (dt == FSDP_F32)
      return castPacked<ST, FSDP_F32>(src, dst, packs, s);
    if (dt == FSDP_BF16)
      return castPacked<ST, FSDP_BF16>(src, dst, packs, s);
    if (dt == FSDP_F16)
      return castPacked<ST, FSDP_F16>(src, dst, packs, s);
    return false;
  };
  if (st == dt)
    return false;
  if (st == FSDP_F32)
    return toDst(DtTag<FSDP_F32>{});
  if (st == FSDP_BF16)
    return toDst(DtTag<FSDP_BF16>{});
  if (st == FSDP_F16)
    return toDst(DtTag<FSDP_F16>{});
  return false;
}

} // namespace

void launchCast(const void *src, fsdp_dtype st, void *dst, fsdp_dtype dt,
                int64_t n, cudaStream_t s) {
  if (n == 0)
    return;
  int64_t packs = n / kCastVec, done = 0;
  if (packs > 0 && castPacked(src, st, dst, dt, packs, s))
    done = packs * kCastVec;
  if (done < n)
    castK<<<blocksFor(n - done), kThreads, 0, s>>>(
        static_cast<const char *>(src) + done * dtypeSize(st), st,
        static_cast<char *>(dst) + done * dtypeSize(dt), dt, n - done);
  launched("cast kernel");
}

namespace {

struct AddOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    return a + b;
  }
};
struct MulOp {
  template <typename C> __device__ C operator()(C a, C b) const {
    return a * b;
  }
};
struct ReluOp {
  template <typename C> __device__ C operator()(C x) const {
    return math::relu(x);
  }
};
struct ReluGradOp {
  template <typename C> __device__ C operator()(C x, C dy) const {
    return math::reluGrad(x, dy);
  }
};
struct GeluOp {
  bool tanhApprox;
  template <typename C> __device__ C operator()(C x) const {
    return math::gelu(x, tanhApprox);
  }
};
struct GeluGradOp {
  bool tanhApprox;
  template <typename C> __device__ C operator()(C x, C dy) const {
    return math::geluGrad(x, dy, tanhApprox);
  }
};
struct SiluOp {
  template <typename C> __device__ C operator()(C x) const {
    return math::silu(x);
  }
};
struct SiluGradOp {
  template <typename C> __device__ C operator()(C x, C dy) const {
    return math::siluGrad(x, dy);
  }
};

template <int DT, typename Op>
__global__ void unaryK(const typename Elt<DT>::S *x, typename Elt<DT>::S *y,
                       int64_t n, Op op) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n) y[i] = E::st(op(E::ld(x, i)));
}

template <int DT, typename Op>
__global__ void binaryK(const typename Elt<DT>::S *a,
                        const typename Elt<DT>::S *b, typename Elt<DT>::S *c,
                        int64_t n, Op op) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, n) c[i] = E::st(op(E::ld(a, i), E::ld(b, i)));
}

/// unaryK and binaryK on 16-byte packs (8 bf16/f16, 4 f32, 2 f64 elements),
/// the same per-element math.
template <int DT>
using Pack16 = Pack<typename Elt<DT>::S, 16 / sizeof(typename Elt<DT>::S)>;

template <int DT, typename Op>
__global__ void unaryPackK(const Pack16<DT> *x, Pack16<DT> *y, int64_t packs,
                           Op op) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, packs) {
    Pack16<DT> in = x[i], out;
#pragma unroll
    for (int j = 0; j < int(sizeof(in.v) / sizeof(in.v[0])); ++j)
      out.v[j] = E::st(op(E::ld(in.v, j)));
    y[i] = out;
  }
}

template <int DT, typename Op>
__global__ void binaryPackK(const Pack16<DT> *a, const Pack16<DT> *b,
                            Pack16<DT> *c, int64_t packs, Op op) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, packs) {
    Pack16<DT> x = a[i], y = b[i], out;
#pragma unroll
    for (int j = 0; j < int(sizeof(x.v) / sizeof(x.v[0])); ++j)
      out.v[j] = E::st(op(E::ld(x.v, j), E::ld(y.v, j)));
    c[i] = out;
  }
}

/// The packs of n elements when every pointer is 16-byte aligned, else 0;
/// the elements from packs · (elements per pack) on run one per thread.
template <int DT>
int64_t packsOf(int64_t n, std::initializer_list<const void *> ptrs) {
  for (const void *p : ptrs)
    if (!alignedTo(p, 16))
      return 0;
  return n / int64_t(sizeof(Pack16<DT>) / sizeof(typename Elt<DT>::S));
}

template <typename Op>
void unaryOn(cudaStream_t st, fsdp_dtype t, const char *name, const void *x,
             void *y, int64_t n, Op op) {
  if (n == 0)
    return;
  floatDtype(t, name, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    int64_t packs = packsOf<DT>(n, {x, y});
    int64_t done = packs * int64_t(sizeof(Pack16<DT>) / sizeof(S));
    if (packs > 0)
      unaryPackK<DT><<<blocksFor(packs), kThreads, 0, st>>>(
          static_cast<const Pack16<DT> *>(x), static_cast<Pack16<DT> *>(y),
          packs, op);
    if (done < n)
      unaryK<DT><<<blocksFor(n - done), kThreads, 0, st>>>(
          static_cast<const S *>(x) + done, static_cast<S *>(y) + done,
          n - done, op);
  });
  launched(name);
}

template <typename Op>
void unary(fsdp_stream_s *s, fsdp_dtype t, const char *name, const void *x,
           void *y, int64_t n, Op op) {
  unaryOn(streamOf(s), t, name, x, y, n, op);
}

template <typename Op>
void binary(fsdp_stream_s *s, fsdp_dtype t, const char *name, const void *a,
            const void *b, void *c, int64_t n, Op op) {
  if (n == 0)
    return;
  floatDtype(t, name, [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    int64_t packs = packsOf<DT>(n, {a, b, c});
    int64_t done = packs * int64_t(sizeof(Pack16<DT>) / sizeof(S));
    if (packs > 0)
      binaryPackK<DT><<<blocksFor(packs), kThreads, 0, streamOf(s)>>>(
          static_cast<const Pack16<DT> *>(a),
          static_cast<const Pack16<DT> *>(b), static_cast<Pack16<DT> *>(c),
          packs, op);
    if (done < n)
      binaryK<DT><<<blocksFor(n - done), kThreads, 0, streamOf(s)>>>(
          static_cast<const S *>(a) + done, static_cast<const S *>(b) + done,
          static_cast<S *>(c) + done, n - done, op);
  });
  launched(name);
}

template <int DT>
__global__ void dropoutK(const typename Elt<DT>::S *x, typename Elt<DT>::S *y,
                         int64_t n, double rate, int64_t seed, const void *step,
                         int stepI64, int64_t first, int64_t chunk,
                         int64_t stride, int64_t chunkFirst,
                         typename Elt<DT>::C scale) {
  using E = Elt<DT>;
  int64_t t = loadIndex(step, stepI64, 0);
  FSDP_GRID_LOOP(i, n)
  y[i] = E::st(math::dropout(
      E::ld(x, i),
      math::dropoutKeeps(
          seed, t, math::dropoutIndex(first, chunk, stride, chunkFirst, i),
          rate),
      scale));
}

/// x / divisor in the compute type (the average after an NCCL sum).
struct DivideOp {
  double divisor;
  template <typename C> __device__ C operator()(C x) const {
    return x / static_cast<C>(divisor);
  }
};

} // namespace

void launchDivide(void *data, int64_t count, fsdp_dtype t, double divisor,
                  cudaStream_t s) {
  // x / 1 is x: a group of one (or an f16 pre-divide that took it all) has
  // nothing to divide (on the H200 the pass cost 8% of a 1-rank step).
  if (divisor == 1)
    return;
  unaryOn(s, t, "avg kernel", data, data, count, DivideOp{divisor});
}

//===--- The entry points -------------------------------------------------===//

void CudaDevice::fill(fsdp_stream_s *s, fsdp_dtype t, void *y, int64_t n,
                      double value) {
  if (n == 0)
    return;
  cudaStream_t st = streamOf(s);
  int b = blocksFor(n);
  switch (t) {
  case FSDP_F32:
    fillK<<<b, kThreads, 0, st>>>(static_cast<float *>(y), n,
                                  static_cast<float>(value));
    break;
  case FSDP_F64:
    fillK<<<b, kThreads, 0, st>>>(static_cast<double *>(y), n, value);
    break;
  case FSDP_I32:
    fillK<<<b, kThreads, 0, st>>>(static_cast<int32_t *>(y), n,
                                  static_cast<int32_t>(value));
    break;
  case FSDP_I64:
    fillK<<<b, kThreads, 0, st>>>(static_cast<int64_t *>(y), n,
                                  static_cast<int64_t>(value));
    break;
  case FSDP_BF16:
  case FSDP_F16: {
    float f = static_cast<float>(value);
    uint16_t h = t == FSDP_BF16 ? floatToBf16(f) : floatToF16(f);
    fillK<<<b, kThreads, 0, st>>>(static_cast<uint16_t *>(y), n, h);
    break;
  }
  default:
    fail(FSDP_ERR_INVALID, "fsdp_fill: invalid dtype");
  }
  launched("fill kernel");
}

void CudaDevice::cast(fsdp_stream_s *s, fsdp_dtype xt, const void *x,
                      fsdp_dtype yt, void *y, int64_t n) {
  if (!isFloat(xt) || !isFloat(yt))
    fail(FSDP_ERR_INVALID, "fsdp_cast: float dtypes only");
  if (xt == yt) {
    copy(s, y, x, static_cast<size_t>(n) * dtypeSize(xt));
    return;
  }
  launchCast(x, xt, y, yt, n, streamOf(s));
}

void CudaDevice::init_values(fsdp_stream_s *s, fsdp_dtype t, void *y,
                             fsdp_dtype mt, void *master, int64_t n,
                             int64_t seed, int64_t fqnHash, int64_t first,
                             int kind, double value, int /*threads*/) {
  checkInitValues(t, master, mt, n, kind);
  if (n == 0)
    return;
  initValuesK<<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
      t, y, mt, master, n, static_cast<uint64_t>(seed),
      static_cast<uint64_t>(fqnHash), static_cast<uint64_t>(first), kind,
      value);
  launched("init_values kernel");
}

void CudaDevice::add(fsdp_stream_s *s, fsdp_dtype t, const void *a,
                     const void *b, void *c, int64_t n) {
  binary(s, t, "fsdp_add", a, b, c, n, AddOp{});
}
void CudaDevice::mul(fsdp_stream_s *s, fsdp_dtype t, const void *a,
                     const void *b, void *c, int64_t n) {
  binary(s, t, "fsdp_mul", a, b, c, n, MulOp{});
}
void CudaDevice::relu(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t n) {
  unary(s, t, "fsdp_relu", x, y, n, ReluOp{});
}
void CudaDevice::relu_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const void *dy, void *dx, int64_t n) {
  binary(s, t, "fsdp_relu_grad", x, dy, dx, n, ReluGradOp{});
}
void CudaDevice::gelu(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t n, int approxTanh) {
  unary(s, t, "fsdp_gelu", x, y, n, GeluOp{approxTanh != 0});
}
void CudaDevice::gelu_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const void *dy, void *dx, int64_t n,
                           int approxTanh) {
  binary(s, t, "fsdp_gelu_grad", x, dy, dx, n, GeluGradOp{approxTanh != 0});
}
void CudaDevice::silu(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                      int64_t n) {
  unary(s, t, "fsdp_silu", x, y, n, SiluOp{});
}
void CudaDevice::silu_grad(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                           const void *dy, void *dx, int64_t n) {
  binary(s, t, "fsdp_silu_grad", x, dy, dx, n, SiluGradOp{});
}

void CudaDevice::dropout(fsdp_stream_s *s, fsdp_dtype t, const void *x, void *y,
                         int64_t n, double rate, int64_t seed, const void *step,
                         fsdp_dtype stepType, int64_t first, int64_t chunk,
                         int64_t stride, int64_t chunkFirst) {
  if (!(rate >= 0 && rate < 1))
    fail(FSDP_ERR_INVALID,
         "fsdp_dropout: rate must be in [0, 1), got " + std::to_string(rate));
  if (chunk < 1)
    fail(FSDP_ERR_INVALID,
         "fsdp_dropout: chunk must be >= 1, got " + std::to_string(chunk));
  checkIndexType(stepType, "fsdp_dropout: step");
  if (n == 0)
    return;
  floatDtype(t, "fsdp_dropout", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using E = Elt<DT>;
    using C = typename E::C;
    dropoutK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const typename E::S *>(x), static_cast<typename E::S *>(y),
        n, rate, seed, step, stepType == FSDP_I64, first, chunk, stride,
        chunkFirst, static_cast<C>(1.0 / (1.0 - rate)));
  });
  launched("fsdp_dropout");
}

void CudaDevice::flatten(fsdp_stream_s *s, fsdp_dtype t,
                         const void *const *parts, const int64_t *numels,
                         const int64_t *offsets, int nparts, void *flat,
                         int64_t flatNumel) {
  floatDtype(t, "fsdp_flatten", [](auto) {});
  size_t es = dtypeSize(t);
  for (int i = 0; i < nparts; ++i)
    if (offsets[i] < 0 || offsets[i] + numels[i] > flatNumel)
      fail(FSDP_ERR_INVALID,
           "flatten: part " + std::to_string(i) + " (" +
               std::to_string(numels[i]) + " elements at offset " +
               std::to_string(offsets[i]) + ") does not fit in " +
               std::to_string(flatNumel));
  zero(s, flat, static_cast<size_t>(flatNumel) * es);
  for (int i = 0; i < nparts; ++i)
    copy(s, static_cast<char *>(flat) + offsets[i] * es, parts[i],
         static_cast<size_t>(numels[i]) * es);
}

void CudaDevice::split(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                       void *const *outs, const int64_t *sizes, int nparts,
                       int64_t outer, int64_t inner) {
  copyParts(this, s, t, const_cast<void *>(x), outs, sizes, nparts, outer,
            inner,
            /*toParts=*/true);
}

void CudaDevice::concat(fsdp_stream_s *s, fsdp_dtype t, const void *const *ins,
                        void *y, const int64_t *sizes, int nparts,
                        int64_t outer, int64_t inner) {
  copyParts(this, s, t, y, const_cast<void *const *>(ins), sizes, nparts, outer,
            inner, /*toParts=*/false);
}

} // namespace fsdp::hal::cuda
