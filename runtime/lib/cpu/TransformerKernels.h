//===- TransformerKernels.h - CPU kernels of the transformer ops ----------===//
//
// The kernels behind the transformer ops of runtime/docs/schedule-format.md
// ("Transformer ops"): embeddings, LayerNorm, RMSNorm, rotary position
// embedding, causal grouped-query attention and SiLU, with their VJPs (split
// and concat are byte copies in CpuDevice.cpp). Templated on the element type T
// (instantiated for float and double in runtime/lib/cpu/TransformerKernels.cpp
// and AttentionKernels.cpp). Tensors are dense row-major, sizes in elements;
// outputs never alias inputs. Statistics (means, variances, softmax sums) are
// accumulated in double. Bad data (an index out of range) raises
// std::out_of_range.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_TRANSFORMERKERNELS_H
#define FSDP_RUNTIME_CPU_TRANSFORMERKERNELS_H

#include "fsdp/ElementMath.h"

#include <cstdint>
#include <vector>

namespace fsdp::rt::cpu {

/// y[i, :] = table[idx[i] − first, :] for i < n; table is rows [first,
/// first + vocab) of a vocabulary of `total` ([vocab, dim]), y [n, dim], a
/// zero row for an index outside the slice (Megatron-LM's
/// VocabParallelEmbedding). Throws std::out_of_range naming the position
/// for idx outside [0, total).
template <typename T, typename I>
void embedding(const I *idx, const T *table, T *y, int64_t n, int64_t vocab,
               int64_t dim, int64_t first, int64_t total);

/// dtable[vocab, dim] = 0, then dtable[idx[i] − first, :] += dy[i, :] for
/// the i < n whose index is in the slice (scatter-add, the VJP of
/// embedding). Throws as embedding.
template <typename T, typename I>
void embeddingGrad(const I *idx, const T *dy, T *dtable, int64_t n,
                   int64_t vocab, int64_t dim, int64_t first, int64_t total);

/// y[b, t, :] = x[b, t, :] + table[t, :] for x, y [batch, seq, dim] and
/// table [positions >= seq, dim] (learned absolute positions, GPT-2 wpe).
template <typename T>
void positionEmbedding(const T *x, const T *table, T *y, int64_t batch,
                       int64_t seq, int64_t dim);

/// dtable[t, :] = Σ_b dy[b, t, :] for t < seq, 0 for seq <= t < positions.
template <typename T>
void positionEmbeddingGrad(const T *dy, T *dtable, int64_t batch, int64_t seq,
                           int64_t dim, int64_t positions);

/// LayerNorm over the last dim (Ba, Kiros & Hinton 2016, "Layer
/// Normalization", eq. 4), as torch.nn.LayerNorm: per row of x[rows, dim],
/// y = (x − μ)/√(σ² + eps)·w + b with σ² the biased variance.
template <typename T>
void layerNorm(const T *x, const T *w, const T *b, T *y, int64_t rows,
               int64_t dim, double eps);

/// VJP of layerNorm with the statistics recomputed: with x̂ the normalised
/// row, r = 1/√(σ²+eps) and g = dy·w: dx = r·(g − mean(g) − x̂·mean(g·x̂)),
/// dw = Σ_rows dy·x̂, db = Σ_rows dy. dx [rows, dim]; dw, db [dim].
template <typename T>
void layerNormGrad(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db,
                   int64_t rows, int64_t dim, double eps);

/// RMSNorm over the last dim (Zhang & Sennrich 2019, "Root Mean Square
/// Layer Normalization", eq. 4), as HF LlamaRMSNorm: y = x/√(mean(x²)+eps)·w.
template <typename T>
void rmsNorm(const T *x, const T *w, T *y, int64_t rows, int64_t dim,
             double eps);

/// VJP of rmsNorm: r = 1/√(mean(x²)+eps), g = dy·w:
/// dx = r·(g − x·r²·mean(g·x)), dw = Σ_rows dy·x·r.
template <typename T>
void rmsNormGrad(const T *x, const T *w, const T *dy, T *dx, T *dw,
                 int64_t rows, int64_t dim, double eps);

/// Rotary position embedding (Su et al. 2021, "RoFormer", eq. 34), in the
/// rotate-half layout of HF Llama. x, y [batch, seq, heads·headDim]; for
/// head h, position t, i < headDim/2, φ = t·f_i (−φ if inverse), f_i
/// math::ropeInvFreq (theta^(−2i/headDim) under the scaling's transform),
/// a the scaling's attention factor: y[i] = a·(x[i]cosφ − x[i+D/2]sinφ),
/// y[i+D/2] = a·(x[i+D/2]cosφ + x[i]sinφ). The inverse rotation (with the
/// same a) is the VJP. headDim must be even.
template <typename T>
void rope(const T *x, T *y, int64_t batch, int64_t seq, int64_t heads,
          int64_t headDim, double theta, const math::RopeScaling &scaling,
          bool inverse);

/// Causal scaled-dot-product attention (Vaswani et al. 2017, "Attention Is
/// All You Need", eq. 1) with grouped-query heads (Ainslie et al. 2023,
/// "GQA"): q, o [batch, seq, hq·d], k, v [batch, seq, hkv·d]; query head h
/// reads kv head h/(hq/hkv); o = softmax(q·kᵀ/√d, keys s <= query t)·v with
/// the max-subtracted softmax; lse [batch, hq, seq] = max + log Σ exp(· −
/// max) of each row of scaled scores (natural log). Uses BLAS per (batch,
/// head) with a seq×seq scratch. hq must be a multiple of hkv (else
/// std::invalid_argument).
template <typename T>
void attention(const T *q, const T *k, const T *v, T *o, T *lse, int64_t batch,
               int64_t seq, int64_t hq, int64_t hkv, int64_t d);

/// VJP of attention from the forward's statistics lse (FlashAttention-2, Dao
/// 2023, Algorithm 2): P = exp(q·kᵀ/√d − lse), dP = dO·Vᵀ,
/// dS = P⊙(dP − rowsum(dP⊙P))/√d: dQ = dS·K, dK = dSᵀ·Q, dV = Pᵀ·dO; dK and
/// dV of a kv head sum over its group of query heads.
template <typename T>
void attentionGrad(const T *q, const T *k, const T *v, const T *lse,
                   const T *dout, T *dq, T *dk, T *dv, int64_t batch,
                   int64_t seq, int64_t hq, int64_t hkv, int64_t d);

/// SiLU (Elfwing et al. 2018; Hendrycks & Gimpel 2016): y = x·σ(x).
template <typename T> void silu(const T *x, T *y, int64_t n);
/// dx = dy·σ(x)·(1 + x·(1 − σ(x))).
template <typename T> void siluGrad(const T *x, const T *dy, T *dx, int64_t n);

} // namespace fsdp::rt::cpu

#endif // FSDP_RUNTIME_CPU_TRANSFORMERKERNELS_H
