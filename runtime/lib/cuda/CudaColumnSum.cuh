//===- CudaColumnSum.cuh - deterministic two-stage column sums ------------===//
//
// Private to the kernel files of the cuda driver (CudaNormEmbedding.cu,
// CudaReductions.cu). out[c] = Σ_r term(r, c) over a [rows, cols] matrix in
// fsdp/SumOrder.h's fixed order: one block per (column tile, row chunk)
// sums its chunk's rows in order into a partial (stage 1), then one thread
// per column adds the partials in chunk order (stage 2); one row-order pass
// where the two stages reduce to it. The old kernels gave each column one
// thread: dim/256 blocks (16 for a 4096-wide norm) on a 132-SM GPU.
//
// `Term` and `Store` are device functors passed by value: term(r, c) gives
// the accumulation type A (double, or a struct of them with += and a zero
// default), store(c, A) writes the result. Stage 1's partials (P·cols
// elements of A, at most 32 MiB of doubles) are kernel scratch of the
// device's pool (CudaDevice::scratch: counted in memory_peak).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CUDA_CUDACOLUMNSUM_CUH
#define FSDP_RUNTIME_CUDA_CUDACOLUMNSUM_CUH

#include "CudaKernelUtil.cuh"

#include "fsdp/SumOrder.h"

namespace fsdp::hal::cuda {

namespace {

/// term(·, c) as a function of the row alone, for order::chunkSum.
template <typename Term> struct AtColumn {
  const Term &term;
  int64_t c;
  __device__ auto operator()(int64_t r) const { return term(r, c); }
};

template <typename A, typename Term, typename Store>
__global__ void columnOnePassK(Term term, Store store, int64_t rows,
                               int64_t cols) {
  FSDP_GRID_LOOP(c, cols)
  store(c, order::chunkSum<A>(rows, 1, 0, AtColumn<Term>{term, c}));
}

template <typename A, typename Term>
__global__ void columnPartialsK(Term term, int64_t rows, int64_t cols,
                                int64_t chunks, A *partial) {
  int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols)
    return;
  int64_t p = blockIdx.y;
  partial[p * cols + c] =
      order::chunkSum<A>(rows, chunks, p, AtColumn<Term>{term, c});
}

template <typename A, typename Store>
__global__ void columnFinishK(const A *partial, Store store, int64_t cols,
                              int64_t chunks) {
  FSDP_GRID_LOOP(c, cols)
  store(c, order::sumPartials<A>(partial, chunks, cols, c));
}

/// Launches the column sum on `st` (see the file comment).
template <typename A, typename Term, typename Store>
void columnSum(CudaDevice *dev, cudaStream_t st, int64_t rows, int64_t cols,
               const Term &term, const Store &store, const char *what) {
  if (cols <= 0)
    return;
  if (order::onePass(rows, cols)) {
    columnOnePassK<A>
        <<<blocksFor(cols), kThreads, 0, st>>>(term, store, rows, cols);
    launched(what);
    return;
  }
  int64_t chunks = order::rowChunks(rows, cols);
  A *partial = static_cast<A *>(
      dev->scratch(st, static_cast<size_t>(chunks * cols) * sizeof(A)));
  dim3 grid(static_cast<unsigned>((cols + kThreads - 1) / kThreads),
            static_cast<unsigned>(chunks));
  columnPartialsK<A>
      <<<grid, kThreads, 0, st>>>(term, rows, cols, chunks, partial);
  columnFinishK<A>
      <<<blocksFor(cols), kThreads, 0, st>>>(partial, store, cols, chunks);
  launched(what);
  dev->release(st, partial);
}

} // namespace

} // namespace fsdp::hal::cuda

#endif // FSDP_RUNTIME_CUDA_CUDACOLUMNSUM_CUH
