//===- Host.cpp - fsdp-calibrate's interpreter benchmarks -----------------===//
//
// dispatch_overhead_s and step_io_bandwidth: what fsdp::rt::Executor::step
// costs beyond its kernels, measured on tiny generated schedules as fsdp-run
// drives them.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Executor.h"
#include "fsdp/calibrate/Benchmarks.h"
#include "fsdp/kernels.h"
#include "fsdp/schedule/Format.h"
#include "fsdp/schedule/Program.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fsdp::calibrate {

namespace {

namespace sc = fsdp::schedule;

/// `name` as the format's list `roles` spells it; a compile-time error when
/// the format has no such role.
template <size_t N>
constexpr const char *formatRole(const char *const (&roles)[N],
                                 std::string_view name) {
  for (const char *r : roles)
    if (name == r)
      return r;
  throw std::logic_error("not a role of the schedule format");
}

/// A schedule (runtime/docs/schedule-format.md) of `count` nn.relu on f32
/// [n] buffers in a chain, each freeing its operand, planned into a 2-slot
/// arena as fsdp-opt plans one: what the interpreter does per instruction
/// with no kernel time to speak of (n small), or what the step's input and
/// output conversion costs (n large, count 1).
nlohmann::json reluChain(int world, int64_t count, int64_t n) {
  constexpr sc::DType kDType = sc::DType::F32;
  constexpr int64_t kAlignment = 64; // fsdp-opt's arena alignment
  constexpr const char *kInputRole = formatRole(sc::kInputRoles, "features");
  constexpr const char *kOutputRole = formatRole(sc::kOutputRoles, "output");
  int64_t bytes = sc::dtypeSize(kDType) * n,
          slot = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  nlohmann::json buffers = nlohmann::json::array(),
                 instructions = nlohmann::json::array();
  for (int64_t i = 0; i <= count; ++i) {
    buffers.push_back({{"id", i},
                       {"dtype", sc::dtypeName(kDType)},
                       {"shape", nlohmann::json::array({n})},
                       {"arena_offset", (i % 2) * slot}});
    if (i < count)
      instructions.push_back({{"op", sc::opName(sc::OpKind::Relu)},
                              {"operands", nlohmann::json::array({i})},
                              {"results", nlohmann::json::array({i + 1})},
                              {"frees", nlohmann::json::array({i})}});
  }
  return {{"format", sc::kFormat},
          {"version", sc::kVersion},
          {"world_size", world},
          {"memory_plan",
           {{"peak_bytes", 2 * bytes},
            {"arena_bytes", 2 * slot},
            {"arena_alignment", kAlignment}}},
          {"units", nlohmann::json::array()},
          {"buffers", buffers},
          {"inputs", nlohmann::json::array(
                         {{{"buffer", 0},
                           {"role", kInputRole},
                           {"global_shape", nlohmann::json::array({n})}}})},
          {"outputs",
           nlohmann::json::array({{{"buffer", count}, {"role", kOutputRole}}})},
          {"instructions", instructions}};
}

/// Seconds per step of `schedule` on every rank at once, as fsdp-run drives
/// an Executor: the input written, the step, the output read.
Stat runSeconds(const Machine &mc, const nlohmann::json &schedule, int64_t n,
                double seconds) {
  try {
    sc::Program prog = sc::Program::fromString(
        schedule.dump(), fsdp_world_size(), "<calibration chain>");
    fsdp::rt::Executor ex(prog, mc.device);
    std::vector<double> in(n, 0.5), out;
    int64_t last = prog.outputs().at(0).buffer;
    return secondsPerCall(
        mc,
        [&] {
          ex.write(0, in);
          ex.step();
          ex.read(last, out);
        },
        seconds);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-calibrate: ") + e.what()).c_str(), 1);
  }
}

} // namespace

Host measureHost(const Machine &mc, double S) {
  fsdp_stream gs = mc.stream;
  Host h;
  std::vector<float> x(h.ioCount, 0.5f), y(h.ioCount), xs(16, 0.5f), ys(16);
  Stat reluSmall = secondsPerCall(
      mc, [&] { check(fsdp_relu(gs, FSDP_F32, xs.data(), ys.data(), 16)); }, S);
  h.relu = secondsPerCall(
      mc,
      [&] { check(fsdp_relu(gs, FSDP_F32, x.data(), y.data(), h.ioCount)); },
      S);
  h.chain = runSeconds(mc, reluChain(mc.world, h.chainLength, 16), 16, S);
  h.single = runSeconds(mc, reluChain(mc.world, 1, 16), 16, S);
  h.io = runSeconds(mc, reluChain(mc.world, 1, h.ioCount), h.ioCount, S);
  h.dispatch = std::max(0.0, (h.chain.mean - h.single.mean) /
                                     static_cast<double>(h.chainLength - 1) -
                                 reluSmall.mean);
  double ioSeconds = h.io.mean - h.single.mean - h.relu.mean;
  h.ioBandwidth = ioSeconds > 0 ? 2.0 * 4 * h.ioCount / ioSeconds : 0;
  return h;
}

} // namespace fsdp::calibrate
