//===- Runtime.cpp - C API of the fsdp-opt runtime ------------------------===//
//
// Implements runtime.h: MPI lifetime, byte-accounted allocation (and planned
// arenas), the grid's
// process groups (MPI_Comm_split), asynchronous all-gather / reduce-scatter /
// all-reduce with ring-volume accounting, timing counters and the all-ranks
// abort. Without an initialised MPI the process is rank 0 of 1. bf16/f16
// buffers travel as MPI_UINT16_T; their reductions use commutative MPI
// user-defined operations that add in f32 and round (fsdp/Half.h).
//
// Progress (fsdp_progress): in FSDP_PROGRESS_THREAD mode a std::thread
// loops over the registry of in-flight requests calling MPI_Test, sleeping
// between rounds with an exponential back-off (so that on an oversubscribed
// machine it gives the core back to the kernels). Ownership: one mutex
// guards the registry and every MPI call on an in-flight request (start,
// MPI_Test by either thread, MPI_Wait); fsdp_wait removes its request from
// the registry under the mutex before completing it, so the thread never
// touches a request after (or while) the caller completes it. MPI is asked
// for MPI_THREAD_MULTIPLE all the same, so that a host program may call MPI
// from its own thread while the progress thread runs.
//
//===----------------------------------------------------------------------===//
#include "fsdp/runtime.h"

#include "fsdp/Half.h"
#include "fsdp/Sharding.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

thread_local std::string lastError;
bool weInitialisedMpi = false;

std::atomic<int64_t> currentBytes{0};
std::atomic<int64_t> peakBytes{0};
std::atomic<int64_t> arenaBytes{0}; // held by fsdp_arena_alloc
std::atomic<int64_t> commBytes{0};
std::atomic<int64_t> commBytesByKind[3] = {{0}, {0}, {0}};

// The grid: gridShard = S (0 = not set: S = N, shard = world, replicate =
// self); the split communicators, MPI_COMM_NULL until fsdp_set_grid.
int gridShard = 0;
MPI_Comm shardComm = MPI_COMM_NULL;
MPI_Comm replComm = MPI_COMM_NULL;
// Seconds are accumulated as nanoseconds to stay atomic.
std::atomic<int64_t> computeNs{0};
std::atomic<int64_t> waitNs{0};

constexpr size_t kAlign = 64;

int fail(int code, const std::string &msg) {
  lastError = msg;
  return code;
}

bool mpiActive() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

std::string mpiMessage(int err) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(err, buf, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(err);
  return std::string(buf, len);
}

MPI_Datatype mpiType(fsdp_dtype t) {
  switch (t) {
  case FSDP_F32: return MPI_FLOAT;
  case FSDP_F64: return MPI_DOUBLE;
  case FSDP_I32: return MPI_INT32_T;
  case FSDP_I64: return MPI_INT64_T;
  case FSDP_BF16:
  case FSDP_F16: return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

bool isHalf(fsdp_dtype t) { return t == FSDP_BF16 || t == FSDP_F16; }
bool isFloat(fsdp_dtype t) {
  return t == FSDP_F32 || t == FSDP_F64 || isHalf(t);
}

// MPI user-defined sums of 2-byte floats: inout[i] = round(in[i] + inout[i])
// with the addition in f32 (exact widening, one rounding per combine).
void sumBf16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = fsdp::floatToBf16(fsdp::bf16ToFloat(a[i]) + fsdp::bf16ToFloat(b[i]));
}
void sumF16(void *in, void *inout, int *len, MPI_Datatype *) {
  auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = fsdp::floatToF16(fsdp::f16ToFloat(a[i]) + fsdp::f16ToFloat(b[i]));
}
MPI_Op bf16SumOp = MPI_OP_NULL, f16SumOp = MPI_OP_NULL;

// The MPI reduction that sums `dtype` (created on first use for 2-byte
// floats, freed by fsdp_finalize), or MPI_OP_NULL if it cannot be created.
MPI_Op sumOp(fsdp_dtype dtype) {
  if (!isHalf(dtype))
    return MPI_SUM;
  MPI_Op &op = dtype == FSDP_BF16 ? bf16SumOp : f16SumOp;
  if (op == MPI_OP_NULL &&
      MPI_Op_create(dtype == FSDP_BF16 ? sumBf16 : sumF16, /*commute=*/1,
                    &op) != MPI_SUCCESS)
    op = MPI_OP_NULL;
  return op;
}

void freeOps() {
  if (bf16SumOp != MPI_OP_NULL)
    MPI_Op_free(&bf16SumOp);
  if (f16SumOp != MPI_OP_NULL)
    MPI_Op_free(&f16SumOp);
}

void freeGrid() {
  if (shardComm != MPI_COMM_NULL)
    MPI_Comm_free(&shardComm);
  if (replComm != MPI_COMM_NULL)
    MPI_Comm_free(&replComm);
  gridShard = 0;
}

// The communicator of `g` (MPI must be active), or MPI_COMM_NULL.
MPI_Comm groupComm(fsdp_group g) {
  switch (g) {
  case FSDP_GROUP_WORLD: return MPI_COMM_WORLD;
  case FSDP_GROUP_SHARD:
    return shardComm != MPI_COMM_NULL ? shardComm : MPI_COMM_WORLD;
  case FSDP_GROUP_REPLICATE:
    return replComm != MPI_COMM_NULL ? replComm : MPI_COMM_SELF;
  }
  return MPI_COMM_NULL;
}

bool validGroup(fsdp_group g) {
  return g == FSDP_GROUP_WORLD || g == FSDP_GROUP_SHARD ||
         g == FSDP_GROUP_REPLICATE;
}

void addBytes(fsdp_collective kind, int64_t bytes) {
  commBytes += bytes;
  commBytesByKind[kind] += bytes;
}

// Shared argument checks of the collectives; returns FSDP_OK or the error.
int checkArgs(const char *fn, fsdp_group group, const void *a, const void *b,
              const void *out, int64_t count, fsdp_dtype dtype,
              bool average) {
  if (!a || !b || !out || count < 0)
    return fail(FSDP_ERR_INVALID, std::string(fn) + ": invalid argument");
  if (!validGroup(group))
    return fail(FSDP_ERR_INVALID, std::string(fn) + ": invalid group " +
                                      std::to_string(static_cast<int>(group)));
  if (count > INT_MAX)
    return fail(FSDP_ERR_INVALID, std::string(fn) + ": " +
                                      std::to_string(count) +
                                      " elements exceed the MPI count limit");
  if (fsdp_dtype_size(dtype) == 0)
    return fail(FSDP_ERR_INVALID, std::string(fn) + ": invalid dtype");
  if (average && !isFloat(dtype))
    return fail(FSDP_ERR_INVALID, std::string(fn) + ": avg needs a float dtype");
  if (isHalf(dtype) && std::string(fn) != "fsdp_all_gather_start" &&
      mpiActive() && sumOp(dtype) == MPI_OP_NULL)
    return fail(FSDP_ERR_MPI, std::string(fn) +
                                  ": MPI_Op_create of the 2-byte float sum "
                                  "failed");
  return FSDP_OK;
}

void addPeak(int64_t now) {
  int64_t prev = peakBytes.load();
  while (now > prev && !peakBytes.compare_exchange_weak(prev, now)) {
  }
}

} // namespace

struct fsdp_request {
  MPI_Request req = MPI_REQUEST_NULL;
  bool average = false;
  void *avgData = nullptr; // the shard to divide after completion
  int64_t count = 0;
  int divisor = 1; // the group size for an average
  fsdp_dtype dtype = FSDP_F32;
};

namespace {

//===--- Progress -----------------------------------------------------------===//

std::atomic<int> progressMode{FSDP_PROGRESS_TEST};
// Guards `inflight` and every MPI call on an in-flight request.
std::mutex reqMutex;
std::condition_variable reqCv;
std::vector<fsdp_request *> inflight; // registered in thread mode only
// Never destroyed: a process that exits without fsdp_finalize (fsdp_abort)
// must not run ~thread on a joinable thread (std::terminate).
std::thread *progressThread = nullptr;
bool stopThread = false; // under reqMutex
uint64_t registrations = 0; // under reqMutex: wakes the sleeping thread
std::atomic<int64_t> minIntervalNs{20000}, maxIntervalNs{1000000};
std::atomic<int64_t> threadTests{0};

void progressLoop() {
  std::unique_lock<std::mutex> lk(reqMutex);
  int64_t interval = minIntervalNs.load();
  while (!stopThread) {
    if (inflight.empty()) {
      reqCv.wait(lk, [] { return stopThread || !inflight.empty(); });
      interval = minIntervalNs.load();
      continue;
    }
    bool completed = false;
    for (size_t i = 0; i < inflight.size();) {
      int flag = 0;
      // An error is left for fsdp_wait to report (MPI_Wait on the request).
      if (MPI_Test(&inflight[i]->req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        flag = 1;
      ++threadTests;
      if (flag) { // done: the caller's fsdp_wait finds MPI_REQUEST_NULL
        inflight.erase(inflight.begin() + i);
        completed = true;
      } else {
        ++i;
      }
    }
    interval = completed ? minIntervalNs.load()
                         : std::min(2 * interval, maxIntervalNs.load());
    // Sleep without the lock; a new request (or stop) wakes the thread early
    // and restarts the back-off.
    uint64_t seen = registrations;
    if (reqCv.wait_for(lk, std::chrono::nanoseconds(interval), [seen] {
          return stopThread || registrations != seen;
        }))
      interval = minIntervalNs.load();
  }
}

bool threadRunning() { return progressThread != nullptr; }

void startThread() {
  if (threadRunning() || !mpiActive())
    return;
  {
    std::lock_guard<std::mutex> lk(reqMutex);
    stopThread = false;
  }
  progressThread = new std::thread(progressLoop);
}

void stopProgressThread() {
  if (!threadRunning())
    return;
  {
    std::lock_guard<std::mutex> lk(reqMutex);
    stopThread = true;
    inflight.clear(); // the requests stay valid; fsdp_wait completes them
  }
  reqCv.notify_all();
  progressThread->join();
  delete progressThread;
  progressThread = nullptr;
}

// Registers a just-started request with the progress thread (caller holds
// reqMutex).
void registerLocked(fsdp_request *h) {
  if (threadRunning() && h->req != MPI_REQUEST_NULL) {
    inflight.push_back(h);
    ++registrations;
    reqCv.notify_all();
  }
}

//===--- Profile ------------------------------------------------------------===//

std::atomic<int> profileOn{0};
std::mutex profileMutex;
std::map<std::string, std::pair<int64_t, double>> profile;

} // namespace

extern "C" {

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
      return fail(FSDP_ERR_MPI, "MPI_Init failed: " + mpiMessage(err));
    weInitialisedMpi = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (wantThread) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      return fail(FSDP_ERR_MPI, "progress thread: the MPI library does not "
                                "provide MPI_THREAD_MULTIPLE");
    startThread();
  }
  return FSDP_OK;
}

int fsdp_set_progress(fsdp_progress mode) {
  if (mode != FSDP_PROGRESS_NONE && mode != FSDP_PROGRESS_TEST &&
      mode != FSDP_PROGRESS_THREAD)
    return fail(FSDP_ERR_INVALID, "fsdp_set_progress: invalid mode " +
                                      std::to_string(static_cast<int>(mode)));
  if (mode == FSDP_PROGRESS_THREAD && mpiActive()) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE)
      return fail(FSDP_ERR_MPI,
                  "fsdp_set_progress: a progress thread needs "
                  "MPI_THREAD_MULTIPLE (select it before fsdp_init)");
  }
  if (mode != FSDP_PROGRESS_THREAD)
    stopProgressThread();
  progressMode = mode;
  if (mode == FSDP_PROGRESS_THREAD)
    startThread(); // no-op until MPI is initialised (fsdp_init starts it)
  return FSDP_OK;
}

fsdp_progress fsdp_get_progress(void) {
  return static_cast<fsdp_progress>(progressMode.load());
}

const char *fsdp_progress_name(fsdp_progress mode) {
  switch (mode) {
  case FSDP_PROGRESS_NONE: return "none";
  case FSDP_PROGRESS_TEST: return "test";
  case FSDP_PROGRESS_THREAD: return "thread";
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
    return fail(FSDP_ERR_INVALID, "fsdp_set_progress_interval: need 0 < min "
                                  "<= max <= 10 seconds");
  minIntervalNs = std::max<int64_t>(1, static_cast<int64_t>(min_seconds * 1e9));
  maxIntervalNs = std::max<int64_t>(minIntervalNs.load(),
                                    static_cast<int64_t>(max_seconds * 1e9));
  return FSDP_OK;
}

int64_t fsdp_progress_thread_tests(void) { return threadTests.load(); }

int fsdp_finalize(void) {
  stopProgressThread();
  if (mpiActive()) {
    freeGrid();
    freeOps();
  }
  if (weInitialisedMpi && mpiActive()) {
    int err = MPI_Finalize();
    weInitialisedMpi = false;
    if (err != MPI_SUCCESS)
      return fail(FSDP_ERR_MPI, "MPI_Finalize failed: " + mpiMessage(err));
  }
  return FSDP_OK;
}

int fsdp_rank(void) {
  if (!mpiActive())
    return 0;
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int fsdp_world_size(void) {
  if (!mpiActive())
    return 1;
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

const char *fsdp_last_error(void) { return lastError.c_str(); }

size_t fsdp_dtype_size(fsdp_dtype dtype) {
  switch (dtype) {
  case FSDP_F32: return 4;
  case FSDP_F64: return 8;
  case FSDP_I32: return 4;
  case FSDP_I64: return 8;
  case FSDP_BF16:
  case FSDP_F16: return 2;
  }
  return 0;
}

// Each block carries a 64-byte header holding its size, so that fsdp_free
// knows how many bytes to subtract and the payload stays 64-byte aligned.
void *fsdp_alloc(size_t bytes) {
  if (bytes > SIZE_MAX - 2 * kAlign) {
    fail(FSDP_ERR_NOMEM, "fsdp_alloc: size overflow");
    return nullptr;
  }
  size_t total = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
  void *raw = std::aligned_alloc(kAlign, total);
  if (!raw) {
    fail(FSDP_ERR_NOMEM,
         "fsdp_alloc: out of memory allocating " + std::to_string(bytes) +
             " bytes");
    return nullptr;
  }
  std::memset(raw, 0, total);
  *static_cast<size_t *>(raw) = bytes;
  int64_t now = currentBytes.fetch_add(static_cast<int64_t>(bytes)) +
                static_cast<int64_t>(bytes);
  addPeak(now);
  return static_cast<char *>(raw) + kAlign;
}

void fsdp_free(void *ptr) {
  if (!ptr)
    return;
  char *raw = static_cast<char *>(ptr) - kAlign;
  size_t bytes = *reinterpret_cast<size_t *>(raw);
  currentBytes.fetch_sub(static_cast<int64_t>(bytes));
  std::free(raw);
}

// An arena is preceded by a header of `align` bytes whose last two words hold
// its size and the header length, for fsdp_arena_free.
void *fsdp_arena_alloc(size_t bytes, size_t alignment) {
  size_t align = alignment > kAlign ? alignment : kAlign;
  if ((alignment & (alignment - 1)) != 0) {
    fail(FSDP_ERR_INVALID, "fsdp_arena_alloc: alignment " +
                               std::to_string(alignment) +
                               " is not a power of two");
    return nullptr;
  }
  if (bytes > SIZE_MAX - 2 * align) {
    fail(FSDP_ERR_NOMEM, "fsdp_arena_alloc: size overflow");
    return nullptr;
  }
  size_t total = (bytes + align - 1) / align * align + align;
  void *raw = std::aligned_alloc(align, total);
  if (!raw) {
    fail(FSDP_ERR_NOMEM, "fsdp_arena_alloc: out of memory allocating " +
                             std::to_string(bytes) + " bytes");
    return nullptr;
  }
  std::memset(raw, 0, total);
  char *payload = static_cast<char *>(raw) + align;
  reinterpret_cast<size_t *>(payload)[-2] = bytes;
  reinterpret_cast<size_t *>(payload)[-1] = align;
  arenaBytes.fetch_add(static_cast<int64_t>(bytes));
  return payload;
}

void fsdp_arena_free(void *arena) {
  if (!arena)
    return;
  size_t bytes = static_cast<size_t *>(arena)[-2];
  size_t align = static_cast<size_t *>(arena)[-1];
  arenaBytes.fetch_sub(static_cast<int64_t>(bytes));
  std::free(static_cast<char *>(arena) - align);
}

int64_t fsdp_mem_arena_bytes(void) { return arenaBytes.load(); }

void fsdp_mem_account(int64_t delta) {
  int64_t now = currentBytes.fetch_add(delta) + delta;
  if (delta > 0)
    addPeak(now);
}

int64_t fsdp_mem_current_bytes(void) { return currentBytes.load(); }
int64_t fsdp_mem_peak_bytes(void) { return peakBytes.load(); }
void fsdp_mem_reset_peak(void) { peakBytes.store(currentBytes.load()); }

int fsdp_set_grid(int shard_size) {
  int n = fsdp_world_size();
  if (shard_size < 1 || n % shard_size)
    return fail(FSDP_ERR_INVALID,
                "fsdp_set_grid: shard size " + std::to_string(shard_size) +
                    " does not divide the world size " + std::to_string(n));
  if (shard_size == fsdp_grid_shard_size())
    return FSDP_OK; // also the initial grid S = N (shard = world)
  if (!mpiActive()) { // n == 1 == shard_size
    gridShard = shard_size;
    return FSDP_OK;
  }
  freeGrid();
  int r = fsdp_rank();
  // Shard group: color = replica floor(r/S), key = r mod S (its index).
  // Replicate group: color = r mod S, key = floor(r/S) (its index).
  int err = MPI_Comm_split(MPI_COMM_WORLD, r / shard_size, r % shard_size,
                           &shardComm);
  if (err == MPI_SUCCESS)
    err = MPI_Comm_split(MPI_COMM_WORLD, r % shard_size, r / shard_size,
                         &replComm);
  if (err != MPI_SUCCESS) {
    freeGrid();
    return fail(FSDP_ERR_MPI, "MPI_Comm_split failed: " + mpiMessage(err));
  }
  MPI_Comm_set_errhandler(shardComm, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(replComm, MPI_ERRORS_RETURN);
  gridShard = shard_size;
  return FSDP_OK;
}

int fsdp_grid_shard_size(void) {
  return gridShard ? gridShard : fsdp_world_size();
}

int fsdp_group_size(fsdp_group group) {
  int n = fsdp_world_size(), s = fsdp_grid_shard_size();
  switch (group) {
  case FSDP_GROUP_WORLD: return n;
  case FSDP_GROUP_SHARD: return s;
  case FSDP_GROUP_REPLICATE: return n / s;
  }
  return -1;
}

int fsdp_group_rank(fsdp_group group) {
  int r = fsdp_rank(), s = fsdp_grid_shard_size();
  switch (group) {
  case FSDP_GROUP_WORLD: return r;
  case FSDP_GROUP_SHARD: return r % s;
  case FSDP_GROUP_REPLICATE: return r / s;
  }
  return -1;
}

int fsdp_all_gather_start_in(fsdp_group group, const void *shard, void *full,
                             int64_t shard_count, fsdp_dtype dtype,
                             fsdp_handle *out) {
  if (int rc = checkArgs("fsdp_all_gather_start", group, shard, full, out,
                         shard_count, dtype, false))
    return rc;
  size_t esize = fsdp_dtype_size(dtype);
  auto *h = new (std::nothrow) fsdp_request();
  if (!h)
    return fail(FSDP_ERR_NOMEM, "fsdp_all_gather_start: out of memory");
  int g = fsdp_group_size(group);
  if (!mpiActive()) {
    std::memmove(full, shard, static_cast<size_t>(shard_count) * esize);
  } else {
    std::lock_guard<std::mutex> lk(reqMutex);
    int err = MPI_Iallgather(shard, static_cast<int>(shard_count),
                             mpiType(dtype), full, static_cast<int>(shard_count),
                             mpiType(dtype), groupComm(group), &h->req);
    if (err != MPI_SUCCESS) {
      delete h;
      return fail(FSDP_ERR_MPI, "MPI_Iallgather failed: " + mpiMessage(err));
    }
    registerLocked(h);
  }
  addBytes(FSDP_COLL_ALL_GATHER,
           fsdp::ringCollectiveBytesPerRank(
               shard_count * static_cast<int64_t>(esize) * g, g));
  *out = h;
  return FSDP_OK;
}

int fsdp_all_gather_start(const void *shard, void *full, int64_t shard_count,
                          fsdp_dtype dtype, fsdp_handle *out) {
  return fsdp_all_gather_start_in(FSDP_GROUP_WORLD, shard, full, shard_count,
                                  dtype, out);
}

int fsdp_reduce_scatter_start_in(fsdp_group group, const void *full,
                                 void *shard, int64_t shard_count,
                                 fsdp_dtype dtype, fsdp_reduce_op op,
                                 fsdp_handle *out) {
  if (int rc = checkArgs("fsdp_reduce_scatter_start", group, full, shard, out,
                         shard_count, dtype, op == FSDP_REDUCE_AVG))
    return rc;
  size_t esize = fsdp_dtype_size(dtype);
  auto *h = new (std::nothrow) fsdp_request();
  if (!h)
    return fail(FSDP_ERR_NOMEM, "fsdp_reduce_scatter_start: out of memory");
  int g = fsdp_group_size(group);
  if (!mpiActive()) {
    std::memmove(shard, full, static_cast<size_t>(shard_count) * esize);
  } else {
    std::lock_guard<std::mutex> lk(reqMutex);
    int err = MPI_Ireduce_scatter_block(full, shard, static_cast<int>(shard_count),
                                        mpiType(dtype), sumOp(dtype),
                                        groupComm(group), &h->req);
    if (err != MPI_SUCCESS) {
      delete h;
      return fail(FSDP_ERR_MPI,
                  "MPI_Ireduce_scatter_block failed: " + mpiMessage(err));
    }
    registerLocked(h);
  }
  h->average = (op == FSDP_REDUCE_AVG);
  h->avgData = shard;
  h->count = shard_count;
  h->divisor = g;
  h->dtype = dtype;
  addBytes(FSDP_COLL_REDUCE_SCATTER,
           fsdp::ringCollectiveBytesPerRank(
               shard_count * static_cast<int64_t>(esize) * g, g));
  *out = h;
  return FSDP_OK;
}

int fsdp_reduce_scatter_start(const void *full, void *shard,
                              int64_t shard_count, fsdp_dtype dtype,
                              fsdp_reduce_op op, fsdp_handle *out) {
  return fsdp_reduce_scatter_start_in(FSDP_GROUP_WORLD, full, shard,
                                      shard_count, dtype, op, out);
}

int fsdp_all_reduce_start(fsdp_group group, const void *in, void *out,
                          int64_t count, fsdp_dtype dtype, fsdp_reduce_op op,
                          fsdp_handle *handle) {
  if (int rc = checkArgs("fsdp_all_reduce_start", group, in, out, handle,
                         count, dtype, op == FSDP_REDUCE_AVG))
    return rc;
  size_t esize = fsdp_dtype_size(dtype);
  auto *h = new (std::nothrow) fsdp_request();
  if (!h)
    return fail(FSDP_ERR_NOMEM, "fsdp_all_reduce_start: out of memory");
  int g = fsdp_group_size(group);
  if (!mpiActive()) {
    std::memmove(out, in, static_cast<size_t>(count) * esize);
  } else {
    std::lock_guard<std::mutex> lk(reqMutex);
    int err = MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out,
                             static_cast<int>(count), mpiType(dtype), sumOp(dtype),
                             groupComm(group), &h->req);
    if (err != MPI_SUCCESS) {
      delete h;
      return fail(FSDP_ERR_MPI, "MPI_Iallreduce failed: " + mpiMessage(err));
    }
    registerLocked(h);
  }
  h->average = (op == FSDP_REDUCE_AVG);
  h->avgData = out;
  h->count = count;
  h->divisor = g;
  h->dtype = dtype;
  addBytes(FSDP_COLL_ALL_REDUCE,
           fsdp::ringAllReduceBytesPerRank(
               count * static_cast<int64_t>(esize), g));
  *handle = h;
  return FSDP_OK;
}

int fsdp_test(fsdp_handle h, int *done) {
  if (!h || !done)
    return fail(FSDP_ERR_INVALID, "fsdp_test: invalid argument");
  std::lock_guard<std::mutex> lk(reqMutex);
  if (h->req == MPI_REQUEST_NULL) {
    *done = 1;
    return FSDP_OK;
  }
  int flag = 0;
  int err = MPI_Test(&h->req, &flag, MPI_STATUS_IGNORE);
  if (err != MPI_SUCCESS)
    return fail(FSDP_ERR_MPI, "MPI_Test failed: " + mpiMessage(err));
  *done = flag;
  return FSDP_OK;
}

int fsdp_wait(fsdp_handle h) {
  if (!h)
    return fail(FSDP_ERR_INVALID, "fsdp_wait: null handle");
  double t0 = fsdp_now();
  int rc = FSDP_OK;
  {
    // Taken from the progress thread first: it never sees `h` again.
    std::lock_guard<std::mutex> lk(reqMutex);
    if (!inflight.empty()) {
      auto it = std::find(inflight.begin(), inflight.end(), h);
      if (it != inflight.end())
        inflight.erase(it);
    }
    if (h->req != MPI_REQUEST_NULL) {
      int err = MPI_Wait(&h->req, MPI_STATUS_IGNORE);
      if (err != MPI_SUCCESS)
        rc = fail(FSDP_ERR_MPI, "MPI_Wait failed: " + mpiMessage(err));
    }
  }
  if (rc == FSDP_OK && h->average) {
    int n = h->divisor;
    if (h->dtype == FSDP_F32) {
      float *p = static_cast<float *>(h->avgData);
      for (int64_t i = 0; i < h->count; ++i)
        p[i] /= static_cast<float>(n);
    } else if (h->dtype == FSDP_BF16) { // widen, divide in f32, round once
      uint16_t *p = static_cast<uint16_t *>(h->avgData);
      for (int64_t i = 0; i < h->count; ++i)
        p[i] = fsdp::floatToBf16(fsdp::bf16ToFloat(p[i]) / static_cast<float>(n));
    } else if (h->dtype == FSDP_F16) {
      uint16_t *p = static_cast<uint16_t *>(h->avgData);
      for (int64_t i = 0; i < h->count; ++i)
        p[i] = fsdp::floatToF16(fsdp::f16ToFloat(p[i]) / static_cast<float>(n));
    } else {
      double *p = static_cast<double *>(h->avgData);
      for (int64_t i = 0; i < h->count; ++i)
        p[i] /= static_cast<double>(n);
    }
  }
  waitNs += static_cast<int64_t>((fsdp_now() - t0) * 1e9);
  delete h;
  return rc;
}

int64_t fsdp_comm_bytes_sent(void) { return commBytes.load(); }
int64_t fsdp_comm_bytes_sent_by(fsdp_collective kind) {
  if (kind < FSDP_COLL_ALL_GATHER || kind > FSDP_COLL_ALL_REDUCE)
    return 0;
  return commBytesByKind[kind].load();
}
double fsdp_comm_wait_seconds(void) { return waitNs.load() * 1e-9; }
double fsdp_compute_seconds(void) { return computeNs.load() * 1e-9; }
void fsdp_add_compute_seconds(double seconds) {
  computeNs += static_cast<int64_t>(seconds * 1e9);
}
void fsdp_stats_reset(void) {
  threadTests = 0;
  commBytes = 0;
  for (auto &c : commBytesByKind)
    c = 0;
  computeNs = 0;
  waitNs = 0;
}

double fsdp_now(void) {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

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
static const std::pair<const std::string, std::pair<int64_t, double>> *
profileEntry(int i) {
  std::lock_guard<std::mutex> lk(profileMutex);
  if (i < 0 || i >= static_cast<int>(profile.size()))
    return nullptr;
  return &*std::next(profile.begin(), i);
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

void fsdp_abort(const char *message, int code) {
  std::fprintf(stderr, "[rank %d] %s\n", fsdp_rank(), message ? message : "");
  std::fflush(stderr);
  std::fflush(stdout);
  if (code == 0)
    code = 1;
  if (mpiActive())
    MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

} // extern "C"
