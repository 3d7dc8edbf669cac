//===- CudnnAttention.cpp - bf16/f16 attention through cuDNN's fused SDPA -===//
//
// Causal grouped-query attention and its backward for the cuda driver's
// 2-byte dtypes, as cuDNN 9's fused scaled-dot-product-attention graphs
// (the flash-attention engines: no seq×seq matrix in memory, the causal
// blocks above the diagonal skipped). The graphs are built with
// cudnn-frontend (header-only; the `nvidia-cudnn-frontend` wheel's include/,
// tools/scripts/setup.sh), whose SDPA node expands into the operation graph
// that cuDNN's engines recognise: writing that graph through the backend
// API (cudnn_graph.h) by hand is the same pattern, longer and unchecked.
//
// libcudnn is never linked: cudnn-frontend's dynamic loading
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING) resolves every cuDNN call through
// the handle dlopen gives here, so a machine without cuDNN still runs the
// f32/f64 attention and every other kernel. Built without the frontend's
// headers (FSDP_HAVE_CUDNN_FRONTEND 0), cudnnOpen reports that and bf16/f16
// attention fails with that message.
//
// Layouts: q, o, dq [B, T, Hq, D] are cuDNN's [B, H, S, D] with strides
// (T·Hq·D, D, Hq·D, 1); k, v, dk, dv the same with Hkv; the statistics
// [B, Hq, T] f32 (cuDNN's Stats, [B, H, S, 1]) are the row log-sum-exp of the
// scaled scores, the definition the cpu driver and the f32 path share.
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

#include <dlfcn.h>

#if FSDP_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

namespace cudnn_frontend {
// The library that cudnn-frontend's dynamic loading resolves cuDNN in.
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend
#endif

namespace fsdp::hal::cuda {

#if FSDP_HAVE_CUDNN_FRONTEND

namespace fe = cudnn_frontend;

namespace {

// The graphs' tensor uids (the variant pack's keys).
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

/// The dlopen'd library and its status line, once per process.
struct Library {
  void *handle = nullptr;
  std::string note;
};

const Library &library() {
  static const Library lib = [] {
    Library l;
    const char *env = std::getenv("FSDP_CUDNN_LIBRARY");
    std::string name = env && *env ? env : "libcudnn.so.9";
    dlerror();
    l.handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) {
      const char *why = dlerror();
      l.note = "cuDNN not loaded (" + name + ": " + (why ? why : "not found") +
               "; FSDP_CUDNN_LIBRARY names the library, e.g. the "
               "nvidia-cudnn-cu13 wheel's nvidia/cudnn/lib/libcudnn.so.9): "
               "bf16/f16 attention unavailable";
      return l;
    }
    fe::cudnn_dlhandle = l.handle;
    size_t v = 0;
    try {
      v = fe::detail::get_backend_version();
    } catch (const std::exception &e) {
      l.note = "cuDNN not usable (" + name + ": " + e.what() + ")";
      l.handle = nullptr;
      return l;
    }
    if (v < 90000) {
      l.note = "cuDNN " + std::to_string(v) + " from " + name +
               " is older than 9.0: bf16/f16 attention unavailable";
      l.handle = nullptr;
      return l;
    }
    l.note = "cuDNN " + std::to_string(v / 10000) + "." +
             std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
             " (" + name + ", cudnn-frontend " +
             std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
             std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
             std::to_string(CUDNN_FRONTEND_PATCH_VERSION) +
             "): bf16/f16 attention through its fused SDPA";
    return l;
  }();
  return lib;
}

/// A plan cache key: direction, dtype and shape.
using Key = std::tuple<bool, int, int64_t, int64_t, int64_t, int64_t, int64_t>;

Key keyOf(bool backward, const SdpaShape &s) {
  return {backward, static_cast<int>(s.dtype), s.batch, s.seq, s.hq, s.hkv,
          s.d};
}

std::string shapeText(bool backward, const SdpaShape &s) {
  return std::string(backward ? "backward" : "forward") + " " +
         (s.dtype == FSDP_BF16 ? "bf16" : "f16") + " [batch " +
         std::to_string(s.batch) + ", seq " + std::to_string(s.seq) +
         ", heads " + std::to_string(s.hq) + "/" + std::to_string(s.hkv) +
         ", head_dim " + std::to_string(s.d) + "]";
}

/// A built graph (null where cuDNN supports no engine) and its workspace.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
};

} // namespace

struct CudnnAttention {
  cudnnHandle_t handle = nullptr;
  std::map<Key, Plan> plans;
};

namespace {

/// Attributes of a [B, H, S, D] tensor over [B, S, H·D] memory.
fe::graph::Tensor_attributes bshd(const char *name, int64_t uid,
                                  const SdpaShape &s, int64_t heads) {
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(uid)
      .set_dim({s.batch, heads, s.seq, s.d})
      .set_stride({s.seq * heads * s.d, s.d, heads * s.d, 1});
}

fe::graph::Tensor_attributes statsAttrs(const SdpaShape &s) {
  return fe::graph::Tensor_attributes()
      .set_name("Stats")
      .set_uid(kStats)
      .set_dim({s.batch, s.hq, s.seq, 1})
      .set_stride({s.hq * s.seq, s.seq, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

/// validate, build, pick the heuristics' engines and build their plans: an
/// empty string, or the first step's complaint.
std::string finish(fe::graph::Graph &g, cudnnHandle_t h) {
  auto step = [](fe::error_t e, const char *what) {
    return e.is_good() ? std::string()
                       : std::string(what) + ": " + e.get_message();
  };
  std::string why = step(g.validate(), "validate");
  if (why.empty())
    why = step(g.build_operation_graph(h), "build_operation_graph");
  if (why.empty())
    why = step(g.create_execution_plans({fe::HeurMode_t::A}),
               "create_execution_plans");
  if (why.empty())
    why = step(g.check_support(h), "check_support");
  if (why.empty())
    why = step(g.build_plans(h), "build_plans");
  return why;
}

std::shared_ptr<fe::graph::Graph> newGraph(const SdpaShape &s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(s.dtype == FSDP_BF16 ? fe::DataType_t::BFLOAT16
                                           : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return g;
}

float scaleOf(const SdpaShape &s) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.d)));
}

/// The forward graph: O, Stats = SDPA(Q, K, V), causal (top-left diagonal,
/// key s <= query t), scale 1/√d.
std::string buildForward(cudnnHandle_t h, const SdpaShape &s, Plan &plan) {
  auto g = newGraph(s);
  auto q = g->tensor(bshd("Q", kQ, s, s.hq));
  auto k = g->tensor(bshd("K", kK, s, s.hkv));
  auto v = g->tensor(bshd("V", kV, s, s.hkv));
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("sdpa")
                  .set_generate_stats(true)
                  .set_causal_mask(true)
                  .set_attn_scale(scaleOf(s));
  auto [o, stats] = g->sdpa(q, k, v, opts);
  o->set_output(true)
      .set_uid(kO)
      .set_dim({s.batch, s.hq, s.seq, s.d})
      .set_stride({s.seq * s.hq * s.d, s.d, s.hq * s.d, 1});
  stats->set_output(true)
      .set_uid(kStats)
      .set_dim({s.batch, s.hq, s.seq, 1})
      .set_stride({s.hq * s.seq, s.seq, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
  std::string why = finish(*g, h);
  if (why.empty())
    plan.graph = g;
  return why;
}

/// The backward graph: dQ, dK, dV = SDPA backward(Q, K, V, O, dO, Stats),
/// dK and dV summed over each kv head's query group by cuDNN. Deterministic
/// where an engine supports it (the runtime's runs repeat bit for bit).
std::string buildBackward(cudnnHandle_t h, const SdpaShape &s, Plan &plan,
                          bool deterministic) {
  auto g = newGraph(s);
  auto q = g->tensor(bshd("Q", kQ, s, s.hq));
  auto k = g->tensor(bshd("K", kK, s, s.hkv));
  auto v = g->tensor(bshd("V", kV, s, s.hkv));
  auto o = g->tensor(bshd("O", kO, s, s.hq));
  auto dO = g->tensor(bshd("dO", kDO, s, s.hq));
  auto stats = g->tensor(statsAttrs(s));
  auto opts = fe::graph::SDPA_backward_attributes()
                  .set_name("sdpa_backward")
                  .set_causal_mask(true)
                  .set_attn_scale(scaleOf(s))
                  .set_deterministic_algorithm(deterministic);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, opts);
  auto out = [&](std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid,
                 int64_t heads) {
    t->set_output(true)
        .set_uid(uid)
        .set_dim({s.batch, heads, s.seq, s.d})
        .set_stride({s.seq * heads * s.d, s.d, heads * s.d, 1});
  };
  out(dq, kDQ, s.hq);
  out(dk, kDK, s.hkv);
  out(dv, kDV, s.hkv);
  std::string why = finish(*g, h);
  if (why.empty())
    plan.graph = g;
  return why;
}

/// The cached plan of a shape, built on first use; its graph is null where
/// cuDNN has no engine for the shape (said once on stderr).
const Plan &planFor(CudaDevice *dev, bool backward, const SdpaShape &s) {
  auto &plans = dev->cudnn->plans;
  Key key = keyOf(backward, s);
  auto it = plans.find(key);
  if (it != plans.end())
    return it->second;
  Plan plan;
  cudnnHandle_t h = dev->cudnn->handle;
  std::string why, mode;
  try {
    if (!backward) {
      why = buildForward(h, s, plan);
    } else {
      why = buildBackward(h, s, plan, true);
      mode = ", deterministic";
      if (!why.empty()) {
        std::string first = why;
        why = buildBackward(h, s, plan, false);
        mode = ", non-deterministic (deterministic: " + first + ")";
      }
    }
  } catch (const std::exception &e) {
    why = e.what();
  }
  if (plan.graph) {
    auto st = plan.graph->get_workspace_size(plan.workspace);
    if (!st.is_good())
      fail(FSDP_ERR_DEVICE, "cuDNN SDPA " + shapeText(backward, s) +
                                ": get_workspace_size: " + st.get_message());
    std::fprintf(stderr,
                 "fsdp cuda:%d: cuDNN SDPA %s: plan built%s, workspace %lld "
                 "bytes\n",
                 dev->ordinal, shapeText(backward, s).c_str(), mode.c_str(),
                 static_cast<long long>(plan.workspace));
  } else {
    std::fprintf(stderr,
                 "fsdp cuda:%d: cuDNN SDPA %s unsupported (%s): attention "
                 "runs the f32 path for this shape\n",
                 dev->ordinal, shapeText(backward, s).c_str(), why.c_str());
  }
  return plans.emplace(key, std::move(plan)).first->second;
}

/// Runs a plan on `st` with a workspace from the device's pool.
void execute(CudaDevice *dev, cudaStream_t st, bool backward,
             const SdpaShape &s, const Plan &plan,
             std::unordered_map<int64_t, void *> &pack) {
  cudnnHandle_t h = dev->cudnn->handle;
  cudnnStatus_t ss = fe::detail::set_stream(h, st);
  if (ss != CUDNN_STATUS_SUCCESS)
    fail(FSDP_ERR_DEVICE,
         std::string("cudnnSetStream: ") + fe::detail::get_error_string(ss));
  void *ws = plan.workspace > 0
                 ? dev->scratch(st, static_cast<size_t>(plan.workspace))
                 : nullptr;
  std::string why;
  try {
    fe::error_t e = plan.graph->execute(h, pack, ws);
    if (!e.is_good())
      why = e.get_message();
  } catch (const std::exception &x) { // the frontend's dynamic loading
    why = x.what();
  }
  if (ws)
    dev->release(st, ws);
  if (!why.empty())
    fail(FSDP_ERR_DEVICE, "cuDNN SDPA " + shapeText(backward, s) + ": " + why);
}

} // namespace

void cudnnOpen(CudaDevice *dev) {
  const Library &lib = library();
  dev->cudnnNote = lib.note;
  if (!lib.handle)
    return;
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  try {
    st = fe::detail::create_handle(&h);
  } catch (const std::exception &e) {
    dev->cudnnNote = std::string("cuDNN handle not created: ") + e.what();
    return;
  }
  if (st != CUDNN_STATUS_SUCCESS) {
    dev->cudnnNote = std::string("cuDNN handle not created: ") +
                     fe::detail::get_error_string(st);
    return;
  }
  dev->cudnn = new CudnnAttention;
  dev->cudnn->handle = h;
}

void cudnnClose(CudaDevice *dev) {
  if (!dev->cudnn)
    return;
  dev->cudnn->plans.clear();
  fe::detail::destroy_handle(dev->cudnn->handle);
  delete dev->cudnn;
  dev->cudnn = nullptr;
}

bool cudnnSdpaForward(CudaDevice *dev, cudaStream_t st, const SdpaShape &sh,
                      const void *q, const void *k, const void *v, void *o,
                      void *lse) {
  const Plan &plan = planFor(dev, false, sh);
  if (!plan.graph)
    return false;
  std::unordered_map<int64_t, void *> pack{{kQ, const_cast<void *>(q)},
                                           {kK, const_cast<void *>(k)},
                                           {kV, const_cast<void *>(v)},
                                           {kO, o},
                                           {kStats, lse}};
  execute(dev, st, false, sh, plan, pack);
  return true;
}

bool cudnnSdpaBackward(CudaDevice *dev, cudaStream_t st, const SdpaShape &sh,
                       const void *q, const void *k, const void *v,
                       const void *o, const void *lse, const void *dout,
                       void *dq, void *dk, void *dv) {
  const Plan &plan = planFor(dev, true, sh);
  if (!plan.graph)
    return false;
  std::unordered_map<int64_t, void *> pack{{kQ, const_cast<void *>(q)},
                                           {kK, const_cast<void *>(k)},
                                           {kV, const_cast<void *>(v)},
                                           {kO, const_cast<void *>(o)},
                                           {kStats, const_cast<void *>(lse)},
                                           {kDO, const_cast<void *>(dout)},
                                           {kDQ, dq},
                                           {kDK, dk},
                                           {kDV, dv}};
  execute(dev, st, true, sh, plan, pack);
  return true;
}

#else // !FSDP_HAVE_CUDNN_FRONTEND

struct CudnnAttention {};

void cudnnOpen(CudaDevice *dev) {
  dev->cudnnNote = "cuDNN attention not built (cudnn-frontend's headers were "
                   "not found at configure time: tools/scripts/setup.sh "
                   "installs them): bf16/f16 attention unavailable";
}
void cudnnClose(CudaDevice *) {}
bool cudnnSdpaForward(CudaDevice *, cudaStream_t, const SdpaShape &,
                      const void *, const void *, const void *, void *,
                      void *) {
  return false;
}
bool cudnnSdpaBackward(CudaDevice *, cudaStream_t, const SdpaShape &,
                       const void *, const void *, const void *, const void *,
                       const void *, const void *, void *, void *, void *) {
  return false;
}

#endif

} // namespace fsdp::hal::cuda
