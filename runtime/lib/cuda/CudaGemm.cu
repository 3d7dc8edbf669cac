//===- CudaGemm.cu - linear and matmul through cuBLAS ---------------------===//
//
// The cuda driver's GEMM entry points, linear and matmul: cublasGemmEx with
// f32 accumulation (f64 in f64) on row-major operands; linear's bias is added
// by a kernel, and with a bias 2-byte outputs accumulate in f32 scratch and
// round once after it, as the cpu driver.
//
//===----------------------------------------------------------------------===//
#include "CudaKernelUtil.cuh"

namespace fsdp::hal::cuda {

namespace {

cudaDataType_t blasType(fsdp_dtype t) {
  switch (t) {
  case FSDP_F64:
    return CUDA_R_64F;
  case FSDP_BF16:
    return CUDA_R_16BF;
  case FSDP_F16:
    return CUDA_R_16F;
  default:
    return CUDA_R_32F;
  }
}

/// Row-major C[M,N] = op(A)·op(B) through cublasGemmEx (column-major
/// Cᵀ = op(B)ᵀ·op(A)ᵀ): A stored with row length lda, B with ldb; C of
/// ctype. f32 accumulation (f64 for f64).
void gemmEx(cublasHandle_t h, fsdp_dtype t, bool transA, bool transB, int64_t m,
            int64_t n, int64_t k, const void *a, int64_t lda, const void *b,
            int64_t ldb, void *c, cudaDataType_t ctype) {
  double alpha64 = 1, beta64 = 0;
  float alpha32 = 1, beta32 = 0;
  bool f64 = t == FSDP_F64;
  check(cublasGemmEx(h, transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                     transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                     f64 ? static_cast<const void *>(&alpha64) : &alpha32, b,
                     blasType(t), ldb, a, blasType(t), lda,
                     f64 ? static_cast<const void *>(&beta64) : &beta32, c,
                     ctype, n, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

// y[i, j] = round(acc[i, j] + b[j]): acc in the compute type (f32 scratch for
// 2-byte dtypes, the output itself otherwise), one rounding.
template <int DT, typename A>
__global__ void biasK(const A *acc, const typename Elt<DT>::S *b,
                      typename Elt<DT>::S *y, int64_t m, int64_t n) {
  using E = Elt<DT>;
  FSDP_GRID_LOOP(i, m * n) {
    typename E::C v = static_cast<typename E::C>(acc[i]);
    y[i] = E::st(b ? v + E::ld(b, i % n) : v);
  }
}

} // namespace

//===--- The entry points -------------------------------------------------===//

void CudaDevice::linear(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                        const void *w, const void *b, void *y, int64_t m,
                        int64_t k, int64_t n, int transposeWeight) {
  if (m == 0 || n == 0)
    return;
  cudaStream_t st = streamOf(s);
  cublasHandle_t h = blasOn(st); // the stream, then the workspace again
  bool half = isHalf(t);
  floatDtype(t, "fsdp_linear", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    // With a bias, 2-byte outputs accumulate in f32 scratch and round once
    // after the bias, as the cpu driver.
    bool viaScratch = half && b;
    void *out = viaScratch
                    ? scratch(st, static_cast<size_t>(m * n) * sizeof(float))
                    : y;
    if (k == 0)
      check(cudaMemsetAsync(out, 0,
                            static_cast<size_t>(m * n) *
                                (viaScratch ? sizeof(float) : sizeof(S)),
                            st),
            "cudaMemsetAsync");
    else
      // y = x·wᵀ with w [N, K] (transpose), or y = x·w with w [K, N].
      gemmEx(h, t, false, !transposeWeight, m, n, k, x, k, w,
             transposeWeight ? n : k, out,
             viaScratch ? CUDA_R_32F : blasType(t));
    if (viaScratch) {
      biasK<DT, float><<<blocksFor(m * n), kThreads, 0, st>>>(
          static_cast<const float *>(out), static_cast<const S *>(b),
          static_cast<S *>(y), m, n);
      launched("bias kernel");
      release(st, out);
    } else if (b) {
      biasK<DT, S><<<blocksFor(m * n), kThreads, 0, st>>>(
          static_cast<const S *>(y), static_cast<const S *>(b),
          static_cast<S *>(y), m, n);
      launched("bias kernel");
    }
  });
}

void CudaDevice::matmul(fsdp_stream_s *s, fsdp_dtype t, const void *a,
                        const void *b, void *c, int64_t aRows, int64_t aCols,
                        int64_t bRows, int64_t bCols, int transA, int transB) {
  int64_t m = transA ? aCols : aRows, k = transA ? aRows : aCols;
  int64_t kb = transB ? bCols : bRows, n = transB ? bRows : bCols;
  if (k != kb)
    fail(FSDP_ERR_INVALID, "matmul inner dimensions differ: " +
                               std::to_string(k) + " vs " + std::to_string(kb));
  if (m == 0 || n == 0)
    return;
  floatDtype(t, "fsdp_matmul", [](auto) {});
  cudaStream_t st = streamOf(s);
  if (k == 0) {
    zero(s, c, static_cast<size_t>(m * n) * dtypeSize(t));
    return;
  }
  cublasHandle_t h = blasOn(st); // the stream, then the workspace again
  gemmEx(h, t, transA != 0, transB != 0, m, n, k, a, aCols, b, bCols, c,
         blasType(t));
}

} // namespace fsdp::hal::cuda
