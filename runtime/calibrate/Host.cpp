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

#include <algorithm>
#include <string>

namespace fsdp::calibrate {

namespace {

/// A schedule (runtime/docs/schedule-format.md) of `count` nn.relu on f32
/// [n] buffers in a chain, each freeing its operand, planned into a 2-slot
/// arena as fsdp-opt plans one: what the interpreter does per instruction
/// with no kernel time to speak of (n small), or what the step's input and
/// output conversion costs (n large, count 1).
std::string reluChain(int world, int64_t count, int64_t n) {
  int64_t bytes = 4 * n, slot = (bytes + 63) / 64 * 64;
  std::string bufs, insts;
  for (int64_t i = 0; i <= count; ++i) {
    bufs += (i ? ", " : "") + std::string(R"({"id": )") + std::to_string(i) +
            R"(, "dtype": "f32", "shape": [)" + std::to_string(n) +
            R"(], "arena_offset": )" + std::to_string((i % 2) * slot) + "}";
    if (i < count)
      insts +=
          (i ? ", " : "") + std::string(R"({"op": "nn.relu", "operands": [)") +
          std::to_string(i) + R"(], "results": [)" + std::to_string(i + 1) +
          R"(], "frees": [)" + std::to_string(i) + "]}";
  }
  return R"({"format": "fsdp-schedule", "version": 2, "world_size": )" +
         std::to_string(world) + R"(, "memory_plan": {"peak_bytes": )" +
         std::to_string(2 * bytes) + R"(, "arena_bytes": )" +
         std::to_string(2 * slot) + R"(, "arena_alignment": 64}, "units": [],
    "buffers": [)" +
         bufs + R"(],
    "inputs": [{"buffer": 0, "role": "features", "global_shape": [)" +
         std::to_string(n) + R"(]}],
    "outputs": [{"buffer": )" +
         std::to_string(count) + R"(, "role": "output"}], "instructions": [)" +
         insts + "]}";
}

/// Seconds per step of `schedule` on every rank at once, as fsdp-run drives
/// an Executor: the input written, the step, the output read.
Stat runSeconds(const Machine &mc, const std::string &schedule, int64_t n,
                double seconds) {
  try {
    fsdp::schedule::Program prog = fsdp::schedule::Program::fromString(
        schedule, fsdp_world_size(), "<calibration chain>");
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
