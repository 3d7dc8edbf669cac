//===- VocabParallelKernels.cpp - the vocab-parallel cross-entropy (cpu) --===//
//
// fsdp_vocab_ce_stats, fsdp_vocab_ce_loss and fsdp_vocab_ce_grad on the cpu
// driver (formulas and sources: fsdp/kernels.h; the merge of the ranks'
// statistics: math::vocabCeMerge). The row passes are nn.cross_entropy's
// (Kernels.cpp): the max in T, math::expT in T, sums in double.
//
//===----------------------------------------------------------------------===//
#include "VocabParallelKernels.h"
#include "CpuStage.h"

#include "fsdp/ElementMath.h"

#include <algorithm>
#include <cmath>

namespace fsdp::hal::cpu {

namespace {

template <typename L>
int64_t checkedLabel(const L *labels, int64_t p, int64_t total) {
  return rt::cpu::detail::checkedIndex(labels, p, total, "label");
}

template <typename T, typename L>
void vocabCeStats(const T *logits, const L *labels, int64_t positions,
                  int64_t classes, int64_t first, int64_t total, int64_t tp,
                  int64_t slot, T *stats) {
  std::fill(stats, stats + tp * positions * 3, T(0));
  T *mine = stats + slot * positions * 3;
  for (int64_t p = 0; p < positions; ++p) {
    const T *row = logits + p * classes;
    int64_t l = checkedLabel(labels, p, total) - first;
    T mx = row[0];
    for (int64_t c = 1; c < classes; ++c)
      mx = row[c] > mx ? row[c] : mx;
    double s = rt::cpu::detail::sum8(classes, [&](int64_t c) {
      return static_cast<double>(math::expT(static_cast<T>(row[c] - mx)));
    });
    mine[p * 3] = mx;
    mine[p * 3 + 1] = static_cast<T>(s);
    mine[p * 3 + 2] = l >= 0 && l < classes ? row[l] : T(0);
  }
}

template <typename T, typename L>
void vocabCeGrad(const T *logits, const L *labels, const T *stats, T dloss,
                 T *dlogits, int64_t positions, int64_t classes, int64_t first,
                 int64_t tp) {
  double scale = static_cast<double>(dloss) / static_cast<double>(positions);
  for (int64_t p = 0; p < positions; ++p) {
    const T *row = logits + p * classes;
    T *out = dlogits + p * classes;
    int64_t l = checkedLabel(labels, p, classes * tp) - first;
    double mx, s, z;
    math::vocabCeMerge(stats, positions, tp, p, mx, s, z);
    // softmax − one-hot of this rank's columns, scaled by dloss / positions
    // (as nn.cross_entropy_grad, with the whole row's max and sum).
    const T cmx = static_cast<T>(mx), k = static_cast<T>(scale / s),
            sc = static_cast<T>(scale);
    for (int64_t c = 0; c < classes; ++c)
      out[c] = math::expT(static_cast<T>(row[c] - cmx)) * k;
    if (l >= 0 && l < classes)
      out[l] = out[l] - sc;
  }
}

void needClasses(int64_t classes, const char *op) {
  if (classes <= 0)
    fail(FSDP_ERR_INVALID, std::string(op) + " needs at least one class");
}

} // namespace

void vocabCeStatsKernel(fsdp_dtype t, const void *logits, const void *labels,
                        fsdp_dtype lt, int64_t positions, int64_t classes,
                        int64_t first, int64_t total, int64_t tp, int64_t slot,
                        void *stats) {
  checkIndexType(lt, "fsdp_vocab_ce_stats: labels");
  needClasses(classes, "fsdp_vocab_ce_stats");
  floatKernel(t, "fsdp_vocab_ce_stats", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    const T *l = st.in<T>(logits, positions * classes);
    // The statistics are of the loss dtype: T (f32 for bf16/f16 logits).
    T *out = static_cast<T *>(stats);
    if (lt == FSDP_I32)
      vocabCeStats<T>(l, static_cast<const int32_t *>(labels), positions,
                      classes, first, total, tp, slot, out);
    else
      vocabCeStats<T>(l, static_cast<const int64_t *>(labels), positions,
                      classes, first, total, tp, slot, out);
  });
}

void vocabCeLossKernel(fsdp_dtype t, const void *stats, int64_t positions,
                       int64_t tp, void *loss) {
  floatKernel(t, "fsdp_vocab_ce_loss", [&](auto tag, Stage &) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(stats);
    double total = 0;
    for (int64_t p = 0; p < positions; ++p) {
      double mx, s, z;
      math::vocabCeMerge(in, positions, tp, p, mx, s, z);
      total += (mx + std::log(s)) - z;
    }
    *static_cast<T *>(loss) =
        static_cast<T>(positions ? total / static_cast<double>(positions) : 0);
  });
}

void vocabCeGradKernel(fsdp_dtype t, const void *logits, const void *labels,
                       fsdp_dtype lt, const void *stats, const void *dloss,
                       void *dlogits, int64_t positions, int64_t classes,
                       int64_t first, int64_t tp) {
  checkIndexType(lt, "fsdp_vocab_ce_grad: labels");
  needClasses(classes, "fsdp_vocab_ce_grad");
  floatKernel(t, "fsdp_vocab_ce_grad", [&](auto tag, Stage &st) {
    using T = decltype(tag);
    int64_t n = positions * classes;
    const T *l = st.in<T>(logits, n);
    // dloss and the statistics are of the loss dtype (T).
    T d = *static_cast<const T *>(dloss);
    const T *sts = static_cast<const T *>(stats);
    T *out = st.out<T>(dlogits, n);
    if (lt == FSDP_I32)
      vocabCeGrad<T>(l, static_cast<const int32_t *>(labels), sts, d, out,
                     positions, classes, first, tp);
    else
      vocabCeGrad<T>(l, static_cast<const int64_t *>(labels), sts, d, out,
                     positions, classes, first, tp);
  });
}

} // namespace fsdp::hal::cpu
