//===- CpuChannel.cpp - the cpu driver's channels, events and progress ----===//
//
// A channel is an MPI communicator; a collective is a non-blocking MPI
// collective (MPI_Iallgather, MPI_Ireduce_scatter_block, MPI_Iallreduce) on
// host memory and its event the MPI request. Waiting on the event is
// MPI_Wait plus the average, on the calling thread (the cpu compute stream).
// bf16/f16 travel as MPI_UINT16_T and are summed by an f32-and-round MPI
// operation (mpi::sumOp).
//
// Progress (runtime.h, fsdp_progress): in FSDP_PROGRESS_THREAD mode a
// std::thread loops over the registry of in-flight events calling MPI_Test,
// sleeping between rounds with an exponential back-off (so that on an
// oversubscribed machine it gives the core back to the kernels). One mutex
// guards the registry and every MPI call on an in-flight request (start,
// MPI_Test by either thread, MPI_Wait); completing an event removes it from
// the registry under the mutex first, so the thread never touches a request
// after (or while) the caller completes it.
//
//===----------------------------------------------------------------------===//
#include "CpuDriver.h"
#include "KernelUtil.h"

#include "../mpi/Mpi.h"
#include "fsdp/Sharding.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace fsdp::hal::cpu {

namespace {

// Guards `inflight` and every MPI call on an in-flight request.
std::mutex reqMutex;
std::condition_variable reqCv;
std::vector<CpuEvent *> inflight; // registered while the thread runs
// Never destroyed: a process that exits without fsdp_finalize (fsdp_abort)
// must not run ~thread on a joinable thread (std::terminate).
std::thread *progressThread = nullptr;
bool stopThread = false;    // under reqMutex
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
      // An error is left for the wait to report (MPI_Wait on the request).
      if (MPI_Test(&inflight[i]->request, &flag, MPI_STATUS_IGNORE) !=
          MPI_SUCCESS)
        flag = 1;
      ++threadTests;
      if (flag) { // done: the wait finds MPI_REQUEST_NULL
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
    if (reqCv.wait_for(lk, std::chrono::nanoseconds(interval),
                       [seen] { return stopThread || registrations != seen; }))
      interval = minIntervalNs.load();
  }
}

// Registers a just-started event with the progress thread (caller holds
// reqMutex).
void registerLocked(CpuEvent *e) {
  if (progressThread && e->request != MPI_REQUEST_NULL) {
    inflight.push_back(e);
    ++registrations;
    reqCv.notify_all();
  }
}

} // namespace

void startProgressThread() {
  if (progressThread || !mpi::active())
    return;
  {
    std::lock_guard<std::mutex> lk(reqMutex);
    stopThread = false;
  }
  progressThread = new std::thread(progressLoop);
}

void stopProgressThread() {
  if (!progressThread)
    return;
  {
    std::lock_guard<std::mutex> lk(reqMutex);
    stopThread = true;
    inflight.clear(); // the requests stay valid; their waits complete them
  }
  reqCv.notify_all();
  progressThread->join();
  delete progressThread;
  progressThread = nullptr;
}

void setProgressInterval(int64_t minNs, int64_t maxNs) {
  minIntervalNs = minNs;
  maxIntervalNs = maxNs;
}

int64_t progressThreadTests() { return threadTests.load(); }

//===--- Events -----------------------------------------------------------===//

bool CpuEvent::query() {
  std::lock_guard<std::mutex> lk(reqMutex);
  if (finished || request == MPI_REQUEST_NULL)
    return true;
  int flag = 0;
  mpi::check(MPI_Test(&request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  return flag != 0;
}

void CpuEvent::finish() {
  if (finished)
    return;
  finished = true;
  int err = MPI_SUCCESS;
  {
    // Taken from the progress thread first: it never sees this event again.
    std::lock_guard<std::mutex> lk(reqMutex);
    if (!inflight.empty()) {
      auto it = std::find(inflight.begin(), inflight.end(), this);
      if (it != inflight.end())
        inflight.erase(it);
    }
    if (request != MPI_REQUEST_NULL)
      err = MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  mpi::check(err, "MPI_Wait");
  if (average)
    mpi::divideInPlace(avgData, count, dtype, divisor);
}

CpuEvent::~CpuEvent() {
  try {
    finish(); // never leave an MPI request dangling
  } catch (...) {
  }
}

//===--- Channels ---------------------------------------------------------===//

namespace {

class CpuChannel final : public fsdp_channel_s {
public:
  CpuChannel(fsdp_device_s *dev, mpi::Comm c) : comm(std::move(c)) {
    device = dev;
    rank = comm.rank();
    size = comm.size();
  }

  std::unique_ptr<fsdp_channel_s> split(int color, int key) override {
    return std::make_unique<CpuChannel>(device, comm.split(color, key));
  }

  fsdp_event_s *allGather(const void *shard, void *full, int64_t count,
                          fsdp_dtype dtype) override {
    mpi::checkCollective("fsdp_all_gather_start", shard, full, count, dtype,
                         false);
    size_t es = hal::dtypeSize(dtype);
    auto e = newEvent();
    if (comm.isNull()) {
      std::memmove(full, shard, static_cast<size_t>(count) * es);
    } else {
      std::lock_guard<std::mutex> lk(reqMutex);
      mpi::check(MPI_Iallgather(shard, static_cast<int>(count),
                                mpi::datatype(dtype), full,
                                static_cast<int>(count), mpi::datatype(dtype),
                                comm.get(), &e->request),
                 "MPI_Iallgather");
      registerLocked(e.get());
    }
    return started(std::move(e), FSDP_COLL_ALL_GATHER,
                   ringCollectiveBytesPerRank(count * es * size, size));
  }

  fsdp_event_s *reduceScatter(const void *full, void *shard, int64_t count,
                              fsdp_dtype dtype, fsdp_reduce_op op) override {
    mpi::checkCollective("fsdp_reduce_scatter_start", full, shard, count, dtype,
                         op == FSDP_REDUCE_AVG);
    size_t es = hal::dtypeSize(dtype);
    auto e = newEvent();
    if (comm.isNull()) {
      std::memmove(shard, full, static_cast<size_t>(count) * es);
    } else {
      preDivide(op, full, count * size, dtype);
      std::lock_guard<std::mutex> lk(reqMutex);
      mpi::check(MPI_Ireduce_scatter_block(
                     full, shard, static_cast<int>(count), mpi::datatype(dtype),
                     mpi::sumOp(dtype), comm.get(), &e->request),
                 "MPI_Ireduce_scatter_block");
      registerLocked(e.get());
    }
    setAverage(*e, op, shard, count, dtype);
    return started(std::move(e), FSDP_COLL_REDUCE_SCATTER,
                   ringCollectiveBytesPerRank(count * es * size, size));
  }

  fsdp_event_s *allReduce(const void *in, void *out, int64_t count,
                          fsdp_dtype dtype, fsdp_reduce_op op) override {
    mpi::checkCollective("fsdp_all_reduce_start", in, out, count, dtype,
                         op == FSDP_REDUCE_AVG);
    size_t es = hal::dtypeSize(dtype);
    auto e = newEvent();
    if (comm.isNull()) {
      std::memmove(out, in, static_cast<size_t>(count) * es);
    } else {
      preDivide(op, in, count, dtype);
      std::lock_guard<std::mutex> lk(reqMutex);
      mpi::check(MPI_Iallreduce(in == out ? MPI_IN_PLACE : in, out,
                                static_cast<int>(count), mpi::datatype(dtype),
                                mpi::sumOp(dtype), comm.get(), &e->request),
                 "MPI_Iallreduce");
      registerLocked(e.get());
    }
    setAverage(*e, op, out, count, dtype);
    return started(
        std::move(e), FSDP_COLL_ALL_REDUCE,
        ringAllReduceBytesPerRank(count * static_cast<int64_t>(es), size));
  }

  // Pipeline parallelism: the activations and their gradients between
  // adjacent stages (MPI_Isend / MPI_Irecv; MPI keeps messages of one
  // (source, tag) in order).
  fsdp_event_s *send(const void *buf, int64_t count, fsdp_dtype dtype, int peer,
                     int tag) override {
    return pointToPoint(const_cast<void *>(buf), count, dtype, peer, tag, true);
  }
  fsdp_event_s *recv(void *buf, int64_t count, fsdp_dtype dtype, int peer,
                     int tag) override {
    return pointToPoint(buf, count, dtype, peer, tag, false);
  }

private:
  fsdp_event_s *pointToPoint(void *buf, int64_t count, fsdp_dtype dtype,
                             int peer, int tag, bool isSend) {
    if (comm.isNull() || peer == rank)
      fail(FSDP_ERR_INVALID,
           std::string(isSend ? "fsdp_send_start" : "fsdp_recv_start") +
               ": peer " + std::to_string(peer) +
               " is this rank (a one-rank channel)");
    auto e = newEvent();
    {
      std::lock_guard<std::mutex> lk(reqMutex);
      int n = static_cast<int>(count);
      mpi::check(isSend ? MPI_Isend(buf, n, mpi::datatype(dtype), peer, tag,
                                    comm.get(), &e->request)
                        : MPI_Irecv(buf, n, mpi::datatype(dtype), peer, tag,
                                    comm.get(), &e->request),
                 isSend ? "MPI_Isend" : "MPI_Irecv");
      registerLocked(e.get());
    }
    rt::cpu::detail::sampleHeapUntracked();
    return e.release();
  }

  std::unique_ptr<CpuEvent> newEvent() {
    auto e = std::make_unique<CpuEvent>();
    e->device = device;
    return e;
  }
  // An f16 average divides each rank's input before the sum (in place: the
  // input is a gradient that is dead after its reduction, as FSDP1's
  // in-place predivide) and the sum after it (mpi::divideFactors).
  void preDivide(fsdp_reduce_op op, const void *in, int64_t count,
                 fsdp_dtype dtype) const {
    double pre = mpi::divideFactors(size, dtype).pre;
    if (op == FSDP_REDUCE_AVG && pre != 1)
      mpi::divideInPlace(const_cast<void *>(in), count, dtype, pre);
  }
  void setAverage(CpuEvent &e, fsdp_reduce_op op, void *data, int64_t count,
                  fsdp_dtype dtype) const {
    e.average = op == FSDP_REDUCE_AVG;
    e.avgData = data;
    e.count = count;
    e.divisor = mpi::divideFactors(size, dtype).post;
    e.dtype = dtype;
  }
  // Counts the ring volume and samples the heap (MPI's libnbc allocates the
  // collective's schedule and temporaries when it starts).
  fsdp_event_s *started(std::unique_ptr<CpuEvent> e, fsdp_collective kind,
                        int64_t bytes) {
    device->commBytes[kind] += bytes;
    rt::cpu::detail::sampleHeapUntracked();
    return e.release();
  }

  mpi::Comm comm;
};

} // namespace

std::unique_ptr<fsdp_channel_s> createWorldChannel(fsdp_device_s *device) {
  return std::make_unique<CpuChannel>(device, mpi::Comm::world());
}

} // namespace fsdp::hal::cpu
