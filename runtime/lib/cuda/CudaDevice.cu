//===- CudaDevice.cu - the cuda driver: memory, streams, channels ---------===//
//
// Device "cuda:N": memory from the GPU's default stream-ordered pool
// (cudaMallocAsync / cudaFreeAsync on the compute stream, the pool keeping
// what it obtained so that cudaMemPoolAttrUsedMemHigh is the step's
// high-water mark), two non-blocking streams, cuBLAS with a workspace of
// its own, and channels:
//   native  NCCL communicators, one per process group, bootstrapped by an
//           ncclUniqueId broadcast over the group's MPI communicator; each
//           collective waits for the compute stream's work, runs on the
//           communication stream and records an event; averages are a sum
//           followed by a division in the sum's dtype (f32 for bf16/f16,
//           rounded once), as the cpu driver does, and an f16 average
//           divides before the sum too (mpi::divideFactors: NCCL's
//           premultiplied sum);
//   mpi     device buffers staged through pinned host memory into blocking
//           MPI collectives (several ranks may share one GPU; the host
//           blocks on the copies: a testing mode).
// A kernel's data error (a label out of range) is recorded in device memory
// and thrown by the next synchronisation. The host waits by polling
// (waitStream), so that an NCCL error (a dead peer) ends the wait: the
// communicators are aborted and the error thrown, instead of a
// cudaStreamSynchronize that never returns.
//
//===----------------------------------------------------------------------===//
#include "CudaDriver.h"

#include "../mpi/Mpi.h"
#include "fsdp/Sharding.h"

#include <cuda_fp16.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace fsdp::hal::cuda {

void check(cudaError_t err, const char *what) {
  if (err != cudaSuccess)
    fail(FSDP_ERR_DEVICE, std::string(what) +
                              " failed: " + cudaGetErrorName(err) + ": " +
                              cudaGetErrorString(err));
}

void check(cublasStatus_t st, const char *what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    fail(FSDP_ERR_DEVICE,
         std::string(what) + " failed: " + cublasGetStatusString(st));
}

void checkNccl(ncclResult_t r, ncclComm_t comm, const char *what) {
  if (r == ncclSuccess)
    return;
  std::string msg = std::string(what) + " failed: " + ncclGetErrorString(r);
  if (comm) {
    const char *last = ncclGetLastError(comm);
    if (last && *last)
      msg += std::string(" (") + last + ")";
  }
  fail(FSDP_ERR_MPI, msg);
}

ncclDataType_t ncclType(fsdp_dtype t) {
  switch (t) {
  case FSDP_F32:
    return ncclFloat32;
  case FSDP_F64:
    return ncclFloat64;
  case FSDP_I32:
    return ncclInt32;
  case FSDP_I64:
    return ncclInt64;
  case FSDP_BF16:
    return ncclBfloat16;
  case FSDP_F16:
    return ncclFloat16;
  }
  return ncclFloat32;
}

std::string errorMessage(const DeviceErrors &e) {
  auto where = [&](const char *what) {
    return std::string(what) + " " + std::to_string(e.value) + " at position " +
           std::to_string(e.position) + " is outside [0, " +
           std::to_string(e.bound) + ")";
  };
  switch (e.flag) {
  case kLabelOutOfRange:
    return where("label");
  case kIndexOutOfRange:
    return where("index");
  case kStepBelowOne:
    return "adamw_update: step must be >= 1, got " + std::to_string(e.value);
  case kLrStepBelowOne:
    return "fsdp_lr_schedule: step must be >= 1, got " +
           std::to_string(e.value);
  case kLrTotalBelowOne:
    return "fsdp_lr_schedule: total steps must be >= 1, got " +
           std::to_string(e.value);
  default:
    return "unknown kernel error " + std::to_string(e.flag);
  }
}

cudaStream_t streamOf(fsdp_stream_s *s) {
  return static_cast<cudaStream_t>(s->native);
}

CudaEvent::CudaEvent(fsdp_device_s *d) {
  device = d;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
        "cudaEventCreate");
}

CudaEvent::CudaEvent(fsdp_device_s *d, cudaStream_t recordedOn) {
  device = d;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
        "cudaEventCreate");
  check(cudaEventRecord(event, recordedOn), "cudaEventRecord");
}

CudaEvent::~CudaEvent() {
  if (event)
    cudaEventDestroy(event); // released when its work completes
}

bool CudaEvent::query() {
  cudaError_t e = cudaEventQuery(event);
  if (e == cudaErrorNotReady)
    return false;
  check(e, "cudaEventQuery");
  return true;
}

//===--- Device -----------------------------------------------------------===//

namespace {
constexpr size_t kBlasWorkspace = 32u
                                  << 20; // cuBLAS's recommendation for Hopper
constexpr size_t kAlign = 256;
} // namespace

CudaDevice::CudaDevice(int ord, const fsdp_device_options &o)
    : ordinal(ord), transport(o.collectives) {
  name = "cuda:" + std::to_string(ord);
  collectives = transport == FSDP_COLLECTIVES_MPI ? "mpi" : "nccl";
  blasInfo.library = "cuBLAS";
  check(cudaSetDevice(ordinal), "cudaSetDevice");
  cudaStream_t c = nullptr, m = nullptr;
  check(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking),
        "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&m, cudaStreamNonBlocking),
        "cudaStreamCreate");
  compute.native = c;
  comm.native = m;
  check(cudaDeviceGetDefaultMemPool(&pool, ordinal),
        "cudaDeviceGetDefaultMemPool");
  // Keep what the pool obtains: no trimming at synchronisations.
  uint64_t keep = ~uint64_t(0);
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
        "cudaMemPoolSetAttribute");
  int maxPitch = 0;
  check(cudaDeviceGetAttribute(&maxPitch, cudaDevAttrMaxPitch, ordinal),
        "cudaDeviceGetAttribute (cudaDevAttrMaxPitch)");
  maxCopyPitch = static_cast<size_t>(maxPitch);
  check(cublasCreate(&blas), "cublasCreate");
  check(cudaMalloc(&blasWorkspace, kBlasWorkspace),
        "cudaMalloc (cuBLAS workspace)");
  blasWorkspaceBytes = kBlasWorkspace;
  blasOn(c);
  // f32 GEMMs in f32 (no TF32), as the cpu driver computes them.
  check(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  // cuDNN (attention in bf16/f16), loaded at run time; its version or why
  // none goes to the run summary through the BLAS record's note.
  cudnnOpen(this);
  blasInfo.note = cudnnNote.c_str();
  check(cudaMalloc(reinterpret_cast<void **>(&errors), sizeof(DeviceErrors)),
        "cudaMalloc (error record)");
  // Cleared on the compute stream, whose kernels write it (cudaMemset would
  // run on the legacy stream, unordered with this non-blocking stream).
  check(cudaMemsetAsync(errors, 0, sizeof(DeviceErrors), c), "cudaMemsetAsync");
  check(cudaMallocHost(reinterpret_cast<void **>(&errorsHost),
                       sizeof(DeviceErrors)),
        "cudaMallocHost");
  check(cudaEventCreateWithFlags(&computeReady, cudaEventDisableTiming),
        "cudaEventCreate");
  resetMemoryPeak();
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal);
  cudaDeviceSynchronize();
  if (computeReady)
    cudaEventDestroy(computeReady);
  cudaFreeHost(errorsHost);
  cudaFree(errors);
  cudnnClose(this);
  if (blas)
    cublasDestroy(blas);
  cudaFree(blasWorkspace);
  cudaStreamDestroy(streamOf(&compute));
  cudaStreamDestroy(streamOf(&comm));
}

void *CudaDevice::allocate(size_t bytes) {
  void *p = nullptr;
  size_t n = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  cudaError_t e = cudaMallocAsync(&p, n, streamOf(&compute));
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail(FSDP_ERR_NOMEM, "fsdp_device_alloc on " + name + ": " +
                             std::to_string(bytes) +
                             " bytes: " + cudaGetErrorString(e));
  }
  return p;
}

void CudaDevice::deallocate(void *p) {
  check(cudaFreeAsync(p, streamOf(&compute)), "cudaFreeAsync");
}

void *CudaDevice::scratch(cudaStream_t stream, size_t bytes) {
  void *p = nullptr;
  check(cudaMallocAsync(&p, std::max<size_t>(bytes, 1), stream),
        "cudaMallocAsync (kernel scratch)");
  return p;
}

void CudaDevice::release(cudaStream_t stream, void *p) {
  check(cudaFreeAsync(p, stream), "cudaFreeAsync (kernel scratch)");
}

void CudaDevice::copy(fsdp_stream_s *s, void *dst, const void *src,
                      size_t bytes) {
  if (bytes)
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, streamOf(s)),
          "cudaMemcpyAsync");
}

// Called through stridedCopy (Driver.h): pitches <= maxCopyPitch.
void CudaDevice::copy2d(fsdp_stream_s *s, void *dst, size_t dpitch,
                        const void *src, size_t spitch, size_t width,
                        size_t height) {
  check(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height,
                          cudaMemcpyDefault, streamOf(s)),
        "cudaMemcpy2DAsync");
}

void CudaDevice::zero(fsdp_stream_s *s, void *dst, size_t bytes) {
  if (bytes)
    check(cudaMemsetAsync(dst, 0, bytes, streamOf(s)), "cudaMemsetAsync");
}

void CudaDevice::synchronize(fsdp_stream_s *s) {
  cudaStream_t st = streamOf(s), c = streamOf(&compute);
  waitStream(st, "cudaStreamQuery");
  check(cudaGetLastError(), "a kernel launch");
  // The record after the compute stream's kernels (those that write it),
  // read and cleared in that stream's order.
  check(cudaMemcpyAsync(errorsHost, errors, sizeof(DeviceErrors),
                        cudaMemcpyDeviceToHost, c),
        "cudaMemcpyAsync (error record)");
  waitStream(c, "cudaStreamQuery");
  if (errorsHost->flag != kNoError) {
    DeviceErrors e = *errorsHost;
    check(cudaMemsetAsync(errors, 0, sizeof(DeviceErrors), c),
          "cudaMemsetAsync (error record)");
    fail(FSDP_ERR_DATA, errorMessage(e));
  }
}

cublasHandle_t CudaDevice::blasOn(cudaStream_t stream) {
  check(cublasSetStream(blas, stream), "cublasSetStream");
  check(cublasSetWorkspace(blas, blasWorkspace, blasWorkspaceBytes),
        "cublasSetWorkspace");
  return blas;
}

void CudaDevice::waitStream(cudaStream_t stream, const char *what) {
  // Spin briefly (a step's end is usually near), then poll every 50 us.
  for (int polls = 0;; ++polls) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return;
    if (e != cudaErrorNotReady)
      check(e, what);
    pollCollectives();
    if (polls < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void CudaDevice::pollCollectives() {
  std::string error;
  {
    std::unique_lock<std::mutex> l = ncclLock();
    for (ncclComm_t c : ncclComms) {
      ncclResult_t r = ncclSuccess;
      ncclResult_t q = ncclCommGetAsyncError(c, &r);
      if (q != ncclSuccess)
        r = q;
      if (r == ncclSuccess || r == ncclInProgress)
        continue;
      error = std::string("NCCL error while waiting for the collectives: ") +
              ncclGetErrorString(r);
      const char *last = ncclGetLastError(c);
      if (last && *last)
        error += std::string(" (") + last + ")";
      break;
    }
  }
  if (error.empty())
    return;
  abortCollectives(error);
  fail(FSDP_ERR_MPI, error + "; the communicators were aborted");
}

void CudaDevice::abortCollectives(const std::string &reason) {
  std::lock_guard<std::mutex> l(ncclMutex);
  if (aborted.exchange(true))
    return;
  abortReason = reason;
  for (ncclComm_t c : ncclComms)
    ncclCommAbort(c); // stops its kernels; frees it
}

std::unique_lock<std::mutex> CudaDevice::ncclLock() {
  std::unique_lock<std::mutex> l(ncclMutex);
  if (aborted.load())
    fail(FSDP_ERR_MPI, "the NCCL communicators were aborted: " + abortReason);
  return l;
}

void CudaDevice::addComm(ncclComm_t c) {
  std::lock_guard<std::mutex> l(ncclMutex);
  ncclComms.push_back(c);
}

bool CudaDevice::removeComm(ncclComm_t c) {
  std::lock_guard<std::mutex> l(ncclMutex);
  if (aborted.load())
    return false;
  ncclComms.erase(std::remove(ncclComms.begin(), ncclComms.end(), c),
                  ncclComms.end());
  return true;
}

void CudaDevice::waitEvent(fsdp_stream_s *s, fsdp_event_s *e) {
  auto *ce = static_cast<CudaEvent *>(e);
  ce->beforeWait();
  check(cudaStreamWaitEvent(streamOf(s), ce->event, 0), "cudaStreamWaitEvent");
}

void CudaDevice::commAfterCompute() {
  check(cudaEventRecord(computeReady, streamOf(&compute)), "cudaEventRecord");
  check(cudaStreamWaitEvent(streamOf(&comm), computeReady, 0),
        "cudaStreamWaitEvent");
}

std::unique_ptr<fsdp_channel_s> CudaDevice::createWorldChannel() {
  return transport == FSDP_COLLECTIVES_MPI ? createMpiWorld(this)
                                           : createNcclWorld(this);
}

void CudaDevice::memoryStats(fsdp_device_stats &o) {
  uint64_t cur = 0, high = 0;
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &cur),
        "cudaMemPoolGetAttribute");
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high),
        "cudaMemPoolGetAttribute");
  o.memory_in_use_bytes = static_cast<int64_t>(cur);
  o.memory_peak_bytes = static_cast<int64_t>(high);
  o.workspace_bytes = static_cast<int64_t>(blasWorkspaceBytes);
  o.comm_buffer_bytes = commBufferBytes;
}

void CudaDevice::resetMemoryPeak() {
  uint64_t zero = 0; // resets the high-water mark to the current use
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero),
        "cudaMemPoolSetAttribute");
}

//===--- NCCL channels ----------------------------------------------------===//

namespace {

int64_t deviceFreeBytes() {
  size_t freeB = 0, total = 0;
  cudaMemGetInfo(&freeB, &total);
  return static_cast<int64_t>(freeB);
}

/// What the NCCL and MPI channels share: the device, the communicator and
/// pipeline parallelism's transfers (CudaPointToPoint.cu), whose
/// PointToPoint `makePointToPoint` makes on the first transfer; every rank
/// of the channel reaches it without waiting for a transfer (a stage's first
/// one is a send or a receive started before any wait on another stage).
class CudaChannel : public fsdp_channel_s {
public:
  using PointToPointFactory = std::unique_ptr<PointToPoint> (*)(CudaDevice *,
                                                                MPI_Comm, int,
                                                                int);
  CudaChannel(CudaDevice *d, mpi::Comm c, PointToPointFactory make)
      : dev(d), comm(std::move(c)), makePointToPoint(make) {
    device = d;
    rank = comm.rank();
    size = comm.size();
  }

  fsdp_event_s *send(const void *buf, int64_t count, fsdp_dtype dtype, int peer,
                     int tag) final {
    return pointToPoint().transfer(const_cast<void *>(buf), count, dtype, peer,
                                   tag, true);
  }
  fsdp_event_s *recv(void *buf, int64_t count, fsdp_dtype dtype, int peer,
                     int tag) final {
    return pointToPoint().transfer(buf, count, dtype, peer, tag, false);
  }

protected:
  CudaDevice *dev;
  mpi::Comm comm;

private:
  PointToPoint &pointToPoint() {
    if (!p2p)
      p2p = makePointToPoint(dev, comm.get(), rank, size);
    return *p2p;
  }

  PointToPointFactory makePointToPoint;
  std::unique_ptr<PointToPoint> p2p; ///< before `comm` goes
};

class NcclChannel final : public CudaChannel {
public:
  NcclChannel(CudaDevice *d, mpi::Comm c)
      : CudaChannel(d, std::move(c), createNcclPointToPoint) {
    ncclUniqueId id;
    if (rank == 0)
      checkNccl(ncclGetUniqueId(&id), nullptr, "ncclGetUniqueId");
    if (!comm.isNull())
      mpi::check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm.get()),
                 "MPI_Bcast of the ncclUniqueId");
    // NCCL 2.22+ connects lazily: its buffers are allocated by the first
    // collective, so they are measured after one of each kind (one element;
    // an algorithm first chosen later, e.g. NVLS for large all-reduces, is
    // not counted). The warm-up buffer is allocated before the measure.
    void *warm = nullptr;
    check(cudaMalloc(&warm, 2 * sizeof(float) * static_cast<size_t>(size)),
          "cudaMalloc (NCCL warm-up)");
    int64_t before = deviceFreeBytes();
    ncclResult_t r = ncclCommInitRank(&nccl, size, id, rank);
    if (r != ncclSuccess) {
      cudaFree(warm);
      checkNccl(r, nullptr,
                "ncclCommInitRank (NCCL needs one GPU per rank; ranks that "
                "share a GPU need --collectives mpi)");
    }
    dev->addComm(nccl);
    try {
      warmUp(static_cast<float *>(warm));
    } catch (...) {
      cudaFree(warm);
      throw;
    }
    dev->commBufferBytes += std::max<int64_t>(0, before - deviceFreeBytes());
    cudaFree(warm);
  }
  ~NcclChannel() override {
    if (nccl && dev->removeComm(nccl))
      ncclCommDestroy(nccl);
  }

  std::unique_ptr<fsdp_channel_s> split(int color, int key) override {
    return std::make_unique<NcclChannel>(dev, comm.split(color, key));
  }

  fsdp_event_s *allGather(const void *shard, void *full, int64_t count,
                          fsdp_dtype dtype) override {
    mpi::checkCollective("fsdp_all_gather_start", shard, full, count, dtype,
                         false);
    dev->commAfterCompute();
    std::unique_lock<std::mutex> l = dev->ncclLock();
    checkNccl(ncclAllGather(shard, full, static_cast<size_t>(count),
                            ncclType(dtype), nccl, streamOf(&dev->comm)),
              nccl, "ncclAllGather");
    size_t es = dtypeSize(dtype);
    return done(FSDP_COLL_ALL_GATHER,
                ringCollectiveBytesPerRank(count * es * size, size));
  }

  fsdp_event_s *reduceScatter(const void *full, void *shard, int64_t count,
                              fsdp_dtype dtype, fsdp_reduce_op op) override {
    mpi::checkCollective("fsdp_reduce_scatter_start", full, shard, count, dtype,
                         op == FSDP_REDUCE_AVG);
    dev->commAfterCompute();
    mpi::DivideFactors f = mpi::divideFactors(size, dtype);
    std::unique_lock<std::mutex> l = dev->ncclLock();
    SumOp sum(op == FSDP_REDUCE_AVG ? f.pre : 1, dtype, nccl);
    checkNccl(ncclReduceScatter(full, shard, static_cast<size_t>(count),
                                ncclType(dtype), sum.op, nccl,
                                streamOf(&dev->comm)),
              nccl, "ncclReduceScatter");
    if (op == FSDP_REDUCE_AVG)
      launchDivide(shard, count, dtype, f.post, streamOf(&dev->comm));
    size_t es = dtypeSize(dtype);
    return done(FSDP_COLL_REDUCE_SCATTER,
                ringCollectiveBytesPerRank(count * es * size, size));
  }

  fsdp_event_s *allReduce(const void *in, void *out, int64_t count,
                          fsdp_dtype dtype, fsdp_reduce_op op) override {
    mpi::checkCollective("fsdp_all_reduce_start", in, out, count, dtype,
                         op == FSDP_REDUCE_AVG);
    dev->commAfterCompute();
    mpi::DivideFactors f = mpi::divideFactors(size, dtype);
    std::unique_lock<std::mutex> l = dev->ncclLock();
    SumOp sum(op == FSDP_REDUCE_AVG ? f.pre : 1, dtype, nccl);
    checkNccl(ncclAllReduce(in, out, static_cast<size_t>(count),
                            ncclType(dtype), sum.op, nccl,
                            streamOf(&dev->comm)),
              nccl, "ncclAllReduce");
    if (op == FSDP_REDUCE_AVG)
      launchDivide(out, count, dtype, f.post, streamOf(&dev->comm));
    return done(FSDP_COLL_ALL_REDUCE,
                ringAllReduceBytesPerRank(
                    count * static_cast<int64_t>(dtypeSize(dtype)), size));
  }

private:
  /// One-element all-reduce, all-gather and reduce-scatter on `buf`
  /// (2·size floats), waited for (NCCL allocates its buffers there).
  void warmUp(float *buf) {
    cudaStream_t st = streamOf(&dev->comm);
    {
      std::unique_lock<std::mutex> l = dev->ncclLock();
      checkNccl(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, nccl, st),
                nccl, "ncclAllReduce (warm-up)");
      checkNccl(ncclAllGather(buf, buf + size, 1, ncclFloat32, nccl, st), nccl,
                "ncclAllGather (warm-up)");
      checkNccl(
          ncclReduceScatter(buf + size, buf, 1, ncclFloat32, ncclSum, nccl, st),
          nccl, "ncclReduceScatter (warm-up)");
    }
    dev->waitStream(st, "cudaStreamQuery (NCCL warm-up)");
  }

  /// ncclSum, or with a pre-divide (mpi::divideFactors) NCCL's premultiplied
  /// sum of x / pre (ncclRedOpCreatePreMulSum, as PyTorch FSDP's
  /// _make_nccl_premul_sum), which leaves the input as it is. Destroyed
  /// once enqueued (NCCL allows it).
  struct SumOp {
    SumOp(double pre, fsdp_dtype dtype, ncclComm_t comm) : comm(comm) {
      if (pre == 1)
        return;
      if (dtype != FSDP_F16) // the scalar has the reduction's dtype
        fail(FSDP_ERR_INVALID, "a pre-divide is f16 only");
      __half scalar = __float2half(static_cast<float>(1 / pre));
      checkNccl(ncclRedOpCreatePreMulSum(&op, &scalar, ncclType(dtype),
                                         ncclScalarHostImmediate, comm),
                comm, "ncclRedOpCreatePreMulSum");
      custom = true;
    }
    SumOp(const SumOp &) = delete;
    SumOp &operator=(const SumOp &) = delete;
    ~SumOp() {
      if (custom)
        ncclRedOpDestroy(op, comm);
    }
    ncclRedOp_t op = ncclSum;
    ncclComm_t comm;
    bool custom = false;
  };

  fsdp_event_s *done(fsdp_collective kind, int64_t bytes) {
    dev->commBytes[kind] += bytes;
    return new CudaEvent(dev, streamOf(&dev->comm));
  }

  ncclComm_t nccl = nullptr;
};

//===--- MPI channels (staged through pinned host memory) -----------------===//

class MpiChannel final : public CudaChannel {
public:
  MpiChannel(CudaDevice *d, mpi::Comm c)
      : CudaChannel(d, std::move(c), createMpiPointToPoint) {}
  ~MpiChannel() override {
    cudaStreamSynchronize(streamOf(&dev->comm)); // no NCCL: nothing to poll
    cudaFreeHost(sendHost);
    cudaFreeHost(recvHost);
  }

  std::unique_ptr<fsdp_channel_s> split(int color, int key) override {
    return std::make_unique<MpiChannel>(dev, comm.split(color, key));
  }

  fsdp_event_s *allGather(const void *shard, void *full, int64_t count,
                          fsdp_dtype dtype) override {
    mpi::checkCollective("fsdp_all_gather_start", shard, full, count, dtype,
                         false);
    size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
    stage(shard, bytes, bytes * size);
    if (comm.isNull())
      std::memcpy(recvHost, sendHost, bytes);
    else
      mpi::check(MPI_Allgather(sendHost, static_cast<int>(count),
                               mpi::datatype(dtype), recvHost,
                               static_cast<int>(count), mpi::datatype(dtype),
                               comm.get()),
                 "MPI_Allgather");
    return unstage(
        full, bytes * size, FSDP_COLL_ALL_GATHER,
        ringCollectiveBytesPerRank(static_cast<int64_t>(bytes) * size, size));
  }

  fsdp_event_s *reduceScatter(const void *full, void *shard, int64_t count,
                              fsdp_dtype dtype, fsdp_reduce_op op) override {
    mpi::checkCollective("fsdp_reduce_scatter_start", full, shard, count, dtype,
                         op == FSDP_REDUCE_AVG);
    size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
    stage(full, bytes * size, bytes);
    mpi::DivideFactors f = mpi::divideFactors(size, dtype);
    if (op == FSDP_REDUCE_AVG && f.pre != 1) // the staged copy, not the input
      mpi::divideInPlace(sendHost, count * size, dtype, f.pre);
    if (comm.isNull())
      std::memcpy(recvHost, sendHost, bytes);
    else
      mpi::check(MPI_Reduce_scatter_block(
                     sendHost, recvHost, static_cast<int>(count),
                     mpi::datatype(dtype), mpi::sumOp(dtype), comm.get()),
                 "MPI_Reduce_scatter_block");
    if (op == FSDP_REDUCE_AVG)
      mpi::divideInPlace(recvHost, count, dtype, f.post);
    return unstage(
        shard, bytes, FSDP_COLL_REDUCE_SCATTER,
        ringCollectiveBytesPerRank(static_cast<int64_t>(bytes) * size, size));
  }

  fsdp_event_s *allReduce(const void *in, void *out, int64_t count,
                          fsdp_dtype dtype, fsdp_reduce_op op) override {
    mpi::checkCollective("fsdp_all_reduce_start", in, out, count, dtype,
                         op == FSDP_REDUCE_AVG);
    size_t bytes = static_cast<size_t>(count) * dtypeSize(dtype);
    stage(in, bytes, bytes);
    mpi::DivideFactors f = mpi::divideFactors(size, dtype);
    if (op == FSDP_REDUCE_AVG && f.pre != 1)
      mpi::divideInPlace(sendHost, count, dtype, f.pre);
    if (comm.isNull())
      std::memcpy(recvHost, sendHost, bytes);
    else
      mpi::check(MPI_Allreduce(sendHost, recvHost, static_cast<int>(count),
                               mpi::datatype(dtype), mpi::sumOp(dtype),
                               comm.get()),
                 "MPI_Allreduce");
    if (op == FSDP_REDUCE_AVG)
      mpi::divideInPlace(recvHost, count, dtype, f.post);
    return unstage(
        out, bytes, FSDP_COLL_ALL_REDUCE,
        ringAllReduceBytesPerRank(static_cast<int64_t>(bytes), size));
  }

private:
  /// The device input, after the compute stream's work so far, into the
  /// pinned send buffer (the host waits for the copy).
  void stage(const void *src, size_t bytes, size_t recvBytes) {
    cudaStream_t s = streamOf(&dev->comm);
    dev->commAfterCompute();
    // The previous collective's copy out of `recvHost` is done before reuse.
    dev->waitStream(s, "cudaStreamQuery");
    grow(sendHost, sendCap, bytes);
    grow(recvHost, recvCap, recvBytes);
    check(cudaMemcpyAsync(sendHost, src, bytes, cudaMemcpyDeviceToHost, s),
          "cudaMemcpyAsync");
    dev->waitStream(s, "cudaStreamQuery");
  }
  fsdp_event_s *unstage(void *dst, size_t bytes, fsdp_collective kind,
                        int64_t ringBytes) {
    cudaStream_t s = streamOf(&dev->comm);
    check(cudaMemcpyAsync(dst, recvHost, bytes, cudaMemcpyHostToDevice, s),
          "cudaMemcpyAsync");
    dev->commBytes[kind] += ringBytes;
    return new CudaEvent(dev, s);
  }
  static void grow(void *&buf, size_t &cap, size_t need) {
    if (need <= cap)
      return;
    cudaFreeHost(buf);
    buf = nullptr;
    check(cudaMallocHost(&buf, need), "cudaMallocHost (MPI staging)");
    cap = need;
  }

  void *sendHost = nullptr, *recvHost = nullptr;
  size_t sendCap = 0, recvCap = 0;
};

} // namespace

std::unique_ptr<fsdp_channel_s> createNcclWorld(CudaDevice *device) {
  return std::make_unique<NcclChannel>(device, mpi::Comm::world());
}

std::unique_ptr<fsdp_channel_s> createMpiWorld(CudaDevice *device) {
  return std::make_unique<MpiChannel>(device, mpi::Comm::world());
}

} // namespace fsdp::hal::cuda

/// The driver's entry point (Driver.h, kCudaDriverEntry): device `ordinal`,
/// or for -1 the GPU local_rank mod the number of GPUs.
extern "C" __attribute__((visibility("default"))) fsdp_device_s *
fsdp_cuda_driver_create_device(int ordinal, int localRank,
                               const fsdp_device_options *options,
                               char **error) {
  auto fail = [&](const std::string &msg) -> fsdp_device_s * {
    if (error)
      *error = strdup(msg.c_str());
    return nullptr;
  };
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    return fail(std::string("no CUDA device found") +
                (e != cudaSuccess ? std::string(" (cudaGetDeviceCount: ") +
                                        cudaGetErrorString(e) + ")"
                                  : std::string()));
  if (ordinal < 0)
    ordinal = localRank % count;
  if (ordinal >= count)
    return fail("no CUDA device " + std::to_string(ordinal) +
                ": this node has " + std::to_string(count));
  try {
    fsdp_device_options o{FSDP_COLLECTIVES_NATIVE};
    if (options)
      o = *options;
    return new fsdp::hal::cuda::CudaDevice(ordinal, o);
  } catch (const std::exception &ex) {
    return fail(ex.what());
  }
}
