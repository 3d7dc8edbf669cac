//===- CpuDriver.h - the cpu driver's pieces shared by its sources --------===//
//
// The event of an MPI collective and the process-wide MPI progress thread
// (CpuChannel.cpp), used by the device (CpuDevice.cpp) and by Runtime.cpp's
// fsdp_set_progress.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CPU_CPUDRIVER_H
#define FSDP_RUNTIME_CPU_CPUDRIVER_H

#include "../Driver.h"

#include <mpi.h>

#include <memory>

namespace fsdp::hal::cpu {

/// A collective in flight: its MPI request and the division to apply after
/// it completes (reduce-scatter and all-reduce with FSDP_REDUCE_AVG).
struct CpuEvent final : fsdp_event_s {
  ~CpuEvent() override;
  bool query() override;
  /// Blocks until the request completes (MPI_Wait), then divides the
  /// result for an average; later calls do nothing.
  void finish();

  MPI_Request request = MPI_REQUEST_NULL;
  bool average = false;
  void *avgData = nullptr;
  int64_t count = 0;
  double divisor = 1; ///< mpi::divideFactors' post-divide
  fsdp_dtype dtype = FSDP_F32;
  bool finished = false;
};

/// The channel of every MPI_COMM_WORLD rank (a duplicate communicator).
std::unique_ptr<fsdp_channel_s> createWorldChannel(fsdp_device_s *device);

/// The progress thread of FSDP_PROGRESS_THREAD (no-op without MPI).
void startProgressThread();
void stopProgressThread();
void setProgressInterval(int64_t minNs, int64_t maxNs);
/// MPI_Test calls the thread has made since the process started.
int64_t progressThreadTests();

} // namespace fsdp::hal::cpu

#endif // FSDP_RUNTIME_CPU_CPUDRIVER_H
