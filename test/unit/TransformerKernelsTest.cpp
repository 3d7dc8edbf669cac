//===- TransformerKernelsTest.cpp - Tests of the transformer CPU kernels --===//
//
// Every kernel of the cpu driver's TransformerKernels.h (and nn.linear's
// transpose_weight), for float and double, against a naive double-precision
// reference on small odd shapes: forward kernels against direct loops, VJP
// kernels against central differences of the naive double forward (loss =
// Σ y·dy). Attention is checked with GQA (Hq = 4, Hkv = 2), Hq = Hkv and
// Hq = 3, Hkv = 1. The companion of RuntimeKernelsTest.cpp (split off to
// keep files small).
//
//===----------------------------------------------------------------------===//
#include "TransformerKernels.h"
#include "Kernels.h"
#include "TestDevice.h"
#include "fsdp/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;
using namespace fsdp::schedule;

namespace {

using Vec = std::vector<double>;
using Fwd = std::function<Vec(const std::vector<Vec> &)>;

Vec randomD(size_t n, unsigned seed, double range = 2.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-range, range);
  Vec v(n);
  for (auto &x : v)
    x = d(gen);
  return v;
}
template <typename T> std::vector<T> cast(const Vec &v) {
  return std::vector<T>(v.begin(), v.end());
}
// Inputs are drawn in double and rounded to T, so the reference sees the
// same values as the kernel.
template <typename T> Vec rounded(size_t n, unsigned seed, double range = 2.0) {
  Vec v = randomD(n, seed, range);
  for (auto &x : v)
    x = static_cast<double>(static_cast<T>(x));
  return v;
}
template <typename T> double tol() {
  return std::is_same<T, float>::value ? 2e-5 : 1e-12;
}
template <typename T> double gradTol() {
  return std::is_same<T, float>::value ? 2e-4 : 1e-7;
}

template <typename T>
void expectNear(const std::vector<T> &got, const Vec &want, double rel,
                const char *what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(static_cast<double>(got[i]), want[i],
                rel * (1.0 + std::fabs(want[i])))
        << what << " at element " << i;
}

/// d(Σ fwd(inputs)·dy) / d inputs[which], by central differences in double.
Vec vjpFD(const Fwd &fwd, std::vector<Vec> inputs, const Vec &dy,
          size_t which) {
  const double h = 1e-6;
  Vec g(inputs[which].size());
  for (size_t i = 0; i < g.size(); ++i) {
    double saved = inputs[which][i];
    auto loss = [&](double v) {
      inputs[which][i] = v;
      Vec y = fwd(inputs);
      double s = 0;
      for (size_t j = 0; j < y.size(); ++j)
        s += y[j] * dy[j];
      return s;
    };
    g[i] = (loss(saved + h) - loss(saved - h)) / (2 * h);
    inputs[which][i] = saved;
  }
  return g;
}

template <typename T> class TransformerKernelTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TransformerKernelTest, FloatTypes);

TYPED_TEST(TransformerKernelTest, LinearTransposeWeight) {
  using T = TypeParam;
  const int64_t m = 7, k = 5, n = 3;
  Vec x = rounded<T>(m * k, 1), w = rounded<T>(k * n, 2), b = rounded<T>(n, 3);
  std::vector<T> y(m * n), xt = cast<T>(x), wt = cast<T>(w), bt = cast<T>(b);
  cpu::linear<T>(xt.data(), wt.data(), bt.data(), y.data(), m, k, n,
                 /*transposeWeight=*/true);
  Vec ref(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = b[j];
      for (int64_t q = 0; q < k; ++q)
        s += x[i * k + q] * w[q * n + j]; // w stored [in, out]
      ref[i * n + j] = s;
    }
  expectNear(y, ref, 10 * tol<T>());
}

TYPED_TEST(TransformerKernelTest, EmbeddingAndGrad) {
  using T = TypeParam;
  const int64_t n = 7, vocab = 5, dim = 3;
  std::vector<int32_t> idx = {4, 0, 2, 2, 4, 1, 4}; // repeats scatter-add
  std::vector<int64_t> idx64(idx.begin(), idx.end());
  Vec table = rounded<T>(vocab * dim, 4), dy = rounded<T>(n * dim, 5);
  std::vector<T> tt = cast<T>(table), y(n * dim), y64(n * dim);
  cpu::embedding<T, int32_t>(idx.data(), tt.data(), y.data(), n, vocab, dim, 0,
                             vocab);
  cpu::embedding<T, int64_t>(idx64.data(), tt.data(), y64.data(), n, vocab, dim,
                             0, vocab);
  Vec ref(n * dim), dref(vocab * dim, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c) {
      ref[i * dim + c] = table[idx[i] * dim + c];
      dref[idx[i] * dim + c] += dy[i * dim + c];
    }
  expectNear(y, ref, 0);
  expectNear(y64, ref, 0);
  std::vector<T> dyt = cast<T>(dy), dt(vocab * dim, T(7)); // overwritten
  cpu::embeddingGrad<T, int32_t>(idx.data(), dyt.data(), dt.data(), n, vocab,
                                 dim, 0, vocab);
  expectNear(dt, dref, tol<T>());
  auto fwd32 = cpu::embedding<T, int32_t>;
  auto grad32 = cpu::embeddingGrad<T, int32_t>;
  idx[3] = vocab;
  EXPECT_THROW(fwd32(idx.data(), tt.data(), y.data(), n, vocab, dim, 0, vocab),
               std::out_of_range);
  idx[3] = -1;
  EXPECT_THROW(
      grad32(idx.data(), dyt.data(), dt.data(), n, vocab, dim, 0, vocab),
      std::out_of_range);
}

// Megatron's VocabParallelEmbedding: the table's rows [first, first + rows)
// look up, the others give zero rows, so that the slices' outputs sum to
// the whole table's lookup; the slices' gradients are the whole gradient's
// rows. An index outside [0, total) still throws.
TYPED_TEST(TransformerKernelTest, EmbeddingVocabSlices) {
  using T = TypeParam;
  const int64_t n = 7, vocab = 6, dim = 3, rows = 2;
  std::vector<int32_t> idx = {5, 0, 2, 2, 4, 1, 5};
  Vec table = rounded<T>(vocab * dim, 4), dy = rounded<T>(n * dim, 5);
  std::vector<T> tt = cast<T>(table), dyt = cast<T>(dy), whole(n * dim),
                 dwhole(vocab * dim);
  cpu::embedding<T, int32_t>(idx.data(), tt.data(), whole.data(), n, vocab, dim,
                             0, vocab);
  cpu::embeddingGrad<T, int32_t>(idx.data(), dyt.data(), dwhole.data(), n,
                                 vocab, dim, 0, vocab);
  Vec sum(n * dim, 0.0);
  for (int64_t first = 0; first < vocab; first += rows) {
    std::vector<T> y(n * dim, T(9)), dt(rows * dim, T(9));
    cpu::embedding<T, int32_t>(idx.data(), tt.data() + first * dim, y.data(), n,
                               rows, dim, first, vocab);
    for (int64_t i = 0; i < n; ++i) {
      bool in = idx[i] >= first && idx[i] < first + rows;
      for (int64_t c = 0; c < dim; ++c) {
        EXPECT_EQ(static_cast<double>(y[i * dim + c]),
                  in ? static_cast<double>(whole[i * dim + c]) : 0.0);
        sum[i * dim + c] += static_cast<double>(y[i * dim + c]);
      }
    }
    cpu::embeddingGrad<T, int32_t>(idx.data(), dyt.data(), dt.data(), n, rows,
                                   dim, first, vocab);
    for (int64_t e = 0; e < rows * dim; ++e)
      EXPECT_EQ(static_cast<double>(dt[e]),
                static_cast<double>(dwhole[first * dim + e]));
  }
  Vec ref(whole.begin(), whole.end());
  expectNear(sum, ref, 0);
  idx[0] = static_cast<int32_t>(vocab);
  std::vector<T> y(n * dim);
  auto fwd32 = cpu::embedding<T, int32_t>;
  EXPECT_THROW(
      fwd32(idx.data(), tt.data() + 2 * dim, y.data(), n, rows, dim, 2, vocab),
      std::out_of_range);
}

TYPED_TEST(TransformerKernelTest, PositionEmbeddingAndGrad) {
  using T = TypeParam;
  const int64_t b = 3, t = 5, c = 2, p = 7;
  Vec x = rounded<T>(b * t * c, 6), table = rounded<T>(p * c, 7),
      dy = rounded<T>(b * t * c, 8);
  std::vector<T> xt = cast<T>(x), tt = cast<T>(table), y(b * t * c);
  cpu::positionEmbedding<T>(xt.data(), tt.data(), y.data(), b, t, c);
  Vec ref(b * t * c), dref(p * c, 0.0);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t s = 0; s < t; ++s)
      for (int64_t k = 0; k < c; ++k) {
        ref[(i * t + s) * c + k] = x[(i * t + s) * c + k] + table[s * c + k];
        dref[s * c + k] += dy[(i * t + s) * c + k];
      }
  expectNear(y, ref, tol<T>());
  std::vector<T> dyt = cast<T>(dy), dt(p * c, T(3));
  cpu::positionEmbeddingGrad<T>(dyt.data(), dt.data(), b, t, c, p);
  expectNear(dt, dref, tol<T>()); // rows t >= 5 are zero
}

Vec layerNormRef(const Vec &x, const Vec &w, const Vec &b, int64_t rows,
                 int64_t dim, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t c = 0; c < dim; ++c)
      mu += x[r * dim + c] / dim;
    for (int64_t c = 0; c < dim; ++c)
      var += (x[r * dim + c] - mu) * (x[r * dim + c] - mu) / dim;
    for (int64_t c = 0; c < dim; ++c)
      y[r * dim + c] =
          (x[r * dim + c] - mu) / std::sqrt(var + eps) * w[c] + b[c];
  }
  return y;
}

TYPED_TEST(TransformerKernelTest, LayerNormAndGrad) {
  using T = TypeParam;
  const int64_t rows = 5, dim = 7;
  const double eps = 1e-5;
  Vec x = rounded<T>(rows * dim, 9), w = rounded<T>(dim, 10),
      b = rounded<T>(dim, 11), dy = rounded<T>(rows * dim, 12);
  std::vector<T> xt = cast<T>(x), wt = cast<T>(w), bt = cast<T>(b),
                 y(rows * dim);
  cpu::layerNorm<T>(xt.data(), wt.data(), bt.data(), y.data(), rows, dim, eps);
  expectNear(y, layerNormRef(x, w, b, rows, dim, eps), 10 * tol<T>());
  Fwd fwd = [&](const std::vector<Vec> &in) {
    return layerNormRef(in[0], in[1], in[2], rows, dim, eps);
  };
  std::vector<T> dyt = cast<T>(dy), dx(rows * dim), dw(dim), db(dim);
  cpu::layerNormGrad<T>(xt.data(), wt.data(), dyt.data(), dx.data(), dw.data(),
                        db.data(), rows, dim, eps);
  expectNear(dx, vjpFD(fwd, {x, w, b}, dy, 0), gradTol<T>(), "dx");
  expectNear(dw, vjpFD(fwd, {x, w, b}, dy, 1), gradTol<T>(), "dw");
  expectNear(db, vjpFD(fwd, {x, w, b}, dy, 2), gradTol<T>(), "db");
}

Vec rmsNormRef(const Vec &x, const Vec &w, int64_t rows, int64_t dim,
               double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < dim; ++c)
      ms += x[r * dim + c] * x[r * dim + c] / dim;
    for (int64_t c = 0; c < dim; ++c)
      y[r * dim + c] = x[r * dim + c] / std::sqrt(ms + eps) * w[c];
  }
  return y;
}

TYPED_TEST(TransformerKernelTest, RmsNormAndGrad) {
  using T = TypeParam;
  const int64_t rows = 4, dim = 9;
  const double eps = 1e-6;
  Vec x = rounded<T>(rows * dim, 13), w = rounded<T>(dim, 14),
      dy = rounded<T>(rows * dim, 15);
  std::vector<T> xt = cast<T>(x), wt = cast<T>(w), y(rows * dim);
  cpu::rmsNorm<T>(xt.data(), wt.data(), y.data(), rows, dim, eps);
  expectNear(y, rmsNormRef(x, w, rows, dim, eps), 10 * tol<T>());
  Fwd fwd = [&](const std::vector<Vec> &in) {
    return rmsNormRef(in[0], in[1], rows, dim, eps);
  };
  std::vector<T> dyt = cast<T>(dy), dx(rows * dim), dw(dim);
  cpu::rmsNormGrad<T>(xt.data(), wt.data(), dyt.data(), dx.data(), dw.data(),
                      rows, dim, eps);
  expectNear(dx, vjpFD(fwd, {x, w}, dy, 0), gradTol<T>(), "dx");
  expectNear(dw, vjpFD(fwd, {x, w}, dy, 1), gradTol<T>(), "dw");
}

Vec ropeRef(const Vec &x, int64_t b, int64_t t, int64_t h, int64_t d,
            double theta, bool inverse) {
  Vec y(x.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t s = 0; s < t; ++s)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t k = 0; k < d / 2; ++k) {
          double phi = s * std::pow(theta, -2.0 * k / d) * (inverse ? -1 : 1);
          int64_t base = ((i * t + s) * h + hh) * d;
          double x1 = x[base + k], x2 = x[base + k + d / 2];
          y[base + k] = x1 * std::cos(phi) - x2 * std::sin(phi);
          y[base + k + d / 2] = x2 * std::cos(phi) + x1 * std::sin(phi);
        }
  return y;
}

TYPED_TEST(TransformerKernelTest, RopeAndInverse) {
  using T = TypeParam;
  const int64_t b = 2, t = 5, h = 3, d = 6;
  const double theta = 100.0;
  const int64_t n = b * t * h * d;
  const fsdp::math::RopeScaling plain;
  Vec x = rounded<T>(n, 16), dy = rounded<T>(n, 17);
  std::vector<T> xt = cast<T>(x), y(n), back(n), dyt = cast<T>(dy), dx(n);
  cpu::rope<T>(xt.data(), y.data(), b, t, h, d, theta, plain, false);
  expectNear(y, ropeRef(x, b, t, h, d, theta, false), 10 * tol<T>());
  cpu::rope<T>(y.data(), back.data(), b, t, h, d, theta, plain, true);
  expectNear(back, x, 10 * tol<T>(), "inverse(rope(x))");
  // The VJP is the inverse rotation.
  cpu::rope<T>(dyt.data(), dx.data(), b, t, h, d, theta, plain, true);
  Fwd fwd = [&](const std::vector<Vec> &in) {
    return ropeRef(in[0], b, t, h, d, theta, false);
  };
  expectNear(dx, vjpFD(fwd, {x}, dy, 0), gradTol<T>(), "dx");
  EXPECT_THROW(
      cpu::rope<T>(xt.data(), y.data(), 1, 1, 1, 5, theta, plain, false),
      std::invalid_argument);
}

/// Inverse frequencies of head_dim 16 as transformers 5.24 computes them
/// (ROPE_INIT_FUNCTIONS[rope_type](LlamaConfig(hidden_size=64,
/// num_attention_heads=4, rope_parameters=...)), float32, printed with
/// %.9g), with its attention factor: known answers for math::ropeInvFreq.
struct HfRope {
  const char *name;
  math::RopeScaling scaling;
  double theta;
  double attentionFactor;
  double invFreq[8];
};

math::RopeScaling scalingOf(int type, double factor, double orig) {
  math::RopeScaling s;
  s.type = type;
  s.factor = factor;
  s.originalMaxPositions = orig;
  return s;
}

TEST(RopeScaling, InverseFrequenciesMatchTransformers) {
  // llama3: factor 8, low/high 1 and 4, original 128; linear: factor 4;
  // yarn: factor 4, original 64, theta 100 (max_position_embeddings 256);
  // yarn without truncation: factor 8, original 4096, beta_fast 16,
  // beta_slow 2 (max_position_embeddings 32768).
  math::RopeScaling noTrunc = scalingOf(FSDP_ROPE_YARN, 8.0, 4096);
  noTrunc.betaFast = 16.0;
  noTrunc.betaSlow = 2.0;
  noTrunc.truncate = false;
  const HfRope cases[] = {
      {"llama3",
       scalingOf(FSDP_ROPE_LLAMA3, 8.0, 128),
       10000.0,
       1.0,
       {1, 0.316227764, 0.0427511781, 0.00395284733, 0.00124999997,
        0.000395284733, 0.000125000006, 3.95284733e-05}},
      {"linear",
       scalingOf(FSDP_ROPE_LINEAR, 4.0, 8192),
       10000.0,
       1.0,
       {0.25, 0.079056941, 0.0250000004, 0.00790569466, 0.00249999994,
        0.000790569466, 0.000250000012, 7.90569466e-05}},
      {"yarn",
       scalingOf(FSDP_ROPE_YARN, 4.0, 64),
       100.0,
       1.138629436111989,
       {1, 0.477990121, 0.221359432, 0.0978053659, 0.0399999991, 0.0140585322,
        0.00790569466, 0.00444569858}},
      {"yarn, no truncation",
       noTrunc,
       10000.0,
       1.2079441541679836,
       {1, 0.316227764, 0.100000001, 0.0316227786, 0.00622188905,
        0.000435575581, 0.000125000006, 3.95284733e-05}},
  };
  for (const HfRope &c : cases)
    for (int64_t i = 0; i < 8; ++i) {
      double got = math::ropeInvFreq(i, 16, c.theta, c.scaling);
      // transformers computes in float32: within a few of its ulps.
      EXPECT_NEAR(got, c.invFreq[i], 4e-7 * c.invFreq[i])
          << c.name << " frequency " << i;
    }
}

/// cpu::rope under a frequency transform equals the rotation by the
/// transform's frequencies scaled by the attention factor; its inverse is
/// the VJP, so inverse(rope(x)) = a²·x.
TEST(RopeScaling, KernelRotatesByScaledFrequencies) {
  const int64_t b = 1, t = 6, h = 2, d = 8, n = b * t * h * d;
  math::RopeScaling s = scalingOf(FSDP_ROPE_YARN, 4.0, 64);
  s.attentionFactor = 1.25;
  Vec x = rounded<double>(n, 21), y(n), back(n);
  cpu::rope<double>(x.data(), y.data(), b, t, h, d, 100.0, s, false);
  for (int64_t p = 0; p < t; ++p)
    for (int64_t hh = 0; hh < h; ++hh)
      for (int64_t i = 0; i < d / 2; ++i) {
        double phi = p * math::ropeInvFreq(i, d, 100.0, s);
        int64_t base = (p * h + hh) * d;
        double x1 = x[base + i], x2 = x[base + i + d / 2];
        EXPECT_NEAR(y[base + i],
                    1.25 * (x1 * std::cos(phi) - x2 * std::sin(phi)), 1e-12);
        EXPECT_NEAR(y[base + i + d / 2],
                    1.25 * (x2 * std::cos(phi) + x1 * std::sin(phi)), 1e-12);
      }
  cpu::rope<double>(y.data(), back.data(), b, t, h, d, 100.0, s, true);
  for (int64_t k = 0; k < n; ++k)
    EXPECT_NEAR(back[k], 1.25 * 1.25 * x[k], 1e-12);
}

/// Naive causal GQA attention in double; *lse (if given) [b, hq, t] the
/// log Σ_j exp(score_j) of each row of scaled scores.
Vec attentionRef(const Vec &q, const Vec &k, const Vec &v, int64_t b, int64_t t,
                 int64_t hq, int64_t hkv, int64_t d, Vec *lse = nullptr) {
  Vec o(b * t * hq * d, 0.0);
  if (lse)
    lse->assign(b * hq * t, 0.0);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t h = 0; h < hq; ++h) {
      int64_t g = h / (hq / hkv);
      for (int64_t s = 0; s < t; ++s) {
        Vec sc(s + 1);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j <= s; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c)
            dot += q[((i * t + s) * hq + h) * d + c] *
                   k[((i * t + j) * hkv + g) * d + c];
          sc[j] = dot / std::sqrt(double(d));
          mx = std::max(mx, sc[j]);
        }
        for (int64_t j = 0; j <= s; ++j)
          sum += (sc[j] = std::exp(sc[j] - mx));
        if (lse)
          (*lse)[(i * hq + h) * t + s] = mx + std::log(sum);
        for (int64_t j = 0; j <= s; ++j)
          for (int64_t c = 0; c < d; ++c)
            o[((i * t + s) * hq + h) * d + c] +=
                sc[j] / sum * v[((i * t + j) * hkv + g) * d + c];
      }
    }
  return o;
}

TYPED_TEST(TransformerKernelTest, AttentionAndGrad) {
  using T = TypeParam;
  struct Case {
    int64_t hq, hkv;
  };
  for (Case cs : {Case{4, 2}, Case{2, 2}, Case{3, 1}}) {
    const int64_t b = 2, t = 5, d = 3;
    SCOPED_TRACE(testing::Message() << "Hq=" << cs.hq << " Hkv=" << cs.hkv);
    int64_t nq = b * t * cs.hq * d, nk = b * t * cs.hkv * d;
    Vec q = rounded<T>(nq, 18), k = rounded<T>(nk, 19), v = rounded<T>(nk, 20),
        dout = rounded<T>(nq, 21);
    std::vector<T> qt = cast<T>(q), kt = cast<T>(k), vt = cast<T>(v),
                   dot = cast<T>(dout), o(nq), lse(b * cs.hq * t), dq(nq),
                   dk(nk), dv(nk);
    cpu::attention<T>(qt.data(), kt.data(), vt.data(), o.data(), lse.data(), b,
                      t, cs.hq, cs.hkv, d);
    Vec lseRef;
    expectNear(o, attentionRef(q, k, v, b, t, cs.hq, cs.hkv, d, &lseRef),
               10 * tol<T>(), "o");
    expectNear(lse, lseRef, 10 * tol<T>(), "lse");
    // The backward from the forward's statistics, against finite
    // differences of the reference.
    cpu::attentionGrad<T>(qt.data(), kt.data(), vt.data(), lse.data(),
                          dot.data(), dq.data(), dk.data(), dv.data(), b, t,
                          cs.hq, cs.hkv, d);
    Fwd fwd = [&](const std::vector<Vec> &in) {
      return attentionRef(in[0], in[1], in[2], b, t, cs.hq, cs.hkv, d);
    };
    expectNear(dq, vjpFD(fwd, {q, k, v}, dout, 0), gradTol<T>(), "dq");
    expectNear(dk, vjpFD(fwd, {q, k, v}, dout, 1), gradTol<T>(), "dk");
    expectNear(dv, vjpFD(fwd, {q, k, v}, dout, 2), gradTol<T>(), "dv");
  }
}

TYPED_TEST(TransformerKernelTest, AttentionIsStableForLargeScores) {
  using T = TypeParam;
  // Scores of ~1e4 overflow exp() without the max subtraction.
  const int64_t t = 4, d = 2;
  Vec q(t * d, 100.0), k(t * d, 100.0), v = rounded<T>(t * d, 22);
  std::vector<T> qt = cast<T>(q), kt = cast<T>(k), vt = cast<T>(v), o(t * d),
                 lse(t);
  cpu::attention<T>(qt.data(), kt.data(), vt.data(), o.data(), lse.data(), 1, t,
                    1, 1, d);
  Vec lseRef;
  expectNear(o, attentionRef(q, k, v, 1, t, 1, 1, d, &lseRef), 10 * tol<T>());
  // The statistics of scores of ~1e4 stay finite (max + log Σ exp(· − max)).
  expectNear(lse, lseRef, 10 * tol<T>(), "lse");
}

TYPED_TEST(TransformerKernelTest, SiluAndGrad) {
  using T = TypeParam;
  const int64_t n = 23;
  Vec x = rounded<T>(n, 23, 6.0), dy = rounded<T>(n, 24);
  x[0] = 80; // large magnitudes stay finite
  x[1] = -80;
  std::vector<T> xt = cast<T>(x), y(n), dyt = cast<T>(dy), dx(n);
  cpu::silu<T>(xt.data(), y.data(), n);
  Vec ref(n);
  auto siluD = [](double v) { return v / (1.0 + std::exp(-v)); };
  for (int64_t i = 0; i < n; ++i)
    ref[i] = siluD(x[i]);
  expectNear(y, ref, 10 * tol<T>());
  cpu::siluGrad<T>(xt.data(), dyt.data(), dx.data(), n);
  Fwd fwd = [&](const std::vector<Vec> &in) {
    Vec r(n);
    for (int64_t i = 0; i < n; ++i)
      r[i] = siluD(in[0][i]);
    return r;
  };
  expectNear(dx, vjpFD(fwd, {x}, dy, 0), gradTol<T>(), "dx");
}

TYPED_TEST(TransformerKernelTest, SplitAndConcat) {
  using T = TypeParam;
  // x [2, 6, 3] split along axis 1 into 1, 3, 2.
  const int64_t outer = 2, inner = 3;
  const std::vector<int64_t> sizes = {1, 3, 2};
  Vec x = rounded<T>(outer * 6 * inner, 25);
  std::vector<T> xt = cast<T>(x), p0(outer * 1 * inner), p1(outer * 3 * inner),
                 p2(outer * 2 * inner);
  // The entry points (strided byte copies: any dtype) on the cpu device.
  fsdp_dtype dt = sizeof(T) == 8 ? FSDP_F64 : FSDP_F32;
  void *outs[3] = {p0.data(), p1.data(), p2.data()};
  ASSERT_EQ(fsdp_split(fsdp::test::cpuStream(), dt, xt.data(), outs,
                       sizes.data(), 3, outer, inner),
            FSDP_OK);
  std::vector<std::vector<T> *> parts = {&p0, &p1, &p2};
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Vec ref;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t a = 0; a < sizes[i]; ++a)
        for (int64_t c = 0; c < inner; ++c)
          ref.push_back(x[(o * 6 + start + a) * inner + c]);
    expectNear(*parts[i], ref, 0);
    start += sizes[i];
  }
  std::vector<T> y(x.size());
  const void *ins[3] = {p0.data(), p1.data(), p2.data()};
  ASSERT_EQ(fsdp_concat(fsdp::test::cpuStream(), dt, ins, y.data(),
                        sizes.data(), 3, outer, inner),
            FSDP_OK);
  expectNear(y, x, 0, "concat(split(x))");
}

} // namespace
