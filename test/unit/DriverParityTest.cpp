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
#include "fsdp/InitValues.h"
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
  bool wideOnly = false;   // f32/f64 only (the optimizer updates)
  bool f64Outputs = false; // outputs are f64 whatever the dtype (statistics)
  /// The output held in the kernels' compute type (f32, or f64 for f64):
  /// attention's log-sum-exp statistics; -1 for none.
  int statsOutput = -1;
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
    case FSDP_F16:
      reinterpret_cast<uint16_t *>(b.data())[i] =
          fsdp::floatToF16(static_cast<float>(v[i]));
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
  auto typeOf = [&](size_t i) {
    return static_cast<int>(i) == c.statsOutput
               ? (t == FSDP_F64 ? FSDP_F64 : FSDP_F32)
               : ot;
  };
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    outs.push_back(std::make_unique<DeviceBuffer>(
        dev, c.outputs[i] * fsdp_dtype_size(typeOf(i))));
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
    r.push_back(fromBytes(b, c.outputs[i], typeOf(i)));
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
                -1,
                true});
  cs.push_back({"cross_entropy_grad",
                {{M * V}, {M, Arg::Index, V}, {1, Arg::Loss}},
                {M * V},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_cross_entropy_grad(
                      s, t, in(i, 0), in(i, 1), FSDP_I32, in(i, 2), o[0], M, V);
                }});
  // The vocab-parallel cross-entropy's statistics: rank 1 of 2, columns
  // [V, 2V) of a vocabulary of 2V (labels in either slice).
  cs.push_back({"vocab_ce_stats",
                {{M * V}, {M, Arg::Index, 2 * V}},
                {2 * M * 3},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_vocab_ce_stats(s, t, in(i, 0), in(i, 1), FSDP_I32,
                                             M, V, V, 2 * V, 2, 1, o[0]);
                },
                false,
                false,
                -1,
                true});
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
                                        o[0], M, V, N, 0, V);
                }});
  // A vocab-parallel slice: rows [4, 4 + V) of a vocabulary of V + 7.
  cs.push_back({"embedding_vocab_slice",
                {{M, Arg::Index, V + 7}, {V * N}},
                {M * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_embedding(s, t, in(i, 0), FSDP_I32, in(i, 1),
                                        o[0], M, V, N, 4, V + 7);
                }});
  cs.push_back({"embedding_grad_vocab_slice",
                {{M, Arg::Index, V + 7}, {M * N}},
                {V * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_embedding_grad(s, t, in(i, 0), FSDP_I32, in(i, 1),
                                             o[0], M, V, N, 4, V + 7);
                }});
  cs.push_back({"embedding_grad",
                {{M, Arg::Index, 3}, {M * N}},
                {V * N},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_embedding_grad(s, t, in(i, 0), FSDP_I32, in(i, 1),
                                             o[0], M, V, N, 0, V);
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
  // Attention with its statistics (output 1), head dim 8 (cuDNN's SDPA
  // takes multiples of 8); the backward reads the forward's o and lse.
  const int64_t DA = 8, NQ = B * T * HQ * DA, NK = B * T * HKV * DA,
                NS = B * HQ * T;
  cs.push_back({"attention GQA",
                {{NQ}, {NK}, {NK}},
                {NQ, NS},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  return fsdp_attention(s, t, in(i, 0), in(i, 1), in(i, 2),
                                        o[0], o[1], B, T, HQ, HKV, DA);
                },
                false,
                false,
                1});
  cs.push_back({"attention_grad GQA",
                {{NQ}, {NK}, {NK}, {NQ}},
                {NQ, NS, NQ, NK, NK},
                [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
                  int rc = fsdp_attention(s, t, in(i, 0), in(i, 1), in(i, 2),
                                          o[0], o[1], B, T, HQ, HKV, DA);
                  return rc != FSDP_OK
                             ? rc
                             : fsdp_attention_grad(s, t, in(i, 0), in(i, 1),
                                                   in(i, 2), o[0], o[1],
                                                   in(i, 3), o[2], o[3], o[4],
                                                   B, T, HQ, HKV, DA);
                },
                false,
                false,
                1});
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

// cuDNN's fused attention (bf16, the cuda driver's default for 2-byte
// dtypes) against the cuda driver's own f32 path (strided-batched cuBLAS) on
// the same bf16-rounded inputs, at a Llama-like head shape (head dim 128,
// 4 query heads per kv head) and a sequence long enough for several causal
// row blocks: the forward's output and statistics, and the backward from
// them, within bf16's 1e-2.
TEST(DriverParity, CudnnAttentionAgainstCudaF32) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  const int64_t B = 2, T = 1000, HQ = 8, HKV = 2, D = 128, NQ = B * T * HQ * D,
                NK = B * T * HKV * D, NS = B * HQ * T;
  using P = const std::vector<void *> &;
  Case c{"attention fwd+bwd",
         {{NQ}, {NK}, {NK}, {NQ}},
         {NQ, NS, NQ, NK, NK},
         [=](fsdp_stream s, fsdp_dtype t, P i, P o) {
           int rc = fsdp_attention(s, t, in(i, 0), in(i, 1), in(i, 2), o[0],
                                   o[1], B, T, HQ, HKV, D);
           return rc != FSDP_OK
                      ? rc
                      : fsdp_attention_grad(s, t, in(i, 0), in(i, 1), in(i, 2),
                                            o[0], o[1], in(i, 3), o[2], o[3],
                                            o[4], B, T, HQ, HKV, D);
         },
         false,
         false,
         1};
  std::vector<Vec> in = randomInputs(c, 7, true);
  std::vector<Vec> ref = runCase(c, gpu, FSDP_F32, in),
                   got = runCase(c, gpu, FSDP_BF16, in);
  const char *names[] = {"o", "lse", "dq", "dk", "dv"};
  for (size_t k = 0; k < ref.size(); ++k) {
    std::printf("cuDNN bf16 vs cuda f32: %s relative error %.3g\n", names[k],
                relErr(got[k], ref[k]));
    EXPECT_LE(relErr(got[k], ref[k]), 1e-2) << names[k];
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

/// `bytes` of device memory p of device d, read back to the host.
std::vector<unsigned char> readBack(fsdp_device d, const void *p,
                                    size_t bytes) {
  std::vector<unsigned char> out(bytes);
  fsdp_stream s = fsdp_device_stream(d, FSDP_STREAM_COMPUTE);
  EXPECT_EQ(fsdp_memcpy(s, out.data(), p, bytes), FSDP_OK);
  EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_OK) << fsdp_last_error();
  return out;
}

/// A copy of host bytes in device memory of d.
void upload(fsdp_device d, void *p, const void *src, size_t bytes) {
  fsdp_stream s = fsdp_device_stream(d, FSDP_STREAM_COMPUTE);
  EXPECT_EQ(fsdp_memcpy(s, p, src, bytes), FSDP_OK);
  EXPECT_EQ(fsdp_stream_synchronize(s), FSDP_OK);
}

// fsdp_init_values: the cuda kernel runs fsdp/InitValues.h as the cpu
// driver's threads do (no libm, no fused multiply-adds): the same bytes.
TEST(DriverParity, CudaInitValuesEqualCpuBitForBit) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  fsdp_device cpu = fsdp::test::cpuDevice();
  const int64_t n = 300001;
  for (fsdp_dtype t : {FSDP_F32, FSDP_F64, FSDP_BF16, FSDP_F16})
    for (int kind : {fsdp::init::kInitNormal, fsdp::init::kInitUniform,
                     fsdp::init::kInitConstant}) {
      std::vector<unsigned char> got[2];
      for (int k = 0; k < 2; ++k) {
        fsdp_device d = k ? gpu : cpu;
        size_t yb = static_cast<size_t>(n) * fsdp_dtype_size(t);
        DeviceBuffer y(d, yb), m(d, static_cast<size_t>(n) * 4);
        ASSERT_EQ(fsdp_init_values(fsdp_device_stream(d, FSDP_STREAM_COMPUTE),
                                   t, y.p, FSDP_F32, m.p, n, 17, 0x1234abcd,
                                   (int64_t{1} << 32) + 3, kind, 0.02, 0),
                  FSDP_OK)
            << fsdp_last_error();
        got[k] = readBack(d, y.p, yb);
        std::vector<unsigned char> mb = readBack(d, m.p, m.bytes);
        got[k].insert(got[k].end(), mb.begin(), mb.end());
      }
      EXPECT_EQ(got[0], got[1]) << "dtype " << t << " kind " << kind;
    }
}

// The embedding gradient sums each token's rows in position order on both
// drivers (fsdp/SumOrder.h): the same bytes, run after run.
TEST(DriverParity, CudaEmbeddingGradEqualsCpuBitForBit) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  fsdp_device cpu = fsdp::test::cpuDevice();
  const int64_t n = 8192, vocab = 50, dim = 72;
  std::vector<int32_t> idx(n);
  for (int64_t i = 0; i < n; ++i) // heavy repeats; ids 47..49 never occur
    idx[i] = static_cast<int32_t>((i * i + 3 * i) % 47 % (1 + i % 13));
  Vec dy(static_cast<size_t>(n * dim));
  std::mt19937 g(3);
  for (double &v : dy)
    v = std::normal_distribution<double>(0, 2)(g);
  for (fsdp_dtype t : {FSDP_F32, FSDP_F64, FSDP_BF16}) {
    std::vector<unsigned char> in = toBytes(dy, t);
    size_t tb = static_cast<size_t>(vocab * dim) * fsdp_dtype_size(t);
    std::vector<unsigned char> got[3];
    for (int k = 0; k < 3; ++k) {
      fsdp_device d = k ? gpu : cpu;
      DeviceBuffer di(d, idx.size() * 4), dd(d, in.size()), dt(d, tb);
      upload(d, di.p, idx.data(), di.bytes);
      upload(d, dd.p, in.data(), in.size());
      ASSERT_EQ(fsdp_embedding_grad(fsdp_device_stream(d, FSDP_STREAM_COMPUTE),
                                    t, di.p, FSDP_I32, dd.p, dt.p, n, vocab,
                                    dim, 0, vocab),
                FSDP_OK)
          << fsdp_last_error();
      got[k] = readBack(d, dt.p, tb);
    }
    EXPECT_EQ(got[1], got[0]) << "dtype " << t;
    EXPECT_EQ(got[2], got[1]) << "dtype " << t << ": not repeatable";
  }
}

// Two-stage column sums (5000 rows: 128 chunks) repeat bit for bit and stay
// within the grouping's roundings of the cpu driver's row-order sums.
TEST(DriverParity, CudaColumnSumsRepeatBitForBit) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  fsdp_device cpu = fsdp::test::cpuDevice();
  const int64_t rows = 5000, dim = 96;
  Vec x(static_cast<size_t>(rows * dim)), dy(x.size()), w(dim);
  std::mt19937 g(4);
  for (Vec *v : {&x, &dy, &w})
    for (double &e : *v)
      e = std::normal_distribution<double>(0, 1)(g);
  std::vector<unsigned char> xb = toBytes(x, FSDP_F32),
                             yb = toBytes(dy, FSDP_F32),
                             wb = toBytes(w, FSDP_F32);
  std::vector<Vec> out[3];
  for (int k = 0; k < 3; ++k) {
    fsdp_device d = k ? gpu : cpu;
    fsdp_stream s = fsdp_device_stream(d, FSDP_STREAM_COMPUTE);
    DeviceBuffer dx(d, xb.size()), ddy(d, yb.size()), dw(d, wb.size()),
        gx(d, xb.size()), gw(d, wb.size()), gb(d, wb.size()), rs(d, wb.size());
    upload(d, dx.p, xb.data(), xb.size());
    upload(d, ddy.p, yb.data(), yb.size());
    upload(d, dw.p, wb.data(), wb.size());
    ASSERT_EQ(fsdp_layer_norm_grad(s, FSDP_F32, dx.p, dw.p, ddy.p, gx.p, gw.p,
                                   gb.p, rows, dim, 1e-5),
              FSDP_OK);
    int64_t shape[2] = {rows, dim}, axis = 0;
    ASSERT_EQ(fsdp_reduce_sum(s, FSDP_F32, ddy.p, shape, 2, &axis, 1, rs.p),
              FSDP_OK);
    for (DeviceBuffer *b : {&gw, &gb, &rs}) {
      std::vector<unsigned char> r = readBack(d, b->p, b->bytes);
      Vec v(static_cast<size_t>(dim));
      for (int64_t c = 0; c < dim; ++c)
        v[static_cast<size_t>(c)] =
            reinterpret_cast<const float *>(r.data())[c];
      out[k].push_back(v);
    }
  }
  for (size_t o = 0; o < out[0].size(); ++o) {
    EXPECT_EQ(out[2][o], out[1][o]) << "output " << o << ": not repeatable";
    EXPECT_LE(relErr(out[1][o], out[0][o]), 1e-5) << "output " << o;
  }
}

// The cuda driver runs cast, add/mul and the activations on 16-byte packs
// where every pointer is aligned to one, and element by element otherwise
// and on the tail: at every alignment and length the cpu driver's bytes.
TEST(DriverParity, CudaPackedElementwiseEqualsCpuBitForBit) {
  std::string why;
  fsdp_device gpu = cudaDevice(why);
  if (!gpu)
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  fsdp_device cpu = fsdp::test::cpuDevice();
  const int64_t total = 4099;
  Vec a(static_cast<size_t>(total)), b(a.size());
  std::mt19937 g(5);
  for (Vec *v : {&a, &b})
    for (double &e : *v)
      e = std::normal_distribution<double>(0, 3)(g);
  const fsdp_dtype floats[] = {FSDP_F32, FSDP_F64, FSDP_BF16, FSDP_F16};
  for (int64_t off : {0, 1, 3, 8})
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{8}, total - 8}) {
      for (fsdp_dtype t : floats) {
        size_t es = fsdp_dtype_size(t);
        std::vector<unsigned char> ab = toBytes(a, t), bb = toBytes(b, t);
        std::vector<unsigned char> got[2];
        for (int k = 0; k < 2; ++k) {
          fsdp_device d = k ? gpu : cpu;
          fsdp_stream s = fsdp_device_stream(d, FSDP_STREAM_COMPUTE);
          DeviceBuffer da(d, ab.size()), db(d, bb.size()), dc(d, ab.size());
          upload(d, da.p, ab.data(), ab.size());
          upload(d, db.p, bb.data(), bb.size());
          char *x = static_cast<char *>(da.p) + off * es;
          char *y = static_cast<char *>(db.p) + off * es;
          char *z = static_cast<char *>(dc.p) + off * es;
          size_t zb = static_cast<size_t>(n) * es; // what the op writes
          ASSERT_EQ(fsdp_add(s, t, x, y, z, n), FSDP_OK) << fsdp_last_error();
          got[k] = readBack(d, z, zb);
          ASSERT_EQ(fsdp_mul(s, t, x, y, z, n), FSDP_OK) << fsdp_last_error();
          std::vector<unsigned char> r = readBack(d, z, zb);
          got[k].insert(got[k].end(), r.begin(), r.end());
          ASSERT_EQ(fsdp_relu(s, t, x, z, n), FSDP_OK) << fsdp_last_error();
          r = readBack(d, z, zb);
          got[k].insert(got[k].end(), r.begin(), r.end());
        }
        EXPECT_EQ(got[0], got[1])
            << "add/mul/relu dtype " << t << " offset " << off << " n " << n;
      }
      for (fsdp_dtype st : floats)
        for (fsdp_dtype dt : floats) {
          if (st == dt)
            continue;
          std::vector<unsigned char> ab = toBytes(a, st);
          size_t ss = fsdp_dtype_size(st), ds = fsdp_dtype_size(dt);
          std::vector<unsigned char> got[2];
          for (int k = 0; k < 2; ++k) {
            fsdp_device d = k ? gpu : cpu;
            fsdp_stream s = fsdp_device_stream(d, FSDP_STREAM_COMPUTE);
            DeviceBuffer da(d, ab.size()),
                dc(d, static_cast<size_t>(total) * ds);
            upload(d, da.p, ab.data(), ab.size());
            ASSERT_EQ(fsdp_cast(s, st, static_cast<char *>(da.p) + off * ss, dt,
                                static_cast<char *>(dc.p) + off * ds, n),
                      FSDP_OK)
                << fsdp_last_error();
            got[k] = readBack(d, static_cast<char *>(dc.p) + off * ds,
                              static_cast<size_t>(n) * ds);
          }
          EXPECT_EQ(got[0], got[1]) << "cast " << st << " -> " << dt
                                    << " offset " << off << " n " << n;
        }
    }
}

} // namespace
