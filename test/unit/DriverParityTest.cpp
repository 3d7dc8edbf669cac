//===- DriverParityTest.cpp - every kernel entry point on every driver ----===//
//
// Each entry point of fsdp/kernels.h runs on random inputs through the C
// API, on the cpu driver in f32 and bf16 against the cpu driver in f64 (the
// reference: same kernels, double arithmetic; bf16 runs get inputs already
// rounded to bf16), and -- where a CUDA device exists -- on the cuda driver
// against the cpu driver in the same dtype: f32 within 1e-5 and bf16 within
// 1e-2 relative (‖a − b‖ / ‖b‖ per output). Without a GPU the cuda half
// reports that it skipped. Device buffers move with fsdp_memcpy, so the
// same code drives both drivers.
//
//===----------------------------------------------------------------------===//
#include "TestDevice.h"
#include "fsdp/Half.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using Vec = std::vector<double>;

/// One tensor of a case: float (in the case's dtype) or integer (i32
/// indices in [0, bound), or the i64 step).
struct Arg {
  int64_t n;
  /// F64: a positive f64 scalar whatever the case's dtype (a learning rate,
  /// a sum of squares, a clip coefficient in device memory). Loss: a float
  /// of the loss dtype (f32 for bf16/f16, else the case's; cross-entropy's
  /// dloss).
  enum Kind { Float, Index, Step, F64, Loss } kind = Float;
  int64_t bound = 0;
};

struct Case {
  std::string name;
  std::vector<Arg> inputs;
  std::vector<int64_t> outputs; // float outputs, numel each
  std::function<int(fsdp_stream, fsdp_dtype, const std::vector<void *> &,
                    const std::vector<void *> &)>
      run;
  bool wideOnly = false;    // f32/f64 only (the optimizer updates)
  bool f64Outputs = false;  // outputs are f64 whatever the dtype (statistics)
  bool lossOutputs = false; // outputs of the loss dtype (cross-entropy)
};

/// The loss dtype of `t` (fsdp_cross_entropy): f32 for bf16/f16.
fsdp_dtype lossDtype(fsdp_dtype t) {
  return t == FSDP_BF16 || t == FSDP_F16 ? FSDP_F32 : t;
}

/// A buffer on `dev` with host values converted to `t`.
struct DeviceBuffer {
  fsdp_device dev;
  void *p = nullptr;
  size_t bytes = 0;
  DeviceBuffer(fsdp_device d, size_t b) : dev(d), bytes(b) {
    EXPECT_EQ(fsdp_device_alloc(dev, bytes, &p), FSDP_OK) << fsdp_last_error();
  }
  ~DeviceBuffer() { fsdp_device_free(dev, p); }
};

std::vector<unsigned char> toBytes(const Vec &v, fsdp_dtype t) {
  std::vector<unsigned char> b(v.size() * fsdp_dtype_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t) {
    case FSDP_F32:
      reinterpret_cast<float *>(b.data())[i] = static_cast<float>(v[i]);
      break;
    case FSDP_F64:
      reinterpret_cast<double *>(b.data())[i] = v[i];
      break;
    case FSDP_BF16:
      reinterpret_cast<uint16_t *>(b.data())[i] =
          fsdp::floatToBf16(static_cast<float>(v[i]));
      break;
    case FSDP_I32:
      reinterpret_cast<int32_t *>(b.data())[i] = static_cast<int32_t>(v[i]);
      break;
    case FSDP_I64:
      reinterpret_cast<int64_t *>(b.data())[i] = static_cast<int64_t>(v[i]);
      break;
    default:
      ADD_FAILURE() << "dtype";
    }
  }
  return b;
}

Vec fromBytes(const std::vector<unsigned char> &b, size_t n, fsdp_dtype t) {
  Vec v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = t == FSDP_F32 ? reinterpret_cast<const float *>(b.data())[i]
           : t == FSDP_F64
               ? reinterpret_cast<const double *>(b.data())[i]
               : fsdp::bf16ToFloat(
                     reinterpret_cast<const uint16_t *>(b.data())[i]);
  return v;
}

/// Runs `c` on `dev` in `t` with the host inputs; returns the outputs.
std::vector<Vec> runCase(const Case &c, fsdp_device dev, fsdp_dtype t,
                         const std::vector<Vec> &inputs) {
  fsdp_stream s = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  std::vector<std::unique_ptr<DeviceBuffer>> ins, outs;
  std::vector<void *> ip, op;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    fsdp_dtype at = c.inputs[i].kind == Arg::Float   ? t
                    : c.inputs[i].kind == Arg::Loss  ? lossDtype(t)
                    : c.inputs[i].kind == Arg::Index ? FSDP_I32
                    : c.inputs[i].kind == Arg::F64   ? FSDP_F64
                                                     : FSDP_I64;
    std::vector<unsigned char> b = toBytes(inputs[i], at);
    ins.push_back(std::make_unique<DeviceBuffer>(dev, b.size()));
    EXPECT_EQ(fsdp_memcpy(s, ins.back()->p, b.data(), b.size()), FSDP_OK);
    EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_OK);
    ip.push_back(ins.back()->p);
  }
  fsdp_dtype ot = c.f64Outputs ? FSDP_F64 : c.lossOutputs ? lossDtype(t) : t;
  for (int64_t n : c.outputs) {
    outs.push_back(
        std::make_unique<DeviceBuffer>(dev, n * fsdp_dtype_size(ot)));
    op.push_back(outs.back()->p);
  }
  EXPECT_EQ(c.run(s, t, ip, op), FSDP_OK)
      << c.name << ": " << fsdp_last_error();
  EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_OK)
      << c.name << ": " << fsdp_last_error();
  std::vector<Vec> r;
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    std::vector<unsigned char> b(outs[i]->bytes);
    EXPECT_EQ(fsdp_memcpy(s, b.data(), outs[i]->p, b.size()), FSDP_OK);
    EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_OK);
    r.push_back(fromBytes(b, c.outputs[i], ot));
  }
  return r;
}

double relErr(const Vec &a, const Vec &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

std::vector<Vec> randomInputs(const Case &c, unsigned seed, bool bf16) {
  std::mt19937 g(seed);
  std::normal_distribution<double> nd(0, 1);
  std::vector<Vec> v;
  for (const Arg &a : c.inputs) {
    Vec x(a.n);
    for (double &e : x) {
      if (a.kind == Arg::Index)
        e = static_cast<double>(g() % a.bound);
      else if (a.kind == Arg::Step)
        e = 3;
      else if (a.kind == Arg::F64)
        e = 0.25 + std::fabs(nd(g));
      else
        e = bf16 ? fsdp::bf16ToFloat(
                       fsdp::floatToBf16(static_cast<float>(nd(g))))
                 : nd(g);
    }
    v.push_back(x);
  }
  return v;
}

const void *in(const std::vector<void *> &v, size_t i) { return v[i]; }

std::vector<Case> cases() {
  const int64_t M = 6, K = 5, N = 7, B = 2, T = 5, HQ = 4, HKV = 2, D = 4,
                V = 11;
  std::vector<Case> cs;
  using P = const std::vector<void *> &;
  cs.push_back({"linear+bias",
                {{M * K}, {N * K}, {N}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_linear(s, t, in(i, 0), in(i, 1), in(i, 2), o[0],
                                     M, K, N, 0);
                }});
  cs.push_back({"linear transpose_weight",
                {{M * K}, {K * N}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_linear(s, t, in(i, 0), in(i, 1), nullptr, o[0], M,
                                     K, N, 1);
                }});
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      cs.push_back({"matmul " + std::to_string(ta) + std::to_string(tb),
                    {{M * K}, {K * N}},
                    {M * N},
                    [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                      // op(a) [M, K] stored [M, K] or [K, M]; op(b) [K, N]
                      // stored [K, N] or [N, K].
                      return fsdp_matmul(s, t, in(i, 0), in(i, 1), o[0],
                                         ta ? K : M, ta ? M : K, tb ? N : K,
                                         tb ? K : N, ta, tb);
                    }});
  auto ew = [&](const char *name, int nin, auto fn) {
    std::vector<Arg> a(nin, Arg{M * N});
    cs.push_back({name, a, {M * N}, fn});
  };
  ew("add", 2, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
    return fsdp_add(s, t, in(i, 0), in(i, 1), o[0], M * N);
  });
  ew("mul", 2, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
    return fsdp_mul(s, t, in(i, 0), in(i, 1), o[0], M * N);
  });
  ew("relu", 1, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
    return fsdp_relu(s, t, in(i, 0), o[0], M * N);
  });
  ew("relu_grad", 2, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
    return fsdp_relu_grad(s, t, in(i, 0), in(i, 1), o[0], M * N);
  });
  for (int tanh = 0; tanh < 2; ++tanh) {
    ew(tanh ? "gelu tanh" : "gelu", 1,
       [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
         return fsdp_gelu(s, t, in(i, 0), o[0], M * N, tanh);
       });
    ew(tanh ? "gelu_grad tanh" : "gelu_grad", 2,
       [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
         return fsdp_gelu_grad(s, t, in(i, 0), in(i, 1), o[0], M * N, tanh);
       });
  }
  ew("silu", 1, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
    return fsdp_silu(s, t, in(i, 0), o[0], M * N);
  });
  ew("silu_grad", 2, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
    return fsdp_silu_grad(s, t, in(i, 0), in(i, 1), o[0], M * N);
  });
  cs.push_back({"reduce_sum leading",
                {{B * M * N}},
                {N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  const int64_t shape[3] = {B, M, N}, axes[2] = {0, 1};
                  return fsdp_reduce_sum(s, t, in(i, 0), shape, 3, axes, 2,
                                         o[0]);
                }});
  cs.push_back({"reduce_sum middle",
                {{B * M * N}},
                {B * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  const int64_t shape[3] = {B, M, N}, axes[1] = {1};
                  return fsdp_reduce_sum(s, t, in(i, 0), shape, 3, axes, 1,
                                         o[0]);
                }});
  cs.push_back({"broadcast",
                {{B * N}},
                {B * M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  const int64_t shape[3] = {B, M, N}, axes[1] = {1};
                  return fsdp_broadcast(s, t, in(i, 0), shape, 3, axes, 1,
                                        o[0]);
                }});
  cs.push_back({"cross_entropy",
                {{M * V}, {M, Arg::Index, V}},
                {1},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_cross_entropy(s, t, in(i, 0), in(i, 1), FSDP_I32,
                                            M, V, o[0]);
                },
                false,
                false,
                true});
  cs.push_back({"cross_entropy_grad",
                {{M * V}, {M, Arg::Index, V}, {1, Arg::Loss}},
                {M * V},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_cross_entropy_grad(
                      s, t, in(i, 0), in(i, 1), FSDP_I32, in(i, 2), o[0], M, V);
                }});
  cs.push_back({"sgd_update",
                {{M}, {M}},
                {M},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_sgd_update(s, t, in(i, 0), in(i, 1), o[0], M, 0.1,
                                         0.01, nullptr);
                },
                true});
  cs.push_back({"adamw_update",
                {{M}, {M}, {M}, {M}, {1, Arg::Step}},
                {M, M, M},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  // v must be >= 0: square it on the host side of the case.
                  return fsdp_adamw_update(s, t, in(i, 0), in(i, 1), in(i, 2),
                                           in(i, 3), in(i, 4), FSDP_I64, o[0],
                                           o[1], o[2], M, 1e-3, 0.9, 0.999,
                                           1e-8, 0.1, nullptr);
                },
                true});
  // The learning rate from device memory (a scheduled rate).
  cs.push_back({"sgd_update_lr",
                {{M}, {M}, {1, Arg::F64}},
                {M},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_sgd_update_lr(
                      s, t, in(i, 0), in(i, 1), o[0], M,
                      static_cast<const double *>(in(i, 2)), 0.01, nullptr);
                },
                true});
  cs.push_back({"adamw_update_lr",
                {{M}, {M}, {M}, {M}, {1, Arg::Step}, {1, Arg::F64}},
                {M, M, M},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_adamw_update_lr(
                      s, t, in(i, 0), in(i, 1), in(i, 2), in(i, 3), in(i, 4),
                      FSDP_I64, o[0], o[1], o[2], M,
                      static_cast<const double *>(in(i, 5)), 0.9, 0.999, 1e-8,
                      0.1, nullptr);
                },
                true});
  // Schedules at step 3 (s = 2): in the warm-up of 5 steps, and after a
  // warm-up of 1 on the way down over 10 steps.
  for (int kind : {FSDP_LR_CONSTANT, FSDP_LR_LINEAR, FSDP_LR_COSINE})
    for (int64_t warmup : {1, 5})
      cs.push_back({"lr_schedule " + std::to_string(kind) + " warmup " +
                        std::to_string(warmup),
                    {{1, Arg::Step}},
                    {1},
                    [=](fsdp_stream s, fsdp_dtype, P i, P o) {
                      return fsdp_lr_schedule(s, in(i, 0), FSDP_I64,
                                              static_cast<double *>(o[0]), kind,
                                              1e-3, warmup, nullptr, 10, 1e-5);
                    },
                    false,
                    true});
  // The decay steps read from device memory (a total_steps input, 3 here):
  // at step 3 after a warm-up of 1, the schedule's last step.
  for (int kind : {FSDP_LR_LINEAR, FSDP_LR_COSINE})
    cs.push_back({"lr_schedule " + std::to_string(kind) + " device total",
                  {{1, Arg::Step}, {1, Arg::Step}},
                  {1},
                  [=](fsdp_stream s, fsdp_dtype, P i, P o) {
                    return fsdp_lr_schedule(
                        s, in(i, 0), FSDP_I64, static_cast<double *>(o[0]),
                        kind, 1e-3, 1, static_cast<const int64_t *>(in(i, 1)),
                        0, 1e-5);
                  },
                  false,
                  true});
  cs.push_back({"sum_squares",
                {{M * N}},
                {1},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_sum_squares(s, t, in(i, 0), M * N,
                                          static_cast<double *>(o[0]));
                },
                false,
                true});
  for (double maxNorm : {0.0, 0.5})
    cs.push_back({maxNorm > 0 ? "grad_norm clip" : "grad_norm report",
                  {{1, Arg::F64}},
                  {1, 1},
                  [=](fsdp_stream s, fsdp_dtype, P i, P o) {
                    return fsdp_grad_norm(
                        s, static_cast<const double *>(in(i, 0)), maxNorm,
                        nullptr, static_cast<double *>(o[0]),
                        static_cast<double *>(o[1]));
                  },
                  false,
                  true});
  cs.push_back({"scale",
                {{M * N}, {1, Arg::F64}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_scale(s, t, in(i, 0),
                                    static_cast<const double *>(in(i, 1)), o[0],
                                    M * N);
                }});
  cs.push_back(
      {"flatten", {{3}, {4}}, {10}, [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
         const void *parts[2] = {in(i, 0), in(i, 1)};
         const int64_t n[2] = {3, 4}, off[2] = {5, 0};
         return fsdp_flatten(s, t, parts, n, off, 2, o[0], 10);
       }});
  cs.push_back({"embedding",
                {{M, Arg::Index, V}, {V * N}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_embedding(s, t, in(i, 0), FSDP_I32, in(i, 1),
                                        o[0], M, V, N);
                }});
  cs.push_back({"embedding_grad",
                {{M, Arg::Index, 3}, {M * N}},
                {V * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_embedding_grad(s, t, in(i, 0), FSDP_I32, in(i, 1),
                                             o[0], M, V, N);
                }});
  cs.push_back({"position_embedding",
                {{B * T * N}, {(T + 2) * N}},
                {B * T * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_position_embedding(s, t, in(i, 0), in(i, 1), o[0],
                                                 B, T, N);
                }});
  cs.push_back({"position_embedding_grad",
                {{B * T * N}},
                {(T + 2) * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_position_embedding_grad(s, t, in(i, 0), o[0], B,
                                                      T, N, T + 2);
                }});
  cs.push_back({"layer_norm",
                {{M * N}, {N}, {N}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_layer_norm(s, t, in(i, 0), in(i, 1), in(i, 2),
                                         o[0], M, N, 1e-5);
                }});
  cs.push_back({"layer_norm_grad",
                {{M * N}, {N}, {M * N}},
                {M * N, N, N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_layer_norm_grad(s, t, in(i, 0), in(i, 1),
                                              in(i, 2), o[0], o[1], o[2], M, N,
                                              1e-5);
                }});
  cs.push_back({"rms_norm",
                {{M * N}, {N}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_rms_norm(s, t, in(i, 0), in(i, 1), o[0], M, N,
                                       1e-6);
                }});
  cs.push_back({"rms_norm_grad",
                {{M * N}, {N}, {M * N}},
                {M * N, N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_rms_norm_grad(s, t, in(i, 0), in(i, 1), in(i, 2),
                                            o[0], o[1], M, N, 1e-6);
                }});
  // Plain, then each frequency transform (Llama 3.1's, linear, YaRN with
  // its attention factor) with parameters that move every branch at T.
  for (int type = FSDP_ROPE_DEFAULT; type <= FSDP_ROPE_YARN; ++type)
    for (int inv = 0; inv < 2; ++inv)
      cs.push_back({std::string("rope type ") + std::to_string(type) +
                        (inv ? " inverse" : ""),
                    {{B * T * HQ * D}},
                    {B * T * HQ * D},
                    [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                      double factor = type == FSDP_ROPE_DEFAULT ? 1.0 : 8.0;
                      double attn = type == FSDP_ROPE_YARN ? 1.2 : 1.0;
                      return fsdp_rope(s, t, in(i, 0), o[0], B, T, HQ, D, 100.0,
                                       type, factor, 1.0, 4.0, 16.0, 32.0, 1.0,
                                       1, attn, inv);
                    }});
  cs.push_back({"attention GQA",
                {{B * T * HQ * D}, {B * T * HKV * D}, {B * T * HKV * D}},
                {B * T * HQ * D},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_attention(s, t, in(i, 0), in(i, 1), in(i, 2),
                                        o[0], B, T, HQ, HKV, D);
                }});
  cs.push_back({"attention_grad GQA",
                {{B * T * HQ * D},
                 {B * T * HKV * D},
                 {B * T * HKV * D},
                 {B * T * HQ * D}},
                {B * T * HQ * D, B * T * HKV * D, B * T * HKV * D},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_attention_grad(s, t, in(i, 0), in(i, 1), in(i, 2),
                                             in(i, 3), o[0], o[1], o[2], B, T,
                                             HQ, HKV, D);
                }});
  cs.push_back({"split",
                {{B * 6 * 3}},
                {B * 1 * 3, B * 5 * 3},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  void *outs[2] = {o[0], o[1]};
                  const int64_t sizes[2] = {1, 5};
                  return fsdp_split(s, t, in(i, 0), outs, sizes, 2, B, 3);
                }});
  cs.push_back({"concat",
                {{B * 1 * 3}, {B * 5 * 3}},
                {B * 6 * 3},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  const void *ins[2] = {in(i, 0), in(i, 1)};
                  const int64_t sizes[2] = {1, 5};
                  return fsdp_concat(s, t, ins, o[0], sizes, 2, B, 3);
                }});
  cs.push_back({"fill", {}, {M}, [=](fsdp_stream s, fsdp_dtype t, P, P o) {
                  return fsdp_fill(s, t, o[0], M, -1.25);
                }});
  return cs;
}

/// AdamW's second moment must be non-negative.
void fixInputs(const Case &c, std::vector<Vec> &in) {
  if (c.name == "adamw_update" || c.name == "adamw_update_lr")
    for (double &x : in[3])
      x = x * x;
}

/// The cuda device, or null (with the reason) on a machine without one.
fsdp_device cudaDevice(std::string &why) {
  static fsdp_device dev = nullptr;
  static std::string reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    if (fsdp_device_create("cuda", nullptr, &dev) != FSDP_OK) {
      reason = fsdp_last_error();
      dev = nullptr;
    }
  }
  why = reason;
  return dev;
}

TEST(DriverParity, CpuF32AndBf16AgainstF64) {
  fsdp_device cpu = fsdp::test::cpuDevice();
  for (const Case &c : cases()) {
    for (fsdp_dtype t : {FSDP_F32, FSDP_BF16}) {
      if (t == FSDP_BF16 && c.wideOnly)
        continue;
      std::vector<Vec> in = randomInputs(c, 7, t == FSDP_BF16);
      fixInputs(c, in);
      std::vector<Vec> ref = runCase(c, cpu, FSDP_F64, in),
                       got = runCase(c, cpu, t, in);
      for (size_t k = 0; k < ref.size(); ++k) {
        if (std::getenv("FSDP_PARITY_PRINT"))
          std::printf("%-28s %zu %s %.3g\n", c.name.c_str(), k,
                      t == FSDP_F32 ? "f32" : "bf16", relErr(got[k], ref[k]));
        EXPECT_LE(relErr(got[k], ref[k]), t == FSDP_F32 ? 1e-5 : 1e-2)
            << c.name << " output " << k << " in "
            << (t == FSDP_F32 ? "f32" : "bf16");
      }
    }
  }
}

TEST(DriverParity, CudaAgainstCpu) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  fsdp_device cpu = fsdp::test::cpuDevice();
  for (const Case &c : cases())
    for (fsdp_dtype t : {FSDP_F32, FSDP_F64, FSDP_BF16}) {
      if (t == FSDP_BF16 && c.wideOnly)
        continue;
      std::vector<Vec> in = randomInputs(c, 11, t == FSDP_BF16);
      fixInputs(c, in);
      std::vector<Vec> ref = runCase(c, cpu, t, in),
                       got = runCase(c, gpu, t, in);
      for (size_t k = 0; k < ref.size(); ++k)
        EXPECT_LE(relErr(got[k], ref[k]), t == FSDP_BF16 ? 1e-2 : 1e-5)
            << c.name << " output " << k << " dtype " << t;
    }
}

TEST(DriverParity, CudaDataErrorsSurfaceAtSynchronize) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  fsdp_stream s = fsdp_device_stream(gpu, FSDP_STREAM_COMPUTE);
  DeviceBuffer logits(gpu, 4 * 3 * sizeof(float)),
      labels(gpu, 4 * sizeof(int32_t)), loss(gpu, sizeof(float));
  int32_t lab[4] = {0, 1, 7, 2};
  ASSERT_EQ(fsdp_memset_zero(s, logits.p, logits.bytes), FSDP_OK);
  ASSERT_EQ(fsdp_memcpy(s, labels.p, lab, sizeof lab), FSDP_OK);
  ASSERT_EQ(fsdp_cross_entropy(s, FSDP_F32, logits.p, labels.p, FSDP_I32, 4, 3,
                               loss.p),
            FSDP_OK); // asynchronous: the error comes later
  EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_ERR_DATA);
  EXPECT_NE(std::string(fsdp_last_error())
                .find("label 7 at position 2 is outside [0, 3)"),
            std::string::npos)
      << fsdp_last_error();
  EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_OK); // reported once
}

} // namespace
