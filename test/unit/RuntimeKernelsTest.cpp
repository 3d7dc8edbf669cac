//===- RuntimeKernelsTest.cpp - Tests of the runtime's CPU kernels --------===//
//
// Every kernel of the cpu driver (runtime/lib/cpu/Kernels.h), for float and
// double, against a naive double-precision reference on small random shapes
// that are not multiples of anything; the AdamW step against a hand-computed
// two-step example; the cross-entropy and GELU gradients against central finite
// differences; and the C API's byte accounting and single-process collectives.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "TestDevice.h"
#include "fsdp/Half.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

using namespace fsdp;
using namespace fsdp::rt;
using namespace fsdp::schedule;

namespace {

template <typename T> std::vector<T> randomVec(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-2.0, 2.0);
  std::vector<T> v(n);
  for (auto &x : v)
    x = static_cast<T>(d(gen));
  return v;
}

template <typename T> double tol() {
  return std::is_same<T, float>::value ? 2e-5 : 1e-12;
}

template <typename T>
void expectNear(const std::vector<T> &got, const std::vector<double> &want,
                double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(static_cast<double>(got[i]), want[i],
                rel * (1.0 + std::fabs(want[i])))
        << "at element " << i;
}

template <typename T> class KernelTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(KernelTest, FloatTypes);

TYPED_TEST(KernelTest, LinearMatchesNaive) {
  using T = TypeParam;
  const int64_t m = 7, k = 13, n = 5;
  auto x = randomVec<T>(m * k, 1), w = randomVec<T>(n * k, 2),
       b = randomVec<T>(n, 3);
  for (bool withBias : {false, true}) {
    std::vector<T> y(m * n);
    cpu::linear<T>(x.data(), w.data(), withBias ? b.data() : nullptr, y.data(),
                   m, k, n);
    std::vector<double> ref(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = withBias ? b[j] : 0.0;
        for (int64_t q = 0; q < k; ++q)
          s += double(x[i * k + q]) * double(w[j * k + q]);
        ref[i * n + j] = s;
      }
    expectNear(y, ref, 10 * tol<T>());
  }
}

TYPED_TEST(KernelTest, MatmulAllTransposes) {
  using T = TypeParam;
  const int64_t m = 6, k = 11, n = 3;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Stored shapes: a is [m,k] or [k,m]; b is [k,n] or [n,k].
      auto a = randomVec<T>(m * k, 10 + ta), b = randomVec<T>(k * n, 20 + tb);
      int64_t aRows = ta ? k : m, aCols = ta ? m : k;
      int64_t bRows = tb ? n : k, bCols = tb ? k : n;
      std::vector<T> c(m * n);
      cpu::matmul<T>(a.data(), b.data(), c.data(), aRows, aCols, bRows, bCols,
                     ta, tb);
      std::vector<double> ref(m * n, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          for (int64_t q = 0; q < k; ++q) {
            double av = ta ? a[q * aCols + i] : a[i * aCols + q];
            double bv = tb ? b[j * bCols + q] : b[q * bCols + j];
            ref[i * n + j] += av * bv;
          }
      expectNear(c, ref, 10 * tol<T>());
    }
  std::vector<T> a(6), b(6), c(4);
  EXPECT_THROW(
      cpu::matmul<T>(a.data(), b.data(), c.data(), 2, 3, 2, 3, false, false),
      std::invalid_argument);
}

TYPED_TEST(KernelTest, Elementwise) {
  using T = TypeParam;
  const int64_t n = 37;
  auto a = randomVec<T>(n, 4), b = randomVec<T>(n, 5);
  a[3] = 0; // relu's subgradient at 0 is 0
  std::vector<T> c(n);
  std::vector<double> ref(n);
  cpu::add<T>(a.data(), b.data(), c.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ref[i] = double(a[i]) + double(b[i]);
  expectNear(c, ref, tol<T>());
  cpu::mul<T>(a.data(), b.data(), c.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ref[i] = double(a[i]) * double(b[i]);
  expectNear(c, ref, tol<T>());
  cpu::relu<T>(a.data(), c.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ref[i] = a[i] > 0 ? double(a[i]) : 0.0;
  expectNear(c, ref, 0);
  cpu::reluGrad<T>(a.data(), b.data(), c.data(), n);
  for (int64_t i = 0; i < n; ++i)
    ref[i] = a[i] > 0 ? double(b[i]) : 0.0;
  expectNear(c, ref, 0);
  cpu::fill<T>(c.data(), n, 2.5);
  expectNear(c, std::vector<double>(n, 2.5), 0);
}

TYPED_TEST(KernelTest, GeluValuesAndGradient) {
  using T = TypeParam;
  // Reference values: x·Φ(x), and the tanh form, at x = 1 and -0.5.
  std::vector<T> x = {T(1.0), T(-0.5)}, y(2);
  cpu::gelu<T>(x.data(), y.data(), 2, false);
  expectNear(y, {0.8413447460685429, -0.15426876936299344}, tol<T>());
  cpu::gelu<T>(x.data(), y.data(), 2, true);
  expectNear(y, {0.8411919906082768, -0.15428599017485606}, tol<T>());
  // Gradient against central differences of the double kernel.
  const int64_t n = 23;
  auto xs = randomVec<double>(n, 6), dy = randomVec<double>(n, 7);
  for (bool approx : {false, true}) {
    std::vector<T> xt(xs.begin(), xs.end()), dyt(dy.begin(), dy.end()), dx(n);
    cpu::geluGrad<T>(xt.data(), dyt.data(), dx.data(), n, approx);
    std::vector<double> ref(n);
    const double h = 1e-6;
    for (int64_t i = 0; i < n; ++i) {
      double xp = double(xt[i]) + h, xm = double(xt[i]) - h, yp, ym;
      cpu::gelu<double>(&xp, &yp, 1, approx);
      cpu::gelu<double>(&xm, &ym, 1, approx);
      ref[i] = (yp - ym) / (2 * h) * double(dyt[i]);
    }
    expectNear(dx, ref, std::max(1e-7, tol<T>()));
  }
}

TYPED_TEST(KernelTest, ReduceSumAndBroadcast) {
  using T = TypeParam;
  const std::vector<int64_t> shape = {3, 4, 5};
  auto x = randomVec<T>(60, 8);
  auto at = [&](int64_t i, int64_t j, int64_t k) {
    return double(x[(i * 4 + j) * 5 + k]);
  };
  for (std::vector<int64_t> axes :
       {std::vector<int64_t>{}, {0}, {1}, {2}, {0, 2}, {2, 0}, {0, 1, 2}}) {
    auto has = [&](int64_t a) {
      return std::find(axes.begin(), axes.end(), a) != axes.end();
    };
    int64_t d0 = has(0) ? 1 : 3, d1 = has(1) ? 1 : 4, d2 = has(2) ? 1 : 5;
    std::vector<double> ref(d0 * d1 * d2, 0.0);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 5; ++k)
          ref[((has(0) ? 0 : i) * d1 + (has(1) ? 0 : j)) * d2 +
              (has(2) ? 0 : k)] += at(i, j, k);
    std::vector<T> y(ref.size());
    cpu::reduceSum<T>(x.data(), shape, axes, y.data());
    expectNear(y, ref, 10 * tol<T>());

    // broadcast(y) back along the same axes, then compare element-wise.
    std::vector<T> z(60);
    cpu::broadcast<T>(y.data(), shape, axes, z.data());
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 5; ++k)
          EXPECT_EQ(z[(i * 4 + j) * 5 + k],
                    y[((has(0) ? 0 : i) * d1 + (has(1) ? 0 : j)) * d2 +
                      (has(2) ? 0 : k)]);
  }
  std::vector<T> y(60);
  EXPECT_THROW(cpu::reduceSum<T>(x.data(), shape, {3}, y.data()),
               std::out_of_range);
}

TYPED_TEST(KernelTest, CrossEntropyMatchesNaive) {
  using T = TypeParam;
  const int64_t pos = 9, cls = 7;
  auto logits = randomVec<T>(pos * cls, 9);
  std::vector<int32_t> labels(pos);
  for (int64_t p = 0; p < pos; ++p)
    labels[p] = static_cast<int32_t>((p * 5 + 2) % cls);
  double ref = 0;
  for (int64_t p = 0; p < pos; ++p) {
    double s = 0;
    for (int64_t c = 0; c < cls; ++c)
      s += std::exp(double(logits[p * cls + c]));
    ref += std::log(s) - double(logits[p * cls + labels[p]]);
  }
  ref /= pos;
  T got = cpu::crossEntropy<T, int32_t>(logits.data(), labels.data(), pos, cls);
  EXPECT_NEAR(double(got), ref, tol<T>() * 10);

  // Stability: huge logits give a finite, exact loss.
  std::vector<T> big = {T(1000), T(0), T(-1000)};
  std::vector<int64_t> l1 = {1};
  EXPECT_NEAR(
      double(cpu::crossEntropy<T, int64_t>(big.data(), l1.data(), 1, 3)),
      1000.0, 1e-3);

  // Labels out of range are errors, not crashes.
  std::vector<int32_t> bad = labels;
  bad[4] = cls;
  auto ce = cpu::crossEntropy<T, int32_t>;
  EXPECT_THROW(ce(logits.data(), bad.data(), pos, cls), std::out_of_range);
  bad[4] = -1;
  std::vector<T> d(pos * cls);
  auto ceGrad = cpu::crossEntropyGrad<T, int32_t>;
  EXPECT_THROW(ceGrad(logits.data(), bad.data(), T(1), d.data(), pos, cls),
               std::out_of_range);
}

TEST(KernelTest, CrossEntropyGradMatchesFiniteDifferences) {
  const int64_t pos = 5, cls = 6;
  auto logits = randomVec<double>(pos * cls, 11);
  std::vector<int32_t> labels = {0, 5, 3, 3, 1};
  const double dloss = 0.7, h = 1e-6;
  std::vector<double> grad(pos * cls);
  cpu::crossEntropyGrad<double, int32_t>(logits.data(), labels.data(), dloss,
                                         grad.data(), pos, cls);
  for (int64_t i = 0; i < pos * cls; ++i) {
    auto lp = logits, lm = logits;
    lp[i] += h;
    lm[i] -= h;
    double fd = (cpu::crossEntropy<double, int32_t>(lp.data(), labels.data(),
                                                    pos, cls) -
                 cpu::crossEntropy<double, int32_t>(lm.data(), labels.data(),
                                                    pos, cls)) /
                (2 * h);
    EXPECT_NEAR(grad[i], dloss * fd, 1e-8) << "at element " << i;
  }
}

TYPED_TEST(KernelTest, SgdUpdate) {
  using T = TypeParam;
  const int64_t n = 19;
  auto p = randomVec<T>(n, 12), g = randomVec<T>(n, 13);
  std::vector<T> out(n);
  cpu::sgdUpdate<T>(p.data(), g.data(), out.data(), n, 0.1, 0.01);
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i)
    ref[i] = double(p[i]) - 0.1 * (double(g[i]) + 0.01 * double(p[i]));
  expectNear(out, ref, tol<T>());
}

// Two steps by hand (torch.optim.AdamW order), lr 0.1, betas (0.9, 0.999),
// eps 1e-8, wd 0.01, p0 = 1, g = 0.5 then -0.25:
//   t=1: p = 0.999; m = 0.05; v = 0.00025; p = 0.999 - (0.1/0.1)*0.05 /
//        (sqrt(0.00025)/sqrt(0.001) + 1e-8) = 0.899000002
//   t=2: p = 0.899000002*0.999; m = 0.02; v = 0.00031225;
//        p -= (0.1/0.19)*0.02 / (sqrt(0.00031225)/sqrt(0.001999) + 1e-8)
//        = 0.8714672987058463
TYPED_TEST(KernelTest, AdamwHandComputedExample) {
  using T = TypeParam;
  T p = 1, m = 0, v = 0;
  T g1 = T(0.5), g2 = T(-0.25);
  cpu::adamwUpdate<T>(&p, &g1, &m, &v, 1, &p, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8,
                      0.01);
  EXPECT_NEAR(double(p), 0.899000002, tol<T>());
  EXPECT_NEAR(double(m), 0.05, tol<T>());
  EXPECT_NEAR(double(v), 0.00025, tol<T>() * 1e-3);
  cpu::adamwUpdate<T>(&p, &g2, &m, &v, 2, &p, &m, &v, 1, 0.1, 0.9, 0.999, 1e-8,
                      0.01);
  EXPECT_NEAR(double(p), 0.8714672987058463, tol<T>());
  EXPECT_NEAR(double(m), 0.02, tol<T>());
  EXPECT_NEAR(double(v), 0.00031225, tol<T>() * 1e-3);
  EXPECT_THROW(cpu::adamwUpdate<T>(&p, &g2, &m, &v, 0, &p, &m, &v, 1, 0.1, 0.9,
                                   0.999, 1e-8, 0.01),
               std::invalid_argument);
}

TYPED_TEST(KernelTest, Flatten) {
  using T = TypeParam;
  std::vector<T> a = {1, 2, 3}, b = {4, 5};
  std::vector<T> flat(9, T(7));
  cpu::flatten<T>({a.data(), b.data()}, {3, 2}, {0, 4}, flat.data(), 9);
  expectNear(flat, {1, 2, 3, 0, 4, 5, 0, 0, 0}, 0);
  // Parts out of offset order: only the uncovered elements are zeroed.
  std::fill(flat.begin(), flat.end(), T(7));
  cpu::flatten<T>({a.data(), b.data()}, {3, 2}, {5, 0}, flat.data(), 9);
  expectNear(flat, {4, 5, 0, 0, 0, 1, 2, 3, 0}, 0);
  EXPECT_THROW(
      cpu::flatten<T>({a.data(), b.data()}, {3, 2}, {0, 8}, flat.data(), 9),
      std::out_of_range);
}

TEST(RuntimeCApi, DeviceMemoryAndAllocatorStatistics) {
  fsdp_device d = fsdp::test::cpuDevice();
  ASSERT_EQ(fsdp_device_reset_stats(d), FSDP_OK);
  fsdp_device_stats s0{}, s1{}, s2{};
  ASSERT_EQ(fsdp_device_get_stats(d, &s0), FSDP_OK);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(fsdp_device_alloc(d, 1 << 20, &a), FSDP_OK);
  ASSERT_EQ(fsdp_device_alloc(d, 24, &b), FSDP_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  ASSERT_EQ(fsdp_device_get_stats(d, &s1), FSDP_OK);
  // glibc's own figures see the MiB (mmapped): in use and the high-water.
  EXPECT_GE(s1.memory_in_use_bytes - s0.memory_in_use_bytes, 1 << 20);
  EXPECT_GE(s1.memory_peak_bytes - s0.memory_peak_bytes, 1 << 20);
  fsdp_stream s = fsdp::test::cpuStream();
  ASSERT_EQ(fsdp_memset_zero(s, a, 1 << 20), FSDP_OK);
  EXPECT_EQ(static_cast<const char *>(a)[(1 << 20) - 1], 0);
  ASSERT_EQ(fsdp_device_free(d, a), FSDP_OK);
  ASSERT_EQ(fsdp_device_free(d, b), FSDP_OK);
  ASSERT_EQ(fsdp_device_free(d, nullptr), FSDP_OK);
  ASSERT_EQ(fsdp_device_get_stats(d, &s2), FSDP_OK);
  EXPECT_LT(s2.memory_in_use_bytes, s1.memory_in_use_bytes - (1 << 19));
  EXPECT_EQ(s2.memory_peak_bytes, s1.memory_peak_bytes); // a high-water mark
  // Strided copies (pack/unpack, split/concat).
  int src[6] = {1, 2, 3, 4, 5, 6}, dst[4] = {0, 0, 0, 0};
  ASSERT_EQ(fsdp_memcpy_2d(s, dst, 2 * sizeof(int), src + 1, 3 * sizeof(int),
                           2 * sizeof(int), 2),
            FSDP_OK);
  EXPECT_EQ(dst[0], 2);
  EXPECT_EQ(dst[1], 3);
  EXPECT_EQ(dst[2], 5);
  EXPECT_EQ(dst[3], 6);
}

// The allocator's peak misses no allocation: the cpu driver skips mallinfo2
// where its bound of the bytes in use (runtime/lib/cpu/HeapMeter.h) stays
// below the mark, so after every allocation of a random mix (24 B to 768
// KiB, arena and mmapped chunks, at most 64 live, freed in random order: the
// in-use level rises and falls across the mark) the peak is at least
// glibc's bytes in use read afresh (memory_in_use_bytes: a full mallinfo2).
TEST(RuntimeCApi, AllocatorPeakMissesNoAllocation) {
  fsdp_device d = fsdp::test::cpuDevice();
  std::vector<void *> live;
  live.reserve(4000); // no untracked growth between the checks
  ASSERT_EQ(fsdp_device_reset_stats(d), FSDP_OK);
  std::mt19937 rng(7);
  int64_t mostInUse = 0;
  for (int i = 0; i < 4000; ++i) {
    if (live.size() > 64 || (!live.empty() && rng() % 2)) {
      size_t k = rng() % live.size();
      ASSERT_EQ(fsdp_device_free(d, live[k]), FSDP_OK);
      live[k] = live.back();
      live.pop_back();
      continue;
    }
    size_t bytes = size_t(24) << (rng() % 15);
    bytes += rng() % bytes;
    void *p = nullptr;
    ASSERT_EQ(fsdp_device_alloc(d, bytes, &p), FSDP_OK);
    live.push_back(p);
    fsdp_device_stats s{};
    ASSERT_EQ(fsdp_device_get_stats(d, &s), FSDP_OK);
    ASSERT_GE(s.memory_peak_bytes, s.memory_in_use_bytes) << "allocation " << i;
    mostInUse = std::max(mostInUse, s.memory_in_use_bytes);
  }
  for (void *p : live)
    ASSERT_EQ(fsdp_device_free(d, p), FSDP_OK);
  fsdp_device_stats s{};
  ASSERT_EQ(fsdp_device_get_stats(d, &s), FSDP_OK);
  EXPECT_GE(s.memory_peak_bytes, mostInUse);
}

TEST(RuntimeCApi, Devices) {
  fsdp_device d = nullptr;
  EXPECT_EQ(fsdp_device_create("tpu", nullptr, &d), FSDP_ERR_DEVICE);
  EXPECT_NE(std::string(fsdp_last_error()).find("unknown device 'tpu'"),
            std::string::npos);
  EXPECT_EQ(fsdp_device_create("cuda:x", nullptr, &d), FSDP_ERR_DEVICE);
  ASSERT_EQ(fsdp_device_create("cpu:0", nullptr, &d), FSDP_OK);
  EXPECT_STREQ(fsdp_device_name(d), "cpu");
  EXPECT_STREQ(fsdp_device_collectives(d), "mpi");
  EXPECT_EQ(fsdp_stream_device(fsdp_device_stream(d, FSDP_STREAM_COMM)), d);
  fsdp_device_destroy(d);
}

TEST(RuntimeCApi, SingleProcessCollectives) {
  ASSERT_EQ(fsdp_world_size(), 1);
  ASSERT_EQ(fsdp_rank(), 0);
  fsdp_channel w = fsdp::test::worldChannel();
  EXPECT_EQ(fsdp_channel_size(w), 1);
  EXPECT_EQ(fsdp_channel_rank(w), 0);
  fsdp_device_reset_stats(fsdp::test::cpuDevice());
  std::vector<float> shard = {1, 2, 3}, full(3);
  fsdp_event e = nullptr;
  ASSERT_EQ(
      fsdp_all_gather_start(w, shard.data(), full.data(), 3, FSDP_F32, &e),
      FSDP_OK);
  int done = 0;
  ASSERT_EQ(fsdp_event_query(e, &done), FSDP_OK);
  EXPECT_EQ(done, 1);
  ASSERT_EQ(fsdp_wait(e), FSDP_OK);
  EXPECT_EQ(full, shard);
  std::vector<double> fd = {4, 5}, sd(2);
  ASSERT_EQ(fsdp_reduce_scatter_start(w, fd.data(), sd.data(), 2, FSDP_F64,
                                      FSDP_REDUCE_AVG, &e),
            FSDP_OK);
  // A stream waits on an event without releasing it; fsdp_wait releases.
  ASSERT_EQ(fsdp_stream_wait_event(fsdp::test::cpuStream(), e), FSDP_OK);
  ASSERT_EQ(fsdp_wait(e), FSDP_OK);
  EXPECT_EQ(sd, fd);
  fsdp_device_stats st{};
  fsdp_device_get_stats(fsdp::test::cpuDevice(), &st);
  EXPECT_EQ(st.comm_bytes[FSDP_COLL_ALL_GATHER], 0); // (N-1)/N is 0 for N=1
  EXPECT_NE(fsdp_all_gather_start(w, nullptr, full.data(), 3, FSDP_F32, &e),
            FSDP_OK);
  EXPECT_STRNE(fsdp_last_error(), "");
  // A split of one rank is itself.
  fsdp_channel c = nullptr;
  ASSERT_EQ(fsdp_channel_split(w, 0, 0, &c), FSDP_OK);
  EXPECT_EQ(fsdp_channel_size(c), 1);
  fsdp_channel_destroy(c);
}

} // namespace

// bf16/f16 logits give an f32 loss and take an f32 dloss (torch.autocast runs
// cross_entropy in f32): the loss equals the f64 loss of the same 16-bit
// logits to f32 precision (a 16-bit loss is off by up to 2^-9 resp. 2^-12
// relative), and a dloss of 2^16 (a GradScaler's first scale, past f16's
// 65504) gives dlogits = (softmax - onehot)·2^16/positions rounded once to
// the logits' dtype.
TEST(RuntimeCApi, CrossEntropyOfHalfLogitsIsF32) {
  fsdp_device dev = fsdp::test::cpuDevice();
  fsdp_stream s = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  const int64_t positions = 6, classes = 5;
  for (fsdp_dtype t : {FSDP_BF16, FSDP_F16}) {
    SCOPED_TRACE(t == FSDP_BF16 ? "bf16" : "f16");
    auto toHalf = [&](float v) {
      return t == FSDP_BF16 ? fsdp::floatToBf16(v) : fsdp::floatToF16(v);
    };
    auto toFloat = [&](uint16_t h) {
      return t == FSDP_BF16 ? fsdp::bf16ToFloat(h) : fsdp::f16ToFloat(h);
    };
    std::vector<uint16_t> logits(positions * classes);
    std::vector<int32_t> labels(positions);
    std::vector<float> x = randomVec<float>(logits.size(), 3);
    for (size_t i = 0; i < logits.size(); ++i)
      logits[i] = toHalf(x[i]);
    double want = 0;
    std::vector<double> softmax(logits.size());
    for (int64_t p = 0; p < positions; ++p) {
      labels[p] = static_cast<int32_t>(p % classes);
      double mx = -1e300, sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        mx = std::max<double>(mx, toFloat(logits[p * classes + c]));
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(toFloat(logits[p * classes + c]) - mx);
      for (int64_t c = 0; c < classes; ++c)
        softmax[p * classes + c] =
            std::exp(toFloat(logits[p * classes + c]) - mx) / sum;
      want += mx + std::log(sum) - toFloat(logits[p * classes + labels[p]]);
    }
    want /= positions;
    float loss = -1;
    ASSERT_EQ(fsdp_cross_entropy(s, t, logits.data(), labels.data(), FSDP_I32,
                                 positions, classes, &loss),
              FSDP_OK)
        << fsdp_last_error();
    EXPECT_NEAR(loss, want, 1e-6 * want);

    float dloss = 65536.0f;
    std::vector<uint16_t> dlogits(logits.size());
    ASSERT_EQ(fsdp_cross_entropy_grad(s, t, logits.data(), labels.data(),
                                      FSDP_I32, &dloss, dlogits.data(),
                                      positions, classes),
              FSDP_OK)
        << fsdp_last_error();
    for (int64_t i = 0; i < positions * classes; ++i) {
      double g = (softmax[i] - (i % classes == labels[i / classes] ? 1 : 0)) *
                 65536.0 / positions;
      // One rounding to 16 bits (8 resp. 11 significant bits), plus f32's.
      EXPECT_NEAR(toFloat(dlogits[i]), g,
                  std::fabs(g) * (t == FSDP_BF16 ? 0x1p-8 : 0x1p-11) + 1e-3)
          << "element " << i;
    }
  }
}

// Hand-computed values of the schedules (transformers' lambdas at s = t - 1):
// linear, warm-up 4, decay 20: t = 3 -> s/4 = 0.5; t = 13 -> (20 - 12)/16;
// cosine, warm-up 4, decay 20: t = 13 -> ½(1 + cos(π·8/16)) = 0.5; t = 25
// (past decay-steps: held at the floor, as nanoGPT, where transformers'
// cosine would rise again to ½(1 + cos(π·20/16))) -> 0. The warm-up starts at
// 0 (lr 1.1·s/4, as transformers' get_cosine_with_min_lr_schedule_with_warmup
// and Megatron-LM), then min_lr 0.1 floors the decay: 0.1 + 1.0·f.
TEST(RuntimeCApi, LrScheduleGradNormScale) {
  fsdp_device dev = fsdp::test::cpuDevice();
  fsdp_stream s = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  auto lrAt = [&](int kind, int64_t t, int64_t warmup, int64_t decay) {
    double lr = -1;
    EXPECT_EQ(fsdp_lr_schedule(s, &t, FSDP_I64, &lr, kind, 1.1, warmup, nullptr,
                               decay, 0.1),
              FSDP_OK)
        << fsdp_last_error();
    return lr;
  };
  const double pi = 3.141592653589793;
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_LINEAR, 1, 4, 20), 0.0);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_LINEAR, 3, 4, 20), 1.1 * 0.5);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_LINEAR, 5, 4, 20), 1.1);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_LINEAR, 13, 4, 20), 0.1 + 8.0 / 16.0);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_LINEAR, 30, 4, 20), 0.1);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_COSINE, 13, 4, 20),
                   0.1 + 0.5 * (1 + std::cos(pi * 0.5)));
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_COSINE, 21, 4, 20), 0.1);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_COSINE, 25, 4, 20), 0.1);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_CONSTANT, 2, 4, 0), 1.1 * 0.25);
  EXPECT_DOUBLE_EQ(lrAt(FSDP_LR_CONSTANT, 9, 4, 0), 1.1);
  int64_t zero = 0;
  double lr;
  EXPECT_EQ(fsdp_lr_schedule(s, &zero, FSDP_I64, &lr, FSDP_LR_LINEAR, 1.0, 0,
                             nullptr, 10, 0.0),
            FSDP_ERR_DATA);
  EXPECT_NE(std::string(fsdp_last_error()).find("step must be >= 1, got 0"),
            std::string::npos);
  // The decay steps from device memory (a total_steps input) replace the
  // argument: cosine, warm-up 4, total 20 at t = 13 as above, whatever
  // decay_steps says; a total below 1 is a data error.
  int64_t t13 = 13, total = 20;
  lr = -1;
  EXPECT_EQ(fsdp_lr_schedule(s, &t13, FSDP_I64, &lr, FSDP_LR_COSINE, 1.1, 4,
                             &total, 999, 0.1),
            FSDP_OK)
      << fsdp_last_error();
  EXPECT_DOUBLE_EQ(lr, 0.1 + 0.5 * (1 + std::cos(pi * 0.5)));
  EXPECT_EQ(fsdp_lr_schedule(s, &t13, FSDP_I64, &lr, FSDP_LR_LINEAR, 1.0, 0,
                             &zero, 10, 0.0),
            FSDP_ERR_DATA);
  EXPECT_NE(
      std::string(fsdp_last_error()).find("total steps must be >= 1, got 0"),
      std::string::npos);

  // 3-4-12: |g| = 13 (sum of squares in double), clipped to 6.5.
  float g[3] = {3, 4, 12};
  double ss = 0, norm = 0, coef = 0;
  ASSERT_EQ(fsdp_sum_squares(s, FSDP_F32, g, 3, &ss), FSDP_OK);
  EXPECT_EQ(ss, 169.0);
  ASSERT_EQ(fsdp_grad_norm(s, &ss, 6.5, nullptr, &norm, &coef), FSDP_OK);
  EXPECT_EQ(norm, 13.0);
  EXPECT_DOUBLE_EQ(coef, 6.5 / (13.0 + 1e-6));
  ASSERT_EQ(fsdp_scale(s, FSDP_F32, g, &coef, g, 3), FSDP_OK);
  EXPECT_FLOAT_EQ(g[2], static_cast<float>(12 * (6.5 / (13.0 + 1e-6))));
  ASSERT_EQ(fsdp_grad_norm(s, &ss, 20.0, nullptr, &norm, &coef), FSDP_OK);
  EXPECT_EQ(coef, 1.0); // under the threshold: min(1, ...)
  ASSERT_EQ(fsdp_grad_norm(s, &ss, 0.0, nullptr, &norm, &coef), FSDP_OK);
  EXPECT_EQ(coef, 1.0); // report only
  // The same gradient of the loss times 16 (a loss scale): Σ g² = 169 · 256;
  // the norm is unscaled and the coefficient unscales too (GradScaler's
  // unscale_, then clip_grad_norm_).
  double scaledSs = 169.0 * 256, lossScale = 16;
  ASSERT_EQ(fsdp_grad_norm(s, &scaledSs, 6.5, &lossScale, &norm, &coef),
            FSDP_OK);
  EXPECT_EQ(norm, 13.0);
  EXPECT_DOUBLE_EQ(coef, 6.5 / (13.0 + 1e-6) / 16);
  ASSERT_EQ(fsdp_grad_norm(s, &scaledSs, 0.0, &lossScale, &norm, &coef),
            FSDP_OK);
  EXPECT_EQ(coef, 1.0 / 16);
}

// A non-finite skip_if_nonfinite (the global gradient norm) skips SGD and
// AdamW updates: outputs equal inputs, copied or in place (GradScaler's
// skipped optimizer.step()); a finite one changes nothing.
TEST(RuntimeCApi, OptimizerUpdatesSkipOnNonFiniteNorm) {
  fsdp_device dev = fsdp::test::cpuDevice();
  fsdp_stream s = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  const int64_t step = 2;
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {inf, -inf, std::nan("")}) {
    float p[3] = {1, -2, 3}, g[3] = {0.5f, 0.25f, -1}, m[3] = {0.1f, 0, 0},
          v[3] = {0.01f, 0, 1}, out[3] = {9, 9, 9}, mo[3], vo[3];
    ASSERT_EQ(fsdp_sgd_update(s, FSDP_F32, p, g, out, 3, 0.1, 0.01, &bad),
              FSDP_OK);
    EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(p, p + 3));
    ASSERT_EQ(fsdp_adamw_update(s, FSDP_F32, p, g, m, v, &step, FSDP_I64, out,
                                mo, vo, 3, 1e-3, 0.9, 0.999, 1e-8, 0.1, &bad),
              FSDP_OK);
    EXPECT_EQ(std::vector<float>(out, out + 3), std::vector<float>(p, p + 3));
    EXPECT_EQ(std::vector<float>(mo, mo + 3), std::vector<float>(m, m + 3));
    EXPECT_EQ(std::vector<float>(vo, vo + 3), std::vector<float>(v, v + 3));
    // In place, through the entry point both paths call, with a scheduled
    // rate and weight-decay groups.
    const double lr = 1e-3;
    const int64_t noDecay[2] = {1, 2};
    ASSERT_EQ(fsdp_optimizer_update(s, FSDP_F32, 1, p, g, m, v, &step, FSDP_I64,
                                    p, m, v, 3, &lr, 0, 0.9, 0.999, 1e-8, 0.1,
                                    noDecay, 2, 0, &bad),
              FSDP_OK);
    EXPECT_EQ(p[0], 1.0f);
    EXPECT_EQ(p[1], -2.0f);
    EXPECT_EQ(p[2], 3.0f);
    EXPECT_EQ(m[0], 0.1f);
    EXPECT_EQ(v[2], 1.0f);
  }
  // A finite norm: the same bits as no skip operand.
  double fine = 1e30;
  float p[2] = {1, -2}, g[2] = {0.5f, 0.25f}, a[2], b[2];
  ASSERT_EQ(fsdp_sgd_update(s, FSDP_F32, p, g, a, 2, 0.1, 0.01, &fine),
            FSDP_OK);
  ASSERT_EQ(fsdp_sgd_update(s, FSDP_F32, p, g, b, 2, 0.1, 0.01, nullptr),
            FSDP_OK);
  EXPECT_EQ(std::vector<float>(a, a + 2), std::vector<float>(b, b + 2));
  EXPECT_NE(a[0], p[0]);
}
