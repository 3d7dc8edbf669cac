//===- Runtime.cpp - C API of the fsdp-opt runtime ------------------------===//
//
// Implements runtime.h and kernels.h: MPI lifetime, the progress mode, the
// per-op profile, and the C boundary of the device interface (Driver.h):
// every call becomes a virtual call on the driver's object, and a
// DeviceError (or another exception) becomes a status code and the
// thread-local message of fsdp_last_error. Devices come from the cpu driver
// (built in) or the cuda driver library (libfsdp_cuda.so, loaded with
// dlopen on the first "cuda" device, so that CPU runs never load CUDA).
//
//===----------------------------------------------------------------------===//
#include "Driver.h"
#include "cpu/CpuDriver.h"
#include "fsdp/Sharding.h"
#include "mpi/Mpi.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <vector>

using fsdp::hal::DeviceError;

namespace {

thread_local std::string lastError;
bool weInitialisedMpi = false;
int localRankValue = -1; // set by fsdp_init
std::atomic<int> progressMode{FSDP_PROGRESS_TEST};

int setError(int code, const std::string &msg) {
  lastError = msg;
  return code;
}

/// Runs fn and converts what it throws into a status (never across C).
template <typename Fn> int guard(Fn &&fn) {
  try {
    fn();
    return FSDP_OK;
  } catch (const DeviceError &e) {
    return setError(e.code, e.what());
  } catch (const std::bad_alloc &) {
    return setError(FSDP_ERR_NOMEM, "out of memory");
  } catch (const std::invalid_argument &e) {
    return setError(FSDP_ERR_INVALID, e.what());
  } catch (const std::exception &e) { // a kernel's data error
    return setError(FSDP_ERR_DATA, e.what());
  }
}

/// A kernel call: guarded, its host time added to the device's compute
/// seconds.
template <typename Fn> int kernel(fsdp_stream s, const char *name, Fn &&fn) {
  if (!s || !s->device)
    return setError(FSDP_ERR_INVALID, std::string(name) + ": null stream");
  double t0 = fsdp_now();
  int rc = guard(fn);
  s->device->computeNs += static_cast<int64_t>((fsdp_now() - t0) * 1e9);
  return rc;
}

/// The directory of the running executable ("" if unknown).
std::string exeDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return "";
  std::string p(buf, static_cast<size_t>(n));
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "" : p.substr(0, slash);
}

/// The cuda driver's entry point, loaded once: $FSDP_CUDA_DRIVER alone where
/// it is set (an explicit choice that does not load is an error, never a
/// fall-back to another build's driver), else libfsdp_cuda.so in ../lib or
/// beside the executable, else the loader's search path. Throws
/// FSDP_ERR_DEVICE naming what was tried.
fsdp::hal::CreateDeviceFn cudaDriver(const std::string &device) {
  static std::mutex m;
  static fsdp::hal::CreateDeviceFn fn = nullptr;
  std::lock_guard<std::mutex> lk(m);
  if (fn)
    return fn;
  std::string lib = fsdp::hal::kCudaDriverLibrary, dir = exeDir(), tried;
  std::vector<std::string> paths;
  if (const char *env = std::getenv("FSDP_CUDA_DRIVER")) {
    if (!*env)
      fsdp::hal::fail(FSDP_ERR_DEVICE, "device '" + device +
                                           "': FSDP_CUDA_DRIVER is set but "
                                           "empty (unset it, or name the "
                                           "driver library)");
    paths.push_back(env);
  } else {
    if (!dir.empty()) {
      paths.push_back(dir + "/../lib/" + lib);
      paths.push_back(dir + "/" + lib);
    }
    paths.push_back(lib);
  }
  std::string loadError;
  for (const std::string &p : paths) {
    bool isPath = p.find('/') != std::string::npos;
    if (isPath && access(p.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + p;
      if (loadError.empty() && paths.size() == 1)
        loadError = "no such file";
      continue;
    }
    void *h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      // A library that exists but does not load (a missing libcudart) is
      // the error to report; a bare name that is not found is not.
      if (isPath || loadError.empty())
        loadError = e ? e : "dlopen failed";
      tried += (tried.empty() ? "" : ", ") + p;
      continue;
    }
    fn = reinterpret_cast<fsdp::hal::CreateDeviceFn>(
        dlsym(h, fsdp::hal::kCudaDriverEntry));
    if (!fn)
      fsdp::hal::fail(FSDP_ERR_DEVICE,
                      p + " has no entry point " + fsdp::hal::kCudaDriverEntry);
    return fn;
  }
  fsdp::hal::fail(FSDP_ERR_DEVICE,
                  "device '" + device + "': the cuda driver (" + lib +
                      ") could not be loaded (tried " + tried + ": " +
                      loadError +
                      "); build with -DFSDP_ENABLE_CUDA=ON on a machine with "
                      "the CUDA toolkit, or set FSDP_CUDA_DRIVER");
}

/// "cuda" -> -1, "cuda:N" -> N; false for anything else.
bool parseCuda(const std::string &name, int &ordinal) {
  if (name == "cuda") {
    ordinal = -1;
    return true;
  }
  if (name.rfind("cuda:", 0) != 0 || name.size() == 5)
    return false;
  char *end = nullptr;
  long v = std::strtol(name.c_str() + 5, &end, 10);
  if (*end || v < 0 || v > 1 << 20)
    return false;
  ordinal = static_cast<int>(v);
  return true;
}

} // namespace

extern "C" {

//===--- Process ----------------------------------------------------------===//

int fsdp_init(int *argc, char ***argv) {
  int init = 0;
  MPI_Initialized(&init);
  bool wantThread = progressMode.load() == FSDP_PROGRESS_THREAD;
  if (!init) {
    int provided = MPI_THREAD_SINGLE;
    int err = wantThread
                  ? MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided)
                  : MPI_Init(argc, argv);
    if (err != MPI_SUCCESS)
      return setError(FSDP_ERR_MPI,
                      "MPI_Init failed: " + fsdp::mpi::message(err));
    weInitialisedMpi = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                          MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_rank(node, &localRankValue);
    MPI_Comm_free(&node);
  }
  if (wantThread) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      return setError(FSDP_ERR_MPI, "progress thread: the MPI library does "
                                    "not provide MPI_THREAD_MULTIPLE");
    fsdp::hal::cpu::startProgressThread();
  }
  return FSDP_OK;
}

int fsdp_finalize(void) {
  fsdp::hal::cpu::stopProgressThread();
  if (fsdp::mpi::active())
    fsdp::mpi::freeOps();
  if (weInitialisedMpi && fsdp::mpi::active()) {
    int err = MPI_Finalize();
    weInitialisedMpi = false;
    if (err != MPI_SUCCESS)
      return setError(FSDP_ERR_MPI,
                      "MPI_Finalize failed: " + fsdp::mpi::message(err));
  }
  return FSDP_OK;
}

int fsdp_rank(void) {
  if (!fsdp::mpi::active())
    return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int fsdp_world_size(void) {
  if (!fsdp::mpi::active())
    return 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int fsdp_local_rank(void) {
  if (localRankValue >= 0)
    return localRankValue;
  // MPI initialised by the host program: the launchers' variables.
  for (const char *v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                        "MPI_LOCALRANKID", "LOCAL_RANK"})
    if (const char *s = std::getenv(v))
      return std::atoi(s);
  return 0;
}

const char *fsdp_last_error(void) { return lastError.c_str(); }

size_t fsdp_dtype_size(fsdp_dtype dtype) { return fsdp::hal::dtypeSize(dtype); }

double fsdp_now(void) {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void fsdp_abort(const char *message, int code) {
  std::fprintf(stderr, "[rank %d] %s\n", fsdp_rank(), message ? message : "");
  std::fflush(stderr);
  std::fflush(stdout);
  if (code == 0)
    code = 1;
  if (fsdp::mpi::active())
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

int fsdp_set_progress(fsdp_progress mode) {
  if (mode != FSDP_PROGRESS_NONE && mode != FSDP_PROGRESS_TEST &&
      mode != FSDP_PROGRESS_THREAD)
    return setError(FSDP_ERR_INVALID,
                    "fsdp_set_progress: invalid mode " +
                        std::to_string(static_cast<int>(mode)));
  if (mode == FSDP_PROGRESS_THREAD && fsdp::mpi::active()) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      return setError(FSDP_ERR_MPI,
                      "fsdp_set_progress: a progress thread needs "
                      "MPI_THREAD_MULTIPLE (select it before fsdp_init)");
  }
  if (mode != FSDP_PROGRESS_THREAD)
    fsdp::hal::cpu::stopProgressThread();
  progressMode = mode;
  if (mode == FSDP_PROGRESS_THREAD)
    fsdp::hal::cpu::startProgressThread(); // no-op until MPI is initialised
  return FSDP_OK;
}

fsdp_progress fsdp_get_progress(void) {
  return static_cast<fsdp_progress>(progressMode.load());
}

const char *fsdp_progress_name(fsdp_progress mode) {
  switch (mode) {
  case FSDP_PROGRESS_NONE:
    return "none";
  case FSDP_PROGRESS_TEST:
    return "test";
  case FSDP_PROGRESS_THREAD:
    return "thread";
  }
  return "invalid";
}

int fsdp_parse_progress(const char *name) {
  if (!name)
    return -1;
  for (fsdp_progress m :
       {FSDP_PROGRESS_NONE, FSDP_PROGRESS_TEST, FSDP_PROGRESS_THREAD})
    if (std::strcmp(name, fsdp_progress_name(m)) == 0)
      return m;
  return -1;
}

int fsdp_set_progress_interval(double min_seconds, double max_seconds) {
  if (!(min_seconds > 0) || !(max_seconds >= min_seconds) || max_seconds > 10)
    return setError(FSDP_ERR_INVALID, "fsdp_set_progress_interval: need 0 < "
                                      "min <= max <= 10 seconds");
  int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(min_seconds * 1e9));
  fsdp::hal::cpu::setProgressInterval(
      lo, std::max<int64_t>(lo, static_cast<int64_t>(max_seconds * 1e9)));
  return FSDP_OK;
}

//===--- Devices, memory, streams -----------------------------------------===//

int fsdp_device_create(const char *name, const fsdp_device_options *options,
                       fsdp_device *out) {
  if (!name || !out)
    return setError(FSDP_ERR_INVALID, "fsdp_device_create: invalid argument");
  fsdp_device_options o{FSDP_COLLECTIVES_NATIVE};
  if (options)
    o = *options;
  std::string n = name;
  int ordinal = 0;
  return guard([&] {
    if (n == "cpu" || n == "cpu:0") {
      *out = fsdp::hal::createCpuDevice(o).release();
    } else if (parseCuda(n, ordinal)) {
      char *error = nullptr;
      fsdp_device d = cudaDriver(n)(ordinal, fsdp_local_rank(), &o, &error);
      if (!d) {
        std::string msg = error ? error : "unknown error";
        std::free(error);
        fsdp::hal::fail(FSDP_ERR_DEVICE, "device '" + n + "': " + msg);
      }
      *out = d;
    } else {
      fsdp::hal::fail(FSDP_ERR_DEVICE, "unknown device '" + n +
                                           "' (expected cpu, cuda or cuda:N)");
    }
  });
}

void fsdp_device_abort(fsdp_device device, const char *reason) {
  if (!device)
    return;
  try {
    device->abortCollectives(reason ? reason : "aborted");
  } catch (...) { // a watchdog's last act: nothing to report it to
  }
}

void fsdp_device_destroy(fsdp_device device) {
  if (!device)
    return;
  try {
    device->synchronize(&device->compute);
    device->synchronize(&device->comm);
  } catch (...) {
  }
  delete device;
}

const char *fsdp_device_name(fsdp_device device) {
  return device ? device->name.c_str() : "";
}

const char *fsdp_device_collectives(fsdp_device device) {
  return device ? device->collectives.c_str() : "";
}

int fsdp_device_blas(fsdp_device device, fsdp_blas_info *out) {
  if (!device || !out)
    return setError(FSDP_ERR_INVALID, "fsdp_device_blas: invalid argument");
  *out = device->blasInfo;
  for (const char **s :
       {&out->library, &out->version, &out->core, &out->core_at_load,
        &out->chosen_by, &out->cpu_isa, &out->warning, &out->note})
    if (!*s)
      *s = "";
  return FSDP_OK;
}

int fsdp_device_alloc(fsdp_device device, size_t bytes, void **out) {
  if (!device || !out)
    return setError(FSDP_ERR_INVALID, "fsdp_device_alloc: invalid argument");
  return guard([&] {
    *out = device->allocate(bytes);
    ++device->liveAllocations;
  });
}

int fsdp_device_free(fsdp_device device, void *ptr) {
  if (!device)
    return setError(FSDP_ERR_INVALID, "fsdp_device_free: null device");
  if (!ptr)
    return FSDP_OK;
  return guard([&] {
    device->deallocate(ptr);
    --device->liveAllocations;
  });
}

fsdp_stream fsdp_device_stream(fsdp_device device, fsdp_stream_kind kind) {
  if (!device)
    return nullptr;
  return kind == FSDP_STREAM_COMM ? &device->comm : &device->compute;
}

fsdp_device fsdp_stream_device(fsdp_stream stream) {
  return stream ? stream->device : nullptr;
}

int fsdp_memcpy(fsdp_stream s, void *dst, const void *src, size_t bytes) {
  if (!s || ((!dst || !src) && bytes))
    return setError(FSDP_ERR_INVALID, "fsdp_memcpy: invalid argument");
  return guard([&] { s->device->copy(s, dst, src, bytes); });
}

int fsdp_memcpy_2d(fsdp_stream s, void *dst, size_t dpitch, const void *src,
                   size_t spitch, size_t width, size_t height) {
  if (!s || ((!dst || !src) && width && height) ||
      (height > 1 && (dpitch < width || spitch < width)))
    return setError(FSDP_ERR_INVALID, "fsdp_memcpy_2d: invalid argument");
  if (!width || !height)
    return FSDP_OK;
  return guard([&] {
    fsdp::hal::stridedCopy(s->device, s, dst, dpitch, src, spitch, width,
                           height);
  });
}

int fsdp_memset_zero(fsdp_stream s, void *dst, size_t bytes) {
  if (!s || (!dst && bytes))
    return setError(FSDP_ERR_INVALID, "fsdp_memset_zero: invalid argument");
  return guard([&] { s->device->zero(s, dst, bytes); });
}

int fsdp_stream_synchronize(fsdp_stream s) {
  if (!s)
    return setError(FSDP_ERR_INVALID, "fsdp_stream_synchronize: null stream");
  return guard([&] { s->device->synchronize(s); });
}

//===--- Events -----------------------------------------------------------===//

int fsdp_event_query(fsdp_event event, int *done) {
  if (!event || !done)
    return setError(FSDP_ERR_INVALID, "fsdp_event_query: invalid argument");
  return guard([&] { *done = event->query() ? 1 : 0; });
}

int fsdp_stream_wait_event(fsdp_stream s, fsdp_event event) {
  if (!s || !event || event->device != s->device)
    return setError(FSDP_ERR_INVALID,
                    "fsdp_stream_wait_event: invalid argument (an event waits "
                    "only on a stream of its own device)");
  return guard([&] { s->device->waitEvent(s, event); });
}

void fsdp_event_release(fsdp_event event) { delete event; }

int fsdp_wait(fsdp_event event) {
  if (!event)
    return setError(FSDP_ERR_INVALID, "fsdp_wait: null event");
  int rc =
      guard([&] { event->device->waitEvent(&event->device->compute, event); });
  delete event;
  return rc;
}

//===--- Channels and collectives -----------------------------------------===//

int fsdp_channel_create(fsdp_device device, fsdp_channel *out) {
  if (!device || !out)
    return setError(FSDP_ERR_INVALID, "fsdp_channel_create: invalid argument");
  return guard([&] { *out = device->createWorldChannel().release(); });
}

int fsdp_channel_split(fsdp_channel parent, int color, int key,
                       fsdp_channel *out) {
  if (!parent || !out || color < 0)
    return setError(FSDP_ERR_INVALID, "fsdp_channel_split: invalid argument");
  return guard([&] { *out = parent->split(color, key).release(); });
}

int fsdp_channel_rank(fsdp_channel c) { return c ? c->rank : -1; }
int fsdp_channel_size(fsdp_channel c) { return c ? c->size : -1; }
void fsdp_channel_destroy(fsdp_channel c) { delete c; }

int fsdp_all_gather_start(fsdp_channel c, const void *shard, void *full,
                          int64_t shard_count, fsdp_dtype dtype,
                          fsdp_event *done) {
  if (!c || !done)
    return setError(FSDP_ERR_INVALID,
                    "fsdp_all_gather_start: invalid argument");
  return guard([&] {
    *done = c->allGather(shard, full, shard_count, dtype);
    c->bytesSent += fsdp::ringCollectiveBytesPerRank(
        shard_count * int64_t(fsdp_dtype_size(dtype)) * c->size, c->size);
  });
}

int fsdp_reduce_scatter_start(fsdp_channel c, const void *full, void *shard,
                              int64_t shard_count, fsdp_dtype dtype,
                              fsdp_reduce_op op, fsdp_event *done) {
  if (!c || !done)
    return setError(FSDP_ERR_INVALID,
                    "fsdp_reduce_scatter_start: invalid argument");
  return guard([&] {
    *done = c->reduceScatter(full, shard, shard_count, dtype, op);
    c->bytesSent += fsdp::ringCollectiveBytesPerRank(
        shard_count * int64_t(fsdp_dtype_size(dtype)) * c->size, c->size);
  });
}

int fsdp_send_start(fsdp_channel c, const void *buf, int64_t count,
                    fsdp_dtype dtype, int32_t peer, int32_t tag,
                    fsdp_event *done) {
  if (!c || !done || count < 0 || peer < 0 || peer >= c->size || tag < 0)
    return setError(FSDP_ERR_INVALID, "fsdp_send_start: invalid argument");
  return guard([&] {
    *done = c->send(buf, count, dtype, peer, tag);
    c->bytesSent += count * int64_t(fsdp_dtype_size(dtype));
  });
}

int fsdp_recv_start(fsdp_channel c, void *buf, int64_t count, fsdp_dtype dtype,
                    int32_t peer, int32_t tag, fsdp_event *done) {
  if (!c || !done || count < 0 || peer < 0 || peer >= c->size || tag < 0)
    return setError(FSDP_ERR_INVALID, "fsdp_recv_start: invalid argument");
  return guard([&] { *done = c->recv(buf, count, dtype, peer, tag); });
}

int fsdp_all_reduce_start(fsdp_channel c, const void *in, void *out,
                          int64_t count, fsdp_dtype dtype, fsdp_reduce_op op,
                          fsdp_event *done) {
  if (!c || !done)
    return setError(FSDP_ERR_INVALID,
                    "fsdp_all_reduce_start: invalid argument");
  return guard([&] {
    *done = c->allReduce(in, out, count, dtype, op);
    c->bytesSent += fsdp::ringAllReduceBytesPerRank(
        count * int64_t(fsdp_dtype_size(dtype)), c->size);
  });
}

//===--- Statistics -------------------------------------------------------===//

int fsdp_device_get_stats(fsdp_device d, fsdp_device_stats *o) {
  if (!d || !o)
    return setError(FSDP_ERR_INVALID,
                    "fsdp_device_get_stats: invalid argument");
  return guard([&] {
    *o = fsdp_device_stats{};
    for (int k = 0; k < 3; ++k)
      o->comm_bytes[k] = d->commBytes[k].load();
    o->comm_wait_seconds = d->commWaitNs.load() * 1e-9;
    o->compute_seconds = d->computeNs.load() * 1e-9;
    o->progress_tests = d->progressTests();
    o->live_allocations = d->liveAllocations.load();
    d->memoryStats(*o);
  });
}

int fsdp_device_reset_stats(fsdp_device d) {
  if (!d)
    return setError(FSDP_ERR_INVALID, "fsdp_device_reset_stats: null device");
  return guard([&] {
    for (auto &c : d->commBytes)
      c = 0;
    d->commWaitNs = 0;
    d->computeNs = 0;
    d->resetMemoryPeak();
  });
}

//===--- Kernels (fsdp/kernels.h) -----------------------------------------===//

#define FSDP_DEFINE_KERNEL(name, params, args)                                 \
  int fsdp_##name(fsdp_stream s, FSDP_UNPAREN params) {                        \
    return kernel(s, "fsdp_" #name,                                            \
                  [&] { s->device->name(s, FSDP_UNPAREN args); });             \
  }
FSDP_DRIVER_KERNELS(FSDP_DEFINE_KERNEL)
#undef FSDP_DEFINE_KERNEL

int fsdp_optimizer_update(fsdp_stream s, fsdp_dtype dtype, int adamw,
                          const void *p, const void *g, const void *m,
                          const void *v, const void *step,
                          fsdp_dtype step_dtype, void *p_out, void *m_out,
                          void *v_out, int64_t n, const double *lr_device,
                          double lr, double beta1, double beta2, double eps,
                          double weight_decay, const int64_t *no_decay,
                          int64_t no_decay_len, int64_t flat_offset,
                          const double *skip_if_nonfinite) {
  const int64_t es = static_cast<int64_t>(fsdp_dtype_size(dtype));
  auto at = [&](const void *base, int64_t off) {
    return static_cast<char *>(const_cast<void *>(base)) + off * es;
  };
  auto update = [&](int64_t off, int64_t cnt, double wd) -> int {
    if (cnt <= 0)
      return FSDP_OK;
    if (!adamw)
      return lr_device ? fsdp_sgd_update_lr(s, dtype, at(p, off), at(g, off),
                                            at(p_out, off), cnt, lr_device, wd,
                                            skip_if_nonfinite)
                       : fsdp_sgd_update(s, dtype, at(p, off), at(g, off),
                                         at(p_out, off), cnt, lr, wd,
                                         skip_if_nonfinite);
    if (lr_device)
      return fsdp_adamw_update_lr(
          s, dtype, at(p, off), at(g, off), at(m, off), at(v, off), step,
          step_dtype, at(p_out, off), at(m_out, off), at(v_out, off), cnt,
          lr_device, beta1, beta2, eps, wd, skip_if_nonfinite);
    return fsdp_adamw_update(s, dtype, at(p, off), at(g, off), at(m, off),
                             at(v, off), step, step_dtype, at(p_out, off),
                             at(m_out, off), at(v_out, off), cnt, lr, beta1,
                             beta2, eps, wd, skip_if_nonfinite);
  };
  // Flat range [b, e) in this update's elements, clipped to [0, n).
  auto local = [&](int64_t flat) {
    return std::min(std::max<int64_t>(flat - flat_offset, 0), n);
  };
  int64_t done = 0;
  for (int64_t k = 0; k + 1 < no_decay_len; k += 2) {
    int64_t b = local(no_decay[k]), e = local(no_decay[k + 1]);
    if (int rc = update(done, b - done, weight_decay))
      return rc;
    if (int rc = update(b, e - b, 0.0))
      return rc;
    done = std::max(done, e);
  }
  return update(done, n - done, weight_decay);
}

//===--- Profile ----------------------------------------------------------===//

namespace {
std::atomic<int> profileOn{0};
std::mutex profileMutex;
std::map<std::string, std::pair<int64_t, double>> profile;

const std::pair<const std::string, std::pair<int64_t, double>> *
profileEntry(int i) {
  std::lock_guard<std::mutex> lk(profileMutex);
  if (i < 0 || i >= static_cast<int>(profile.size()))
    return nullptr;
  return &*std::next(profile.begin(), i);
}
} // namespace

void fsdp_profile_enable(int on) { profileOn = on ? 1 : 0; }
int fsdp_profile_enabled(void) { return profileOn.load(); }
void fsdp_profile_add(const char *op, double seconds) {
  std::lock_guard<std::mutex> lk(profileMutex);
  auto &e = profile[op ? op : ""];
  ++e.first;
  e.second += seconds;
}
void fsdp_profile_reset(void) {
  std::lock_guard<std::mutex> lk(profileMutex);
  profile.clear();
}
int fsdp_profile_count(void) {
  std::lock_guard<std::mutex> lk(profileMutex);
  return static_cast<int>(profile.size());
}
const char *fsdp_profile_op(int i) {
  auto *e = profileEntry(i);
  return e ? e->first.c_str() : nullptr;
}
int64_t fsdp_profile_calls(int i) {
  auto *e = profileEntry(i);
  return e ? e->second.first : 0;
}
double fsdp_profile_seconds(int i) {
  auto *e = profileEntry(i);
  return e ? e->second.second : 0;
}

} // extern "C"
