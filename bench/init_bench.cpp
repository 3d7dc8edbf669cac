//===- init_bench.cpp - fsdp-run's parameter init, one rank's shards ------===//
//
//   build/bin/fsdp-init-bench SCHEDULE.json [RANK] [THREADS...] [--host]
//
// Times what fsdp-run does before step 1 without --init-from: the param and
// master shards of rank RANK (default 0; "full" layouts whole) initialised
// on a "cpu" device by fsdp::tooling::initUnitOnDevice, once per THREADS
// (default: 1 and all hardware threads), and checks that every thread count
// wrote the same bytes. With --host it times instead the former path, one
// thread: initShard/initFull to host doubles, once for the param and once
// for the master, each rounded to its dtype. Needs only the rank's shards in
// memory, so a model that does not fit one host can be measured a shard at
// a time. Prints one JSON line per run. Not a test: a benchmark
// (bench/README.md, "Parameter init").
//
//===----------------------------------------------------------------------===//
#include "fsdp/Device.h"
#include "fsdp/InitValues.h"
#include "fsdp/kernels.h"
#include "fsdp/runtime.h"
#include "fsdp/schedule/Program.h"
#include "fsdp/tooling/Data.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace fsdp::schedule;

namespace {

struct Target {
  const UnitDesc *unit;
  bool full;
  int64_t param = -1, master = -1;
};

std::vector<Target> targets(const Program &p) {
  std::vector<Target> out;
  for (const IoDesc &io : p.inputs()) {
    if (io.role != "param" && io.role != "master")
      continue;
    const UnitDesc *u = p.findUnit(io.unit);
    bool full = io.layout == "full";
    Target *t = nullptr;
    for (Target &x : out)
      if (x.unit == u && x.full == full &&
          (io.role == "param" ? x.param : x.master) < 0)
        t = &x;
    if (!t)
      t = &out.emplace_back(Target{u, full});
    (io.role == "param" ? t->param : t->master) = io.buffer;
  }
  return out;
}

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fsdp-init-bench SCHEDULE.json [RANK] "
                         "[THREADS...] [--host]\n");
    return 2;
  }
  bool host = false;
  std::vector<int> threads;
  int64_t rank = 0;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--host") == 0)
      host = true;
    else if (i == 2)
      rank = std::atoll(argv[i]);
    else
      threads.push_back(std::atoi(argv[i]));
  }
  if (threads.empty())
    threads = {1, static_cast<int>(std::thread::hardware_concurrency())};
  Program p = Program::fromFile(argv[1]);
  fsdp::rt::Device dev("cpu");
  fsdp_stream s = fsdp_device_stream(dev.get(), FSDP_STREAM_COMPUTE);
  int64_t shard = rank % p.shardSize();
  std::vector<Target> ts = targets(p);
  int64_t elements = 0, bytes = 0;
  for (const Target &t : ts) {
    int64_t n = t.full ? t.unit->paddedNumel : t.unit->shardNumel;
    elements += n;
    for (int64_t b : {t.param, t.master})
      if (b >= 0)
        bytes += p.buffer(b).bytes;
  }
  std::vector<std::vector<unsigned char>> mem(2 * ts.size()), first;
  for (size_t i = 0; i < ts.size(); ++i)
    for (int k = 0; k < 2; ++k) {
      int64_t b = k ? ts[i].master : ts[i].param;
      if (b >= 0)
        mem[2 * i + k].resize(static_cast<size_t>(p.buffer(b).bytes));
    }
  auto dtype = [&](int64_t b) { return toC(p.buffer(b).dtype); };
  if (host) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < ts.size(); ++i)
      for (int k = 0; k < 2; ++k) {
        int64_t b = k ? ts[i].master : ts[i].param;
        if (b < 0)
          continue;
        std::vector<double> v =
            ts[i].full ? fsdp::tooling::initFull(*ts[i].unit, 0)
                       : fsdp::tooling::initShard(*ts[i].unit, 0, shard);
        for (size_t j = 0; j < v.size(); ++j)
          fsdp::init::storeValue(dtype(b), mem[2 * i + k].data(),
                                 static_cast<int64_t>(j), v[j]);
      }
    std::printf("{\"path\": \"host\", \"threads\": 1, \"elements\": %lld, "
                "\"bytes\": %lld, \"seconds\": %.3f}\n",
                static_cast<long long>(elements), static_cast<long long>(bytes),
                seconds(t0));
    return 0;
  }
  for (int nt : threads) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < ts.size(); ++i) {
      const Target &t = ts[i];
      int64_t a = t.param >= 0 ? t.param : t.master;
      int64_t b = t.param >= 0 ? t.master : -1;
      fsdp::tooling::initUnitOnDevice(
          s, *t.unit, 0, t.full ? -1 : shard,
          mem[2 * i + (t.param >= 0 ? 0 : 1)].data(), dtype(a),
          b >= 0 ? mem[2 * i + 1].data() : nullptr,
          b >= 0 ? dtype(b) : FSDP_F32, nt);
    }
    double sec = seconds(t0);
    bool same = first.empty() || first == mem;
    if (first.empty())
      first = mem;
    std::printf("{\"path\": \"device\", \"threads\": %d, \"elements\": %lld, "
                "\"bytes\": %lld, \"seconds\": %.3f, \"same_bytes\": %s}\n",
                nt, static_cast<long long>(elements),
                static_cast<long long>(bytes), sec, same ? "true" : "false");
    if (!same)
      return 1;
  }
  return 0;
}
