//===- BlasRecord.h - The device's BLAS as a JSON record --------*- C++ -*-===//
//
// fsdp_device_blas (runtime.h) as the "blas" object of fsdp-run's summary
// and of fsdp-calibrate's "measured", one definition for both.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_BLASRECORD_H
#define FSDP_BLASRECORD_H

#include "fsdp/runtime.h"

#include <nlohmann/json.hpp>

namespace fsdp::rt {

/// {"library", "version", "core", "core_at_load", "chosen_by", "cpu_isa",
///  "self_test": {"max_rel_error", "gflops", "generic_gflops"}, "warning",
///  "note"}: strings as fsdp_blas_info has them ("" unknown), a self-test
/// figure that was not measured and an empty warning or note null.
inline nlohmann::ordered_json blasRecord(fsdp_device device) {
  fsdp_blas_info b{};
  if (fsdp_device_blas(device, &b) != FSDP_OK)
    return nullptr;
  auto orNull = [](double v, bool measured) {
    return measured ? nlohmann::ordered_json(v)
                    : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json r;
  r["library"] = b.library;
  r["version"] = b.version;
  r["core"] = b.core;
  r["core_at_load"] = b.core_at_load;
  r["chosen_by"] = b.chosen_by;
  r["cpu_isa"] = b.cpu_isa;
  r["self_test"] = {
      {"max_rel_error",
       orNull(b.self_test_max_rel_error, b.self_test_max_rel_error >= 0)},
      {"gflops", orNull(b.self_test_gflops, b.self_test_gflops > 0)},
      {"generic_gflops", orNull(b.generic_gflops, b.generic_gflops > 0)}};
  r["warning"] = *b.warning ? nlohmann::ordered_json(b.warning)
                            : nlohmann::ordered_json(nullptr);
  r["note"] = *b.note ? nlohmann::ordered_json(b.note)
                      : nlohmann::ordered_json(nullptr);
  return r;
}

} // namespace fsdp::rt

#endif // FSDP_BLASRECORD_H
