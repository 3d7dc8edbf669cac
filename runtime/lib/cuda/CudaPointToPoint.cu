//===- CudaPointToPoint.cu - pipeline transfers on the cuda driver -------===//
//
// fsdp_send_start / fsdp_recv_start on a cuda channel (CudaDriver.h,
// PointToPoint): NCCL's ncclSend / ncclRecv (native), or MPI through pinned
// host memory (--collectives mpi, ranks sharing a GPU). Either way a
// transfer first waits for the compute stream's work so far: a send's
// buffer is written there, and a receive's slot may still be read by an
// earlier kernel.
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"

#include <array>
#include <list>
#include <thread>

namespace fsdp::hal::cuda {

namespace {

void checkPeer(int peer, int rank, int size, bool isSend) {
  if (peer < 0 || peer >= size || peer == rank)
    fail(FSDP_ERR_INVALID,
         std::string(isSend ? "fsdp_send_start" : "fsdp_recv_start") +
             ": peer " + std::to_string(peer) + " is this rank or outside " +
             "the channel's " + std::to_string(size) + " rank(s)");
}

/// Makes `stream` wait for the compute stream's work so far.
void afterCompute(CudaDevice *dev, cudaStream_t stream) {
  check(cudaEventRecord(dev->computeReady, streamOf(&dev->compute)),
        "cudaEventRecord");
  check(cudaStreamWaitEvent(stream, dev->computeReady, 0),
        "cudaStreamWaitEvent");
}

//===--- NCCL -------------------------------------------------------------===//

class NcclPointToPoint final : public PointToPoint {
public:
  NcclPointToPoint(CudaDevice *d, MPI_Comm comm, int rank, int size)
      : dev(d), rank(rank), size(size) {
    for (size_t k = 0; k < comms.size(); ++k) {
      ncclUniqueId id;
      if (rank == 0)
        checkNccl(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
      if (comm != MPI_COMM_NULL &&
          MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm) != MPI_SUCCESS)
        fail(FSDP_ERR_MPI, "MPI_Bcast of the ncclUniqueId (point-to-point)");
      checkNccl(ncclCommInitRank(&comms[k], size, id, rank), nullptr,
                "ncclCommInitRank (point-to-point)");
      dev->addComm(comms[k]);
      check(cudaStreamCreateWithFlags(&streams[k], cudaStreamNonBlocking),
            "cudaStreamCreate");
    }
  }
  ~NcclPointToPoint() override {
    for (size_t k = 0; k < comms.size(); ++k) {
      if (streams[k])
        cudaStreamSynchronize(streams[k]);
      if (comms[k] && dev->removeComm(comms[k]))
        ncclCommDestroy(comms[k]);
      if (streams[k])
        cudaStreamDestroy(streams[k]);
    }
  }

  fsdp_event_s *transfer(void *buf, int64_t count, fsdp_dtype dtype, int peer,
                         int tag, bool isSend) override {
    (void)tag; // each communicator carries its pairs' transfers in order
    checkPeer(peer, rank, size, isSend);
    if (count < 0 || (count > 0 && !buf))
      fail(FSDP_ERR_INVALID,
           std::string(isSend ? "fsdp_send_start" : "fsdp_recv_start") +
               ": invalid buffer or count");
    int sender = isSend ? rank : peer, receiver = isSend ? peer : rank;
    size_t k = static_cast<size_t>((receiver > sender ? 0 : 2) + sender % 2);
    cudaStream_t st = streams[k];
    afterCompute(dev, st);
    std::unique_lock<std::mutex> l = dev->ncclLock();
    checkNccl(ncclGroupStart(), comms[k], "ncclGroupStart");
    ncclResult_t r = isSend ? ncclSend(buf, static_cast<size_t>(count),
                                       ncclType(dtype), peer, comms[k], st)
                            : ncclRecv(buf, static_cast<size_t>(count),
                                       ncclType(dtype), peer, comms[k], st);
    ncclResult_t end = ncclGroupEnd();
    checkNccl(r, comms[k], isSend ? "ncclSend" : "ncclRecv");
    checkNccl(end, comms[k], "ncclGroupEnd");
    return new CudaEvent(dev, st);
  }

private:
  CudaDevice *dev;
  int rank, size;
  std::array<ncclComm_t, 4> comms{};
  std::array<cudaStream_t, 4> streams{};
};

//===--- MPI through pinned host memory -----------------------------------===//

/// Pinned host bytes, freed when it goes.
struct Pinned {
  explicit Pinned(size_t bytes) {
    check(cudaMallocHost(&data, bytes ? bytes : 1), "cudaMallocHost (MPI p2p)");
  }
  Pinned(const Pinned &) = delete;
  Pinned &operator=(const Pinned &) = delete;
  ~Pinned() { cudaFreeHost(data); }
  void *data = nullptr;
};

/// A receive: MPI_Irecv into pinned memory; once the message is in, the copy
/// to the device is enqueued on the communication stream and recorded.
struct MpiRecvEvent final : CudaEvent {
  MpiRecvEvent(CudaDevice *d, void *dst, size_t bytes)
      : CudaEvent(d), dev(d), dst(dst), bytes(bytes), host(bytes) {}
  ~MpiRecvEvent() override {
    if (request != MPI_REQUEST_NULL) { // never waited (an error path)
      MPI_Cancel(&request);
      MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
  }
  bool query() override { return arrived() && CudaEvent::query(); }
  void beforeWait() override {
    for (int polls = 0; !arrived(); ++polls) {
      if (dev->aborted.load())
        fail(FSDP_ERR_MPI, "fsdp_wait: the device's collectives were aborted");
      if (polls > 64)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  /// Whether the message is in (its copy then enqueued).
  bool arrived() {
    if (copied)
      return true;
    int done = 0;
    MPI_Status status;
    if (MPI_Test(&request, &done, &status) != MPI_SUCCESS)
      fail(FSDP_ERR_MPI, "MPI_Test of a receive failed");
    if (!done)
      return false;
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<size_t>(got) != bytes)
      fail(FSDP_ERR_INVALID, "fsdp_recv_start: the message has " +
                                 std::to_string(got) + " bytes, " +
                                 std::to_string(bytes) + " expected");
    cudaStream_t s = streamOf(&dev->comm);
    afterCompute(dev, s);
    check(cudaMemcpyAsync(dst, host.data, bytes, cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync");
    check(cudaEventRecord(event, s), "cudaEventRecord");
    copied = true;
    return true;
  }

  CudaDevice *dev;
  void *dst;
  size_t bytes;
  Pinned host;
  MPI_Request request = MPI_REQUEST_NULL;
  bool copied = false;
};

class MpiPointToPoint final : public PointToPoint {
public:
  MpiPointToPoint(CudaDevice *d, MPI_Comm comm, int rank, int size)
      : dev(d), comm(comm), rank(rank), size(size) {}
  ~MpiPointToPoint() override {
    // The peers receive what was sent before the channel goes.
    for (Send &s : sends)
      MPI_Wait(&s.request, MPI_STATUS_IGNORE);
  }

  fsdp_event_s *transfer(void *buf, int64_t count, fsdp_dtype dtype, int peer,
                         int tag, bool isSend) override {
    checkPeer(peer, rank, size, isSend);
    if (comm == MPI_COMM_NULL)
      fail(FSDP_ERR_INVALID, "point-to-point transfers need MPI");
    size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
    reapSends();
    cudaStream_t s = streamOf(&dev->comm);
    if (isSend) {
      // The device bytes out first (the host waits for the copy), so the
      // event is the copy's: the device buffer is free once it completes.
      sends.emplace_back(bytes);
      Send &out = sends.back();
      afterCompute(dev, s);
      check(
          cudaMemcpyAsync(out.host.data, buf, bytes, cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync");
      dev->waitStream(s, "cudaStreamQuery");
      if (MPI_Isend(out.host.data, static_cast<int>(bytes), MPI_BYTE, peer, tag,
                    comm, &out.request) != MPI_SUCCESS)
        fail(FSDP_ERR_MPI, "MPI_Isend failed");
      return new CudaEvent(dev, s);
    }
    auto e = std::make_unique<MpiRecvEvent>(dev, buf, bytes);
    if (MPI_Irecv(e->host.data, static_cast<int>(bytes), MPI_BYTE, peer, tag,
                  comm, &e->request) != MPI_SUCCESS)
      fail(FSDP_ERR_MPI, "MPI_Irecv failed");
    return e.release();
  }

private:
  struct Send {
    explicit Send(size_t bytes) : host(bytes) {}
    Pinned host;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  /// Frees the pinned copies of sends MPI has completed.
  void reapSends() {
    for (auto it = sends.begin(); it != sends.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? sends.erase(it) : std::next(it);
    }
  }

  CudaDevice *dev;
  MPI_Comm comm;
  int rank, size;
  std::list<Send> sends; ///< in flight (stable addresses)
};

} // namespace

std::unique_ptr<PointToPoint>
createNcclPointToPoint(CudaDevice *dev, MPI_Comm comm, int rank, int size) {
  return std::make_unique<NcclPointToPoint>(dev, comm, rank, size);
}

std::unique_ptr<PointToPoint>
createMpiPointToPoint(CudaDevice *dev, MPI_Comm comm, int rank, int size) {
  return std::make_unique<MpiPointToPoint>(dev, comm, rank, size);
}

} // namespace fsdp::hal::cuda
