//===- Kernels.cpp - CPU kernels of the fsdp-opt runtime ------------------===//
//
// Implementations of Kernels.h for float and double: GEMMs through CBLAS
// (OpenBLAS), everything else as plain loops. See the header for formulas.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelUtil.h"
#include "fsdp/ElementMath.h"

#include "Blas.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace fsdp::rt::cpu {

namespace {

void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
          int64_t k, const float *a, int64_t lda, const float *b, int64_t ldb,
          float *c, int64_t ldc) {
  selectBlas(); // the core is chosen before the first GEMM
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c,
              ldc);
}
void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
          int64_t k, const double *a, int64_t lda, const double *b, int64_t ldb,
          double *c, int64_t ldc) {
  selectBlas();
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// For each axis of `full`, the stride in the reduced tensor (0 for an axis in
// `axes`). Validates the axes.
std::vector<int64_t> reducedStrides(const std::vector<int64_t> &full,
                                    const std::vector<int64_t> &axes) {
  int64_t rank = static_cast<int64_t>(full.size());
  std::vector<bool> dropped(full.size(), false);
  for (int64_t a : axes) {
    if (a < 0 || a >= rank)
      throw std::out_of_range("axis " + std::to_string(a) +
                              " out of range for rank " + std::to_string(rank));
    if (dropped[a])
      throw std::invalid_argument("axis " + std::to_string(a) + " repeated");
    dropped[a] = true;
  }
  std::vector<int64_t> out(full.size(), 0);
  int64_t stride = 1;
  for (int64_t i = rank - 1; i >= 0; --i) {
    if (dropped[i])
      continue;
    out[i] = stride;
    stride *= full[i];
  }
  return out;
}

// Calls fn(fullIndex, reducedIndex) for every element of `full` in row-major
// order, with reducedIndex computed from `rstrides`.
template <typename Fn>
void forEachMapped(const std::vector<int64_t> &full,
                   const std::vector<int64_t> &rstrides, Fn fn) {
  int64_t total = numelOf(full);
  if (total == 0)
    return;
  size_t rank = full.size();
  std::vector<int64_t> idx(rank, 0);
  int64_t r = 0;
  for (int64_t i = 0; i < total; ++i) {
    fn(i, r);
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      if (++idx[d] < full[d]) {
        r += rstrides[d];
        break;
      }
      r -= rstrides[d] * (full[d] - 1);
      idx[d] = 0;
    }
  }
}

template <typename L>
int64_t checkedLabel(const L *labels, int64_t i, int64_t classes) {
  return detail::checkedIndex(labels, i, classes, "label");
}

} // namespace

template <typename T>
void linear(const T *x, const T *w, const T *b, T *y, int64_t m, int64_t k,
            int64_t n, bool transposeWeight) {
  if (m == 0 || n == 0)
    return;
  if (k == 0)
    std::fill(y, y + m * n, T(0));
  else if (transposeWeight)
    gemm(CblasNoTrans, CblasNoTrans, m, n, k, x, k, w, n, y, n);
  else
    gemm(CblasNoTrans, CblasTrans, m, n, k, x, k, w, k, y, n);
  if (b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        y[i * n + j] += b[j];
}

template <typename T>
void matmul(const T *a, const T *b, T *c, int64_t aRows, int64_t aCols,
            int64_t bRows, int64_t bCols, bool transA, bool transB) {
  int64_t m = transA ? aCols : aRows, k = transA ? aRows : aCols;
  int64_t kb = transB ? bCols : bRows, n = transB ? bRows : bCols;
  if (k != kb)
    throw std::invalid_argument(
        "matmul inner dimensions differ: " + std::to_string(k) + " vs " +
        std::to_string(kb));
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(c, c + m * n, T(0));
    return;
  }
  gemm(transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
       m, n, k, a, aCols, b, bCols, c, n);
}

template <typename T>
FSDP_CPU_MULTIVERSION void add(const T *a, const T *b, T *c, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    c[i] = a[i] + b[i];
}
template <typename T>
FSDP_CPU_MULTIVERSION void mul(const T *a, const T *b, T *c, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    c[i] = a[i] * b[i];
}
template <typename T>
FSDP_CPU_MULTIVERSION void relu(const T *x, T *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = math::relu(x[i]);
}
template <typename T>
FSDP_CPU_MULTIVERSION void reluGrad(const T *x, const T *dy, T *dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = math::reluGrad(x[i], dy[i]);
}

// One loop per approximation: a loop-invariant branch in the body would
// keep the loop from vectorizing.
template <typename T>
FSDP_CPU_MULTIVERSION void gelu(const T *x, T *y, int64_t n,
                                bool approximateTanh) {
  if (approximateTanh)
    for (int64_t i = 0; i < n; ++i)
      y[i] = math::gelu(x[i], true);
  else
    for (int64_t i = 0; i < n; ++i)
      y[i] = math::gelu(x[i], false);
}

template <typename T>
FSDP_CPU_MULTIVERSION void geluGrad(const T *x, const T *dy, T *dx, int64_t n,
                                    bool approximateTanh) {
  if (approximateTanh)
    for (int64_t i = 0; i < n; ++i)
      dx[i] = math::geluGrad(x[i], dy[i], true);
  else
    for (int64_t i = 0; i < n; ++i)
      dx[i] = math::geluGrad(x[i], dy[i], false);
}

template <typename T>
void reduceSum(const T *x, const std::vector<int64_t> &xShape,
               const std::vector<int64_t> &axes, T *y) {
  std::vector<int64_t> rs = reducedStrides(xShape, axes);
  // Fast path: the axes are the k leading ones (a bias gradient): column sums
  // of x viewed as [rows, cols].
  bool leading = true;
  for (size_t i = 0; i < axes.size(); ++i)
    leading = leading && std::find(axes.begin(), axes.end(),
                                   static_cast<int64_t>(i)) != axes.end();
  if (leading && !axes.empty()) {
    int64_t rows = 1, cols = 1;
    for (size_t i = 0; i < xShape.size(); ++i)
      (i < axes.size() ? rows : cols) *= xShape[i];
    std::vector<double> acc(cols, 0.0);
    detail::HeapScratch scratch(acc);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        acc[c] += x[r * cols + c];
    for (int64_t c = 0; c < cols; ++c)
      y[c] = static_cast<T>(acc[c]);
    return;
  }
  int64_t outN = 1;
  for (size_t i = 0; i < xShape.size(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) ==
        axes.end())
      outN *= xShape[i];
  std::vector<double> acc(outN, 0.0);
  detail::HeapScratch scratch(acc);
  forEachMapped(xShape, rs, [&](int64_t i, int64_t r) { acc[r] += x[i]; });
  for (int64_t i = 0; i < outN; ++i)
    y[i] = static_cast<T>(acc[i]);
}

template <typename T>
void broadcast(const T *x, const std::vector<int64_t> &yShape,
               const std::vector<int64_t> &axes, T *y) {
  std::vector<int64_t> rs = reducedStrides(yShape, axes);
  forEachMapped(yShape, rs, [&](int64_t i, int64_t r) { y[i] = x[r]; });
}

// Cross-entropy rows: the max in T, the exponentials math::expT in T
// (e^{x − max} ≤ 1, so f32 keeps its relative precision), sums in double.
template <typename T, typename L>
FSDP_CPU_MULTIVERSION T crossEntropy(const T *logits, const L *labels,
                                     int64_t positions, int64_t classes) {
  if (classes <= 0)
    throw std::invalid_argument("cross_entropy needs at least one class");
  if (positions == 0)
    return T(0);
  double total = 0.0;
  for (int64_t p = 0; p < positions; ++p) {
    const T *row = logits + p * classes;
    int64_t l = checkedLabel(labels, p, classes);
    T mx = row[0];
    for (int64_t c = 1; c < classes; ++c)
      mx = row[c] > mx ? row[c] : mx;
    double s = detail::sum8(classes, [&](int64_t c) {
      return static_cast<double>(math::expT(static_cast<T>(row[c] - mx)));
    });
    total +=
        (static_cast<double>(mx) + std::log(s)) - static_cast<double>(row[l]);
  }
  return static_cast<T>(total / static_cast<double>(positions));
}

template <typename T, typename L>
FSDP_CPU_MULTIVERSION void
crossEntropyGrad(const T *logits, const L *labels, T dloss, T *dlogits,
                 int64_t positions, int64_t classes) {
  if (classes <= 0)
    throw std::invalid_argument("cross_entropy_grad needs at least one class");
  double scale = static_cast<double>(dloss) / static_cast<double>(positions);
  for (int64_t p = 0; p < positions; ++p) {
    const T *row = logits + p * classes;
    T *out = dlogits + p * classes;
    int64_t l = checkedLabel(labels, p, classes);
    T mx = row[0];
    for (int64_t c = 1; c < classes; ++c)
      mx = row[c] > mx ? row[c] : mx;
    for (int64_t c = 0; c < classes; ++c)
      out[c] = math::expT(static_cast<T>(row[c] - mx));
    double s = detail::sum8(
        classes, [&](int64_t c) { return static_cast<double>(out[c]); });
    // softmax − one-hot, scaled by dloss / positions.
    const T k = static_cast<T>(scale / s), sc = static_cast<T>(scale);
    for (int64_t c = 0; c < classes; ++c)
      out[c] = out[c] * k;
    out[l] = out[l] - sc;
  }
}

template <typename T>
FSDP_CPU_MULTIVERSION void sgdUpdate(const T *p, const T *g, T *out, int64_t n,
                                     double lr, double weightDecay) {
  T tlr = static_cast<T>(lr), twd = static_cast<T>(weightDecay);
  for (int64_t i = 0; i < n; ++i)
    out[i] = math::sgd(p[i], g[i], tlr, twd);
}

template <typename T>
FSDP_CPU_MULTIVERSION void
adamwUpdate(const T *p, const T *g, const T *m, const T *v, int64_t step,
            T *pOut, T *mOut, T *vOut, int64_t n, double lr, double beta1,
            double beta2, double eps, double weightDecay) {
  if (step < 1)
    throw std::invalid_argument("adamw_update: step must be >= 1, got " +
                                std::to_string(step));
  const math::AdamWScalars<T> s =
      math::adamwScalars<T>(step, lr, beta1, beta2, eps, weightDecay);
  for (int64_t i = 0; i < n; ++i)
    math::adamw(s, p[i], g[i], m[i], v[i], pOut[i], mOut[i], vOut[i]);
}

template <typename T>
void flatten(const std::vector<const T *> &parts,
             const std::vector<int64_t> &partNumel,
             const std::vector<int64_t> &offsets, T *flat, int64_t flatNumel) {
  if (parts.size() != offsets.size() || parts.size() != partNumel.size())
    throw std::invalid_argument("flatten: " + std::to_string(parts.size()) +
                                " parts but " + std::to_string(offsets.size()) +
                                " offsets");
  std::vector<std::pair<int64_t, int64_t>> covered; // [offset, end) per part
  for (size_t i = 0; i < parts.size(); ++i) {
    if (offsets[i] < 0 || offsets[i] + partNumel[i] > flatNumel)
      throw std::out_of_range("flatten: part " + std::to_string(i) + " (" +
                              std::to_string(partNumel[i]) +
                              " elements at offset " +
                              std::to_string(offsets[i]) +
                              ") does not fit in " + std::to_string(flatNumel));
    covered.push_back({offsets[i], offsets[i] + partNumel[i]});
  }
  // Zeros where no part lands (gaps and the padding tail), then the parts.
  std::sort(covered.begin(), covered.end());
  int64_t pos = 0;
  for (auto [lo, hi] : covered) {
    if (lo > pos)
      std::fill(flat + pos, flat + lo, T(0));
    pos = std::max(pos, hi);
  }
  if (pos < flatNumel)
    std::fill(flat + pos, flat + flatNumel, T(0));
  for (size_t i = 0; i < parts.size(); ++i)
    std::memcpy(flat + offsets[i], parts[i], partNumel[i] * sizeof(T));
}

template <typename T> void fill(T *r, int64_t n, double value) {
  std::fill(r, r + n, static_cast<T>(value));
}

// T is a type, which cannot be parenthesised; bugprone-macro-parentheses
// takes the unnamed parameters `(T *` and `T *)` for products.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define FSDP_INSTANTIATE(T)                                                    \
  template void linear<T>(const T *, const T *, const T *, T *, int64_t,       \
                          int64_t, int64_t, bool);                             \
  template void matmul<T>(const T *, const T *, T *, int64_t, int64_t,         \
                          int64_t, int64_t, bool, bool);                       \
  template void add<T>(const T *, const T *, T *, int64_t);                    \
  template void mul<T>(const T *, const T *, T *, int64_t);                    \
  template void relu<T>(const T *, T *, int64_t);                              \
  template void reluGrad<T>(const T *, const T *, T *, int64_t);               \
  template void gelu<T>(const T *, T *, int64_t, bool);                        \
  template void geluGrad<T>(const T *, const T *, T *, int64_t, bool);         \
  template void reduceSum<T>(const T *, const std::vector<int64_t> &,          \
                             const std::vector<int64_t> &, T *);               \
  template void broadcast<T>(const T *, const std::vector<int64_t> &,          \
                             const std::vector<int64_t> &, T *);               \
  template T crossEntropy<T, int32_t>(const T *, const int32_t *, int64_t,     \
                                      int64_t);                                \
  template T crossEntropy<T, int64_t>(const T *, const int64_t *, int64_t,     \
                                      int64_t);                                \
  template void crossEntropyGrad<T, int32_t>(const T *, const int32_t *, T,    \
                                             T *, int64_t, int64_t);           \
  template void crossEntropyGrad<T, int64_t>(const T *, const int64_t *, T,    \
                                             T *, int64_t, int64_t);           \
  template void sgdUpdate<T>(const T *, const T *, T *, int64_t, double,       \
                             double);                                          \
  template void adamwUpdate<T>(const T *, const T *, const T *, const T *,     \
                               int64_t, T *, T *, T *, int64_t, double,        \
                               double, double, double, double);                \
  template void flatten<T>(const std::vector<const T *> &,                     \
                           const std::vector<int64_t> &,                       \
                           const std::vector<int64_t> &, T *, int64_t);        \
  template void fill<T>(T *, int64_t, double);
// NOLINTEND(bugprone-macro-parentheses)

FSDP_INSTANTIATE(float)
FSDP_INSTANTIATE(double)
template void fill<int32_t>(int32_t *, int64_t, double);
template void fill<int64_t>(int64_t *, int64_t, double);

} // namespace fsdp::rt::cpu
