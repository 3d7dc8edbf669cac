//===- Kernels.cpp - fsdp-calibrate's kernel benchmarks -------------------===//
//
// The runtime's own kernels, called through their entry points
// (fsdp/kernels.h) on a "cpu" device as the interpreter calls them (the cpu
// driver: OpenBLAS GEMM for linear/matmul, C++ loops for the rest) at the
// shapes of one rank's share of a GPT-2 block (defaults: the main job,
// tools/scripts/run-main.sh, at 4 ranks: M = 4·64 = 256 rows, hidden H =
// 128, 4 heads, sequence 64, MLP 4H, vocabulary 256), each with the FLOPs
// and bytes dialects/nn/NNCost.cpp counts for its op: the same formulas
// (fsdp/CostFormulas.h) over the operands and results of the op that the
// kernel implements.
//
//===----------------------------------------------------------------------===//
#include "fsdp/kernels.h"
#include "fsdp/CostFormulas.h"
#include "fsdp/calibrate/Benchmarks.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>

namespace fsdp::calibrate {

namespace {

namespace cost = fsdp::cost;

/// Bytes of a host tensor of `n` elements of type T.
template <typename T> int64_t bytesOf(int64_t n) {
  return n * static_cast<int64_t>(sizeof(T));
}
int64_t f32(int64_t n) { return bytesOf<float>(n); }
int64_t i32(int64_t n) { return bytesOf<int32_t>(n); }
int64_t i64(int64_t n) { return bytesOf<int64_t>(n); }

/// The bytes an op accesses: each of its operands' and results' bytes once.
double accessed(std::initializer_list<int64_t> tensorBytes) {
  return static_cast<double>(cost::bytesAccessed(tensorBytes));
}

/// linear y[M,N] = x[M,K]·w[K,N] + b (GPT-2's Conv1D layout, as the main job)
/// and the backward matmuls dx[M,K] = dy[M,N]·w[K,N]ᵀ, dw[K,N] = x[M,K]ᵀ·dy.
template <typename T>
std::vector<Case> gemmCases(const Machine &mc, int64_t m, int64_t k, int64_t n,
                            double seconds, bool backward) {
  fsdp_stream gs = mc.stream;
  std::vector<T> x = randomVec<T>(mc, m * k, 1), w = randomVec<T>(mc, k * n, 2),
                 b = randomVec<T>(mc, n, 3), dy = randomVec<T>(mc, m * n, 4);
  std::vector<T> y(m * n), dx(m * k), dw(k * n);
  auto t = [](int64_t count) { return bytesOf<T>(count); };
  std::string shape =
      std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
  std::vector<Case> cs;
  cs.push_back({"matmul", "linear " + shape,
                double(cost::linearFlops(m, k, n, /*bias=*/true)),
                accessed({t(m * k), t(k * n), t(n), t(m * n)}),
                secondsPerCall(
                    mc,
                    [&] {
                      check(fsdp_linear(gs, dtypeOf<T>(), x.data(), w.data(),
                                        b.data(), y.data(), m, k, n,
                                        /*transpose_weight=*/1));
                    },
                    seconds)});
  if (!backward)
    return cs;
  cs.push_back({"matmul", "matmul dx " + shape,
                double(cost::matmulFlops(m, n, k)),
                accessed({t(m * n), t(k * n), t(m * k)}),
                secondsPerCall(
                    mc,
                    [&] {
                      check(fsdp_matmul(gs, dtypeOf<T>(), dy.data(), w.data(),
                                        dx.data(), m, n, k, n, 0, 1));
                    },
                    seconds)});
  cs.push_back({"matmul", "matmul dw " + shape,
                double(cost::matmulFlops(k, m, n)),
                accessed({t(m * k), t(m * n), t(k * n)}),
                secondsPerCall(
                    mc,
                    [&] {
                      check(fsdp_matmul(gs, dtypeOf<T>(), x.data(), dy.data(),
                                        dw.data(), m, k, m, n, 1, 0));
                    },
                    seconds)});
  return cs;
}

/// The (K, N) of one block's linears: c_attn H→3H, c_proj H→H, c_fc H→4H,
/// mlp c_proj 4H→H; and last the tied output projection H→V.
std::vector<std::pair<int64_t, int64_t>> blockLinears(const Options &o) {
  return {{o.hidden, 3 * o.hidden},
          {o.hidden, o.hidden},
          {o.hidden, 4 * o.hidden},
          {4 * o.hidden, o.hidden},
          {o.hidden, o.vocab}};
}

/// GEMMs, f32 and f64: the step's shapes (forward and backward; f64 forward
/// only) into mm32 and mm64, and a 512^3 linear of each into big.
void measureGemms(const Machine &mc, const Options &o, double S, Kernels &k) {
  auto linears = blockLinears(o);
  for (size_t i = 0; i < linears.size(); ++i) {
    auto [kk, n] = linears[i];
    for (Case &c : gemmCases<float>(mc, o.rows, kk, n, S, true)) {
      if (i + 1 == linears.size()) // the output projection: once per step
        c.weight = 1.0 / static_cast<double>(o.layers);
      k.mm32.push_back(c);
    }
    for (Case &c : gemmCases<double>(mc, o.rows, kk, n, S, false))
      k.mm64.push_back(c);
  }
  for (Case &c : gemmCases<float>(mc, 512, 512, 512, S, false))
    k.big.push_back(c);
  for (Case &c : gemmCases<double>(mc, 512, 512, 512, S, false))
    k.big.push_back(c);
}

/// The rate of a memcpy of `count` floats, read + write bytes per second;
/// its seconds per call in `st`.
double copyRate(const Machine &mc, int64_t count, double S, Stat &st) {
  std::vector<float> src = randomVec<float>(mc, count, 5), dst(count);
  st = secondsPerCall(
      mc, [&] { std::memcpy(dst.data(), src.data(), count * sizeof(float)); },
      S);
  return 2.0 * count * sizeof(float) / st.mean;
}

/// Data movement at the step's sizes (no FLOPs in NNCost but
/// position_embedding's one add per element): embedding, split, concat,
/// position_embedding, fsdp.flatten.
std::vector<Case> dataMovementCases(const Machine &mc, const Options &o,
                                    double S) {
  fsdp_stream gs = mc.stream;
  int64_t M = o.rows, H = o.hidden, T = o.seq, Bt = o.rows / o.seq;
  int64_t V = o.vocab;
  std::vector<Case> mem;
  std::vector<int32_t> idx(M);
  for (int64_t i = 0; i < M; ++i)
    idx[i] = static_cast<int32_t>((i * 37) % V);
  std::vector<float> table = randomVec<float>(mc, V * H, 6), y(M * H);
  mem.push_back(
      {"memory", "embedding", 0, accessed({i32(M), f32(V * H), f32(M * H)}),
       secondsPerCall(
           mc,
           [&] {
             check(fsdp_embedding(gs, FSDP_F32, idx.data(), FSDP_I32,
                                  table.data(), y.data(), M, V, H, 0, V));
           },
           S)});
  std::vector<float> qkv = randomVec<float>(mc, M * 3 * H, 7), q(M * H),
                     k(M * H), v(M * H);
  std::vector<void *> outs = {q.data(), k.data(), v.data()};
  std::vector<int64_t> sizes = {H, H, H};
  mem.push_back({"memory", "split", 0,
                 accessed({f32(M * 3 * H), f32(M * H), f32(M * H), f32(M * H)}),
                 secondsPerCall(
                     mc,
                     [&] {
                       check(fsdp_split(gs, FSDP_F32, qkv.data(), outs.data(),
                                        sizes.data(), 3, M, 1));
                     },
                     S)});
  std::vector<const void *> ins = {q.data(), k.data(), v.data()};
  mem.push_back({"memory", "concat", 0,
                 accessed({f32(M * H), f32(M * H), f32(M * H), f32(M * 3 * H)}),
                 secondsPerCall(
                     mc,
                     [&] {
                       check(fsdp_concat(gs, FSDP_F32, ins.data(), qkv.data(),
                                         sizes.data(), 3, M, 1));
                     },
                     S)});
  std::vector<float> pos = randomVec<float>(mc, T * H, 8), yp(M * H);
  // One add per element (NNCost counts it), streaming like the others.
  mem.push_back(
      {"memory", "position_embedding", double(cost::kScatterAdd * M * H),
       accessed({f32(M * H), f32(T * H), f32(M * H)}),
       secondsPerCall(
           mc,
           [&] {
             check(fsdp_position_embedding(gs, FSDP_F32, q.data(), pos.data(),
                                           yp.data(), Bt, T, H));
           },
           S)});
  // fsdp.flatten of a block's gradients into its flat buffer.
  std::vector<float> flat(12 * H * H + 13 * H);
  std::vector<const void *> parts = {qkv.data(), y.data(), k.data()};
  std::vector<int64_t> partN = {M * 3 * H, M * H, M * H},
                       offs = {0, M * 3 * H, M * 4 * H};
  int64_t flatN =
      std::max<int64_t>(static_cast<int64_t>(flat.size()), M * 5 * H);
  flat.resize(flatN);
  mem.push_back({"memory", "flatten", 0,
                 accessed({f32(M * 3 * H), f32(M * H), f32(M * H), f32(flatN)}),
                 secondsPerCall(
                     mc,
                     [&] {
                       check(fsdp_flatten(gs, FSDP_F32, parts.data(),
                                          partN.data(), offs.data(), 3,
                                          flat.data(), flatN));
                     },
                     S)});
  return mem;
}

/// Not in the fit (the main job has no nn.broadcast): the generic
/// broadcast kernel, recorded.
std::vector<Case> unfittedCases(const Machine &mc, const Options &o, double S) {
  fsdp_stream gs = mc.stream;
  int64_t M = o.rows, H = o.hidden;
  std::vector<Case> info;
  std::vector<float> bias = randomVec<float>(mc, 4 * H, 8), yb(M * 4 * H);
  // Operands input and `like` (the result's shape), then the result.
  info.push_back({"info", "broadcast", 0,
                  accessed({f32(4 * H), f32(M * 4 * H), f32(M * 4 * H)}),
                  secondsPerCall(
                      mc,
                      [&] {
                        const int64_t shape[2] = {M, 4 * H}, axes[1] = {0};
                        check(fsdp_broadcast(gs, FSDP_F32, bias.data(), shape,
                                             2, axes, 1, yb.data()));
                      },
                      S)});
  return info;
}

/// Attention, forward and backward, at [Bt, T, A·D].
std::vector<Case> attentionCases(const Machine &mc, const Options &o,
                                 double S) {
  fsdp_stream gs = mc.stream;
  int64_t M = o.rows, H = o.hidden, T = o.seq, Bt = o.rows / o.seq;
  int64_t A = o.heads, D = o.hidden / o.heads;
  std::vector<Case> att;
  std::vector<float> q = randomVec<float>(mc, M * H, 9),
                     k = randomVec<float>(mc, M * H, 10),
                     v = randomVec<float>(mc, M * H, 11),
                     dout = randomVec<float>(mc, M * H, 12);
  // lse [Bt, A, T]: the statistics the forward writes and the backward
  // reads (the forward runs first, so the backward times real statistics).
  std::vector<float> out(M * H), lse(M * A), dq(M * H), dk(M * H), dv(M * H);
  att.push_back(
      {"attention", "attention", double(cost::attentionFlops(Bt, T, H)),
       accessed({f32(M * H), f32(M * H), f32(M * H), f32(M * H), f32(M * A)}),
       secondsPerCall(
           mc,
           [&] {
             check(fsdp_attention(gs, FSDP_F32, q.data(), k.data(), v.data(),
                                  out.data(), lse.data(), Bt, T, A, A, D));
           },
           S)});
  att.push_back(
      {"attention", "attention_grad",
       double(cost::attentionGradFlops(Bt, T, H)),
       accessed({f32(M * H), f32(M * H), f32(M * H), f32(M * H), f32(M * A),
                 f32(M * H), f32(M * H), f32(M * H), f32(M * H)}),
       secondsPerCall(
           mc,
           [&] {
             check(fsdp_attention_grad(gs, FSDP_F32, q.data(), k.data(),
                                       v.data(), out.data(), lse.data(),
                                       dout.data(), dq.data(), dk.data(),
                                       dv.data(), Bt, T, A, A, D));
           },
           S)});
  return att;
}

/// The per-element ops of a block at their sizes (NNCost per-element
/// FLOPs): layer norm, GELU, the residual add, the bias gradients' sum.
std::vector<Case> blockElementwiseCases(const Machine &mc, const Options &o,
                                        double S) {
  fsdp_stream gs = mc.stream;
  int64_t M = o.rows, H = o.hidden;
  std::vector<Case> ew;
  int64_t n = M * H, n4 = M * 4 * H;
  std::vector<float> x = randomVec<float>(mc, n4, 13),
                     dy = randomVec<float>(mc, n4, 14), y(n4),
                     w = randomVec<float>(mc, H, 15),
                     b = randomVec<float>(mc, H, 16), dw(H), db(H);
  ew.push_back({"elementwise", "layer_norm", double(cost::kLayerNorm * n),
                accessed({f32(n), f32(H), f32(H), f32(n)}),
                secondsPerCall(
                    mc,
                    [&] {
                      check(fsdp_layer_norm(gs, FSDP_F32, x.data(), w.data(),
                                            b.data(), y.data(), M, H, 1e-5));
                    },
                    S)});
  ew.push_back(
      {"elementwise", "layer_norm_grad", double(cost::kLayerNormGrad * n),
       accessed({f32(n), f32(H), f32(n), f32(n), f32(H), f32(H)}),
       secondsPerCall(
           mc,
           [&] {
             check(fsdp_layer_norm_grad(gs, FSDP_F32, x.data(), w.data(),
                                        dy.data(), y.data(), dw.data(),
                                        db.data(), M, H, 1e-5));
           },
           S)});
  ew.push_back(
      {"elementwise", "gelu", double(cost::kGelu * n4),
       accessed({f32(n4), f32(n4)}),
       secondsPerCall(
           mc,
           [&] { check(fsdp_gelu(gs, FSDP_F32, x.data(), y.data(), n4, 1)); },
           S)});
  ew.push_back({"elementwise", "gelu_grad", double(cost::kGeluGrad * n4),
                accessed({f32(n4), f32(n4), f32(n4)}),
                secondsPerCall(
                    mc,
                    [&] {
                      check(fsdp_gelu_grad(gs, FSDP_F32, x.data(), dy.data(),
                                           y.data(), n4, 1));
                    },
                    S)});
  ew.push_back(
      {"elementwise", "add", double(cost::kAdd * n),
       accessed({f32(n), f32(n), f32(n)}),
       secondsPerCall(
           mc,
           [&] {
             check(fsdp_add(gs, FSDP_F32, x.data(), dy.data(), y.data(), n));
           },
           S)});
  std::vector<float> red(4 * H);
  ew.push_back({"elementwise", "reduce_sum", double(cost::kReduce * n4),
                accessed({f32(n4), f32(4 * H)}),
                secondsPerCall(
                    mc,
                    [&] {
                      const int64_t shape[2] = {M, 4 * H}, axes[1] = {0};
                      check(fsdp_reduce_sum(gs, FSDP_F32, dy.data(), shape, 2,
                                            axes, 1, red.data()));
                    },
                    S)});
  return ew;
}

/// The per-element ops of the step's end: the optimizer over one block's
/// shard and the loss.
std::vector<Case> updateAndLossCases(const Machine &mc, const Options &o,
                                     double S) {
  fsdp_stream gs = mc.stream;
  int world = mc.world;
  int64_t M = o.rows, H = o.hidden, V = o.vocab;
  std::vector<Case> ew;
  // AdamW over one block's shard: 12·H² + 13·H parameters / N ranks.
  int64_t p = (12 * H * H + 13 * H + world - 1) / world;
  std::vector<float> pp = randomVec<float>(mc, p, 17),
                     g = randomVec<float>(mc, p, 18),
                     m1 = randomVec<float>(mc, p, 19), v1(p, 0.5f), po(p),
                     mo(p), vo(p);
  ew.push_back({"elementwise", "adamw_update", double(cost::kAdamW * p),
                accessed({f32(p), f32(p), f32(p), f32(p), i64(1), f32(p),
                          f32(p), f32(p)}),
                secondsPerCall(
                    mc,
                    [&] {
                      const int64_t step = 3;
                      check(fsdp_adamw_update(
                          gs, FSDP_F32, pp.data(), g.data(), m1.data(),
                          v1.data(), &step, FSDP_I64, po.data(), mo.data(),
                          vo.data(), p, 1e-3, 0.9, 0.999, 1e-8, 0.1, nullptr));
                    },
                    S)});
  std::vector<float> logits = randomVec<float>(mc, M * V, 20), dl(M * V);
  std::vector<int32_t> labels(M);
  for (int64_t i = 0; i < M; ++i)
    labels[i] = static_cast<int32_t>((i * 13) % V);
  ew.push_back(
      {"elementwise", "cross_entropy", double(cost::kCrossEntropy * M * V),
       accessed({f32(M * V), i32(M), f32(1)}),
       secondsPerCall(
           mc,
           [&] {
             float l = 0;
             check(fsdp_cross_entropy(gs, FSDP_F32, logits.data(),
                                      labels.data(), FSDP_I32, M, V, &l));
           },
           S)});
  ew.push_back({"elementwise", "cross_entropy_grad",
                double(cost::kCrossEntropyGrad * M * V),
                accessed({f32(M * V), i32(M), f32(1), f32(M * V)}),
                secondsPerCall(
                    mc,
                    [&] {
                      const float one = 1.0f;
                      check(fsdp_cross_entropy_grad(gs, FSDP_F32, logits.data(),
                                                    labels.data(), FSDP_I32,
                                                    &one, dl.data(), M, V));
                    },
                    S)});
  return ew;
}

} // namespace

Kernels measureKernels(const Machine &mc, const Options &o, double S) {
  Kernels k;
  measureGemms(mc, o, S, k);
  // Streaming bandwidth (memcpy, read + write counted) at the step's
  // working set (the largest activation of a block, M x 4H floats) and at
  // 32 MiB (beyond the caches: recorded, not used).
  k.bw = copyRate(mc, o.rows * 4 * o.hidden, S, k.copy);
  k.bwBig = copyRate(mc, (32 << 20) / 4, S, k.copyBig);
  k.mem = dataMovementCases(mc, o, S);
  k.info = unfittedCases(mc, o, S);
  k.att = attentionCases(mc, o, S);
  k.ew = blockElementwiseCases(mc, o, S);
  for (Case &c : updateAndLossCases(mc, o, S))
    k.ew.push_back(c);
  return k;
}

/// Per case, the pass with the median seconds (the passes run one after
/// another, so a burst of other work on the machine spoils at most one).
Kernels medianOfPasses(std::vector<Kernels> passes) {
  Kernels k = passes[0];
  auto pick = [&](std::vector<Case> Kernels::*set) {
    for (size_t i = 0; i < (k.*set).size(); ++i) {
      std::vector<Case> cs;
      for (Kernels &p : passes)
        cs.push_back((p.*set)[i]);
      std::sort(cs.begin(), cs.end(), [](const Case &x, const Case &y) {
        return x.seconds.mean < y.seconds.mean;
      });
      (k.*set)[i] = cs[cs.size() / 2];
    }
  };
  for (auto set : {&Kernels::mm32, &Kernels::mm64, &Kernels::big, &Kernels::mem,
                   &Kernels::info, &Kernels::att, &Kernels::ew})
    pick(set);
  std::vector<double> bws, big;
  for (Kernels &p : passes) {
    bws.push_back(p.bw);
    big.push_back(p.bwBig);
  }
  std::sort(bws.begin(), bws.end());
  std::sort(big.begin(), big.end());
  k.bw = bws[bws.size() / 2];
  k.bwBig = big[big.size() / 2];
  return k;
}

} // namespace fsdp::calibrate
