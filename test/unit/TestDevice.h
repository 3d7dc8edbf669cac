//===- TestDevice.h - the device and channel the runtime unit tests use ---===//
//
// One "cpu" device and its world channel for the whole test binary (the
// tests run on one rank without MPI, so every collective is a local copy),
// and the count of its live allocations, for the tests that check that a
// step releases its buffers.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TEST_UNIT_TESTDEVICE_H
#define FSDP_TEST_UNIT_TESTDEVICE_H

#include "fsdp/Device.h"
#include "fsdp/Executor.h"
#include "fsdp/runtime.h"

#include <cstdint>

namespace fsdp::test {

inline fsdp_device cpuDevice() {
  static fsdp::rt::Device dev("cpu");
  return dev.get();
}

inline fsdp_stream cpuStream() {
  return fsdp_device_stream(cpuDevice(), FSDP_STREAM_COMPUTE);
}

inline fsdp_channel worldChannel() {
  static fsdp_channel c = [] {
    fsdp_channel ch = nullptr;
    fsdp_channel_create(cpuDevice(), &ch);
    return ch;
  }();
  return c;
}

/// Device allocations of the test device still live after fn beyond those
/// before it: 0 when a step (or a failing step, fn catching its error)
/// releases every buffer it allocated.
template <typename Fn> int64_t allocationsLeft(Fn &&fn) {
  fsdp_device_stats s0{}, s1{};
  fsdp_device_get_stats(cpuDevice(), &s0);
  fn();
  fsdp_device_get_stats(cpuDevice(), &s1);
  return s1.live_allocations - s0.live_allocations;
}

/// Runs one step of `p` on the test device (per buffer by default: one
/// allocation per buffer) with `inputs`; an Error is caught and returned
/// ("" if none).
inline std::string
stepOnTestDevice(const fsdp::schedule::Program &p,
                 const fsdp::rt::HostValues &inputs,
                 fsdp::rt::AllocMode mode = fsdp::rt::AllocMode::PerBuffer) {
  try {
    fsdp::rt::Executor ex(p, cpuDevice(), mode);
    for (const auto &[id, v] : inputs)
      ex.write(id, v);
    ex.step();
  } catch (const fsdp::Error &e) {
    return e.what();
  }
  return "";
}

} // namespace fsdp::test

#endif // FSDP_TEST_UNIT_TESTDEVICE_H
