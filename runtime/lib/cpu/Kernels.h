//===- Kernels.h - CPU kernels of the fsdp-opt runtime ---------*- C++ -*-===//
//
// The cpu driver's kernels behind fsdp/kernels.h (CpuDevice.cpp), templated on
// the element type T (explicitly instantiated for float and double in
// runtime/lib/cpu/Kernels.cpp). All tensors are dense row-major; sizes are in
// elements. Kernels never allocate their outputs; outputs must not alias
// inputs unless stated. Invalid data (a label out of range, inconsistent
// shapes) raises std::invalid_argument / std::out_of_range with a message.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_KERNELS_H
#define FSDP_RUNTIME_CPU_KERNELS_H

#include "fsdp/runtime.h"

#include <cstdint>
#include <vector>

namespace fsdp::rt::cpu {

/// fsdp_init_values (fsdp/kernels.h) on `threads` host threads (<= 0:
/// hardware concurrency), at most one per 65,536 elements
/// (InitKernels.cpp). Arguments as the C entry point's; checked by the
/// caller.
void initValues(fsdp_dtype t, void *y, fsdp_dtype mt, void *master, int64_t n,
                uint64_t seed, uint64_t fqnHash, uint64_t firstIndex, int kind,
                double value, int threads);
/// The threads initValues uses for n elements when asked for `requested`.
int initThreads(int requested, int64_t n);

/// y[M,N] = x[M,K] · w[N,K]ᵀ (+ b[N] broadcast over rows); b may be null.
/// cblas_sgemm / cblas_dgemm (torch.nn.functional.linear semantics). With
/// transposeWeight the weight is stored w[K,N] (GPT-2 Conv1D) and y = x·w.
template <typename T>
void linear(const T *x, const T *w, const T *b, T *y, int64_t m, int64_t k,
            int64_t n, bool transposeWeight = false);

/// c = op(a) · op(b) with a stored as [aRows, aCols], b as [bRows, bCols]
/// (row-major) and op = transpose when the flag is set. Requires the inner
/// dimensions to agree; c is [M, N] with M = rows of op(a), N = cols of op(b).
template <typename T>
void matmul(const T *a, const T *b, T *c, int64_t aRows, int64_t aCols,
            int64_t bRows, int64_t bCols, bool transA, bool transB);

/// c[i] = a[i] + b[i], i < n.
template <typename T> void add(const T *a, const T *b, T *c, int64_t n);
/// c[i] = a[i] · b[i], i < n.
template <typename T> void mul(const T *a, const T *b, T *c, int64_t n);
/// y[i] = max(x[i], 0).
template <typename T> void relu(const T *x, T *y, int64_t n);
/// dx[i] = dy[i] · [x[i] > 0] (the subgradient at 0 is 0, as PyTorch).
template <typename T> void reluGrad(const T *x, const T *dy, T *dx, int64_t n);

/// GELU (Hendrycks & Gimpel, 2016). approximateTanh = false: exact
/// y = x·Φ(x) = x/2·(1 + erf(x/√2)); true: y = x/2·(1 + tanh(√(2/π)(x +
/// 0.044715x³))), as torch.nn.functional.gelu(approximate="tanh").
template <typename T>
void gelu(const T *x, T *y, int64_t n, bool approximateTanh);
/// dx = dy · dGELU/dx, for the same two variants: exact Φ(x) + x·φ(x);
/// tanh 0.5(1+t) + 0.5x(1−t²)·√(2/π)(1 + 3·0.044715x²).
template <typename T>
void geluGrad(const T *x, const T *dy, T *dx, int64_t n, bool approximateTanh);

/// Sums x (shape xShape) over `axes` (distinct, in [0, rank)); y has xShape
/// with those axes dropped (scalar if all are). Accumulates in double.
template <typename T>
void reduceSum(const T *x, const std::vector<int64_t> &xShape,
               const std::vector<int64_t> &axes, T *y);

/// y (shape yShape) = x repeated along `axes` of y; x's shape is yShape
/// without those axes. Inverse of reduceSum's shape map.
template <typename T>
void broadcast(const T *x, const std::vector<int64_t> &yShape,
               const std::vector<int64_t> &axes, T *y);

/// Mean over `positions` rows of logits[positions, classes] of
/// −log softmax(row)[label], with a max-shifted log-sum-exp computed in double.
/// Throws std::out_of_range for a label outside [0, classes).
template <typename T, typename L>
T crossEntropy(const T *logits, const L *labels, int64_t positions,
               int64_t classes);

/// dlogits = (softmax(logits) − onehot(label)) · dloss / positions, the
/// gradient of crossEntropy. Throws std::out_of_range as crossEntropy.
template <typename T, typename L>
void crossEntropyGrad(const T *logits, const L *labels, T dloss, T *dlogits,
                      int64_t positions, int64_t classes);

/// out = p − lr·(g + weightDecay·p) (SGD with L2 weight decay, as
/// torch.optim.SGD without momentum). out may alias p.
template <typename T>
void sgdUpdate(const T *p, const T *g, T *out, int64_t n, double lr,
               double weightDecay);

/// One AdamW step (Loshchilov & Hutter, "Decoupled Weight Decay
/// Regularization", ICLR 2019, Algorithm 2), exactly as torch.optim.AdamW
/// (single-tensor path): p ← p·(1 − lr·wd); m' = β1·m + (1−β1)·g;
/// v' = β2·v + (1−β2)·g²; p' = p − (lr/(1−β1ᵗ)) · m' / (√v'/√(1−β2ᵗ) + ε).
/// `step` t is 1-based (t >= 1, else std::invalid_argument). Outputs may
/// alias the matching inputs.
template <typename T>
void adamwUpdate(const T *p, const T *g, const T *m, const T *v, int64_t step,
                 T *pOut, T *mOut, T *vOut, int64_t n, double lr, double beta1,
                 double beta2, double eps, double weightDecay);

/// Zeroes flat[0, flatNumel) then copies parts[i] (partNumel[i] elements) to
/// flat[offsets[i], ...). Throws std::out_of_range if a part does not fit.
template <typename T>
void flatten(const std::vector<const T *> &parts,
             const std::vector<int64_t> &partNumel,
             const std::vector<int64_t> &offsets, T *flat, int64_t flatNumel);

/// r[i] = value, i < n.
template <typename T> void fill(T *r, int64_t n, double value);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_KERNELS_H
