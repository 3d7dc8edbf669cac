//===- CudaOptimizer.cu - optimizer updates and clipping on the GPU -------===//
//
// The cuda driver's optimizer steps: SGD and AdamW updates (the rate given, or
// read from device memory by the _lr entry points), the learning-rate
// schedule, and gradient clipping: sum_squares (a fixed-order two-stage
// reduction, the same sum on every run), grad_norm and scale.
//
//===----------------------------------------------------------------------===//
#include "CudaKernelUtil.cuh"

#include "fsdp/ElementMath.h"

namespace fsdp::hal::cuda {

namespace {

//===--- Optimizers -------------------------------------------------------===//

// The SGD and AdamW steps, the rate `lr` or, when lrDevice is not null, read
// from device memory (the _lr entry points: a scheduled rate). Skipped (the
// outputs keep the inputs) when `skip` is given and not finite
// (math::skipsUpdate).
template <typename T>
__global__ void sgdK(const T *p, const T *g, T *out, int64_t n, T lr,
                     const double *lrDevice, T wd, const double *skip) {
  if (math::skipsUpdate(skip)) {
    if (out != p)
      FSDP_GRID_LOOP(i, n) out[i] = p[i];
    return;
  }
  T r = lrDevice ? static_cast<T>(*lrDevice) : lr;
  FSDP_GRID_LOOP(i, n) out[i] = math::sgd(p[i], g[i], r, wd);
}

template <typename T>
__global__ void adamwK(const T *p, const T *g, const T *m, const T *v,
                       const void *step, int stepI64, T *pOut, T *mOut, T *vOut,
                       int64_t n, double lr, const double *lrDevice,
                       double beta1, double beta2, double eps, double wd,
                       const double *skip, DeviceErrors *err) {
  __shared__ math::AdamWScalars<T> s;
  __shared__ int bad;
  if (threadIdx.x == 0) {
    int64_t t = loadIndex(step, stepI64, 0);
    bad = t < 1;
    if (bad && blockIdx.x == 0)
      report(err, kStepBelowOne, t, 0, 0);
    if (!bad)
      s = math::adamwScalars<T>(t, lrDevice ? *lrDevice : lr, beta1, beta2, eps,
                                wd);
  }
  __syncthreads();
  if (bad)
    return;
  if (math::skipsUpdate(skip)) {
    FSDP_GRID_LOOP(i, n) {
      pOut[i] = p[i];
      mOut[i] = m[i];
      vOut[i] = v[i];
    }
    return;
  }
  FSDP_GRID_LOOP(i, n)
  math::adamw(s, p[i], g[i], m[i], v[i], pOut[i], mOut[i], vOut[i]);
}

//===--- Learning-rate schedule, gradient norm, clipping ------------------===//

__global__ void lrScheduleK(const void *step, int stepI64, double *lr, int kind,
                            double base, int64_t warmup,
                            const int64_t *decayDevice, int64_t decay,
                            double minLr, DeviceErrors *err) {
  int64_t t = loadIndex(step, stepI64, 0);
  if (t < 1) {
    report(err, kLrStepBelowOne, t, 0, 0);
    *lr = 0;
    return;
  }
  if (decayDevice) {
    decay = *decayDevice;
    if (decay < 1) {
      report(err, kLrTotalBelowOne, decay, 0, 0);
      *lr = 0;
      return;
    }
  }
  *lr = math::scheduledLr(kind, t, base, warmup, decay, minLr);
}

// Stage 1: block b sums the squares of its grid-strided elements (a
// fixed-order tree per block); stage 2 (sumK) sums the blocks' partials in
// one block. The grid size depends on n only: the same sum on every run.
template <int DT>
__global__ void sumSquaresK(const typename Elt<DT>::S *x, int64_t n,
                            double *partial) {
  __shared__ double sh[kThreads];
  double s = 0;
  FSDP_GRID_LOOP(i, n) {
    double v = static_cast<double>(Elt<DT>::ld(x, i));
    s += v * v;
  }
  s = blockSum(s, sh);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = s;
}

__global__ void sumK(const double *v, int64_t n, double *out) {
  __shared__ double sh[kThreads];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += v[i];
  s = blockSum(s, sh);
  if (threadIdx.x == 0)
    *out = s;
}

__global__ void gradNormK(const double *sumSquares, double maxNorm,
                          const double *lossScale, double *norm, double *coef) {
  math::unscaledGradNorm(*sumSquares, maxNorm, lossScale ? *lossScale : 1.0,
                         *norm, *coef);
}

template <int DT>
__global__ void scaleK(const typename Elt<DT>::S *x, const double *factor,
                       typename Elt<DT>::S *y, int64_t n) {
  using E = Elt<DT>;
  using C = typename E::C;
  C c = static_cast<C>(*factor);
  FSDP_GRID_LOOP(i, n) y[i] = E::st(E::ld(x, i) * c);
}

} // namespace

//===--- The entry points -------------------------------------------------===//

namespace {
void sgdLaunch(fsdp_stream_s *s, fsdp_dtype t, const void *p, const void *g,
               void *out, int64_t n, double lr, const double *lrDevice,
               double weightDecay, const double *skip, const char *op) {
  if (n == 0)
    return;
  wideDtype(t, op, [&](auto tag) {
    using T = typename Elt<decltype(tag)::value>::S;
    sgdK<T><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const T *>(p), static_cast<const T *>(g),
        static_cast<T *>(out), n, static_cast<T>(lr), lrDevice,
        static_cast<T>(weightDecay), skip);
  });
  launched((std::string(op + 5) + " kernel").c_str()); // "sgd_update kernel"
}

void adamwLaunch(fsdp_stream_s *s, fsdp_dtype t, const void *p, const void *g,
                 const void *m, const void *v, const void *step,
                 fsdp_dtype stepType, void *pOut, void *mOut, void *vOut,
                 int64_t n, double lr, const double *lrDevice, double beta1,
                 double beta2, double eps, double weightDecay,
                 const double *skip, DeviceErrors *errors, const char *op) {
  checkIndexType(stepType, (std::string(op) + ": step").c_str());
  wideDtype(t, op, [&](auto tag) {
    using T = typename Elt<decltype(tag)::value>::S;
    adamwK<T><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const T *>(p), static_cast<const T *>(g),
        static_cast<const T *>(m), static_cast<const T *>(v), step,
        stepType == FSDP_I64, static_cast<T *>(pOut), static_cast<T *>(mOut),
        static_cast<T *>(vOut), n, lr, lrDevice, beta1, beta2, eps, weightDecay,
        skip, errors);
  });
  launched((std::string(op + 5) + " kernel").c_str()); // "sgd_update kernel"
}
} // namespace

void CudaDevice::sgd_update(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                            const void *g, void *out, int64_t n, double lr,
                            double weightDecay, const double *skip) {
  sgdLaunch(s, t, p, g, out, n, lr, nullptr, weightDecay, skip,
            "fsdp_sgd_update");
}

void CudaDevice::adamw_update(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                              const void *g, const void *m, const void *v,
                              const void *step, fsdp_dtype stepType, void *pOut,
                              void *mOut, void *vOut, int64_t n, double lr,
                              double beta1, double beta2, double eps,
                              double weightDecay, const double *skip) {
  adamwLaunch(s, t, p, g, m, v, step, stepType, pOut, mOut, vOut, n, lr,
              nullptr, beta1, beta2, eps, weightDecay, skip, errors,
              "fsdp_adamw_update");
}

void CudaDevice::sgd_update_lr(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                               const void *g, void *out, int64_t n,
                               const double *lr, double weightDecay,
                               const double *skip) {
  sgdLaunch(s, t, p, g, out, n, 0.0, lr, weightDecay, skip,
            "fsdp_sgd_update_lr");
}

void CudaDevice::adamw_update_lr(fsdp_stream_s *s, fsdp_dtype t, const void *p,
                                 const void *g, const void *m, const void *v,
                                 const void *step, fsdp_dtype stepType,
                                 void *pOut, void *mOut, void *vOut, int64_t n,
                                 const double *lr, double beta1, double beta2,
                                 double eps, double weightDecay,
                                 const double *skip) {
  adamwLaunch(s, t, p, g, m, v, step, stepType, pOut, mOut, vOut, n, 0.0, lr,
              beta1, beta2, eps, weightDecay, skip, errors,
              "fsdp_adamw_update_lr");
}

void CudaDevice::lr_schedule(fsdp_stream_s *s, const void *step,
                             fsdp_dtype stepType, double *lr, int kind,
                             double baseLr, int64_t warmup,
                             const int64_t *decayDevice, int64_t decay,
                             double minLr) {
  checkIndexType(stepType, "fsdp_lr_schedule: step");
  if (kind < FSDP_LR_CONSTANT || kind > FSDP_LR_COSINE)
    fail(FSDP_ERR_INVALID,
         "fsdp_lr_schedule: unknown kind " + std::to_string(kind));
  lrScheduleK<<<1, 1, 0, streamOf(s)>>>(step, stepType == FSDP_I64, lr, kind,
                                        baseLr, warmup, decayDevice, decay,
                                        minLr, errors);
  launched("lr_schedule kernel");
}

void CudaDevice::sum_squares(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                             int64_t n, double *out) {
  floatDtype(t, "fsdp_sum_squares", [](auto) {}); // before the scratch
  cudaStream_t st = streamOf(s);
  // At most 1024 partial sums (8 KiB of scratch).
  int blocks = std::min(blocksFor(n), 1024);
  double *partial =
      static_cast<double *>(scratch(st, static_cast<size_t>(blocks) * 8));
  floatDtype(t, "fsdp_sum_squares", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    sumSquaresK<DT>
        <<<blocks, kThreads, 0, st>>>(static_cast<const S *>(x), n, partial);
  });
  sumK<<<1, kThreads, 0, st>>>(partial, blocks, out);
  launched("sum_squares kernel");
  release(st, partial);
}

void CudaDevice::grad_norm(fsdp_stream_s *s, const double *sumSquares,
                           double maxNorm, const double *lossScale,
                           double *norm, double *coef) {
  gradNormK<<<1, 1, 0, streamOf(s)>>>(sumSquares, maxNorm, lossScale, norm,
                                      coef);
  launched("grad_norm kernel");
}

void CudaDevice::scale(fsdp_stream_s *s, fsdp_dtype t, const void *x,
                       const double *factor, void *y, int64_t n) {
  if (n == 0)
    return;
  floatDtype(t, "fsdp_scale", [&](auto tag) {
    constexpr int DT = decltype(tag)::value;
    using S = typename Elt<DT>::S;
    scaleK<DT><<<blocksFor(n), kThreads, 0, streamOf(s)>>>(
        static_cast<const S *>(x), factor, static_cast<S *>(y), n);
  });
  launched("scale kernel");
}

} // namespace fsdp::hal::cuda
