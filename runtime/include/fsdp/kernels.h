/*===- kernels.h - kernel entry points of the fsdp-opt runtime --*- C -*-===//
//
// One entry point per compute op of the schedule format
// (runtime/docs/schedule-format.md): every driver implements each of them,
// and the schedule interpreter and compiled steps call only these. Arguments
// are device pointers of the stream's device, sizes in elements, and the
// stream the kernel is issued on (normally the device's compute stream).
// Tensors are dense and row-major. Outputs must not alias inputs unless
// stated. Returns FSDP_OK or an fsdp_status (runtime.h): FSDP_ERR_INVALID for
// an unsupported dtype or inconsistent sizes, FSDP_ERR_DATA for bad data (an
// index out of range; on "cuda" reported by the next fsdp_stream_synchronize).
//
// `dtype` is the float type of the float tensors: f32, f64, bf16 or f16. On
// bf16/f16 the math runs in f32 and each result is rounded once to the
// storage dtype. Statistics (sums of reductions, means and variances of the
// norms, softmax sums) accumulate in double on every driver; the per-element
// formulas are shared by the drivers (fsdp/ElementMath.h), among them the
// exponentials of softmax and cross-entropy (math::expT: a polynomial in f32,
// the library exp in f64).
//
//===----------------------------------------------------------------------===*/
#ifndef FSDP_KERNELS_H
#define FSDP_KERNELS_H

#include "fsdp/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = value, i < n (any dtype; integers truncate toward zero). */
int fsdp_fill(fsdp_stream s, fsdp_dtype dtype, void *y, int64_t n,
              double value);
/* y = x converted element-wise from `xdtype` to `ydtype` (float dtypes;
 * narrowing rounds to nearest even once, f64 -> bf16/f16 included). */
int fsdp_cast(fsdp_stream s, fsdp_dtype xdtype, const void *x,
              fsdp_dtype ydtype, void *y, int64_t n);
/* The initial values of a parameter's elements first_index ..
 * first_index + n - 1 (fsdp/InitValues.h, init::initValue: a pure function
 * of (seed, fqn_hash = FNV-1a of the FQN, element index) for init `kind`,
 * init::kInit*, with `value` a, s or v), written to y[n] in `dtype` and, when
 * `master` is not NULL, to master[n] in `master_dtype` from the same pass
 * (float dtypes; narrowing rounds the double value through f32 for bf16/f16,
 * as fsdp_cast of the master does). The same bits on every driver. `threads`:
 * host threads of the cpu driver (<= 0: std::thread::hardware_concurrency;
 * the values do not depend on it); unused by "cuda". FSDP_ERR_INVALID for a
 * bad dtype or kind. */
int fsdp_init_values(fsdp_stream s, fsdp_dtype dtype, void *y,
                     fsdp_dtype master_dtype, void *master, int64_t n,
                     int64_t seed, int64_t fqn_hash, int64_t first_index,
                     int kind, double value, int threads);

/* y[M,N] = x[M,K] · w[N,K]ᵀ (+ b[N] on every row; b may be NULL), the
 * semantics of torch.nn.functional.linear; with transpose_weight the weight
 * is stored w[K,N] (GPT-2's Conv1D) and y = x·w. BLAS GEMM (cpu: OpenBLAS
 * sgemm/dgemm; cuda: cublasGemmEx, f32 accumulation). */
int fsdp_linear(fsdp_stream s, fsdp_dtype dtype, const void *x, const void *w,
                const void *b, void *y, int64_t m, int64_t k, int64_t n,
                int transpose_weight);
/* c = op(a) · op(b) with a stored [a_rows, a_cols] and b [b_rows, b_cols],
 * op = transpose where the flag is set; the inner dimensions must agree;
 * c is [rows of op(a), cols of op(b)]. */
int fsdp_matmul(fsdp_stream s, fsdp_dtype dtype, const void *a, const void *b,
                void *c, int64_t a_rows, int64_t a_cols, int64_t b_rows,
                int64_t b_cols, int trans_a, int trans_b);

/* c[i] = a[i] + b[i] and c[i] = a[i] · b[i], i < n. */
int fsdp_add(fsdp_stream s, fsdp_dtype dtype, const void *a, const void *b,
             void *c, int64_t n);
int fsdp_mul(fsdp_stream s, fsdp_dtype dtype, const void *a, const void *b,
             void *c, int64_t n);
/* y = max(x, 0); dx = dy · [x > 0] (0 at 0, as PyTorch). */
int fsdp_relu(fsdp_stream s, fsdp_dtype dtype, const void *x, void *y,
              int64_t n);
int fsdp_relu_grad(fsdp_stream s, fsdp_dtype dtype, const void *x,
                   const void *dy, void *dx, int64_t n);
/* GELU (Hendrycks & Gimpel 2016): y = x·Φ(x) = x/2·(1 + erf(x/√2)), or with
 * approximate_tanh y = x/2·(1 + tanh(√(2/π)(x + 0.044715x³))) as
 * torch.nn.functional.gelu(approximate="tanh"); dx = dy · dGELU/dx. */
int fsdp_gelu(fsdp_stream s, fsdp_dtype dtype, const void *x, void *y,
              int64_t n, int approximate_tanh);
int fsdp_gelu_grad(fsdp_stream s, fsdp_dtype dtype, const void *x,
                   const void *dy, void *dx, int64_t n, int approximate_tanh);
/* SiLU (Elfwing et al. 2018): y = x·σ(x); dx = dy·σ(x)(1 + x(1 − σ(x))). */
int fsdp_silu(fsdp_stream s, fsdp_dtype dtype, const void *x, void *y,
              int64_t n);
int fsdp_silu_grad(fsdp_stream s, fsdp_dtype dtype, const void *x,
                   const void *dy, void *dx, int64_t n);
/* Dropout with a counter-based generator (fsdp/ElementMath.h: Philox4x32-10,
 * math::dropoutKeeps): y[i] = x[i]/(1 − rate) where element
 * g(i) = first_index + (i / chunk)·stride + chunk_first + i % chunk of the
 * whole (global-batch) tensor is kept at this optimizer step, else 0
 * (math::dropoutIndex; x holds runs of `chunk` elements `stride` apart in
 * the global tensor: a tensor-parallel slice; chunk = n, chunk_first = 0
 * for contiguous rows). `step` is one i32 or i64 in device memory; `seed`
 * names the op's stream. The same mask on every driver and at every world
 * size and tensor-parallel degree; applied to dy with the same arguments it
 * is its own VJP. 0 <= rate < 1 and chunk >= 1, else FSDP_ERR_INVALID. */
int fsdp_dropout(fsdp_stream s, fsdp_dtype dtype, const void *x, void *y,
                 int64_t n, double rate, int64_t seed, const void *step,
                 fsdp_dtype step_dtype, int64_t first_index, int64_t chunk,
                 int64_t stride, int64_t chunk_first);

/* y = x (shape x_shape[rank]) summed over `axes` (naxes distinct axes in
 * [0, rank)); y has x's shape without them. */
int fsdp_reduce_sum(fsdp_stream s, fsdp_dtype dtype, const void *x,
                    const int64_t *x_shape, int rank, const int64_t *axes,
                    int naxes, void *y);
/* y (shape y_shape[rank]) = x repeated along `axes` of y; x has y's shape
 * without them (the inverse of fsdp_reduce_sum's shape map). */
int fsdp_broadcast(fsdp_stream s, fsdp_dtype dtype, const void *x,
                   const int64_t *y_shape, int rank, const int64_t *axes,
                   int naxes, void *y);

/* loss (a scalar of the loss dtype: f32 for bf16/f16 logits, else `dtype`)
 * = mean over `positions` rows of logits[positions, classes] of
 * −log softmax(row)[label] (max-shifted log-sum-exp: exponentials in the
 * compute type, f32 for bf16/f16, their sum in double). The f32 loss of
 * 16-bit logits is torch.autocast's (cross_entropy runs in f32) and
 * transformers' (ForCausalLMLoss upcasts the logits). labels: `label_dtype`
 * i32 or i64; a label outside [0, classes) is FSDP_ERR_DATA naming it and its
 * position. */
int fsdp_cross_entropy(fsdp_stream s, fsdp_dtype dtype, const void *logits,
                       const void *labels, fsdp_dtype label_dtype,
                       int64_t positions, int64_t classes, void *loss);
/* dlogits (of `dtype`) = (softmax(logits) − onehot(label)) · dloss /
 * positions, computed in the compute type and rounded once to `dtype`, with
 * dloss a scalar of the loss dtype (f32 for bf16/f16 logits, else `dtype`;
 * fsdp_cross_entropy) in device memory. */
int fsdp_cross_entropy_grad(fsdp_stream s, fsdp_dtype dtype, const void *logits,
                            const void *labels, fsdp_dtype label_dtype,
                            const void *dloss, void *dlogits, int64_t positions,
                            int64_t classes);

/* One tensor-parallel rank's softmax statistics of a vocab-parallel
 * cross-entropy (Shoeybi et al. 2019, Sec. 3; Megatron-LM's
 * vocab_parallel_cross_entropy): logits [positions, classes] are columns
 * [first, first + classes) of a vocabulary of `total`; stats [tp, positions,
 * 3] of the loss dtype (f32 for bf16/f16 logits, else `dtype`) gets, in slot
 * `slot` (this rank's index in the group), per position (m, s, z) = (the max
 * logit, Σ exp(logit − m) in the compute type summed in double, the label's
 * logit if the label is in the slice else 0), and 0 in every other slot (so
 * that a sum over the group gathers them). A label outside [0, total) is
 * FSDP_ERR_DATA naming it and its position. */
int fsdp_vocab_ce_stats(fsdp_stream s, fsdp_dtype dtype, const void *logits,
                        const void *labels, fsdp_dtype label_dtype,
                        int64_t positions, int64_t classes, int64_t first,
                        int64_t total, int64_t tp, int64_t slot, void *stats);
/* loss (a scalar of the loss dtype of `dtype` logits) = mean over positions
 * of lse − z, with every rank's stats [tp, positions, 3]
 * (fsdp_vocab_ce_stats, summed over the group) merged per position as
 * lse = M + log Σ_t s_t·exp(m_t − M), M = max_t m_t (Milakov & Gimelshein
 * 2018, "Online normalizer calculation for softmax", Sec. 3) and z = Σ_t z_t,
 * in double. */
int fsdp_vocab_ce_loss(fsdp_stream s, fsdp_dtype dtype, const void *stats,
                       int64_t positions, int64_t tp, void *loss);
/* dlogits [positions, classes] (of `dtype`) = (exp(logit − lse) −
 * [label = first + column]) · dloss / positions, lse per position from stats
 * as fsdp_vocab_ce_loss, computed in the compute type and rounded once;
 * dloss a scalar of the loss dtype in device memory. */
int fsdp_vocab_ce_grad(fsdp_stream s, fsdp_dtype dtype, const void *logits,
                       const void *labels, fsdp_dtype label_dtype,
                       const void *stats, const void *dloss, void *dlogits,
                       int64_t positions, int64_t classes, int64_t first,
                       int64_t tp);

/* The optimizer updates skip when skip_if_nonfinite (one f64 in device
 * memory, the global gradient norm of fsdp_grad_norm) is not NULL and not
 * finite: every output equals its input (copied where it does not alias
 * it), as torch.amp.GradScaler.step skips optimizer.step() on an inf/nan
 * gradient (torch's fused AdamW: its found_inf argument). The test is on
 * the device, so no host synchronisation decides it. */

/* out = p − lr·(g + weight_decay·p) (torch.optim.SGD without momentum);
 * out may alias p. f32 or f64. */
int fsdp_sgd_update(fsdp_stream s, fsdp_dtype dtype, const void *p,
                    const void *g, void *out, int64_t n, double lr,
                    double weight_decay, const double *skip_if_nonfinite);
/* One AdamW step (Loshchilov & Hutter, ICLR 2019, Algorithm 2) exactly as
 * torch.optim.AdamW's single-tensor path: p ← p·(1 − lr·wd);
 * m' = β1·m + (1−β1)·g; v' = β2·v + (1−β2)·g²;
 * p' = p − (lr/(1−β1ᵗ)) · m' / (√v'/√(1−β2ᵗ) + ε). The 1-based step t is read
 * from device memory `step` (a scalar of `step_dtype`, i32 or i64; t < 1 is
 * FSDP_ERR_DATA). Outputs may alias the matching inputs (p_out = p, ...).
 * f32 or f64. */
int fsdp_adamw_update(fsdp_stream s, fsdp_dtype dtype, const void *p,
                      const void *g, const void *m, const void *v,
                      const void *step, fsdp_dtype step_dtype, void *p_out,
                      void *m_out, void *v_out, int64_t n, double lr,
                      double beta1, double beta2, double eps,
                      double weight_decay, const double *skip_if_nonfinite);

/* fsdp_sgd_update and fsdp_adamw_update with the learning rate read from
 * device memory `lr` (one f64, e.g. fsdp_lr_schedule's result), so that a
 * scheduled rate never leaves the device. */
int fsdp_sgd_update_lr(fsdp_stream s, fsdp_dtype dtype, const void *p,
                       const void *g, void *out, int64_t n, const double *lr,
                       double weight_decay, const double *skip_if_nonfinite);
int fsdp_adamw_update_lr(fsdp_stream s, fsdp_dtype dtype, const void *p,
                         const void *g, const void *m, const void *v,
                         const void *step, fsdp_dtype step_dtype, void *p_out,
                         void *m_out, void *v_out, int64_t n, const double *lr,
                         double beta1, double beta2, double eps,
                         double weight_decay, const double *skip_if_nonfinite);

/* The optimizer update of one instruction (nn.sgd_update when adamw is 0,
 * nn.adamw_update otherwise) over n elements with weight-decay groups: the
 * elements of flat-buffer ranges no_decay[2k] <= i < no_decay[2k+1]
 * (no_decay_len entries, sorted) get weight decay 0, the others
 * weight_decay, where element j of the operands is flat element
 * flat_offset + j (a shard: its rank in the shard group times n). Calls
 * fsdp_sgd_update / fsdp_adamw_update once per run of one decay, with the
 * rate `lr`, or read from device memory when lr_device is not NULL (the
 * _lr variants), skipped when skip_if_nonfinite is not NULL and not finite
 * (above); m, v, step, m_out and v_out are ignored for SGD. All
 * buffers hold n elements of `dtype` (f32 or f64); no_decay and flat_offset
 * count elements. Errors: those of the update it calls (FSDP_ERR_DATA for
 * a step < 1, FSDP_ERR_INVALID for another dtype), after the runs before it
 * were applied. The interpreter and compiled steps both run updates through
 * it. */
int fsdp_optimizer_update(fsdp_stream s, fsdp_dtype dtype, int adamw,
                          const void *p, const void *g, const void *m,
                          const void *v, const void *step,
                          fsdp_dtype step_dtype, void *p_out, void *m_out,
                          void *v_out, int64_t n, const double *lr_device,
                          double lr, double beta1, double beta2, double eps,
                          double weight_decay, const int64_t *no_decay,
                          int64_t no_decay_len, int64_t flat_offset,
                          const double *skip_if_nonfinite);

/* Learning-rate schedules (kind of fsdp_lr_schedule). */
enum { FSDP_LR_CONSTANT = 0, FSDP_LR_LINEAR = 1, FSDP_LR_COSINE = 2 };
/* *lr (one f64 in device memory) = base_lr·f(t − 1) during the warm-up
 * (t − 1 < warmup_steps: from 0 up), then min_lr + (base_lr − min_lr)·f(t − 1)
 * (transformers' get_cosine_with_min_lr_schedule_with_warmup, Megatron-LM,
 * nanoGPT), t the 1-based optimizer step read from device memory `step` (i32
 * or i64; t < 1 is FSDP_ERR_DATA) and f transformers' constant/linear/cosine
 * schedule with warm-up (fsdp/ElementMath.h, scheduledLr; decay_steps
 * is their num_training_steps; past it both decays stay at min_lr, where
 * transformers' cosine would rise again). When decay_steps_device is not
 * NULL, its one i64 in device memory (the run's total optimizer steps, a
 * schedule's `total_steps` input; < 1 is FSDP_ERR_DATA) is read instead of
 * decay_steps. */
int fsdp_lr_schedule(fsdp_stream s, const void *step, fsdp_dtype step_dtype,
                     double *lr, int kind, double base_lr, int64_t warmup_steps,
                     const int64_t *decay_steps_device, int64_t decay_steps,
                     double min_lr);
/* *out (one f64 in device memory) = Σ x[i]², i < n, accumulated in double
 * (a local part of a squared gradient norm). Float dtypes. */
int fsdp_sum_squares(fsdp_stream s, fsdp_dtype dtype, const void *x, int64_t n,
                     double *out);
/* *norm = √(*sum_squares) / S and *coef = min(1, max_norm / (*norm + 1e-6))
 * / S (torch.nn.utils.clip_grad_norm_; coef 1 / S when max_norm is 0), S =
 * *loss_scale (one f64 in device memory: the gradients are those of the
 * loss times S, torch.amp.GradScaler's unscale_ then clip) or 1 when
 * loss_scale is NULL; one f64 each in device memory. */
int fsdp_grad_norm(fsdp_stream s, const double *sum_squares, double max_norm,
                   const double *loss_scale, double *norm, double *coef);
/* y[i] = x[i] · c, c = *scale (one f64 in device memory) rounded once to the
 * compute type (f32 for bf16/f16), i < n; y may alias x. Float dtypes. */
int fsdp_scale(fsdp_stream s, fsdp_dtype dtype, const void *x,
               const double *scale, void *y, int64_t n);

/* flat[flat_numel] = zeros where no part lands, parts[i] (numels[i]
 * elements) copied to flat[offsets[i], ...) (FSDP's FlatParameter). A part
 * outside [0, flat_numel) is FSDP_ERR_INVALID. */
int fsdp_flatten(fsdp_stream s, fsdp_dtype dtype, const void *const *parts,
                 const int64_t *numels, const int64_t *offsets, int nparts,
                 void *flat, int64_t flat_numel);

/* y[i, :] = table[idx[i] − first, :], i < n; table [vocab, dim] holds rows
 * [first, first + vocab) of a vocabulary of `total` (the whole table:
 * first 0, total vocab; a tensor-parallel rank's slice: Megatron-LM's
 * VocabParallelEmbedding, Shoeybi et al. 2019, Sec. 3), y [n, dim], a zero
 * row for an index outside the slice; idx of `idx_dtype` i32 or i64; an
 * index outside [0, total) is FSDP_ERR_DATA. */
int fsdp_embedding(fsdp_stream s, fsdp_dtype dtype, const void *idx,
                   fsdp_dtype idx_dtype, const void *table, void *y, int64_t n,
                   int64_t vocab, int64_t dim, int64_t first, int64_t total);
/* dtable[vocab, dim] = 0, then dtable[idx[i] − first, :] += dy[i, :] for the
 * indices in [first, first + vocab) (the VJP of embedding; on cuda the
 * additions of one row run in no fixed order); an index outside [0, total)
 * is FSDP_ERR_DATA. */
int fsdp_embedding_grad(fsdp_stream s, fsdp_dtype dtype, const void *idx,
                        fsdp_dtype idx_dtype, const void *dy, void *dtable,
                        int64_t n, int64_t vocab, int64_t dim, int64_t first,
                        int64_t total);
/* y[b, t, :] = x[b, t, :] + table[t, :] (x, y [batch, seq, dim], table
 * [positions >= seq, dim]: GPT-2's learned positions). */
int fsdp_position_embedding(fsdp_stream s, fsdp_dtype dtype, const void *x,
                            const void *table, void *y, int64_t batch,
                            int64_t seq, int64_t dim);
/* dtable[t, :] = Σ_b dy[b, t, :] for t < seq, 0 for seq <= t < positions. */
int fsdp_position_embedding_grad(fsdp_stream s, fsdp_dtype dtype,
                                 const void *dy, void *dtable, int64_t batch,
                                 int64_t seq, int64_t dim, int64_t positions);

/* LayerNorm over the last dim (Ba, Kiros & Hinton 2016, eq. 4) as
 * torch.nn.LayerNorm: y = (x − μ)/√(σ² + eps)·w + b per row of x[rows, dim],
 * σ² the biased variance. */
int fsdp_layer_norm(fsdp_stream s, fsdp_dtype dtype, const void *x,
                    const void *w, const void *b, void *y, int64_t rows,
                    int64_t dim, double eps);
/* Its VJP, statistics recomputed: x̂ the normalised row, r = 1/√(σ²+eps),
 * g = dy·w: dx = r·(g − mean(g) − x̂·mean(g·x̂)); dw = Σ_rows dy·x̂,
 * db = Σ_rows dy. */
int fsdp_layer_norm_grad(fsdp_stream s, fsdp_dtype dtype, const void *x,
                         const void *w, const void *dy, void *dx, void *dw,
                         void *db, int64_t rows, int64_t dim, double eps);
/* RMSNorm (Zhang & Sennrich 2019, eq. 4) as HF LlamaRMSNorm:
 * y = x/√(mean(x²) + eps)·w. */
int fsdp_rms_norm(fsdp_stream s, fsdp_dtype dtype, const void *x, const void *w,
                  void *y, int64_t rows, int64_t dim, double eps);
/* Its VJP: r = 1/√(mean(x²)+eps), g = dy·w: dx = r·(g − x·r²·mean(g·x)),
 * dw = Σ_rows dy·x·r. */
int fsdp_rms_norm_grad(fsdp_stream s, fsdp_dtype dtype, const void *x,
                       const void *w, const void *dy, void *dx, void *dw,
                       int64_t rows, int64_t dim, double eps);
/* RoPE's static frequency transforms (rope_type of fsdp_rope): the
 * rope_type values of transformers' rope_parameters. */
enum {
  FSDP_ROPE_DEFAULT = 0,
  FSDP_ROPE_LINEAR = 1,
  FSDP_ROPE_LLAMA3 = 2,
  FSDP_ROPE_YARN = 3
};
/* Rotary position embedding (Su et al. 2021, RoFormer eq. 34) in HF Llama's
 * rotate-half layout on x, y [batch, seq, heads·head_dim]: for position t and
 * i < head_dim/2, φ = t·f_i (−φ if inverse, the VJP) and
 * y[i] = a·(x[i]cosφ − x[i+D/2]sinφ), y[i+D/2] = a·(x[i+D/2]cosφ + x[i]sinφ),
 * a = attention_factor (1 but for yarn: transformers' attention_scaling, which
 * multiplies cos and sin). f_i = theta^(−2i/head_dim) transformed by
 * rope_type (FSDP_ROPE_*) with factor, low_freq_factor, high_freq_factor and
 * original_max_positions (llama3), beta_fast, beta_slow, truncate and
 * original_max_positions (yarn), as transformers'
 * src/transformers/modeling_rope_utils.py
 * _compute_linear_scaling_rope_parameters, _compute_llama3_parameters and
 * _compute_yarn_parameters (fsdp/ElementMath.h, ropeInvFreq, has the formulas).
 * head_dim must be positive and even, rope_type one of FSDP_ROPE_*, factor and
 * attention_factor > 0 (else FSDP_ERR_INVALID). */
int fsdp_rope(fsdp_stream s, fsdp_dtype dtype, const void *x, void *y,
              int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
              double theta, int rope_type, double factor,
              double low_freq_factor, double high_freq_factor,
              double original_max_positions, double beta_fast, double beta_slow,
              int truncate, double attention_factor, int inverse);
/* Causal scaled-dot-product attention (Vaswani et al. 2017, eq. 1) with
 * grouped-query heads (Ainslie et al. 2023): q, o [batch, seq, hq·d];
 * k, v [batch, seq, hkv·d]; query head h reads kv head h/(hq/hkv);
 * o = softmax(q·kᵀ/√d over keys s <= t)·v. lse [batch, hq, seq] receives each
 * query row's statistic L = log Σ_{s<=t} exp(q_t·k_s/√d) (natural log of the
 * scaled scores), float for f32/bf16/f16 and double for f64: the backward
 * reads it (FlashAttention-2, Dao 2023, Alg. 1 l. 13; cuDNN SDPA's Stats).
 * cpu: one seq×seq probability matrix per (batch, query head) (scratch),
 * max-subtracted softmax with exponentials in the compute type, their sum in
 * double. cuda: bf16/f16 through cuDNN's fused SDPA (FSDP_ERR_DEVICE
 * when libcudnn cannot be loaded), f32/f64 through strided-batched cuBLAS.
 * hq must be a positive multiple of hkv (else FSDP_ERR_INVALID). */
int fsdp_attention(fsdp_stream s, fsdp_dtype dtype, const void *q,
                   const void *k, const void *v, void *o, void *lse,
                   int64_t batch, int64_t seq, int64_t hq, int64_t hkv,
                   int64_t d);
/* Its VJP from the forward's o and lse: P = exp(q·kᵀ/√d − L) for s <= t,
 * dP = dO·Vᵀ, dS = P⊙(dP − rowsum(dP⊙P))/√d (the row sum equals
 * rowsum(dO⊙O), which cuDNN reads); dQ = dS·K, dK = dSᵀ·Q, dV = Pᵀ·dO, dK and
 * dV of a kv head summed over its query heads (Dao 2023, Algorithm 2). */
int fsdp_attention_grad(fsdp_stream s, fsdp_dtype dtype, const void *q,
                        const void *k, const void *v, const void *o,
                        const void *lse, const void *dout, void *dq, void *dk,
                        void *dv, int64_t batch, int64_t seq, int64_t hq,
                        int64_t hkv, int64_t d);

/* x viewed as [outer, Σ sizes, inner] split along the middle axis into
 * outs[i] [outer, sizes[i], inner]; concat is the inverse. Any dtype. */
int fsdp_split(fsdp_stream s, fsdp_dtype dtype, const void *x,
               void *const *outs, const int64_t *sizes, int nparts,
               int64_t outer, int64_t inner);
int fsdp_concat(fsdp_stream s, fsdp_dtype dtype, const void *const *ins,
                void *y, const int64_t *sizes, int nparts, int64_t outer,
                int64_t inner);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDP_KERNELS_H */
