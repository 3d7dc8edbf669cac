//===- VocabParallelKernels.h - the vocab-parallel cross-entropy (cpu) ----===//
//
// The cpu driver's fsdp_vocab_ce_stats, fsdp_vocab_ce_loss and
// fsdp_vocab_ce_grad (fsdp/kernels.h: arguments, formulas, errors), called
// by CpuDevice's overrides. Internal to the cpu driver.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_VOCABPARALLELKERNELS_H
#define FSDP_RUNTIME_CPU_VOCABPARALLELKERNELS_H

#include "../Driver.h"

namespace fsdp::hal::cpu {

void vocabCeStatsKernel(fsdp_dtype t, const void *logits, const void *labels,
                        fsdp_dtype lt, int64_t positions, int64_t classes,
                        int64_t first, int64_t total, int64_t tp, int64_t slot,
                        void *stats);
void vocabCeLossKernel(fsdp_dtype t, const void *stats, int64_t positions,
                       int64_t tp, void *loss);
void vocabCeGradKernel(fsdp_dtype t, const void *logits, const void *labels,
                       fsdp_dtype lt, const void *stats, const void *dloss,
                       void *dlogits, int64_t positions, int64_t classes,
                       int64_t first, int64_t tp);

} // namespace fsdp::hal::cpu

#endif // FSDP_RUNTIME_CPU_VOCABPARALLELKERNELS_H
