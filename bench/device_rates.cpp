//===- device_rates.cpp - a device's GEMM, attention and memory rates -----===//
//
//   build/bin/fsdp-device-rates [--device cpu|cuda|cuda:N] [--dtype bf16|f32]
//                               [--seconds S] [--quick] > RATES.jsonl
//   python3 bench/gpu/device_rates.py RATES.jsonl bench/clusters/h200-8.json
//
// Measures, on one device of the runtime (fsdp_device_create; "cuda" loads
// the cuda driver, libfsdp_cuda.so, from $FSDP_CUDA_DRIVER or beside the
// executable), the rates a GPU cluster spec assumes (docs/compute-model.md;
// bench/clusters/h200-8.json): efficiency.matmul with matmul_half_k (a GEMM
// of reduction length K runs at matmul · K/(K + matmul_half_k) of the peak,
// ClusterSpec::matmulEfficiency in include/fsdp/Analysis/Simulator.h),
// efficiency.attention, and memory_bandwidth · efficiency.memory. Only the
// runtime's C API is called (fsdp/runtime.h, fsdp/kernels.h). MPI is not
// initialised: without it the process is rank 0 of a world of 1
// (runtime.h), and a single device needs no channel.
//
// Measurements (all tensors of --dtype, default bf16, filled with uniform
// values in [-1, 1) by fsdp_init_values):
//   gemm       fsdp_matmul c = op(a)·op(b), FLOPs 2·M·N·K
//              (cost::matmulFlops, include/fsdp/CostFormulas.h):
//              "sweep": M = N = 4096, K = 64, 128, ..., 8192;
//              Llama-3.1-8B's projections at 8192 tokens (M = 8192): q/o
//              (K = N = 4096), k/v (K = 4096, N = 1024), gate/up (K = 4096,
//              N = 14336), down (K = 14336, N = 4096), output head (K =
//              4096, N = 128256), each as "fwd" (x[M,K]·w[K,N]), "dx"
//              (dy[M,N]·w[K,N]ᵀ: inner dimension N) and "dw"
//              (x[M,K]ᵀ·dy[M,N]: inner dimension the 8192 tokens). A shape
//              whose buffers cannot be allocated is skipped (said so).
//   attention  fsdp_attention (forward) and fsdp_attention_grad (backward),
//              causal, batch 1, 32 query heads, 8 kv heads, head dim 128,
//              sequence 2048 and 8192; FLOPs as the simulator counts
//              nn.attention and nn.attention_grad (cost::attentionFlops,
//              2·B·Hq·T²·D, and cost::attentionGradFlops, 2.5× that).
//   bandwidth  "add": fsdp_add c = a + b over 2^28 elements, bytes 3·n·(the
//              element size: 2 for bf16); "memcpy": fsdp_memcpy of 1 GiB
//              device to device, bytes 2 × 1 GiB (read and write);
//              "cast f32->bf16" and "cast bf16->f32": fsdp_cast over the
//              2^28 elements, bytes n·(4 + 2) (not run with --dtype f32).
// --quick (a dry run in seconds on a CPU): the sweep at M = N = 256 with
// K = 64..512, the Llama shapes at 256 tokens with every dimension / 32,
// attention at sequence 128 with 4/2 heads of dim 32, add over 2^20
// elements and a 2 MiB memcpy.
//
// Timing of each measurement: one warm-up call and a synchronisation; a
// probe of 1, 2, 4, ... calls (each batch synchronised) until a batch takes
// S/8, which gives the calls per second; then that rate's count of calls for
// --seconds S (default 0.2), issued back to back on the compute stream and
// timed with fsdp_now from before the first to after the final
// fsdp_stream_synchronize. (A loop that issued calls until S had passed on
// the host would, on an asynchronous device, queue up to the driver's launch
// queue beyond S.) seconds = that time / calls.
//
// Output: one line per measurement on stderr for reading, and on stdout one
// JSON object per line: first {"kind":"device",...}, then
//   {"kind":"gemm","role":..,"name":..,"m":..,"n":..,"k":..,"trans_a":..,
//    "trans_b":..,"dtype":..,"calls":..,"seconds":..,"flops":..,"tflops":..}
//   {"kind":"attention","pass":"forward"|"backward","batch":..,"seq":..,
//    "heads":..,"kv_heads":..,"head_dim":..,"dtype":..,"calls":..,
//    "seconds":..,"flops":..,"tflops":..}
//   {"kind":"bandwidth","op":"add"|"memcpy"|"cast ...","dtype":..,"bytes":..,
//    "calls":..,"seconds":..,"gbps":..}
// seconds: per call; tflops: 1e12 FLOP/s; gbps: 1e9 bytes/s.
// Exit status: 0; 2 for bad arguments; 1 for a runtime error (its
// fsdp_last_error() printed). Not a test: a benchmark.
//
//===----------------------------------------------------------------------===//
#include "fsdp/CostFormulas.h"
#include "fsdp/InitValues.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Json = nlohmann::ordered_json;

const char *kUsage =
    "usage: fsdp-device-rates [--device cpu|cuda|cuda:N] [--dtype bf16|f32]\n"
    "                         [--seconds S] [--quick] [--help]\n"
    "GEMM, attention and memory rates of one runtime device: one JSON object\n"
    "per measurement on stdout, readable lines on stderr (bench/device_rates"
    ".cpp).\n";

struct Options {
  std::string device = "cpu";
  fsdp_dtype dtype = FSDP_BF16;
  std::string dtypeName = "bf16";
  double seconds = 0.2;
  bool quick = false;
};

[[noreturn]] void badArgs(const std::string &msg) {
  std::fprintf(stderr, "fsdp-device-rates: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

bool validDevice(const std::string &d) {
  if (d == "cpu" || d == "cpu:0" || d == "cuda")
    return true;
  if (d.rfind("cuda:", 0) != 0 || d.size() == 5)
    return false;
  return std::all_of(d.begin() + 5, d.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], v;
    size_t eq = a.find('=');
    bool inlineValue = a.rfind("--", 0) == 0 && eq != std::string::npos;
    if (inlineValue) {
      v = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto value = [&]() -> std::string {
      if (inlineValue)
        return v;
      if (i + 1 >= argc)
        badArgs(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--device") {
      o.device = value();
      if (!validDevice(o.device))
        badArgs("--device: '" + o.device + "' is not cpu, cuda or cuda:N");
    } else if (a == "--dtype") {
      o.dtypeName = value();
      if (o.dtypeName == "bf16")
        o.dtype = FSDP_BF16;
      else if (o.dtypeName == "f32")
        o.dtype = FSDP_F32;
      else
        badArgs("--dtype: '" + o.dtypeName + "' is not bf16 or f32");
    } else if (a == "--seconds") {
      std::string s = value();
      char *end = nullptr;
      o.seconds = std::strtod(s.c_str(), &end);
      if (s.empty() || *end != '\0' || !(o.seconds > 0) ||
          !std::isfinite(o.seconds))
        badArgs("--seconds: '" + s + "' is not a positive number");
    } else {
      badArgs("unknown argument '" + std::string(argv[i]) + "'");
    }
  }
  return o;
}

/// A runtime call failed: its message is fsdp_last_error().
struct RuntimeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(int status, const char *what) {
  if (status != FSDP_OK)
    throw RuntimeError(std::string(what) + ": " + fsdp_last_error());
}

/// The device, its compute stream and the buffers allocated on it (freed by
/// release(), also on an error).
class Bench {
public:
  explicit Bench(const Options &opt) : opt(opt) {
    check(fsdp_device_create(opt.device.c_str(), nullptr, &dev),
          "fsdp_device_create");
    s = fsdp_device_stream(dev, FSDP_STREAM_COMPUTE);
  }
  ~Bench() {
    // Also after an error: free what is left, never throw.
    fsdp_stream_synchronize(s);
    for (void *p : live)
      fsdp_device_free(dev, p);
    fsdp_device_destroy(dev);
  }
  Bench(const Bench &) = delete;
  Bench &operator=(const Bench &) = delete;

  fsdp_device device() const { return dev; }
  fsdp_stream stream() const { return s; }
  size_t elemSize() const { return fsdp_dtype_size(opt.dtype); }

  /// `elements` of --dtype, uniform in [-1, 1); nullptr when the device is
  /// out of memory (the caller skips the shape), throws on other errors.
  void *tensor(int64_t elements) {
    void *p = raw(static_cast<size_t>(elements) * elemSize());
    if (p)
      check(fsdp_init_values(s, opt.dtype, p, FSDP_F32, nullptr, elements,
                             /*seed=*/1, /*fqn_hash=*/++seq,
                             /*first_index=*/0, fsdp::init::kInitUniform, 1.0,
                             /*threads=*/0),
            "fsdp_init_values");
    return p;
  }
  /// `bytes` of device memory, contents undefined; nullptr when out of
  /// memory.
  void *raw(size_t bytes) {
    void *p = nullptr;
    int st = fsdp_device_alloc(dev, bytes, &p);
    if (st == FSDP_ERR_NOMEM)
      return nullptr;
    check(st, "fsdp_device_alloc");
    live.push_back(p);
    return p;
  }
  /// Frees every buffer (after the work using them completed).
  void release() {
    if (live.empty())
      return;
    int st = fsdp_stream_synchronize(s);
    for (void *p : live)
      fsdp_device_free(dev, p);
    live.clear();
    fsdp_stream_synchronize(s);
    check(st, "fsdp_stream_synchronize");
  }

  struct Timing {
    double seconds; ///< per call
    int64_t calls;
  };
  /// Seconds per call of `call` (the file comment, "Timing").
  template <typename F> Timing time(F call) {
    call();
    sync();
    int64_t batch = 1;
    double t;
    for (;;) {
      t = run(call, batch);
      if (t >= opt.seconds / 8 || batch >= (int64_t(1) << 20))
        break;
      batch *= 2;
    }
    double perCall = std::max(t / double(batch), 1e-9);
    int64_t calls = std::clamp<int64_t>(
        static_cast<int64_t>(std::ceil(opt.seconds / perCall)), 1,
        int64_t(1) << 24);
    return {run(call, calls) / double(calls), calls};
  }

private:
  void sync() { check(fsdp_stream_synchronize(s), "fsdp_stream_synchronize"); }
  template <typename F> double run(F &call, int64_t n) {
    double t0 = fsdp_now();
    for (int64_t i = 0; i < n; ++i)
      call();
    sync();
    return fsdp_now() - t0;
  }

  const Options &opt;
  fsdp_device dev = nullptr;
  fsdp_stream s = nullptr;
  std::vector<void *> live;
  int64_t seq = 0;
};

void emit(const Json &j) {
  std::fputs((j.dump() + "\n").c_str(), stdout);
  std::fflush(stdout);
}

/// Emits a FLOP-counted measurement: `rec` (its kind and shape) with the
/// fields every one shares: dtype, calls, seconds per call, FLOPs per call
/// and TFLOP/s (1e12 FLOP/s).
void emitTimed(Json rec, const Options &o, int64_t calls, double seconds,
               int64_t flops, double tflops) {
  rec["dtype"] = o.dtypeName;
  rec["calls"] = calls;
  rec["seconds"] = seconds;
  rec["flops"] = flops;
  rec["tflops"] = tflops;
  emit(rec);
}

/// One GEMM c = op(a)·op(b): a stored [ar, ac], b [br, bc]; its result is
/// [m, n] with inner dimension k.
void gemm(Bench &b, const Options &o, const std::string &role,
          const std::string &name, const void *a, const void *bm, void *c,
          int64_t ar, int64_t ac, int64_t br, int64_t bc, int ta, int tb) {
  int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  fsdp_stream s = b.stream();
  Bench::Timing t = b.time([&] {
    check(fsdp_matmul(s, o.dtype, a, bm, c, ar, ac, br, bc, ta, tb),
          "fsdp_matmul");
  });
  int64_t flops = fsdp::cost::matmulFlops(m, k, n);
  double tflops = double(flops) / t.seconds / 1e12;
  std::fprintf(stderr,
               "gemm %-5s %-8s %6lld x %6lld x K %6lld  %s%s  %10.4f ms  "
               "%8.2f TFLOP/s\n",
               role.c_str(), name.c_str(), static_cast<long long>(m),
               static_cast<long long>(n), static_cast<long long>(k),
               ta ? "T" : "N", tb ? "T" : "N", t.seconds * 1e3, tflops);
  emitTimed(Json{{"kind", "gemm"},
                 {"role", role},
                 {"name", name},
                 {"m", m},
                 {"n", n},
                 {"k", k},
                 {"trans_a", ta},
                 {"trans_b", tb}},
            o, t.calls, t.seconds, flops, tflops);
}

void skipped(const std::string &what) {
  std::fprintf(stderr, "skipped %s: the device is out of memory\n",
               what.c_str());
}

void gemms(Bench &b, const Options &o) {
  int64_t sq = o.quick ? 256 : 4096;
  std::vector<int64_t> ks = {64, 128, 256, 512};
  if (!o.quick)
    ks.insert(ks.end(), {1024, 2048, 4096, 8192});
  for (int64_t k : ks) {
    void *a = b.tensor(sq * k), *bm = a ? b.tensor(k * sq) : nullptr,
         *c = bm ? b.tensor(sq * sq) : nullptr;
    if (!c)
      skipped("sweep K=" + std::to_string(k));
    else
      gemm(b, o, "sweep", "square", a, bm, c, sq, k, k, sq, 0, 0);
    b.release();
  }
  // Llama-3.1-8B (hidden 4096, 8 kv heads of 128, MLP 14336, vocabulary
  // 128256) at 8192 tokens; --quick: 256 tokens, dimensions / 32.
  int64_t div = o.quick ? 32 : 1, m = o.quick ? 256 : 8192;
  struct Proj {
    const char *name;
    int64_t k, n;
  };
  for (Proj p : {Proj{"q_o", 4096, 4096}, Proj{"k_v", 4096, 1024},
                 Proj{"gate_up", 4096, 14336}, Proj{"down", 14336, 4096},
                 Proj{"head", 4096, 128256}}) {
    int64_t k = p.k / div, n = p.n / div;
    void *x = b.tensor(m * k), *w = x ? b.tensor(k * n) : nullptr,
         *y = w ? b.tensor(m * n) : nullptr,
         *dx = y ? b.tensor(m * k) : nullptr,
         *dw = dx ? b.tensor(k * n) : nullptr;
    if (!dw) {
      skipped(std::string(p.name) + " (" + std::to_string(m) + "x" +
              std::to_string(k) + "x" + std::to_string(n) + ")");
    } else {
      gemm(b, o, "fwd", p.name, x, w, y, m, k, k, n, 0, 0);
      gemm(b, o, "dx", p.name, y, w, dx, m, n, k, n, 0, 1);
      gemm(b, o, "dw", p.name, x, y, dw, m, k, m, n, 1, 0);
    }
    b.release();
  }
}

void attention(Bench &b, const Options &o) {
  int64_t batch = 1, hq = o.quick ? 4 : 32, hkv = o.quick ? 2 : 8,
          d = o.quick ? 32 : 128;
  std::vector<int64_t> seqs =
      o.quick ? std::vector<int64_t>{128} : std::vector<int64_t>{2048, 8192};
  fsdp_stream s = b.stream();
  for (int64_t t : seqs) {
    int64_t nq = batch * t * hq * d, nkv = batch * t * hkv * d;
    void *q = b.tensor(nq), *k = b.tensor(nkv), *v = b.tensor(nkv),
         *out = b.tensor(nq), *dout = b.tensor(nq),
         *dq = b.raw(nq * b.elemSize()), *dk = b.raw(nkv * b.elemSize()),
         *dv = b.raw(nkv * b.elemSize()),
         // lse: float (f64 only for f64 tensors).
             *lse = b.raw(static_cast<size_t>(batch * hq * t) * sizeof(double));
    if (!q || !k || !v || !out || !dout || !dq || !dk || !dv || !lse) {
      skipped("attention seq " + std::to_string(t));
      b.release();
      continue;
    }
    int64_t fwd = fsdp::cost::attentionFlops(batch, t, hq * d),
            bwd = fsdp::cost::attentionGradFlops(batch, t, hq * d);
    for (int pass = 0; pass < 2; ++pass) {
      Bench::Timing tm = b.time([&] {
        if (pass == 0)
          check(fsdp_attention(s, o.dtype, q, k, v, out, lse, batch, t, hq, hkv,
                               d),
                "fsdp_attention");
        else
          check(fsdp_attention_grad(s, o.dtype, q, k, v, out, lse, dout, dq, dk,
                                    dv, batch, t, hq, hkv, d),
                "fsdp_attention_grad");
      });
      int64_t flops = pass ? bwd : fwd;
      double tflops = double(flops) / tm.seconds / 1e12;
      const char *name = pass ? "backward" : "forward";
      std::fprintf(stderr,
                   "attention %-8s batch %lld seq %6lld heads %lld/%lld dim "
                   "%lld  %10.4f ms  %8.2f TFLOP/s\n",
                   name, static_cast<long long>(batch),
                   static_cast<long long>(t), static_cast<long long>(hq),
                   static_cast<long long>(hkv), static_cast<long long>(d),
                   tm.seconds * 1e3, tflops);
      emitTimed(Json{{"kind", "attention"},
                     {"pass", name},
                     {"batch", batch},
                     {"seq", t},
                     {"heads", hq},
                     {"kv_heads", hkv},
                     {"head_dim", d}},
                o, tm.calls, tm.seconds, flops, tflops);
    }
    b.release();
  }
}

void bandwidth(Bench &b, const Options &o) {
  fsdp_stream s = b.stream();
  auto report = [&](const char *op, int64_t bytes, Bench::Timing t) {
    double gbps = double(bytes) / t.seconds / 1e9;
    std::fprintf(stderr,
                 "bandwidth %-14s %14lld bytes  %10.4f ms  %8.1f GB/s\n", op,
                 static_cast<long long>(bytes), t.seconds * 1e3, gbps);
    emit(Json{{"kind", "bandwidth"},
              {"op", op},
              {"dtype", o.dtypeName},
              {"bytes", bytes},
              {"calls", t.calls},
              {"seconds", t.seconds},
              {"gbps", gbps}});
  };
  int64_t n = int64_t(1) << (o.quick ? 20 : 28);
  void *a = b.tensor(n), *c = a ? b.tensor(n) : nullptr,
       *sum = c ? b.tensor(n) : nullptr;
  if (!sum)
    skipped("add");
  else
    report("add", 3 * n * int64_t(b.elemSize()), b.time([&] {
      check(fsdp_add(s, o.dtype, a, c, sum, n), "fsdp_add");
    }));
  b.release();
  // The mixed-precision casts of a flat parameter (f32 -> dtype) and of a
  // gradient (dtype -> f32).
  void *narrow = o.dtype != FSDP_F32 ? b.tensor(n) : nullptr,
       *wide = narrow ? b.raw(size_t(n) * 4) : nullptr;
  if (wide) {
    check(fsdp_memset_zero(s, wide, size_t(n) * 4), "fsdp_memset_zero");
    int64_t castBytes = n * (4 + int64_t(b.elemSize()));
    report(o.dtype == FSDP_BF16 ? "cast f32->bf16" : "cast f32->f16", castBytes,
           b.time([&] {
             check(fsdp_cast(s, FSDP_F32, wide, o.dtype, narrow, n),
                   "fsdp_cast");
           }));
    report(o.dtype == FSDP_BF16 ? "cast bf16->f32" : "cast f16->f32", castBytes,
           b.time([&] {
             check(fsdp_cast(s, o.dtype, narrow, FSDP_F32, wide, n),
                   "fsdp_cast");
           }));
  } else if (o.dtype != FSDP_F32) {
    skipped("cast");
  }
  b.release();
  size_t bytes = size_t(1) << (o.quick ? 21 : 30);
  void *src = b.raw(bytes), *dst = src ? b.raw(bytes) : nullptr;
  if (!dst) {
    skipped("memcpy");
  } else {
    check(fsdp_memset_zero(s, src, bytes), "fsdp_memset_zero");
    report("memcpy", 2 * int64_t(bytes), b.time([&] {
      check(fsdp_memcpy(s, dst, src, bytes), "fsdp_memcpy");
    }));
  }
  b.release();
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  try {
    Bench b(o);
    fsdp_blas_info blas{};
    check(fsdp_device_blas(b.device(), &blas), "fsdp_device_blas");
    std::fprintf(stderr,
                 "fsdp-device-rates: device %s (%s %s), dtype %s, %g s per "
                 "measurement%s\n",
                 fsdp_device_name(b.device()), blas.library, blas.version,
                 o.dtypeName.c_str(), o.seconds, o.quick ? ", quick" : "");
    emit(Json{{"kind", "device"},
              {"device", fsdp_device_name(b.device())},
              {"library", blas.library},
              {"library_version", blas.version},
              {"dtype", o.dtypeName},
              {"seconds_target", o.seconds},
              {"quick", o.quick}});
    gemms(b, o);
    bandwidth(b, o);
    // Last: the kernel most likely to be missing (cuda bf16 needs cuDNN).
    attention(b, o);
  } catch (const RuntimeError &e) {
    std::fprintf(stderr, "fsdp-device-rates: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
