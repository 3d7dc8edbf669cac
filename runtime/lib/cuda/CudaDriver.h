//===- CudaDriver.h - the cuda driver's shared pieces -----------*- C++ -*-===//
//
// The cuda driver (libfsdp_cuda.so, loaded by the runtime on the first
// "cuda" device): CudaDevice (CudaDevice.cu: memory from the device's
// stream-ordered pool, a compute and a communication stream, cuBLAS,
// channels over NCCL or MPI staged through pinned host memory), its kernels
// (CudaElementwise.cu, CudaReductions.cu, CudaGemm.cu, CudaNormEmbedding.cu,
// CudaAttention.cu, CudaOptimizer.cu; shared helpers in CudaKernelUtil.cuh),
// pipeline transfers (CudaPointToPoint.cu),
// cuDNN's fused attention (CudnnAttention.cpp, libcudnn loaded at run time),
// and the device-side record of a data error that a kernel cannot throw
// (reported by the next synchronisation).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CUDA_CUDADRIVER_H
#define FSDP_RUNTIME_CUDA_CUDADRIVER_H

#include "../Driver.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace fsdp::hal::cuda {

/// Throws DeviceError(FSDP_ERR_DEVICE) naming `what` unless err is success.
void check(cudaError_t err, const char *what);
void check(cublasStatus_t st, const char *what);

/// The first data error a kernel met since the last synchronisation, in
/// device memory: `flag` 0 (none) or an ErrorKind; the rest describe it.
enum ErrorKind : int {
  kNoError = 0,
  kLabelOutOfRange = 1, ///< value, position, bound: "label v at position p ..."
  kIndexOutOfRange = 2, ///< the same for embedding indices
  kStepBelowOne = 3,    ///< value: the AdamW step
  kLrStepBelowOne = 4,  ///< value: the step of a learning-rate schedule
  kLrTotalBelowOne = 5  ///< value: the total steps of a learning-rate schedule
};
struct DeviceErrors {
  int flag;
  long long value, position, bound;
};
/// The message of a recorded error (the cpu driver's wording).
std::string errorMessage(const DeviceErrors &e);

cudaStream_t streamOf(fsdp_stream_s *s);

/// A cudaEvent_t recorded on a stream (a collective's completion).
struct CudaEvent : fsdp_event_s {
  CudaEvent(fsdp_device_s *d, cudaStream_t recordedOn);
  ~CudaEvent() override;
  bool query() override;
  /// Called before a stream waits for `event`: an event whose work the host
  /// still has to enqueue (an MPI receive's copy to the device) records it
  /// here.
  virtual void beforeWait() {}
  cudaEvent_t event = nullptr;

protected:
  /// An event created but not recorded yet.
  explicit CudaEvent(fsdp_device_s *d);
};

struct CudnnAttention; // CudnnAttention.cpp

/// Device "cuda:N". Kernels (the Cuda*.cu kernel files) run on the stream they
/// are given; cuBLAS follows it.
class CudaDevice final : public fsdp_device_s {
public:
  CudaDevice(int ordinal, const fsdp_device_options &options);
  ~CudaDevice() override;

  void *allocate(size_t bytes) override;
  void deallocate(void *ptr) override;
  void copy(fsdp_stream_s *s, void *dst, const void *src,
            size_t bytes) override;
  void copy2d(fsdp_stream_s *s, void *dst, size_t dpitch, const void *src,
              size_t spitch, size_t width, size_t height) override;
  void zero(fsdp_stream_s *s, void *dst, size_t bytes) override;
  void synchronize(fsdp_stream_s *s) override;
  void waitEvent(fsdp_stream_s *s, fsdp_event_s *e) override;
  std::unique_ptr<fsdp_channel_s> createWorldChannel() override;
  void memoryStats(fsdp_device_stats &out) override;
  void resetMemoryPeak() override;
  void abortCollectives(const std::string &reason) override;

  FSDP_OVERRIDE_KERNELS

  /// The cuBLAS handle on `stream` with the device's workspace: every
  /// cublasSetStream resets the handle's workspace to cuBLAS's default pool
  /// (cuBLAS documentation, cublasSetStream), so the workspace is set again
  /// after it (as PyTorch's getCurrentCUDABlasHandle does).
  cublasHandle_t blasOn(cudaStream_t stream);
  /// Blocks the host until `stream` is idle by polling (cudaStreamQuery),
  /// checking the NCCL communicators' asynchronous errors between polls: a
  /// peer that died or failed makes NCCL report ncclRemoteError or
  /// ncclSystemError there, while its kernels would wait forever; the
  /// communicators are then aborted (ncclCommAbort; NCCL user guide, "Error
  /// handling and communicator destruction") and FSDP_ERR_MPI is thrown.
  /// Throws the same after abortCollectives.
  void waitStream(cudaStream_t stream, const char *what);
  /// NCCL communicators, registered while they live; all NCCL calls on them
  /// hold `ncclMutex`, so that a watchdog's abort never frees one under a
  /// call. Throws FSDP_ERR_MPI once aborted.
  std::unique_lock<std::mutex> ncclLock();
  void addComm(ncclComm_t c);
  /// False when the communicator was aborted (and freed by ncclCommAbort).
  bool removeComm(ncclComm_t c);

  /// Stream-ordered scratch of a kernel (from the pool: in memory_peak).
  void *scratch(cudaStream_t stream, size_t bytes);
  void release(cudaStream_t stream, void *p);
  /// Makes the communication stream wait for the compute stream's work so
  /// far (a collective's inputs) and returns the event a collective records
  /// when it is done.
  void commAfterCompute();

  int ordinal = 0;
  fsdp_collectives transport = FSDP_COLLECTIVES_NATIVE;
  cudaMemPool_t pool = nullptr;
  cublasHandle_t blas = nullptr;
  void *blasWorkspace = nullptr;
  size_t blasWorkspaceBytes = 0;
  /// cuDNN's handle and cached SDPA plans (CudnnAttention.cpp); null when
  /// libcudnn could not be loaded, with cudnnNote saying why.
  CudnnAttention *cudnn = nullptr;
  std::string cudnnNote; ///< "cuDNN 9.19.0 ..." or why none (blasInfo.note)
  DeviceErrors *errors = nullptr;     ///< device memory
  DeviceErrors *errorsHost = nullptr; ///< pinned mirror
  cudaEvent_t computeReady = nullptr;
  int64_t commBufferBytes = 0;
  std::mutex ncclMutex;
  std::vector<ncclComm_t> ncclComms; ///< under ncclMutex
  std::string abortReason;           ///< under ncclMutex
  std::atomic<bool> aborted{false};

private:
  /// ncclCommGetAsyncError of every communicator; on an error aborts them
  /// all and throws FSDP_ERR_MPI naming the error.
  void pollCollectives();
};

/// data[i] /= divisor in the dtype's arithmetic (bf16/f16: in f32, rounded
/// once), on `stream` (CudaElementwise.cu): the average after an NCCL sum.
void launchDivide(void *data, int64_t count, fsdp_dtype t, double divisor,
                  cudaStream_t stream);

/// cuDNN for attention (CudnnAttention.cpp). cudnnOpen loads libcudnn
/// (FSDP_CUDNN_LIBRARY, else libcudnn.so.9 from the library path) once per
/// process with dlopen and creates the device's handle; on failure it leaves
/// dev->cudnn null. Either way it sets dev->cudnnNote. cudnnClose frees the
/// handle and the plans.
void cudnnOpen(CudaDevice *dev);
void cudnnClose(CudaDevice *dev);

/// One attention call's shape: q [batch, seq, hq·d], k, v [batch, seq, hkv·d].
struct SdpaShape {
  fsdp_dtype dtype; ///< bf16 or f16
  int64_t batch, seq, hq, hkv, d;
};
/// Causal GQA attention through cuDNN's SDPA graph (cudnn-frontend): o and
/// lse [batch, hq, seq] f32 (cuDNN's Stats), and its backward from o and lse.
/// The execution plans are built once per shape and cached; the workspace
/// comes from the device's pool (scratch). Returns false, having printed why
/// once per shape, where cuDNN supports no engine for the shape (the caller
/// runs the f32 path); throws DeviceError for a failure at execution.
bool cudnnSdpaForward(CudaDevice *dev, cudaStream_t st, const SdpaShape &sh,
                      const void *q, const void *k, const void *v, void *o,
                      void *lse);
bool cudnnSdpaBackward(CudaDevice *dev, cudaStream_t st, const SdpaShape &sh,
                       const void *q, const void *k, const void *v,
                       const void *o, const void *lse, const void *dout,
                       void *dq, void *dk, void *dv);

/// Channels: NCCL communicators (native) or MPI staged through pinned host
/// buffers (FSDP_COLLECTIVES_MPI). Collective over MPI_COMM_WORLD.
std::unique_ptr<fsdp_channel_s> createNcclWorld(CudaDevice *device);
std::unique_ptr<fsdp_channel_s> createMpiWorld(CudaDevice *device);

/// Throws FSDP_ERR_MPI naming `what` and NCCL's last error unless success.
void checkNccl(ncclResult_t r, ncclComm_t comm, const char *what);
ncclDataType_t ncclType(fsdp_dtype t);

/// Pipeline parallelism's point-to-point transfers of a channel
/// (CudaPointToPoint.cu): `count` elements of `dtype` at device address
/// `buf` to (isSend) or from rank `peer` of the channel, matched by `tag`.
/// The event completes when the buffer may be reused (a send) or read (a
/// receive). Throws FSDP_ERR_INVALID for a peer outside the channel or this
/// rank, FSDP_ERR_MPI for a transport error.
class PointToPoint {
public:
  virtual ~PointToPoint() = default;
  virtual fsdp_event_s *transfer(void *buf, int64_t count, fsdp_dtype dtype,
                                 int peer, int tag, bool isSend) = 0;
};
/// ncclSend / ncclRecv, each in an ncclGroupStart/End, on four NCCL
/// communicators over `comm`'s ranks (made here: collective over `comm`),
/// each with its own stream: one per direction (to a later or an earlier
/// rank) and parity of the sending rank, so that every stream carries one
/// kind of transfer between fixed pairs in the order both sides start them
/// (NCCL orders the operations of one communicator; a send and a receive on
/// one would wait for each other where MPI's would not).
std::unique_ptr<PointToPoint>
createNcclPointToPoint(CudaDevice *dev, MPI_Comm comm, int rank, int size);
/// MPI_Isend / MPI_Irecv through pinned host buffers (--collectives mpi:
/// ranks may share a GPU): a send copies the device buffer out first; a
/// receive's copy to the device is enqueued when the message has arrived
/// (the event's query, or the wait).
std::unique_ptr<PointToPoint>
createMpiPointToPoint(CudaDevice *dev, MPI_Comm comm, int rank, int size);

} // namespace fsdp::hal::cuda

#endif // FSDP_RUNTIME_CUDA_CUDADRIVER_H
