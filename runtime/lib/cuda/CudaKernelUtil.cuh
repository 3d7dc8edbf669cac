//===- CudaKernelUtil.cuh - the cuda kernels' shared helpers --------------===//
//
// Private to the kernel files of the cuda driver (CudaElementwise.cu,
// CudaReductions.cu, CudaGemm.cu, CudaNormEmbedding.cu, CudaAttention.cu,
// CudaOptimizer.cu), which together run every entry point of fsdp/kernels.h
// on the GPU. GEMMs are cuBLAS; the other ops are CUDA kernels whose
// per-element math is fsdp/ElementMath.h and fsdp/Half.h, the code the cpu
// driver runs (compiled with --fmad=false so that products are not fused
// differently). On bf16/f16 a kernel loads each element into f32, computes,
// and rounds each result once. Statistics accumulate in double. A data error
// is recorded in the device's error record (the first one wins) and thrown by
// the next synchronisation.
//
// Here: the launch shape (kThreads, blocksFor), the element types (Elt) and
// the dtype dispatch, the error record's writer, block reductions and the
// grid-stride loop, with internal linkage (each kernel file has its own copy;
// nothing is exported), and launchCast (CudaElementwise.cu), which the
// embedding gradient and attention use too.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CUDA_CUDAKERNELUTIL_CUH
#define FSDP_RUNTIME_CUDA_CUDAKERNELUTIL_CUH

#include "CudaDriver.h"

#include "fsdp/Half.h"

#include <algorithm>
#include <type_traits>

namespace fsdp::hal::cuda {

/// The cpu driver's nn.cast of n elements, on stream s (CudaElementwise.cu;
/// hidden: not exported from libfsdp_cuda.so).
[[gnu::visibility("hidden")]] void launchCast(const void *src, fsdp_dtype st,
                                              void *dst, fsdp_dtype dt,
                                              int64_t n, cudaStream_t s);

namespace {

constexpr int kThreads = 256;

int blocksFor(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(b, 1 << 16)));
}

void launched(const char *what) { check(cudaGetLastError(), what); }

//===--- Element types ----------------------------------------------------===//

/// Storage type S and compute type C of a float dtype, with the load and
/// the rounding store.
template <int DT> struct Elt;
template <> struct Elt<FSDP_F32> {
  using S = float;
  using C = float;
  __device__ static C ld(const S *p, int64_t i) { return p[i]; }
  __device__ static S st(C v) { return v; }
};
template <> struct Elt<FSDP_F64> {
  using S = double;
  using C = double;
  __device__ static C ld(const S *p, int64_t i) { return p[i]; }
  __device__ static S st(C v) { return v; }
};
template <> struct Elt<FSDP_BF16> {
  using S = uint16_t;
  using C = float;
  __device__ static C ld(const S *p, int64_t i) { return bf16ToFloat(p[i]); }
  __device__ static S st(C v) { return floatToBf16(v); }
};
template <> struct Elt<FSDP_F16> {
  using S = uint16_t;
  using C = float;
  __device__ static C ld(const S *p, int64_t i) { return f16ToFloat(p[i]); }
  __device__ static S st(C v) { return floatToF16(v); }
};

template <int V> using DtTag = std::integral_constant<int, V>;

/// Calls fn(DtTag<dtype>) for a float dtype.
template <typename Fn> void floatDtype(fsdp_dtype t, const char *op, Fn &&fn) {
  switch (t) {
  case FSDP_F32:
    fn(DtTag<FSDP_F32>{});
    return;
  case FSDP_F64:
    fn(DtTag<FSDP_F64>{});
    return;
  case FSDP_BF16:
    fn(DtTag<FSDP_BF16>{});
    return;
  case FSDP_F16:
    fn(DtTag<FSDP_F16>{});
    return;
  default:
    fail(FSDP_ERR_INVALID,
         std::string(op) + ": dtype must be f32, f64, bf16 or f16");
  }
}

/// f32 or f64 only (the optimizer updates).
template <typename Fn> void wideDtype(fsdp_dtype t, const char *op, Fn &&fn) {
  if (t == FSDP_F32)
    fn(DtTag<FSDP_F32>{});
  else if (t == FSDP_F64)
    fn(DtTag<FSDP_F64>{});
  else
    fail(FSDP_ERR_INVALID, std::string(op) + ": dtype must be f32 or f64");
}

__device__ int64_t loadIndex(const void *p, int isI64, int64_t i) {
  return isI64 ? static_cast<const int64_t *>(p)[i]
               : static_cast<const int32_t *>(p)[i];
}

__device__ void report(DeviceErrors *e, int kind, long long value,
                       long long position, long long bound) {
  if (atomicCAS(&e->flag, 0, -1) == 0) {
    e->value = value;
    e->position = position;
    e->bound = bound;
    __threadfence();
    atomicExch(&e->flag, kind);
  }
}

//===--- Block reductions (blockDim.x == kThreads) ------------------------===//

__device__ double blockSum(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      sh[threadIdx.x] += sh[threadIdx.x + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

__device__ double blockMax(double v, double *sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

#define FSDP_GRID_LOOP(i, n)                                                   \
  for (int64_t i =                                                             \
           blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;        \
       i < (n); i += static_cast<int64_t>(blockDim.x) * gridDim.x)

} // namespace

} // namespace fsdp::hal::cuda

#endif // FSDP_RUNTIME_CUDA_CUDAKERNELUTIL_CUH
