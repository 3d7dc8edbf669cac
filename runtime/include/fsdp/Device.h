//===- Device.h - an owned runtime device ---------------------------------===//
//
// fsdp::rt::Device owns an fsdp_device (runtime.h): "cpu", "cuda" (the GPU
// of the rank's index on its node) or "cuda:N".
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DEVICE_H
#define FSDP_DEVICE_H

#include "fsdp/runtime.h"

#include <string>

namespace fsdp::rt {

/// fsdp_device_create / fsdp_device_destroy.
class Device {
public:
  /// Throws fsdp::Error with the driver's message (unknown name, no GPU, ...).
  explicit Device(const std::string &name,
                  fsdp_collectives collectives = FSDP_COLLECTIVES_NATIVE);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  fsdp_device get() const { return dev; }

private:
  fsdp_device dev = nullptr;
};

} // namespace fsdp::rt

#endif // FSDP_DEVICE_H
